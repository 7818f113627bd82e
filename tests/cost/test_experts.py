"""Expert sharding as frameworks run it (issue 12 item 1): expert tensor parallelism (`etp`) in
memory and time, vLLM's rule that EP spans DP × TP, the defaults a hand-written plan gets, and
the search weighing both ways against brute force on a small MoE."""

from __future__ import annotations

import json

import pytest

from planner.cost import comm
from planner.cost.constants import BYTES_BF16, ENGINES
from planner.cost.flops import bytes_routed_experts_read
from planner.cost.generation import decode_step, memory_generation_per_gpu
from planner.cost.memory import memory_training_per_gpu
from planner.plan import Layout, PlanInput, expert_tp
from planner.search import brute, cpsat
from planner.search.layouts import SHAPES
from planner.search.space import build_space
from planner.specs.hardware import load_profile
from planner.specs.model import count_params, load_model
from planner.specs.scenario import load_scenario
from tests.test_cli import assert_bad_input

GIB = 2**30
QWEN_MOE = load_model("qwen3-30b-a3b")
H100 = load_profile("h100-sxm")
TINY_MOE = {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 128}


def lay(**kw) -> Layout:
    return Layout(group="g", **kw)


def test_defaults_follow_the_frameworks():
    assert expert_tp(lay(tp=4), "training") == 4  # Megatron-Core: ETP = TP
    assert expert_tp(lay(tp=4, ep=2, dp=2), "assessment") == 4
    assert expert_tp(lay(tp=4), "generation") == 4  # vLLM without EP: experts split over TP
    assert expert_tp(lay(tp=4, dp=2, ep=8), "generation") == 1  # with EP: experts whole
    assert expert_tp(lay(tp=4, etp=1), "training") == 1


def test_training_memory_with_etp_tp_vs_1_against_hand_counts():
    """dp 4, tp 2, ep 2, ZeRO-1: with etp = tp each GPU holds 1/(ep·tp) of the routed experts,
    with etp = 1 1/ep; the optimizer state (sharded over every expert replica) is the same."""
    routed = count_params(QWEN_MOE).routed_experts
    kw = dict(seq_len=1024, micro_batches=1)
    split = memory_training_per_gpu(QWEN_MOE, lay(dp=4, tp=2, ep=2, zero=1), **kw)
    whole = memory_training_per_gpu(QWEN_MOE, lay(dp=4, tp=2, ep=2, etp=1, zero=1), **kw)
    # bf16 weights and gradients: 2 bytes per routed parameter, /ep·etp
    assert float(whole.weights - split.weights) == pytest.approx(
        BYTES_BF16 * routed * (1 / 2 - 1 / 4))
    assert float(whole.gradients - split.gradients) == pytest.approx(
        BYTES_BF16 * routed * (1 / 2 - 1 / 4))
    # fp32 master + Adam moments (12 B) over all dp·cp·tp = 8 ranks either way
    assert float(whole.optimizer_states) == pytest.approx(float(split.optimizer_states))
    assert float(whole.optimizer_states) > 12 * routed / 8  # plus the dense part's share


def test_generation_splits_experts_over_tp_unless_ep_is_on():
    """A 671B MoE on vLLM TP 32 without EP holds 1/32 of every expert per GPU (it was priced as
    if each GPU held all of them, over 1 TB)."""
    v3 = load_model("deepseek-v3")
    total = count_params(v3).total
    m = memory_generation_per_gpu(v3, lay(tp=32), kv_tokens=65536, decode_batch=64)
    assert float(m.weights) == pytest.approx(BYTES_BF16 * total / 32, rel=0.02)
    assert float(m.total) < H100.usable_memory_bytes
    # EP over dp·tp = 16 GPUs: experts whole, 1/16 of them per GPU
    routed = count_params(QWEN_MOE).routed_experts
    ep = memory_generation_per_gpu(QWEN_MOE, lay(dp=8, tp=2, ep=16), kv_tokens=8192,
                                   decode_batch=8)
    tp_only = memory_generation_per_gpu(QWEN_MOE, lay(dp=8, tp=2), kv_tokens=8192,
                                        decode_batch=8)
    assert float(tp_only.weights - ep.weights) == pytest.approx(
        BYTES_BF16 * routed * (1 / 2 - 1 / 16))


def test_generation_ep_reads_the_experts_all_replicas_touch_and_dispatches_tokens():
    engine = ENGINES["vllm-v1"]
    plain = decode_step(QWEN_MOE, lay(dp=4, tp=2), H100, engine)
    ep = decode_step(QWEN_MOE, lay(dp=4, tp=2, ep=8), H100, engine)
    b = 16
    routed = bytes_routed_experts_read
    assert ep.weights(b) == pytest.approx(
        plain.weights(b) - routed(QWEN_MOE, b) / plain.weight_rate
        + routed(QWEN_MOE, 4 * b) / ep.expert_rate)
    assert ep.expert_rate == pytest.approx(4 * plain.weight_rate)  # 8 GPUs' HBM vs 2
    # a dispatch and a combine per MoE layer per step on the 8 GPUs' NVLink, each posted at
    # once: one launch and one hop's latency, not seven
    calls = 2 * QWEN_MOE.moe.moe_layers.count()
    assert ep.comm - plain.comm == pytest.approx(calls * comm.time_alltoall_decode(0.0, 8, H100))
    assert comm.time_alltoall_decode(0.0, 8, H100) == pytest.approx(
        (H100.collective_launch_us + H100.intra_node_latency_us) * 1e-6)


def test_training_etp_adds_the_expert_collectives():
    from planner.cost.time import time_train
    from planner.theory.shape import Head

    kw = dict(n_seqs=64, seq_len=2048)
    split = time_train(QWEN_MOE, Head.POLICY, lay(dp=4, tp=2, ep=4, zero=1), H100, **kw)
    whole = time_train(QWEN_MOE, Head.POLICY, lay(dp=4, tp=2, ep=4, etp=1, zero=1), H100, **kw)
    assert split.ep_comm > whole.ep_comm > 0


PLAN = {"groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 4, "tp": 2},
                              "training": {"group": "g0", "dp": 4, "tp": 2, "ep": 2}}},
        "inter_model": {"placement": "colocated"}}


@pytest.mark.parametrize(("generation", "field", "fragment"), [
    ({"dp": 4, "tp": 2, "ep": 2}, "layouts.actor.generation.ep", "ep must be 1 or dp·tp = 8"),
    ({"dp": 4, "tp": 2, "etp": 1}, "layouts.actor.generation.etp", "etp must be 2"),
    ({"dp": 4, "tp": 2, "ep": 8, "etp": 2}, "ep·etp (8·2) must divide dp·cp·tp (8)", ""),
])
def test_vllm_expert_rules_refuse_a_hand_written_plan(cli, write, generation, field, fragment):
    plan = json.loads(json.dumps(PLAN))
    plan["layouts"]["actor"]["generation"] = {"group": "g0", **generation}
    scenario = write("s.yaml", {"algorithm": "grpo", "models": {"actor": "qwen3-30b-a3b",
                                                                "reference": "none",
                                                                "reward": "verifier"},
                                "workload": {"prompts_per_step": 16, "samples_per_prompt": 4,
                                             "prompt_len": 256, "response_len": 512,
                                             "max_response_len": 1024},
                                "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8}})
    result = cli("evaluate", str(scenario), str(write("p.json", plan)))
    assert_bad_input(result, field, fragment)


def test_a_training_etp_that_does_not_divide_is_refused_with_the_default_named():
    plan = json.loads(json.dumps(PLAN))
    plan["layouts"]["actor"]["training"] = {"group": "g0", "dp": 4, "tp": 2, "ep": 8}
    with pytest.raises(ValueError, match=r"etp defaults to tp = 2 in training; set etp: 1"):
        PlanInput.model_validate(plan)
    plan["layouts"]["actor"]["training"]["etp"] = 1
    PlanInput.model_validate(plan)  # whole experts over ep 8 of the 8 ranks


def test_the_search_weighs_both_ways_and_equals_brute_force(tmp_path):
    folder = tmp_path / "tiny-moe"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_MOE))
    sc = load_scenario(None, {"algorithm": "grpo", "models.actor": str(folder),
                              "models.reference": "none", "workload.prompts_per_step": 8,
                              "workload.samples_per_prompt": 2, "workload.prompt_len": 128,
                              "workload.response_len": 256, "workload.max_response_len": 512,
                              "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
                              "cluster.gpus_per_node": 4})
    space = build_space(sc, slots=2)
    train = {(s.ep, s.etp, s.tp) for s in SHAPES["training"](space, space.pools[0], "actor", 4)}
    assert {(4, 1, 2), (2, 2, 2), (1, 2, 2), (1, 1, 2)} <= train  # both ways, ep·etp | 4
    assert all(4 % (ep * etp) == 0 for ep, etp, _ in train)
    gen = {(s.ep, s.etp, s.dp * s.tp, s.tp)
           for s in SHAPES["generation"](space, space.pools[0], "actor", 4)}
    assert {(1, 2, 4, 2), (4, 1, 4, 2)} <= gen
    assert all((ep, etp) in ((1, tp), (ranks, 1)) for ep, etp, ranks, tp in gen)  # vLLM's rule
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 0 and result.status == "OPTIMAL" and result.objective == best


@pytest.mark.parametrize(("actor", "gen", "train"), [
    # DeepSeek-V3 671B: vLLM TP 32 without EP; Megatron TP 8 × PP 16 × EP 8 (etp 1), offloaded;
    # its 61 layers uneven over 16 stages: 3, 4 × 14, 2
    ("deepseek-v3", {"dp": 4, "tp": 32}, {"dp": 1, "tp": 8, "pp": 16, "ep": 8, "etp": 1,
                                          "first_stage_layers": 3, "last_stage_layers": 2}),
    # Qwen3-235B-A22B: vLLM TP 16; Megatron TP 8 × PP 8 × EP 8; 94 layers: 11, 12 × 6, 11
    ("qwen3-235b-a22b", {"dp": 8, "tp": 16}, {"dp": 2, "tp": 8, "pp": 8, "ep": 8, "etp": 1,
                                              "first_stage_layers": 11,
                                              "last_stage_layers": 11}),
])
def test_large_moe_rollouts_on_tp_fit_80gb_gpus_beside_offloaded_training(actor, gen, train):
    from planner.cost.iteration import evaluate

    sc = load_scenario(None, {"algorithm": "grpo", "models.actor": actor,
                              "models.reference": "none", "workload.prompts_per_step": 128,
                              "workload.samples_per_prompt": 8, "workload.prompt_len": 512,
                              "workload.response_len": 2048,
                              "workload.max_response_len": 4096,
                              "workload.mini_batches": 4, "runtime.rollout_weights": "bf16",
                              "cluster.gpu": "h100-sxm", "cluster.nodes": 16})
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 128}],
        "layouts": {"actor": {"generation": {"group": "g0", **gen},
                              "training": {"group": "g0", **train, "zero": 1,
                                           "checkpointing": "full", "offload": "both"}}},
        "inter_model": {"placement": "colocated", "offload_during_generation": True}})
    ev = evaluate(sc, plan)
    gen_task = next(t for t in ev.tasks if t.stage == "generation")
    assert float(gen_task.memory.total) <= H100.memory_bytes
    assert gen_task.layout.kv_cache_tokens >= 4096 + 512  # room for the longest sequence

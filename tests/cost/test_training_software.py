"""The training software a scenario's `runtime:` names (planner/cost/software.py): each
mechanism against a hand count, the names a scenario accepts against the ones the cost model
prices, and the options through `evaluate` and the CLI (exit codes)."""

from __future__ import annotations

import json
import typing

import pytest

from planner.cost import activations as A
from planner.cost import memory as M
from planner.cost import software as S
from planner.cost.constants import COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT
from planner.cost.iteration import evaluate, task_memory, task_time
from planner.cost.memory import ROLE_HEADS
from planner.plan import Layout, PlanInput
from planner.specs.runtime import RuntimeInput
from planner.specs.scenario import load_scenario
from tests.cost.test_memory_split import TINY
from tests.test_cli import assert_bad_input

SFT = {"algorithm": "sft", "models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 32,
       "workload.prompt_len": 256, "workload.response_len": 768, "cluster.gpu": "h100-sxm",
       "cluster.nodes": 1, "cluster.gpus_per_node": 8}
PLAN = {"groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"training": {"group": "g0", "dp": 8, "zero": 1,
                                           "recompute": "selective"}}},
        "inter_model": {"placement": "colocated"}}


def sft(fields: dict | None = None, **runtime: str):
    return load_scenario(None, {**SFT, **(fields or {}),
                                **{f"runtime.{k}": v for k, v in runtime.items()}})


def test_scenario_names_are_the_ones_the_cost_model_prices():
    def names(field: str) -> set[str]:
        return set(typing.get_args(RuntimeInput.model_fields[field].annotation))

    assert names("selective_recompute") == set(A.SELECTIVE_POLICIES)
    assert names("training_loss") == set(S.TRAINING_LOSSES)
    assert names("fp8_training") == set(S.FP8_TRAINING)
    assert names("training_states") == set(S.TRAINING_STATES)
    assert names("attention_kernel") == set(S.ATTENTION_KERNELS)
    assert names("ep_dispatch") == set(S.EP_DISPATCH)
    with pytest.raises(ValueError, match="runtime.training_loss"):
        S.training_software(training_loss="fused")


def test_compiled_cross_entropy_keeps_bf16_logits_and_their_gradient():
    # 2 B saved bf16 logits + 2 B bf16 gradient, against 4 + 4 + 4 B eager (fp32 log-softmax
    # output, its incoming and outgoing gradients)
    assert COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT == 2 + 2
    loss = {k: S.training_software(training_loss=k).kernels.loss_bytes_per_logit
            for k in S.TRAINING_LOSSES}
    assert loss == {"fp32_logits": 4, "eager_upcast": 12, "compiled_upcast": 4}
    # in the training breakdown: tokens s·b/cp on the last stage × V (1000) × 4 B
    opts = S.training_software(training_loss="compiled_upcast").kernels
    m = M.memory_training_per_gpu(TINY, Layout(group="g", dp=2, cp=2, micro_batch=3),
                                  seq_len=256, options=opts)
    assert m.logits == 4 * (256 / 2 * 3) * 1000


def test_transformer_engine_fp8_saves_linear_inputs_in_fp8_by_hand():
    # TINY (H 256, q 256, k = v = 64, F 512 gated, 2 norms), selective core_attn, per token:
    # bf16: norms 2·2·256 + attention input 2·256 + q/k/v 2·384 + attention output 2·256
    #       + FFN input 2·256 + FFN inner 3·2·512 = 6400 B
    # TE FP8: the q/k/v and FFN inputs 1·256 each, the FFN's last projection's input 1·512
    #       (gate and up outputs stay bf16), the attention output in bf16 (FlashAttention's)
    #       + its FP8 copy (the output projection's input): 1024 + 256 + 768 + 768 + 256
    #       + (2·2 + 1)·512 = 5632 B
    te = S.training_software(fp8_training="transformer_engine").kernels
    assert te.fp8_saved_inputs
    bf16 = A.bytes_activation_per_layer(TINY, 10, 1, checkpointing="selective")
    fp8 = A.bytes_activation_per_layer(TINY, 10, 1, checkpointing="selective", options=te)
    assert bf16.total == 10 * 6400
    assert fp8.total == 10 * 5632
    # torchao saves the high-precision inputs: its FP8 changes time, not activations
    torchao = S.training_software(fp8_training="torchao")
    assert not torchao.kernels.fp8_saved_inputs and torchao.runtime.fp8_matmuls
    assert A.bytes_activation_per_layer(TINY, 10, 1, checkpointing="selective",
                                        options=torchao.kernels).total == 10 * 6400


def test_training_states_bytes_per_param():
    per_param = {k: (p.weight_bytes, p.grad_bytes, p.optimizer_bytes)
                 for k, p in S.TRAINING_STATES.items()}
    assert per_param == {"bf16_grads": (2, 2, 12), "fp32_grads": (2, 4, 12),
                         "fp32_params": (4, 4, 8)}


def test_runtime_options_reach_evaluate_memory_and_time():
    plan = PlanInput.model_validate(PLAN)
    lay = plan.layouts["actor"]["training"]
    head = ROLE_HEADS["actor"]
    base = sft()
    mem = task_memory(base, "actor", "training", lay, head)
    # fp32 main grads: the unsharded gradient buffer (ZeRO-1) doubles
    fp32 = task_memory(sft(training_states="fp32_grads"), "actor", "training", lay, head)
    assert fp32.gradients == pytest.approx(2 * mem.gradients)
    # the eager upcast loss: 12 B per logit instead of 4
    eager = task_memory(sft(training_loss="eager_upcast"), "actor", "training", lay, head)
    assert eager.logits == pytest.approx(3 * mem.logits)
    # per-op SAC keeps less than core_attn on a dense model
    sac = task_memory(sft(selective_recompute="every_other_mm"), "actor", "training", lay, head)
    assert sac.activations < mem.activations
    # FP8 matmuls shorten a compute-bound training stage (7B, 4k tokens per sequence)
    big = {"models.actor": "qwen2.5-7b", "workload.prompt_len": 1024,
           "workload.response_len": 3072}
    t = {f: task_time(sft(big, fp8_training=f), "actor", "training", lay, head)[0]
         for f in ("none", "transformer_engine")}
    assert t["transformer_engine"] < t["none"]
    ev = evaluate(sft(fp8_training="transformer_engine"), plan)
    assert ev.bounds["compute_s"] < ev.iteration_time_s
    assert "FP8 linear layers" in sft(fp8_training="torchao").precisions["training"]


def test_training_kernel_options_reach_the_time_models_runtime():
    """The throughput bench's per-row mechanisms, as a scenario names them: FlashAttention-2 is
    slower than the matmuls on Hopper only, rowwise FP8 is its own recipe, the MoE dispatch
    and overlap pass through."""
    from planner.cost.constants import FLASH_ATTENTION_2_RATE_ON_HOPPER

    rates = {gpu: S.software(sft({"cluster.gpu": gpu}, attention_kernel="fa2")).runtime
             .attention_rate for gpu in ("h100-sxm", "h200-sxm", "h20", "b200", "a100-sxm-80gb")}
    assert rates == {"h100-sxm": FLASH_ATTENTION_2_RATE_ON_HOPPER,
                     "h200-sxm": FLASH_ATTENTION_2_RATE_ON_HOPPER,
                     "h20": FLASH_ATTENTION_2_RATE_ON_HOPPER, "b200": 1.0, "a100-sxm-80gb": 1.0}
    assert S.software(sft()).runtime.attention_rate == 1.0
    rt = S.software(sft(fp8_training="torchao_rowwise", ep_dispatch="hierarchical",
                        ep_comm_overlap=True)).runtime
    assert (rt.fp8_matmuls, rt.fp8_recipe, rt.ep_dispatch, rt.ep_comm_overlap) == (
        True, "rowwise", "hierarchical", True)
    assert S.software(sft(fp8_training="torchao")).runtime.fp8_recipe == "tensorwise"
    # FA2's slower attention lengthens a long-sequence training stage on an H100
    plan = PlanInput.model_validate(PLAN)
    lay, head = plan.layouts["actor"]["training"], ROLE_HEADS["actor"]
    long = {"workload.prompt_len": 1024, "workload.response_len": 15360}
    t = {k: task_time(sft(long, attention_kernel=k), "actor", "training", lay, head)[0]
         for k in ("fa3", "fa2")}
    assert t["fa2"] > t["fa3"]


def test_runtime_options_through_the_cli(cli, write):
    scenario = {"algorithm": "sft", "models": {"actor": "qwen2.5-0.5b"},
                "workload": {"prompts_per_step": 32, "prompt_len": 256, "response_len": 768},
                "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8}}
    plan = str(write("plan.json", PLAN))
    peaks = {}
    for loss in ("fp32_logits", "eager_upcast"):
        path = write(f"{loss}.yaml", {**scenario, "runtime": {"training_loss": loss,
                                                               "fp8_training": "torchao"}})
        result = cli("evaluate", str(path), plan, "--json")
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        peaks[loss] = out["memory"]["groups"]["g0"]["peak_gib_per_gpu"]
        assert out["scenario"]["runtime"]["training_loss"] == loss
    assert peaks["eager_upcast"] > peaks["fp32_logits"]
    for field, value in (("training_loss", "fused"), ("fp8_training", "yes"),
                         ("selective_recompute", "op"), ("training_states", "fp16"),
                         ("attention_kernel", "fa1"), ("ep_dispatch", "deepep"),
                         ("ep_comm_overlap", "sometimes")):
        bad = write(f"bad-{field}.yaml", {**scenario, "runtime": {field: value}})
        assert_bad_input(cli("evaluate", str(bad), plan), f"runtime.{field}")


def test_the_search_prices_the_options_as_evaluate_does():
    from planner.search import cpsat
    from planner.search.solve import Option, to_plan_input
    from planner.search.space import build_space

    sc = sft(training_loss="eager_upcast", selective_recompute="every_other_mm",
             training_states="fp32_params")
    space = build_space(sc, slots=1)
    result = cpsat.solve(space, 30)
    ev = evaluate(sc, to_plan_input(space, result.choice, Option(0, False, False)))
    assert ev.iteration_time_s * 1000 == pytest.approx(result.objective,
                                                       abs=len(space.tasks) + 2)

"""verl: a runnable script whose every override exists in verl's schema, and refusals."""

from __future__ import annotations

import pytest

from planner.export import ExportError, export
from planner.export.keys import VERL_VERSION, verl_key_ok
from tests.export import frameworks as fw
from tests.export.plans import (
    FIVE_RANKS,
    colocated,
    dpo_plan,
    edited,
    overrides,
    partial_scenario,
    ppo_disaggregated,
    ppo_rollout_apart,
    ppo_scenario,
    priced,
    scenario,
)


def test_grpo_colocated_fsdp():
    sc = scenario()
    result = export(priced(sc, colocated(train={"dp": 8, "zero": 3, "micro_batch": 2,
                                                "offload": "optimizer"})), sc, "verl")
    text = result.text
    assert text.startswith("#!/usr/bin/env bash\nset -euo pipefail\n")
    assert f"verl {VERL_VERSION}" in text and "python3 -m verl.trainer.main_ppo \\" in text
    assert "--config-name" not in text
    o = overrides(text)
    assert all(verl_key_ok("verl-fsdp", k) for k in o)
    assert o["algorithm.adv_estimator"] == "grpo"
    assert o["actor_rollout_ref.actor.use_kl_loss"] == "True"  # the reference is needed
    assert o["data.train_batch_size"] == "64" and o["actor_rollout_ref.rollout.n"] == "4"
    assert o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "32"  # 2 mini-batches
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "2"
    assert o["actor_rollout_ref.actor.fsdp_config.reshard_after_forward"] == "True"  # ZeRO-3
    assert o["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] == "True"
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "2"
    assert o["actor_rollout_ref.model.path"] == "Qwen/Qwen2.5-0.5B"
    assert o["data.max_response_length"] == "1024"
    assert 0 < float(o["actor_rollout_ref.rollout.gpu_memory_utilization"]) < 1
    assert int(o["actor_rollout_ref.rollout.max_num_seqs"]) >= 1
    assert o["trainer.nnodes"] == "1" and o["trainer.n_gpus_per_node"] == "8"
    assert "gpu_memory_utilization" in text.split("python3")[0]  # the why, in a comment


def test_ppo_with_tensor_parallel_uses_megatron_and_a_reward_pool():
    sc = ppo_scenario()
    result = export(priced(sc, ppo_disaggregated()), sc, "verl")
    assert "--config-name=ppo_megatron_trainer.yaml" in result.text
    o = overrides(result.text)
    assert all(verl_key_ok("verl-megatron", k) for k in o)
    assert o["algorithm.adv_estimator"] == "gae"
    assert o["actor_rollout_ref.actor.megatron.tensor_model_parallel_size"] == "2"
    assert o["actor_rollout_ref.actor.megatron.sequence_parallel"] == "True"
    assert o["actor_rollout_ref.actor.megatron.override_transformer_config."
             "recompute_granularity"] == "full"
    assert o["critic.model.path"] == "Qwen/Qwen2.5-0.5B"
    assert o["reward.reward_model.enable_resource_pool"] == "True"  # the RM has its own group
    assert o["reward.reward_model.n_gpus_per_node"] == "8"
    assert o["reward.reward_model.nnodes"] == "1"
    # the plan keeps the reward model resident: its engine does not sleep
    assert o["reward.reward_model.rollout.free_cache_engine"] == "False"
    # the separate rollout group cannot be expressed in main_ppo: said, not dropped
    assert any("generation runs on verl's global pool" in n for n in result.notes)
    assert "# NOTE: generation runs on verl's global pool" in result.text


def test_uneven_pipeline_split_is_a_plus_override():
    sc = scenario(**FIVE_RANKS)  # qwen2.5-0.5b: 24 layers over 5 stages
    o = overrides(export(priced(sc, colocated(gpus=5, gen={"dp": 5}, ref={"dp": 5},
                                              train={"dp": 1, "pp": 5, "micro_batch": 2,
                                                     "last_stage_layers": 4})),
                         sc, "verl").text)
    key = ("+actor_rollout_ref.actor.megatron.override_transformer_config."
           "num_layers_in_last_pipeline_stage")
    assert o[key] == "4" and verl_key_ok("verl-megatron", key)
    assert not any("actor.megatron.override_transformer_config.num_layers_in_first" in k
                   for k in o)  # the first stage is a middle one


REF_CFG = "actor_rollout_ref.ref.megatron.override_transformer_config"


def test_the_reference_inherits_the_actors_split_or_gets_its_own():
    """verl's reference inherits the actor's whole override_transformer_config: nothing is
    written for a reference on the actor's stages; one on other stages gets its four keys
    forced (`++`), an even one nulls, since the inherited counts would not fit its pp."""
    sc = scenario()
    train = {"dp": 2, "pp": 4, "first_stage_layers": 4, "last_stage_layers": 4,
             "micro_batch": 1}
    same = export(priced(sc, colocated(train=train, ref={**train, "micro_batch": 2})), sc,
                  "verl")
    assert not any(k.lstrip("+").startswith(REF_CFG) for k in overrides(same.text))
    cfg = fw.verl_compose(same.text)
    assert cfg.actor_rollout_ref.ref.megatron.override_transformer_config[
        "num_layers_in_first_pipeline_stage"] == 4  # inherited
    apart = export(priced(sc, colocated(train=train, ref={"dp": 8, "micro_batch": 2})), sc,
                   "verl")
    o = overrides(apart.text)
    assert o[f"++{REF_CFG}.num_layers_in_first_pipeline_stage"] == "null"
    assert all(verl_key_ok("verl-megatron", k) for k in o)
    ref = fw.verl_compose(apart.text).actor_rollout_ref.ref.megatron
    assert ref.pipeline_model_parallel_size == 1
    assert ref.override_transformer_config["num_layers_in_first_pipeline_stage"] is None
    assert any("no longer inherits" in n for n in apart.notes)


def test_interleaved_actor_leaves_the_reference_uninterleaved():
    """The reference would inherit the actor's virtual pipeline; rlplan prices its forward
    without chunks, so the export says null."""
    sc = scenario()
    plan = priced(sc, colocated(train={"dp": 2, "tp": 2, "pp": 2, "vp": 2, "sp": True,
                                       "zero": 1, "micro_batch": 1}))
    cfg = fw.verl_compose(export(plan, sc, "verl").text)
    assert cfg.actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size == 2
    assert cfg.actor_rollout_ref.ref.megatron.virtual_pipeline_model_parallel_size is None


def test_dpo_is_refused():
    sc = scenario("dpo")
    with pytest.raises(ExportError, match="no dpo trainer"):
        export(priced(sc, dpo_plan()), sc, "verl")


def test_pipeline_parallel_rollout_is_refused_with_what_to_do():
    sc = scenario()
    plan = priced(sc, colocated(gen={"dp": 4, "pp": 2}))
    with pytest.raises(ExportError, match="pipeline_model_parallel_size 2: verl raises "
                       "NotImplementedError") as err:
        export(plan, sc, "verl")
    message = str(err.value)
    assert "\n" not in message
    assert "does not fit one scale-up domain (8 × h100-sxm, 80 GiB each)" in message
    assert "more GPUs per node or a larger-memory GPU" in message
    assert "--pipeline-parallel-size 2" in message


def test_generation_tp_across_nodes_is_allowed_with_a_note():
    sc = scenario(**{"cluster.nodes": 8, "cluster.gpus_per_node": 1})
    result = export(priced(sc, colocated(gen={"dp": 4, "tp": 2})), sc, "verl")
    assert overrides(result.text)["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "2"
    assert any(n.startswith("generation tp 2: each engine's 2 GPUs span 2 nodes of 1")
               for n in result.notes)
    one_node = export(priced(scenario(), colocated()), scenario(), "verl")
    assert not any("span" in n for n in one_node.notes)


def test_partial_rollout_is_a_note_pointing_at_the_fully_async_recipe():
    sc = partial_scenario()
    result = export(priced(sc, colocated(partial_rollout=True)), sc, "verl")
    note = next(n for n in result.notes if n.startswith("partial_rollout"))
    assert "continues unfinished responses only in its separate_async trainer" in note
    assert f"# NOTE: {note}" in result.text
    assert not any("async_training" in k for k in overrides(result.text))
    plain = export(priced(sc, colocated()), sc, "verl")
    assert not any(n.startswith("partial_rollout") for n in plain.notes)


@pytest.mark.parametrize(("engine", "name", "eager", "note"), [
    ("vllm-v1", "vllm", False, None),
    ("sglang", "sglang", False, None),
    ("eager", "vllm", True, "runtime.engine eager → actor_rollout_ref.rollout.enforce_eager"),
    ("vllm-v0", "vllm", False, "runtime.engine vllm-v0: the plan priced a V0-era engine"),
])
def test_engine(engine, name, eager, note):
    sc = scenario(**{"runtime.engine": engine})
    result = export(priced(sc, colocated()), sc, "verl")
    o = overrides(result.text)
    assert o["actor_rollout_ref.rollout.name"] == name
    assert ("actor_rollout_ref.rollout.enforce_eager" in o) is eager
    if eager:
        assert o["actor_rollout_ref.rollout.enforce_eager"] == "True"
    engine_notes = [n for n in result.notes if n.startswith("runtime.engine")]
    assert [n.startswith(note) for n in engine_notes] == ([] if note is None else [True])
    label = "SGLang" if engine == "sglang" else "vLLM"
    assert f"# gpu_memory_utilization {o['actor_rollout_ref.rollout.gpu_memory_utilization']}: " \
           f"{label} weights" in result.text


@pytest.mark.parametrize("engine", ["vllm-v1", "sglang"])
def test_fp8_rollouts_set_the_engines_quantization_and_kv_cache_dtype(engine):
    sc = scenario(**{"runtime.engine": engine, "runtime.rollout_weights": "fp8",
                     "runtime.kv_cache_dtype": "fp8"})
    result = export(priced(sc, colocated()), sc, "verl")
    o = overrides(result.text)
    assert all(verl_key_ok("verl-fsdp", k) for k in o)
    assert o["actor_rollout_ref.rollout.quantization"] == "fp8"
    name = "sglang" if engine == "sglang" else "vllm"
    assert o[f"+actor_rollout_ref.rollout.engine_kwargs.{name}.kv_cache_dtype"] == (
        "fp8_e4m3" if engine == "sglang" else "fp8")
    assert any("FP8 weights" in n for n in result.notes)
    plain = overrides(export(priced(scenario(), colocated()), scenario(), "verl").text)
    assert not any("quantization" in k or "kv_cache_dtype" in k for k in plain)


def test_memory_fraction_covers_the_planned_kv_cache_and_quotes_its_tokens():
    sc = scenario()
    fractions = []
    for kv in (50_000, 400_000):
        plan = priced(sc, colocated(gen={"dp": 4, "tp": 2, "kv_cache_tokens": kv}))
        result = export(plan, sc, "verl")
        fraction = float(overrides(result.text)["actor_rollout_ref.rollout.gpu_memory_utilization"])
        gen = next(t for t in plan["breakdown"]["tasks"] if t["stage"] == "generation")
        mem = gen["memory_gib"]
        assert fraction * 80 >= mem["memory/persistent/weights"] + mem["memory/transient/kv_cache"]
        assert f"{kv:,} tokens per replica: vLLM logs it as 'GPU KV cache size'" in result.text
        fractions.append(fraction)
    assert fractions[0] < fractions[1]


def test_max_num_seqs_is_the_layouts_else_the_priced_cap():
    sc = scenario()
    key = "actor_rollout_ref.rollout.max_num_seqs"
    assert overrides(export(priced(sc, colocated(gen={"dp": 4, "tp": 2, "max_num_seqs": 16})),
                            sc, "verl").text)[key] == "16"
    plan = priced(sc, colocated())
    cap = plan["breakdown"]["generation_batch_per_replica"]
    assert cap == plan["breakdown"]["rollout"]["max_num_seqs"] > 16
    assert overrides(export(plan, sc, "verl").text)[key] == str(cap)
    del plan["breakdown"]["generation_batch_per_replica"], plan["breakdown"]["rollout"]
    plan["layouts"]["actor"]["generation"]["max_num_seqs"] = None
    with pytest.raises(ExportError, match="layouts.actor.generation.max_num_seqs is missing"):
        export(plan, sc, "verl")


def test_micro_batches_must_tile_the_mini_batch():
    sc = scenario()  # 128 sequences per optimizer step over 8 ranks: 16 each, not a multiple of 3
    plan = edited(priced(sc, colocated(train={"dp": 8, "zero": 3, "micro_batch": 2})),
                  "actor", "training", micro_batch=3)  # hand-edited: evaluate refuses 3
    with pytest.raises(ExportError, match="ppo_micro_batch_size_per_gpu 3"):
        export(plan, sc, "verl")


def test_one_step_off_with_a_rollout_group_gets_its_own_pool():
    # issue 14: the one-step-off plan ran synchronously on the training GPUs only
    sc = ppo_scenario(nodes=3)
    result = export(priced(sc, ppo_rollout_apart(staleness=1, overlap_weight_sync=True)), sc,
                    "verl")
    o = overrides(result.text)
    assert o["trainer.v1.trainer_mode"] == "separate_async"
    assert o["actor_rollout_ref.hybrid_engine"] == "False"
    assert (o["trainer.nnodes"], o["trainer.n_gpus_per_node"]) == ("1", "8")
    assert (o["actor_rollout_ref.rollout.nnodes"],
            o["actor_rollout_ref.rollout.n_gpus_per_node"]) == ("1", "8")
    assert o["reward.reward_model.n_gpus_per_node"] == "8"  # 8 + 8 + 8: the plan's 24 GPUs
    # separate_async asserts train_batch_size == parameter_sync_step × ppo_mini_batch_size
    assert int(o["data.train_batch_size"]) == int(
        o["trainer.v1.separate_async.parameter_sync_step"]) * int(
        o["actor_rollout_ref.actor.ppo_mini_batch_size"])
    assert o["trainer.v1.sampler.max_off_policy_threshold"] == "1"
    assert "# NOTE: overlap_weight_sync" in result.text


def test_pools_that_would_not_run_the_plan_are_refused():
    sc = ppo_scenario()  # rollout and reward model both on g1: two verl pools on 8 GPUs
    plan = priced(sc, {**ppo_disaggregated(), "inter_model": {"placement": "disaggregated",
                                                              "staleness": 1}})
    with pytest.raises(ExportError, match="verl would ask Ray for 24 GPUs .* the plan has 16"):
        export(plan, sc, "verl")
    sc = scenario(**{"cluster.nodes": 2})  # synchronous, rollout on its own group: left idle
    plan = priced(sc, {"groups": [{"name": "g0", "gpus": 8}, {"name": "g1", "gpus": 8}],
                       "layouts": {"actor": {"generation": {"group": "g1", "dp": 4, "tp": 2},
                                             "training": {"group": "g0", "dp": 8, "zero": 3,
                                                          "micro_batch": 2}},
                                   "reference": {"assessment": {"group": "g0", "dp": 8,
                                                                "micro_batch": 4}}},
                       "inter_model": {"placement": "disaggregated"}})
    with pytest.raises(ExportError, match="verl would run the plan on 8 of its 16 GPUs .* "
                       "group.s. g1 would sit idle"):
        export(plan, sc, "verl")


def test_the_reward_engine_sleeps_as_planned_and_the_fsdp_reference_streams():
    sc = scenario()
    plan = colocated(train={"dp": 8, "zero": 3, "micro_batch": 2})
    result = export(priced(sc, plan), sc, "verl")
    # the reference as verl 0.9.1 runs it: parameters in CPU memory, streamed in (said)
    assert result.runs["layouts"]["reference"]["assessment"]["offload"] == "params"
    assert any(n.startswith("layouts.reference.assessment.offload none: verl 0.9.1's FSDP "
                            "backend keeps a forward-only model's parameters in CPU memory")
               for n in result.notes)
    ppo = ppo_scenario()
    disaggregated = ppo_disaggregated()
    disaggregated["layouts"]["reward"]["assessment"]["offload"] = "sleep"
    result = export(priced(ppo, disaggregated), ppo, "verl")
    assert overrides(result.text)["reward.reward_model.rollout.free_cache_engine"] == "True"
    assert result.runs["layouts"]["reward"]["assessment"]["offload"] == "sleep"
    assert not any(".offload" in n for n in result.notes)  # as planned: nothing to say

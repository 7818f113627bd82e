"""verl: a runnable script whose every override exists in verl's schema, and refusals."""

from __future__ import annotations

import pytest

from planner.export import ExportError, export
from planner.export.keys import VERL_COMMIT, verl_key_ok
from tests.export.plans import (
    colocated,
    dpo_plan,
    overrides,
    ppo_disaggregated,
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
    assert VERL_COMMIT in text and "python3 -m verl.trainer.main_ppo \\" in text
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
    assert o["reward_model.enable_resource_pool"] == "True"  # the RM has its own group
    assert o["reward_model.n_gpus_per_node"] == "8" and o["reward_model.nnodes"] == "1"
    # the separate rollout group cannot be expressed in main_ppo: said, not dropped
    assert any("generation runs on verl's global pool" in n for n in result.notes)
    assert "# NOTE: generation runs on verl's global pool" in result.text


def test_uneven_pipeline_split_is_a_plus_override():
    sc = scenario()  # qwen2.5-0.5b: 24 layers over 5 stages
    o = overrides(export(priced(sc, colocated(gpus=5, gen={"dp": 5}, ref={"dp": 5},
                                              train={"dp": 1, "pp": 5, "micro_batch": 2})),
                         sc, "verl").text)
    key = ("+actor_rollout_ref.actor.megatron.override_transformer_config."
           "num_layers_in_last_pipeline_stage")
    assert o[key] == "4" and verl_key_ok("verl-megatron", key)


def test_dpo_is_refused():
    sc = scenario("dpo")
    with pytest.raises(ExportError, match="no dpo trainer"):
        export(priced(sc, dpo_plan()), sc, "verl")


def test_pipeline_parallel_rollout_is_refused():
    sc = scenario()
    plan = priced(sc, colocated(gen={"dp": 4, "pp": 2}))
    with pytest.raises(ExportError, match="pipeline_model_parallel_size"):
        export(plan, sc, "verl")


def test_micro_batches_must_tile_the_mini_batch():
    sc = scenario()  # 128 sequences per optimizer step over 8 ranks: 16 each, not a multiple of 3
    plan = priced(sc, colocated(train={"dp": 8, "zero": 3, "micro_batch": 3}))
    with pytest.raises(ExportError, match="ppo_micro_batch_size_per_gpu 3"):
        export(plan, sc, "verl")


def test_overlapped_weight_sync_is_said_not_dropped():
    sc = ppo_scenario()
    plan = {**ppo_disaggregated(), "inter_model": {"placement": "disaggregated", "staleness": 1,
                                                   "overlap_weight_sync": True}}
    result = export(priced(sc, plan), sc, "verl")
    assert "# NOTE: overlap_weight_sync" in result.text
    assert any(n.startswith("staleness 1") for n in result.notes)

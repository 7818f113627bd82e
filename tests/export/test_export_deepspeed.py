"""DeepSpeed: one ds_config per trainable role, within exports.md's key set, batch-consistent."""

from __future__ import annotations

import json

import pytest

from planner.export import ExportError, export
from planner.export.deepspeed import DEEPSPEED_KEYS, flat_keys
from tests.export.plans import (
    colocated,
    dpo_plan,
    edited,
    ppo_disaggregated,
    ppo_scenario,
    priced,
    scenario,
)


def configs(plan, sc):
    return json.loads(export(plan, sc, "deepspeed").text)


def test_ppo_actor_and_critic():
    sc = ppo_scenario()
    out = configs(priced(sc, ppo_disaggregated()), sc)
    assert set(out) == {"actor", "critic"}
    for config in out.values():
        assert set(flat_keys(config)) <= DEEPSPEED_KEYS
        # DeepSpeed's start-up check; its GPU count includes the 2 tensor-parallel ranks
        assert config["train_batch_size"] == (config["train_micro_batch_size_per_gpu"]
                                              * config["gradient_accumulation_steps"] * 8)
        assert config["zero_optimization"]["stage"] == 1
        assert config["tensor_parallel"] == {"autotp_size": 2}
        assert config["bf16"] == {"enabled": True}


def test_offload_and_dpo_pairs():
    sc = scenario("dpo")
    out = configs(priced(sc, dpo_plan({"dp": 8, "zero": 3, "micro_batch": 4,
                                       "offload": "both"})), sc)
    actor = out["actor"]
    assert set(flat_keys(actor)) <= DEEPSPEED_KEYS
    assert actor["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert actor["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    # 32 pairs per optimizer step; micro 4 sequences = 2 pairs on 8 ranks: 2 accumulation steps
    assert (actor["train_batch_size"], actor["train_micro_batch_size_per_gpu"],
            actor["gradient_accumulation_steps"]) == (32, 2, 2)


def test_batch_arithmetic_is_checked():
    sc = scenario()  # 128 sequences per optimizer step; micro 3 × 8 ranks does not divide it
    plan = edited(priced(sc, colocated(train={"dp": 8, "zero": 3, "micro_batch": 2})),
                  "actor", "training", micro_batch=3)  # hand-edited: evaluate refuses 3
    with pytest.raises(ExportError, match="train_batch_size 128 .* train_micro_batch_size_per_gpu"):
        export(plan, sc, "deepspeed")


def test_param_offload_needs_stage_3():
    sc = scenario()
    plan = priced(sc, colocated(train={"dp": 8, "zero": 2, "micro_batch": 2,
                                       "offload": "params"}))
    with pytest.raises(ExportError, match="offload_param is valid only with stage 3"):
        export(plan, sc, "deepspeed")


def test_activation_checkpointing_is_a_note():
    sc = scenario()
    result = export(priced(sc, colocated(train={"dp": 8, "zero": 3, "micro_batch": 2,
                                                "checkpointing": "full"})), sc, "deepspeed")
    assert any("activation checkpointing" in n for n in result.notes)
    assert "checkpoint" not in json.loads(result.text)["actor"]

"""OpenRLHF: train_ppo_ray / train_dpo command lines whose every flag exists in the version."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.export import ExportError, export
from planner.export.keys import OPENRLHF_VERSIONS, key_set
from tests.export.plans import (
    colocated,
    dpo_plan,
    flags,
    ppo_disaggregated,
    ppo_scenario,
    priced,
    scenario,
)

PPO = "openrlhf.cli.train_ppo_ray"
DPO = "openrlhf.cli.train_dpo"


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_grpo_colocated(version):
    sc = scenario()
    result = export(priced(sc, colocated()), sc, "openrlhf", version)
    assert result.text.startswith("#!/usr/bin/env bash\nset -euo pipefail\n")
    assert f"ray job submit -- python3 -m {PPO} \\" in result.text
    f = flags(result.text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", version)
    flat = version == "v0.9.5"
    assert f["--advantage_estimator" if flat else "--algo.advantage.estimator"] == "group_norm"
    assert ("--colocate_all_models" if flat else "--train.colocate_all") in f
    assert f["--vllm_num_engines" if flat else "--vllm.num_engines"] == "4"
    assert f["--vllm_tensor_parallel_size" if flat else "--vllm.tensor_parallel_size"] == "2"
    # 128 sequences per optimizer step, micro-batch 2 per GPU on 8 GPUs
    assert f["--train_batch_size" if flat else "--train.batch_size"] == "128"
    assert f["--micro_train_batch_size" if flat else "--train.micro_batch_size"] == "2"
    assert f["--zero_stage" if flat else "--ds.zero_stage"] == "3"


def test_default_version_is_the_flat_release():
    sc = scenario()
    text = export(priced(sc, colocated()), sc, "openrlhf").text
    assert "v0.9.5" in text and "--vllm_num_engines" in text


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_ppo_separate_pools(version):
    sc = ppo_scenario()
    result = export(priced(sc, ppo_disaggregated()), sc, "openrlhf", version)
    f = flags(result.text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", version)
    flat = version == "v0.9.5"
    assert ("--colocate_actor_ref" if flat else "--train.colocate_actor_ref") in f
    assert ("--colocate_all_models" if flat else "--train.colocate_all") not in f
    assert f["--ds_tensor_parallel_size" if flat else "--ds.tensor_parallel_size"] == "2"
    assert f["--critic_pretrain" if flat else "--critic.model_name_or_path"] == \
        "Qwen/Qwen2.5-0.5B"
    # the critic shares g0 with the actor, which OpenRLHF cannot do: a note says so
    assert any("group g0 holds actor, critic, reference" in n for n in result.notes)


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_dpo(version):
    sc = scenario("dpo")
    result = export(priced(sc, dpo_plan()), sc, "openrlhf", version)
    assert f"deepspeed --module {DPO} \\" in result.text
    f = flags(result.text, DPO)
    assert set(f) <= key_set("openrlhf-train_dpo", version)
    flat = version == "v0.9.5"
    # pairs: 64 per step in 2 mini-batches = 32; micro_batch 2 sequences = 1 pair
    assert f["--train_batch_size" if flat else "--train.batch_size"] == "32"
    assert f["--micro_train_batch_size" if flat else "--train.micro_batch_size"] == "1"
    assert f["--max_len" if flat else "--data.max_len"] == "1280"


def test_refusals():
    sc = scenario("remax")
    with pytest.raises(ExportError, match="no remax advantage estimator"):
        export(priced(sc, colocated()), sc, "openrlhf")
    sc = scenario("simpo", **{"models.reference": "none"})
    plan = dpo_plan()
    del plan["layouts"]["reference"]
    with pytest.raises(ExportError, match="no simpo loss"):
        export(priced(sc, plan), sc, "openrlhf")
    sc = scenario()
    plan = priced(sc, colocated(train={"dp": 4, "pp": 2, "zero": 1, "micro_batch": 2}))
    with pytest.raises(ExportError, match="no pipeline parallelism"):
        export(plan, sc, "openrlhf")


def test_unknown_version():
    sc = scenario()
    with pytest.raises(InputError, match="no version 'v0.8.9'"):
        export(priced(sc, colocated()), sc, "openrlhf", "v0.8.9")


def test_overlapped_weight_sync_is_said_not_dropped():
    sc = ppo_scenario()
    plan = {**ppo_disaggregated(), "inter_model": {"placement": "disaggregated", "staleness": 1,
                                                   "overlap_weight_sync": True}}
    result = export(priced(sc, plan), sc, "openrlhf")
    f = flags(result.text, PPO)
    assert "--async_train" in f and f["--async_queue_size"] == "1"
    assert any(n.startswith("overlap_weight_sync") for n in result.notes)

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
    partial_scenario,
    ppo_disaggregated,
    ppo_scenario,
    ppo_split,
    priced,
    scenario,
)

PPO = "openrlhf.cli.train_ppo_ray"
DPO = "openrlhf.cli.train_dpo"
HEAD, V095 = OPENRLHF_VERSIONS  # 0.11.2 (dotted, the default), 0.9.5 (flat)


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_grpo_colocated(version):
    sc = scenario()
    result = export(priced(sc, colocated()), sc, "openrlhf", version)
    assert result.text.startswith("#!/usr/bin/env bash\nset -euo pipefail\n")
    assert f"ray job submit -- python3 -m {PPO} \\" in result.text
    f = flags(result.text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", version)
    flat = version == V095
    assert f["--advantage_estimator" if flat else "--algo.advantage.estimator"] == "group_norm"
    assert ("--colocate_all_models" if flat else "--train.colocate_all") in f
    assert f["--vllm_num_engines" if flat else "--vllm.num_engines"] == "4"
    assert f["--vllm_tensor_parallel_size" if flat else "--vllm.tensor_parallel_size"] == "2"
    # 128 sequences per optimizer step, micro-batch 2 per GPU on 8 GPUs
    assert f["--train_batch_size" if flat else "--train.batch_size"] == "128"
    assert f["--micro_train_batch_size" if flat else "--train.micro_batch_size"] == "2"
    assert f["--zero_stage" if flat else "--ds.zero_stage"] == "3"


def test_default_version_is_the_newest_release():
    sc = scenario()
    text = export(priced(sc, colocated()), sc, "openrlhf").text
    assert "OpenRLHF 0.11.2" in text and "--vllm.num_engines" in text


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_ppo_separate_pools(version):
    sc = ppo_scenario(nodes=3)
    result = export(priced(sc, ppo_split()), sc, "openrlhf", version)
    f = flags(result.text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", version)
    flat = version == V095
    assert ("--colocate_actor_ref" if flat else "--train.colocate_actor_ref") in f
    assert ("--colocate_critic_reward" if flat else "--train.colocate_critic_reward") in f
    assert ("--colocate_all_models" if flat else "--train.colocate_all") not in f
    assert f["--critic_pretrain" if flat else "--critic.model_name_or_path"] == \
        "Qwen/Qwen2.5-0.5B"


def test_a_placement_openrlhf_cannot_share_is_refused_not_spread():
    # issue 14: critic on the actor's GPUs, reward on the rollout's: OpenRLHF would give each
    # its own GPUs, 32 for a 16-GPU plan
    sc = ppo_scenario()
    with pytest.raises(ExportError, match=r"OpenRLHF would ask Ray for 32 GPUs \(actor 8, "
                       r"critic 8, reward 8, vLLM engines 8\), more than the plan's 16"):
        export(priced(sc, ppo_disaggregated()), sc, "openrlhf")


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_dpo(version):
    sc = scenario("dpo")
    result = export(priced(sc, dpo_plan()), sc, "openrlhf", version)
    assert f"deepspeed --module {DPO} \\" in result.text
    f = flags(result.text, DPO)
    assert set(f) <= key_set("openrlhf-train_dpo", version)
    flat = version == V095
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
    sc = ppo_scenario(nodes=3)
    plan = ppo_split(staleness=1, overlap_weight_sync=True)
    result = export(priced(sc, plan), sc, "openrlhf", V095)
    f = flags(result.text, PPO)
    assert "--async_train" in f and f["--async_queue_size"] == "1"
    assert any(n.startswith("overlap_weight_sync") for n in result.notes)


def test_partial_rollout_at_staleness_0_turns_async_on():
    sc = partial_scenario(**{"models.reward": "qwen2.5-0.5b", "cluster.nodes": 3},
                          algorithm="ppo")
    result = export(priced(sc, ppo_split(partial_rollout=True)), sc, "openrlhf", HEAD)
    f = flags(result.text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", HEAD)
    assert "--train.partial_rollout_enable" in f and "--train.async_enable" in f
    assert f["--train.async_queue_size"] == "1"
    assert "--vllm.enable_sleep" not in f  # OpenRLHF forbids it with async
    assert any(n.startswith("partial_rollout at staleness 0: OpenRLHF needs async training")
               and "within search.max_staleness 1" in n for n in result.notes)


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_async_on_colocated_gpus_stays_synchronous(version):
    # async would give vLLM GPUs of its own: 16 for an 8-GPU plan (issue 14)
    sc = partial_scenario()
    result = export(priced(sc, colocated(partial_rollout=True)), sc, "openrlhf", version)
    f = flags(result.text, PPO)
    assert not {"--async_train", "--train.async_enable", "--train.partial_rollout_enable"} & set(f)
    assert ("--vllm_enable_sleep" if version == V095 else "--vllm.enable_sleep") in f
    assert any("exported synchronous" in n for n in result.notes) is (version == HEAD)
    if version == V095:
        assert any(n.startswith("partial_rollout: OpenRLHF 0.9.5 has no partial-rollout flag")
                   and "--train.partial_rollout_enable" in n for n in result.notes)


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_partial_rollout_with_staleness_keeps_the_plans_queue(version):
    sc = ppo_scenario(nodes=3)
    plan = ppo_split(staleness=2, partial_rollout=True)
    f = flags(export(priced(sc, plan), sc, "openrlhf", version).text, PPO)
    assert set(f) <= key_set("openrlhf-train_ppo_ray", version)
    if version == HEAD:
        assert f["--train.async_queue_size"] == "2" and "--train.partial_rollout_enable" in f
    else:
        assert f["--async_queue_size"] == "2" and "--async_train" in f


def test_partial_rollout_beyond_the_scenarios_staleness_is_refused():
    plan = priced(partial_scenario(), colocated(partial_rollout=True))
    with pytest.raises(ExportError, match="inter_model.partial_rollout: OpenRLHF needs async "
                       "training .--train.async_enable.*max_staleness 1"):
        export(plan, scenario(), "openrlhf", HEAD)


def test_fp8_rollout_weights_are_refused_and_an_fp8_kv_cache_noted():
    sc = scenario(**{"runtime.rollout_weights": "fp8"})
    with pytest.raises(ExportError, match="FP8 weights.*--rollout-weights bf16"):
        export(priced(sc, colocated()), sc, "openrlhf")
    kv = scenario(**{"runtime.kv_cache_dtype": "fp8"})
    result = export(priced(kv, colocated()), kv, "openrlhf")
    assert any(n.startswith("runtime.kv_cache_dtype fp8") for n in result.notes)


@pytest.mark.parametrize("version", OPENRLHF_VERSIONS)
def test_eager_engine_sets_enforce_eager(version):
    sc = scenario(**{"runtime.engine": "eager"})
    result = export(priced(sc, colocated()), sc, "openrlhf", version)
    flag = "--enforce_eager" if version == V095 else "--vllm.enforce_eager"
    f = flags(result.text, PPO)
    assert flag in f and set(f) <= key_set("openrlhf-train_ppo_ray", version)
    assert any(n.startswith(f"runtime.engine eager → {flag}") for n in result.notes)
    plain = flags(export(priced(scenario(), colocated()), scenario(), "openrlhf", version).text,
                  PPO)
    assert flag not in plain


@pytest.mark.parametrize(("engine", "note"), [
    ("sglang", "runtime.engine sglang: OpenRLHF's rollouts run on vLLM only"),
    ("vllm-v0", "runtime.engine vllm-v0: the plan priced a V0-era engine"),
])
def test_engines_openrlhf_lacks_are_notes(engine, note):
    sc = scenario(**{"runtime.engine": engine})
    result = export(priced(sc, colocated()), sc, "openrlhf")
    engine_notes = [n for n in result.notes if n.startswith("runtime.engine")]
    assert [n.startswith(note) for n in engine_notes] == [True]
    assert "enforce_eager" not in result.text


def test_generation_pipeline_parallel_is_refused_with_what_to_do():
    sc = scenario()
    plan = priced(sc, colocated(gen={"dp": 4, "pp": 2}))
    with pytest.raises(ExportError, match="layouts.actor.generation.pp 2: OpenRLHF's vLLM "
                       "engines have no pipeline-parallel flag; plans pipeline generation when "
                       "the model does not fit one scale-up domain"):
        export(plan, sc, "openrlhf")


def test_generation_tp_across_nodes_is_a_note():
    sc = scenario(**{"cluster.nodes": 8, "cluster.gpus_per_node": 1})
    result = export(priced(sc, colocated(gen={"dp": 4, "tp": 2})), sc, "openrlhf", V095)
    assert flags(result.text, PPO)["--vllm_tensor_parallel_size"] == "2"
    assert any(n.startswith("generation tp 2: each engine's 2 GPUs span 2 nodes") and
               "OpenRLHF places its workers with Ray" in n for n in result.notes)


def test_memory_note_quotes_the_kv_cache_in_tokens():
    sc = scenario()
    plan = priced(sc, colocated(gen={"dp": 4, "tp": 2, "kv_cache_tokens": 60_000}))
    text = export(plan, sc, "openrlhf").text
    assert "60,000 tokens per replica: vLLM logs it as 'GPU KV cache size'" in text

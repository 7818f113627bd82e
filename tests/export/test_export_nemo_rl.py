"""NeMo-RL: a YAML config whose every key is in NeMo-RL's key list, the layout as NeMo-RL runs
it (Megatron or DTensor by ZeRO stage, vLLM co-located or apart, async GRPO), what that
changes priced, refusals naming the fix; `rlplan import` reads it (and a launch line) back."""

from __future__ import annotations

import pytest
import yaml

from planner.export import ExportError, export
from planner.export.as_run import figures
from planner.export.keys import key_set, unverified_keys
from planner.importers import detect, import_config
from planner.importers.nemo_rl import flatten
from planner.plan import PlanInput
from tests.export.plans import colocated, layout, partial_scenario, priced, scenario


def config(text: str) -> dict:
    """The export's keys, dotted."""
    return flatten(yaml.safe_load(text))


def nemo(**changes) -> object:
    return scenario(**{"framework": "nemo-rl", **changes})


def apart(staleness: int = 1, partial: bool = False, gen_gpus: int = 8) -> dict:
    """Policy (and its reference) on g0, vLLM on g1: NeMo-RL's non-colocated placement."""
    train = {"dp": 4, "tp": 2, "sp": True, "zero": 1, "micro_batch": 2}
    return {"groups": [{"name": "g0", "gpus": 8}, {"name": "g1", "gpus": gen_gpus}],
            "layouts": {"actor": {"generation": layout("g1", dp=gen_gpus // 2, tp=2),
                                  "training": layout(**train)},
                        # as NeMo-RL scores it: the policy's degrees, sequence parallelism
                        # and micro-batch, ZeRO-0
                        "reference": {"assessment": layout(dp=4, tp=2, sp=True,
                                                           micro_batch=2)}},
            "inter_model": {"placement": "disaggregated", "staleness": staleness,
                            "partial_rollout": partial}}


def test_grpo_colocated_dtensor():
    sc = nemo()
    result = export(priced(sc, colocated()), sc, "nemo-rl")
    assert result.kind == "yaml" and result.text.startswith("# NeMo-RL 0.6, DTensor")
    c = config(result.text)
    assert set(c) <= key_set("nemo-rl", "0.6")
    assert c["defaults"] == "grpo_math_1B.yaml"
    assert c["policy.model_name"] == "Qwen/Qwen2.5-0.5B"
    assert (c["policy.dtensor_cfg.enabled"], c["policy.megatron_cfg.enabled"]) == (True, False)
    assert (c["cluster.num_nodes"], c["cluster.gpus_per_node"]) == (1, 8)
    assert (c["grpo.num_prompts_per_step"], c["grpo.num_generations_per_prompt"]) == (64, 4)
    assert c["policy.train_global_batch_size"] == 128  # 256 sequences in 2 mini-batches
    assert c["policy.train_micro_batch_size"] == 2
    assert c["policy.max_total_sequence_length"] == 256 + 1024
    assert c["policy.generation.vllm_cfg.tensor_parallel_size"] == 2
    assert 0 < c["policy.generation.vllm_cfg.gpu_memory_utilization"] < 1
    assert c["policy.generation.colocated.enabled"] is True
    assert "grpo.async_grpo.enabled" not in c
    # the header names the keys exports.md does not show
    marked = sorted(unverified_keys("nemo-rl", "0.6"))
    assert f"not checked against a release): {', '.join(marked)}" in result.text


def test_megatron_with_optimizer_offload_and_an_uneven_pipeline():
    sc = nemo(**{"models.actor": "qwen2.5-0.5b"})
    train = {"dp": 2, "tp": 2, "pp": 2, "sp": True, "zero": 1, "micro_batch": 1,
             "checkpointing": "selective", "offload": "optimizer"}
    plan = colocated(train=train, ref={**train, "zero": 0, "micro_batch": 1,
                                       "offload": "none", "checkpointing": "none"})
    c = config(export(priced(sc, plan), sc, "nemo-rl").text)
    m = "policy.megatron_cfg"
    assert c["defaults"] == "grpo_math_1B_megatron.yaml"
    assert (c[f"{m}.tensor_model_parallel_size"], c[f"{m}.pipeline_model_parallel_size"]) == (2, 2)
    assert c[f"{m}.sequence_parallel"] is True
    assert c[f"{m}.activation_checkpointing"] is True
    assert c[f"{m}.recompute_granularity"] == "selective"
    assert c[f"{m}.optimizer.use_distributed_optimizer"] is True
    # megatron-core's validate_args: CPU offload needs the precision-aware optimizer
    assert c[f"{m}.optimizer.optimizer_cpu_offload"] is True
    assert c[f"{m}.optimizer.use_precision_aware_optimizer"] is True
    assert f"{m}.num_layers_in_last_pipeline_stage" not in c  # 24 layers split evenly


def test_one_step_off_policy_gets_its_own_nodes_and_async_grpo():
    sc = partial_scenario(framework="nemo-rl", **{"cluster.nodes": 2})
    result = export(priced(sc, apart(partial=True)), sc, "nemo-rl")
    c = config(result.text)
    p = "policy.generation.colocated"
    assert c[f"{p}.enabled"] is False
    assert (c[f"{p}.resources.num_nodes"], c[f"{p}.resources.gpus_per_node"]) == (1, 8)
    assert (c["cluster.num_nodes"], c["cluster.gpus_per_node"]) == (2, 8)  # the whole job
    assert c["grpo.async_grpo.enabled"] is True
    assert c["grpo.async_grpo.max_trajectory_age_steps"] == 1
    assert c["grpo.async_grpo.in_flight_weight_updates"] is True  # the partial rollouts
    assert c["loss_fn.use_importance_sampling_correction"] is True
    assert not any(n.startswith("as NeMo-RL 0.6 runs it") for n in result.notes)  # as planned


def test_a_conversion_is_priced_and_said():
    """The reference at ZeRO-0 on its own layout: NeMo-RL scores it in the policy's workers
    (ZeRO-3 under DTensor, the log-prob micro-batch); the note gives what that changes."""
    sc = nemo()
    result = export(priced(sc, colocated()), sc, "nemo-rl")
    said = [n for n in result.notes if n.startswith("as NeMo-RL 0.6 runs it")]
    assert len(said) == 1 and "reference assessment zero 0 → 3" in said[0]
    assert "per step (+" in said[0] and "GiB per GPU" in said[0]


def test_a_conversion_that_no_longer_fits_is_refused_naming_the_flag():
    """An 8B policy at ZeRO-1 whose reference the plan shards over its 8 GPUs (ZeRO-3): in
    the policy's workers it keeps whole weights (ZeRO-0), and the KV cache no longer fits."""
    sc = scenario(**{"models.actor": "llama-3.1-8b", "workload.prompts_per_step": 32})
    plan = colocated(train={"dp": 8, "zero": 1, "micro_batch": 1, "checkpointing": "full"},
                     gen={"dp": 8, "tp": 1}, ref={"dp": 8, "zero": 3, "micro_batch": 1})
    with pytest.raises(ExportError) as err:
        export(priced(sc, plan), sc, "nemo-rl")
    text = str(err.value)
    assert "as NeMo-RL 0.6 runs it, the plan no longer fits: group g0" in text
    assert "GiB over what the group leaves free" in text
    assert "re-plan with --framework nemo-rl@0.6" in text


@pytest.mark.parametrize("change, match", [
    ({"algorithm": "ppo", "models.critic": "qwen2.5-0.5b"}, "value model's keys"),
    ({"models.reward": "qwen2.5-0.5b"}, "--reward verifier"),
])
def test_refusals_name_the_fix(change, match):
    sc = scenario(**change)
    plan = colocated()
    if "models.critic" in change:
        plan["layouts"]["critic"] = {"training": layout(dp=8, zero=3, micro_batch=2)}
    if "models.reward" in change:
        plan["layouts"]["reward"] = {"assessment": layout(dp=8, micro_batch=4)}
    with pytest.raises(ExportError, match=match):
        export(priced(sc, plan), sc, "nemo-rl")


def test_generation_on_part_of_a_node_beside_a_multi_node_policy_is_refused():
    sc = partial_scenario(framework="nemo-rl", **{"cluster.nodes": 3})
    plan = apart(gen_gpus=4)
    plan["groups"][0]["gpus"] = 16
    plan["layouts"]["actor"]["training"] = layout(dp=8, tp=2, sp=True, zero=1, micro_batch=2)
    plan["layouts"]["reference"]["assessment"] = layout(dp=8, tp=2, sp=True, micro_batch=2)
    with pytest.raises(ExportError, match="whole nodes of 8; make group g1 a multiple of 8"):
        export(priced(sc, plan), sc, "nemo-rl")


@pytest.mark.parametrize("algorithm, train", [
    ("dpo", {"dp": 8, "zero": 3, "micro_batch": 2}),
    ("sft", {"dp": 4, "tp": 2, "sp": True, "zero": 1, "micro_batch": 2}),
])
def test_offline_algorithms_use_their_runner(algorithm, train):
    sc = nemo(algorithm=algorithm)
    plan = {"groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"training": layout(**train)}},
            "inter_model": {"placement": "colocated"}}
    if algorithm == "dpo":
        plan["layouts"]["reference"] = {"assessment": layout(**{**train, "zero": 3})}
    result = export(priced(sc, plan), sc, "nemo-rl")
    c = config(result.text)
    assert f"examples/run_{algorithm}.py" in result.text
    assert "policy.generation.colocated.enabled" not in c and "grpo.num_prompts_per_step" not in c
    per_step = (sc.workload.prompts_per_step if algorithm == "dpo"  # DPO counts pairs
                else sc.sequences_per_step) // sc.workload.mini_batches
    assert c["policy.train_global_batch_size"] == per_step


def _round_trip(sc, plan: dict) -> tuple:
    data = priced(sc, plan)
    result = export(data, sc, "nemo-rl")
    assert detect(result.text) == "nemo-rl"
    back = PlanInput.model_validate(import_config(result.text, sc).plan)
    return figures(sc, PlanInput.model_validate(result.runs)), figures(sc, back), \
        figures(sc, PlanInput.model_validate(plan))


@pytest.mark.parametrize("make", [
    lambda: (nemo(), colocated(ref={"dp": 8, "zero": 3, "micro_batch": 2})),
    lambda: (partial_scenario(framework="nemo-rl", **{"cluster.nodes": 2}), apart(partial=True)),
    lambda: (partial_scenario(framework="nemo-rl", **{"cluster.nodes": 2}), apart(staleness=0)),
])
def test_a_plan_nemo_rl_runs_as_it_is_round_trips_exactly(make):
    sc, plan = make()
    runs, back, own = _round_trip(sc, plan)
    assert runs == own  # nothing converted
    assert back == own  # export → import → evaluate: the same step, peak and cost


def test_a_converted_plan_round_trips_to_the_figures_the_export_gives():
    sc = nemo()
    runs, back, own = _round_trip(sc, colocated())
    assert back == runs and runs != own


def test_import_reads_a_launch_line_with_the_config_it_builds_on(tmp_path, monkeypatch):
    """The --config file is read where it is, its `defaults:` followed; key=value wins."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({
        "policy": {"train_micro_batch_size": 4, "megatron_cfg": {"enabled": True},
                   "generation": {"vllm_cfg": {"tensor_parallel_size": 4}}},
        "cluster": {"num_nodes": 1, "gpus_per_node": 8}}))
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({
        "defaults": "base.yaml",
        "policy": {"megatron_cfg": {"tensor_model_parallel_size": 2}}}))
    script = ("uv run examples/run_grpo_math.py --config mine.yaml "
              "policy.generation.vllm_cfg.tensor_parallel_size=2 logger.wandb_enabled=true\n")
    imported = import_config(script, scenario())
    train = imported.plan["layouts"]["actor"]["training"]
    assert (train["tp"], train["dp"], train["micro_batch"], train["zero"]) == (2, 4, 4, 1)
    assert imported.plan["layouts"]["actor"]["generation"]["tp"] == 2  # the override wins
    assert any("logger.wandb_enabled" in n and n.startswith("not in rlplan's") for n in
               imported.notes)

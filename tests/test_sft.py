"""SFT (`algorithm: sft`): the actor's training stage alone, through `validate`, `plan` and
`evaluate` — exit codes, the plan JSON's shape (every stage key kept; generation, assessment
and sync 0), tokens per second over the sequences' tokens, and the fields SFT ignores."""

from __future__ import annotations

import json

import pytest

from planner.cost.iteration import evaluate
from planner.errors import InputError
from planner.plan import PlanInput
from planner.specs.scenario import load_scenario
from tests.conftest import REPO
from tests.test_cli import assert_bad_input

EXAMPLE = str(REPO / "examples/sft-qwen2.5-7b.yaml")
SMALL = {"algorithm": "sft", "models": {"actor": "qwen2.5-0.5b"},
         "workload": {"prompts_per_step": 32, "prompt_len": 256, "response_len": 768},
         "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
         "search": {"time_limit_s": 20}}


def _check_shape(plan: dict, sequences: int, tokens: int) -> None:
    assert set(plan["layouts"]) == {"actor"} and set(plan["layouts"]["actor"]) == {"training"}
    stages = plan["stages"]
    assert set(stages) == {"generation", "assessment", "training", "sync"}
    assert stages["generation"]["time_s"] == stages["assessment"]["time_s"] == 0
    assert stages["sync"]["time_s"] == 0
    assert plan["iteration_time_s"] == stages["training"]["time_s"] > 0
    assert [t["stage"] for t in plan["breakdown"]["tasks"]] == ["training"]
    assert plan["breakdown"]["rollout"] is None and plan["bounds"]["decode_s"] == 0
    assert plan["tokens_per_s"] == pytest.approx(sequences * tokens / plan["iteration_time_s"])


def test_plan_then_evaluate_the_example(cli, tmp_path):
    out = tmp_path / "sft.json"
    result = cli("plan", EXAMPLE, "--json", "--out", str(out))
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["status"] in ("optimal", "feasible")
    _check_shape(plan, 256, 1024 + 3072)
    again = cli("evaluate", EXAMPLE, str(out), "--json")
    assert again.exit_code == 0, again.output
    priced = json.loads(again.stdout)
    assert priced["status"] == "evaluated"
    _check_shape(priced, 256, 1024 + 3072)
    assert priced["iteration_time_s"] == pytest.approx(plan["iteration_time_s"], abs=2e-3)


def test_validate_notes_the_fields_sft_ignores(cli, write):
    path = write("sft.yaml", {**SMALL, "models": {"actor": "qwen2.5-0.5b", "reference": "actor",
                                                  "reward": "verifier", "critic": "actor"},
                              "workload": {**SMALL["workload"], "samples_per_prompt": 4,
                                           "ppo_epochs": 2, "mini_batches": 2,
                                           "response_lengths": {"distribution": "lognormal",
                                                                "sigma": 0.5},
                                           "max_response_len": 2048}})
    result = cli("validate", str(path), "--json")
    assert result.exit_code == 0, result.output
    notes = " | ".join(json.loads(result.stdout)["resolved"]["notes"])
    for field in ("models.reference", "models.reward", "models.critic",
                  "workload.samples_per_prompt", "workload.ppo_epochs", "workload.mini_batches",
                  "workload.response_lengths"):
        assert f"{field} ignored" in notes, field
    sc = load_scenario(path)
    assert sc.roles.keys() == {"actor"} and sc.reward_kind == "none"
    w = sc.workload
    assert (sc.sequences_per_step, w.samples_per_prompt, w.ppo_epochs, w.mini_batches) == (
        32, 1, 1, 1)


def _plan(layouts: dict) -> dict:
    return {"groups": [{"name": "g0", "gpus": 8}], "layouts": layouts,
            "inter_model": {"placement": "colocated"}}


def test_evaluate_exit_codes(cli, write):
    scenario = str(write("sft.yaml", SMALL))
    ok = write("ok.json", _plan({"actor": {"training": {"group": "g0", "dp": 8, "zero": 3}}}))
    assert cli("evaluate", scenario, str(ok), "--json").exit_code == 0
    ref = write("ref.json", _plan({"actor": {"training": {"group": "g0", "dp": 8}},
                                   "reference": {"assessment": {"group": "g0", "dp": 8}}}))
    assert_bad_input(cli("evaluate", scenario, str(ref)), "reference", "remove them")
    gen = write("gen.json", _plan({"actor": {"training": {"group": "g0", "dp": 8},
                                             "generation": {"group": "g0", "dp": 8}}}))
    assert_bad_input(cli("evaluate", scenario, str(gen)), "layouts.actor.generation",
                     "training stage only")
    none = write("none.json", _plan({}))
    assert_bad_input(cli("evaluate", scenario, str(none)), "layouts.actor.training is missing")
    big = write("big.yaml", {**SMALL, "models": {"actor": "llama-3.1-70b"}})
    oom = write("oom.json", _plan({"actor": {"training": {"group": "g0", "dp": 8}}}))
    result = cli("evaluate", str(big), str(oom), "--json")
    assert result.exit_code == 3, result.output


def test_tokens_count_one_sequence_per_prompt():
    sc = load_scenario(None, {"algorithm": "sft", "models.actor": "qwen2.5-0.5b",
                              "workload.prompts_per_step": 32, "workload.prompt_len": 256,
                              "workload.response_len": 768, "cluster.gpu": "h100-sxm",
                              "cluster.nodes": 1})
    ev = evaluate(sc, PlanInput.model_validate(
        _plan({"actor": {"training": {"group": "g0", "dp": 8}}})))
    assert ev.tokens_per_step == 32 * 1024
    with pytest.raises(InputError, match="layouts.actor.training"):
        evaluate(sc, PlanInput.model_validate(_plan({"actor": {"generation": {
            "group": "g0", "dp": 8}}})))


def test_analyze_pipeline_refuses_sft(cli):
    assert_bad_input(cli("analyze", "pipeline", EXAMPLE), "algorithm: sft", "rlplan plan")

"""Old-policy log-probs from the rollout engine (`runtime.old_log_probs: rollout`, verl's bypass
mode and fully-async recipe): no actor assessment pass, in evaluate and in the search alike."""

from __future__ import annotations

import pytest

from planner.cost.iteration import evaluate
from planner.errors import InputError
from planner.export import export
from planner.plan import PlanInput
from planner.search import cpsat
from planner.search.solve import Option, to_plan_input
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.export.plans import colocated, overrides, priced, scenario

SCENARIO = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
            "models.reward": "verifier", "workload.prompts_per_step": 16,
            "workload.samples_per_prompt": 4, "workload.prompt_len": 256,
            "workload.response_len": 512, "workload.max_response_len": 1024,
            "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 4}
PLAN = PlanInput.model_validate({
    "groups": [{"name": "g0", "gpus": 4}],
    "layouts": {"actor": {"generation": {"group": "g0", "dp": 4},
                          "training": {"group": "g0", "dp": 4, "zero": 3}},
                "reference": {"assessment": {"group": "g0", "dp": 4}}},
    "inter_model": {"placement": "colocated"}})


def load(mode: str):
    return load_scenario(None, {**SCENARIO, "runtime.old_log_probs": mode})


def test_rollout_log_probs_drop_the_actors_assessment_pass_and_nothing_else():
    recompute, rollout = evaluate(load("recompute"), PLAN), evaluate(load("rollout"), PLAN)
    pass_s = next(t.seconds for t in recompute.tasks
                  if (t.role, t.stage) == ("actor", "assessment"))
    assert pass_s > 0
    assert not any((t.role, t.stage) == ("actor", "assessment") for t in rollout.tasks)
    assert rollout.stage_times["assessment"] == pytest.approx(
        recompute.stage_times["assessment"] - pass_s)
    assert rollout.iteration_time_s == pytest.approx(recompute.iteration_time_s - pass_s)


def test_an_actor_assessment_layout_with_rollout_log_probs_is_refused():
    plan = PlanInput.model_validate({**PLAN.model_dump(), "layouts": {
        **PLAN.model_dump()["layouts"],
        "actor": {**PLAN.model_dump()["layouts"]["actor"],
                  "assessment": {"group": "g0", "dp": 4}}}})
    with pytest.raises(InputError, match="layouts.actor.assessment: runtime.old_log_probs"):
        evaluate(load("rollout"), plan)


def test_the_search_prices_it_as_evaluate_does():
    sc = load("rollout")
    space = build_space(sc, slots=2)
    result = cpsat.solve(space, 30)
    ev = evaluate(sc, to_plan_input(space, result.choice, Option(0, False, False)))
    assert not any((t.role, t.stage) == ("actor", "assessment") for t in ev.tasks)
    assert ev.iteration_time_s * 1000 == pytest.approx(result.objective,
                                                       abs=len(space.tasks) + 2)


def test_verl_takes_the_engines_log_probs_in_bypass_mode():
    sc = scenario(**{"runtime.old_log_probs": "rollout"})
    o = overrides(export(priced(sc, colocated()), sc, "verl").text)
    assert o["actor_rollout_ref.rollout.calculate_log_probs"] == "True"
    assert o["algorithm.rollout_correction.bypass_mode"] == "True"
    plain = overrides(export(priced(scenario(), colocated()), scenario(), "verl").text)
    assert "algorithm.rollout_correction.bypass_mode" not in plain

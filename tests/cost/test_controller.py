"""The controller's host time (`runtime.controller_us_per_token`): in series with a synchronous
step, beside the groups' work with staleness ≥ 1 — in evaluate, the plan JSON, the search and
the CLI alike."""

from __future__ import annotations

import json

import pytest

from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.cost.step import controller_seconds
from planner.plan import PlanInput
from planner.search import brute, cpsat
from planner.search.choice import score
from planner.search.option import STALENESS_THAT_MATTERS, options
from planner.search.solve import Option, plan, to_plan_input
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_cli import assert_bad_input

SCENARIO = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "none",
            "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
            "workload.prompt_len": 256, "workload.response_len": 512,
            "workload.max_response_len": 1024, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
            "cluster.gpus_per_node": 4, "search.time_limit_s": 30}
COLOCATED = PlanInput.model_validate({
    "groups": [{"name": "g0", "gpus": 4}],
    "layouts": {"actor": {"generation": {"group": "g0", "dp": 4},
                          "training": {"group": "g0", "dp": 4, "zero": 3}}},
    "inter_model": {"placement": "colocated"}})
APART = PlanInput.model_validate({
    "groups": [{"name": "train", "gpus": 2}, {"name": "rollout", "gpus": 2}],
    "layouts": {"actor": {"generation": {"group": "rollout", "dp": 2},
                          "training": {"group": "train", "dp": 2, "zero": 3}}},
    "inter_model": {"placement": "disaggregated", "staleness": 1}})


def load(us: float, **flags):
    return load_scenario(None, {**SCENARIO, "runtime.controller_us_per_token": us, **flags})


def test_it_is_the_generated_tokens_times_the_rate():
    # 16 prompts × 4 samples × 512 tokens at 100 µs
    assert controller_seconds(load(100.0)) == pytest.approx(64 * 512 * 100e-6)
    assert controller_seconds(load(0.0)) == 0.0
    dpo = load(100.0, algorithm="dpo")  # an offline step generates nothing
    assert controller_seconds(dpo) == 0.0


def test_a_synchronous_step_waits_for_it_and_every_group_idles():
    base, slow = evaluate(load(0.0), COLOCATED), evaluate(load(100.0), COLOCATED)
    host = controller_seconds(load(100.0))
    assert slow.iteration_time_s == pytest.approx(base.iteration_time_s + host)
    assert slow.groups["g0"]["idle"] == pytest.approx(base.groups["g0"]["idle"] + host)
    train = next(s for s in slow.timeline if s["kind"] == "training")
    gen = next(s for s in slow.timeline if s["kind"] == "generation")
    assert train["start_s"] >= gen["end_s"] + host - 1e-9  # the training waits for it
    (lane,) = [s for s in slow.timeline if s["kind"] == "controller"]  # on no group's lane
    assert lane["group"] is None and lane["start_s"] == gen["end_s"]
    assert lane["end_s"] == pytest.approx(gen["end_s"] + host)
    doc = to_plan(load(100.0), COLOCATED, slow)
    assert doc.stages["controller"].time_s == pytest.approx(host)
    assert "controller" not in to_plan(load(0.0), COLOCATED, base).stages


def test_an_asynchronous_step_overlaps_it_until_it_is_the_longest_work():
    base = evaluate(load(0.0), APART)
    busiest = max(sum(v for k, v in b.items() if k != "idle") for b in base.groups.values())
    small_rate = 0.5 * busiest / controller_seconds(load(1.0))
    hidden = evaluate(load(small_rate), APART)
    assert hidden.iteration_time_s == pytest.approx(base.iteration_time_s)
    large = load(4 * small_rate)  # twice the busiest group's work: the period is the host's
    ev = evaluate(large, APART)
    assert ev.iteration_time_s == pytest.approx(controller_seconds(large))
    assert [s["start_s"] for s in ev.timeline if s["kind"] == "controller"] == [0.0]


@pytest.mark.parametrize("staleness", [0, 1])
def test_cpsat_equals_brute_force_and_reprices_as_evaluate_does(staleness):
    sc = load(50.0)
    space = build_space(sc, staleness=staleness, slots=2)
    assert space.controller_ms > 0
    best, _, _ = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert result.status == "OPTIMAL" and result.objective == best
    assert score(space, result.choice) == best
    ev = evaluate(sc, to_plan_input(space, result.choice, Option(staleness, False, False)))
    assert ev.iteration_time_s * 1000 == pytest.approx(result.objective, abs=len(space.tasks) + 3)


def test_host_time_makes_the_search_go_asynchronous_when_allowed():
    """A slow verifier (1 ms per token, a code sandbox's order) costs a synchronous step its
    whole time; one step off-policy hides it behind the GPUs' work."""
    sync = plan(load(1000.0), explain=False)
    assert sync.inter_model.staleness == 0
    assert sync.stages["controller"].time_s == pytest.approx(controller_seconds(load(1000.0)))
    relaxed = plan(load(1000.0, **{"search.max_staleness": 1}), explain=False)
    assert relaxed.inter_model.staleness == 1
    assert relaxed.iteration_time_s < sync.iteration_time_s


def test_one_more_staleness_matters_with_host_time():
    assert max(o.staleness for o in options(load(0.0), 10**9, False)) == STALENESS_THAT_MATTERS
    assert max(o.staleness for o in options(load(5.0), 10**9, False)) == (
        STALENESS_THAT_MATTERS + 1)
    sc = load(5.0)
    at_cap = build_space(sc, staleness=STALENESS_THAT_MATTERS + 1, slots=2)
    beyond = build_space(sc, staleness=1000, slots=2)
    checked = 0
    for ch in brute.enumerate_choices(at_cap):
        assert score(at_cap, ch) == score(beyond, ch)
        checked += 1
    assert checked > 10


def test_through_the_cli(cli, write, tmp_path):
    scenario = {"algorithm": "grpo", "models": {"actor": "qwen2.5-0.5b", "reference": "none"},
                "workload": {"prompts_per_step": 16, "samples_per_prompt": 4,
                             "prompt_len": 256, "response_len": 512, "max_response_len": 1024},
                "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 4}}
    plan_path = str(write("plan.json", COLOCATED.model_dump(mode="json")))
    path = write("host.yaml", {**scenario, "runtime": {"controller_us_per_token": 100}})
    result = cli("evaluate", str(path), plan_path, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stages"]["controller"]["time_s"] == pytest.approx(
        64 * 512 * 100e-6)
    svg = tmp_path / "it.svg"
    shown = cli("evaluate", str(path), plan_path, "--timeline", str(svg))
    assert "controller: 3.28 s of host work per step" in shown.stdout
    assert "controller (host)" in svg.read_text()
    assert "controller 100 µs per generated token" in cli("validate", str(path)).stdout
    flagged = cli("evaluate", str(write("plain.yaml", scenario)), plan_path, "--json",
                  "--controller-us-per-token", "100")
    assert json.loads(flagged.stdout)["stages"]["controller"]["time_s"] == pytest.approx(
        64 * 512 * 100e-6)
    assert_bad_input(cli("evaluate", str(path), plan_path, "--controller-us-per-token", "-1"),
                     "--controller-us-per-token")
    for value in (-1, "fast", 1e9):
        bad = write("bad.yaml", {**scenario, "runtime": {"controller_us_per_token": value}})
        assert_bad_input(cli("evaluate", str(bad), plan_path), "runtime.controller_us_per_token")

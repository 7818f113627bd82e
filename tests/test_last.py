"""The last options of a search solved beside the others, alone (`planner/search/last.py`): an
answer is taken only where it is what solving the option in its turn gives, so the plan is the
same with them or without."""

from __future__ import annotations

import pytest

from planner.search import aside, cpsat, last, pins, solve
from planner.search.deadline import Deadline
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_aside import needs_fork
from tests.test_plans_pinned import CASES

REFINES = {  # GRPO whose rollout is KV-bound: the optimum of its first solve uses a KV gap's
    # bound candidate, and the search prices a size inside the gap (`refine.py`)
    "algorithm": "grpo", "models.actor": "qwen2.5-14b", "models.reference": "actor",
    "models.reward": "verifier", "workload.prompts_per_step": 128,
    "workload.samples_per_prompt": 4, "workload.prompt_len": 512, "workload.response_len": 1024,
    "workload.max_response_len": 2048, "workload.mini_batches": 2, "cluster.gpu": "h100-sxm",
    "cluster.nodes": 1, "cluster.gpus_per_node": 4, "search.time_limit_s": 120}
SCENARIOS = {**CASES, "grpo-14b-4gpu-refines": REFINES}


def _result(objective: int) -> cpsat.Result:
    return cpsat.Result("OPTIMAL", None, objective, objective, 0.0, 0)


def test_an_answer_over_the_cutoff_is_not_taken():
    assert last.as_if_last(None, None) is None
    assert last.as_if_last(_result(10), None).objective == 10
    assert last.as_if_last(_result(10), 10).objective == 10  # may still rank before a tie
    assert last.as_if_last(_result(10), 9) is None  # solved last, it would be BEATEN


def test_an_optimum_that_priced_a_kv_size_more_is_not_answered():
    sc = load_scenario(None, REFINES)
    assert last.alone(build_space(sc), Deadline.after(60), 1) is None
    space = build_space(sc)  # solved in its turn, it prices one more
    priced = space.priced
    cpsat.solve(space, 60, 1)
    assert space.priced > priced


def test_an_optimum_answered_alone_pins_to_the_plan_solved_in_turn():
    sc = load_scenario(None, CASES["ppo-0.5b-16gpu"])
    space = build_space(sc)
    answered = last.alone(space, Deadline.after(60), 1)
    assert answered is not None and not answered.pinned  # pinned if shown, by the search
    pinned = cpsat.pin(space, answered, Deadline.after(60))
    here = cpsat.solve(build_space(sc), 60, 1)
    assert (pinned.objective, pinned.choice) == (here.objective, here.choice)


def test_under_a_cutoff_alone_answers_only_an_optimum_within_it():
    """The child solves under the cutoff the search has set so far: an optimum within it is
    the one solving without it gives; one above it is no answer (the search solves it in its
    turn, BEATEN)."""
    sc = load_scenario(None, CASES["ppo-0.5b-16gpu"])
    free = last.alone(build_space(sc), Deadline.after(60), 1)
    assert free is not None
    within = last.alone(build_space(sc), Deadline.after(60), 1, cutoff=free.objective)
    assert within is not None and within.objective == free.objective
    assert last.alone(build_space(sc), Deadline.after(60), 1, cutoff=free.objective - 1) is None


@needs_fork
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_plan_is_the_same_with_the_last_options_solved_beside(monkeypatch, name):
    sc = load_scenario(None, {**SCENARIOS[name], "search.time_limit_s": 120})
    monkeypatch.setattr(last, "MIN_CANDIDATES", 0)
    monkeypatch.setattr(pins, "PIN_BESIDE_VARIABLES", 0)
    real, offered = aside.start, []
    monkeypatch.setattr(aside, "start",
                        lambda fn, *args, **k: offered.append(fn) or real(fn, *args, **k))
    beside = solve.plan(sc, explain=False)
    assert last.from_the_back in offered
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = solve.plan(sc, explain=False)
    assert beside.model_dump(exclude={"search"}) == alone.model_dump(exclude={"search"})


@needs_fork
def test_what_the_child_took_and_did_not_answer_is_solved_here(monkeypatch):
    sc = load_scenario(None, {**CASES["ppo-0.5b-16gpu"], "search.time_limit_s": 120})
    monkeypatch.setattr(last, "MIN_CANDIDATES", 0)
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = solve.plan(sc, explain=False)
    monkeypatch.undo()
    monkeypatch.setattr(last, "MIN_CANDIDATES", 0)
    real = aside.start

    def takes_the_back_and_dies(spaces, ends, cut, deadline, workers):
        while ends.back() is not None:
            pass
        raise RuntimeError("died with every option taken")

    monkeypatch.setattr(aside, "start", lambda fn, *args: real(
        takes_the_back_and_dies if fn is last.from_the_back else fn, *args))
    died = solve.plan(sc, explain=False)
    assert died.model_dump(exclude={"search"}) == alone.model_dump(exclude={"search"})

"""The search's shortcuts across inter-model options never change its answer: the cutoff the
proven optima set (`explain.cutoff`) only settles options that could not be shown, a solve under
a cutoff or seeded with other options' plans (`cpsat.solve`, `bounds.carry`) proves the same
optimum brute force finds and returns the same plan as a plain solve, and `plan` gives the same
plan with them as without."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.search import brute, cpsat, explain, model
from planner.search import solve as search
from planner.search.bounds import carry
from planner.search.choice import fits, meets_target, score, valid
from planner.search.explain import MAX_ALTERNATIVES
from planner.search.option import options
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_pools import first_pool, inter, objectives, scenarios, second_pool, two_pools

pytestmark = pytest.mark.usefixtures("fewer_group_sizes")  # the solver's mechanics


def _needed(optima: list[int], worse: int) -> list[int]:
    """Positions (in `optima`) of the options a plan shows: the best, its ties and the `worse`
    next, ranked as `solve._feasible` ranks them (objective, then the option's order)."""
    ranked = sorted(range(len(optima)), key=lambda i: (optima[i], i))
    best = optima[ranked[0]]
    ties = [i for i in ranked if optima[i] == best]
    return ties + [i for i in ranked if optima[i] != best][:worse]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(optima=st.lists(st.integers(0, 12), min_size=1, max_size=9),
       later=st.lists(st.integers(0, 12), min_size=1, max_size=5),
       worse=st.integers(0, MAX_ALTERNATIVES))
def test_an_option_above_the_cutoff_is_never_shown(optima, later, worse):
    """Options solved in turn, each given the cutoff of the optima before it: one above its
    cutoff is none of the options shown, whatever comes after."""
    every = optima + later
    for i, value in enumerate(every):
        limit = search.cutoff(every[:i], worse)
        if limit is not None and value > limit:
            assert i not in _needed(every, worse)


def test_the_cutoff_counts_the_worse_options_past_the_ties():
    assert search.cutoff([], 3) is None
    assert search.cutoff([5, 5, 5, 5], 3) is None  # ties all, no worse one known yet
    assert search.cutoff([5, 7, 5, 9, 8], 3) == 9
    assert search.cutoff([5, 7, 7, 6], 3) == 7
    assert search.cutoff([6, 4], 0) == 4


def _same_plan(a, b) -> bool:
    return (a.sizes, a.slot, a.pools) == (b.sizes, b.slot, b.pools) and all(
        a.candidate[n].layout == b.candidate[n].layout for n in a.slot)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=scenarios, first=first_pool, second=second_pool, option=inter,
       other=inter, objective=objectives, offset=st.sampled_from([-1, 0, 1]))
def test_cutoffs_and_seeds_keep_the_optimum_and_the_plan(flags, first, second, option, other,
                                                         objective, offset):
    """On random small two-pool cases: below brute force's optimum a cutoff settles the option
    as BEATEN; at or above it, and seeded with another option's plan (carried over when it is
    a plan of this one), CP-SAT proves brute force's optimum and returns the plain solve's plan."""
    sc = two_pools(first, second, **flags, **objective)

    def space_of(o):
        staleness, fusion, swap, overlap_sync, partial = o
        return build_space(sc, staleness=staleness, fusion=fusion, swap=swap,
                           overlap_sync=overlap_sync, partial=partial, slots=2)

    space = space_of(option)
    best, _, _ = brute.solve(space)
    plain = cpsat.solve(space, 30)
    if best is None:
        assert plain.status == "INFEASIBLE"
        return
    assert plain.status == "OPTIMAL" and plain.objective == best
    _, seed, _ = brute.solve(space_of(other))
    seeds = [seed] if seed is not None else []
    carried = carry(space, seed) if seed is not None else None
    if carried is not None:  # a plan of this space, priced as this space prices it
        assert valid(space, carried) and fits(space, carried) and meets_target(space, carried)
        assert score(space, carried) >= best
    cut = best + offset
    result = cpsat.solve(space, 30, cutoff=cut, seeds=seeds)
    if cut < best:
        assert result.status == cpsat.BEATEN and result.choice is None
        assert result.bound == cut + 1
        return
    assert result.status == "OPTIMAL" and result.objective == best
    assert _same_plan(result.choice, plain.choice)
    assert (result.candidates, result.variables) == (plain.candidates, plain.variables)


def test_plan_is_the_same_with_and_without_the_shortcuts(monkeypatch):
    """A two-pool scenario with sixteen inter-model options: some are settled by a cutoff
    (BEATEN), only the shown options' optima are pinned, and the plan — alternatives
    included — is the one solving every option to its optimum on its own gives."""
    sc = two_pools(("a", "h100-sxm", 2, 3.99), ("b", "h20", 2, 1.5), algorithm="grpo",
                   **{"workload.samples_per_prompt": 4, "search.max_staleness": 1})
    allowed = options(sc, 1, False)
    outcomes = search._search(sc, allowed, search.Deadline.after(120), 1)
    assert any(o.result.status == cpsat.BEATEN for o in outcomes)
    fast = search.plan(sc, workers=1)
    plain_solve = cpsat.solve
    monkeypatch.setattr(cpsat, "solve",  # every option solved alone, every optimum pinned
                        lambda space, limit, workers, cutoff=None, seeds=(), pin=False:
                        plain_solve(space, limit, workers))
    slow = search.plan(sc, workers=1)

    def comparable(p):
        data = p.model_dump(mode="json", exclude={"scenario"})
        data["search"].pop("wall_s")
        data["search"].pop("time_limit_s")
        return data

    assert comparable(fast) == comparable(slow)
    assert fast.explanation["alternatives"]


def test_an_option_its_share_cut_short_gets_the_time_the_others_left(monkeypatch):
    """The first option solved stops at its share, FEASIBLE (as on a slow machine); once every
    option has had its share it is solved again, and the search answers its proven optimum."""
    sc = load_scenario(None, {
        "algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
        "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
        "workload.prompt_len": 256, "workload.response_len": 512, "cluster.gpu": "h100-sxm",
        "cluster.nodes": 1, "cluster.gpus_per_node": 4, "search.max_staleness": 1})
    allowed = options(sc, 1, False)
    plain_solve, calls = cpsat.solve, []

    def first_cut_short(space, limit, *args, **kwargs):
        result = plain_solve(space, limit, *args, **kwargs)
        calls.append(space)
        if len(calls) == 1:  # its share ran out: the plan it had, no proof
            assert result.status == "OPTIMAL"
            return cpsat.Result("FEASIBLE", result.choice, result.objective, None,
                                result.wall_s, result.variables)
        return result

    monkeypatch.setattr(cpsat, "solve", first_cut_short)
    outcomes = search._search(sc, allowed, search.Deadline.after(120), 1)
    cut = next(o for o in outcomes if o.space is calls[0])
    assert calls.count(calls[0]) == 2 and cut.result.status in model.SETTLED
    assert all(o.result.status in model.SETTLED for o in outcomes)


def test_only_the_shown_options_are_pinned_each_to_the_plain_solves_plan():
    """`plan` pins (re-solves for the canonical plan) only the options it shows: each shown
    one gets the plain solve's plan; the other proven optima keep the plan CP-SAT found."""
    sc = two_pools(("a", "h100-sxm", 2, 3.99), ("b", "h20", 2, 1.5), algorithm="grpo",
                   **{"workload.samples_per_prompt": 8, "search.max_staleness": 1})
    outcomes = search._search(sc, options(sc, 1, False), search.Deadline.after(120), 1)
    ranked = search._feasible(outcomes)
    assert all(not o.result.pinned for o in ranked if o.result.status == "OPTIMAL")
    search.pin_shown(ranked, search.Deadline.after(120))()  # the others pinned too
    shown = [id(o) for o in explain.shown(ranked)]
    assert len(shown) > 1
    for o in ranked:
        if id(o) in shown:
            assert o.result.pinned
            assert _same_plan(o.result.choice, cpsat.solve(o.space, 30).choice)
        else:
            assert not o.result.pinned
    assert len(shown) < len(ranked)  # some proven optimum's re-solve was skipped


# GRPO Qwen2.5-32B, the state offloaded during generation the best option, whose rollout group
# the options before it (or its own space counting host memory, `host.py`) re-price KV sizes
# of: on 8 A100-40GB, and on 4 H100s with responses up to 2,048
SHARED_KV_SIZES = {"algorithm": "grpo", "models.actor": "qwen2.5-32b",
                   "models.reference": "actor", "workload.prompts_per_step": 256,
                   "workload.samples_per_prompt": 8, "workload.prompt_len": 256,
                   "workload.response_len": 1024, "workload.max_response_len": 1024,
                   "cluster.gpu": "a100-sxm-40gb", "cluster.nodes": 1, "cluster.gpus_per_node": 8}


@pytest.mark.parametrize("flags", [
    SHARED_KV_SIZES,
    SHARED_KV_SIZES | {"workload.max_response_len": 2048, "cluster.gpu": "h100-sxm",
                       "cluster.gpus_per_node": 4}])
def test_an_option_solves_with_the_kv_sizes_another_space_priced(flags):
    """Spaces share the rollout's priced KV sizes (`PriceCache`): one whose candidates were
    priced before another space priced a size inside its gap prices them again with it rather
    than taking the size as priced and stopping short of its optimum (then: 979.7 s FEASIBLE
    on the first, where the option alone proves 966.1 s; FEASIBLE at the optimum on the
    second)."""
    sc = load_scenario(None, flags)
    chosen = search.plan(sc, explain=False)
    alone = [cpsat.solve(build_space(sc, staleness=o.staleness, fusion=o.fusion,
                                     shared=o.shared, swap=o.swap,
                                     overlap_sync=o.overlap_sync, partial=o.partial),
                         60, pin=False) for o in options(sc, 0, False)]
    assert all(r.status in model.SETTLED for r in alone)
    assert chosen.search["status"] == "OPTIMAL"
    assert chosen.search["objective_ms"] == min(r.objective for r in alone
                                                if r.status == "OPTIMAL")

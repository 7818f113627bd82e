"""The search's bounds: every candidate's lower bound holds for every choice that uses it,
the greedy incumbent is a legal choice that fits, and pruning by it keeps the optimum."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from planner.search import brute
from planner.search.bounds import (
    incumbent,
    lower_bound,
    placement_lower_bound,
    prune,
    space_lower_bound,
    stage_floors,
)
from planner.search.choice import fits, meets_target, score, valid
from planner.search.space import build_space
from tests.test_search import inter, objectives, scenarios, small


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=scenarios, option=inter, objective=objectives)
def test_bounds_hold_on_every_choice(flags, option, objective):
    staleness, fusion, swap, overlap_sync, partial = option
    space = build_space(small(**flags, **objective), staleness=staleness, fusion=fusion,
                        swap=swap, overlap_sync=overlap_sync, partial=partial, slots=2)
    floors = stage_floors(space)
    best = None
    for ch in brute.enumerate_choices(space):
        if not fits(space, ch) or not meets_target(space, ch):
            continue
        value = score(space, ch)
        best = value if best is None else min(best, value)
        for t in space.tasks:
            k = ch.slot[t.name]
            assert lower_bound(space, ch.candidate[t.name], ch.pool(k), ch.sizes[k],
                               floors) <= value
    start = incumbent(space)
    if start is None:
        return
    assert valid(space, start) and fits(space, start) and meets_target(space, start)
    bound = score(space, start)
    assert best is not None and bound >= best
    assert brute.solve(prune(space, bound))[0] == best  # pruning keeps the optimum


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=scenarios, option=inter, objective=objectives)
def test_the_placement_bound_holds_and_is_no_weaker(flags, option, objective):
    """`placement_lower_bound` is at most every choice's score (priced plans, and the same
    with the KV cache that fits where the generation sits: brute force's space) and at least
    the static `space_lower_bound`; None exactly when there is no choice at all."""
    staleness, fusion, swap, overlap_sync, partial = option
    space = build_space(small(**flags, **objective), staleness=staleness, fusion=fusion,
                        swap=swap, overlap_sync=overlap_sync, partial=partial, slots=2)
    bound, static = placement_lower_bound(space), space_lower_bound(space)
    if static is None:
        assert bound is None
        return
    scores = [score(space, ch) for ch in brute.enumerate_choices(space)]
    if bound is None:
        assert scores == []
        return
    assert bound >= static
    assert all(bound <= s for s in scores)
    best = brute.solve(space)[0]  # with the KV caches that fit where they sit too
    assert best is None or bound <= best

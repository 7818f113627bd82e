"""`fit.kv_tokens_within`: the largest KV cache whose need is within the room, exactly — the
same size a bisection over every token count finds, for needs affine in the tokens but for
rounding (what the memory model gives), convex (a pipeline's peak stage changing) and with
jumps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.cost.fit import kv_tokens_within
from planner.cost.groups import amount_over
from planner.cost.rollout_stage import kv_cache_layout, kv_need_mib
from planner.errors import InfeasibleError
from planner.plan import Layout
from planner.specs.scenario import load_scenario


def bisected(need, room: int, longest: int, useful: int) -> int | None:
    if useful < longest or need(longest) > room:
        return None
    if need(useful) <= room:
        return useful
    lo, hi = longest, useful
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= room else (lo, mid)
    return lo


NEEDS = {
    "affine, whole MiB": lambda a, b, c, jumps: lambda t: math.ceil(a + b * t),
    "peak of two stages": lambda a, b, c, jumps: lambda t: math.ceil(max(a + b * t,
                                                                         2 * a + c * t)),
    "with jumps": lambda a, b, c, jumps: lambda t: (math.floor(a + b * t)
                                                   + 64 * sum(t >= j for j in jumps)),
}


@given(kind=st.sampled_from(sorted(NEEDS)), a=st.integers(0, 80_000),
       b=st.floats(1e-5, 2.0), c=st.floats(1e-6, 1.0),
       jumps=st.lists(st.integers(1, 10**7), max_size=4),
       longest=st.integers(1, 40_000), extra=st.integers(-5, 10**7), room=st.integers(0, 10**6))
def test_the_largest_size_within_the_room_as_bisection_finds_it(kind, a, b, c, jumps, longest,
                                                                 extra, room):
    need = NEEDS[kind](a, b, c, jumps)
    useful = longest + extra
    assert kv_tokens_within(need, room, longest, useful) == bisected(need, room, longest, useful)


def test_a_need_affine_but_for_rounding_takes_a_few_calls():
    """Qwen2.5-7B's KV cache (14,336 bytes a token) beside 483 MiB: bisecting the range takes
    23 calls, interpolating and bisecting in turn took 41–46."""
    asked = []

    def need(tokens: int) -> int:
        asked.append(tokens)
        return math.ceil(483.4 + tokens * 14_336 / 2**20)

    for room in (28_074, 48_046, 75_000):
        asked.clear()
        got = kv_tokens_within(need, room, 9_216, 9_437_184)
        assert len(asked) <= 16
        assert need(got) <= room < need(got + 1)


def test_a_kv_cache_that_does_not_fit_says_by_how_much():
    """The refusal names the overflow: in GiB, or a sliver of one in MiB (not "0.0 GiB")."""
    sc = load_scenario(None, {"algorithm": "grpo", "models.actor": "qwen2.5-7b",
                              "models.reference": "actor", "workload.prompts_per_step": 64,
                              "workload.samples_per_prompt": 4, "workload.prompt_len": 512,
                              "workload.response_len": 1024, "cluster.gpu": "h100-sxm",
                              "cluster.nodes": 1})
    layout = Layout(group="g0", dp=8, kv_cache_tokens=200_000)
    need = kv_need_mib(sc, layout, False)(200_000)
    for room, said in ((need - 3, "3 MiB over"), (need - 2048, "2.0 GiB over")):
        with pytest.raises(InfeasibleError, match=said):
            kv_cache_layout(sc, layout, False, room)
    assert kv_cache_layout(sc, layout, False, need).kv_cache_tokens == 200_000


def test_an_overflow_is_said_in_gib_or_a_sliver_in_mib():
    assert (amount_over(2048), amount_over(102.4), amount_over(102.3), amount_over(0.2)) == (
        "2.0 GiB", "0.1 GiB", "103 MiB", "1 MiB")

"""The fast rollout schedule is the reference event loop's, row for row: the same segments,
prefills, preemptions and carried tokens (so every price built on them is the same to the bit),
whatever the order in which KV sizes are asked for (a run the cache never bound serves every
larger cache, `rollout._Unbound`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost import rollout
from planner.cost.rollout import PREFILL_COLUMNS, schedule
from tests.cost.rollout_reference import FIELDS, reference_schedule


def assert_same(lengths: np.ndarray, dp: int, prompt: int, kv: int, max_seqs: int,
                partial: bool) -> None:
    fast = schedule.__wrapped__(lengths, dp, prompt, kv, max_seqs, partial)
    ref = reference_schedule(lengths, dp, prompt, kv, max_seqs, partial)
    for name in FIELDS:
        a, b = ((fast.column(name), ref.column(name)) if name in PREFILL_COLUMNS
                else (getattr(fast, name), getattr(ref, name)))
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert np.array_equal(fast.prefills, ref.prefills)  # no row without a prefill
    assert (fast.preemptions, fast.carried) == (ref.preemptions, ref.carried)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80),
       prompt=st.integers(1, 64), spares=st.lists(st.integers(0, 4000), min_size=1, max_size=5),
       max_seqs=st.integers(1, 40), dp=st.integers(1, 4), partial=st.booleans())
def test_schedule_is_the_reference_loops(lengths, prompt, spares, max_seqs, dp, partial):
    # several KV sizes for the same replicas, in the order drawn: tight ones preempt, loose
    # ones reuse a run the cache never bound
    arr = np.array(lengths, dtype=np.int64)
    for spare in spares:
        assert_same(arr, min(dp, len(lengths)), prompt, prompt + max(lengths) + spare, max_seqs,
                    partial)


def test_a_run_the_cache_never_bound_serves_larger_caches():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 400, size=64)
    rollout._UNBOUND.clear()
    roomy = 64 * (50 + 400)  # every sequence at once, never preempted
    for kv in (roomy, 4 * roomy, roomy // 8, 2 * roomy, 450):
        assert_same(lengths, 2, 50, kv, 64, False)
    (free,) = rollout._UNBOUND.runs.values()  # the runs kept, one per replica
    assert len(free.peak) == 2 and (free.peak <= roomy).all()


def test_stream_of_partial_rollouts_at_scale():
    # the shapes the search meets: hundreds of sequences per replica, KV-bound and not
    rng = np.random.default_rng(3)
    lengths = np.clip(rng.lognormal(6, 0.8, size=600).astype(np.int64), 1, 4096)
    for kv in (4096 + 256, 40_000, 400_000, 4_000_000):
        for partial in (False, True):
            assert_same(lengths, 2, 256, kv, 200, partial)

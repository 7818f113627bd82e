"""The compiled replica simulation (`planner/cost/_rollout_sim.c`) is the Python one's, run for
run: the same segments, prefills, step ends, preemptions, carried tokens and peak, on random
replicas with and without partial rollouts, the cache binding or not. (The other rollout tests
go through `rollout.schedule`, so they hold whichever of the two this install runs to the
step-by-step loop and the older reference.)

Without a C compiler at install there is no compiled module and these tests skip, saying so;
`.ci/run` sets RLPLAN_REQUIRE_NATIVE=1, under which a missing module fails instead."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost import rollout

REQUIRED = os.environ.get("RLPLAN_REQUIRE_NATIVE") == "1"


@pytest.fixture(scope="module")
def native():
    if rollout._native is None:
        if REQUIRED:
            pytest.fail("RLPLAN_REQUIRE_NATIVE=1 but planner.cost._rollout_sim is not built "
                        "(pip install -e . needs a C compiler and the Python headers)")
        pytest.skip("the rollout simulation's C module is not built (no C compiler at install)")
    return rollout._native


def same_run(lengths: list[int], prompt: int, capacity: int, max_seqs: int, periods: int
             ) -> None:
    py = rollout._simulate_python(lengths, prompt, capacity, max_seqs, periods)
    c = rollout._simulate(np.array(lengths, dtype=np.int64), prompt, capacity, max_seqs,
                          periods)
    assert np.array_equal(py.seg, c.seg) and py.seg.shape == c.seg.shape
    assert np.array_equal(py.pre, c.pre) and py.pre.shape == c.pre.shape
    assert (py.ends, py.preemptions, py.carried, py.peak) == (
        c.ends, c.preemptions, c.carried, c.peak)


@settings(max_examples=400, deadline=None)
@given(lengths=st.lists(st.integers(1, 500), min_size=1, max_size=120),
       prompt=st.integers(0, 200), spare=st.integers(0, 6000), max_seqs=st.integers(1, 64),
       periods=st.sampled_from([0, 0, 1, 2, rollout.PARTIAL_PERIODS]))
def test_the_compiled_run_is_the_python_one(native, lengths, prompt, spare, max_seqs,
                                            periods):
    same_run(lengths, prompt, prompt + max(lengths) + spare, max_seqs, periods)


def test_a_long_preempting_replica_is_the_same(native):
    # thousands of segments, most of them cut by the cache filling (preemption by
    # recomputation), as the search's small KV sizes give
    lengths = np.random.default_rng(0).integers(100, 8192, 1024).tolist()
    for capacity, periods in ((9_216, 0), (300_000, 0), (1_000_000, rollout.PARTIAL_PERIODS)):
        same_run(lengths, 1024, capacity, 256, periods)


def test_responses_longer_than_the_calendar_window_are_the_same(native):
    # past 65,536 steps (the C module's MAX_WINDOW) one bucket holds requests due a window
    # apart: 65,536 and 131,072 share step 0's, and their finishes land in the same bucket
    rng = np.random.default_rng(1)
    lengths = [65_536, 131_072, 65_537, 3, 200_000,
               *rng.integers(1, 300_000, 40).tolist()]
    longest = max(lengths)
    for capacity, periods in ((longest + 10, 0), (longest + 2_000_000, 0),
                              (3 * longest, rollout.PARTIAL_PERIODS), (10**9, 0)):
        same_run(lengths, 7, capacity, 16, periods)


def test_bad_arguments_are_refused_not_crashed(native):
    with pytest.raises(ValueError, match="max_seqs"):
        native.simulate(np.array([], dtype=np.int64), 1, 10, 1, 0)
    with pytest.raises(ValueError, match="max_seqs"):
        native.simulate(np.array([5], dtype=np.int64), 1, 10, 0, 0)

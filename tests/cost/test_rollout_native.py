"""The compiled replica simulation (`planner/cost/_rollout_sim.c`) is the Python one's, run for
run: the same segments, prefills, step ends, preemptions, carried tokens and peak, on random
replicas with and without partial rollouts, the cache binding or not. (The other rollout tests
go through `rollout.schedule`, so they hold whichever of the two this install runs to the
step-by-step loop and the older reference.)

Without a C compiler at install there is no compiled module and these tests skip, saying so;
`.ci/run` sets RLPLAN_REQUIRE_NATIVE=1, under which a missing module fails instead."""

from __future__ import annotations

import dataclasses
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


def same_runs(lengths: list[int], prompt: int, capacity: int, max_seqs: int, periods: int,
              cuts: int = 1) -> None:
    """The compiled runs of `lengths` cut into `cuts` replicas (one call) are the Python
    ones, replica by replica."""
    chunks = rollout.replica_chunks(len(lengths), cuts)
    c = rollout._simulate(np.array(lengths, dtype=np.int64), chunks, prompt, capacity,
                          max_seqs, periods)
    py = rollout._Runs.join(*(rollout._simulate_python(lengths[a:b], prompt, capacity,
                                                       max_seqs, periods)
                              for a, b in chunks.tolist()))
    for f in dataclasses.fields(rollout._Runs):
        a, b = getattr(py, f.name), getattr(c, f.name)
        assert a.shape == b.shape and np.array_equal(a, b), f.name


@settings(max_examples=400, deadline=None)
@given(lengths=st.lists(st.integers(1, 500), min_size=1, max_size=120),
       prompt=st.integers(0, 200), spare=st.integers(0, 6000), max_seqs=st.integers(1, 64),
       periods=st.sampled_from([0, 0, 1, 2, rollout.PARTIAL_PERIODS]), cuts=st.integers(1, 4))
def test_the_compiled_runs_are_the_python_ones(native, lengths, prompt, spare, max_seqs,
                                               periods, cuts):
    same_runs(lengths, prompt, prompt + max(lengths) + spare, max_seqs, periods,
              min(cuts, len(lengths)))


def test_a_long_preempting_replica_is_the_same(native):
    # thousands of segments, most of them cut by the cache filling (preemption by
    # recomputation), as the search's small KV sizes give
    lengths = np.random.default_rng(0).integers(100, 8192, 1024).tolist()
    for capacity, periods in ((9_216, 0), (300_000, 0), (1_000_000, rollout.PARTIAL_PERIODS)):
        same_runs(lengths, 1024, capacity, 256, periods, cuts=3)


def test_responses_longer_than_the_calendar_window_are_the_same(native):
    # past 65,536 steps (the C module's MAX_WINDOW) one bucket holds requests due a window
    # apart: 65,536 and 131,072 share step 0's, and their finishes land in the same bucket
    rng = np.random.default_rng(1)
    lengths = [65_536, 131_072, 65_537, 3, 200_000,
               *rng.integers(1, 300_000, 40).tolist()]
    longest = max(lengths)
    for capacity, periods in ((longest + 10, 0), (longest + 2_000_000, 0),
                              (3 * longest, rollout.PARTIAL_PERIODS), (10**9, 0)):
        same_runs(lengths, 7, capacity, 16, periods)


def test_bad_arguments_are_refused_not_crashed(native):
    one = np.array([[0, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match="empty or outside"):
        native.simulate(np.array([], dtype=np.int64), one, 1, 10, 1, 0)
    with pytest.raises(ValueError, match="empty or outside"):
        native.simulate(np.array([5, 6], dtype=np.int64), np.array([[1, 1]], dtype=np.int64),
                        1, 10, 1, 0)
    with pytest.raises(ValueError, match="max_seqs"):
        native.simulate(np.array([5], dtype=np.int64), one, 1, 10, 0, 0)


def test_without_the_compiled_module_the_schedules_are_the_same(native, monkeypatch):
    # the Python runs, joined run by run, make the schedules the compiled call makes at once
    lengths = np.random.default_rng(2).integers(1, 600, 96)
    cases = [(dp, kv, partial) for dp in (1, 3) for kv in (700, 5_000, 60_000)
             for partial in (False, True)]

    def schedules() -> list[rollout.Schedule]:
        rollout._UNBOUND.clear()
        return [rollout.schedule.__wrapped__(lengths, dp, 64, kv, 24, partial)
                for dp, kv, partial in cases]

    compiled = schedules()
    monkeypatch.setattr(rollout, "_native", None)
    for a, b in zip(compiled, schedules(), strict=True):
        for f in dataclasses.fields(rollout.Schedule):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f.name

"""The continuous-batching simulation (`planner.cost.rollout`) against a step-by-step loop of
the same engine rules, on small random cases, plus hand-checked schedules."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost.rollout import PARTIAL_PERIODS, schedule
from tests.cost.rollout_reference import replica_chunks


def stepwise(lengths: list[int], prompt: int, capacity: int, max_seqs: int,
             periods: int | None = None) -> list[tuple]:
    """One replica, one decode step at a time: (batch, kv read, fresh, fresh tokens, fresh
    squares, recomputed, recomputed tokens, recomputed squares, completed, period) per step.
    The rules of the module docstring, written the plain way."""
    share = len(lengths)
    ahead = share + min(max_seqs, share) if periods else share  # queued, never started
    length = [lengths[k % share] for k in range(ahead)]
    gen, started = [0] * ahead, [False] * ahead
    waiting, running, used, rows, period = deque(range(ahead)), [], 0, [], 0
    completed = 0
    while waiting or running:
        preempted = False
        while used + len(running) > capacity:
            i = running.pop()
            used -= prompt + gen[i]
            waiting.appendleft(i)
            preempted = True
        pre = [0] * 6
        while not preempted and waiting and len(running) < max_seqs:
            i = waiting[0]
            c = prompt + gen[i]
            if used + len(running) + c + 1 > capacity:
                break
            waiting.popleft()
            started[i] = True
            k = 3 if gen[i] else 0
            pre[k], pre[k + 1], pre[k + 2] = pre[k] + 1, pre[k + 1] + c, pre[k + 2] + c * c
            running.append(i)
            used += c
        b = len(running)
        kv = used + b
        used += b
        for i in running:
            gen[i] += 1
        done = [i for i in running if gen[i] == length[i]]
        for i in done:
            running.remove(i)
            used -= prompt + length[i]
        rows.append((b, kv, *pre, len(done), period))
        completed += len(done)
        if periods is not None and completed >= len(lengths):
            period, completed = period + 1, 0
            if period == periods:
                break
            waiting.extendleft(reversed(running))  # interrupted: wait in front, keep tokens
            running, used = [], 0
            for _ in range(ahead - started.count(False)):  # top the queue up
                waiting.append(len(length))
                length.append(lengths[len(length) % share])
                gen.append(0)
                started.append(False)
    return rows


def expand(sched, replica: int) -> list[tuple]:
    """A schedule's segments for one replica, one row per decode step (as `stepwise`)."""
    rows = []
    for k in np.flatnonzero(sched.replica == replica):
        b, m = int(sched.batch[k]), int(sched.steps[k])
        pre = [int(sched.column(f)[k]) for f in ("fresh", "fresh_tokens", "fresh_sq", "re",
                                                    "re_tokens", "re_sq")]
        for j in range(m):
            rows.append((b, int(sched.kv[k]) + b * j, *(pre if j == 0 else [0] * 6),
                         int(sched.done[k]) if j == m - 1 else 0, int(sched.period[k])))
    return rows


@settings(max_examples=150, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=24),
       prompt=st.integers(1, 12), spare=st.integers(0, 200), max_seqs=st.integers(1, 30),
       dp=st.integers(1, 3), partial=st.booleans())
def test_events_agree_with_a_step_by_step_loop(lengths, prompt, spare, max_seqs, dp, partial):
    dp = min(dp, len(lengths))
    capacity = prompt + max(lengths) + spare
    arr = np.array(lengths, dtype=np.int64)
    sched = schedule(arr, dp, prompt, capacity, max_seqs, partial)
    for r, chunk in enumerate(replica_chunks(len(lengths), dp)):
        expected = stepwise(lengths[chunk], prompt, capacity, max_seqs,
                            PARTIAL_PERIODS if partial else None)
        assert expand(sched, r) == expected


def test_equal_lengths_all_fitting_is_one_segment():
    # 8 sequences of 100 tokens, room for all: one segment of 100 steps at batch 8,
    # reading 8·(prompt + 1) tokens first; one fresh prefill of 8 prompts.
    sched = schedule(np.full(8, 100), 1, 50, 8 * 150 + 8, 64)
    assert sched.steps.tolist() == [100]
    assert sched.batch.tolist() == [8]
    assert sched.kv.tolist() == [8 * 51]
    assert (sched.column("fresh").tolist(), sched.column("fresh_tokens").tolist()) == ([8], [400])
    assert sched.done.tolist() == [8] and sched.preemptions == 0


def test_waves_when_the_cap_binds():
    # 6 sequences of 10 tokens, at most 2 at a time: three waves of 10 steps.
    sched = schedule(np.full(6, 10), 1, 5, 10_000, 2)
    assert sched.steps.tolist() == [10, 10, 10]
    assert sched.batch.tolist() == [2, 2, 2]
    assert sched.done.tolist() == [2, 2, 2]


def test_kv_exhaustion_preempts_the_youngest():
    # KV for 29 tokens, prompt 5: two sequences of 10 start (10 prompt tokens + 2 slots),
    # grow by 2 per step; after 9 steps they hold 28 and cannot both grow: the younger is
    # preempted, the elder finishes its last step alone, then the younger recomputes its
    # prompt and 9 tokens (14) and runs its last step.
    sched = schedule(np.array([10, 10]), 1, 5, 29, 8)
    assert sched.preemptions == 1
    assert sched.steps.tolist() == [9, 1, 1]
    assert sched.batch.tolist() == [2, 1, 1]
    assert sched.column("re_tokens").tolist() == [0, 0, 14]
    assert sched.done.tolist() == [0, 1, 1]


def test_one_sequence_must_fit():
    with pytest.raises(ValueError, match="cannot hold one sequence"):
        schedule(np.array([10, 20]), 1, 5, 24, 4)


def test_prompts_stay_on_one_replica():
    chunks = replica_chunks(16, 4)  # 4 prompts × 4 samples on 4 replicas
    assert [(c.start, c.stop) for c in chunks] == [(0, 4), (4, 8), (8, 12), (12, 16)]

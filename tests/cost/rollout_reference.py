"""The rollout event loop as it stood before the fast path (planner/cost/rollout.py at commit
a50af3f): the reference `tests/cost/test_rollout_exact.py` holds `rollout.schedule` to, row
for row, on inputs too large for the step-by-step loop of `test_rollout.py`. Kept verbatim
but for the names; not used by the package."""

from __future__ import annotations

import heapq
import itertools
from collections import deque

import numpy as np

from planner.cost.rollout import PARTIAL_PERIODS, PREFILL_COLUMNS, Schedule, replica_bounds


def replica_chunks(n: int, dp: int) -> list[slice]:
    """Each replica's sequences as a slice (`rollout.replica_bounds`)."""
    return [slice(a, b) for a, b in itertools.pairwise(replica_bounds(n, dp))]


FIELDS = ("replica", "steps", "batch", "kv", "fresh", "fresh_tokens", "fresh_sq", "re",
          "re_tokens", "re_sq", "done", "period")


def reference_schedule(lengths: np.ndarray, dp: int, prompt_len: int, kv_tokens: int,
                       max_seqs: int, partial: bool = False) -> Schedule:
    """`rollout.schedule` as it was (its callers keep kv_tokens ≥ one longest sequence)."""
    rows: list[tuple] = []
    preemptions, carried = 0, [0] * (PARTIAL_PERIODS - 1) if partial else []
    for r, chunk in enumerate(replica_chunks(len(lengths), dp)):
        mine = lengths[chunk].tolist()
        if not partial and len(mine) <= max_seqs and sum(mine) + len(mine) * prompt_len <= (
                kv_tokens):
            _all_fit(mine, prompt_len, r, rows)
            continue
        p, c = _simulate(mine, prompt_len, kv_tokens, max(1, max_seqs), r, rows,
                         PARTIAL_PERIODS if partial else 0)
        preemptions += p
        carried = [a + b for a, b in zip(carried, c, strict=True)] if partial else carried
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS)
    arrays = {name: np.array(col, dtype=np.int64) for name, col in zip(FIELDS, cols,
                                                                        strict=True)}
    columns = np.stack([arrays.pop(name) for name in PREFILL_COLUMNS], axis=1).reshape(-1, 6)
    at = np.flatnonzero(columns.any(axis=1))
    prefills = np.column_stack([at, columns[at]]).astype(np.int64).reshape(-1, 7)
    return Schedule(**arrays, prefills=prefills, preemptions=preemptions,
                    carried=tuple(carried))


def _all_fit(lengths: list[int], prompt: int, replica: int, rows: list[tuple]) -> None:
    """A replica whose every sequence fits at its full length together: all start at step 0,
    never preempted; a segment ends at each distinct length."""
    order = sorted(lengths)
    n, start, k = len(order), 0, 0
    while k < n:
        end = order[k]
        done = 1
        while k + done < n and order[k + done] == end:
            done += 1
        b = n - k
        fresh = (n, n * prompt, n * prompt * prompt) if k == 0 else (0, 0, 0)
        rows.append((replica, end - start, b, b * (prompt + start + 1), *fresh, 0, 0, 0,
                     done, 0))
        start, k = end, k + done


def _simulate(lengths: list[int], prompt: int, capacity: int, max_seqs: int, replica: int,
              rows: list[tuple], periods: int = 0) -> tuple[int, list[int]]:
    """One engine replica's event loop (module docstring); appends its segments to `rows` and
    returns (preemptions, tokens of the unfinished responses at each step boundary).
    `periods` > 0: partial rollouts over that many steps."""
    share = len(lengths)
    length: list[int] = []  # response tokens, per request id
    progress: list[int] = []  # tokens generated before the current admission
    admitted: list[int] = []  # step of the current admission (-1: not running)
    due: list[int] = []  # step the current admission finishes at (-1: not running)
    started: list[bool] = []  # admitted at least once
    waiting: deque[int] = deque()
    stack: list[int] = []  # running, in admission order (lazily pruned)
    heap: list[tuple[int, int]] = []  # (due step, id), lazily pruned
    now = used = running = preemptions = period = completed = 0
    carried: list[int] = []
    push, pop = heapq.heappush, heapq.heappop

    supply = itertools.cycle(lengths)
    unstarted = 0  # queued, never admitted

    def add(count: int) -> None:
        nonlocal unstarted
        for _ in range(count):
            length.append(next(supply))
            progress.append(0)
            admitted.append(-1)
            due.append(-1)
            started.append(False)
            waiting.append(len(length) - 1)
        unstarted += count

    # partial rollouts: the next prompts are always queued (a step admits at most its share
    # plus a full batch), so the engine never drains
    ahead = share + min(max_seqs, share) if periods else share
    add(ahead)
    while waiting or running:
        preempted = False
        while used + running > capacity:  # reserve the running sequences' new slots
            i = stack.pop()
            if admitted[i] < 0:
                continue  # finished since it was admitted
            g = progress[i] + now - admitted[i]
            used -= prompt + g
            progress[i], admitted[i], due[i] = g, -1, -1
            running -= 1
            preemptions += 1
            waiting.appendleft(i)
            preempted = True
        fresh = fresh_tokens = fresh_sq = re = re_tokens = re_sq = 0
        while not preempted and waiting and running < max_seqs:
            i = waiting[0]
            c = prompt + progress[i]
            if used + running + c + 1 > capacity:
                break
            waiting.popleft()
            if progress[i]:
                re, re_tokens, re_sq = re + 1, re_tokens + c, re_sq + c * c
            else:
                fresh, fresh_tokens, fresh_sq = fresh + 1, fresh_tokens + c, fresh_sq + c * c
            if not started[i]:
                started[i] = True
                unstarted -= 1
            admitted[i] = now
            d = due[i] = now + length[i] - progress[i]
            push(heap, (d, i))
            stack.append(i)
            used += c
            running += 1
        top, i = heap[0]
        while due[i] != top:  # finished or preempted since it was pushed
            pop(heap)
            top, i = heap[0]
        b = running
        steps = min(top - now, (capacity - used) // b)
        kv = used + b
        now += steps
        used += b * steps
        done = 0
        while heap and heap[0][0] == now:
            _, i = pop(heap)
            if due[i] == now:
                used -= prompt + length[i]
                progress[i], admitted[i], due[i] = length[i], -1, -1
                running -= 1
                done += 1
        rows.append((replica, steps, b, kv, fresh, fresh_tokens, fresh_sq, re, re_tokens, re_sq,
                     done, period))
        completed += done
        if periods and completed >= share:  # a step boundary (partial rollouts)
            period, completed = period + 1, 0
            if period == periods:
                break
            alive = [i for i in stack if admitted[i] >= 0]  # interrupted: wait in front
            for i in alive:
                progress[i], admitted[i], due[i] = progress[i] + now - admitted[i], -1, -1
            waiting.extendleft(reversed(alive))
            carried.append(sum(progress[i] for i in waiting))
            stack, heap, used, running = [], [], 0, 0
            add(ahead - unstarted)
    return preemptions, carried

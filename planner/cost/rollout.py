"""Continuous batching of rollouts on inference-engine replicas, simulated in decode steps.

The rollout of a step is `dp` engine replicas, each decoding the sequences of the prompts it
was sent (contiguous chunks of the step's prompts, all samples of a prompt together, as verl
and OpenRLHF dispatch them). This module turns each replica's response lengths into its
*schedule*: which sequences run together for how many decode steps, what KV cache they read,
and which prompts are (re)filled — in decode steps, independent of the hardware. The time
model (`generation.py`) prices a schedule; one schedule serves every layout with the same
replica count, KV capacity and concurrency cap.

The engine rules are vLLM V1's scheduler, at token granularity (no block rounding):
- A replica holds `kv_tokens` tokens of KV cache and runs at most `max_seqs` sequences.
- Every decode step each running sequence produces one token and writes its KV slot; a
  sequence of L tokens runs L steps and holds prompt + generated tokens.
- Before a step, the running sequences' new slots are reserved first; when they do not fit,
  the most recently admitted sequence is preempted — its KV freed, its progress kept, put at
  the front of the waiting queue — until they do (preemption by recomputation).
- Then, unless the step preempted, waiting sequences are admitted first come first served
  while their context (prompt + tokens already generated) and this step's slot fit; a newly
  admitted sequence is prefilled (a preempted one recomputes prompt and generated tokens).
  The first that does not fit blocks the rest.
Between two events (a completion, a preemption, an admission) the running batch is fixed and
its KV grows by one token per sequence per step, so each such run of steps is one *segment*
with a closed-form cost: the simulation costs events, not tokens.

Partial rollouts (`partial`): the stream of requests never runs dry (the next step's prompts
are already queued) and the step ends when the replica's share of sequences has finished;
whatever is still running is interrupted (KV dropped when the weights change) and continues
in the next step from where it stopped, recomputing its prompt and tokens. The schedule then
covers `PARTIAL_PERIODS` steps; the time model prices the later ones per token generated (in
steady state a step generates its share's tokens, however they straddle steps).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np

from planner.cost.memo import memo

PARTIAL_PERIODS = 3
"""Steps simulated under partial rollouts; the first warms the carried-over pool up, the
others are measured."""


@dataclass(frozen=True)
class Schedule:
    """The segments of every replica, replica after replica, each in time order.

    Per segment: `replica`, `steps` (≥ 1), `batch` (running sequences), `kv` (KV tokens the
    first step reads, new slots included; each later step reads `batch` more), the prefills at
    its start — `fresh` sequences with `fresh_tokens` prompt tokens in all and `fresh_sq` the
    sum of their squares (for the causal attention), and the same for preempted sequences
    recomputed (`re_*`: prompt and generated tokens) — and the
    sequences that complete at its end (`done`). Under partial rollouts `period` numbers the
    step each segment belongs to; `carried` is the tokens interrupted at each boundary.
    """

    replica: np.ndarray
    steps: np.ndarray
    batch: np.ndarray
    kv: np.ndarray
    fresh: np.ndarray
    fresh_tokens: np.ndarray
    fresh_sq: np.ndarray
    re: np.ndarray
    re_tokens: np.ndarray
    re_sq: np.ndarray
    done: np.ndarray
    period: np.ndarray
    preemptions: int
    carried: tuple[int, ...] = ()  # tokens of unfinished responses at each step boundary


_FIELDS = ("replica", "steps", "batch", "kv", "fresh", "fresh_tokens", "fresh_sq", "re",
           "re_tokens", "re_sq", "done", "period")


def replica_chunks(n: int, dp: int) -> list[slice]:
    """The sequences each of `dp` replicas receives: contiguous, sizes differing by at most one
    (`numpy.array_split`); sequences are prompt-major, so a prompt's samples stay together
    whenever the chunk size is a multiple of the samples per prompt."""
    if dp > n:
        raise ValueError(f"{dp} replicas for {n} sequences: some replica would get none")
    base, extra = divmod(n, dp)
    bounds = [k * base + min(k, extra) for k in range(dp + 1)]
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


@memo
def schedule(lengths: np.ndarray, dp: int, prompt_len: int, kv_tokens: int, max_seqs: int,
             partial: bool = False) -> Schedule:
    """The continuous-batching schedule of `lengths` (response tokens per sequence, prompt
    major) on `dp` replicas of `kv_tokens` KV tokens and at most `max_seqs` running sequences
    each; under `partial` the steady stream of partial rollouts (module docstring).

    Raises ValueError when one sequence at its full length does not fit the KV cache (the
    engine would refuse it; callers check memory first)."""
    longest = int(lengths.max())
    if kv_tokens < prompt_len + longest:
        raise ValueError(f"kv_tokens {kv_tokens} cannot hold one sequence of "
                         f"{prompt_len + longest} tokens")
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
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(_FIELDS)
    arrays = {name: np.array(col, dtype=np.int64) for name, col in zip(_FIELDS, cols,
                                                                        strict=True)}
    return Schedule(**arrays, preemptions=preemptions, carried=tuple(carried))


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

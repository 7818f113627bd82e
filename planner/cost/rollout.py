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

Each replica is simulated on its own, and only where the cache binds: a run in which the KV
cache never bound (no preemption, no admission held back, no segment cut short) is the run of
every larger cache too, so it is kept by what it depends on (the replica's lengths, the
prompt, the concurrency cap, partial or not) and serves every KV size above its peak demand
without simulating — the search's larger KV sizes, and any size it asks for lazily.

Partial rollouts (`partial`): the stream of requests never runs dry (the next step's prompts
are already queued) and the step ends when the replica's share of sequences has finished;
whatever is still running is interrupted (KV dropped when the weights change) and continues
in the next step from where it stopped, recomputing its prompt and tokens. The schedule then
covers `PARTIAL_PERIODS` steps; the time model prices the later ones per token generated (in
steady state a step generates its share's tokens, however they straddle steps).
"""

from __future__ import annotations

import dataclasses
import heapq
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
    first step reads, new slots included; each later step reads `batch` more), and the
    sequences that complete at its end (`done`). Under partial rollouts `period` numbers the
    step each segment belongs to; `carried` is the tokens interrupted at each boundary.
    `prefills` has a row for each segment that starts with prefills (few do), in segment
    order: the segment, then `PREFILL_COLUMNS` — `fresh` sequences with `fresh_tokens` prompt
    tokens in all and `fresh_sq` the sum of their squares (for the causal attention), and the
    same for preempted sequences recomputed (`re_*`: prompt and generated tokens); `column`
    gives one per segment.
    """

    replica: np.ndarray
    steps: np.ndarray
    batch: np.ndarray
    kv: np.ndarray
    prefills: np.ndarray
    done: np.ndarray
    period: np.ndarray
    preemptions: int
    carried: tuple[int, ...] = ()  # tokens of unfinished responses at each step boundary

    def column(self, name: str) -> np.ndarray:
        """One of `PREFILL_COLUMNS` per segment (0 where the segment prefills nothing)."""
        out = np.zeros(len(self.steps), dtype=np.int64)
        out[self.prefills[:, 0]] = self.prefills[:, 1 + PREFILL_COLUMNS.index(name)]
        return out


PREFILL_COLUMNS = ("fresh", "fresh_tokens", "fresh_sq", "re", "re_tokens", "re_sq")


def replica_bounds(n: int, dp: int) -> list[int]:
    """Where the sequences each of `dp` replicas receives start, then `n`: contiguous chunks,
    sizes differing by at most one (`numpy.array_split`); sequences are prompt-major, so a
    prompt's samples stay together whenever the chunk size is a multiple of the samples per
    prompt."""
    if dp > n:
        raise ValueError(f"{dp} replicas for {n} sequences: some replica would get none")
    base, extra = divmod(n, dp)
    k = np.arange(dp + 1)
    return (k * base + np.minimum(k, extra)).tolist()


def replica_chunks(n: int, dp: int) -> np.ndarray:
    """`replica_bounds` as (start, end) rows, one per replica."""
    bounds = np.array(replica_bounds(n, dp), dtype=np.int64)
    return np.stack([bounds[:-1], bounds[1:]], axis=1)


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
    periods, cap = PARTIAL_PERIODS if partial else 0, max(1, max_seqs)
    key = (lengths.dtype.str, _UNBOUND.step(lengths), dp, prompt_len, cap, periods)
    if (whole := _UNBOUND.whole(key, kv_tokens)) is not None:
        return whole
    chunks = replica_chunks(len(lengths), dp)
    known = _UNBOUND.runs.get(key)
    if known is None:
        known = _Runs.none(dp, periods)
    reuse = known.peak <= kv_tokens  # runs the cache never bound at a size up to this one
    fresh = _simulate(lengths, chunks[~reuse], prompt_len, kv_tokens, cap, periods)
    runs = _Runs.join(known, fresh).take(np.where(reuse, np.arange(dp),
                                                  dp + np.cumsum(~reuse) - 1))
    unbound = runs.peak <= kv_tokens
    if (unbound & ~reuse).any():  # runs to keep: each serves every larger cache
        _UNBOUND.put(key, _Runs.join(runs, known).take(
            np.where(unbound, np.arange(dp), dp + np.arange(dp))))
    out = _assemble(runs, periods)
    if unbound.all():
        _UNBOUND.put_whole(key, int(runs.peak.max()), out)
    return out


@dataclass(frozen=True)
class _Runs:
    """Replica runs, one after the other: `seg` rows (steps, batch, kv, done) and `pre` rows
    (segment within its run, fresh, fresh_tokens, fresh_sq, re, re_tokens, re_sq) for the
    segments that start with prefills, `seg_n` and `pre_n` of them per run; per run, `ends`
    its segment count at each step boundary (partial rollouts), `carried` the tokens
    interrupted at each but the last, its `preemptions`, and `peak` the most KV tokens it ever
    asked for (above the cache when the cache bound it; `NO_RUN` where a run is not known)."""

    seg: np.ndarray
    pre: np.ndarray
    seg_n: np.ndarray
    pre_n: np.ndarray
    ends: np.ndarray
    carried: np.ndarray
    preemptions: np.ndarray
    peak: np.ndarray

    NO_RUN = np.iinfo(np.int64).max

    @staticmethod
    def none(k: int, periods: int) -> _Runs:
        """`k` runs not known (no rows; a peak no cache reaches)."""
        zero = np.zeros(k, dtype=np.int64)
        return _Runs(seg=np.zeros((0, 4), np.int64), pre=np.zeros((0, 7), np.int64),
                     seg_n=zero, pre_n=zero, ends=np.zeros((k, periods), np.int64),
                     carried=np.zeros((k, max(periods - 1, 0)), np.int64), preemptions=zero,
                     peak=np.full(k, _Runs.NO_RUN))

    @staticmethod
    def join(*parts: _Runs) -> _Runs:
        """The runs of `parts`, in order."""
        return _Runs(*(np.concatenate([getattr(p, f.name) for p in parts])
                       for f in dataclasses.fields(_Runs)))

    def take(self, which: np.ndarray) -> _Runs:
        """The runs at positions `which`, in that order (all at once, not run by run)."""
        return _Runs(_rows(self.seg, self.seg_n, which), _rows(self.pre, self.pre_n, which),
                     self.seg_n[which], self.pre_n[which], self.ends[which],
                     self.carried[which], self.preemptions[which], self.peak[which])


def _rows(rows: np.ndarray, counts: np.ndarray, which: np.ndarray) -> np.ndarray:
    """The rows of the runs at `which` (`counts` rows each, one run after the other)."""
    starts = np.cumsum(counts) - counts
    n = counts[which]
    at = np.repeat(starts[which] - (np.cumsum(n) - n), n) + np.arange(n.sum())
    return rows[at]


class _Unbound:
    """Replica runs the KV cache never bound, by what a run depends on besides the cache (the
    step's lengths, the replica count, the prompt, the concurrency cap, the periods): each is
    the run of every cache at or above its peak (`_Runs` over the replicas, `NO_RUN` where
    none is known yet) — and likewise whole schedules no replica's cache bound (`schedule`
    then skips assembling its replicas: hundreds of them on a large cluster). At most `ROWS`
    segments are kept (tens of MB), then afresh."""

    ROWS = 1 << 21

    def __init__(self) -> None:
        self.runs: dict[tuple, _Runs] = {}
        self.wholes: dict[tuple, tuple[int, Schedule]] = {}
        self.steps: dict[bytes, bytes] = {}
        self.rows = 0

    def step(self, lengths: np.ndarray) -> bytes:
        """The step's lengths as a key — with the replica count, what the runs are kept by —
        one object per content, so that keys compare by identity, not 8 bytes a sequence."""
        data = lengths.tobytes()
        return self.steps.setdefault(data, data)

    def put(self, key: tuple, runs: _Runs) -> None:
        if (before := self.runs.get(key)) is not None:  # replaced: its rows are freed
            self.rows -= len(before.seg)
        self._room(len(runs.seg))
        self.runs[key] = runs

    def whole(self, key: tuple, capacity: int) -> Schedule | None:
        peak, sched = self.wholes.get(key, (capacity + 1, None))
        return sched if capacity >= peak else None

    def put_whole(self, key: tuple, peak: int, sched: Schedule) -> None:
        self._room(len(sched.steps))
        self.wholes[key] = (peak, sched)

    def _room(self, rows: int) -> None:
        if self.rows + rows > self.ROWS:
            self.clear()
        self.rows += rows

    def clear(self) -> None:
        self.runs.clear()
        self.wholes.clear()
        self.steps.clear()
        self.rows = 0


_UNBOUND = _Unbound()


def _assemble(runs: _Runs, periods: int) -> Schedule:
    """The replicas' runs as one `Schedule` (replica after replica)."""
    first = np.cumsum(runs.seg_n) - runs.seg_n
    prefills = runs.pre.copy()  # the runs' rows stay as they are
    prefills[:, 0] += np.repeat(first, runs.pre_n)
    if periods:  # each run's segments by period (one row of ends each)
        per = np.diff(runs.ends, axis=1, prepend=0).ravel()
        period = np.repeat(np.tile(np.arange(periods), len(runs.seg_n)), per)
    else:
        period = np.zeros(len(runs.seg), dtype=np.int64)
    seg = runs.seg
    return Schedule(replica=np.repeat(np.arange(len(runs.seg_n)), runs.seg_n),
                    steps=seg[:, 0], batch=seg[:, 1], kv=seg[:, 2], prefills=prefills,
                    done=seg[:, 3], period=period.astype(np.int64),
                    preemptions=int(runs.preemptions.sum()),
                    carried=tuple(int(c) for c in runs.carried.sum(axis=0)) if periods else ())


def _simulate(lengths: np.ndarray, chunks: np.ndarray, prompt: int, capacity: int,
              max_seqs: int, periods: int) -> _Runs:
    """The event loops of the engine replicas that run `lengths[a:b]` for each row (a, b) of
    `chunks` (module docstring; `periods` > 0: partial rollouts over that many steps):
    compiled (`_rollout_sim.c`, built at install when a C compiler is there: tens of times
    faster, all replicas in one call), else `_simulate_python`, run by run. Both give the same
    runs."""
    if _native is None:
        return _Runs.join(_Runs.none(0, periods), *(
            _simulate_python(lengths[a:b].tolist(), prompt, capacity, max_seqs, periods)
            for a, b in chunks.tolist()))
    parts = _native.simulate(np.ascontiguousarray(lengths, dtype=np.int64),
                             np.ascontiguousarray(chunks, dtype=np.int64), prompt, capacity,
                             max_seqs, periods)
    seg, pre, seg_n, pre_n, ends, preemptions, carried, peak = (
        np.frombuffer(p, dtype=np.int64) for p in parts)
    k = len(peak)
    return _Runs(seg=seg.reshape(-1, 4), pre=pre.reshape(-1, 7), seg_n=seg_n, pre_n=pre_n,
                 ends=ends.reshape(k, periods), carried=carried.reshape(k, max(periods - 1, 0)),
                 preemptions=preemptions, peak=peak)


def _load_native():
    """The compiled simulation when it is built and follows these rules (a stale build of
    older rules is not used), else None."""
    try:
        from planner.cost import _rollout_sim
    except ImportError:
        return None
    return _rollout_sim if getattr(_rollout_sim, "RULES_VERSION", None) == RULES_VERSION else None


RULES_VERSION = 2
"""The simulation's version, bumped with `_rollout_sim.c`'s whenever its rules or its call
change (2: all of a schedule's replicas in one call)."""

_native = _load_native()


def _simulate_python(lengths: list[int], prompt: int, capacity: int, max_seqs: int,
                     periods: int) -> _Runs:
    """One engine replica's event loop in Python: the reference the compiled one follows.

    Requests are numbered in the order they are queued (request i has length
    lengths[i % share]); the running ones are always the first alive ones in that order (a
    preempted or interrupted request returns to the front of the queue, ahead of younger
    ones), so a request with no progress has never run. A running request's tokens are
    `now − base`; a waiting one's, `progress`."""
    share = len(lengths)
    # partial rollouts: the next prompts are always queued (a step admits at most its share
    # plus a full batch), so the engine never drains
    ahead = share + min(max_seqs, share) if periods else share
    length = (lengths * (ahead // share + 1))[:ahead]
    progress = [0] * ahead  # tokens generated before the current admission
    base = [_IDLE] * ahead  # running: the step it would have started at, never interrupted
    waiting = deque(range(ahead))
    stack: list[int] = []  # running, in admission order (lazily pruned)
    heap: list[int] = []  # due step << shift | request, lazily pruned
    shift = (ahead * max(1, periods)).bit_length()
    mask = (1 << shift) - 1
    seg: list[int] = []  # steps, batch, kv, done per segment
    pre: list[int] = []  # segment, fresh, fresh tokens, fresh squares, re, re tokens, re squares
    ends: list[int] = []
    carried: list[int] = []
    now = used = running = preemptions = period = completed = peak = 0
    unstarted = ahead  # queued, never admitted
    bound = capacity + 1  # the peak of a run the cache bound
    push, pop = heapq.heappush, heapq.heappop
    requeue, admit, started, unstack = (waiting.appendleft, waiting.popleft, stack.append,
                                        stack.pop)
    while True:
        if used + running > capacity:  # reserve the running sequences' new slots
            peak = bound
            while used + running > capacity:
                i = unstack()
                a = base[i]
                if a == _IDLE:
                    continue  # finished since it was admitted
                g = now - a
                used -= prompt + g
                progress[i] = g
                base[i] = _IDLE
                running -= 1
                preemptions += 1
                requeue(i)
        elif waiting and running < max_seqs:
            fresh = fresh_tokens = fresh_sq = re = re_tokens = re_sq = 0
            while waiting and running < max_seqs:
                i = waiting[0]
                g = progress[i]
                c = prompt + g
                need = used + running + c + 1
                if need > capacity:
                    peak = bound
                    break
                if need > peak:
                    peak = need
                admit()
                if g:
                    re, re_tokens, re_sq = re + 1, re_tokens + c, re_sq + c * c
                else:
                    fresh, fresh_tokens, fresh_sq = fresh + 1, fresh_tokens + c, fresh_sq + c * c
                    unstarted -= 1
                a = base[i] = now - g
                push(heap, (a + length[i]) << shift | i)
                started(i)
                used += c
                running += 1
            if fresh or re:
                pre += (len(seg) >> 2, fresh, fresh_tokens, fresh_sq, re, re_tokens, re_sq)
        top = heap[0]
        i = top & mask
        while base[i] + length[i] != top >> shift:  # finished or preempted since pushed
            pop(heap)
            top = heap[0]
            i = top & mask
        b = running
        steps = (top >> shift) - now
        if used + b * steps > capacity:  # the cache fills first
            steps = (capacity - used) // b
            peak = bound
            kv = used + b
            now += steps
            used += b * steps
            seg += (steps, b, kv, 0)
            continue
        if used + b * steps > peak:
            peak = used + b * steps
        kv = used + b
        now += steps
        used += b * steps
        done = 0
        last = (now + 1) << shift
        while heap and heap[0] < last:
            i = pop(heap) & mask
            if base[i] + length[i] == now:
                used -= prompt + length[i]
                base[i] = _IDLE
                running -= 1
                done += 1
        seg += (steps, b, kv, done)
        completed += done
        if periods and completed >= share:  # a step boundary (partial rollouts)
            period, completed = period + 1, 0
            ends.append(len(seg) >> 2)
            if period == periods:
                break
            alive = [i for i in stack if base[i] != _IDLE]  # interrupted: wait in front
            for i in alive:
                progress[i], base[i] = now - base[i], _IDLE
            waiting.extendleft(reversed(alive))
            carried.append(sum(progress[i] for i in waiting))
            stack.clear()
            heap.clear()
            used = running = 0
            n, more = len(length), ahead - unstarted
            length += [lengths[k % share] for k in range(n, n + more)]
            progress += [0] * more
            base += [_IDLE] * more
            waiting.extend(range(n, n + more))
            unstarted += more
        elif not running and not waiting:
            break
    one = np.ones(1, dtype=np.int64)
    return _Runs(seg=np.array(seg, dtype=np.int64).reshape(-1, 4),
                 pre=np.array(pre, dtype=np.int64).reshape(-1, 7),
                 seg_n=one * (len(seg) // 4), pre_n=one * (len(pre) // 7),
                 ends=np.array(ends, dtype=np.int64).reshape(1, -1),
                 carried=np.array(carried, dtype=np.int64).reshape(1, -1),
                 preemptions=one * preemptions, peak=one * peak)


_IDLE = -(1 << 62)  # `base` of a request not running

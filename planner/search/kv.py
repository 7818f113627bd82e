"""The KV cache sizes the search prices for a generation layout, and the bound candidates
that stand for the sizes between them.

A generation shape's KV cache (tokens per replica) is priced on a ladder — one longest
sequence, doubling, up to the largest that fits the GPU alone; of its smaller sizes only those
whose rollout could beat the largest's (by a floor computed without simulating,
`generation_floor`) — and at the sizes the search later finds it needs
(`planner.search.refine`). Every size between two of the ladder's (priced or not) is stood for
by a *bound* candidate: the memory of the gap's smallest size and a time no rollout in the gap
can beat (`kv_bounds`). The optimum over priced and bound candidates is therefore a
lower bound over every KV size; when it uses a bound candidate the search prices the size
that fits where that generation sits and solves again, until the optimum is a priced plan.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from planner.cost.fit import kv_tokens_within
from planner.cost.flops import Num
from planner.cost.generation import FUSION_POINTS, Rollout
from planner.cost.rollout_stage import (
    DEFAULT_MAX_NUM_SEQS,
    generation_floor,
    generation_memory,
    generation_rollout,
    kv_need_mib,
    max_seqs,
    useful_kv_tokens,
)
from planner.cost.variants import LayoutVariants
from planner.plan import Layout
from planner.search.candidate import FLOAT_SLACK, Candidate, Task, fits_alone, to_mib, to_ms
from planner.search.pools import PoolSpace

if TYPE_CHECKING:
    from planner.search.candidate import Space


KV_LEVEL_SHIFT = 1  # generation KV sizes double from one longest sequence


PARTIAL_KV_LEVELS = 3
"""KV sizes offered under partial rollouts: the largest three of the ladder. With the largest
two, a shape whose two fit no group beside the training state was left out of co-located plans:
GRPO and PPO with Qwen3-30B-A3B on 8 H100s or A100-80GB, staleness 1, had optima 13–24% slower
(6 of 24, `bench/partial_kv_levels.py`; every level of the ladder, `--against 99`, beats none
of the 24 further); the third costs the 1,024-GPU case's command 3.75 → 4.14 s and the 8-GPU
example's 1.11 → 1.25 s (`bench/search_speed.py --runs 3 --against`: the staleness what-if's
partial rollouts)."""


def kv_ladder(space: Space, ps: PoolSpace, shape: Layout | LayoutVariants) -> list[int]:
    """The KV cache sizes (tokens per replica) a generation shape's gaps are split at: one
    sequence of the longest length, doubling, up to the largest that fits a GPU with nothing
    else on it or that the replica can use (`useful_kv_tokens`), that top included — under
    partial rollouts the `PARTIAL_KV_LEVELS` largest — and the sizes `refine` added. Empty
    when not even one sequence fits. (`kv_levels`: those of them priced.)"""
    sc = ps.scenario
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    top = _top(space, ps, shape)
    if top is None:
        return []
    levels = [longest << k for k in range(0, top.bit_length(), KV_LEVEL_SHIFT)
              if longest << k < top] + [top]
    # partial rollouts keep the engine full: offer the largest sizes only (their simulation,
    # several steps of a stream, costs several times one rollout's)
    if space.partial:
        levels = levels[-PARTIAL_KV_LEVELS:]
    return sorted(set(levels) | _added(space, ps, shape, longest, top))


def kv_levels(space: Space, ps: PoolSpace, shape: Layout | LayoutVariants) -> list[int]:
    """The KV sizes of the ladder (`kv_ladder`) the search prices for a generation shape: the
    top, the sizes `refine` added, and those whose rollout could beat the top's. The others
    are no faster than the top even at their least (`generation_floor`, within about a sixth
    of their price): only a group too full for the top could want one, and the bound
    candidate of the gap they fall in stands for them (`kv_bounds`: its floor is the next
    priced size's, valid whatever the floor here says) until `refine` prices the size that
    fits there. Under partial rollouts, every size of the ladder (no bound stands for theirs).
    (Each size is a simulation.)"""
    ladder = kv_ladder(space, ps, shape)
    if space.partial or len(ladder) < 2:
        return ladder
    top = ladder[-1]
    base = shape if isinstance(shape, Layout) else shape[0]
    fastest = rollout_of(space, ps, base.model_copy(update={"kv_cache_tokens": top}))
    added = _added(space, ps, shape, ladder[0], top)
    floors = generation_floor(ps.scenario, shape, np.array(ladder))
    return [kv for kv, floor in zip(ladder, floors.tolist(), strict=True)
            if kv == top or kv in added or floor <= fastest.seconds * (1 + FLOAT_SLACK)]


def _top(space: Space, ps: PoolSpace, shape: LayoutVariants) -> int | None:
    """The largest KV size of a generation shape that fits a GPU with nothing else on it, up
    to what the replica can use (None: not one longest sequence)."""
    sc = ps.scenario
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    own = int(to_mib(generation_memory(sc, shape, space.overlap_sync, resharding=False,
                                     kv_tokens=longest).persistent))
    return kv_tokens_within(kv_need_mib(sc, shape, space.overlap_sync), ps.budget_mib - own,
                            longest, useful_kv_tokens(sc, shape, space.partial))


def _added(space: Space, ps: PoolSpace, shape: LayoutVariants, low: int, top: int
           ) -> set[int]:
    """The sizes `refine` priced for a shape, from `low` to `top`."""
    return {kv for kv in space.cache.kv_added.get(kv_key(space, ps, shape), ())
            if low <= kv <= top}


def rollout_of(space: Space, ps: PoolSpace, layout: Layout) -> Rollout:
    """The rollout of a generation layout, once per command (`PriceCache.rollouts`): the
    sizes `refine` adds re-price a shape's other sizes."""
    key = (kv_key(space, ps, layout), layout.kv_cache_tokens)
    if key not in space.cache.rollouts:
        space.cache.rollouts[key] = generation_rollout(ps.scenario, layout, space.partial)
    return space.cache.rollouts[key]


def kv_key(space: Space, ps: PoolSpace, shape: Layout | LayoutVariants) -> tuple:
    """What the KV sizes of a generation shape are priced under (`PriceCache.kv_added`)."""
    return (ps.name, space.overlap_sync, space.partial, shape.dp, shape.tp, shape.pp,
            shape.ep, shape.etp, shape.max_num_seqs)


CAP_LEVEL_SHIFT = 2  # under partial rollouts the concurrency caps grow fourfold from the share


def concurrency_caps(space: Space, ps: PoolSpace, shape: LayoutVariants) -> list[int | None]:
    """The caps on running sequences (`max_num_seqs`) the search prices a generation shape at:
    the default (None: the replica's share) — and under partial rollouts, where the next
    step's prompts are always queued so a cap above the share fills too, the share times 4,
    16, … and the most sequences the largest KV cache that fits a GPU alone could run (each
    holds at least its prompt and one token; up to `DEFAULT_MAX_NUM_SEQS`), past which a cap
    changes nothing but the sampler's memory. More running sequences decode more tokens per
    step and leave more unfinished at the step's end, recomputed in the next: the best cap
    depends on the shape (GRPO Qwen2.5-1.5B on 4 A100-40GB, 64 sequences a replica, 14%
    faster at 96 than at 64, `bench/concurrency_caps.py`)."""
    if not space.partial:
        return [None]
    share = max_seqs(ps.scenario, shape)
    most = min(DEFAULT_MAX_NUM_SEQS, most_running(space, ps, shape))
    caps: list[int | None] = [None]
    cap = share << CAP_LEVEL_SHIFT
    while cap < most:
        caps.append(cap)
        cap <<= CAP_LEVEL_SHIFT
    return [*caps, most] if most > share else caps


def most_running(space: Space, ps: PoolSpace, shape: LayoutVariants) -> int:
    """The most sequences a replica of `shape` can run at once under partial rollouts, with
    any cap: as many as the largest KV cache that fits a GPU alone holds at their least (a
    prompt and one token each). A larger cap runs no more, and only adds sampler memory."""
    top = _top(space, ps, dataclasses.replace(shape, max_num_seqs=DEFAULT_MAX_NUM_SEQS))
    return (top or 0) // (ps.scenario.workload.prompt_len + 1)


def kv_bounds(space: Space, ps: PoolSpace, task: Task, shapes: list[LayoutVariants],
              priced: list[tuple[Num, tuple, Num]], kept: list[Candidate]) -> list[Candidate]:
    """Generation: a bound candidate for each gap between a shape's KV sizes on its ladder
    (`kv_ladder`: priced or not) and below the smallest, from one longest sequence: it stands
    for the layout with the largest KV cache that fits where it sits when that lies in the gap
    — so only where the size just past the gap does not fit (`Candidate.upper_mib`: the need
    there; `choice.fits`, `cpsat.add_memory`) — with the memory of the gap's smallest size and
    a time no size in the gap beats (`_gaps`): more KV is never slower but for the
    recomputation its preemptions cause (`tests/cost/test_generation.py`), so a rollout in the
    gap takes at least the next priced size's time less its recomputation (`floor_ms`), and
    no less than the rollout floor at the gap's largest size (`generation_floor`). Partial
    rollouts keep no such order — their steady-state step can be slower with more KV and no
    recomputation (lengths [643, 1615] on two replicas: 4.91 s at 10,451 tokens, 3.39 s at
    3,055) — so no bound stands for their gaps: with partial rollouts the search proves its
    optimum over the sizes it prices (the three largest; for an option it proves, also the one
    that fits where its canonical plan's rollout sits, `settle.py`). (Under inter-stage
    fusion the generation has its group to itself and the largest size fits: no bound is ever
    allowed, and none needs the fused completions, `done_ms`, bounded.)
    `priced`: each shape's floors per priced size, its refit side (`Candidate.refit_ms`,
    `refit_fixed_ms`) and resharding MiB.
    Kept where they fit alone and no kept candidate is as good in every number."""
    if task.kind != "generation" or space.partial:
        return []
    sc = ps.scenario
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    spec = sc.roles[task.role]
    front = np.array([c.key() for c in kept], dtype=np.int64)
    out = []
    for shape, (floor, refit, reshard_mib) in zip(shapes, priced, strict=True):
        levels = [int(kv) for kv in shape.kv_cache_tokens]
        base = shape[0]
        at = {kv: rollout_of(space, ps, base.model_copy(update={"kv_cache_tokens": kv}))
              for kv in levels}  # priced already: cached
        gaps = _gaps(space, ps, shape, dict(zip(levels, np.broadcast_to(
            floor, len(levels)).tolist(), strict=True)), longest)
        if not gaps:
            continue
        lows, uppers = (dataclasses.replace(shape, kv_cache_tokens=np.array(sizes))
                        for sizes in zip(*((low, up) for low, up, _ in gaps), strict=True))
        mem = generation_memory(sc, lows, space.overlap_sync, resharding=False)
        persistent, transient = (np.broadcast_to(to_mib(x), len(gaps))
                                 for x in (mem.persistent, mem.transient))
        upper = np.broadcast_to(to_mib(generation_memory(
            sc, uppers, space.overlap_sync, resharding=False).transient), len(gaps))
        allowed = np.broadcast_to(True if space.caps is None
                                  else space.caps.mask(task.kind, lows, spec), len(gaps))
        for i, (lay, (low, _, time_ms)) in enumerate(zip(lows, gaps, strict=True)):
            c = Candidate(layout=lay, time_ms={"generation": time_ms},
                          persistent_mib=int(persistent[i]),
                          transient_mib={"generation": int(transient[i])},
                          refit_ms=tuple(map(int, refit[0])),
                          refit_fixed_ms=tuple(map(int, refit[1])), reshard_mib=int(reshard_mib),
                          done_ms=(0,) * len(FUSION_POINTS), bound=True,
                          upper_mib=int(upper[i]), preempting_ms=_preempting_ms(
                              at[min(kv for kv in levels if kv > low)]))
            dominated = bool(kept) and (front <= np.array(c.key())).all(axis=1).any()
            if allowed[i] and fits_alone(ps, c.persistent_mib, c.transient_mib) \
                    and not dominated:
                out.append(c)
    return out


def _preempting_ms(above: Rollout) -> int:
    """`Candidate.preempting_ms` of a bound whose time comes from the rollout `above`."""
    return int(to_ms(above.seconds)) if above.preemptions else 0


def _gaps(space: Space, ps: PoolSpace, shape: LayoutVariants, priced: dict[int, int],
          longest: int) -> list[tuple[int, int, int]]:
    """A shape's KV gaps as (smallest size, the size just past the gap, floor ms), between the
    sizes of its ladder from one longest sequence up: before a priced size (`priced`: its
    floor ms), the sizes below it; before an unpriced one, the sizes up to it, itself
    included. Each floored by the next priced size's floor and by the rollout floor at its
    own largest size (`generation_floor`, less `FLOAT_SLACK`)."""
    unpriced = [kv for kv in kv_ladder(space, ps, shape) if kv not in priced]
    least = dict(zip(unpriced, to_ms(generation_floor(ps.scenario, shape, np.array(unpriced))
                                     * (1 - FLOAT_SLACK)).astype(int).tolist(), strict=True)
                 ) if unpriced else {}
    points = sorted(priced.keys() | least.keys())
    gaps, above = [], 0  # `above`: the floor of the next priced size (the top is priced)
    for b, a in zip(reversed(points), [*reversed(points[:-1]), longest - 1], strict=True):
        if b in priced:
            above = priced[b]
            if b - a > 1:
                gaps.append((a + 1, b, above))
        else:
            gaps.append((a + 1, b + 1, max(least[b], above)))
    return gaps[::-1]

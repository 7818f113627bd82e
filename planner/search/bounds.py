"""Bounds that shrink the CP-SAT model without changing its optimum.

An incumbent: a feasible choice found greedily (every task on one group of the whole cluster,
or the generation on a group of its own), scored exactly as the solvers score (`score`).

A lower bound per candidate: whatever else is chosen, a choice using candidate c on a group of
s GPUs scores at least `lower_bound(c, s)`. Every task must run each of its stages somewhere,
so stage st lasts at least `floor[st]`, the fastest candidate of its slowest task; and at least
c's own time in st. Staleness 0: T = GA + controller + sync + S_training, where GA = S_gen +
S_assess, or under fusion GA ≥ max(S_gen, S_assess) (the fused phase ends no earlier than
either), and sync ≥ c's own side of the refit in its cheapest placement (the actor's training
and generation candidates; 0 for the others). Staleness ≥ 1: T ≥ the busy time of c's group ≥
c's total, T ≥ the controller's host time, and T ≥ the sequential chain over s + 1.
Cost objective: T × weighted GPUs ≥ T × s × w (w: the price weight of the candidate's pool);
gpus objective: GPUs ≥ s.

A candidate whose lower bound exceeds the incumbent's score is in no choice better than the
incumbent, so dropping it keeps the optimum (and the incumbent) — and usually most candidates:
the decode chain alone sets a floor most slow layouts of the other tasks cannot get under.
"""

from __future__ import annotations

import dataclasses
from itertools import product

import numpy as np

from planner.plan import STAGES
from planner.search.candidate import Candidate
from planner.search.choice import (
    Choice,
    fits,
    meets_target,
    objective_value,
    score,
    sizes_valid,
    valid,
    weighted_gpus,
)
from planner.search.follow import agree
from planner.search.space import Space


def stage_floors(space: Space) -> dict[str, int]:
    """Each stage's least duration: the fastest candidate of its slowest task."""
    floors = dict.fromkeys(STAGES, 0)
    for t in space.tasks:
        pool = [c for (name, _, _), cs in space.candidates.items() if name == t.name
                for c in cs]
        for st in t.stages:
            if pool:
                k = STAGES.index(st)
                floors[st] = max(floors[st], min(c.stage_row[k] for c in pool))
    return floors


def lower_bound(space: Space, cand: Candidate, pool: int, size: int,
                floors: dict[str, int]) -> int:
    """The least score of any choice that uses `cand` on a group of `size` GPUs of `pool`."""
    return lower_bounds(space, [cand], pool, size, floors)[0]


def lower_bounds(space: Space, cands: list[Candidate], pool: int, size: int,
                 floors: dict[str, int]) -> list[int]:
    """`lower_bound` of each of `cands` (all on a group of `size` GPUs of `pool`)."""
    weighted = size * space.pools[pool].weight
    return [objective_value(space, t, size, weighted)
            for t in time_lower_bounds(space, cands, floors)]


def time_lower_bound(space: Space, cand: Candidate, floors: dict[str, int]) -> int:
    """The least iteration time (ms) of any choice that uses `cand`."""
    return time_lower_bounds(space, [cand], floors)[0]


def time_lower_bounds(space: Space, cands: list[Candidate], floors: dict[str, int]
                      ) -> list[int]:
    """`time_lower_bound` of each of `cands`, in one numpy pass over their rows (whole ms, far
    inside int64: `candidate.MAX_UNITS`)."""
    if not cands:
        return []
    gen = space.generation is not None
    # the refit is no shorter than the candidate's own side (`choice.refit_ms`), wherever it is
    rows = np.array([c.stage_row for c in cands], dtype=np.int64)
    own, refit = rows[:, :len(STAGES)], rows[:, len(STAGES)] if gen else 0
    S = {st: np.maximum(own[:, i], floors[st]) for i, st in enumerate(STAGES)}
    ga = (np.maximum(S["generation"], S["assessment"]) if space.fusion and gen
          else S["generation"] + S["assessment"])
    t = ga + space.controller_ms + S["training"] + refit
    if space.staleness >= 1:
        t = np.maximum(np.maximum(own.sum(axis=1), space.controller_ms),
                       -(-t // (space.staleness + 1)))
    return t.tolist()


def least_bounds(space: Space) -> dict[tuple[str, int, int], int]:
    """The least `lower_bound` among the candidates of each (task, pool, size) that has any."""
    floors = stage_floors(space)
    return {key: min(lower_bounds(space, cands, key[1], key[2], floors))
            for key, cands in space.candidates.items() if cands}


def space_lower_bound(space: Space) -> int | None:
    """A lower bound on the score of every choice of `space` (None if a task has no candidate):
    each choice uses one candidate of every task, so it scores at least the least
    `lower_bound` among each task's candidates — the largest of those minima."""
    least = least_bounds(space)
    per_task = [[b for (name, _, _), b in least.items() if name == t.name]
                for t in space.tasks]
    if not all(per_task):
        return None
    return max((min(bounds) for bounds in per_task), default=None)


MAX_PLACEMENTS = 30_000
"""Slot-size tuples × task placements `placement_lower_bound` enumerates at most (else it
answers `space_lower_bound`). Timed once on the 2-core machine (not a bench figure): PPO's five
tasks on a node (24,300) 3–6 ms, GRPO's three (2,700) 2–3 ms; a CP-SAT model's build and
proof that the bound can replace (`cpsat._limited`) takes 5–120 ms."""


def placement_lower_bound(space: Space) -> int | None:
    """A lower bound on the score of every choice of `space`, never below `space_lower_bound`
    (None: no choice). Every choice has a placement — slot sizes and pools, each task's slot —
    that the option's rules allow (`choice.valid`), and on it scores at least each task's
    least candidate bound on its group (`lower_bounds`) and, with staleness ≥ 1, each group's
    busy time (`choice.iteration_ms`): the sum over its tasks of their least total stage time.
    The least of those over the placements, enumerated as brute force does
    (`brute.enumerate_choices`) while they are at most `MAX_PLACEMENTS`."""
    names = [t.name for t in space.tasks]
    shapes = space.shapes
    if len(shapes) * (len(shapes) + 1) ** (space.slots - 1) * space.slots ** len(names) \
            > MAX_PLACEMENTS:
        return space_lower_bound(space)
    least = least_bounds(space)
    least_busy = {key: min(sum(c.time_ms.values()) for c in space.candidates[key])
                  for key in least}
    best = None
    trainer = names.index("actor.training")
    for chosen in product(shapes, *[[(0, 0), *shapes]] * (space.slots - 1)):
        on, sizes = tuple(p for p, _ in chosen), tuple(s for _, s in chosen)
        if not sizes_valid(space, sizes, on):
            continue
        gpus, weighted = sum(sizes), weighted_gpus(space, Choice(sizes, {}, {}, on))
        used = {k for k, size in enumerate(sizes) if size}
        for slots in product(range(space.slots), repeat=len(names)):
            # `valid`'s first rules, cheaply: the trainer on slot 0, tasks on the used slots
            if slots[trainer] != 0 or set(slots) != used:
                continue
            keys = [(n, on[k], sizes[k]) for n, k in zip(names, slots, strict=True)]
            if any(key not in least for key in keys):  # no candidate there
                continue
            bound = max(least[key] for key in keys)
            if space.staleness >= 1:
                busy = dict.fromkeys(slots, 0)
                for key, k in zip(keys, slots, strict=True):
                    busy[k] += least_busy[key]
                bound = max(bound, objective_value(space, max(busy.values()), gpus, weighted))
            if (best is None or bound < best) and valid(
                    space, Choice(sizes, dict(zip(names, slots, strict=True)), {}, on)):
                best = bound
    return best


def prune(space: Space, bound: int) -> Space:
    """`space` without the candidates whose lower bound exceeds `bound` (or whose iteration
    cannot reach the gpus objective's target)."""
    floors = stage_floors(space)
    target = space.target_ms
    kept = {}
    for (name, p, size), cands in space.candidates.items():
        least = lower_bounds(space, cands, p, size, floors)
        fast = (time_lower_bounds(space, cands, floors) if target is not None
                else [0] * len(cands))
        keep = [c for c, lb, t in zip(cands, least, fast, strict=True)
                if lb <= bound and (target is None or t <= target)]
        if keep:
            kept[(name, p, size)] = keep
    return dataclasses.replace(space, candidates=kept)


def _placements(space: Space):
    """Simple placements to try, as (sizes, pools, slot of each task): everything on one group
    (a whole pool, or any smaller size — what the cost and gpus objectives prefer); the
    generation alone on a second group, filling the rest of the first group's pool (each split
    the sizes allow) or the whole of another pool."""
    names = [t.name for t in space.tasks]
    empty = (0,) * (space.slots - 1)
    for p, size in space.shapes:
        yield (size, *empty), (p, *empty), dict.fromkeys(names, 0)
    gen = space.generation
    if gen is None or space.slots < 2:
        return
    alone = {n: (1 if n == gen.name else 0) for n in names}
    for p0, s0 in space.shapes:
        for p1, pool in enumerate(space.pools):
            s1 = pool.total_gpus - (s0 if p1 == p0 else 0)
            if s1 in pool.sizes:
                yield (s0, s1, *empty[1:]), (p0, p1, *empty[1:]), alone


def _greedy(space: Space, sizes: tuple[int, ...], on: tuple[int, ...],
            slot: dict[str, int]) -> Choice | None:
    """Each task starts at its smallest-state candidate; then, one task at a time (slowest
    first), the fastest candidate that still fits. None when even the smallest do not fit."""
    pools = {t.name: [c for c in space.candidates.get((t.name, on[slot[t.name]],
                                                       sizes[slot[t.name]]), []) if not c.bound]
             for t in space.tasks}
    if not all(pools.values()) or not valid(space, Choice(sizes, slot, {}, on)):
        return None
    pick = {n: min(p, key=lambda c: (c.persistent_mib, sum(c.time_ms.values())))
            for n, p in pools.items()}
    pick = agreeing(space, pick, pools)
    if pick is None or not fits(space, Choice(sizes, slot, pick, on)):
        return None
    for name in sorted(pick, key=lambda n: -sum(pick[n].time_ms.values())):
        for c in sorted(pools[name], key=lambda c: sum(c.time_ms.values())):
            trial = {**pick, name: c}
            if agree(space.caps, trial) and \
                    fits(space, Choice(sizes, slot, trial, on)):
                pick = trial
                break
    return Choice(sizes, slot, pick, on)


def agreeing(space: Space, pick: dict[str, Candidate], pools: dict[str, list[Candidate]]
             ) -> dict[str, Candidate] | None:
    """`pick` with each follower's candidate replaced, where it does not agree with its
    trainer's, by the smallest-state one that does (`follow.py`); None when none does."""
    if space.caps is None:
        return pick
    for f in space.caps.follows:
        if f.task in pick and f.trainer in pick and \
                not f.ok(pick[f.task].layout, pick[f.trainer].layout):
            ok = [c for c in pools[f.task] if f.ok(c.layout, pick[f.trainer].layout)]
            if not ok:
                return None
            pick = {**pick, f.task: min(ok, key=lambda c: (c.persistent_mib,
                                                            sum(c.time_ms.values())))}
    return pick


def incumbent(space: Space) -> Choice | None:
    """The best of the greedy choices over the simple placements (None if none fits)."""
    found = [ch for sizes, on, slot in _placements(space)
             if (ch := _greedy(space, sizes, on, slot)) is not None and meets_target(space, ch)]
    return min(found, key=lambda ch: score(space, ch), default=None)


def carry(space: Space, ch: Choice) -> Choice | None:
    """`ch`, a plan of another space (another inter-model option of the same scenario), as a
    plan of `space`: the same groups, placement and layouts, each task's candidate the one of
    `space` with that layout (priced under this option) — None when a task or layout is not
    in `space`, or the plan breaks its rules (`valid`, `fits`, the gpus objective's target)."""
    picked = {}
    for t in space.tasks:
        if t.name not in ch.candidate:
            return None
        k = ch.slot[t.name]
        layout = ch.candidate[t.name].layout
        same = [c for c in space.candidates.get((t.name, ch.pool(k), ch.sizes[k]), [])
                if c.layout == layout and not c.bound]
        if not same:
            return None
        picked[t.name] = same[0]
    if set(ch.slot) != set(picked):
        return None
    carried = Choice(ch.sizes, dict(ch.slot), picked, ch.pools)
    ok = valid(space, carried) and fits(space, carried) and meets_target(space, carried)
    return carried if ok else None

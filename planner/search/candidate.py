"""A priced candidate of the search: one layout of one task on a group of a given size, in
the solvers' integer units (milliseconds, MiB), the dominance pruning over candidates, and the
space of them the solvers choose from (`Space`, filled by `space.build_space`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, reduce
from typing import TYPE_CHECKING

import numpy as np

from planner.cost.flops import Num
from planner.cost.generation import FUSION_POINTS, Rollout
from planner.errors import InputError
from planner.plan import STAGES, Layout
from planner.search.pools import PoolSpace, Shape, all_shapes
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.frameworks import Capabilities

MS = 1e-3  # seconds per time unit of the solver


MIB = 2**20  # bytes per memory unit of the solver


FUSION_SCALE = 1000  # fixed-point scale of the fraction still to assess (FUSION_POINTS)


FUSION_REST = tuple(round(FUSION_SCALE * (1 - q)) for q in FUSION_POINTS)


SWAP_SCALE = 1000  # fixed-point scale of the swap time per MiB


MAX_UNITS = 2**53  # largest ms or MiB count of one candidate: exact in float64, far from int64


@dataclass(frozen=True)
class Task:
    """One model's work on one group. `stages` are the stages it loads (training tasks carry
    their model's assessment forward)."""

    role: str
    kind: str  # generation | training | forward

    @cached_property  # read in the solvers' inner loops (brute force: millions of times)
    def name(self) -> str:
        return f"{self.role}.{self.kind}"

    @property
    def words(self) -> str:
        """The task as a user reads it: 'reference assessment', 'actor training'."""
        return f"{self.role} {'assessment' if self.kind == 'forward' else self.kind}"

    @property
    def stages(self) -> tuple[str, ...]:
        return {"generation": ("generation",), "training": ("assessment", "training"),
                "forward": ("assessment",)}[self.kind]


@dataclass(frozen=True)
class Candidate:
    """One priced layout of a task on a group of a given size. (`_price` also returns one for
    layout variants, the numbers then arrays over the variants.)"""

    layout: Layout
    time_ms: dict[str, int]  # load per stage on its group
    persistent_mib: int  # kept between stages (model states; a rollout group's weights)
    transient_mib: dict[str, int]  # needed during a stage only
    host_mib: int = 0  # CPU memory per GPU holding offloaded state
    # The actor's refit, this candidate's side (the generation's, or the actor's training's;
    # `choice.refit_ms` combines them) by placement: [0] co-located, [1 + q] the other group
    # a separate one on pool q. `refit_ms` its transfers and per-tensor work, `refit_fixed_ms`
    # the per-tensor work alone (`planner.cost.refit.Refit`).
    refit_ms: tuple[int, ...] = ()
    refit_fixed_ms: tuple[int, ...] = ()
    reshard_mib: int = 0  # generation on the training group: the re-laying buffer (transient)
    done_ms: tuple[int, ...] = ()  # generation: when each of FUSION_POINTS' fractions is done
    # generation: no rollout at a smaller KV size, down to the next priced one, is faster than
    # this (ms: its time less its recomputation, `kv.kv_bounds`)
    floor_ms: Num = 0
    # generation: not a layout but a lower bound for every KV size strictly between two priced
    # ones (`kv_bounds`); never a plan: the search prices a size inside it when it is chosen
    bound: bool = False
    upper_mib: int = 0  # a bound: the transient need of the next priced size, which must not fit
    # a bound whose time comes from a priced size that preempts: that size's time (ms; 0 when
    # it keeps every sequence running); a size written into the gap may beat it where it fits
    # too, by up to the difference (`certify.py` allows the bound there)
    preempting_ms: int = 0

    @cached_property
    def stage_row(self) -> tuple[int, ...]:
        """Its time per stage of `STAGES` (0 where it has none), then its least refit side:
        what the bounds read of it, many times over (`bounds.time_lower_bounds`)."""
        return (*(self.time_ms.get(st, 0) for st in STAGES), min(self.refit_ms, default=0))

    def key(self, host: bool = False) -> tuple:
        """Numbers a better candidate is no worse in (lower is better); its host MiB among
        them when `host` (`Space.host_front`: where host memory may bind, `host.py`)."""
        done = self.done_ms if len(self.done_ms) else (0,) * len(FUSION_POINTS)
        return (*(self.time_ms.get(s, 0) for s in STAGES), *self.refit_ms, *self.refit_fixed_ms,
                self.reshard_mib,
                *(np.asarray(done).T if np.ndim(done) == 2 else done), self.persistent_mib,
                *(self.transient_mib.get(s, 0) for s in STAGES),
                *((self.host_mib,) if host else ()))


FLOAT_SLACK = 1e-9
"""Rollout times equal up to summation order differ in their last bits: a KV gap's bound
(`Candidate.floor_ms`) takes this share off the seconds it bounds, so that a larger KV size as
fast does not beat it in whole ms; `kv.kv_levels` prices a size whose floor is within it of
the fastest."""


def to_ms(seconds: Num) -> Num:
    """Whole milliseconds, rounded up (element-wise on arrays)."""
    return _whole(np.divide(seconds, MS), "milliseconds of one task")


def to_mib(nbytes: Num) -> Num:
    """Whole MiB, rounded up (element-wise on arrays)."""
    return _whole(np.divide(nbytes, MIB), "MiB of one task")


def _whole(units: Num, what: str) -> Num:
    """`units` rounded up to int64, refused (InputError) beyond MAX_UNITS: the input bounds
    (planner/specs/bounds.py) keep every shipped case far below, but their extremes combined
    could leave int64 (and float64's exact integers), which numpy would cast silently."""
    up = np.ceil(units)
    if not np.all(up <= MAX_UNITS):  # also catches inf and NaN
        worst = float(np.nanmax(up)) if np.any(~np.isnan(up)) else float("nan")
        raise InputError(f"the workload is too large to plan: {worst:.3g} {what}, above the "
                         f"limit of {MAX_UNITS:.3g}; use fewer prompts, shorter sequences or "
                         "fewer ppo_epochs, or check the hardware profile's rates")
    return up.astype(np.int64)


def candidate_at(priced: Candidate, i: int, layout: Layout) -> Candidate:
    """Candidate `i` of a priced batch (numbers or arrays), in Python ints."""
    def num(x: Num) -> int:
        return int(x[i] if np.ndim(x) else x)

    done = np.asarray(priced.done_ms)
    return Candidate(layout=layout, time_ms={s: num(v) for s, v in priced.time_ms.items()},
                     persistent_mib=num(priced.persistent_mib),
                     transient_mib={s: num(v) for s, v in priced.transient_mib.items()},
                     host_mib=num(priced.host_mib),
                     refit_ms=tuple(num(x) for x in priced.refit_ms),
                     refit_fixed_ms=tuple(num(x) for x in priced.refit_fixed_ms),
                     reshard_mib=num(priced.reshard_mib),
                     done_ms=tuple(int(x) for x in (done[i] if done.ndim == 2 else done)),
                     floor_ms=num(priced.floor_ms))


def fits_alone(ps: PoolSpace, persistent_mib: Num, transient_mib: dict[str, Num],
               host_mib: Num = 0) -> bool | np.ndarray:
    """Whether a candidate fits a GPU of pool `ps` with nothing else resident (and its offload
    the host); element-wise on arrays of candidates."""
    peak = reduce(np.maximum, transient_mib.values(), 0)  # max(…, default=0): bytes ≥ 0
    return (persistent_mib + peak <= ps.budget_mib) & (host_mib <= ps.host_budget_mib)


def pareto(ps: PoolSpace, cands: list[Candidate], host: bool = False) -> list[Candidate]:
    """Drop candidates that cannot fit alone, and those another candidate beats or ties in every
    number of its `key(host)` (ties keep the first); the result is sorted by total stage
    time."""
    fits = [c for c in cands
            if fits_alone(ps, c.persistent_mib, c.transient_mib, c.host_mib)]
    if not fits:
        return []
    return by_time([fits[i] for i in front_of(np.array([c.key(host) for c in fits],
                                                              dtype=np.int64))])


def front_of(keys: np.ndarray) -> list[int]:
    """The rows of `keys` (one candidate's `Candidate.key` each) that no other row beats or ties
    in every number; of equal rows the first.

    In lexicographic order a row can only be beaten by one before it, and a row beaten by one
    that is dropped is beaten by one kept (transitivity): so each block of `FRONT_BLOCK` rows is
    checked against the rows kept before it and against the earlier rows of the block, column
    by column on whole blocks rather than row by row (the same rows, in about half the time)."""
    order = np.lexsort(keys.T[::-1])  # lexicographic, stable: a dominating key sorts first
    cols = np.ascontiguousarray(keys[order].T)  # one row per number
    front = np.empty_like(cols)  # the kept keys, by column, in the order kept
    n = 0
    kept: list[int] = []
    for start in range(0, len(order), FRONT_BLOCK):
        block = cols[:, start:start + FRONT_BLOCK]
        # beats[i, j]: row i (kept before, then earlier in the block) beats or ties block row j
        alive = ~_beats(front[:, :n], block).any(axis=0)
        alive &= ~np.triu(_beats(block, block), 1).any(axis=0)
        rows = np.flatnonzero(alive)
        front[:, n:n + len(rows)] = block[:, rows]
        n += len(rows)
        kept += order[start + rows].tolist()
    return kept


FRONT_BLOCK = 64  # rows checked at once: 32–128 within a few percent on the 1,024-GPU space


def _beats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[i, j]: column i of `a` is no greater than column j of `b` in every row."""
    out = a[0][:, None] <= b[0][None, :]
    for x, y in zip(a[1:], b[1:], strict=True):
        out &= x[:, None] <= y[None, :]
    return out


def by_time(cands: list[Candidate]) -> list[Candidate]:
    return sorted(cands, key=lambda c: (sum(c.time_ms.values()), c.key()))


# --- the space of candidates the solvers choose from (`space.build_space` fills it) --------------

@dataclass
class Space:
    """Everything the solvers need: tasks, the pools (`pools.PoolSpace`: their group sizes,
    memory budgets, price weights), candidates per (task, pool index, size)."""

    scenario: Scenario
    staleness: int
    fusion: bool
    shared: bool
    swap: bool  # co-located state moves to CPU memory during generation
    overlap_sync: bool  # the weight sync lands in the rollout group's shadow copy (staleness ≥ 1)
    partial: bool  # partial rollouts: unfinished responses continue in the next step
    objective: str
    tasks: list[Task]
    pools: list[PoolSpace]
    slots: int
    total_gpus: int
    target_ms: int | None = None  # gpus objective: the longest iteration reaching the target
    controller_ms: int = 0  # the controller's host time per step (`controller_seconds`)
    candidates: dict[tuple[str, int, int], list[Candidate]] = field(default_factory=dict)
    priced: int = 0  # candidates priced before pruning
    complete: bool = True  # False: the deadline passed before every (task, size) was priced
    caps: Capabilities | None = None  # `plan --framework`: only what the framework runs
    # the candidates kept count host memory as `pareto` counts the rest (`Candidate.key`):
    # where host memory may bind (`host.py`)
    host_front: bool = False
    cache: PriceCache = field(default_factory=lambda: PriceCache())

    @property
    def kept(self) -> int:
        return sum(len(c) for c in self.candidates.values())

    @property
    def shapes(self) -> list[Shape]:
        """Every (pool index, size) a slot may take: those where some task has a candidate
        (a used slot holds a task; the sizes priced are `all_shapes(pools)`)."""
        held = {(p, g) for (_, p, g), cands in self.candidates.items() if cands}
        return [shape for shape in all_shapes(self.pools) if shape in held]

    def total_ok(self, p: int, gpus: int) -> bool:
        """Pool `p`'s groups may add up to `gpus` (at most its GPUs): a cluster the framework
        sizes (`Capabilities.total_ok`)."""
        pool = self.pools[p]
        return gpus <= pool.total_gpus and (
            self.caps is None or self.caps.total_ok(gpus, pool.scenario.cluster.gpus_per_node))

    @cached_property  # the tasks are set once
    def generation(self) -> Task | None:
        return next((t for t in self.tasks if t.kind == "generation"), None)


@dataclass
class PriceCache:
    """What one command priced for the same scenario. `kept`: (task, pool, size, variant) →
    (kept candidates, candidates priced); generation varies with an overlapped weight sync
    (the shadow copy) and partial rollouts, the actor with a shared critic head; nothing else
    depends on the inter-model options. `kv_added`: the KV sizes `refine.refine` priced for a
    generation shape (`kv_key`), for every option that prices the shape again. `rollouts`:
    (`kv_key`, KV size) → the rollout priced there. `kv_fits`: (`kv_key`, MiB free) → the
    largest KV size that fits in them (`refine.kv_for_room`)."""

    kept: dict[tuple, tuple[list[Candidate], int]] = field(default_factory=dict)
    kv_added: dict[tuple, set[int]] = field(default_factory=dict)
    rollouts: dict[tuple, Rollout] = field(default_factory=dict)
    kv_fits: dict[tuple, int | None] = field(default_factory=dict)
    # (the training candidates' `kept` key, `space.refit_floors`) → `space.hidden_refit`
    hidden: dict[tuple, list[Candidate]] = field(default_factory=dict)

"""Whether a group's tasks fit its GPUs: the one memory rule `rlplan evaluate` and the search
apply, in whole MiB per GPU.

Each task's memory is counted as the search's candidates count it: its persistent state, its
transient need per stage, its offloaded bytes in CPU memory, and — for the actor generating on
its own training group — the buffer its weights are re-laid through, each rounded up to whole
MiB (`whole_mib`); the budget is the GPU's memory less its runtime reserve and the memory
headroom the scenario leaves free (`search.memory_headroom`), rounded down (`budget_of`).
Rounding each figure up makes the rule a few MiB stricter than the bytes, the same few MiB
for `evaluate` and for the search, so a plan one accepts the other does too.

The KV cache a generation layout gets when the plan leaves it out is the largest that fits
where it sits by this rule (`kv_tokens_within`): the search prices that size for the layout
and the group it lands on (`planner.search.space.refine_kv`), so `evaluate`'s default is a
point of the space the search proves its optimum over.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.specs.hardware import HardwareProfile

MIB = 2**20


def whole_mib(nbytes: float) -> int:
    """Bytes as whole MiB, rounded up (the search's `_mib` of one number)."""
    return math.ceil(nbytes / MIB)


def budget_of(gpu: HardwareProfile, headroom: float) -> int:
    """MiB per GPU for the tasks: the GPU's memory less its runtime reserve and less the
    `headroom` share of it a plan leaves free (`search.memory_headroom`), rounded down."""
    return math.floor((gpu.memory_bytes * (1 - headroom) - gpu.runtime_reserve_gib * 2**30)
                      / MIB)


def headroom_gib(gpu: HardwareProfile, headroom: float) -> float:
    """The GiB per GPU `headroom` leaves free (the plan JSON's `memory.headroom_gib`)."""
    return gpu.memory_bytes * headroom / 2**30


def host_budget_of(gpu: HardwareProfile) -> int:
    """MiB of CPU memory per GPU for offloaded state: the node's host memory shared by its
    GPUs, rounded down; 0 (no offload) when the profile gives no host memory or no host link
    to price it with."""
    if gpu.host_bytes_per_gpu is None or gpu.host_link_gbps is None:
        return 0
    return math.floor(gpu.host_bytes_per_gpu / MIB)


@dataclass(frozen=True)
class Load:
    """One task's memory on its group, whole MiB per GPU. `stages`: its transient need in each
    stage it runs. A generation load's weights are resident only on a separate rollout group
    (`apart`); on the training group they are re-laid in for the stage (`reshard` MiB of
    buffer on top of each need)."""

    what: str
    persistent: int
    stages: dict[str, int] = field(default_factory=dict)
    host: int = 0
    generation: bool = False
    apart: bool = False
    reshard: int = 0


@dataclass(frozen=True)
class Overflow:
    """The first rule a group breaks: where (a stage of a task, 'resident' or 'host') and by
    how many MiB."""

    where: str
    stage: str | None
    over_mib: int
    host: bool = False


def overflow(loads: Sequence[Load], budget: int, host_budget: int, swapped: bool
             ) -> Overflow | None:
    """None when the loads fit one GPU of `budget` MiB (and `host_budget` MiB of its share of
    host memory); else the first rule broken. Rules: the resident state — every non-generation
    task's persistent state and a rollout group's weights — within the budget; offloaded state
    (and, `swapped`, the resident state while the actor generates) within the host budget;
    for each stage of each task, the resident state (none during generation when `swapped`),
    its own weights (generation's, or a rollout group's) and its need within the budget."""
    resident = sum(x.persistent for x in loads if not x.generation)
    rollout = sum(x.persistent for x in loads if x.generation and x.apart)
    if resident + rollout > budget:
        return Overflow("resident state", None, resident + rollout - budget)
    host = sum(x.host for x in loads) + (resident if swapped else 0)
    if host > host_budget:
        return Overflow("offloaded state", None, host - host_budget, host=True)
    for x in loads:
        for stage, need in x.stages.items():
            own = x.persistent if x.generation else rollout
            held = 0 if (swapped and x.generation) else resident
            if held + own + need + x.reshard > budget:
                return Overflow(x.what, stage, held + own + need + x.reshard - budget)
    return None


def kv_room_mib(loads: Sequence[Load], generation: Load, budget: int, swapped: bool) -> int:
    """MiB the generation's transient need (its KV cache with it) may take on its group beside
    `loads`, the group's other tasks: the generation stage's rule of `overflow` solved for
    the need."""
    held = 0 if swapped else sum(x.persistent for x in loads if not x.generation)
    return budget - held - generation.persistent - generation.reshard


def kv_tokens_within(need_mib: Callable[[int], int], room_mib: int, longest: int,
                     useful: int) -> int | None:
    """The largest KV cache (tokens per replica) up to `useful` whose transient need
    (`need_mib(tokens)`, non-decreasing) is within `room_mib`; None when not even one sequence
    of `longest` tokens fits. Exact on whole tokens. The need is affine in the tokens but for
    the rounding to whole MiB, so the size interpolated between the ends is within a few
    tokens of the answer: steps doubling away from it bracket the answer, bisection ends it
    (about 10 calls of `need_mib` where bisecting the whole range took 20–50)."""
    if useful < longest or (at_lo := need_mib(longest)) > room_mib:
        return None
    if (at_hi := need_mib(useful)) <= room_mib:
        return useful
    lo, hi = longest, useful  # need(lo) fits, need(hi) does not
    x = min(max(lo + (room_mib - at_lo) * (hi - lo) // (at_hi - at_lo), lo + 1), hi - 1)
    fits, step = need_mib(x) <= room_mib, 1
    while lo < x < hi:  # from x, towards the answer, until past it
        lo, hi = (x, hi) if fits else (lo, x)
        x = x + step if fits else x - step
        step *= 2
        if lo < x < hi and (need_mib(x) <= room_mib) != fits:
            lo, hi = (lo, x) if fits else (x, hi)
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need_mib(mid) <= room_mib:
            lo = mid
        else:
            hi = mid
    return lo

"""A point of the search space (`Choice`) and how both solvers judge it, in the solvers' integer
units: the structural rules (`valid`), memory on every group (`fits`), and the objective
(`score`: the iteration time with fusion and asynchrony, ms × GPUs, or GPUs first). CP-SAT
(`model.py`) states the same rules as constraints; brute force (`brute.py`) calls these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner.cost.fit import Load, kv_room_mib, overflow
from planner.plan import STAGES
from planner.search.candidate import FUSION_REST, FUSION_SCALE, SWAP_SCALE, Candidate
from planner.search.follow import agree
from planner.search.pools import slots_ordered
from planner.search.space import GPU_WEIGHT, Space


@dataclass(frozen=True)
class Choice:
    """A point of the space: each slot's size (0 = unused) and pool index (0 when unused),
    each task's slot and candidate."""

    sizes: tuple[int, ...]
    slot: dict[str, int]
    candidate: dict[str, Candidate]
    pools: tuple[int, ...] = ()  # empty: every slot on pool 0

    def pool(self, k: int) -> int:
        return self.pools[k] if self.pools else 0


def valid(space: Space, ch: Choice) -> bool:
    """Structural rules both solvers share: slot 0 holds the actor's training; used slots come
    first, those after slot 0 ordered (`pools.slots_ordered`: by pool, then non-increasing
    sizes); each used slot holds a task; the groups fit each pool; under fusion no assessment
    shares the generation group; swapping state out during generation needs the generation
    co-located (slot 0); an overlapped weight sync, or staleness ≥ 1, a separate rollout
    group."""
    used = [s > 0 for s in ch.sizes]
    on = tuple(ch.pool(k) for k in range(len(ch.sizes)))
    if ch.slot["actor.training"] != 0 or not sizes_valid(space, ch.sizes, on):
        return False
    if any(u and not any(ch.slot[t.name] == k for t in space.tasks) for k, u in enumerate(used)):
        return False
    gen = space.generation
    where = generation_slot(space)
    if where is None or (where != "any"
                         and (ch.slot[gen.name] == 0) != (where == "co-located")):
        return False
    if space.fusion and gen is not None:
        gk = ch.slot[gen.name]
        if any(ch.slot[t.name] == gk for t in space.tasks if "assessment" in t.stages):
            return False
    if (space.caps is not None and not space.caps.mixed_pools
            and len({on[k] for k, u in enumerate(used) if u}) > 1):
        return False  # the framework runs on one GPU type (`Capabilities.mixed_pools`)
    if not agree(space.caps, ch.candidate):
        return False  # a follower's layout not its trainer's (`follow.py`)
    return all(group in allowed_groups(space) for k, size in enumerate(ch.sizes) if size
               for group in [frozenset(t.name for t in space.tasks if ch.slot[t.name] == k)])


def sizes_valid(space: Space, sizes: tuple[int, ...], on: tuple[int, ...]) -> bool:
    """`valid`'s rules on the slot sizes (on pools `on`) alone: slot 0 used, used slots
    first, the groups fit each pool in a total the framework sizes (`Space.total_ok`), the
    slots after slot 0 ordered."""
    used = [s > 0 for s in sizes]
    return (used[0] and not any(used[k + 1] and not used[k] for k in range(len(used) - 1))
            and all(space.total_ok(p, sum(s for s, q in zip(sizes, on, strict=True) if q == p))
                    for p in range(len(space.pools)))
            and slots_ordered(sizes, on))


def generation_slot(space: Space) -> str | None:
    """Where the option's rules put the generation: "co-located" on slot 0 (swapping state out
    during generation), "apart" from it (an overlapped weight sync, and any staleness ≥ 1:
    generation pipelined against training), "any"; None when they contradict each other or
    ask for a generation the scenario has not: the option has no plan."""
    gen = space.generation
    apart = space.overlap_sync or (space.staleness >= 1 and gen is not None)
    if not (space.swap or apart):
        return "any"
    if gen is None or (space.swap and apart):
        return None
    return "co-located" if space.swap else "apart"


def allowed_groups(space: Space) -> list[frozenset[str]]:
    """The task sets one group may hold: every non-empty set, or under `plan --framework` those
    the framework runs (`Capabilities.group_ok`)."""
    names = [t.name for t in space.tasks]
    every = [frozenset(n for i, n in enumerate(names) if mask >> i & 1)
             for mask in range(1, 1 << len(names))]
    if space.caps is None:
        return every
    tasks = frozenset(names)
    return [g for g in every if space.caps.group_ok(g, tasks, space.staleness)]


def loads(space: Space, ch: Choice, k: int) -> list[Load]:
    """The memory of the tasks on slot k, as `fit.overflow` reads it: a generation on slot 0
    (the training group) re-laid in through its buffer, elsewhere a rollout group's weights."""
    gen = space.generation
    out = []
    for t in space.tasks:
        if ch.slot[t.name] != k:
            continue
        c, is_gen = ch.candidate[t.name], t is gen
        out.append(Load(t.name, c.persistent_mib, c.transient_mib, c.host_mib,
                        generation=is_gen, apart=is_gen and k != 0,
                        reshard=c.reshard_mib if is_gen and k == 0 else 0))
    return out


def fits(space: Space, ch: Choice) -> bool:
    """Memory on every slot in every stage (`fit.overflow`, the rule `evaluate` applies):
    resident state + what the stage needs; offloaded state (and, when swapping, slot 0's
    resident state) within the GPU's share of host memory. A bound generation candidate
    (`kv.kv_bounds`) also needs the priced size above its gap not to fit where it sits."""
    if not all(overflow(loads(space, ch, k), space.pools[ch.pool(k)].budget_mib,
                        space.pools[ch.pool(k)].host_budget_mib, space.swap and k == 0) is None
               for k, size in enumerate(ch.sizes) if size):
        return False
    gen = space.generation
    if gen is None or not (c := ch.candidate[gen.name]).bound:
        return True
    k = ch.slot[gen.name]
    here = loads(space, ch, k)
    room = kv_room_mib(here, next(x for x in here if x.generation),
                       space.pools[ch.pool(k)].budget_mib, space.swap and k == 0)
    return room < c.upper_mib


def resident_twins(space: Space, ch: Choice) -> Choice:
    """`ch` with each frozen model that offloads given its resident twin — the same layout
    with offload none — where the space has it and the plan stays valid, fits and scores no
    worse: between plans of equal objective the canonical one offloads nothing it need not
    (`model.Model.canonical`; weighing offload in its objective made its solve 40% slower on
    the 1,024-GPU PPO case)."""
    target = score(space, ch)
    for name, c in list(ch.candidate.items()):
        if not name.endswith(".forward") or c.layout.offload == "none":
            continue
        k = ch.slot[name]
        resident = c.layout.model_copy(update={"offload": "none"})
        twin = next((t for t in space.candidates.get((name, ch.pool(k), ch.sizes[k]), ())
                     if t.layout == resident), None)
        if twin is None:
            continue
        trial = dataclasses.replace(ch, candidate={**ch.candidate, name: twin})
        if valid(space, trial) and fits(space, trial) and score(space, trial) <= target:
            ch = trial
    return ch


def stage_loads(space: Space, ch: Choice) -> dict[int, dict[str, int]]:
    loads = {k: dict.fromkeys(STAGES, 0) for k, s in enumerate(ch.sizes) if s}
    for t in space.tasks:
        for stage, ms in ch.candidate[t.name].time_ms.items():
            loads[ch.slot[t.name]][stage] += ms
    return loads


def score(space: Space, ch: Choice) -> int:
    """What the solvers minimise: the iteration time in ms (objective "time"), ms × GPUs
    weighed by their pool's price ("cost"; `pools.price_weights`, 1 with one pool), or GPUs ×
    `GPU_WEIGHT` + ms ("gpus": fewest GPUs, then the fastest of those)."""
    return objective_value(space, iteration_ms(space, ch), sum(ch.sizes),
                           weighted_gpus(space, ch))


def weighted_gpus(space: Space, ch: Choice) -> int:
    """The GPUs of a choice, each weighed by its pool's price weight."""
    return sum(size * space.pools[ch.pool(k)].weight for k, size in enumerate(ch.sizes))


def objective_value(space: Space, time_ms: int, gpus: int, weighted: int) -> int:
    """The objective of an iteration of `time_ms` on `gpus` GPUs (`weighted`: weighed by
    their pools' price weights)."""
    if space.objective == "cost":
        return time_ms * weighted
    if space.objective == "gpus":
        return gpus * GPU_WEIGHT + time_ms
    return time_ms


def meets_target(space: Space, ch: Choice) -> bool:
    """The gpus objective's throughput target: the iteration within `target_ms`."""
    return space.target_ms is None or iteration_ms(space, ch) <= space.target_ms


def refit_ms(ch: Choice, gen: str) -> int:
    """The actor's refit in ms (`iteration.refit_between`): both sides' transfers overlap,
    their per-tensor parts add — max(training side + generation's per-tensor, training's
    per-tensor + generation side), each side as priced for the placement (co-located, or
    the two groups' pools: `Candidate.refit_ms`)."""
    train, rollout = ch.candidate["actor.training"], ch.candidate[gen]
    k = ch.slot[gen]
    t, g = (0, 0) if k == 0 else (1 + ch.pool(k), 1 + ch.pool(0))
    return max(train.refit_ms[t] + rollout.refit_fixed_ms[g],
               train.refit_fixed_ms[t] + rollout.refit_ms[g])


def iteration_ms(space: Space, ch: Choice) -> int:
    """The iteration time in ms: stage maxima over groups, the controller's host time, sync,
    fusion overlap, asynchrony (`iteration.evaluate`)."""
    loads = stage_loads(space, ch)
    S = {s: max(load[s] for load in loads.values()) for s in STAGES}
    gen = space.generation
    sync = 0
    gen_slot = ch.slot[gen.name] if gen else None
    if gen:
        sync = refit_ms(ch, gen.name)
        if space.swap:
            held = sum(ch.candidate[t.name].persistent_mib for t in space.tasks
                       if t is not gen and ch.slot[t.name] == 0)
            sync += -(-space.pools[ch.pool(0)].swap_q * held // SWAP_SCALE)
    ga = S["generation"] + S["assessment"]
    if space.fusion and gen:  # `iteration.fused_generation_assessment`, in integers
        c = ch.candidate[gen.name]
        ga = max(S["generation"], *(-(-(FUSION_SCALE * done + rest * S["assessment"])
                                      // FUSION_SCALE)
                                    for done, rest in zip(c.done_ms, FUSION_REST,
                                                          strict=True)))
    sequential = ga + space.controller_ms + sync + S["training"]
    if space.staleness >= 1:
        busy = [sum(load.values())
                + (sync if k == 0 or (k == gen_slot and not space.overlap_sync) else 0)
                for k, load in loads.items()]
        time_ms = max(*busy, space.controller_ms, -(-sequential // (space.staleness + 1)))
    else:
        time_ms = sequential
    return time_ms

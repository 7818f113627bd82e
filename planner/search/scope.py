"""The space a proven optimum covers: every group size on clusters of up to
`layouts.EVERY_GPU_COUNT` GPUs, the sizes searched past that — what a plan says of its own
proof (`size_proof`) — and, for a plan `evaluate` prices, what puts it outside that space
(`evaluated`): its group sizes, its group count, its layouts off the search's menus. (No
solver here: `evaluate` does not load one.)"""

from __future__ import annotations

import math

from planner.cost.iteration import Evaluation, evaluate
from planner.cost.report import to_plan
from planner.cost.rollout_stage import max_seqs
from planner.cost.step import sequences
from planner.cost.variants import LayoutVariants
from planner.frameworks import Capabilities, capabilities
from planner.plan import Layout, Plan, PlanInput, expert_tp
from planner.search.candidate import Space, Task
from planner.search.explain import spans
from planner.search.kv import kv_ladder, most_running
from planner.search.layouts import (
    MAX_PP,
    SHAPES,
    cp_offered,
    every_pp,
    generation_shapes,
    pp_offered,
)
from planner.search.option import Option, options, staleness_that_matters
from planner.search.pools import PoolSpace
from planner.search.space import MAX_SLOTS, dominated, pool_space, tasks_for
from planner.specs.scenario import Scenario
from planner.specs.search import EVERY_PP_GPU_COUNT

EVERY_CP = "every cp"  # `search.cp_proven` when no cp the cluster allows is left out
EVERY_PP = f"divisors up to {MAX_PP}"  # `search.pp_proven` when every pp is searched


def size_proof(space: Space, proven: bool) -> dict:
    """The plan's `search` fields on the group sizes and degrees (cp, pp) its proof covers:
    `group_sizes_proven` "every size" (every size a group may take on each pool that the
    framework runs, if one is named), "the sizes searched" (past `layouts.EVERY_GPU_COUNT`
    GPUs a pool offers fewer: `group_sizes_searched` lists them — by pool name with several
    pools, as the plan's groups name theirs) or None (no proof); `cp_proven` "every cp" or
    "chunks of N tokens or more" (`search.min_cp_chunk` leaves shorter ones out) or None;
    `pp_proven` "divisors up to 16" (`layouts.MAX_PP`; of a group's GPUs over tp) or "powers
    of two up to 16" (`layouts.every_pp`); or None."""
    every = all(pool.sizes == [s for s in range(1, pool.total_gpus + 1) if space.caps is None
                               or space.caps.size_ok(s, pool.scenario.cluster.gpus_per_node)]
                for pool in space.pools)
    searched = ([] if every else list(space.pools[0].sizes) if len(space.pools) == 1
                else {pool.name: list(pool.sizes) for pool in space.pools})
    sc = space.scenario
    every_cp = cp_offered(sc, 1 << (sc.total_gpus.bit_length() - 1))  # the widest cp
    return {"group_sizes_proven": (None if not proven else "every size" if every
                                   else "the sizes searched"),
            "group_sizes_searched": searched,
            "cp_proven": (None if not proven else EVERY_CP if every_cp
                          else f"chunks of {sc.search.min_cp_chunk} tokens or more"),
            "pp_proven": (None if not proven else EVERY_PP if every_pp(sc)
                          else f"powers of two up to {MAX_PP}")}


def framework_caps(sc: Scenario) -> Capabilities | None:
    """What the scenario's framework runs (its preset; the scenario has checked the algorithm
    and roles against it), or None: any plan."""
    return None if sc.framework is None else capabilities(sc.framework)


def evaluated_plan(sc: Scenario, plan: PlanInput) -> Plan:
    """`plan` priced by the cost model (what `rlplan evaluate` prints), with what puts it
    outside the search's space (`evaluated`)."""
    ev = evaluate(sc, plan)
    return to_plan(sc, plan, ev, search=evaluated(sc, plan, ev))


def evaluated(sc: Scenario, plan: PlanInput, ev: Evaluation) -> dict:
    """An evaluated plan's `search` fields: no solver, and `outside_search`, what puts the plan
    `ev` prices outside the space `rlplan plan` proves its optimum over — a group of a size it
    does not search on its pool (past `layouts.EVERY_GPU_COUNT` GPUs, or one the scenario's
    framework does not run), more groups than it places tasks on (`space.MAX_SLOTS`), a
    layout off its menus (`layouts.py`: powers of two, the pipeline splits it offers, the
    caps and KV sizes of partial rollouts, …; `_layout_outside`), a trained model's forward
    with a layout of its own, or an inter-model option the scenario leaves out. Empty: the
    plan is one of those a proven optimum is the least of. Not empty: no proven optimum
    covers it, and it may be faster."""
    space = bare_space(sc, plan)
    pools = {ps.name: ps for ps in space.pools}
    sizes = {g.name: g.gpus for g in plan.groups}
    home = {g.name: g.pool or sc.pool_list[0].name for g in plan.groups}
    outside, off_sizes = [], set()
    for group in plan.groups:
        # (a pool the scenario lacks is refused when the plan is priced)
        offered = pools[home[group.name]].sizes
        if group.gpus not in offered:
            where = f" of pool {group.pool}" if group.pool else ""
            outside.append(f"group {group.name}: {group.gpus} GPUs, not a size the search "
                           f"offers{where} ({spans(offered)})")
            off_sizes.add(group.name)
    if (why := _option_outside(sc, plan, space.caps)) is not None:
        outside.append(f"inter_model: {why}")
    if len(plan.groups) > space.slots:
        outside.append(f"{len(plan.groups)} groups: the search places its "
                       f"{len(space.tasks)} tasks on at most {space.slots}")
    training = {t.role: t.layout for t in ev.tasks if t.stage == "training"}
    for t in ev.tasks:
        where = f"layouts.{t.role}.{t.stage}"
        if t.layout.group in off_sizes:
            continue  # its group is named already
        if t.stage == "assessment" and t.role in training:
            if t.layout != training[t.role]:
                outside.append(f"{where}: the search runs a trained model's forward with its "
                               "training layout")
            continue
        why = _layout_outside(space, pools[home[t.layout.group]], t.role, t.stage, t.layout,
                              sizes[t.layout.group], ev.kv_fits_tokens)
        if why is not None:
            outside.append(f"{where}: {why}")
    return {"solver": "none", "status": "EVALUATED", "outside_search": outside}


def _option_outside(sc: Scenario, plan: PlanInput, caps: Capabilities | None) -> str | None:
    """Why the plan's inter-model option is not one the search solves for `sc` (its
    `search.max_staleness`, `allow_shared_actor_critic`, what its framework runs), or None:
    a staleness past `option.staleness_that_matters` is priced as that one."""
    im = plan.inter_model
    mine = Option(min(im.staleness, staleness_that_matters(sc)), im.inter_stage_fusion,
                  im.shared_actor_critic, im.offload_during_generation, im.overlap_weight_sync,
                  im.partial_rollout)
    if mine in options(sc, sc.search.max_staleness, sc.search.allow_shared_actor_critic, caps):
        return None
    return (f"{', '.join(im.choices()) or 'staleness 0'} is not an option the search solves here "
            f"(search.max_staleness {sc.search.max_staleness}, allow_shared_actor_critic "
            f"{str(sc.search.allow_shared_actor_critic).lower()}"
            + (f", what {caps.label} runs" if caps is not None else "") + ")")


def bare_space(sc: Scenario, plan: PlanInput) -> Space:
    """The space of the plan's inter-model option as the search lays it out, nothing priced:
    its tasks, group count and pools (what `_layout_outside` enumerates layouts on)."""
    im, caps = plan.inter_model, framework_caps(sc)
    tasks = tasks_for(sc, im.shared_actor_critic)
    return Space(scenario=sc, staleness=im.staleness, fusion=im.inter_stage_fusion,
                 shared=im.shared_actor_critic, swap=im.offload_during_generation,
                 overlap_sync=im.overlap_weight_sync, partial=im.partial_rollout,
                 objective=sc.search.objective, tasks=tasks,
                 pools=[pool_space(sc, p.name, caps, 1) for p in sc.pool_list],
                 slots=min(MAX_SLOTS, len(tasks)), total_gpus=sc.total_gpus, caps=caps)


DEGREES = ("dp", "tp", "pp", "cp", "ep", "etp", "first_stage_layers", "last_stage_layers")
GENERATION_DEGREES = ("dp", "tp", "pp", "ep", "etp")  # cp: 1 (`legality.check_plan`)
OPTIONS = {"training": ("vp", "zero", "checkpointing", "micro_batch", "offload"),
           "forward": ("vp", "zero", "micro_batch", "offload")}
"""What the search varies within a shape of degrees (`DEGREES`), per kind of task (named when a
layout is off its menus)."""


def _layout_outside(space: Space, ps: PoolSpace, role: str, stage: str, layout: Layout,
                    g: int, kv_fits: int | None) -> str | None:
    """Why `layout` of `role`'s `stage` on a group of `g` GPUs is not among the layouts the
    search enumerates there (`layouts.SHAPES`, the KV ladder unpriced: `kv.kv_ladder`), or
    None. Covered too, as no faster and no smaller than one enumerated: sequence parallelism
    off where the search turns it on; a KV cache at or past the ladder's top under partial
    rollouts (past it nothing waits, or it does not fit); any KV cache without them (its
    gaps are bounded, `kv.kv_bounds`); a cap on running sequences no replica fills (as the
    largest offered, where that one is not filled either); a training or forward layout no
    better in any number the search prices than one it enumerates on the group, whatever its
    degrees (`space.dominated`)."""
    sc = ps.scenario
    kind = "forward" if stage == "assessment" else stage
    task = Task(role, kind)
    if kind == "generation":
        shapes = list(generation_shapes(space, ps, role, g, levels=kv_ladder))
        same = [s for s in shapes if _degrees(s, GENERATION_DEGREES, stage)
                == _degrees(layout, GENERATION_DEGREES, stage)]
        if not same:
            return _degrees_off(layout, GENERATION_DEGREES, g)
        cap, offered = max_seqs(sc, layout), sorted({max_seqs(sc, s) for s in same})
        # a cap at or past what a replica can run (`full`) runs as the largest offered when
        # that one is too, with more sampler memory
        full = (most_running(space, ps, same[0]) if space.partial
                else math.ceil(sequences(sc) / layout.dp))
        if cap not in offered and cap >= full <= offered[-1]:
            cap = offered[-1]
        capped = [s for s in same if max_seqs(sc, s) == cap]
        if not capped:
            return (f"max_num_seqs {cap} is not a cap the search prices with these degrees "
                    f"({', '.join(map(str, offered))})")
        ladder = [int(kv) for kv in capped[0].kv_cache_tokens]
        kv = int(layout.kv_cache_tokens)
        if not space.partial or kv in ladder or kv >= ladder[-1]:
            return None
        sizes = ", ".join(f"{k:,}" for k in ladder)
        if kv == kv_fits:
            return (f"partial rollouts with the KV cache that fits where the rollout sits "
                    f"({kv:,} tokens): covered where `rlplan plan` chose this plan's option (it "
                    f"prices that size for the options it proves optimal); otherwise it prices "
                    f"{sizes} tokens for this layout")
        return (f"partial rollouts with a KV cache of {kv:,} tokens: the search prices "
                f"{sizes} tokens for this layout (no bound covers the sizes between)")
    shapes = list(SHAPES[kind](space, ps, role, g))
    mine = [_degrees(s, DEGREES, stage) == _degrees(layout, DEGREES, stage) for s in shapes]
    same = [s for s, m in zip(shapes, mine, strict=True) if m]
    # any shape on the group may do as well (its own degrees first: most often one does);
    # degrees off the menus are covered that way too
    if dominated(space, task, space.pools.index(ps), layout,
                 same + [s for s, m in zip(shapes, mine, strict=True) if not m]):
        return None
    if not same:
        if (short := _cp_short(sc, layout) or _pp_off(sc, layout)) is not None:
            return short
        return _degrees_off(layout, DEGREES, g, ", nor as good as one it prices in time and "
                            "memory")
    options = ", ".join(f"{k} {getattr(layout, k)}" for k in OPTIONS[kind])
    return (f"{options}{' with sequence parallelism' if layout.sp and layout.tp > 1 else ''} "
            "is not a layout the search prices with these degrees, nor as good as one in "
            "time and memory")


def _degrees(x: Layout | LayoutVariants, names: tuple[str, ...], stage: str) -> tuple:
    """A layout's (or shape's) degrees `names`, its expert TP as it runs `stage` (`etp` left
    out means the framework's default, `plan.expert_tp`)."""
    return tuple(expert_tp(x, stage) if k == "etp" else getattr(x, k) for k in names)


def _cp_short(sc: Scenario, layout: Layout) -> str | None:
    """The words for a cp the search leaves out by `search.min_cp_chunk` (None: it does not,
    `layouts.cp_offered`): what it takes for the search to price it."""
    if cp_offered(sc, layout.cp) or layout.cp & (layout.cp - 1):
        return None
    chunk = sc.workload.max_seq_len / layout.cp
    return (f"cp {layout.cp} splits the {sc.workload.max_seq_len:,}-token sequences into "
            f"chunks of {chunk:,.0f} tokens, under search.min_cp_chunk "
            f"({sc.search.min_cp_chunk:,}); set it to {math.floor(chunk):,} or less for the "
            "search to price such layouts")


def _pp_off(sc: Scenario, layout: Layout) -> str | None:
    """The words for a pp the search leaves out as not a power of two (None: it does not,
    `layouts.pp_offered`, or it is past `layouts.MAX_PP`, which no setting widens)."""
    if pp_offered(sc, layout.pp) or layout.pp > MAX_PP:
        return None
    why = ("search.every_pp is false" if sc.search.every_pp is False else
           f"on more than {EVERY_PP_GPU_COUNT} GPUs the search draws powers of two")
    return (f"pp {layout.pp} is not a power of two, and {why}: set search.every_pp true "
            "(--every-pp) to search every pp dividing a group's GPUs")


def _degrees_off(layout: Layout, names: tuple[str, ...], g: int, beaten: str = "") -> str:
    """The words for degrees the search does not enumerate on `g` GPUs (`beaten`: what was
    compared besides)."""
    given = ", ".join(f"{k} {getattr(layout, k)}" for k in names
                      if getattr(layout, k) is not None)
    return (f"{given} is not a shape the search prices on {g} GPUs (powers of two, the "
            f"pipeline splits it offers){beaten}")

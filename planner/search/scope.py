"""The group sizes a proven optimum covers: every size a group may take on clusters of up to
`layouts.EVERY_GPU_COUNT` GPUs, the sizes searched past that — what a plan says of its own
proof (`size_proof`) and of a plan `evaluate` prices (`evaluated`). (No solver here: `evaluate`
does not load one.)"""

from __future__ import annotations

from planner.frameworks import Capabilities, capabilities
from planner.plan import PlanInput
from planner.search.candidate import Space
from planner.search.explain import spans
from planner.search.space import pool_space
from planner.specs.scenario import Scenario


def size_proof(space: Space, proven: bool) -> dict:
    """The plan's `search` fields on the group sizes its proof covers: `group_sizes_proven`
    "every size" (every size a group may take on each pool that the framework runs, if one is
    named), "the sizes searched" (past `layouts.EVERY_GPU_COUNT` GPUs a pool offers fewer:
    `group_sizes_searched` lists them — by pool name with several pools, as the plan's groups
    name theirs) or None (no proof)."""
    every = all(pool.sizes == [s for s in range(1, pool.total_gpus + 1) if space.caps is None
                               or space.caps.size_ok(s, pool.scenario.cluster.gpus_per_node)]
                for pool in space.pools)
    searched = ([] if every else list(space.pools[0].sizes) if len(space.pools) == 1
                else {pool.name: list(pool.sizes) for pool in space.pools})
    return {"group_sizes_proven": (None if not proven else "every size" if every
                                   else "the sizes searched"),
            "group_sizes_searched": searched}


def framework_caps(sc: Scenario) -> Capabilities | None:
    """What the scenario's framework runs (its preset; the scenario has checked the algorithm
    and roles against it), or None: any plan."""
    return None if sc.framework is None else capabilities(sc.framework)


def evaluated(sc: Scenario, plan: PlanInput) -> dict:
    """An evaluated plan's `search` fields: no solver, and `outside_search`, each group whose
    size `rlplan plan` does not search on its pool (past `layouts.EVERY_GPU_COUNT` GPUs, or
    one the scenario's framework does not run) — a proven optimum does not cover a plan with
    one, and it may be faster."""
    caps = framework_caps(sc)
    searched = {pool.name: pool_space(sc, pool.name, caps, 1).sizes for pool in sc.pool_list}
    outside = []
    for group in plan.groups:
        # (a pool the scenario lacks is refused when the plan is priced)
        sizes = searched.get(group.pool or sc.pool_list[0].name, [])
        if sizes and group.gpus not in sizes:
            where = f" of pool {group.pool}" if group.pool else ""
            outside.append(f"group {group.name}: {group.gpus} GPUs, not a size the search "
                           f"offers{where} ({spans(sizes)})")
    return {"solver": "none", "status": "EVALUATED", "outside_search": outside}

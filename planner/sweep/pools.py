"""Capacity grids over a scenario's pools: `rlplan sweep SCENARIO --pool NAME:SIZES ...`.

A point is one size per pool: the product of the sizes each `--pool` names, in the scenario's
pool order, a pool no `--pool` names keeping its scenario size. A pool's sizes are `--gpus`'s
in that pool's node (`planner.sweep.parse_gpus`), plus 0: the pool left out of that point
(`0..64` is 0, then one node doubling to 64). A combination without a GPU is no point.

Each point is the scenario resolved again with its pools resized (`point_scenario`), so a point
means what the same scenario written by hand would: the link between pools defaults to the
slower present pool's inter-node figure, a point left with one pool is a single-pool scenario
(its plan names no pool), and the plan JSON carries the point's own cluster. The points are
solved like any sweep's (`planner.sweep.run`: local processes or Ray, identical answers).

Per row: each pool's GPUs and their total, step time, tokens/s, cost per step and per million
tokens — every GPU of each pool present at that pool's price, idle ones included (as the
single-type sweep; None when a pool present has no price) — and where each role runs. No
scaling or knee: the points are not one line of sizes. The frontier and the target are
`planner.sweep.grid`'s, over all rows.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import product

from planner.cost.step import cost_per_step
from planner.errors import InputError
from planner.plan import Plan
from planner.search.deadline import Deadline
from planner.specs.scenario import Scenario, resolve
from planner.sweep import (
    NoPlan,
    Row,
    Solved,
    node_shape,
    parse_gpus,
    per_million_tokens,
    placement_summary,
    plan_row,
)
from planner.sweep.grid import Grid, PoolAxis, answers, pools_label
from planner.sweep.run import OnDone, solve_points

POOL_FLAG = "--pool"
Sizes = dict[str, int]  # pool name → GPUs at a point, in the scenario's pool order
Prepared = tuple[Sizes, Scenario | NoPlan]  # a point and its scenario, or why it has none


def parse_pools(specs: list[str], sc: Scenario) -> dict[str, list[int]]:
    """The sizes each `--pool NAME:SIZES` names, by pool name. InputError naming the flag for
    a scenario without pools, an unknown pool, a pool given twice, bad sizes."""
    if sc.source_input is None or sc.source_input.cluster.pools is None:
        raise InputError(f"{POOL_FLAG}: the scenario has no cluster.pools to size; list pools in "
                         "the scenario, or sweep its one GPU type with --gpus")
    pools = {p.name: p for p in sc.pool_list}
    named: dict[str, list[int]] = {}
    for spec in specs:
        name, colon, sizes = spec.partition(":")
        name = name.strip()
        if not colon or not name:
            raise InputError(f"{POOL_FLAG} '{spec}': give NAME:SIZES, a pool of the scenario and "
                             f"its sizes, e.g. {next(iter(pools))}:0..64")
        if name not in pools:
            raise InputError(f"{POOL_FLAG} {name}: no pool named '{name}'; the scenario's pools "
                             f"are {', '.join(pools)}")
        if name in named:
            raise InputError(f"{POOL_FLAG} {name}: given twice; give each pool once, its sizes "
                             "as one list (e.g. 8,16,64)")
        named[name] = parse_gpus(sizes, pools[name].cluster.gpus_per_node,
                                 f"{POOL_FLAG} {name}", absent=True)
    return named


def grid_points(sc: Scenario, named: dict[str, list[int]]) -> list[Sizes]:
    """Every combination of the pools' sizes with at least one GPU, the last pool varying
    fastest."""
    names = [p.name for p in sc.pool_list]
    axes = [named.get(p.name, [p.cluster.total_gpus]) for p in sc.pool_list]
    points = [dict(zip(names, combo, strict=True)) for combo in product(*axes) if sum(combo)]
    if not points:
        raise InputError(f"{POOL_FLAG}: every point has no GPU (each pool's sizes are 0); give "
                         "a pool a size above 0, e.g. 8..32")
    return points


def point_scenario(sc: Scenario, sizes: Sizes) -> Scenario:
    """The scenario with each pool at its size at this point (0: left out), resolved again.
    InputError when a pool cannot take its size (a multi-node size on a profile with no
    network figure)."""
    inp = sc.source_input
    assert inp is not None and inp.cluster.pools is not None  # parse_pools checked
    kept = []
    for written, pool in zip(inp.cluster.pools, sc.pool_list, strict=True):
        if gpus := sizes[pool.name]:
            try:
                nodes, per_node = node_shape(pool.cluster, gpus)
            except InputError as exc:
                raise InputError(f"pool {pool.name}: {exc}") from None
            kept.append(written.model_copy(update={"nodes": nodes, "gpus_per_node": per_node}))
    cluster = inp.cluster.model_copy(update={"pools": kept})
    return resolve(inp.model_copy(update={"cluster": cluster}), f"point {pools_label(sizes)}")


def prepare(sc: Scenario, named: dict[str, list[int]]) -> list[Prepared]:
    """Each point with its scenario, or a NoPlan saying why it cannot be formed."""
    out: list[Prepared] = []
    for sizes in grid_points(sc, named):
        try:
            out.append((sizes, point_scenario(sc, sizes)))
        except InputError as exc:
            out.append((sizes, NoPlan(str(exc), searched=False)))
    return out


def pools_cost(iteration_time_s: float, sc: Scenario) -> float | None:
    """USD of one step on every GPU of every pool of `sc`, each at its pool's price; None when
    a pool has no price."""
    costs = [cost_per_step(iteration_time_s, p.cluster.total_gpus, p.cluster.price)
             for p in sc.pool_list]
    return None if None in costs else sum(costs)  # type: ignore[arg-type]


def pool_row(sizes: Sizes, sc: Scenario | NoPlan, answer: Solved) -> Row:
    """A point's row: its pools' sizes, the plan's figures, the cost over every pool's GPUs."""
    gpus = sum(sizes.values())
    if isinstance(answer, NoPlan):
        return Row(gpus, answer.status, reason=answer.reason, pools=sizes)
    assert isinstance(sc, Scenario)
    row = plan_row(gpus, answer, None, " + ".join(p.cluster.gpu.name for p in sc.pool_list))
    cost = pools_cost(answer.iteration_time_s, sc)
    mean = (None if cost is None else
            sum(p.cluster.total_gpus * p.cluster.price for p in sc.pool_list) / gpus)
    return replace(row, cost_per_step_usd=cost, price_usd_per_gpu_hour=mean,
                   cost_per_million_tokens_usd=per_million_tokens(
                       cost, answer.tokens_per_s, answer.iteration_time_s),
                   placement=placement(answer, sc), pools=sizes)


def placement(p: Plan, sc: Scenario) -> str:
    """Where each role runs, and each pool's GPUs no group uses ('; 8 idle on train')."""
    used: dict[str | None, int] = {}
    for g in p.groups:
        used[g.pool] = used.get(g.pool, 0) + g.gpus
    idle = [(pool.name, pool.cluster.total_gpus - used.get(pool.name if sc.multi_pool else None,
                                                            0))
            for pool in sc.pool_list]
    return placement_summary(p) + "".join(f"; {n} idle on {name}" for name, n in idle if n)


def run_pool_grid(sc: Scenario, named: dict[str, list[int]], points: list[Prepared],
                  deadline: Deadline, jobs: int | None = None, ray_address: str | None = None,
                  tokens_per_s: float | None = None, step_s: float | None = None,
                  on_done: OnDone | None = None) -> Grid:
    """Search every formed point of `points` (`prepare`) by `deadline` and tabulate the
    answers; `on_done` counts the formed points only."""
    todo = [point for _, point in points if isinstance(point, Scenario)]
    solved = iter(solve_points([(s, None) for s in todo], deadline, jobs, ray_address, on_done)
                  if todo else [])
    rows = [pool_row(sizes, point, next(solved) if isinstance(point, Scenario) else point)
            for sizes, point in points]
    axes = [PoolAxis(p.name, p.cluster.gpu.name, p.cluster.gpus_per_node,
                     named.get(p.name, [p.cluster.total_gpus]), p.name in named,
                     {"price_usd_per_gpu_hour": p.cluster.price,
                      "price_source": p.cluster.price_source})
            for p in sc.pool_list]
    return Grid([], *answers(rows, tokens_per_s, step_s), pools=axes, points=rows)

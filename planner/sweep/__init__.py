"""Capacity planning (`rlplan sweep`): the best plan for each cluster size, and what they say.

Sizes (`--gpus`): a comma list of sizes and ranges. A range `A..B` doubles from A while it stays
below B and always ends at B (`8..64` → 8, 16, 32, 64; `8..48` → 8, 16, 32, 48). A size up to
one node is one node of that many GPUs and must divide the node (8-GPU nodes: 1, 2, 4, 8); a
larger size is whole nodes. The node is the scenario's `cluster.gpus_per_node` (at most the
profile's); the scenario's `cluster.nodes` is what the sweep varies, so it is ignored.

Each size is searched on its own, in worker processes or on Ray (`planner.sweep.run`), all
within the command's one time limit. A grid over several GPU types (`planner.sweep.grid`)
makes one such table per profile; a grid over the sizes of a scenario's pools
(`planner.sweep.pools`) one table of the pools' combinations.

Per row: throughput per GPU of the swept size; scaling efficiency, that
per-GPU throughput over the smallest feasible size's; cost per step and per million tokens for
every GPU of the swept size (the ones a plan leaves idle are rented too; the plan dict keeps its
own figure over the GPUs it uses).

The knee: the first feasible size after which the step to the next feasible size gains less
than half of the ideal throughput increase (marginal scaling (T_b/T_a − 1)/(b/a − 1) < 50%);
None when every step gains at least half.

Consistency: the search may leave GPUs idle (its groups need only fit the cluster), so batch
divisibility alone cannot make a larger size slower — a smaller size's plan is also a plan on
more GPUs, provided its group sizes are on the larger size's menu. They are not always: every
size up to 64 GPUs (`layouts.EVERY_GPU_COUNT`), past that any count within a node and any node
multiple on up to 16 nodes, on larger clusters power-of-two node multiples and their
complements to the cluster (`planner.search.layouts.slot_sizes`), so 36 + 28 on 64 GPUs has
no 36-GPU group on 72, and 136 + 8 on 144 GPUs no 136-GPU group on 256.
The other cause is a search stopped at its time limit. A row slower than a smaller size
carries a note naming the causes that apply.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from itertools import pairwise

from planner.cost.step import cost_per_step
from planner.errors import InputError
from planner.plan import SCHEMA_VERSION, Plan
from planner.search.layouts import slot_sizes
from planner.specs import bounds as lim
from planner.specs.files import shorten
from planner.specs.hardware import ClusterSpec, gpu_count
from planner.specs.scenario import Scenario

FLAG = "--gpus"
KNEE_MARGINAL = 0.5  # a step gaining less than this share of the ideal increase is past the knee
# The solver scores whole milliseconds per task; the re-priced times of two plans it ties can
# differ by that rounding, so a larger size counts as slower only beyond this relative margin.
TIE = 1e-3


@dataclass(frozen=True)
class NoPlan:
    """Why a size has no plan; `searched` False when the size was refused, or not reached in
    time, without a search; `timeout` True when its share of the time limit ran out (or none
    was left for it) before a plan was found: not proven infeasible."""

    reason: str
    searched: bool = True
    timeout: bool = False

    @property
    def status(self) -> str:
        return "timeout" if self.timeout else "infeasible"


Solved = Plan | NoPlan


# --- sizes ----------------------------------------------------------------------------------


def parse_gpus(spec: str, gpus_per_node: int, flag: str = FLAG,
               absent: bool = False) -> list[int]:
    """The cluster sizes a `--gpus` spec names, ascending and without repeats. With `absent`
    (a pool's sizes, `--pool NAME:SIZES`) 0 is a size too — the pool left out — and a range
    from 0 is 0 and then the range from one node (`0..64` on 8-GPU nodes: 0, 8, 16, 32, 64)."""
    sizes: set[int] = set()
    example = "0,8,16 or 0..64" if absent else "8,16,32 or 8..256"
    items = [part.strip() for part in spec.split(",")]
    if not any(items):
        raise InputError(f"{flag}: no sizes given; give sizes and ranges such as {example}")
    if not all(items):  # as `--gpu a,,b` is refused: a typo, not a size to skip
        raise InputError(f"{flag}: '{shorten(spec)}' has an empty size between commas; give "
                         f"sizes and ranges separated by commas, such as {example}")
    for item in items:
        if m := re.fullmatch(r"([0-9]+)\s*\.\.\s*([0-9]+)", item):
            first, last = _count(m[1], gpus_per_node, flag), _count(m[2], gpus_per_node, flag)
            if absent and first == 0 and last > 0:
                sizes.add(0)
                first = min(gpus_per_node, last)
            sizes.update(doubling(first, last, flag))
        elif re.fullmatch(r"[0-9]+", item):
            sizes.add(_count(item, gpus_per_node, flag))
        else:
            raise InputError(f"{flag}: '{shorten(item)}' is not a size or a range; give sizes "
                             f"and ranges such as {example}")
    for gpus in sorted(sizes):
        if not (absent and gpus == 0):
            check_size(gpus, gpus_per_node, flag)
    return sorted(sizes)


def _count(digits: str, gpus_per_node: int, flag: str) -> int:
    """A size's digits as a number; a number longer than any input takes is refused before
    converting it (Python refuses integers of over 4,300 digits)."""
    if len(digits) > lim.MAX_NUMBER_CHARS:
        raise _above(f"a size of {len(digits):,} digits", gpus_per_node, flag)
    return int(digits)


def size_limit(gpus_per_node: int) -> int:
    """The largest cluster a sweep may size in nodes of `gpus_per_node`."""
    return min(lim.MAX_TOTAL_GPUS, lim.MAX_NODES * gpus_per_node)


def _above(what: str, gpus_per_node: int, flag: str) -> InputError:
    return InputError(f"{flag}: {what} is above the limit of {size_limit(gpus_per_node):,} "
                      f"({lim.MAX_NODES:,} nodes, {lim.MAX_TOTAL_GPUS:,} GPUs); sweep smaller "
                      "sizes")


def doubling(first: int, last: int, flag: str = FLAG) -> list[int]:
    """A range `first..last`: doubling from `first` while below `last`, then `last`."""
    if first < 1 or last < first:
        raise InputError(f"{flag}: range {first}..{last} must go from a size of at least 1 up "
                         f"to a larger one, e.g. {max(first, 1)}..{max(first, 1) * 8}")
    out, size = [], first
    while size < last:
        out.append(size)
        size *= 2
    return [*out, last]


def check_size(gpus: int, gpus_per_node: int, flag: str = FLAG) -> None:
    """A size is whole nodes, or one node's worth that divides the node."""
    node = gpus_per_node
    fix = "" if flag != FLAG else " (or set --gpus-per-node)"
    if gpus < 1:
        raise InputError(f"{flag}: {gpu_count(gpus)}; sizes start at 1")
    if gpus > size_limit(node):
        raise _above(f"{gpus:,} GPUs", node, flag)
    if gpus < node and node % gpus:
        fits = ", ".join(str(d) for d in range(1, node + 1) if node % d == 0)
        raise InputError(f"{flag}: {gpu_count(gpus)} do not divide a node of {node}; below one "
                         f"node use {fits}{fix}")
    if gpus > node and gpus % node:
        low, high = gpus // node * node, (gpus // node + 1) * node
        raise InputError(f"{flag}: {gpu_count(gpus)} are not whole nodes of {node}; use a "
                         f"multiple of {node} such as {low} or {high}{fix}")


def node_shape(c: ClusterSpec, gpus: int) -> tuple[int, int]:
    """(nodes, GPUs per node) of `gpus` GPUs in cluster `c`'s node shape: one node of `gpus`
    up to a node, else whole nodes. Raises InputError for a multi-node size on a profile with
    no network figure."""
    node = c.gpus_per_node
    nodes, per_node = (1, gpus) if gpus <= node else (gpus // node, node)
    if nodes > 1 and c.gpu.inter_node_gbps is None:
        raise InputError(f"{gpu_count(gpus)} span {nodes} nodes, but profile {c.gpu.name} has no "
                         f"inter_node_gbps to price traffic between nodes; set it in the profile "
                         f"or sweep up to {node} GPUs")
    return nodes, per_node


def cluster_for(sc: Scenario, gpus: int) -> ClusterSpec:
    """`gpus` GPUs in the scenario's node shape (`node_shape`)."""
    return sc.cluster.reshaped(*node_shape(sc.cluster, gpus))


def sized(sc: Scenario, gpus: int) -> Scenario:
    """The scenario on `gpus` GPUs; its `source_input` (the plan JSON's `scenario` key) says so
    too, so a sweep row's plan evaluates on the cluster it was planned for."""
    cluster = cluster_for(sc, gpus)
    src = sc.source_input
    if src is not None:
        shape = {"nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node}
        src = src.model_copy(update={"cluster": src.cluster.model_copy(update=shape)})
    return sc.model_copy(update={"cluster": cluster, "source_input": src})


# --- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One swept size. Numbers are None when the size has no plan (or no price)."""

    gpus: int
    status: str  # optimal | feasible | infeasible | timeout (no plan found in its time)
    iteration_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    scaling_efficiency: float | None = None
    marginal_scaling: float | None = None  # against the previous feasible size
    cost_per_step_usd: float | None = None
    cost_per_million_tokens_usd: float | None = None
    gpus_used: int | None = None
    placement: str | None = None
    note: str | None = None  # why a larger size is slower than a smaller one
    reason: str | None = None  # why infeasible, or what ran out of time
    plan: dict | None = None
    gpu: str | None = None  # the hardware profile
    price_usd_per_gpu_hour: float | None = None
    pools: dict[str, int] | None = None  # a pool grid's point: each pool's GPUs (0: absent)

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "feasible")


@dataclass(frozen=True)
class Sweep:
    """One profile's table."""

    gpus_per_node: int
    rows: list[Row]
    smallest_feasible: int | None
    knee: int | None
    price: dict | None = None  # price_usd_per_gpu_hour and price_source, as a plan's `cost`
    gpu: str | None = None  # the hardware profile

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "gpu": self.gpu,
            "gpus_per_node": self.gpus_per_node,
            "rows": [asdict(r) for r in self.rows],
            "smallest_feasible_gpus": self.smallest_feasible,
            "knee_gpus": self.knee,
            "cost": self.price,
            "definitions": {
                "cost": "every GPU of the swept size, idle ones included",
                "scaling_efficiency": "tokens/s per GPU over the smallest feasible size's",
                "marginal_scaling": "(T_b/T_a - 1)/(b/a - 1) from the previous feasible size",
                "knee": f"first size whose next step has marginal_scaling < {KNEE_MARGINAL}"},
        }


CSV_COLUMNS = ("gpu", "gpus", "status", "iteration_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
               "scaling_efficiency", "marginal_scaling", "cost_per_step_usd",
               "cost_per_million_tokens_usd", "price_usd_per_gpu_hour", "gpus_used", "placement",
               "note", "reason")


def per_million_tokens(cost_per_step_usd: float | None, tokens_per_s: float,
                       iteration_time_s: float) -> float | None:
    """Cost of a million tokens: a step's cost over the tokens a step processes."""
    if cost_per_step_usd is None:
        return None
    return cost_per_step_usd / (tokens_per_s * iteration_time_s) * 1e6


def marginal_scaling(a: int, tokens_a: float, b: int, tokens_b: float) -> float:
    """The share of the ideal throughput increase going from a to b GPUs realises."""
    return (tokens_b / tokens_a - 1) / (b / a - 1)


def placement_summary(p: Plan) -> str:
    """Where each model runs, e.g. 'colocated: g0×32' or
    'disaggregated: g0×16 (actor training, reference), g1×16 (actor generation)'; with pools
    each group names its own ('g1×64 on rollout (actor generation)')."""
    im = p.inter_model
    parts = []
    for g in p.groups:
        on = []
        for role, stages in p.layouts.items():
            here = [stage for stage, lay in stages.items() if lay.group == g.name]
            if here:
                on.append(role if len(here) == len(stages) else f"{role} {'+'.join(here)}")
        pool = f" on {g.pool}" if g.pool else ""
        parts.append(f"{g.name}×{g.gpus}{pool}"
                     + (f" ({', '.join(on)})" if len(p.groups) > 1 else ""))
    extras = im.choices()
    return f"{im.placement}: {', '.join(parts)}" + (f"; {', '.join(extras)}" if extras else "")


def plan_row(gpus: int, p: Plan, price: float | None, gpu: str | None = None) -> Row:
    cost = cost_per_step(p.iteration_time_s, gpus, price)
    used = sum(g.gpus for g in p.groups)
    idle = f"; {gpu_count(gpus - used)} idle" if used < gpus else ""
    return Row(gpus=gpus, status=p.status, iteration_time_s=p.iteration_time_s,
               tokens_per_s=p.tokens_per_s, tokens_per_s_per_gpu=p.tokens_per_s / gpus,
               cost_per_step_usd=cost,
               cost_per_million_tokens_usd=per_million_tokens(cost, p.tokens_per_s,
                                                              p.iteration_time_s),
               gpus_used=used, placement=placement_summary(p) + idle,
               plan=p.model_dump(mode="json"), gpu=gpu, price_usd_per_gpu_hour=price)


def slower_note(row: Row, faster: Row, gpus_per_node: int) -> str:
    """Why `row` is slower than the smaller size `faster`: the causes that apply."""
    causes = []
    if row.status == "feasible":
        gap = row.plan["search"].get("gap", 0.0) if row.plan else 0.0
        causes.append(f"the search stopped at its time limit {gap:.0%} from its bound; raise "
                      "--time-limit")
    menu = slot_sizes(row.gpus, min(row.gpus, gpus_per_node))
    groups = [g["gpus"] for g in faster.plan["groups"]] if faster.plan else []
    if off := sorted({g for g in groups if g not in menu}):
        causes.append(f"the {faster.gpus}-GPU plan's {'/'.join(map(str, off))}-GPU group is not "
                      f"a group size the search offers on {gpu_count(row.gpus)} "
                      f"({', '.join(map(str, menu))}), and those did no better (batch "
                      "divisibility or memory)")
    if not causes:
        causes.append("both searches proved their optimum and the smaller plan fits here; "
                      "please report this")
    return (f"slower than {gpu_count(faster.gpus)} ({faster.iteration_time_s:.2f} s): "
            + "; ".join(causes))


def infeasible_note(faster: Row) -> str:
    """Why a size proven infeasible is, though a smaller one has a plan (a size whose time ran
    out is `timeout`, not infeasible)."""
    return (f"no plan fits, yet {gpu_count(faster.gpus)} have one: the group sizes offered "
            "here do not include that plan's (batch divisibility or memory)")


def knee(rows: list[Row]) -> int | None:
    """The first feasible size whose step to the next feasible size has marginal scaling
    below KNEE_MARGINAL."""
    ok = [r for r in rows if r.feasible]
    for a, b in pairwise(ok):
        if b.marginal_scaling is not None and b.marginal_scaling < KNEE_MARGINAL:
            return a.gpus
    return None


def summarize(answers: list[tuple[int, Solved]], gpus_per_node: int, price: float | None,
              gpu: str | None = None) -> Sweep:
    """The sweep's table for profile `gpu` from each size's answer (sizes ascending)."""
    out: list[Row] = []
    first: Row | None = None  # the smallest feasible size: efficiency's reference
    previous: Row | None = None  # the last feasible size
    fastest: Row | None = None  # the fastest smaller feasible size
    for gpus, answer in answers:
        if isinstance(answer, NoPlan):
            note = (infeasible_note(fastest) if fastest and answer.searched
                    and not answer.timeout else None)
            out.append(Row(gpus, answer.status, reason=answer.reason, note=note, gpu=gpu,
                           price_usd_per_gpu_hour=price))
            continue
        row = plan_row(gpus, answer, price, gpu)
        first = first or row
        changes: dict = {"scaling_efficiency": row.tokens_per_s_per_gpu
                         / first.tokens_per_s_per_gpu}
        if previous:
            changes["marginal_scaling"] = marginal_scaling(previous.gpus, previous.tokens_per_s,
                                                           row.gpus, row.tokens_per_s)
        if fastest and row.iteration_time_s > fastest.iteration_time_s * (1 + TIE):
            changes["note"] = slower_note(row, fastest, gpus_per_node)
        row = replace(row, **changes)
        out.append(row)
        previous = row
        if fastest is None or row.iteration_time_s < fastest.iteration_time_s:
            fastest = row
    return Sweep(gpus_per_node=gpus_per_node, rows=out,
                 smallest_feasible=first.gpus if first else None, knee=knee(out), gpu=gpu)

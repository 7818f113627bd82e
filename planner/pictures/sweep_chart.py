"""The sweep picture: throughput against GPUs, and step time against cost with the frontier.

Left, one profile: throughput (left axis) and the ideal linear scaling from the smallest
feasible size (ending at the plot's top edge), cost per million tokens (right axis, when the
profile has a price), the smallest feasible size, the knee and the target's point ringed and
named in the legend (no label over a line), infeasible sizes crossed on the GPU axis (sizes
whose time ran out ringed there), and the target throughput as a line when one is given.
Several profiles: one throughput line each, the target's point ringed. GPUs on a log2 axis,
ticked at the swept sizes. A pool grid: throughput against the last swept pool's sizes
(evenly spaced, since 0 is a size), one line per combination of the other swept pools' sizes.

Right: every priced point's step time against its cost per step, the cost–time frontier joined
(`planner.sweep.grid`), the target's point ringed and a target step time as a line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from planner import pictures
from planner.specs.hardware import gpu_count
from planner.sweep import Row, Sweep
from planner.sweep.grid import Grid, label, pools_label, usd

THROUGHPUT, COST, IDEAL, MARK, INFEASIBLE, TARGET = (
    "tab:blue", "tab:orange", "tab:gray", "black", "tab:red", "tab:green")


def render(grid: Grid, fmt: str, title: str) -> bytes:
    """The picture as `fmt` ('svg' or 'png') bytes."""
    return pictures.render(lambda: draw(grid, title), fmt)


def draw(grid: Grid, title: str) -> Figure:
    fig = Figure(figsize=(15, 5.5), layout="constrained")
    fig.suptitle(title)
    left, right = fig.subfigures(1, 2, width_ratios=[1.15, 1])
    if grid.pools is not None:
        _pools(left.add_subplot(), grid)
    elif len(grid.sweeps) == 1:
        _one_profile(left, grid.sweeps[0], grid)
    else:
        _profiles(left.add_subplot(), grid)
    _frontier(right.add_subplot(), grid)
    return fig


def _target_tokens(grid: Grid) -> float | None:
    return grid.target.tokens_per_s if grid.target else None


def _one_profile(fig, sweep: Sweep, grid: Grid) -> None:
    ax = fig.add_subplot()
    target = _target_tokens(grid)
    sizes = [r.gpus for r in sweep.rows]
    ok = [r for r in sweep.rows if r.feasible]
    priced = [r for r in ok if r.cost_per_million_tokens_usd is not None]
    ax2 = ax.twinx() if priced else None  # drawn over `ax`: labels go on the top axes

    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)
    ax.set_xticks(sizes, [str(g) for g in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("GPUs")
    ax.set_ylabel("throughput (tokens/s)", color=THROUGHPUT)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, alpha=0.3)
    ax.set_title("throughput and cost against GPUs")
    handles = []
    if ok:
        xs, tps = [r.gpus for r in ok], [r.tokens_per_s for r in ok]
        handles += ax.plot(xs, tps, "o-", color=THROUGHPUT, label="throughput (tokens/s)")
        top = max([*tps, target or 0]) * 1.3
        ax.set_ylim(0, top)
        ideal_x, ideal_y = _up_to(xs, [tps[0] * x / xs[0] for x in xs], top)
        handles += ax.plot(ideal_x, ideal_y, "--", color=IDEAL, linewidth=1,
                           label=f"ideal: linear from {gpu_count(xs[0])}"
                                 + (" (above the plot past here)" if ideal_x[-1] < xs[-1]
                                    else ""))
    else:
        ax.set_ylim(0, 1)
        ax.text(0.5, 0.5, "no size has a plan", transform=ax.transAxes, ha="center")

    handles += _no_plan(ax, sweep.rows, lambda r: r.gpus, INFEASIBLE)
    if target is not None:
        handles.append(ax.axhline(target, linestyle=":", color=TARGET,
                                  label=f"target {target:,.0f} tokens/s"))
    if ax2 is not None:
        handles += ax2.plot([r.gpus for r in priced],
                            [r.cost_per_million_tokens_usd for r in priced], "s--", color=COST,
                            label="cost per million tokens (USD)")
        ax2.set_ylabel("cost per million tokens (USD)", color=COST)
        ax2.set_ylim(0, max(r.cost_per_million_tokens_usd for r in priced) * 1.3)
        ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.2f}"))
    elif ok:
        ax.text(0.99, 0.02, "no price in the profile: cost not drawn", transform=ax.transAxes,
                ha="right", fontsize=8, color=COST)
    handles += _marks(ax, ok, sweep, grid)
    (ax2 or ax).legend(handles=handles, loc="upper left", fontsize=8)


def _up_to(xs: list[float], ys: list[float], top: float) -> tuple[list[float], list[float]]:
    """The polyline (xs, ys) on a log2 x axis up to where it reaches `top`: it ends on the
    plot's edge instead of running past it."""
    out_x, out_y = [xs[0]], [ys[0]]
    for (xa, ya), (xb, yb) in pairwise(zip(xs, ys, strict=True)):
        if yb <= top:
            out_x.append(xb)
            out_y.append(yb)
            continue
        t = (top - ya) / (yb - ya)  # the segment is straight in log2 x
        out_x.append(2 ** (math.log2(xa) + t * (math.log2(xb) - math.log2(xa))))
        out_y.append(top)
        break
    return out_x, out_y


def _target_label(grid: Grid) -> str:
    return ("cheapest meeting the target" if grid.target.by == "cost" else
            "fewest reaching the target")


def _marks(ax, rows, sweep: Sweep, grid: Grid) -> list:
    """Ring the smallest feasible size, the knee and the point answering the target on the
    throughput curve, each named in the legend ('knee: 16 GPUs'), so no label lies over a
    line; the legend handles."""
    hit = grid.target.row if grid.target else None
    kinds = [(sweep.smallest_feasible, "smallest feasible", "D"), (sweep.knee, "knee", "*"),
             (hit.gpus if hit else None, _target_label(grid) if hit else "", "o")]
    by_size = {r.gpus: r for r in rows}
    handles = []
    for gpus, what, marker in kinds:
        if gpus in by_size:
            handles += ax.plot([gpus], [by_size[gpus].tokens_per_s], marker, color=MARK,
                               markersize=12, markerfacecolor="none", markeredgewidth=1.5,
                               linestyle="none", label=f"{what}: {gpu_count(gpus)}")
    return handles


def _axis_gpus(ax, sizes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)
    ax.set_xticks(sizes, [str(g) for g in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("GPUs")


def _profiles(ax, grid: Grid) -> None:
    """One throughput line per profile; infeasible points crossed on the GPU axis."""
    _axis_gpus(ax, sorted({r.gpus for r in grid.rows}))
    _throughput_lines(ax, grid, "throughput against GPUs, per GPU type",
                      [(s.gpu, s.rows) for s in grid.sweeps], lambda r: r.gpus)


def _pools(ax, grid: Grid) -> None:
    """A pool grid: throughput against the last swept pool's sizes, one line per combination
    of the other swept pools' sizes; infeasible points crossed on the axis."""
    axes = grid.pools or []
    swept = [p for p in axes if p.swept] or axes[-1:]
    along = swept[-1]
    pos = {g: k for k, g in enumerate(along.sizes)}
    others = [p.name for p in swept[:-1]]
    lines: dict[tuple[int, ...], list[Row]] = {}
    for r in grid.rows:
        lines.setdefault(tuple((r.pools or {})[n] for n in others), []).append(r)
    ax.set_xticks(range(len(along.sizes)), [str(g) for g in along.sizes])
    ax.set_xlim(-0.5, len(along.sizes) - 0.5)
    ax.set_xlabel(f"{along.name} GPUs ({along.gpu})")
    title = (f"throughput against {along.name} GPUs"
             + (f", per {' + '.join(others)} size" if others else ""))
    named = [(" + ".join(f"{n} {g}" for n, g in zip(others, key, strict=True)) or along.name,
              rows) for key, rows in lines.items()]
    _throughput_lines(ax, grid, title, named, lambda r: pos[r.pools[along.name]])


def _throughput_lines(ax, grid: Grid, title: str, lines: list[tuple[str, list[Row]]],
                      x: Callable[[Row], float]) -> None:
    """One throughput line per (name, rows), each row at `x(row)`; infeasible points crossed
    on the x axis; the target as a dotted line."""
    ax.set_ylabel("throughput (tokens/s)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    top = _target_tokens(grid) or 0
    for k, (name, rows) in enumerate(lines):
        ok = [r for r in rows if r.feasible]
        if ok:
            ax.plot([x(r) for r in ok], [r.tokens_per_s for r in ok], "o-", color=f"C{k}",
                    label=name)
            top = max(top, *(r.tokens_per_s for r in ok))
        _no_plan(ax, rows, x, f"C{k}", f"{name}: ")
    ax.set_ylim(0, (top or 1) * 1.3)
    if (target := _target_tokens(grid)) is not None:
        ax.axhline(target, linestyle=":", color=TARGET, label=f"target {target:,.0f} tokens/s")
    hit = grid.target.row if grid.target else None
    if hit is not None:  # the point the sweep answers with, ringed
        ax.plot([x(hit)], [hit.tokens_per_s], "o", color=MARK, markersize=14,
                markerfacecolor="none", markeredgewidth=1.8, linestyle="none",
                label=f"{_target_label(grid)}: {label(hit)}")
    ax.legend(loc="upper left", fontsize=8)


# how a size without a plan is drawn on the x axis, by its row's status
NO_PLAN = {"infeasible": ("x", {}, "infeasible (no plan)"),
           "timeout": ("o", {"markerfacecolor": "none"}, "timeout (no plan in its time)")}


def _no_plan(ax, rows: list[Row], x: Callable[[Row], float], color: str, name: str = "") -> list:
    """Mark the rows without a plan on the x axis (`NO_PLAN`); the legend handles."""
    handles = []
    for status, (marker, style, what) in NO_PLAN.items():
        xs = [x(r) for r in rows if r.status == status]
        if xs:
            handles += ax.plot(xs, [0] * len(xs), marker, color=color, markersize=10,
                               markeredgewidth=2, clip_on=False,
                               transform=ax.get_xaxis_transform(), label=f"{name}{what}",
                               **style)
    return handles


def _series(grid: Grid) -> list[tuple[str, list[Row]]]:
    """The frontier panel's point sets: one per profile, or a pool grid's rows as one."""
    if grid.pools is not None:
        return [("pool sizes", grid.rows)]
    several = len(grid.sweeps) > 1
    return [(s.gpu if several else "swept sizes", s.rows) for s in grid.sweeps]


def _tag(r: Row) -> str:
    """A point's short label on the frontier panel: '16', or a pool grid's '16+32'."""
    return "+".join(map(str, r.pools.values())) if r.pools else str(r.gpus)


def _frontier(ax, grid: Grid) -> None:
    """Step time against cost per step: every priced point, the frontier joined."""
    ax.set_title("step time against cost: the cost–time frontier")
    ax.set_xlabel("cost per step (USD)")
    ax.set_ylabel("step time (s)")
    ax.grid(True, alpha=0.3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: usd(v)))
    several = len(grid.sweeps) > 1
    priced = False
    if grid.pools is not None:
        ax.text(0.01, 0.02, "points labelled " + "+".join(p.name for p in grid.pools)
                + " GPUs", transform=ax.transAxes, fontsize=8)
    for k, (name, rows) in enumerate(_series(grid)):
        pts = [r for r in rows if r.feasible and r.cost_per_step_usd is not None]
        if not pts:
            continue
        priced = True
        ax.plot([r.cost_per_step_usd for r in pts], [r.iteration_time_s for r in pts], "o",
                color=f"C{k}", alpha=0.8, label=name)
        for r in pts:
            ax.annotate(_tag(r), (r.cost_per_step_usd, r.iteration_time_s), fontsize=7,
                        xytext=(4, 3), textcoords="offset points", color=f"C{k}")
    if not priced:
        ax.text(0.5, 0.5, "no point has a price: no frontier ("
                + ("set each pool's price" if grid.pools is not None else "pass --price") + ")",
                transform=ax.transAxes, ha="center")
        return
    f = grid.frontier
    ax.plot([r.cost_per_step_usd for r in f], [r.iteration_time_s for r in f], "-",
            color=MARK, linewidth=1.2, zorder=1, label="cost–time frontier")
    hit = grid.target.row if grid.target else None
    if hit is not None and hit.cost_per_step_usd is not None:
        ax.plot([hit.cost_per_step_usd], [hit.iteration_time_s], "o", color=TARGET,
                markersize=14, markerfacecolor="none", markeredgewidth=1.8,
                label=f"target: {pools_label(hit.pools)}" if hit.pools else
                f"target: {hit.gpus} GPUs" + (f" of {hit.gpu}" if several else ""))
    if grid.target and grid.target.step_s is not None:
        ax.axhline(grid.target.step_s, linestyle=":", color=TARGET,
                   label=f"target step {grid.target.step_s:g} s")
    if grid.unpriced:
        ax.text(0.99, 0.02, f"{len(grid.unpriced)} feasible point(s) without a price not shown",
                transform=ax.transAxes, ha="right", fontsize=8)
    ax.legend(loc="upper right", fontsize=8)

"""The sweep picture: throughput and cost per million tokens against GPUs.

Throughput (left axis) and the ideal linear scaling from the smallest feasible size, cost per
million tokens (right axis, when the profile has a price), the smallest feasible size and the
knee marked and labelled, infeasible sizes crossed on the GPU axis, and the target throughput
as a line when one is given. GPUs on a log2 axis, ticked at the swept sizes.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from planner import pictures
from planner.specs.hardware import gpu_count
from planner.sweep import Sweep

THROUGHPUT, COST, IDEAL, MARK, INFEASIBLE, TARGET = (
    "tab:blue", "tab:orange", "tab:gray", "black", "tab:red", "tab:green")


def render(sweep: Sweep, fmt: str, title: str) -> bytes:
    """The picture as `fmt` ('svg' or 'png') bytes."""
    return pictures.render(lambda: draw(sweep, title), fmt)


def draw(sweep: Sweep, title: str) -> Figure:
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
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
    ax.set_title(title)
    handles = []
    if ok:
        xs, tps = [r.gpus for r in ok], [r.tokens_per_s for r in ok]
        handles += ax.plot(xs, tps, "o-", color=THROUGHPUT, label="throughput (tokens/s)")
        handles += ax.plot(xs, [tps[0] * x / xs[0] for x in xs], "--", color=IDEAL,
                           linewidth=1, label=f"ideal: linear from {gpu_count(xs[0])}")
        ax.set_ylim(0, max([*tps, sweep.target_tokens_per_s or 0]) * 1.3)
    else:
        ax.set_ylim(0, 1)
        ax.text(0.5, 0.5, "no size has a plan", transform=ax.transAxes, ha="center")

    bad = [r.gpus for r in sweep.rows if not r.feasible]
    if bad:
        handles += ax.plot(bad, [0] * len(bad), "x", color=INFEASIBLE, markersize=10,
                           markeredgewidth=2, clip_on=False, transform=ax.get_xaxis_transform(),
                           label="infeasible (no plan)")
    if sweep.target_tokens_per_s is not None:
        handles.append(ax.axhline(sweep.target_tokens_per_s, linestyle=":", color=TARGET,
                                  label=f"target {sweep.target_tokens_per_s:,.0f} tokens/s"))
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
    _marks(ax, ax2 or ax, ok, sweep)
    (ax2 or ax).legend(handles=handles, loc="upper left", fontsize=8)
    return fig


def _marks(ax, top, rows, sweep: Sweep) -> None:
    """Ring the smallest feasible size, the knee and the fewest GPUs reaching the target on the
    throughput curve, one label per point (e.g. 'smallest feasible, knee: 8 GPUs')."""
    kinds = [(sweep.smallest_feasible, "smallest feasible", "D"), (sweep.knee, "knee", "*"),
             (sweep.target_gpus, "fewest reaching the target", "o")]
    by_size = {r.gpus: r for r in rows}
    labels: dict[int, list[str]] = {}
    for gpus, what, marker in kinds:
        if gpus in by_size:
            row = by_size[gpus]
            ax.plot([gpus], [row.tokens_per_s], marker, color=MARK, markersize=12,
                    markerfacecolor="none", markeredgewidth=1.5)
            labels.setdefault(gpus, []).append(what)
    for k, (gpus, whats) in enumerate(sorted(labels.items())):
        top.annotate(f"{', '.join(whats)}: {gpu_count(gpus)}",
                     (gpus, by_size[gpus].tokens_per_s), xycoords=ax.transData,
                     xytext=(0, 34 if k % 2 == 0 else -38), textcoords="offset points",
                     ha="center", fontsize=9, zorder=5,
                     bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.9,
                           "edgecolor": "none"},
                     arrowprops={"arrowstyle": "-", "color": MARK, "linewidth": 0.8})

"""The timeline of one steady-state iteration: a lane per device group, a bar per task,
resharding/sync and idle gaps, drawn to scale from the plan's `breakdown.timeline`.

Under asynchrony every group's work starts at 0 and the lanes overlap in time (the groups
pipeline across iterations); under stage fusion assessment overlaps the generation tail.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from planner import pictures
from planner.plan import Plan

COLOURS = {"generation": "#4c78a8", "assessment": "#f58518", "training": "#54a24b",
           "sync": "#b279a2", "idle": "#e5e5e5"}
KIND_LABELS = {"generation": "generation", "assessment": "assessment", "training": "training",
               "sync": "resharding / sync", "idle": "idle"}


def render(plan: Plan, fmt: str) -> bytes:
    """The timeline of `plan` as `fmt` ('svg' or 'png') bytes."""
    return pictures.render(lambda: draw(plan), fmt)


def draw(plan: Plan) -> Figure:
    segments = plan.breakdown.get("timeline") or []
    groups = [g.name for g in plan.groups]
    sizes = {g.name: g.gpus for g in plan.groups}
    period = plan.iteration_time_s
    fig = Figure(figsize=(11, 1.6 + 0.8 * len(groups)), layout="constrained")
    ax = fig.add_subplot()
    for seg in segments:
        lane = len(groups) - 1 - groups.index(seg["group"])  # first group on top
        width = seg["end_s"] - seg["start_s"]
        ax.broken_barh([(seg["start_s"], width)], (lane - 0.35, 0.7),
                       facecolors=COLOURS[seg["kind"]], edgecolors="white", linewidth=0.5)
        if seg["role"] and width > 0.06 * period:  # label bars wide enough to hold text
            ax.text(seg["start_s"] + width / 2, lane, seg["role"], ha="center", va="center",
                    fontsize=8, color="white")
    ax.axvline(period, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(groups)),
                  [f"{g} ({sizes[g]} GPUs)" for g in reversed(groups)])
    ax.set_xlim(0, period * 1.02)
    ax.set_ylim(-0.6, len(groups) - 0.4)
    ax.set_xlabel("seconds into the iteration")
    how = [plan.inter_model.placement, *plan.inter_model.choices()]
    ax.set_title(f"One iteration: {period:.1f} s ({', '.join(how)})")
    kinds = [k for k in COLOURS if any(s["kind"] == k for s in segments)]
    fig.legend(handles=[Patch(color=COLOURS[k], label=KIND_LABELS[k]) for k in kinds],
               loc="outside lower center", ncol=len(kinds), frameon=False)
    return fig

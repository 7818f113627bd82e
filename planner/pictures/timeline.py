"""The timeline of one steady-state iteration: a lane per device group, a bar per task,
resharding/sync and idle gaps, drawn to scale from the plan's `breakdown.timeline` (and a lane
for the controller's host time when the plan has one).

Every task's bar is labelled with its role: inside it, or above or below a bar too narrow to
hold the word (a reference's or a reward model's assessment). Under asynchrony every group's
work starts at 0 and the lanes overlap in time (the groups pipeline across iterations); under
stage fusion assessment overlaps the generation tail.
When the plan carries `breakdown.rollout`, an axes above the lanes (same seconds) draws the
slowest replica's running sequences over its generation, so the long tail shows as the thin
end of the area after the dashed "90% done" marker.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from planner import pictures
from planner.plan import Plan

COLOURS = {"generation": "#4c78a8", "assessment": "#f58518", "training": "#54a24b",
           "sync": "#b279a2", "idle": "#e5e5e5", "controller": "#9d755d"}
KIND_LABELS = {"generation": "generation", "assessment": "assessment", "training": "training",
               "sync": "resharding / sync", "idle": "idle", "controller": "controller (host)"}
RUNNING_LABEL = "running sequences"
"""The y label of the rollout axes (tests look for it in the SVG)."""


def render(plan: Plan, fmt: str) -> bytes:
    """The timeline of `plan` as `fmt` ('svg' or 'png') bytes."""
    return pictures.render(lambda: draw(plan), fmt)


def draw(plan: Plan) -> Figure:
    segments = plan.breakdown.get("timeline") or []
    # the controller's host time (group None) gets a lane of its own, below the groups'
    host = any(s["group"] is None for s in segments)
    groups = [g.name for g in plan.groups] + ([None] if host else [])
    sizes = {g.name: f"{g.gpus} GPUs" + (f", pool {g.pool}" if g.pool else "")
             for g in plan.groups}
    period = plan.iteration_time_s
    rollout = plan.breakdown.get("rollout") or {}
    lanes_height = 1.6 + 0.8 * len(groups)
    if rollout.get("running"):
        fig = Figure(figsize=(11, lanes_height + 1.8), layout="constrained")
        top, ax = fig.subplots(2, 1, sharex=True,
                               gridspec_kw={"height_ratios": [1.8, lanes_height]})
    else:
        fig = Figure(figsize=(11, lanes_height), layout="constrained")
        top, ax = None, fig.add_subplot()
    outside = 0  # narrow bars labelled so far: their labels alternate above and below
    for seg in segments:
        lane = len(groups) - 1 - groups.index(seg["group"])  # first group on top
        width = seg["end_s"] - seg["start_s"]
        ax.broken_barh([(seg["start_s"], width)], (lane - 0.35, 0.7),
                       facecolors=COLOURS[seg["kind"]], edgecolors="white", linewidth=0.5)
        if not seg["role"] or width <= 0:
            continue
        middle = seg["start_s"] + width / 2
        if width > 0.06 * period:  # the bar holds its label
            ax.text(middle, lane, seg["role"], ha="center", va="center", fontsize=8,
                    color="white")
        elif seg["kind"] in ("generation", "assessment", "training"):  # a narrow task bar (a
            # reference's or reward model's assessment) is labelled beside it; a sync bar is
            # named by its colour
            above = outside % 2 == 0
            ax.text(middle, lane + (0.37 if above else -0.37), seg["role"], ha="center",
                    va="bottom" if above else "top", fontsize=6.5, color="black")
            outside += 1
    ax.axvline(period, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(groups)), [f"{g} ({sizes[g]})" if g is not None
                                       else KIND_LABELS["controller"] for g in reversed(groups)])
    ax.set_xlim(0, period * 1.02)
    ax.set_ylim(-0.6, len(groups) - 0.4)
    ax.set_xlabel("seconds into the iteration")
    how = [plan.inter_model.placement, *plan.inter_model.choices()]
    (top or ax).set_title(f"One iteration: {period:.1f} s ({', '.join(how)})")
    if top is not None:
        starts = [s["start_s"] for s in segments if s["kind"] == "generation"]
        draw_running(top, rollout, min(starts, default=0.0))
    kinds = [k for k in COLOURS if any(s["kind"] == k for s in segments)]
    fig.legend(handles=[Patch(color=COLOURS[k], label=KIND_LABELS[k]) for k in kinds],
               loc="outside lower center", ncol=len(kinds), frameon=False)
    return fig


def draw_running(ax: Axes, rollout: dict, start: float) -> None:
    """The slowest replica's running sequences as a step area from `start` (its generation's
    start in the iteration), the max_num_seqs cap, and the tail after 90% of the responses are
    done, shaded: a batch draining long before generation ends is the tail the plan pays for."""
    points = rollout["running"]
    times = [start + t for t, _ in points]
    counts = [n for _, n in points]
    # the bins are equal (see rollout_summary): the last one ends a bin width after it starts
    end = 2 * times[-1] - times[-2] if len(times) > 1 else start + sum(rollout["parts"].values())
    times, counts = [*times, end], [*counts, counts[-1]]
    colour = COLOURS["generation"]
    ax.fill_between(times, counts, step="post", color=colour, alpha=0.35, linewidth=0)
    ax.step(times, counts, where="post", color=colour, linewidth=1)
    cap = rollout["max_num_seqs"]
    ax.axhline(cap, color="grey", linestyle=":", linewidth=0.8)
    ax.text(0.995, cap, f"max_num_seqs {cap}", transform=ax.get_yaxis_transform(),
            va="bottom", ha="right", fontsize=7, color="grey")
    tail = rollout.get("tail_s", 0.0)
    if tail > 0:  # shaded, since a tail of a few sequences is a hairline on this scale
        done = end - tail
        ax.axvspan(done, end, color="#fdae6b", alpha=0.3, linewidth=0)
        ax.axvline(done, color="black", linestyle="--", linewidth=0.8)
        right = done < 0.6 * ax.get_xlim()[1]  # the words go where there is room
        ax.text(done, 0.9, f" 90% done at {done:.1f} s; the last 10% take {tail:.1f} s ",
                transform=ax.get_xaxis_transform(), ha="left" if right else "right",
                va="center", fontsize=7)
    ax.set_ylim(0, max(cap, *counts) * 1.25)
    ax.set_ylabel(f"{RUNNING_LABEL}\n(slowest replica)", fontsize=8)
    ax.tick_params(labelbottom=False)

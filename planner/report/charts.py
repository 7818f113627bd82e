"""The plan's small charts, from the plan JSON: memory per group against capacity (and the
headroom a plan leaves, when the JSON gives `memory.headroom_gib`), where the rollout's time
goes, and the iteration against its lower bounds."""

from __future__ import annotations

from collections.abc import Sequence

from planner.report import svg as s

WIDTH = 720
LABEL_W = 150  # room for the row labels left of the bars


def memory_chart(groups: dict[str, dict], capacity_gib: float, headroom_gib: float | None
                 ) -> str:
    """One bar per group: tensors allocated, the allocator's slack up to reserved, the runtime
    reserve up to the peak, against the GPU's capacity (a dashed line where the headroom
    starts: the plan keeps its peak below it)."""
    row, top = 34, 10
    widest = max([capacity_gib, *(g.get("capacity_gib", capacity_gib) for g in groups.values())])
    x = s.Scale(0, widest, LABEL_W, WIDTH - 130)  # the figures go right of the bars
    body = []
    for k, (name, g) in enumerate(groups.items()):
        y = top + k * row
        cap = g.get("capacity_gib", capacity_gib)
        allocated = g.get("allocated_gib_per_gpu", 0.0)
        reserved = g.get("reserved_gib_per_gpu", allocated)
        peak = g["peak_gib_per_gpu"]
        body += [s.text(LABEL_W - 8, y + 17, name, "end"),
                 s.rect(x(0), y + 4, x(cap) - x(0), 20, "capacity", f"capacity {cap:.1f} GiB"),
                 s.rect(x(0), y + 4, x(allocated) - x(0), 20, "allocated",
                        f"allocated (tensors) {allocated:.1f} GiB"),
                 s.rect(x(allocated), y + 4, x(reserved) - x(allocated), 20, "reserved",
                        f"reserved by the allocator {reserved:.1f} GiB"),
                 s.rect(x(reserved), y + 4, x(peak) - x(reserved), 20, "reserve",
                        f"peak with the runtime reserve {peak:.1f} GiB")]
        room = g.get("headroom_gib", headroom_gib)
        if room:
            body.append(s.line(x(cap - room), y + 1, x(cap - room), y + 27, "limit"))
        body.append(s.text(x(cap) + 6, y + 18, f"{peak:.1f} of {cap:.0f} GiB", "start",
                           "bar-label"))
    names = [("allocated", "allocated (tensors)"), ("reserved", "allocator slack"),
             ("reserve", "runtime reserve (peak)"), ("capacity", "free")]
    if headroom_gib or any(g.get("headroom_gib") for g in groups.values()):
        names.append(("limit", "headroom starts"))
    keys, bottom = legend(names, top + row * len(groups) + 18)
    return s.svg(WIDTH, bottom + 8, body + keys, "memory per GPU of each group against capacity")


def parts_chart(parts: Sequence[tuple[str, str, float]], title: str) -> str:
    """One stacked bar: `parts` (css class, label, seconds), labelled with their shares."""
    total = sum(v for _, _, v in parts) or 1.0
    x = s.Scale(0, total, 10, WIDTH - 10)
    body, at = [], 0.0
    for cls, label, v in parts:
        if v <= 0:
            continue
        body.append(s.rect(x(at), 8, x(at + v) - x(at), 26, cls, f"{label}: {v:.2f} s"))
        if x(at + v) - x(at) > 70:  # a label only where it fits
            body.append(s.text((x(at) + x(at + v)) / 2, 26, f"{v / total:.0%}", "middle",
                               "on-bar"))
        at += v
    keys, bottom = legend([(cls, f"{label} {v:.2f} s") for cls, label, v in parts if v > 0], 56)
    return s.svg(WIDTH, bottom + 8, body + keys, title)


def bounds_chart(bars: Sequence[tuple[str, float]]) -> str:
    """Horizontal bars on one scale: the iteration and each lower bound, seconds."""
    row = 30
    top = max(v for _, v in bars) or 1.0
    x = s.Scale(0, top, LABEL_W + 40, WIDTH - 70)
    body = []
    for k, (label, v) in enumerate(bars):
        y = 6 + k * row
        body += [s.text(LABEL_W + 32, y + 16, label, "end"),
                 s.rect(x(0), y + 3, x(v) - x(0), 18, "bound" if k else "iteration",
                        f"{label}: {v:.2f} s"),
                 s.text(x(v) + 6, y + 17, f"{v:.2f} s", "start", "bar-label")]
    return s.svg(WIDTH, 12 + row * len(bars), body, "the iteration against its lower bounds")


def legend(items: Sequence[tuple[str, str]], y: float) -> tuple[list[str], float]:
    """Swatches and their words in rows from height `y`; the last row's height."""
    out, x = [], 10.0
    for cls, words in items:
        width = 22 + 6.5 * len(words)
        if x + width > WIDTH:
            x, y = 10.0, y + 16
        out += [s.rect(x, y - 9, 11, 11, cls), s.text(x + 15, y, words, "start", "legend")]
        x += width + 12
    return out, y

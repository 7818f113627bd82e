"""SVG drawn directly for the report page: shapes, scales and a plot frame with ticks.

The page's small charts (memory, rollout, bounds, the sweep's curves) are drawn here rather than
with matplotlib: their text stays text in the page (searchable, checked by the browser test),
they scale with the page's width through their viewBox, and drawing them needs no plotting
library. Colours come from the page's CSS classes, so that print styles apply to them too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.report.html import attr, esc


def svg(width: float, height: float, body: Sequence[str], label: str) -> str:
    """An inline SVG `width` × `height` units wide, scaled to its box (CSS), titled `label`
    for screen readers."""
    return (f'<svg class="chart" viewBox="0 0 {width:g} {height:g}" role="img" '
            f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">'
            f"<title>{esc(label)}</title>{''.join(body)}</svg>")


def rect(x: float, y: float, w: float, h: float, cls: str, tip: str | None = None) -> str:
    inner = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
            f'class="{cls}">{inner}</rect>')


def text(x: float, y: float, words: str, anchor: str = "start", cls: str | None = None,
         rotate: bool = False) -> str:
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attr("class", cls)}{turn}>'
            f"{esc(words)}</text>")


def line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{cls}"/>'


def polyline(points: Sequence[tuple[float, float]], cls: str) -> str:
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline points="{coords}" class="{cls}"/>'


def circle(x: float, y: float, r: float, cls: str, tip: str | None = None) -> str:
    inner = f"<title>{esc(tip)}</title>" if tip else ""
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}" class="{cls}">{inner}</circle>'


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round ticks from 0 to at least `top` (1, 2, 2.5 or 5 times a power of ten apart)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [k * step for k in range(math.ceil(top / step - 1e-9) + 1)]


@dataclass(frozen=True)
class Scale:
    """Data → drawing units on one axis: linear, or log2 (cluster sizes)."""

    lo: float
    hi: float
    start: float  # drawing units at `lo`
    end: float  # at `hi`
    log2: bool = False

    def __call__(self, value: float) -> float:
        f = (lambda v: math.log2(v)) if self.log2 else (lambda v: v)
        span = f(self.hi) - f(self.lo)
        share = (f(value) - f(self.lo)) / span if span else 0.5
        return self.start + share * (self.end - self.start)


@dataclass(frozen=True)
class Plot:
    """A plot frame: the data area inside margins for tick labels and axis titles."""

    width: float = 520
    height: float = 300
    left: float = 64
    right: float = 16
    top: float = 14
    bottom: float = 44

    def x(self, lo: float, hi: float, log2: bool = False) -> Scale:
        return Scale(lo, hi, self.left, self.width - self.right, log2)

    def y(self, lo: float, hi: float) -> Scale:
        return Scale(lo, hi, self.height - self.bottom, self.top)

    def frame(self, xs: Scale, ys: Scale, xticks: Sequence[float], yticks: Sequence[float],
              xlabel: str, ylabel: str, fmt_x=None, fmt_y=None) -> list[str]:
        """Axes, grid lines, tick labels and axis titles."""
        fx = fmt_x or (lambda v: f"{v:g}")
        fy = fmt_y or (lambda v: f"{v:,.0f}")
        base, side = self.height - self.bottom, self.left
        out = [line(side, base, self.width - self.right, base, "axis"),
               line(side, base, side, self.top, "axis")]
        for v in yticks:
            y = ys(v)
            out += [line(side, y, self.width - self.right, y, "grid"),
                    text(side - 6, y + 4, fy(v), "end", "tick")]
        for v in xticks:
            x = xs(v)
            out += [line(x, base, x, base + 4, "axis"), text(x, base + 17, fx(v), "middle",
                                                              "tick")]
        out += [text((side + self.width - self.right) / 2, self.height - 6, xlabel, "middle",
                     "axis-title"),
                text(14, (self.top + base) / 2, ylabel, "middle", "axis-title", rotate=True)]
        return out

"""The sweep's section of the report page, from the sweep JSON: throughput and cost per
million tokens against GPUs (a line per profile), step time against cost per step with the
cost–time frontier joined, the chosen point ringed in each and marked in the table, and what
the sweep answers (the frontier, the target, each profile's smallest feasible size and knee)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from planner.report import svg as s
from planner.report.documents import SweepDocument, SweepRow, same_point
from planner.report.html import bullets, figure, num, para, section, table
from planner.specs.hardware import gpu_count

Point = tuple[float, float, str]  # x, y, what the point is (its tooltip)
SERIES = 6  # the stylesheet's series colours (s0 … s5), reused in turn past that


def sweep_section(doc: SweepDocument, chosen: int | None, why: str) -> str:
    """The section; `chosen`: the index of the chosen row (None: none), `why` says which."""
    from planner.sweep.grid import label  # the sweep's own words for a point

    rows = doc.rows
    pick = rows[chosen] if chosen is not None else None
    ok = [r for r in rows if r.feasible]
    groups = _series(ok)
    lines = getattr(doc, "pools", None) is None  # a pool grid's points are no one line
    mark = (lambda f: None) if pick is None else (lambda f: f(pick))
    throughput = _xy([(name, [(r.gpus, r.tokens_per_s, label(r)) for r in its])
                      for name, its in groups], log2=True, joined=lines,
                     xlabel="GPUs", ylabel="tokens/s", chosen=mark(
                         lambda r: (r.gpus, r.tokens_per_s)),
                     title="throughput against GPUs")
    figures = [figure(throughput, "Throughput against GPUs (log scale), a line per GPU type.")]
    priced = [(name, [r for r in its if r.cost_per_million_tokens_usd is not None])
              for name, its in groups]
    if any(its for _, its in priced):
        figures.append(figure(_xy(
            [(name, [(r.gpus, r.cost_per_million_tokens_usd, label(r)) for r in its])
             for name, its in priced if its], log2=True, joined=lines, xlabel="GPUs",
            ylabel="USD per million tokens", chosen=mark(
                lambda r: (r.gpus, r.cost_per_million_tokens_usd)), fmt_y=_money,
            title="cost per million tokens against GPUs"),
            "Cost per million tokens against GPUs: every GPU of the size is paid for."))
        points = [(r.cost_per_step_usd, r.iteration_time_s, label(r)) for r in ok
                  if r.cost_per_step_usd is not None]
        best = sorted((r.cost_per_step_usd, r.iteration_time_s, label(r)) for r in rows
                       if any(same_point(r, f) for f in doc.frontier))
        figures.append(figure(_xy(
            [("points", points), ("frontier", best)], log2=False, joined=False,
            xlabel="USD per step", ylabel="step time (s)", fmt_x=_money, fmt_y=_seconds,
            chosen=mark(lambda r: (r.cost_per_step_usd, r.iteration_time_s)),
            title="step time against cost per step"),
            "Step time against cost per step; the line joins the cost–time frontier (no "
            "other point is both cheaper and faster)."))
    else:
        figures.append(para("No point has a price, so there is no cost curve nor frontier: "
                            "pass --price (or each pool's price_usd_per_gpu_hour).", "note"))
    return section("sweep", "Sweep", para(_scope(doc)), para(why), *figures,
                   _table(doc, chosen), bullets(_answers(doc, label)))


def _series(rows: Sequence[SweepRow]) -> list[tuple[str, list[SweepRow]]]:
    """Feasible rows by profile (a pool grid's: one series of all its points)."""
    out: dict[str, list[SweepRow]] = {}
    for r in rows:
        out.setdefault("pools" if r.pools is not None else (r.gpu or "GPUs"), []).append(r)
    return list(out.items())


def _money(v: float) -> str:
    return f"${v:,.2f}" if v >= 1 or v == 0 else f"${v:.3g}"


def _seconds(v: float) -> str:
    return f"{v:g}"


def _xy(series: Sequence[tuple[str, Sequence[Point]]], log2: bool, joined: bool, xlabel: str,
        ylabel: str, chosen: tuple[float | None, float | None] | None, title: str,
        fmt_x: Callable[[float], str] | None = None,
        fmt_y: Callable[[float], str] | None = None) -> str:
    """A chart of point series (`joined`: each series a line through its points; else only the
    series named "frontier" is joined), the chosen point ringed."""
    plot = s.Plot(width=620, height=320, left=76)
    points = [p for _, ps in series for p in ps]
    if not points:
        return s.svg(plot.width, 60, [s.text(10, 30, f"{title}: no point to draw")], title)
    xs_all, ys_all = [p[0] for p in points], [p[1] for p in points]
    yticks = s.nice_ticks(max(ys_all) * 1.1)
    ys = plot.y(0, yticks[-1])
    if log2:
        xticks = sorted(set(xs_all))
        xs = plot.x(min(xticks) / 1.4, max(xticks) * 1.4, log2=True)
        fmt_x = fmt_x or (lambda v: f"{v:g}")
    else:
        xticks = s.nice_ticks(max(xs_all) * 1.1)
        xs = plot.x(0, xticks[-1])
    body = plot.frame(xs, ys, _thin(xticks), yticks, xlabel, ylabel, fmt_x, fmt_y)
    keys = []
    for k, (name, ps) in enumerate(series):
        cls = "frontier" if name == "frontier" else "points" if name == "points" else \
            f"s{k % SERIES}"
        if (joined or name == "frontier") and len(ps) > 1:
            body.append(s.polyline([(xs(x), ys(y)) for x, y, _ in sorted(ps)], f"line {cls}"))
        body += [s.circle(xs(x), ys(y), 3.5, f"dot {cls}", f"{tip}: {x:g}, {y:,.4g}")
                 for x, y, tip in ps]
        keys.append((cls, "cost–time frontier" if name == "frontier" else
                     "priced points" if name == "points" else name))
    if chosen is not None and None not in chosen:
        cx, cy = xs(chosen[0]), ys(chosen[1])
        body += [s.circle(cx, cy, 8, "chosen"), s.text(cx + 11, cy - 8, "chosen", "start",
                                                        "chosen-label")]
    if len(keys) > 1:  # the key: each series' name in its colour, top right
        body += [s.text(plot.width - 8, plot.top + 12 + 15 * k, words, "end", f"key {cls}")
                 for k, (cls, words) in enumerate(keys)]
    return s.svg(plot.width, plot.height, body, title)


def _thin(ticks: list[float], most: int = 9) -> list[float]:
    """At most `most` of `ticks` (every k-th, the last kept): labels that do not overlap."""
    step = -(-len(ticks) // most)
    return ticks[::step] if ticks[::step][-1] == ticks[-1] else [*ticks[::step], ticks[-1]]


def _scope(doc: SweepDocument) -> str:
    sc = doc.scenario
    models = sc.get("models", {})
    actor = models.get("actor", {}).get("name", "?") if isinstance(models, dict) else "?"
    cluster = sc.get("cluster", {})
    gpu = cluster.get("gpu")
    gpus = ", ".join(gpu) if isinstance(gpu, list) else str(gpu)
    what = (f"pools {', '.join(p['name'] for p in doc.pools)}" if getattr(doc, "pools", None)
            else f"GPUs of {gpus}")
    return (f"{sc.get('algorithm', '?')} on {actor}: {len(doc.rows)} points over {what} "
            f"({sum(r.feasible for r in doc.rows)} with a plan).")


def _table(doc: SweepDocument, chosen: int | None) -> str:
    from planner.sweep.grid import usd

    pools = [p["name"] for p in getattr(doc, "pools", None) or []]
    several = len({r.gpu for r in doc.rows}) > 1
    head = [*(["GPU type"] if several else []), *(f"{p} GPUs" for p in pools), "GPUs", "status",
            "step s", "tokens/s", "tokens/s/GPU", "scaling", "$/step", "$/M tokens",
            "placement or reason", ""]
    rows = []
    for i, r in enumerate(doc.rows):
        rows.append([*([r.gpu or ""] if several else []),
                     *((r.pools or {}).get(p, "") for p in pools), r.gpus, r.status,
                     num(r.iteration_time_s, ".2f"), num(r.tokens_per_s, ",.0f"),
                     num(r.tokens_per_s_per_gpu, ",.0f"), num(r.scaling_efficiency, ".0%"),
                     usd(r.cost_per_step_usd) if r.cost_per_step_usd is not None else "—",
                     num(r.cost_per_million_tokens_usd, ",.2f", "$"),
                     r.placement or r.reason or "", "◀ chosen" if i == chosen else ""])
    numeric = [False] * (1 if several else 0) + [True] * (len(pools) + 1) + [False] + \
        [True] * 6
    return table(head, rows, numeric=numeric,
                 row_classes=["chosen" if i == chosen else None for i in range(len(rows))],
                 caption="every point swept; the chosen one marked")


def _answers(doc: SweepDocument, label: Callable) -> list[str]:
    from planner.sweep.grid import usd

    out = []
    for p in getattr(doc, "profiles", None) or []:
        head = f"{p.get('gpu')}: " if len(doc.profiles) > 1 else ""
        if p.get("smallest_feasible_gpus") is not None:
            out.append(f"{head}smallest feasible size: {gpu_count(p['smallest_feasible_gpus'])}")
        out.append(f"{head}knee: {gpu_count(p['knee_gpus'])} (the next step gains less than "
                   "half the ideal increase)" if p.get("knee_gpus") is not None else
                   f"{head}knee: none in range")
    best = [r for r in doc.rows if any(same_point(r, f) for f in doc.frontier)]
    if best:
        out.append("cost–time frontier: " + "; ".join(
            f"{label(r)} {usd(r.cost_per_step_usd)}/step {r.iteration_time_s:.2f} s"
            for r in sorted(best, key=lambda r: r.cost_per_step_usd)))
    if doc.unpriced:
        out.append("not on the frontier for want of a price: "
                   + ", ".join(label(r) for r in doc.rows
                               if any(same_point(r, u) for u in doc.unpriced)))
    if doc.target is not None:
        out.append(f"target: {doc.target.message}")
    out += [f"{label(r)}: {r.note}" for r in doc.rows if r.note]
    return out

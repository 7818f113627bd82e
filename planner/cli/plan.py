"""`rlplan plan [SCENARIO.yaml] [flags]`: search the best plan and explain it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner.cli import options as o
from planner.cli.baseline import load_baseline, with_baseline
from planner.cli.clock import command_started
from planner.cli.files import check_outputs
from planner.cli.output import reports_errors
from planner.cli.report import Html, page_output, page_path
from planner.cli.views import emit_plan, searching
from planner.errors import InputError
from planner.export import FORMATS
from planner.pictures import picture_format
from planner.plan import Plan
from planner.search.deadline import Deadline
from planner.specs.scenario import load_scenario

if TYPE_CHECKING:
    from planner.export import Export


@o.scenario_flags()
def plan(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (or give every field "
                                                    "as a flag).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    out: Annotated[Path | None, o.output("Also write the plan JSON to this file.")] = None,
    timeline: o.Timeline = None,
    export: Annotated[str | None, typer.Option(help=f"Also export the plan: "
                                               f"{', '.join(FORMATS)} (see rlplan export).",
                                               show_default=False)] = None,
    export_out: Annotated[Path | None, o.output("Where --export writes the config.")] = None,
    framework_version: Annotated[str | None, typer.Option(
        "--framework-version", help="--export: the release to target (default: "
                                    "the newest; OpenRLHF 0.11.2 or 0.9.5).")] = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", show_default=False,
        help="A plan JSON, or any file `rlplan import` reads: report the gain of the best "
             "plan over it and what it changes.")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, show_default=False, help="CP-SAT workers (default: the machine's cores but one, "
        "up to 8). A proven optimum gives the same plan whatever the count.")] = None,
    html: Html = None,
    flags: dict | None = None,
) -> None:
    """Find the fastest (or cheapest) plan under the cost model, prove it, and explain it.
    Exit 3 with the reason when nothing fits."""
    _plan(scenario, flags or {}, as_json, out, timeline, workers,
          (export, framework_version, export_out) if export else None, baseline, html)


@reports_errors
def _plan(path: Path | None, flags: dict, as_json: bool, out: Path | None,
          timeline: Path | None, workers: int | None,
          export: tuple[str, str | None, Path | None] | None,
          baseline: Path | None = None, html: Path | None = None) -> None:
    started = Deadline(command_started())  # --time-limit counts from the process's start
    from planner.search.solve import plan as search  # OR-Tools: only when searching

    check_outputs({"--out": out, "--timeline": timeline,
                   "--export-out": export[2] if export else None, "--html": html})
    if timeline is not None:
        picture_format(timeline, "--timeline")
    if html is not None:
        page_path(html, "--html")
    sc = load_scenario(path, flags)
    if baseline:  # bad input before searching; the baseline's framework restricts the search
        sc, base = load_baseline(baseline, sc, path, flags)
    else:
        base = None
    target = sc.framework.split("@") if sc.framework else None
    deadline = started.within(sc.search.time_limit_s)
    exporter = None
    if export:
        fmt, version, _ = export
        if fmt not in FORMATS:  # before searching, not after
            raise InputError(f"--export: unknown format '{fmt}'; choose one of "
                             f"{', '.join(FORMATS)}")

        if target and version is None and fmt == target[0]:
            version = target[1]

        def exporter(data: dict) -> Export:
            from planner.export import export as make_export  # the exporters: only for --export
            return make_export(data, sc, fmt, version)

    def title(result: Plan) -> str:
        s = result.search
        used: dict[str | None, int] = {}
        for g in result.groups:
            used[g.pool] = used.get(g.pool, 0) + g.gpus
        return (f"Plan for {sc.algorithm} on {sc.gpus_words(used)} — "
                f"{result.status} ({s['status']}, {s['wall_s']:.1f} s, "
                f"{s['candidates']:,} candidates, {s['candidates_after_pruning']:,} undominated, "
                f"{s['candidates_in_model']:,} within bounds)")

    def make() -> Plan:
        with searching(quiet=as_json) as progress:
            found = search(sc, workers=workers, deadline=deadline, progress=progress)
        return found if base is None else with_baseline(found, base, sc)

    emit_plan(make, as_json, out, title, timeline, exporter, export[2] if export else None,
              None if html is None else lambda data: page_output("--html", html, plan=data))

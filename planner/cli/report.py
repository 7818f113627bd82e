"""`rlplan report [PLAN.json] [--sweep SWEEP.json] --out FILE.html`: the page to share, from
saved answers; `plan`, `evaluate` and `sweep` write the same page with `--html FILE`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import options as o
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import reports_errors
from planner.errors import InputError
from planner.specs.files import read_mapping

PAGE_SUFFIXES = (".html", ".htm")

Html = Annotated[Path | None, o.output("Also write the report page: one self-contained HTML "
                                       "file that opens offline (see rlplan report).",
                                       "--html")]


def page_path(path: Path, flag: str) -> None:
    """Refuse a page name that is not .html: `--out plan.json` would replace a plan with a
    page."""
    if path.suffix.lower() not in PAGE_SUFFIXES:
        raise InputError(f"{flag}: '{path.name}' is not an HTML file name; give a file ending "
                         "in .html")


def page_output(flag: str, path: Path, plan: dict | None = None, sweep: dict | None = None
                ) -> Output:
    """The page of `plan` and/or `sweep` (their JSON as written), as a file of a run."""
    from planner.report import render  # the report's imports only when a page is written

    return Output(flag, path, render(plan, sweep))


def report(
    plan_file: Annotated[Path | None, typer.Argument(
        metavar="PLAN.json", help="A plan written by `rlplan plan/evaluate --out` (or "
        "--json).", show_default=False)] = None,
    sweep: Annotated[Path | None, typer.Option(
        "--sweep", metavar="SWEEP.json", show_default=False,
        help="A sweep written by `rlplan sweep --json-out` (or --json): its curves and "
             "frontier, the plan's point marked (without a plan, the target's answer and its "
             "plan).")] = None,
    out: Annotated[Path | None, o.output("The page to write (.html).", "--out")] = None,
) -> None:
    """Write one self-contained HTML page to share: the plan table, the timeline, memory per
    group, the rollout, the bounds, the alternatives and what-ifs, the scenario and the
    framework configs; with a sweep its curves and frontier. It opens offline and prints."""
    _report(plan_file, sweep, out)


@reports_errors
def _report(plan_file: Path | None, sweep: Path | None, out: Path | None) -> None:
    if out is None:
        raise InputError("--out is missing; give the page's file name (e.g. --out plan.html)")
    if plan_file is None and sweep is None:
        raise InputError("give a plan JSON (PLAN.json), a sweep JSON (--sweep SWEEP.json) or "
                         "both")
    page_path(out, "--out")
    check_outputs({"--out": out})
    plan = read_mapping(plan_file, "plan JSON") if plan_file else None
    swept = read_mapping(sweep, "sweep JSON") if sweep else None
    from planner.report import render

    page = render(plan, swept, str(plan_file), str(sweep))
    write_outputs([Output("--out", out, page)])

"""`rlplan evaluate SCENARIO.yaml PLAN.json`: price a given plan without searching."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import options as o
from planner.cli.files import check_outputs
from planner.cli.output import reports_errors
from planner.cli.report import Html, page_output, page_path
from planner.cli.views import emit_plan
from planner.pictures import picture_format
from planner.plan import PlanInput
from planner.search.scope import evaluated_plan
from planner.specs.files import read_mapping, validate_as
from planner.specs.scenario import load_scenario


def load_plan(path: Path) -> PlanInput:
    """A plan file: groups, layouts and inter_model (a full plan JSON is accepted too)."""
    return validate_as(PlanInput, read_mapping(path, "plan JSON"), str(path))


@o.scenario_flags()
def evaluate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML.")],
    plan: Annotated[Path, typer.Argument(help="Plan JSON: groups, layouts, inter_model.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    out: Annotated[Path | None, o.output("Also write the JSON to this file.")] = None,
    timeline: o.Timeline = None,
    html: Html = None,
    flags: dict | None = None,
) -> None:
    """Price a plan (hand-written, or an earlier answer): time, memory, cost. Exit 3 if it
    does not fit in memory."""
    _evaluate(scenario, plan, as_json, out, timeline, flags or {}, html)


@reports_errors
def _evaluate(scenario: Path, plan_path: Path, as_json: bool, out: Path | None,
              timeline: Path | None, flags: dict, html: Path | None = None) -> None:
    check_outputs({"--out": out, "--timeline": timeline, "--html": html})
    if timeline is not None:
        picture_format(timeline, "--timeline")
    if html is not None:
        page_path(html, "--html")
    sc = load_scenario(scenario, flags)
    plan_in = load_plan(plan_path)
    emit_plan(lambda: evaluated_plan(sc, plan_in),
              as_json, out,
              lambda _: f"Plan {plan_path} for {sc.algorithm} on {sc.gpus_words()} "
                        "(evaluated)", timeline,
              page=None if html is None else lambda data: page_output("--html", html, plan=data))

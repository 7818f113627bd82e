"""`rlplan import FILE`: a verl script/override list, an OpenRLHF command or Megatron arguments
→ a plan file `evaluate` prices (the scenario supplies what the file cannot hold)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from planner.cli import options as o
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import print_json, reports_errors
from planner.errors import InputError
from planner.importers import FORMATS, import_config
from planner.plan import PlanInput
from planner.specs.files import read_text, validate_as
from planner.specs.scenario import load_scenario


@o.scenario_flags()
def import_(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The config to read.")],
    scenario: Annotated[Path | None, typer.Option(
        help="Scenario YAML: models, workload, cluster (what the file cannot hold).")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", show_default=False,
        help=f"Force the format: {', '.join(FORMATS)} (default: recognised).")] = None,
    out: Annotated[Path | None, o.output("Write the plan JSON here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    flags: dict | None = None,
) -> None:
    """Read a config you already run into a plan `rlplan evaluate` prices (and `plan
    --baseline` compares against)."""
    _import(file, scenario, format, out, as_json, flags or {})


@reports_errors
def _import(file: Path, scenario: Path | None, fmt: str | None, out: Path | None,
            as_json: bool, flags: dict) -> None:
    check_outputs({"--out": out})
    try:
        text = read_text(file, "config")
    except InputError as err:
        raise InputError(f"FILE: {err}") from None
    sc = load_scenario(scenario, flags)
    got = import_config(text, sc, fmt)
    plan = validate_as(PlanInput, got.plan, f"import {file}").model_dump(mode="json",
                                                                           exclude_none=True)
    plan["scenario"] = sc.source_input.model_dump(mode="json", exclude_none=True)
    if out is not None:
        write_outputs([Output("--out", out, json.dumps(plan, indent=2) + "\n")])
    for note in got.notes:
        typer.echo(f"rlplan: note: {note}", err=True)
    if as_json or out is None:
        print_json({"format": got.fmt, **plan})

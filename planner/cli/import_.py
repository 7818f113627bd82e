"""`rlplan import SCRIPT`: a launch script as written (verl, OpenRLHF, Megatron-LM, NeMo-RL) → the
scenario it runs and the plan `evaluate` prices, so `rlplan evaluate S.yaml PLAN.json` and
`rlplan plan S.yaml --baseline PLAN.json` follow in one step."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from planner.cli import options as o
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import print_json, reports_errors
from planner.errors import InputError
from planner.frameworks import release_of
from planner.importers import FORMATS, lay_out, read_file
from planner.importers.scenario import scenario_for
from planner.plan import PlanInput
from planner.specs.files import looks_like_path, path_kind, read_text, validate_as


@o.scenario_flags()
def import_(
    file: Annotated[Path, typer.Argument(metavar="SCRIPT", help="The launch script (or "
                                         "override list, Megatron arguments, or NeMo-RL YAML "
                                         "config) to read.")],
    scenario: Annotated[Path | None, typer.Option(
        help="Scenario YAML giving what the script cannot hold (its fields win over the "
             "script's; flags win over both).")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", show_default=False,
        help=f"Force the format: {', '.join(FORMATS)} (default: recognised).")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="NAME=VALUE", show_default=False,
        help="A shell variable's value (an environment variable the script reads, or one "
             "of its own assignments to replace); repeat for more.")] = None,
    out: Annotated[Path | None, o.output("Write the plan JSON here.")] = None,
    out_scenario: Annotated[Path | None, o.output("Write the scenario YAML here.",
                                                  "--out-scenario")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    flags: dict | None = None,
) -> None:
    """Read the launch script you run into the scenario it runs and the plan `rlplan
    evaluate` prices (and `plan --baseline` compares against)."""
    _import(file, scenario, format, set_ or [], out, out_scenario, as_json, flags or {})


def settings(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise InputError(f"--set {pair!r}: expected NAME=VALUE with NAME a shell variable "
                             "name (e.g. --set NNODES=4)")
        out[name] = value
    return out


def _absolute(models: dict[str, Any]) -> dict[str, Any]:
    """Model paths made absolute, so the written scenario reads them from anywhere."""
    return {role: str(Path(ref).expanduser().resolve())
            if isinstance(ref, str) and looks_like_path(ref) and path_kind(Path(ref).expanduser())
            else ref for role, ref in models.items()}


@reports_errors
def _import(file: Path, scenario: Path | None, fmt: str | None, pairs: list[str],
            out: Path | None, out_scenario: Path | None, as_json: bool, flags: dict) -> None:
    check_outputs({"--out": out, "--out-scenario": out_scenario})
    fixed = settings(pairs)
    text = read_text(file, "launch script")
    reading = read_file(text, fmt, fixed)
    sc, notes = scenario_for(reading, scenario, flags)
    got = lay_out(reading, sc)
    plan = validate_as(PlanInput, got.plan, f"import {file}").model_dump(mode="json",
                                                                           exclude_none=True)
    written = sc.source_input.written()
    written["models"] = _absolute(written["models"])
    # the script's release: `evaluate` prices the plan as it runs it, `plan --baseline`
    # searches only what it runs (unless the scenario names another)
    written.setdefault("framework", release_of(reading.fmt, reading.release))
    plan["framework"] = written["framework"]
    plan["scenario"] = written
    outputs = []
    if out is not None:
        outputs.append(Output("--out", out, json.dumps(plan, indent=2) + "\n"))
    if out_scenario is not None:
        header = f"# rlplan import {file.name}: {reading.release}\n"
        outputs.append(Output("--out-scenario", out_scenario,
                              header + yaml.safe_dump(written, sort_keys=False)))
    write_outputs(outputs)
    for note in [*got.notes, *notes]:
        typer.echo(f"rlplan: note: {note}", err=True)
    if as_json or not outputs:
        print_json({"format": got.fmt, "release": reading.release, **plan,
                    "read": reading.said(), "notes": [*got.notes, *notes]})
        return
    names = " and ".join(str(x.path) for x in outputs)
    typer.echo(f"{reading.release}: {sc.algorithm} of {sc.actor.name} on {sc.gpus_words()}; "
               f"wrote {names}")
    if out is not None and out_scenario is not None:
        typer.echo(f"next: rlplan evaluate {out_scenario} {out}   |   rlplan plan "
                   f"{out_scenario} --baseline {out}")

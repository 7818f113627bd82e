"""`rlplan export PLAN.json --format verl|openrlhf|deepspeed|megatron|nemo-rl`: a framework
config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli import options as o
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import reports_errors
from planner.errors import InputError
from planner.export import FORMATS, parse_framework
from planner.export import export as make_export
from planner.export.base import Export, refuse_infeasible
from planner.specs.files import read_mapping
from planner.specs.scenario import Scenario, load_scenario, scenario_from_plan


def write_export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str | None,
                 out: Path | None) -> Export:
    """Export, then print the notes on stderr and the config on stdout or into `out`. Nothing
    is written when the export fails."""
    result = make_export(plan, sc, fmt, version)
    save_export(result, out)
    return result


def save_export(result: Export, out: Path | None) -> None:
    """The config on stdout or into `out` (atomically; a script made runnable), the notes on
    stderr."""
    if out is None:
        typer.echo(result.text, nl=False)
    else:
        write_outputs([export_output(result, out, "--out")])
    show_notes(result)


def export_output(result: Export, out: Path, flag: str) -> Output:
    """The file an export writes (a script is made runnable)."""
    return Output(flag, out, result.text,
                  executable=result.kind == "sh" and result.text.startswith("#!"))


def show_notes(result: Export) -> None:
    for note in result.notes:
        typer.echo(f"rlplan: note: {note}", err=True)


def export(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json",
                                              help="A plan written by `rlplan plan/evaluate "
                                                   "--out`.")],
    format: Annotated[str | None, typer.Option(
        "--format", "-f", show_default=False,
        help=f"Target: {', '.join(FORMATS)} (default: the plan's `framework`, from `plan "
             "--framework`).")] = None,
    out: Annotated[Path | None, o.output("Write the config to this file instead of standard "
                                         "output.")] = None,
    framework_version: Annotated[str | None, typer.Option(
        "--framework-version", help="The release to target (default: the newest): verl "
                                    "0.9.1; OpenRLHF 0.11.2 or 0.9.5 (flat flags); DeepSpeed "
                                    "0.19.8; megatron-core 0.19.2.")] = None,
    scenario: Annotated[Path | None, typer.Option(
        help="Scenario YAML, for a plan file without a `scenario` key.")] = None,
) -> None:
    """Turn a plan into a framework config: a bash script for verl and OpenRLHF, JSON for
    DeepSpeed, argument arrays for Megatron-LM. What the framework cannot express is printed
    as notes on stderr."""
    _export(plan_file, format, out, framework_version, scenario)


@reports_errors
def _export(plan_file: Path, fmt: str | None, out: Path | None, version: str | None,
            scenario: Path | None) -> None:
    check_outputs({"--out": out})
    plan = read_mapping(plan_file, "plan JSON")
    if fmt is None:
        recorded = plan.get("framework")
        if not isinstance(recorded, str):
            raise InputError(f"--format is missing and {plan_file} records no framework (plan "
                             f"with --framework); choose one of {', '.join(FORMATS)}")
        fmt, planned = parse_framework(recorded, f"{plan_file}: framework")
        version = version or planned
    refuse_infeasible(plan)  # before asking for a scenario it would not need
    sc = load_scenario(scenario) if scenario else scenario_from_plan(plan, str(plan_file))
    write_export(plan, sc, fmt, version, out)

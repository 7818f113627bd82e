"""The `rlplan` typer app: commands are composed here, each lives in its own module."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from planner import __version__
from planner.cli import analyze
from planner.cli.catalog import clusters, gpus, models
from planner.cli.evaluate import evaluate
from planner.cli.export import export
from planner.cli.import_ import import_
from planner.cli.output import OneLineErrors, print_json
from planner.cli.plan import plan
from planner.cli.report import report
from planner.cli.sweep import sweep
from planner.cli.validate import validate
from planner.plan import Plan, PlanInput
from planner.specs.hardware import ClusterPreset, HardwareProfile
from planner.specs.scenario import ScenarioInput

app = typer.Typer(
    name="rlplan",
    cls=OneLineErrors,
    help="Plan the parallel layout of LLM post-training (PPO, GRPO, DPO, SFT) on a cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(models)
app.command()(gpus)
app.command()(clusters)
app.command()(validate)
# `rlplan analyze` without its command is a usage error like any missing argument (one error
# line, exit 2), not a help page: only a bare `rlplan` prints help when given nothing
app.add_typer(analyze.app, name="analyze", no_args_is_help=False)
app.command()(evaluate)
app.command()(plan)
app.command()(export)
app.command(name="import")(import_)
app.command()(sweep)
app.command()(report)


class SchemaKind(StrEnum):
    scenario = "scenario"
    hardware = "hardware"
    cluster = "cluster"
    plan = "plan"  # the plan JSON `plan` and `evaluate` write (what `export` reads)
    plan_input = "plan-input"  # the part of it a hand-written plan gives `evaluate`


_SCHEMAS = {SchemaKind.scenario: ScenarioInput, SchemaKind.hardware: HardwareProfile,
            SchemaKind.cluster: ClusterPreset, SchemaKind.plan: Plan,
            SchemaKind.plan_input: PlanInput}


@app.command()
def schema(kind: Annotated[SchemaKind, typer.Argument(help="Which file format.")]
           = SchemaKind.scenario) -> None:
    """Print the JSON Schema of a file format: scenario, hardware profile, cluster preset, plan
    JSON (plan), or the part of it a hand-written plan needs (plan-input)."""
    print_json(_SCHEMAS[kind].model_json_schema())


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rlplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Plan the parallel layout of LLM post-training (PPO, GRPO, DPO, SFT) on a cluster."""


def main() -> None:
    app()

"""The `rlplan` typer app: commands are composed here, each lives in its own module.

A command's module is imported only when that command runs (or its help is shown): `rlplan
--version`, `gpus` or `validate` do not pay for OR-Tools, matplotlib, the search or the
exporters (issue 24). `--time-limit` counts from the process's start (planner/cli/clock.py).
"""

from __future__ import annotations

import time

_IMPORTED = time.monotonic()  # the earliest the entry point sees, before its own imports

import gc  # noqa: E402 - after the clock above
import importlib  # noqa: E402
import os  # noqa: E402
from enum import StrEnum  # noqa: E402
from typing import Annotated, Any  # noqa: E402

import typer  # noqa: E402

from planner.cli import clock  # noqa: E402
from planner.cli.output import OneLineErrors  # noqa: E402

# name → (module, attribute): a command function, or a typer app of subcommands (analyze)
COMMANDS: dict[str, tuple[str, str]] = {
    "models": ("planner.cli.catalog", "models"),
    "gpus": ("planner.cli.catalog", "gpus"),
    "clusters": ("planner.cli.catalog", "clusters"),
    "validate": ("planner.cli.validate", "validate"),
    "analyze": ("planner.cli.analyze", "app"),
    "evaluate": ("planner.cli.evaluate", "evaluate"),
    "plan": ("planner.cli.plan", "plan"),
    "export": ("planner.cli.export", "export"),
    "import": ("planner.cli.import_", "import_"),
    "sweep": ("planner.cli.sweep", "sweep"),
    "report": ("planner.cli.report", "report"),
}


def load_command(name: str) -> Any:
    """The click command `name`, built from its module (imported now)."""
    module, attribute = COMMANDS[name]
    obj = getattr(importlib.import_module(module), attribute)
    if isinstance(obj, typer.Typer):
        group = typer.main.get_command(obj)
        group.name = name
        # `rlplan analyze` without its command is a usage error like any missing argument
        # (one error line, exit 2), not a help page: only a bare `rlplan` prints help
        group.no_args_is_help = False
        return group
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    one.command(name=name)(obj)
    return typer.main.get_command(one)


class Commands(OneLineErrors):
    """The root command, loading each subcommand's module when it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: Any, name: str) -> Any:
        if name in COMMANDS and name not in self.commands:
            self.add_command(load_command(name), name)
        return super().get_command(ctx, name)


app = typer.Typer(
    name="rlplan",
    cls=Commands,
    help="Plan the parallel layout of LLM post-training (PPO, GRPO, DPO, SFT) on a cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class SchemaKind(StrEnum):
    scenario = "scenario"
    hardware = "hardware"
    cluster = "cluster"
    plan = "plan"  # the plan JSON `plan` and `evaluate` write (what `export` reads)
    plan_input = "plan-input"  # the part of it a hand-written plan gives `evaluate`


@app.command()
def schema(kind: Annotated[SchemaKind, typer.Argument(help="Which file format.")]
           = SchemaKind.scenario) -> None:
    """Print the JSON Schema of a file format: scenario, hardware profile, cluster preset, plan
    JSON (plan), or the part of it a hand-written plan needs (plan-input)."""
    from planner.cli.output import print_json
    from planner.plan import Plan, PlanInput
    from planner.specs.hardware import ClusterPreset, HardwareProfile
    from planner.specs.scenario import ScenarioInput

    schemas = {SchemaKind.scenario: ScenarioInput, SchemaKind.hardware: HardwareProfile,
               SchemaKind.cluster: ClusterPreset, SchemaKind.plan: Plan,
               SchemaKind.plan_input: PlanInput}
    print_json(schemas[kind].model_json_schema())


def _version(value: bool) -> None:
    if value:
        from planner.version import VERSION

        typer.echo(f"rlplan {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Plan the parallel layout of LLM post-training (PPO, GRPO, DPO, SFT) on a cluster."""


def main() -> None:
    clock.mark_start(_IMPORTED)
    # numpy's OpenBLAS starts a thread per core when numpy loads, and they spin for a while,
    # competing with the command on a small machine; rlplan calls no BLAS routine (no matrix
    # products), so one thread does the same work: rlplan validate 50 ms sooner on two cores
    # (bench/startup.py). A value the user set is kept; the API (a notebook) is left alone.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        app()  # ends the process: click's standalone mode raises SystemExit
    finally:
        # The command is done (its files written and closed, files.py). Frozen, the heap is
        # left to the system at exit instead of walked and freed object by object by the
        # interpreter's final collections (pydantic's schemas and validators, numpy): rlplan
        # validate ends ~35 ms sooner. Objects are still freed as modules are cleared; only
        # what sits in reference cycles is not, so finalizers of cyclic garbage do not run
        # (atexit handlers, flushing stdout and stderr, weakref.finalize all still do).
        gc.freeze()

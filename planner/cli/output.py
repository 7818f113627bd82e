"""Output helpers shared by the commands: JSON on stdout, errors on stderr, rich tables."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperGroup

from planner.errors import EXIT_BAD_INPUT, RlplanError

try:  # typer ≥ 0.26 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on the real click
    from click.exceptions import ClickException, NoArgsIsHelpError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(highlight=False)
if not console.is_terminal:  # piped or captured: keep table rows whole instead of 80 columns
    console.width = max(console.width, 160)


def print_json(data: Any) -> None:
    """Machine output: indented JSON on stdout, nothing else."""
    typer.echo(json.dumps(data, indent=2, sort_keys=False))


def fail(message: str, code: int) -> typer.Exit:
    """Print one error line on stderr and return the Exit to raise."""
    typer.echo(f"rlplan: error: {message}", err=True)
    return typer.Exit(code)


class OneLineErrors(TyperGroup):
    """The root command: typer's and click's own errors (a flag value that does not parse or
    is out of range, a missing argument, an unknown option or command, an unreadable file) as
    one `rlplan: error:` line with exit code 2, like every other bad input, instead of typer's
    usage box. Help (`--help`, a bare `rlplan`) is printed as before."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:  # a caller that handles click's exceptions itself
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            # not standalone: click raises its errors here instead of printing them
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as exc:  # the help is already printed
            sys.exit(exc.exit_code)
        except ClickException as exc:
            typer.echo(f"rlplan: error: {usage_error(exc)}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except typer.Abort:
            typer.echo("rlplan: error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)  # typer.Exit's code, else success


def usage_error(exc: ClickException) -> str:
    """Click's message on one line, with where to read the command's usage."""
    message = " ".join(exc.format_message().replace("Value error, ", "").split())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """The boundary where domain errors become one stderr line and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except RlplanError as exc:
            raise fail(str(exc), exc.exit_code) from None

    return wrapper


def billions(n: float) -> str:
    return f"{n / 1e9:,.2f}B"


def fmt(value: Any, unit: str = "") -> str:
    """A table cell: '—' for unknown, numbers without trailing zeros."""
    if value is None:
        return "—"
    if isinstance(value, float):
        value = f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value}{unit}"

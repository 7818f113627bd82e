"""Output helpers shared by the commands: JSON on stdout, errors on stderr, rich tables."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from planner.errors import RlplanError

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

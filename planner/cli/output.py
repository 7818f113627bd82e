"""Output helpers shared by the commands: JSON on stdout, errors on stderr, rich tables."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from typer.core import TyperGroup

from planner.errors import EXIT_BAD_INPUT, InputError, RlplanError

try:  # typer ≥ 0.26 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on the real click
    from click.exceptions import ClickException, NoArgsIsHelpError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(highlight=False)
if not console.is_terminal and "COLUMNS" not in os.environ:  # piped or captured: keep table
    console.width = max(console.width, 160)  # rows whole, unless COLUMNS says how wide


def print_json(data: Any) -> None:
    """Machine output: indented JSON on stdout, nothing else."""
    typer.echo(json.dumps(data, indent=2, sort_keys=False))


# Characters that would break an error line or drive the terminal (a newline inside a value,
# an escape sequence): written as Python escapes instead (\n, \x1b, \u2028).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` with its control characters escaped: it prints as one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def error_line(message: str) -> None:
    """The one `rlplan: error:` line on stderr."""
    typer.echo(f"rlplan: error: {one_line(message)}", err=True)


_WARNINGS: list[str] = []


def warning(message: str) -> None:
    """A `rlplan: warning:` line for stderr, said when the command ends (`OneLineErrors`):
    the run goes on; a run refused as bad input says its one error line alone."""
    _WARNINGS.append(one_line(message))


def _say_warnings(code: object) -> None:
    if code != EXIT_BAD_INPUT:
        for message in _WARNINGS:
            typer.echo(f"rlplan: warning: {message}", err=True)
    _WARNINGS.clear()


def fail(message: str, code: int) -> typer.Exit:
    """Print one error line on stderr and return the Exit to raise."""
    error_line(message)
    return typer.Exit(code)


EXIT_READER_GONE = 128 + 13
"""A command whose reader closed standard output (`rlplan gpus | head`) ends quietly with the
status a shell gives a process SIGPIPE ends, as `yes | head` does."""


class _GuardedStdout:
    """sys.stdout while a command runs: a write that fails (a full disk) is an InputError
    naming standard output, reported as every other error, instead of an OSError from wherever
    the write happened; one whose reader has gone (a closed pipe) ends the command quietly
    (`EXIT_READER_GONE`): what it would have printed is not wanted. The rest is the stream's
    own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> BaseException:
        self.failed = True
        if isinstance(exc, BrokenPipeError):
            return SystemExit(EXIT_READER_GONE)
        return InputError(f"standard output: cannot write it ({exc.strerror or exc}); free "
                          "space or send the output elsewhere")

    def discard(self) -> None:
        """After a failed write: what is still buffered goes nowhere, so that flushing it at
        exit does not fail again (with a second message)."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class OneLineErrors(TyperGroup):
    """The root command: typer's and click's own errors (a flag value that does not parse or
    is out of range, a missing argument, an unknown option or command, a group such as
    `analyze` without its command) as one `rlplan: error:` line with exit code 2, like every
    other bad input, instead of typer's usage box; so is a failed write to standard output.
    Help (`--help`, a bare `rlplan`) is printed with exit code 0. Warnings are said when the
    command ends, unless it ends as bad input (its one error line alone)."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:  # a caller that handles click's exceptions itself
            return super().main(args, prog_name, complete_var, False, **extra)
        stdout = sys.stdout
        sys.stdout = guarded = _GuardedStdout(stdout)
        try:
            # not standalone: click raises its errors here instead of printing them
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError:  # a bare `rlplan`: the help is already printed
            sys.exit(0)
        except ClickException as exc:
            _say_warnings(EXIT_BAD_INPUT)
            error_line(usage_error(exc))
            sys.exit(EXIT_BAD_INPUT)
        except RlplanError as exc:  # outside a command's own boundary (`reports_errors`)
            error_line(str(exc))
            _say_warnings(exc.exit_code)
            sys.exit(exc.exit_code)
        except typer.Abort:
            error_line("aborted")
            sys.exit(1)
        finally:
            sys.stdout = stdout
            if guarded.failed:
                guarded.discard()
        _say_warnings(code)
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

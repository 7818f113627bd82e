"""The one domain exception family and the exit codes the CLI turns them into.

Core code raises these with a message a user can act on: what was wrong (naming the field) and
how to fix it. Only the CLI layer converts them into exit codes (DESIGN.md: 0 ok, 2 bad input,
3 infeasible).
"""

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3


class RlplanError(Exception):
    """Base of every error rlplan reports to a user."""

    exit_code = EXIT_BAD_INPUT


class InputError(RlplanError):
    """Bad input: a missing, malformed or inconsistent field. Exit code 2."""

    exit_code = EXIT_BAD_INPUT


class InfeasibleError(RlplanError):
    """A well-formed input that no plan satisfies. Exit code 3."""

    exit_code = EXIT_INFEASIBLE


class OutOfTime(InfeasibleError):
    """No plan found before the time limit ran out: not proven infeasible (a sweep's row says
    `timeout`). Exit code 3, as infeasible: there is no plan to give."""

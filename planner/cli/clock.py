"""When a command started, for `--time-limit`: it bounds the whole command, Python's start-up
and the imports included (issue 24). The entry point (`planner.cli.main.main`) marks the
process's start; a command run another way (typer's test runner, a caller's own `app()`)
starts its clock when it starts."""

from __future__ import annotations

import os
import time

_started: float | None = None


def process_started() -> float | None:
    """The monotonic clock time this process started, where the system says (Linux: field 22
    of /proc/self/stat, in clock ticks since boot, read against the boot-time clock); None
    elsewhere. Rounded down to a tick (10 ms), so never later than the true start."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # the name may hold spaces
        ticks = int(fields[19])  # field 22 overall, the 20th after the name
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.monotonic() - age


MAX_START_UP_S = 2.0
"""More than this from the process's start to the entry point's first line is not Python's
start-up (tens of milliseconds; a second or so when a fresh install compiles its modules): the
process ran another program before it became Python — a shell runs the last command of
`bash -c "pip install . && rlplan plan …"` in its own process, which started before the
install — and the command counts from the entry point instead."""


def mark_start(fallback: float) -> None:
    """The entry point: commands count from the process's start (or `fallback`, the earliest
    time the entry point saw, where the system does not say or the start is another
    program's: `MAX_START_UP_S`)."""
    global _started
    started = process_started()
    _started = (started if started is not None and fallback - started <= MAX_START_UP_S
                else fallback)
    _started = min(_started, fallback)


def command_started() -> float:
    """When the command started: the process's start when the entry point ran it, else now."""
    return time.monotonic() if _started is None else _started

"""Work run beside the search, in a forked process on another core.

`rlplan plan` runs one CP-SAT worker per core but one and prices in one Python thread, so a
second core is mostly idle while it searches. Four parts of a search are functions of what
they are handed alone, and run in a child meanwhile: a large space's training and forward
pricing, taken in turns with this process (`space.build_space`, `Turns`); the last options of
a large search, solved from the back while this process solves from the front (`last.py`,
`Ends`); the pins of the options shown (`pins.pin_beside` starts a large model's as soon as
it is solved; `pins.pin_shown` the rest but the best's, taken in turns with this process once
it has priced the best plan, unless the staleness what-if's child has that core); and the
what-ifs
(`solve._what_if`), from a copy of what was priced. A what-if's child is `nested`: once this
process waits for it and gives back its core (`Cores`), a child of its own solves the
what-if's last options from the back, under the least objective either has found (`Least`).
Their answers — candidates, optima, pinned plans, a few numbers — are the same as computed
here; only the time differs.

Forked, never spawned: a child that re-imported the package would lose what it gains. So only
where `fork` is the platform's usual way (Linux), with at least two cores to run on, not from a
daemon process (which may not have children) but a nested child, and not from a process
connected to Ray (a Ray sweep's driver and workers run gRPC threads, which a fork does not
carry safely). Anywhere else `start` returns None and the caller does the work itself, as it
does when the child fails or does not answer by the deadline.
"""

from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from planner.search.deadline import Deadline

GRACE_S = 5.0
"""How long past its deadline a child may take to answer: the steps a deadline cannot cut
short (`deadline.py`), in the child as in its parent."""


def wait_s(deadline: Deadline | None) -> float | None:
    """How long to wait for a child working to `deadline` (None: as long as it takes)."""
    if deadline is None or math.isinf(deadline.left()):
        return None
    return deadline.left() + GRACE_S


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def possible() -> bool:
    """Whether a child can run beside this process (module docstring)."""
    return not (sys.platform != "linux" or cores() < 2
                or multiprocessing.current_process().daemon or _in_ray())


def start(fn: Callable[..., Any], *args: Any, nested: bool = False) -> Aside | None:
    """`fn(*args)` running in a forked child, or None where none can run (`possible`).
    `nested`: the child may start children of its own (`_run`)."""
    if not possible():
        return None
    ctx = multiprocessing.get_context("fork")
    mine, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run, args=(theirs, fn, args, nested), daemon=True)
    gc.freeze()  # the child's collector leaves what exists now alone: its pages stay shared
    try:
        child.start()
    except OSError:  # no process to spare (limits): the caller does it itself
        mine.close()
        theirs.close()
        return None
    finally:
        gc.unfreeze()
    theirs.close()
    return Aside(child, mine)


def _in_ray() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and bool(getattr(ray, "is_initialized", lambda: False)())


def shared(make: Callable[[], Any]) -> Any:
    """`make()`, a `Turns`, `Ends`, `Cores` or `Least` to share with a child forked after it —
    None where no child can run (`possible`) or no shared memory and lock can be made (a
    platform without POSIX semaphores): the caller then does all the work itself."""
    if not possible():
        return None
    try:
        return make()
    except OSError:
        return None


class Turns:
    """The items of a list, each taken once by whichever of this process and its children
    asks first (a counter they share): work split as it goes, not in advance. Made before the
    children are forked (`shared`)."""

    def __init__(self, items: list) -> None:
        self.items = items
        self.next = multiprocessing.get_context("fork").Value("q", 0)

    def __iter__(self) -> Iterator:
        while True:
            with self.next.get_lock():
                i = self.next.value
                self.next.value = i + 1
            if i >= len(self.items):
                return
            yield self.items[i]


class Ends:
    """Positions 0 … n - 1 taken from the front by this process and from the back by a child,
    each once (a pair of counters they share), until they meet. Made before the child is
    forked (`shared`)."""

    def __init__(self, n: int) -> None:
        self.bounds = multiprocessing.get_context("fork").Array("q", [0, n])

    def front(self) -> int | None:
        with self.bounds.get_lock():
            i, end = self.bounds[0], self.bounds[1]
            if i >= end:
                return None
            self.bounds[0] = i + 1
            return i

    def left(self) -> int:
        """Positions neither end has taken."""
        with self.bounds.get_lock():
            return max(0, self.bounds[1] - self.bounds[0])

    def back(self) -> int | None:
        with self.bounds.get_lock():
            start, j = self.bounds[0], self.bounds[1] - 1
            if j < start:
                return None
            self.bounds[1] = j
            return j


class Cores:
    """Idle cores, given back by the process that idles (`give`) and taken by a child that
    would work beside (`take`): so that such work starts where a core is free rather than
    slowing the processes already running. Made before the children are forked (`shared`)."""

    POLL_S = 0.005

    def __init__(self, free: int = 0) -> None:
        self.free = multiprocessing.get_context("fork").Semaphore(free)

    def give(self) -> None:
        self.free.release()

    def take(self, wanted: Callable[[], bool]) -> bool:
        """Wait for an idle core while `wanted()` (False: none was taken)."""
        while wanted():
            if self.free.acquire(timeout=self.POLL_S):
                return True
        return False


class Least:
    """The least of the numbers this process and its children report (`lower`), None before
    any: an objective found in one, a cutoff for the others. Made before the children are
    forked (`shared`)."""

    def __init__(self) -> None:
        self.value = multiprocessing.get_context("fork").Value("q", -1)

    def get(self) -> int | None:
        with self.value.get_lock():
            return None if self.value.value < 0 else int(self.value.value)

    def lower(self, x: int) -> None:
        with self.value.get_lock():
            if self.value.value < 0 or x < self.value.value:
                self.value.value = x


class Aside:
    """A child computing one answer; `result` collects it, `close` ends the child."""

    def __init__(self, child: multiprocessing.process.BaseProcess, conn: Connection) -> None:
        self.child, self.conn = child, conn

    def result(self, timeout_s: float | None) -> tuple[bool, Any]:
        """(True, the answer), or (False, why not) when the child failed, died or did not
        answer within `timeout_s` (None: however long it takes). Ends the child either way."""
        try:
            if not self.conn.poll(None if timeout_s is None else max(0.0, timeout_s)):
                return False, f"no answer within {timeout_s:.1f} s"
            return self.conn.recv()
        except (EOFError, OSError) as exc:  # the child died before answering
            return False, f"the child process ended without an answer ({exc!r})"
        finally:
            self.close()

    def close(self) -> None:
        _end(self.child)
        self.conn.close()


def _run(conn: Connection, fn: Callable[..., Any], args: tuple, nested: bool) -> None:
    # Ctrl-C reaches the whole process group: the parent answers it (and ends this child);
    # the child printing a traceback of its own would break the one-line contract
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nested:  # children of its own (daemons: ended when it ends), and ended with it
        multiprocessing.current_process().daemon = False
        signal.signal(signal.SIGTERM, _end_with_children)
    else:  # not a nested parent's handler, inherited through the fork: ended by the kernel,
        # even while stuck on a lock a thread of the forked process held (no Python runs)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        answer: tuple[bool, Any] = (True, fn(*args))
    except BaseException as exc:  # any failure: the parent does the work itself
        answer = (False, f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError):  # the parent is gone: nobody to answer
        conn.send(answer)
    conn.close()


def _end_with_children(signum: int, frame: Any) -> None:
    """A nested child told to end (`Aside.close`) ends its own children first: none outlives
    it."""
    for child in multiprocessing.active_children():
        child.kill()  # its answer is unwanted and it holds nothing to release
        child.join()  # reaped, not left to whoever adopts them
    os._exit(128 + signum)


def _end(child: multiprocessing.process.BaseProcess) -> None:
    """`child` ended and reaped: asked (SIGTERM, which a nested child answers by ending its
    own children), then, past the grace, made (SIGKILL), so that no wait is unbounded."""
    if child.is_alive():
        child.terminate()
        child.join(GRACE_S)
    if child.is_alive():
        child.kill()
    child.join()

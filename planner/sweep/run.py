"""Running a sweep's points: local worker processes (default) or Ray tasks (`--ray`).

A point is (scenario, GPUs) — GPUs None for a scenario already sized (a pool grid's point,
`planner.sweep.pools`); its work, `solve_point`, is a pure function of the scenario, the
size and a budget in seconds counted from the task's own start — no clock shared with the
caller, so a Ray task on another machine does the same work as a local process (a local worker
also gets the command's clock time its budget ends at: one that starts late, a process still
starting, gets only what is left). CP-SAT runs one worker, so a search that proves its optimum
returns the same plan wherever it runs; one stopped at its budget returns the best plan found
by then, which can differ between runs.

The time limit bounds the whole command (`planner.search.deadline`): the points are handed out
in order, at most `slots` at a time (`jobs` processes, or the Ray cluster's CPUs), each with
its share of what is left over the ⌈points left / slots⌉ waves still to run, but at least
`MIN_POINT_S`; once less than that is left, the points not yet started are not searched and say
so (`timeout`), so the command ends by its limit plus one point's indivisible step. One job
solves in this process, the same way.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from planner.errors import InfeasibleError, InputError, OutOfTime
from planner.search.deadline import Deadline
from planner.search.solve import plan as search
from planner.specs.scenario import Scenario
from planner.sweep import NoPlan, Solved, sized

RAY_FLAG = "--ray"
RAY_HINT = "pip install 'rlplan[ray]'"
OnDone = Callable[[int, int, int], None]  # (index of the point solved, points done, points)
# the scenario (its profile and node) and the GPUs; None: the scenario's own cluster
Point = tuple[Scenario, int | None]
TIMING_FIELDS = frozenset({"wall_s", "time_limit_s"})
"""What may differ between two runs of the same proven search: how long it took, and so the
budget each point was handed (the time left when the points were handed out)."""
MIN_POINT_S = 0.5
"""The least budget a point is started with: a search shorter than this (loading a size,
pricing one task, building one model) would only overrun the limit, so near the deadline the
points handed out first get this much and the rest none, rather than every point a share too
small to find a plan (as `cpsat.MIN_MODEL_S` does for the options of one search)."""


def without_timing(doc):
    """A sweep's JSON answer without `TIMING_FIELDS`, to compare two runs of it."""
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if k not in TIMING_FIELDS}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


def solve_point(sc: Scenario, gpus: int | None, budget_s: float,
                ends: float | None = None) -> Solved:
    """The best plan on `gpus` GPUs (None: the scenario's cluster as it is) within `budget_s`
    seconds of starting — and by the monotonic clock time `ends`, when given by a caller on
    this machine — or why there is none."""
    if ends is not None:
        budget_s = min(budget_s, ends - time.monotonic())
    if budget_s <= 0:  # started after its time was up (waiting for a worker)
        return NoPlan("not searched: its share of the time limit had run out when a worker "
                      "took it up; raise --time-limit (search.time_limit_s)", searched=False,
                      timeout=True)
    if gpus is not None:
        try:
            sc = sized(sc, gpus)
        except InputError as exc:  # a size this profile cannot form: a row saying why
            return NoPlan(str(exc), searched=False)
    try:
        return search(sc, workers=1, explain=False, deadline=Deadline.after(budget_s))
    except OutOfTime as exc:
        return NoPlan(str(exc), timeout=True)
    except InfeasibleError as exc:
        return NoPlan(str(exc))


def not_searched(left_s: float) -> NoPlan:
    """A point whose turn came with less than `MIN_POINT_S` left of the time limit."""
    return NoPlan(f"not searched: {max(0.0, left_s):.1f} s of the time limit were left when "
                  f"its turn came (a point needs at least {MIN_POINT_S:g} s); raise "
                  "--time-limit (search.time_limit_s)", searched=False, timeout=True)


def _ready() -> None:
    """A worker's first task: once it returns, the worker has imported the search."""


def waves(points: int, slots: int) -> int:
    return -(-points // max(1, slots))


def budget(deadline: Deadline, points_left: int, slots: int) -> float | None:
    """The budget of the next point handed out: its share of what is left over the waves the
    `points_left` (it included) still make, at least `MIN_POINT_S`; None when less than that
    is left (the point is not started)."""
    left = deadline.left()
    if left < MIN_POINT_S:
        return None
    return min(left, max(left / waves(points_left, slots), MIN_POINT_S))


Start = Callable[[int, float], Hashable]  # hand point i out with a budget: its handle
WaitAny = Callable[[list[Hashable]], Iterable[tuple[Hashable, Solved]]]  # finished handles


def hand_out(points: list[Point], deadline: Deadline, slots: int, start: Start,
             wait_any: WaitAny, on_done: OnDone | None = None) -> list[Solved]:
    """Each point's answer in the order of `points`: handed out in order, at most `slots` at a
    time (`start`), each with its `budget`; `wait_any` blocks until some are done."""
    done: dict[int, Solved] = {}
    running: dict[Hashable, int] = {}

    def record(i: int, answer: Solved) -> None:
        done[i] = answer
        if on_done:
            on_done(i, len(done), len(points))

    def collect() -> None:
        for handle, answer in wait_any(list(running)):
            record(running.pop(handle), answer)

    for i in range(len(points)):
        while len(running) >= slots:
            collect()
        share = budget(deadline, len(points) - i, slots)
        if share is None:
            record(i, not_searched(deadline.left()))
        else:
            running[start(i, share)] = i
    while running:
        collect()
    return [done[i] for i in range(len(points))]


def solve_points(points: list[Point], deadline: Deadline, jobs: int | None = None,
                 ray_address: str | None = None, on_done: OnDone | None = None
                 ) -> list[Solved]:
    """Each point's answer in the order of `points`, whatever order they finish in: on Ray
    when `ray_address` is given ('auto', an address, or 'local' to start a Ray instance of
    `jobs` CPUs for this command), else in `jobs` local processes (default one per CPU)."""
    if ray_address is not None:
        return _on_ray(points, deadline, ray_address, jobs, on_done)
    return _local(points, deadline, jobs, on_done)


def _local(points: list[Point], deadline: Deadline, jobs: int | None,
           on_done: OnDone | None) -> list[Solved]:
    """Workers are spawned, not forked: a fork copies the parent's threads' locks (the
    progress bar's refresh thread, the solver's pools) into a child that cannot release them."""
    jobs = jobs or min(os.cpu_count() or 1, len(points))
    if jobs == 1:
        answers: dict[int, Solved] = {}

        def run_here(i: int, share: float) -> int:
            answers[i] = solve_point(*points[i], share)
            return i

        return hand_out(points, deadline, 1, run_here,
                        lambda handles: [(h, answers.pop(h)) for h in handles], on_done)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        # start the workers before any budget is handed out: a new process spends its first
        # second or two importing, which would come out of the first points' budgets
        wait([pool.submit(_ready) for _ in range(jobs)])

        def submit(i: int, share: float):
            return pool.submit(solve_point, *points[i], share, time.monotonic() + share)

        def finished(futures):
            return [(f, f.result()) for f in wait(futures, return_when=FIRST_COMPLETED).done]

        try:
            return hand_out(points, deadline, jobs, submit, finished, on_done)
        except BaseException:  # Ctrl-C or a crash: do not wait for the running points
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def import_ray():
    """The `ray` module, or the one-line error with the install hint."""
    try:
        import ray
    except ImportError:
        raise InputError(f"{RAY_FLAG} needs Ray, an optional extra: {RAY_HINT}") from None
    return ray


def _on_ray(points: list[Point], deadline: Deadline, address: str, jobs: int | None,
            on_done: OnDone | None) -> list[Solved]:
    ray = import_ray()
    started = False
    if not ray.is_initialized():  # a caller (a notebook, a test) may have connected already
        # workers' output stays in Ray's logs: this command's stdout may be JSON
        kwargs: dict = {"log_to_driver": False, "configure_logging": False}
        if address == "local":
            kwargs.update(address="local", num_cpus=jobs, include_dashboard=False)
        else:
            kwargs["address"] = address
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"{RAY_FLAG} {address}: cannot connect to Ray ({exc}); give "
                             "'auto' for the cluster this machine runs, a head address such as "
                             "ray://HOST:10001, or 'local' to start one here") from None
        started = True
    try:
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(num_cpus=1, max_retries=0)(solve_point)
        running: list = []

        def submit(i: int, share: float):
            running.append(ref := task.remote(*points[i], share))
            return ref

        def finished(refs):
            ready, _ = ray.wait(refs, num_returns=1)
            for ref in ready:
                running.remove(ref)
            return [(ref, ray.get(ref)) for ref in ready]

        try:
            return hand_out(points, deadline, slots, submit, finished, on_done)
        except BaseException:  # Ctrl-C or a failed task: stop the rest
            for ref in running:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()

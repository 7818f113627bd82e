"""Running a sweep's points: local worker processes (default) or Ray tasks (`--ray`).

A point is (scenario, GPUs) — GPUs None for a scenario already sized (a pool grid's point,
`planner.sweep_pools`); its work, `solve_point`, is a pure function of the scenario, the
size and a budget in seconds counted from the task's own start — no clock shared with the
caller, so a Ray task on another machine does the same work as a local process. CP-SAT runs
one worker, so a search that proves its optimum returns the same plan wherever it runs; one
stopped at its budget returns the best plan found by then, which can differ between runs.

The time limit bounds the whole command (`planner.search.deadline`): `slots` points run at
once (`jobs` processes, or the Ray cluster's CPUs), so the points form ⌈points / slots⌉ waves
and each point gets the time left when they are handed out over the waves. One job solves in
this process, each point getting what is left over the points still to run.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

from planner.errors import InfeasibleError, InputError
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


def without_timing(doc):
    """A sweep's JSON answer without `TIMING_FIELDS`, to compare two runs of it."""
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if k not in TIMING_FIELDS}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


def solve_point(sc: Scenario, gpus: int | None, budget_s: float) -> Solved:
    """The best plan on `gpus` GPUs (None: the scenario's cluster as it is) within `budget_s`
    seconds of starting, or why there is none."""
    if gpus is not None:
        try:
            sc = sized(sc, gpus)
        except InputError as exc:  # a size this profile cannot form: a row saying why
            return NoPlan(str(exc), searched=False)
    try:
        return search(sc, workers=1, explain=False, deadline=Deadline.after(budget_s))
    except InfeasibleError as exc:
        return NoPlan(str(exc))


def waves(points: int, slots: int) -> int:
    return -(-points // max(1, slots))


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
    done: dict[int, Solved] = {}

    def record(i: int, answer: Solved) -> None:
        done[i] = answer
        if on_done:
            on_done(i, len(done), len(points))

    if jobs == 1:
        for i, (sc, gpus) in enumerate(points):
            record(i, solve_point(sc, gpus, deadline.share(len(points) - i)))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            share = deadline.share(waves(len(points), jobs))
            futures = {pool.submit(solve_point, sc, gpus, share): i
                       for i, (sc, gpus) in enumerate(points)}
            try:
                for future in as_completed(futures):
                    record(futures[future], future.result())
            except BaseException:  # Ctrl-C or a crash: do not wait for the queued points
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    return [done[i] for i in range(len(points))]


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
        share = deadline.share(waves(len(points), slots))
        task = ray.remote(num_cpus=1, max_retries=0)(solve_point)
        refs = {task.remote(sc, gpus, share): i for i, (sc, gpus) in enumerate(points)}
        done: dict[int, Solved] = {}
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    done[refs[ref]] = ray.get(ref)
                    if on_done:
                        on_done(refs[ref], len(done), len(points))
        except BaseException:  # Ctrl-C or a failed task: stop the rest
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return [done[i] for i in range(len(points))]
    finally:
        if started:
            ray.shutdown()

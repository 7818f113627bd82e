"""The RL rows of ../shared/data/calibration/runs.csv priced: one row's step through
`evaluate()`, its phases, the errors pooled by source, the co-located/asynchronous pairs and
the one table issue 22 asks for (row, framework, model, GPUs, mode, measured, predicted, error,
the largest phase). bench/rl_rows.py runs it; the rows' mapping is bench/rl_mapping.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from rl_mapping import RLCase

from planner.cost.iteration import Evaluation, evaluate
from planner.errors import InfeasibleError, InputError
from planner.specs.hardware import HardwareProfile

PAIRS = (("1", "2"), ("4", "5"), ("6", "7"), ("19", "20"), ("21", "22"), ("23", "24"),
         ("25", "26"), ("32", "33"), ("34", "35"))
"""Each asynchronous row beside the co-located run of the same model, hardware and source
(the one on as many GPUs where there are two)."""


@dataclass
class RLResult:
    case: RLCase
    predicted: float | None = None
    error: str | None = None
    ev: Evaluation | None = None

    @property
    def ape(self) -> float | None:
        """|predicted − measured| / measured, None when either is missing."""
        m = self.case.measured_s
        return None if self.predicted is None or not m else abs(self.predicted - m) / m


def price(case: RLCase, gpu: HardwareProfile | None = None) -> RLResult:
    if case.skip or case.scenario is None or case.plan is None:
        return RLResult(case, error=case.skip)
    sc = case.scenario
    if gpu is not None:
        sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"gpu": gpu})})
    try:
        ev = evaluate(sc, case.plan)
    except (InfeasibleError, InputError) as exc:
        return RLResult(case, error=f"{type(exc).__name__}: {exc}")
    return RLResult(case, predicted=ev.iteration_time_s, ev=ev)


def with_controller(case: RLCase, us_per_token: float) -> RLCase:
    """The case with `runtime.controller_us_per_token` set to `us_per_token`."""
    sc = case.scenario
    assert sc is not None
    runtime = sc.runtime.model_copy(update={"controller_us_per_token": us_per_token})
    return replace(case, scenario=sc.model_copy(update={"runtime": runtime}))


def rl_errors(results: dict[str, RLResult]) -> dict[str, tuple[float, float, float, int]]:
    """source -> (median APE, mean APE, worst APE, rows priced); 'all' pools the sources."""
    by: dict[str, list[float]] = {}
    for res in results.values():
        if res.ape is not None:
            by.setdefault(res.case.source, []).append(res.ape)
    every = [e for v in by.values() for e in v]
    if every:
        by["all"] = every
    return {s: (float(np.median(v)), float(np.mean(v)), float(np.max(v)), len(v))
            for s, v in by.items()}


def phases(ev: Evaluation) -> dict[str, float]:
    """The priced step by phase, seconds, on the group that bounds it (the busiest; the only
    one when co-located): generation, assessment, training, the weight refit, the state
    offloaded during generation and back, and the controller's host time where the step
    waits for it (synchronous steps)."""
    busy = {g: sum(v for k, v in parts.items() if k != "idle") for g, parts in ev.groups.items()}
    parts = ev.groups[max(busy, key=busy.__getitem__)]
    swap = ev.swap_s if parts["sync"] else 0.0
    out = {"generation": parts["generation"], "assessment": parts["assessment"],
           "training": parts["training"], "refit": parts["sync"] - swap, "offload": swap}
    if len(ev.groups) == 1:
        out["controller"] = ev.controller_s
    return {k: float(v) for k, v in out.items()}


def largest_phase(ev: Evaluation) -> str:
    name, seconds = max(phases(ev).items(), key=lambda kv: kv[1])
    return f"{name} {seconds:.1f} s ({seconds / ev.iteration_time_s:.0%})"


def mode(case: RLCase) -> str:
    placement = case.row["placement"]
    return ("co-located" if placement.startswith("colocated") else
            "fully async" if "fully async" in placement else "1-off")


def model_name(case: RLCase) -> str:
    return case.row["model"].split(" actor")[0]


def print_table(cases: list[RLCase], results: dict[str, RLResult]) -> None:
    """Issue 22's table: every row of runs.csv, measured against predicted, with the phase
    that takes the most of the priced step."""
    print(f"\n{'row':>3} {'framework':15} {'model':16} {'GPUs':>4} {'mode':11} "
          f"{'measured':>8} {'predicted':>9} {'error':>7}  largest phase (of the predicted step)")
    for c in cases:
        r = results.get(c.id)
        head = (f"{c.id:>3} {c.source:15} {model_name(c):16} {c.row['n_gpus']:>4} "
                f"{mode(c):11} ")
        meas = f"{c.measured_s:8.1f}" if c.measured_s else f"{'-':>8}"
        if r is None or r.predicted is None or r.ev is None:
            print(head + f"{meas} {'-':>9} {'-':>7}  not priced: "
                  f"{(r.error if r else c.skip) or 'not mapped'}")
            continue
        err = (r.predicted - c.measured_s) / c.measured_s if c.measured_s else float("nan")
        print(head + f"{meas} {r.predicted:9.1f} {err:+7.1%}  {largest_phase(r.ev)}")


def pair_orders(cases: list[RLCase], results: dict[str, RLResult], show: bool
                ) -> dict[tuple[str, str], bool | None]:
    """Whether each co-located vs asynchronous pair is priced in the measured order."""
    ordered: dict[tuple[str, str], bool | None] = {}
    by_id = {c.id: c for c in cases}
    for a_id, b_id in PAIRS:
        ra, rb = results.get(a_id), results.get(b_id)
        ca, cb = by_id[a_id], by_id[b_id]
        meas_order = ca.measured_s > cb.measured_s  # type: ignore[operator]
        if ra is None or rb is None or ra.predicted is None or rb.predicted is None:
            ordered[(a_id, b_id)] = None
            if show:
                print(f"  {a_id} vs {b_id}: cannot order (a row failed)")
            continue
        ordered[(a_id, b_id)] = (ra.predicted > rb.predicted) == meas_order
        if show:
            verdict = "ordered as measured" if ordered[(a_id, b_id)] else "WRONG ORDER"
            print(f"  {a_id} vs {b_id} ({ca.label} vs {cb.label.split()[-1]}): measured "
                  f"{ca.measured_s:.1f} vs {cb.measured_s:.1f}, predicted {ra.predicted:.1f} "
                  f"vs {rb.predicted:.1f} -> {verdict}")
    return ordered

"""The fitting machinery the calibration benches share (bench/calibration.py, rl_rows.py,
training_throughput.py): where the calibration data lives, the grids of physically sensible
values, the rules a fitted value must pass to replace its default, and the printing helpers.
Kept apart so that those scripts import it rather than each other."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from planner.cost import time as time_model  # noqa: E402
from planner.cost.constants import ENGINES  # noqa: E402
from planner.specs.hardware import HardwareProfile  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared"
DATA = SHARED / "data" / "calibration"

# Grids of physically sensible values (fractions of peak; seconds; fractions of traffic).
COMPUTE_GRID = np.round(np.arange(0.30, 0.901, 0.05), 2)
HBM_GRID = np.round(np.arange(0.50, 0.901, 0.05), 2)
HOST_GRID = np.round(np.arange(0.0, 1.51e-3, 1e-4), 5)  # s per layer forward pass
OVERLAP_GRID = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
GRIDS = {"compute": COMPUTE_GRID, "hbm": HBM_GRID, "host": HOST_GRID, "overlap": OVERLAP_GRID}
# Grid ends that are the constant's own domain limits, not a choice of "sensible" range.
NATURAL_LIMITS = {"overlap": (0.0, 1.0), "host": (0.0, None)}

# The pre-fit defaults ("before"): the schema's efficiencies and the constants as they stood
# before this bench existed (DP overlap 0.5, no host floor).
PRE_FIT_FRAMEWORK = (0.0, 0.5)  # (host s per layer pass, DP overlap)

# A fitted value replaces its pre-fit default only if it lowers the objective by at least this
# much (percentage points of the objective, the other fitted values held): constants the rows
# do not identify keep their documented defaults.
MIN_GAIN = {"vtrain": 0.005, "rl": 0.01}


# --- small helpers ---------------------------------------------------------------------------


def ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas


def pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def with_efficiency(gpu: HardwareProfile, compute: float, hbm: float) -> HardwareProfile:
    eff = gpu.efficiency.model_copy(update={"compute": float(compute), "hbm": float(hbm)})
    return gpu.model_copy(update={"efficiency": eff})


@contextlib.contextmanager
def _framework(host: float, overlap: float, engines: dict | None = None) -> Iterator[None]:
    """Price with these framework constants: swaps `planner.cost.time.DEFAULT_RUNTIME` (the
    training kernels) and the entries of `planner.cost.constants.ENGINES` (the inference
    engines the scenarios name) for the duration."""
    saved, saved_engines = time_model.DEFAULT_RUNTIME, dict(ENGINES)
    time_model.DEFAULT_RUNTIME = time_model.Runtime(dp_comm_overlap=overlap,
                                                    host_s_per_layer_pass=host)
    ENGINES.update(engines or {})
    try:
        yield
    finally:
        time_model.DEFAULT_RUNTIME = saved
        ENGINES.update(saved_engines)


def section(title: str) -> None:
    print()
    print("=" * 100)
    print(title)
    print("=" * 100)


@dataclass
class VFit:
    compute: float
    hbm: float
    host: float
    overlap: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return self.compute, self.hbm, self.host, self.overlap


def coordinate_descent(objective: Callable[[VFit], float], start: VFit,
                       grids: dict[str, tuple | np.ndarray], rounds: int = 6
                       ) -> tuple[VFit, float, int]:
    """Minimise over the grids one coordinate at a time until no coordinate improves."""
    best, best_val, evals = start, objective(start), 1
    for _ in range(rounds):
        improved = False
        for name, grid in grids.items():
            for v in grid:
                cand = replace(best, **{name: float(v)})
                val = objective(cand)
                evals += 1
                if val < best_val - 1e-12:
                    best, best_val, improved = cand, val, True
        if not improved:
            break
    return best, best_val, evals


def at_edge(name: str, value: float) -> str:
    """'' or which end of its searched range a fitted value sits at — ends that are not the
    constant's own domain limits (an overlap of 0 or 1, a host floor of 0 are legitimate)."""
    grid = GRIDS[name]
    lower, upper = NATURAL_LIMITS.get(name, (None, None))
    if math.isclose(value, grid[0]) and lower is None:
        return "lower"
    if math.isclose(value, grid[-1]) and upper is None:
        return "upper"
    return ""


def search(objective: Callable[[VFit], float], start: VFit, names: list[str]
           ) -> tuple[VFit, int]:
    """Exhaustive grid over one or two free constants, coordinate descent over more."""
    if len(names) > 2:
        best, _, evals = coordinate_descent(objective, start, {n: GRIDS[n] for n in names})
        return best, evals
    best, best_val, evals = start, objective(start), 1
    grids = [GRIDS[n] for n in names]
    for values in np.array(np.meshgrid(*grids, indexing="ij")).reshape(len(names), -1).T:
        cand = replace(start, **{n: float(v) for n, v in zip(names, values, strict=True)})
        val = objective(cand)
        evals += 1
        if val < best_val - 1e-12:
            best, best_val = cand, val
    return best, evals


def fit_with_rules(objective: Callable[[VFit], float], default: VFit, names: list[str],
                   min_gain: float) -> tuple[VFit, list[str], int]:
    """Fit `names` from `default`, then keep a fitted value only if it is inside its searched
    range (a value at an end means the rows push it out of the physical range: they are
    compensating for a mis-modelled term) and beats its default by `min_gain` with the others
    held (else the rows do not identify it). Rejected constants go back to their defaults and
    the others are refitted without them."""
    current, free, notes, evals = default, list(names), [], 0
    while free:
        fitted, n_evals = search(objective, current, free)
        evals += n_evals
        value = objective(fitted)
        rejected = []
        for n in free:
            v, d = getattr(fitted, n), getattr(default, n)
            gain = objective(replace(fitted, **{n: d})) - value
            edge = at_edge(n, v)
            if edge:
                rejected.append(n)
                notes.append(f"{n}: fit reaches {v:g}, the {edge} end of the searched range: "
                             f"not written, default {d:g} kept")
            elif gain < min_gain:
                rejected.append(n)
                notes.append(f"{n}: fitted {v:g} beats the default {d:g} by only "
                             f"{100 * gain:.2f} pp: not identified, default kept")
            else:
                notes.append(f"{n}: fitted {v:g} (beats the default {d:g} by "
                             f"{100 * gain:.2f} pp)")
        current = replace(fitted, **{n: getattr(default, n) for n in rejected})
        if not rejected:
            break
        free = [n for n in free if n not in rejected]
        if free:
            notes.append(f"refit {', '.join(free)} with {', '.join(rejected)} at the default")
    return current, notes, evals

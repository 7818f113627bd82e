"""The plan of a bench scenario, or None with the scenario named infeasible (one line); and
the tally of changed plans `evaluate` accepts against a proven optimum (the proof benches:
`micro_batches.py`, `concurrency_caps.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from planner.cost.iteration import evaluate
from planner.errors import InfeasibleError
from planner.search.solve import plan

ROUNDING_S = 5e-3
"""Each task's candidate is priced in whole ms, rounded up: the optimum's score can stand up to
that much above `evaluate`'s price of the same plan (`tests/test_proof.py`'s slack)."""


def planned(sc, name: str, width: int):
    """`plan(sc, explain=False)`; None, `name` printed as infeasible in a `width` column,
    where nothing fits."""
    try:
        return plan(sc, explain=False)
    except InfeasibleError:
        print(f"{name:{width}} infeasible")
        return None


@dataclass
class Tally:
    """Optima and the changed plans (label, `PlanInput`) that fit and beat them by more than
    `ROUNDING_S`: a line per optimum, then a summary."""

    width: int
    optima: int = 0
    beaten: int = 0
    fitted: int = 0
    worst: tuple[float, str] = (0.0, "")

    def check(self, sc, best, name: str, changes: Iterable[tuple[str, object]],
              said: str = "") -> None:
        """Price `changes` of optimum `best` and print its line (`said` after its time)."""
        found = []
        for label, changed in changes:
            try:
                t = evaluate(sc, changed)
            except InfeasibleError:
                continue
            self.fitted += 1
            if (saved := best.iteration_time_s - t.iteration_time_s) > ROUNDING_S:
                found.append((saved, label))
                self.worst = max(self.worst, (saved / best.iteration_time_s, f"{name}: {label}"))
        self.optima += 1
        self.beaten += bool(found)
        top = max(found, default=None)
        print(f"{name:{self.width}} {best.iteration_time_s:9.2f} s  {said}" + (
            "none faster" if top is None else
            f"{len(found)} faster, best {top[1]}: -{top[0]:.2f} s"), flush=True)

    def summary(self, what: str) -> str:
        return (f"{self.beaten} of {self.optima} optima beaten by {what} `evaluate` accepts "
                f"({self.fitted:,} changed plans that fit priced); the largest gain "
                f"{self.worst[0]:.2%} ({self.worst[1] or 'none'})")

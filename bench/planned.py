"""The plan of a bench scenario, or None with the scenario named infeasible (one line)."""

from __future__ import annotations

from planner.errors import InfeasibleError
from planner.search.solve import plan


def planned(sc, name: str, width: int):
    """`plan(sc, explain=False)`; None, `name` printed as infeasible in a `width` column,
    where nothing fits."""
    try:
        return plan(sc, explain=False)
    except InfeasibleError:
        print(f"{name:{width}} infeasible")
        return None

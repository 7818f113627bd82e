"""The last option of a search (`solve._search`) solved beside the others, alone.

With the options solved one after another, each under the optima and plans found before it
(`solve.cutoff`, seeds), the second core has nothing to do. So a child process solves the last
one meanwhile, with no seeds and no cutoff, and pins its optimum (`cpsat.pin`). Its answer is
taken only where it is what solving it last gives: an optimum within the cutoff, so proven
OPTIMAL at the same objective; and one that no plan with a bound candidate (a KV gap,
`kv.py`) reaches, so neither solve priced a KV size more (`refine.py`) — the space after both
is the one priced, and the optimum's pin, a function of the space and the optimum, the same.
Else the option is solved here as if no child had run.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from planner.search import cpsat
from planner.search.bounds import prune
from planner.search.deadline import Deadline
from planner.search.space import Space

MIN_CANDIDATES = 1000
"""Spaces with fewer candidates are solved here only: on bench/search_speed.py's cases their
solves take hundredths of a second, about what forking the process costs."""


def alone(space: Space, deadline: Deadline, workers: int) -> cpsat.Result | None:
    """`space` solved with no seeds and no cutoff and pinned — None unless that is an optimum
    reached without pricing a KV size more, that no plan with a bound candidate reaches."""
    priced = space.priced
    result = cpsat.solve(space, deadline, workers, pin=False)
    if (result.status != "OPTIMAL" or space.priced != priced
            or _bound_reaches(space, result.objective, deadline)):
        return None
    return cpsat.pin(space, result, deadline)


def as_if_last(pinned: cpsat.Result | None, cutoff: int | None) -> cpsat.Result | None:
    """`alone`'s answer where it is what solving the option last, under `cutoff`, gives."""
    if pinned is None or (cutoff is not None and pinned.objective > cutoff):
        return None
    return pinned


def _bound_reaches(space: Space, objective: int, deadline: Deadline) -> bool:
    """Whether some plan of `space` with a bound candidate scores `objective` or less (True
    too when that is not settled by `deadline`)."""
    within = prune(space, objective)
    if not any(c.bound for cands in within.candidates.values() for c in cands):
        return False
    model = cpsat.Model(within).build()
    model.m.Add(model.objective <= objective)
    model.m.AddBoolOr([v for key, v in model.x.items() if model.cand(key).bound])
    model.m.ClearObjective()
    solver = cpsat.new_solver(deadline.left(), 1, 0)
    return deadline.left() <= 0 or solver.Solve(model.m) != cp_model.INFEASIBLE

"""The last options of a search (`solve._search`) solved beside the others, alone.

With the options solved one after another, each under the optima and plans found before it
(`explain.cutoff`, seeds), the second core has nothing to do. So a child process solves them from
the last one back (`aside.Ends`) until it meets this process coming from the first, each with no
seeds, under the cutoff this process has set so far (none at first); the options shown are
pinned later (`pins.pin_shown`). An answer is taken
only where it is what solving the option in its turn gives: an optimum within the cutoff there,
so proven OPTIMAL at the same objective; and one that no plan with a bound candidate (a KV gap,
`kv.py`) reaches, so neither solve priced a KV size more (`refine.py`) — the space after both
is the one priced, and the optimum's pin, a function of the space and the optimum, the same.
Else the option is solved here as if no child had run.
"""

from __future__ import annotations

import time

from planner.search import cpsat, model
from planner.search.aside import Cores, Ends, Least
from planner.search.bounds import placement_lower_bound, prune
from planner.search.choice import generation_slot, score
from planner.search.deadline import Deadline
from planner.search.sat import cp_model
from planner.search.space import Space

MIN_CANDIDATES = 1000
"""Spaces with fewer candidates are solved here only: timed once on bench/search_speed.py's
scenarios (a one-off run, not a bench figure), their solves took hundredths of a second,
about what forking the process costs."""


def alone(space: Space, deadline: Deadline, workers: int, cutoff: int | None = None
          ) -> cpsat.Result | None:
    """`space` solved with no seeds — None unless that is an optimum no plan with a bound
    candidate reaches (nor beats: then the search prices a KV size more), and (`cutoff`) at
    most `cutoff`. Unpinned: the search pins the options it shows (`pins.pin_shown`), in
    whichever process is free.

    One solve says both: among the plans of least objective it prefers one with a bound
    candidate (at most one is chosen, the generation's): minimise 2 × objective − that
    candidate's literal. Its candidates are first cut by a greedy incumbent's score, which is
    a plan's (`bounds.incumbent` takes no bound candidate), as `cpsat.solve` does — or by the
    cutoff below it (`bounds.prune`; none within: None at once, as when the model finds none)."""
    started = time.monotonic()
    if generation_slot(space) is None or deadline.left() < cpsat.MIN_MODEL_S:
        return None
    pruned, start = cpsat.by_incumbent(space)
    if cutoff is not None and (start is None or cutoff < score(space, start)):
        pruned, start = prune(space, cutoff), None
        if (least := placement_lower_bound(pruned)) is None or least > cutoff:
            return None
    built = cpsat.hinted_model(pruned, start)
    if cutoff is not None:
        built.m.Add(built.objective <= cutoff)
    bound = [v for key, v in built.x.items() if built.cand(key).bound]
    built.m.Minimize(2 * built.objective - sum(bound))
    solver = model.new_solver(deadline.left(), workers, 0)
    if solver.Solve(built.m) != cp_model.OPTIMAL or any(solver.Value(v) for v in bound):
        return None
    choice = built.chosen(solver)
    objective = int(score(space, choice))
    return cpsat.Result("OPTIMAL", choice, objective, objective, time.monotonic() - started,
                        len(built.m.Proto().variables), pruned.kept, pinned=False)


def from_the_back(spaces: list[Space], ends: Ends, cut: Least, deadline: Deadline,
                  workers: int) -> dict[int, cpsat.Result | None]:
    """`alone` for each position of `spaces` (the options in the order they are solved) taken
    from the back of `ends`, by position, each under the cutoff the other process has set so
    far (`cut`: the optima found before a position set one no higher, `explain.cutoff`, so an
    optimum within it is all the search can take)."""
    out = {}
    while (j := ends.back()) is not None:
        out[j] = alone(spaces[j], deadline, workers, cut.get())
    return out


def least_from_the_back(spaces: list[Space], ends: Ends, least: Least, cores: Cores,
                        deadline: Deadline, workers: int) -> dict[int, cpsat.Result]:
    """For a search that needs only the least objective (`solve._best_of`): once a core is
    idle (`cores`; nothing if the other end takes every position first), each position of
    `spaces` taken from the back of `ends`, solved unpinned under the least objective either
    process has found so far (`least`) as its cutoff, each optimum lowering it — by position.
    An option proven above a cutoff is above the least objective, whichever process found it:
    the same least objective, and the same options settled, as solving them in turn."""
    out: dict[int, cpsat.Result] = {}
    if not cores.take(lambda: ends.left() > 0 and not deadline.expired()):
        return out
    while (j := ends.back()) is not None:
        out[j] = cpsat.solve(spaces[j], deadline, workers, cutoff=least.get(), pin=False)
        if out[j].status == "OPTIMAL":
            least.lower(out[j].objective)
    return out


def as_if_last(answer: cpsat.Result | None, cutoff: int | None) -> cpsat.Result | None:
    """`alone`'s answer where it is what solving the option in its turn, under `cutoff`,
    gives."""
    if answer is None or (cutoff is not None and answer.objective > cutoff):
        return None
    return answer

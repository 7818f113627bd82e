"""The canonical plans of the options a plan shows (`cpsat.pin`: a second solve each), some
pinned beside the search in child processes (`aside.py`), the rest once it is done."""

from __future__ import annotations

from collections.abc import Callable

from planner.search import aside, cpsat
from planner.search.deadline import Deadline
from planner.search.explain import MAX_ALTERNATIVES, cutoff, shown
from planner.search.option import Outcome

PIN_BESIDE_VARIABLES = 2000
"""Models this large are pinned beside the solves that follow (`pin_beside`): timed once on
bench/search_speed.py's scenarios (a one-off run, not a bench figure), smaller ones pinned in
under 0.07 s, a few times what forking the process costs; larger ones in 0.18–0.54 s."""


def pin_beside(o: Outcome, optima: list[int], deadline: Deadline,
               asides: dict[str, aside.Aside]) -> None:
    """Start pinning `o` (`cpsat.pin`) in a child, beside the solves still to come, when it is
    a proven optimum the `optima` proven so far still let be shown (`cutoff`) and its model
    is large: its space is final once solved. The child goes into `o.pinning`, and into
    `asides` for `plan` to end."""
    limit = cutoff(optima, MAX_ALTERNATIVES)
    if (o.result.pinned or o.result.status != "OPTIMAL"
            or o.result.variables < PIN_BESIDE_VARIABLES
            or (limit is not None and o.result.objective > limit)):
        return
    if (child := aside.start(cpsat.pin, o.space, o.result, deadline)) is not None:
        o.pinning = asides[f"pin {len(asides)}"] = child


def pin_shown(ranked: list[Outcome], deadline: Deadline, beside: bool = True
              ) -> Callable[[], None]:
    """Give the options whose plans are shown (`explain.shown`) their canonical plans
    (`cpsat.pin`), in place: only those are needed, and each costs a second solve. The best
    is pinned before this returns; the others beside it — those pinned beside the search
    (`pin_beside`) collected, the rest taken in turns by a child (`aside.py`) where one can
    run and `beside` (not while the staleness what-if's child has the other core: the command
    waits for that one last) and by this process once it calls the function returned (which
    returns when all are pinned): the plan prices the best meanwhile. A pin is a function of
    its option's space and optimum alone, so the plans are the same either way."""
    todo = [o for o in shown(ranked) if not o.result.pinned]
    needed = {id(o) for o in todo}
    for o in ranked:  # not shown: their pins are not needed
        if o.pinning is not None and id(o) not in needed:
            o.pinning.close()
    best = ranked[0]
    rest = [o for o in todo if o.pinning is None and o is not best]
    turns = aside.shared(lambda: aside.Turns(list(range(len(rest))))) if rest else None
    child = aside.start(_pins, rest, turns, deadline) if turns and beside else None
    if id(best) in needed:
        collect(best, deadline)

    def finish() -> None:
        mine = {k: cpsat.pin(rest[k].space, rest[k].result, deadline)
                for k in (turns if turns is not None else range(len(rest)))}
        ok, theirs = child.result(aside.wait_s(deadline)) if child else (True, [])
        pinned = {**(dict(theirs) if ok else {}), **mine}
        for k, o in enumerate(rest):  # what a failed child took is pinned here
            o.result = pinned[k] if k in pinned else cpsat.pin(o.space, o.result, deadline)
        for o in todo:
            if o is not best and o.pinning is not None:
                collect(o, deadline)
    return finish


def collect(o: Outcome, deadline: Deadline) -> None:
    """`o` pinned: from its child beside the search (`pin_beside`), else here."""
    if o.pinning is not None:
        ok, result = o.pinning.result(aside.wait_s(deadline))
        o.result = result if ok else cpsat.pin(o.space, o.result, deadline)
    else:
        o.result = cpsat.pin(o.space, o.result, deadline)


def _pins(outcomes: list[Outcome], turns: aside.Turns, deadline: Deadline
          ) -> list[tuple[int, cpsat.Result]]:
    """The pins of the positions of `outcomes` taken from `turns`, by position."""
    return [(k, cpsat.pin(outcomes[k].space, outcomes[k].result, deadline)) for k in turns]

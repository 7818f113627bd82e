"""Solving a `Space` with its CP-SAT model (`model.py`): the optimum over every KV cache size
(`solve`), found under the limits bounds, near plans and other options' plans set, and the
canonical plan at it (`pin`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from planner.search import refine
from planner.search.bounds import carry, incumbent, placement_lower_bound, prune, space_lower_bound
from planner.search.choice import Choice, generation_slot, score
from planner.search.deadline import Deadline
from planner.search.model import BEATEN, Model, Result
from planner.search.space import Space

MIN_MODEL_S = 0.2
"""Less time left than this and no model is built: building one (a large space's takes a
tenth of a second or more, unchecked) and solving it would only overrun the deadline; the
answer is the best plan known (greedy or carried over)."""

MAX_KV_ROUNDS = 64
"""Solves `solve` may refine KV sizes in (`refine.py`); past them its plan is the last
optimum's with the KV cache that fits where it sits, status FEASIBLE (in practice a handful
do)."""


def solve(space: Space, time_limit_s: float | Deadline, workers: int = 1, seed: int = 0,
          cutoff: int | None = None, seeds: Sequence[Choice] = (), pin: bool = True
          ) -> Result:
    """The optimum of `space` over every KV cache size, by `time_limit_s` (seconds, or a
    deadline): `_solve_priced` over its priced and bound candidates; while that optimum uses a
    bound candidate, a KV size inside its gap is priced (`refine.refine`) and the space solved
    again — `space` keeps what was priced — unless that plan with the KV cache that fits where
    it sits (`refine.realize`) scores the optimum: then it is one. An optimum without bound
    candidates is one over every KV size (`kv.py`); one cut short by the deadline or
    `MAX_KV_ROUNDS` answers that plan, FEASIBLE, the bound kept.
    `pin`: the canonical plan of a proven optimum (`pin`)."""
    deadline = (time_limit_s if isinstance(time_limit_s, Deadline)
                else Deadline.after(time_limit_s))
    if generation_slot(space) is None:  # the option's rules contradict: nothing to solve
        return Result("INFEASIBLE", None, None, None, 0.0, 0)
    for rounds in range(MAX_KV_ROUNDS + 1):
        result = _solve_priced(space, deadline, workers, seed, cutoff, seeds)
        if result.choice is None or not refine.uses_bound(space, result.choice):
            break
        plan = refine.realize(space, result.choice)
        if result.status == "OPTIMAL" and score(space, plan) == result.objective:
            # the plan with the KV cache that fits where it sits scores the optimum over every
            # KV size's lower bounds: it is an optimum over them all
            refine.refine(space, result.choice, neighbours=False)  # its size, in the space
            result = dataclasses.replace(result, choice=plan)
            break
        if rounds == MAX_KV_ROUNDS or deadline.left() < MIN_MODEL_S or not refine.refine(
                space, result.choice):
            result = dataclasses.replace(result, status="FEASIBLE", choice=plan,
                                         objective=int(score(space, plan)))
            break
    return _canonical(space, result, deadline, seed) if pin else result


def solve_under(space: Space, deadline: Deadline, cutoff: int) -> Result:
    """`space` as it is — its bound candidates kept, no KV size refined — solved for a plan
    scoring at most `cutoff`: status BEATEN (or INFEASIBLE) when there is none
    (`certify.py`)."""
    return _solve_priced(space, deadline, 1, 0, cutoff, ())


def _solve_priced(space: Space, deadline: Deadline, workers: int, seed: int,
                  cutoff: int | None, seeds: Sequence[Choice]) -> Result:
    """Build and solve the model for `space` by `deadline` (KV gaps as they are), its
    candidates first pruned by a greedy incumbent's score (`bounds`: the optimum is unchanged),
    the incumbent given as a hint — and the answer when CP-SAT finds none in time (or there is
    no time left to build the model): status FEASIBLE, `greedy`, its bound `bounds`' static
    one.

    Two things can make the proof cheaper without changing the answer: `seeds`, other spaces'
    plans, carried over when they are plans of this space too (`bounds.carry`), score lower
    than the greedy incumbent; and `cutoff`: only a score ≤ `cutoff` matters to the caller.
    Below the incumbent, either is a `limit` on the objective that prunes more candidates; the
    optimum is proven under it (`_limited`; none under a cutoff: status BEATEN): the same
    objective and bound as with neither, found sooner. The plan is any optimal one."""
    started = time.monotonic()
    full = space
    space, start = by_incumbent(full)
    carried = min((c for ch in seeds if (c := carry(full, ch)) is not None),
                  key=lambda ch: score(full, ch), default=None)
    if cutoff is None and full.kept >= NEAR_FROM and deadline.left() >= 2 * MIN_MODEL_S:
        near = _near(space, start, deadline)
        if near is not None and (carried is None or score(full, near) < score(full, carried)):
            carried = near
    limits = [score(full, ch) for ch in (start, carried) if ch is not None]
    limit = min(limits + ([cutoff] if cutoff is not None else []), default=None)
    known = min((ch for ch in (start, carried) if ch is not None),
                key=lambda ch: score(full, ch), default=None)
    result = None
    if deadline.left() >= MIN_MODEL_S:
        if limit is not None and (start is None or limit < score(full, start)):
            result = _limited(full, carried, limit, cutoff, deadline, workers, seed)
        else:
            result = hinted_model(space, start).solve(deadline, workers, seed, pin=False)
        if result.choice is not None or result.status in ("INFEASIBLE", BEATEN) or known is None:
            return result
    if known is None:  # no time to build the model, and no plan known: nothing known
        return Result("UNKNOWN", None, None, None, time.monotonic() - started, 0, space.kept)
    bound = space_lower_bound(space)
    return Result("FEASIBLE", known, int(score(full, known)),
                  None if bound is None else int(bound), time.monotonic() - started,
                  result.variables if result else 0, space.kept, greedy=True)


NEAR_FROM = 1000
"""Spaces with this many candidates get a near-optimal plan first (`_near`): on smaller ones a
second model costs about what it saves."""
NEAR_EACH = 4
"""Candidates of each task and group shape in `_near`'s model: the fastest and the smallest
that many each."""


def _near(space: Space, start: Choice | None, deadline: Deadline) -> Choice | None:
    """A plan of `space` close to its optimum, cheaply: the optimum of the model over each
    task's `NEAR_EACH` fastest and `NEAR_EACH` smallest priced candidates per group shape (a
    few hundred; a tenth of the model or less), in a quarter of the time left (None: none in
    it). Its score is a limit the whole model is proven under (`_limited`): the optima of the
    large spaces are found in the small one, and CP-SAT's time goes on proving them (the
    shipped PPO example's options, solved alone: 1.5–2.7× less CPU time, a one-off probe)."""
    few = {}
    for key, cands in space.candidates.items():
        priced = [c for c in cands if not c.bound]
        picked = (sorted(priced, key=lambda c: sum(c.time_ms.values()))[:NEAR_EACH]
                  + sorted(priced, key=lambda c: c.persistent_mib)[:NEAR_EACH])
        if picked:
            few[key] = list({id(c): c for c in picked}.values())
    found = hinted_model(dataclasses.replace(space, candidates=few), start).solve(
        deadline.sooner(deadline.left() / 4), pin=False)
    return found.choice


def by_incumbent(space: Space) -> tuple[Space, Choice | None]:
    """`space` cut by a greedy incumbent's score (`bounds.prune`: the optimum is unchanged),
    and the incumbent, a plan (None: none found, nothing cut)."""
    start = incumbent(space)
    return (space if start is None else prune(space, score(space, start))), start


def hinted_model(space: Space, start: Choice | None) -> Model:
    """The model of `space`, `start` (a plan of it, or None) its hint."""
    model = Model(space).build()
    if start is not None:
        model.hint(start)
    return model


def _limited(full: Space, carried: Choice | None, limit: int, cutoff: int | None,
             deadline: Deadline, workers: int, seed: int) -> Result:
    """`solve` with the objective limited to `limit`, below the greedy incumbent's score (when
    there is one): the choices within it are those of `full` pruned by the limit
    (`bounds.prune`), hinted with the `carried` plan when it is within.
    None within — no candidate left to a task, the bound over its placements above it
    (`bounds.placement_lower_bound`), or CP-SAT proving it — can only be under the `cutoff`:
    BEATEN, bound `limit` + 1. A proven optimum is unpinned: its canonical plan is that of the
    model without a limit (`pin`)."""
    started = time.monotonic()
    within = prune(full, limit)
    least = placement_lower_bound(within)
    beaten = Result(BEATEN, None, None, limit + 1, 0.0, 0, within.kept)
    if least is None or least > limit:
        return dataclasses.replace(beaten, wall_s=time.monotonic() - started)
    model = Model(within).build()
    model.m.Add(model.objective <= limit)
    if carried is not None and score(full, carried) <= limit:
        model.hint(carried)
    found = model.solve(deadline, workers, seed, pin=False)
    if found.status == "INFEASIBLE":
        return dataclasses.replace(beaten, wall_s=time.monotonic() - started,
                                   variables=found.variables)
    found = dataclasses.replace(found, wall_s=time.monotonic() - started)
    return dataclasses.replace(found, pinned=False) if found.status == "OPTIMAL" else found


def pin(space: Space, result: Result, deadline: Deadline, seed: int = 0) -> Result:
    """`result` of `solve(space, ..., pin=False)` with its canonical plan (`Model.canonical`,
    in the model `solve` builds without a limit): the plan `solve` would have returned, in
    what is left of `deadline` (else the plan it has: with under `MIN_MODEL_S` left no model is
    built)."""
    return _canonical(space, result, deadline, seed)


def _canonical(space: Space, result: Result, deadline: Deadline, seed: int) -> Result:
    if result.pinned or deadline.left() < MIN_MODEL_S:
        return result
    # the optimum is a plan: only plans are canonical
    return _pin(*by_incumbent(refine.priced_only(space)), result, deadline, seed)


def _pin(space: Space, start: Choice | None, found: Result, deadline: Deadline, seed: int
         ) -> Result:
    """Pin `found`'s optimum in the model of `space` (pruned by the incumbent `start`)."""
    started = time.monotonic()
    pinned = hinted_model(space, start)
    choice = pinned.canonical(found.objective, deadline, seed)
    return dataclasses.replace(found, choice=choice or found.choice, pinned=True,
                               variables=len(pinned.m.Proto().variables),
                               candidates=space.kept,
                               wall_s=found.wall_s + time.monotonic() - started)

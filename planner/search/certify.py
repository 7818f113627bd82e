"""Whether a proven optimum also holds against KV cache sizes written into a plan.

The search prices each generation shape at some KV sizes and stands for the sizes between with
bound candidates (`kv.kv_bounds`), each allowed where the priced size above its gap does not
fit: that covers a plan that leaves `kv_cache_tokens` out (it gets the largest size that fits
where it sits). A size written in can sit below a priced size that fits. Where that priced size
keeps every sequence running, more KV is never slower (`tests/cost/test_generation.py`), so the
priced size is as fast and the size written in is covered; where it preempts, a size below it
can be faster, by at most the recomputation its preemptions cost — the bound's time, valid for
every size in the gap (`Candidate.preempting_ms`). `certify` allows those bounds wherever
they fit and solves under the optimum: none under it proves that no plan of the option, whatever
KV size it writes, beats the optimum; a plan under it is a bound, not a faster plan (the sizes
in its gap are not priced; `bench/proof_campaign.py --certify` counts each answer).

Partial rollouts have no bound candidates (their steady-state step is not monotone in the KV
cache, `kv.kv_bounds`): their sizes written in stay unproven.
"""

from __future__ import annotations

import dataclasses

from planner.search import cpsat, model
from planner.search.bounds import lower_bounds, stage_floors
from planner.search.candidate import Space
from planner.search.deadline import Deadline
from planner.search.option import Outcome

ANYWHERE_MIB = 1 << 40
"""A bound's `upper_mib` that no group holds: the bound is allowed wherever it fits."""


def certify(space: Space, objective: int, least: int, deadline: Deadline) -> str:
    """Whether a plan of `space` with a KV size written in can score under `objective`, given
    `least`, a lower bound on the space's plans (its proven optimum): "covered" (no priced
    size preempts: the priced proof covers those sizes), "proven" (none can) or "bound" (a
    bound gets under it, or the deadline passed first: not proven)."""
    if space.generation is None or space.partial:
        return "covered"
    reach, flagged = _reach(space, objective, least)
    if not flagged:
        return "covered"
    if not any(name == space.generation.name for name, _, _ in reach):
        return "proven"
    # (`solve_under` prunes by the cutoff and tries the placements' bound before a model)
    under = cpsat.solve_under(dataclasses.replace(space, candidates=reach), deadline,
                              objective - 1)
    return ("proven" if under.choice is None and under.status in ("INFEASIBLE", cpsat.BEATEN)
            else "bound")


def _reach(space: Space, objective: int, least: int) -> tuple[dict, bool]:
    """`space`'s candidates with only the generation ones a plan with a size written in can
    use to get under `objective` — the bounds below a priced size that preempts, allowed
    wherever they fit, but those that cannot get under it — and whether there is any such
    bound at all. Where the next priced size b above its gap fits, a bound's plan is b's plan
    with the generation shorter by b's time less the bound's, Δ: it scores at least `least` − Δ
    (the time objective moves by at most what one stage loses; not under inter-stage fusion,
    where when each response is done counts, and a smaller cache can finish some sooner and
    others later). Where b does not fit, the gap holding the size that fits there has a bound
    the proof already holds, no slower and of the same shape: at least `least`. And it scores
    at least its static lower bound (`bounds.lower_bounds`)."""
    floors = stage_floors(space)
    gen, flagged, reach = space.generation.name, False, {}
    for (name, p, size), cands in space.candidates.items():
        if name != gen:
            reach[(name, p, size)] = cands
            continue
        wide = [c for c in cands if c.preempting_ms]
        flagged |= bool(wide)
        near = [dataclasses.replace(c, upper_mib=ANYWHERE_MIB) for c, low in
                zip(wide, lower_bounds(space, wide, p, size, floors), strict=True)
                if low < objective and (space.objective != "time" or space.fusion or least - (
                    c.preempting_ms - c.time_ms["generation"]) < objective)]
        if near:
            reach[(name, p, size)] = near
    return reach, flagged


def unproven(outcomes: list[Outcome], objective: int, deadline: Deadline
             ) -> list[dict[str, str]]:
    """The options whose plans with a KV size written in are not proven to score no better
    than `objective`, each as {"option": its description, "why": …}; [] when all are."""
    out = []
    for o in outcomes:
        if o.space.generation is None or o.result.status == "INFEASIBLE":
            continue
        if o.option.partial:
            why = "no bound between the KV sizes and caps on running sequences priced"
        elif deadline.left() < cpsat.MIN_MODEL_S:
            why = "not checked within the time limit"
        elif certify(o.space, objective, _least(o), deadline) == "bound":
            why = "a bound under the optimum, below a priced size that preempts"
        else:
            continue
        out.append({"option": o.option.describe(), "why": why})
    return out


def _least(o: Outcome) -> int:
    """A lower bound on every plan of a settled option: its optimum, or its bound (beaten)."""
    return o.result.objective if o.result.status == "OPTIMAL" else o.result.bound


def kv_proof(outcomes: list[Outcome], objective: int, deadline: Deadline, proven: bool
             ) -> dict:
    """The plan's `search` fields on the KV sizes its proof covers: `kv_sizes_proven` "every
    size", "left out or priced" (`kv_sizes_unproven` says which options leave sizes written
    in unproven, `unproven`) or None (no proof: the search was cut short)."""
    unsure = unproven(outcomes, objective, deadline) if proven else []
    return {"kv_sizes_proven": (None if not proven else "left out or priced" if unsure
                                else "every size"),
            "kv_sizes_unproven": unsure}


def proof(outcomes: list[Outcome], objective: int) -> tuple[bool, float | None]:
    """Whether the chosen plan's score `objective` is proven the least of every option's, and
    its gap (`gap`): proven when every option is settled over its whole space, or when the
    options cut short are bounded at that score or above (gap 0)."""
    if all(o.result.status in model.SETTLED and o.space.complete for o in outcomes):
        return True, 0.0
    found = gap(objective, outcomes)
    return found == 0.0, found


def gap(objective: int, outcomes: list[Outcome]) -> float | None:
    """The chosen plan's gap to the best bound over every option, (objective − bound) /
    objective; None (unknown) when an option has no bound: its search or its pricing was cut
    short before one was known. A complete option proven infeasible bounds nothing."""
    bounds = []
    for o in outcomes:
        if o.result.status == "INFEASIBLE" and o.space.complete:
            continue
        if o.result.bound is None or not o.space.complete:
            return None
        bounds.append(o.result.bound)
    bound = min(bounds, default=objective)
    return (objective - bound) / objective if objective else 0.0

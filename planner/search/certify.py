"""Whether a proven optimum also holds against KV cache sizes written into a plan.

The search prices each generation shape at some KV sizes and stands for the sizes between with
bound candidates (`kv.kv_bounds`), each allowed where the priced size above its gap does not
fit: that covers a plan that leaves `kv_cache_tokens` out (it gets the largest size that fits
where it sits). A size written in can sit below a priced size that fits. Where that priced size
keeps every sequence running, more KV is never slower (`tests/cost/test_generation.py`), so the
priced size is as fast and the size written in is covered; where it preempts, a size below it
can be faster, by at most the recomputation its preemptions cost — the bound's time, valid for
every size in the gap (`Candidate.below_preempting`). `certify` allows those bounds wherever
they fit and solves under the optimum: none under it proves that no plan of the option, whatever
KV size it writes, beats the optimum. A plan under it is a bound, not a faster plan: the sizes
in its gap are not priced (`bench/proof_campaign.py --certify` counts both).

Partial rollouts have no bound candidates (their steady-state step is not monotone in the KV
cache, `kv.kv_bounds`): their sizes written in stay unproven.
"""

from __future__ import annotations

import dataclasses

from planner.search import cpsat
from planner.search.bounds import lower_bounds, stage_floors
from planner.search.candidate import Space
from planner.search.deadline import Deadline
from planner.search.option import Outcome

ANYWHERE_MIB = 1 << 40
"""A bound's `upper_mib` that no group holds: the bound is allowed wherever it fits."""


def certify(space: Space, objective: int, deadline: Deadline) -> bool | None:
    """Whether no plan of `space`, with any KV size written in, scores under `objective` (None:
    no priced size of a rollout preempts, the priced proof covers those sizes already; False
    also when the deadline passes before the solve ends)."""
    if space.generation is None or space.partial:
        return None
    floors = stage_floors(space)
    gen, flagged, reach = space.generation.name, False, {}
    for (name, p, size), cands in space.candidates.items():
        if name != gen:
            reach[(name, p, size)] = cands
            continue
        wide = [c for c in cands if c.below_preempting]
        flagged |= bool(wide)
        # only a plan with one of these bounds is new, and only where it could get under
        near = [dataclasses.replace(c, upper_mib=ANYWHERE_MIB) for c, least in
                zip(wide, lower_bounds(space, wide, p, size, floors), strict=True)
                if least < objective]
        if near:
            reach[(name, p, size)] = near
    if not flagged:
        return None
    if not any(name == gen for name, _, _ in reach):
        return True
    # (`solve_under` prunes by the cutoff and tries the placements' bound before a model)
    under = cpsat.solve_under(dataclasses.replace(space, candidates=reach), deadline,
                              objective - 1)
    return under.choice is None and under.status in ("INFEASIBLE", cpsat.BEATEN)


def unproven(outcomes: list[Outcome], objective: int, deadline: Deadline) -> list[str]:
    """The options (described) whose plans with a KV size written in are not proven to score
    no better than `objective`, with why; [] when all are."""
    out = []
    for o in outcomes:
        if o.space.generation is None or o.result.status == "INFEASIBLE":
            continue
        if o.option.partial:
            out.append(f"{o.option.describe()}: no bound between the sizes priced")
        elif deadline.left() < cpsat.MIN_MODEL_S:
            out.append(f"{o.option.describe()}: not checked within the time limit")
        elif certify(o.space, objective, deadline) is False:
            out.append(f"{o.option.describe()}: a bound under the optimum, below a priced size "
                       "that preempts")
    return out


def kv_proof(outcomes: list[Outcome], objective: int, deadline: Deadline, proven: bool
             ) -> dict:
    """The plan's `search` fields on the KV sizes its proof covers: `kv_sizes_proven` "every
    size", "left out or priced" (`kv_sizes_unproven` says which options leave sizes written
    in unproven, `unproven`) or None (no proof: the search was cut short)."""
    unsure = unproven(outcomes, objective, deadline) if proven else []
    return {"kv_sizes_proven": (None if not proven else "left out or priced" if unsure
                                else "every size"),
            "kv_sizes_unproven": unsure}

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
KV size it writes, beats the optimum. A plan under it uses a bound: a gap of a few sizes is then
priced size by size and the option certified again (`WHOLE_GAP`); a wider one is left a bound,
not a faster plan (`bench/proof_campaign.py --certify` counts each answer).

Partial rollouts have no bound candidates (their steady-state step is not monotone in the KV
cache, `kv.kv_bounds`): their sizes written in stay unproven.
"""

from __future__ import annotations

import dataclasses

from planner.search import cpsat
from planner.search.bounds import lower_bounds, stage_floors
from planner.search.candidate import Candidate, Space
from planner.search.deadline import Deadline
from planner.search.kv import kv_ladder, kv_levels
from planner.search.option import Outcome
from planner.search.settle import own_cache
from planner.search.space import add_kv_sizes

ANYWHERE_MIB = 1 << 40
"""A bound's `upper_mib` that no group holds: the bound is allowed wherever it fits."""

WHOLE_GAP = 64
"""A gap at most this many KV sizes wide whose bound gets under the optimum is priced size by
size (it then has no bound) and the option certified again: refinement adds sizes close to
ones it priced (the sizes that fit beside each context), so a gap between two can be a few
tokens wide."""

ROUNDS = 4  # certifications of one option, each after pricing a narrow gap whole


def certify(space: Space, objective: int, deadline: Deadline) -> str:
    """Whether a plan of `space` with a KV size written in can score under `objective`:
    "covered" (no priced size preempts: the priced proof covers those sizes), "proven" (none
    can), "bound" (a bound gets under it: not proven) or "faster" (a size written in, priced,
    scores under it). Sizes it prices go into a copy of the space's cache
    (`settle.own_cache`), not into the option's space."""
    if space.generation is None or space.partial:
        return "covered"
    gen, added = space.generation.name, set()
    for _ in range(ROUNDS):
        reach, flagged = _reach(space, objective, added)
        if not flagged:
            return "proven" if added else "covered"
        if not any(name == gen for name, _, _ in reach):
            return "proven"
        # (`solve_under` prunes by the cutoff and tries the placements' bound before a model)
        under = cpsat.solve_under(dataclasses.replace(space, candidates=reach), deadline,
                                  objective - 1)
        if under.choice is None:
            return "proven" if under.status in ("INFEASIBLE", cpsat.BEATEN) else "bound"
        c = under.choice.candidate[gen]
        if not c.bound:
            return "faster"
        p, g = under.choice.pool(under.choice.slot[gen]), under.choice.sizes[
            under.choice.slot[gen]]
        sizes = _gap(space, p, c)
        if len(sizes) > WHOLE_GAP or deadline.left() < cpsat.MIN_MODEL_S:
            return "bound"
        if not added:
            space = own_cache(space)
        added |= sizes
        add_kv_sizes(space, p, g, c.layout, sizes)
    return "bound"


def _reach(space: Space, objective: int, added: set[int]) -> tuple[dict, bool]:
    """`space`'s candidates with only the generation ones a plan with a size written in can
    use to get under `objective` — the bounds below a priced size that preempts, allowed
    wherever they fit, and the sizes `certify` priced (`added`) — and whether any such bound
    is left at all."""
    floors = stage_floors(space)
    gen, flagged, reach = space.generation.name, False, {}
    for (name, p, size), cands in space.candidates.items():
        if name != gen:
            reach[(name, p, size)] = cands
            continue
        wide = [c for c in cands if c.below_preempting]
        flagged |= bool(wide)
        near = [dataclasses.replace(c, upper_mib=ANYWHERE_MIB) for c, least in
                zip(wide, lower_bounds(space, wide, p, size, floors), strict=True)
                if least < objective]
        near += [c for c in cands if not c.bound and int(c.layout.kv_cache_tokens) in added]
        if near:
            reach[(name, p, size)] = near
    return reach, flagged


def _gap(space: Space, p: int, c: Candidate) -> set[int]:
    """The KV sizes bound candidate `c` stands for: from its own up to the next size of the
    ladder, that one included when it is not priced."""
    low = int(c.layout.kv_cache_tokens)
    ps = space.pools[p]
    end = min(kv for kv in kv_ladder(space, ps, c.layout) if kv >= low)
    return set(range(low, end if end in kv_levels(space, ps, c.layout) else end + 1))


def unproven(outcomes: list[Outcome], objective: int, deadline: Deadline) -> list[str]:
    """The options (described) whose plans with a KV size written in are not proven to score
    no better than `objective`, with why; [] when all are."""
    why = {"bound": "a bound under the optimum, below a priced size that preempts",
           "faster": "a KV size written in prices under the optimum"}
    out = []
    for o in outcomes:
        if o.space.generation is None or o.result.status == "INFEASIBLE":
            continue
        if o.option.partial:
            out.append(f"{o.option.describe()}: no bound between the sizes priced")
        elif deadline.left() < cpsat.MIN_MODEL_S:
            out.append(f"{o.option.describe()}: not checked within the time limit")
        elif (held := certify(o.space, objective, deadline)) in why:
            out.append(f"{o.option.describe()}: {why[held]}")
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

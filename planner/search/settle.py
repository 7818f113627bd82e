"""Partial-rollout plans given the KV cache that fits where their rollout sits.

Partial rollouts have no bound candidates for the KV sizes between those the search prices
(their steady-state step is not monotone in the KV cache, `kv.kv_bounds`), so their optimum is
one over the sizes priced: the ladder's largest (`kv.PARTIAL_KV_LEVELS`). The size that fits
where a plan's rollout sits — beside what else its group holds, the size `evaluate` gives the
plan with `kv_cache_tokens` left out — is usually between them, and can be faster: GRPO
Qwen2.5-14B on 8 A100-80GB, staleness 1 with partial rollouts, by 8.5%; on 4 H100s, with the
state offloaded during generation, 6.2%, which beat the plan the search chose then
(bench/proof_campaign.py, with the two largest priced).

So a proven optimum's canonical plan (a function of its space and optimum, whichever plan the
solver found) has its rollout priced at that size, and the option is solved again, while that
adds a size (`refine.refine`): then that plan with its KV cache left out prices no faster.
`plan` settles every partial-rollout option it proved optimal (the best, its ties and the
next ones it ranks: a set the search order fixes) and ranks them again; a what-if, the options
tying its least objective (`solve._best_of`: which others it proves depends on timing). An
option's sizes are priced in a cache of its own, so what the other options' spaces hold does
not depend on whether this ran before them. Options not proven optimal (beaten under a
cutoff) are not settled: the proof does not cover their plans with the KV cache left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from planner.search import cpsat, refine
from planner.search.candidate import Space
from planner.search.deadline import Deadline
from planner.search.host import counted, host_may_bind
from planner.search.option import Outcome


def settle(space: Space, found: cpsat.Result, deadline: Deadline, workers: int
           ) -> tuple[Space, cpsat.Result]:
    """The space (with the sizes priced) and the pinned result of a proven optimum `found`
    of a partial-rollout `space` once its canonical plan's rollout has the KV cache that fits
    where it sits priced (module docstring); anything else as it is."""
    if not space.partial or space.generation is None or found.status != "OPTIMAL":
        return space, found
    space = _own_cache(space)
    result = cpsat.pin(space, found, deadline)
    for _ in range(cpsat.MAX_KV_ROUNDS):
        if (result.status != "OPTIMAL" or deadline.left() < cpsat.MIN_MODEL_S
                or not refine.refine(space, result.choice, neighbours=False)):
            break
        result = cpsat.solve(space, deadline, workers, seeds=[result.choice])
    if host_may_bind(space, result):  # the sizes priced here make plans `_search` did not check
        space = counted(space, deadline)
        return settle(space, cpsat.solve(space, deadline, workers, pin=False), deadline, workers)
    return space, result


def settle_options(outcomes: list[Outcome], deadline: Deadline, workers: int,
                   pinned: Callable[[Outcome], None]) -> None:
    """`settle` each proven partial-rollout optimum of `outcomes`, in place, after `pinned`
    gives it its canonical plan (a pin under way beside the search is used)."""
    for o in outcomes:
        if o.option.partial and o.result.status == "OPTIMAL" and o.space.generation is not None:
            pinned(o)
            o.space, o.result = settle(o.space, o.result, deadline, workers)


def _own_cache(space: Space) -> Space:
    """`space` with copies of its candidates and of what the cache it shares with the other
    options' spaces says they hold (`PriceCache.kept`, `kv_added`), to price more sizes in. The
    rest of the cache (rollouts, the sizes that fit a room) is a function of its keys: shared."""
    c = space.cache
    cache = dataclasses.replace(c, kept=dict(c.kept),
                                kv_added={k: set(v) for k, v in c.kv_added.items()})
    return dataclasses.replace(space, candidates=dict(space.candidates), cache=cache)

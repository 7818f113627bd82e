"""Every KV cache size in the proof: the bound candidates an optimum uses, refined.

The space prices each generation shape at some KV sizes and stands for the sizes between
with bound candidates (`kv.py`), so an optimum over it is a lower bound over every KV size.
When that optimum uses a bound candidate, the generation it stands for gets the largest KV
cache that fits where it sits — beside its group's resident state, by the one memory rule
(`planner.cost.fit`) that `evaluate` applies and whose size `evaluate` gives a plan that
leaves `kv_cache_tokens` out. That size is priced (or, when it lies past the gap, the middle
of the gap) and the model solved again (`cpsat.solve`), until the optimum is a priced plan:
then no KV size of any layout does better.
"""

from __future__ import annotations

import dataclasses

from planner.cost.fit import kv_room_mib, kv_tokens_within
from planner.cost.rollout_stage import kv_need_mib, useful_kv_tokens
from planner.plan import Layout
from planner.search.choice import Choice, loads
from planner.search.kv import kv_key, kv_levels
from planner.search.space import Space, add_kv_sizes, price_layout

MAX_NEIGHBOURS = 16
"""KV sizes `refine` prices beside the one it was asked for, at most: each saves a solve when
the solver would have asked for it next, and costs a rollout when not. Chosen over 4, 16 and
32 in one-off runs of `bench/search_speed.py`'s scenarios on the 2-core machine: PPO with four
70B roles on 8 H100s 1.6 s (2.3, 2.0, 2.0), the shipped GRPO example on one node 0.43 s (0.42,
0.47, 0.47), the others within noise. Raised from 8 on 2026-12-03, when forwards gained
sequence parallelism and their candidates changed the neighbours: at 8 the shipped example on
one node took a fifth refine round (its search 0.46 s against 0.37 s before; at 16, 0.38 s; at
4, 0.42 s), the 1,024-GPU PPO case and PPO's four 70B roles on 8 H100s within noise (one-off,
medians of 3–6 fresh processes)."""


def uses_bound(space: Space, ch: Choice) -> bool:
    gen = space.generation
    return gen is not None and ch.candidate[gen.name].bound


def kv_where_it_sits(space: Space, ch: Choice) -> int | None:
    """The largest KV cache the generation of `ch` gets on its group beside what else is
    resident there, up to what its replicas can use (None: not one longest sequence)."""
    gen = space.generation
    assert gen is not None
    k = ch.slot[gen.name]
    return kv_for_room(space, ch.pool(k), ch.candidate[gen.name].layout, kv_room(space, ch))


def kv_room(space: Space, ch: Choice) -> int:
    """MiB per GPU the generation of `ch` has for its transient need (KV cache included)."""
    gen = space.generation
    assert gen is not None
    k = ch.slot[gen.name]
    here = loads(space, ch, k)
    mine = next(x for x in here if x.generation)
    return kv_room_mib(here, mine, space.pools[ch.pool(k)].budget_mib, space.swap and k == 0)


def kv_for_room(space: Space, p: int, layout: Layout, room: int) -> int | None:
    """The largest KV cache of generation `layout` on pool `p` whose transient need is within
    `room` MiB, up to what its replicas can use (None: not one longest sequence)."""
    ps = space.pools[p]
    key = (kv_key(space, ps, layout), room)
    if key not in space.cache.kv_fits:
        sc = ps.scenario
        longest = sc.workload.prompt_len + int(sc.response_lengths.max())
        space.cache.kv_fits[key] = kv_tokens_within(
            kv_need_mib(sc, layout, space.overlap_sync), room, longest,
            useful_kv_tokens(sc, layout, space.partial))
    return space.cache.kv_fits[key]


def refine(space: Space, ch: Choice, neighbours: bool = True) -> bool:
    """Price the KV size that fits where the generation of `ch` sits — `ch` uses a bound
    candidate, so the size lies inside its gap — and, in the same pass (unless not
    `neighbours`), the sizes it would get beside each other candidate of a task it shares its
    group with (the contexts the solver would otherwise visit one solve at a time; at most
    `MAX_NEIGHBOURS`). False when there is nothing new to price."""
    gen = space.generation
    assert gen is not None
    k = ch.slot[gen.name]
    p, g = ch.pool(k), ch.sizes[k]
    layout = ch.candidate[gen.name].layout
    priced = set(kv_levels(space, space.pools[p], layout))
    fit = kv_where_it_sits(space, ch)
    if fit is None:
        return False
    if fit in priced:  # priced since this space's candidates were, if they lack it (another
        # option's space sharing its cache priced it): they are priced again, with it
        before = _sizes(space, p, space.candidates.get((gen.name, p, g), []))
        add_kv_sizes(space, p, g, layout, set())
        return before != _sizes(space, p, space.candidates.get((gen.name, p, g), []))
    sizes = {fit}
    for t in (t for t in space.tasks if neighbours and t is not gen and ch.slot[t.name] == k):
        for c in space.candidates.get((t.name, p, g), []):
            if len(sizes) > MAX_NEIGHBOURS:
                break
            near = dataclasses.replace(ch, candidate={**ch.candidate, t.name: c})
            kv = kv_for_room(space, p, layout, kv_room(space, near))
            if kv is not None and kv not in priced:
                sizes.add(kv)
    add_kv_sizes(space, p, g, layout, sizes)
    return True


def _sizes(space: Space, p: int, cands: list) -> set[tuple]:
    """The KV sizes and gaps a group's generation candidates on pool `p` stand for, by what
    their sizes are priced under (`kv_key`)."""
    return {(kv_key(space, space.pools[p], c.layout), c.layout.kv_cache_tokens, c.bound)
            for c in cands}


def realize(space: Space, ch: Choice) -> Choice:
    """`ch` as a plan: a bound generation candidate replaced by its layout with the KV cache
    that fits where it sits (`kv_where_it_sits`), priced."""
    if not uses_bound(space, ch):
        return ch
    gen = space.generation
    assert gen is not None
    k = ch.slot[gen.name]
    layout = ch.candidate[gen.name].layout.model_copy(
        update={"kv_cache_tokens": kv_where_it_sits(space, ch)})
    return dataclasses.replace(ch, candidate={**ch.candidate,
                                              gen.name: price_layout(space, gen, ch.pool(k),
                                                                     layout)})


def priced_only(space: Space) -> Space:
    """`space` without its bound candidates: plans only."""
    return dataclasses.replace(space, candidates={
        key: kept for key, cands in space.candidates.items()
        if (kept := [c for c in cands if not c.bound])})


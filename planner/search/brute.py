"""Brute force over exactly the space CP-SAT proves its optimum over: every slot-size tuple,
placement and priced candidate, each generation also with the KV cache that fits where it
sits (`refine.kv_where_it_sits`: the size `evaluate` gives a plan that leaves it out, and the
size the solver refines its bound candidates to), scored by `choice.score` under
`choice.valid`, `choice.fits` and (gpus objective) `choice.meets_target`. Exponential: for
small instances and for proving the solver's answers in the tests."""

from __future__ import annotations

import time
from itertools import product

from planner.search.candidate import Candidate
from planner.search.choice import Choice, fits, meets_target, score, valid
from planner.search.follow import agree
from planner.search.refine import kv_for_room, kv_room
from planner.search.space import Space, price_layout


def enumerate_choices(space: Space):
    """Every valid Choice (slot sizes with 0 = unused, placements, priced candidates: bound
    candidates stand for KV sizes, they are no plan)."""
    shapes = space.shapes  # (pool, size); (0, 0) is an unused slot
    options = [shapes] + [[(0, 0), *shapes]] * (space.slots - 1)
    names = [t.name for t in space.tasks]
    for chosen in product(*options):
        on = tuple(p for p, _ in chosen)
        sizes = tuple(s for _, s in chosen)
        for slots in product(range(space.slots), repeat=len(names)):
            slot = dict(zip(names, slots, strict=True))
            if any(sizes[k] == 0 for k in slots):
                continue
            cands = [[c for c in space.candidates.get((n, on[slot[n]], sizes[slot[n]]), [])
                      if not c.bound] for n in names]
            skeleton = Choice(sizes, slot, {}, on)
            if not all(cands) or not valid(space, skeleton):
                continue
            for picks in product(*cands):
                ch = Choice(sizes, slot, dict(zip(names, picks, strict=True)), on)
                if agree(space.caps, ch.candidate):  # followers as trainers (`follow.py`)
                    yield ch


def solve(space: Space, time_limit_s: float | None = None
          ) -> tuple[int | None, Choice | None, int]:
    """(best score, a best choice, choices scored) — score None when nothing fits. Raises
    TimeoutError after `time_limit_s` seconds."""
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    best, arg, count = None, None, 0
    filled = _Filled(space)
    for each in enumerate_choices(space):
        for ch in (each, filled(each)):
            count += 1
            if deadline is not None and not count % 10_000 and time.monotonic() > deadline:
                raise TimeoutError(f"brute force stopped after {time_limit_s:g} s, "
                                   f"{count:,} choices")
            if ch is None:
                continue
            value = score(space, ch)  # first: most choices lose to the best before their fit
            if (best is None or value < best) and fits(space, ch) and meets_target(space, ch):
                best, arg = value, ch
    return best, arg, count


class _Filled:
    """A choice with its generation's KV cache the largest that fits where it sits
    (`refine.kv_where_it_sits`; None: no generation, or that size is the choice's own); each
    size found once per (layout, room) and priced once per layout."""

    def __init__(self, space: Space):
        self.space = space
        self.filled: dict[tuple, Candidate | None] = {}  # by (pool, candidate's id, room)
        self.sizes: dict[tuple, int | None] = {}
        self.priced: dict[tuple, Candidate] = {}

    def __call__(self, ch: Choice) -> Choice | None:
        gen = self.space.generation
        if gen is None:
            return None
        c = ch.candidate[gen.name]
        at = (ch.pool(ch.slot[gen.name]), id(c), kv_room(self.space, ch))
        if at not in self.filled:  # the candidates outlive the enumeration: ids stay theirs
            self.filled[at] = self._fill(at[0], c.layout, at[2])
        filled = self.filled[at]
        return None if filled is None else Choice(
            ch.sizes, ch.slot, {**ch.candidate, gen.name: filled}, ch.pools)

    def _fill(self, p: int, layout, room: int) -> Candidate | None:
        at = (p, layout.model_copy(update={"kv_cache_tokens": None}), room)
        if at not in self.sizes:
            self.sizes[at] = kv_for_room(self.space, *at)
        kv = self.sizes[at]
        if kv is None or kv == layout.kv_cache_tokens:
            return None
        key = (p, layout.model_copy(update={"kv_cache_tokens": kv}))
        if key not in self.priced:
            self.priced[key] = price_layout(self.space, self.space.generation, p, key[1])
        return self.priced[key]

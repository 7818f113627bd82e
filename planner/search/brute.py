"""Brute force over exactly the CP-SAT model's space: every slot-size tuple, placement and
candidate choice, scored by `choice.score` under `choice.valid`, `choice.fits` and (gpus
objective) `choice.meets_target`. Exponential:
for small instances and for proving the solver's answers in the tests."""

from __future__ import annotations

import time
from itertools import product

from planner.search.choice import Choice, fits, meets_target, score, valid
from planner.search.space import Space


def enumerate_choices(space: Space):
    """Every valid Choice (slot sizes with 0 = unused, placements, candidates)."""
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
            cands = [space.candidates.get((n, on[slot[n]], sizes[slot[n]]), []) for n in names]
            skeleton = Choice(sizes, slot, {}, on)
            if not all(cands) or not valid(space, skeleton):
                continue
            for picks in product(*cands):
                yield Choice(sizes, slot, dict(zip(names, picks, strict=True)), on)


def solve(space: Space, time_limit_s: float | None = None
          ) -> tuple[int | None, Choice | None, int]:
    """(best score, a best choice, choices scored) — score None when nothing fits. Raises
    TimeoutError after `time_limit_s` seconds."""
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    best, arg, count = None, None, 0
    for ch in enumerate_choices(space):
        count += 1
        if deadline is not None and not count % 10_000 and time.monotonic() > deadline:
            raise TimeoutError(f"brute force stopped after {time_limit_s:g} s, {count:,} choices")
        if not fits(space, ch) or not meets_target(space, ch):
            continue
        value = score(space, ch)
        if best is None or value < best:
            best, arg = value, ch
    return best, arg, count

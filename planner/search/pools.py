"""The search over heterogeneous pools: what each pool offers the solvers.

A slot of the search chooses a *shape* — a pool and a group size on it — instead of a size;
candidates are priced per (task, pool, size) on the pool's own view of the scenario
(`Scenario.on_pool`), so one price per candidate stays true. Per pool the slots' sizes sum to
at most its GPUs, memory budgets are its GPU's, and the cost objective weighs each GPU by its
pool's price (`price_weights`: exact integers, 1 with one pool). The weight refit from the
actor's training group (slot 0) to a rollout group depends on both pools: each candidate carries
its side priced for the other group on every pool (`Candidate.refit_ms`) — within a pool its own
links, across pools the inter-pool link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce

from planner.specs.scenario import Scenario


@dataclass(frozen=True)
class PoolSpace:
    """One pool as the solvers see it (index `p` in `Space.pools`)."""

    name: str
    scenario: Scenario  # the scenario on this pool alone: what its candidates are priced with
    sizes: list[int]  # group sizes offered on it
    total_gpus: int
    budget_mib: int  # per GPU, after the runtime reserve
    host_budget_mib: int  # CPU memory per GPU for offloaded state (its share of the node)
    swap_q: int  # ms per 1000 MiB per GPU moved to CPU memory and back (swap)
    weight: int  # cost objective: this pool's price per GPU as an exact integer weight


Shape = tuple[int, int]  # (pool index, group size)


def price_weights(sc: Scenario) -> list[int]:
    """Each pool's price per GPU-hour as integers in the same ratio, exactly: the decimal
    prices as fractions over their common denominator, divided by the numerators' gcd — [1]
    with one pool (ms × GPUs, as before pools), [1, 1] at equal prices. A pool without a price
    (only under the time or gpus objectives, which ignore it) weighs 1."""
    pools = sc.pool_list
    prices = [p.cluster.price for p in pools]
    if len(pools) == 1 or any(x is None for x in prices):
        return [1] * len(pools)
    exact = [Fraction(repr(float(x))) for x in prices]  # the decimal as written, not binary
    scale = reduce(math.lcm, (f.denominator for f in exact), 1)
    ints = [int(f * scale) for f in exact]
    g = reduce(math.gcd, ints)
    return [i // g for i in ints]


def all_shapes(pools: list[PoolSpace]) -> list[Shape]:
    """Every (pool, size) a slot may take, pool by pool, sizes ascending."""
    return [(p, s) for p, pool in enumerate(pools) for s in pool.sizes]


def slots_ordered(sizes: tuple[int, ...], on: tuple[int, ...]) -> bool:
    """Symmetry breaking among the slots after slot 0 (interchangeable): pools in index order,
    and within one pool non-increasing sizes (with one pool: non-increasing sizes)."""
    return all(not sizes[k + 1] or on[k] < on[k + 1]
               or (on[k] == on[k + 1] and sizes[k] >= sizes[k + 1])
               for k in range(1, len(sizes) - 1))

"""The integer ranges of a CP-SAT model (`model.py`): the horizon that bounds every iteration
time it holds, and the check that none of its terms can overflow the solver's integers."""

from __future__ import annotations

from planner.errors import InputError
from planner.search.candidate import FUSION_SCALE, SWAP_SCALE
from planner.search.space import GPU_WEIGHT, Space


def horizon_of(sp: Space) -> int:
    """An upper bound of any iteration's ms: every task's slowest candidate in sequence."""
    # python ints throughout: a numpy int64 here would wrap silently instead of growing
    horizon = sum(max((int(sum(c.time_ms.values())) + max(map(int, c.refit_ms), default=0)
                       for c in cs), default=0)
                  for cs in sp.candidates.values()) + sp.controller_ms + 1
    if sp.swap:  # the swap of everything on slot 0, rounded up
        horizon += sum(max(int(c.persistent_mib) for c in cs) for cs in sp.candidates.values()) \
            * max(pool.swap_q for pool in sp.pools) // SWAP_SCALE + 1
    return horizon


def most_weighted(sp: Space) -> int:
    """The most price-weighted GPUs a choice can use (every pool full)."""
    return sum(pool.weight * pool.total_gpus for pool in sp.pools)


# CP-SAT checks that no linear expression can leave int64 (else MODEL_INVALID, or an
# OverflowError when a coefficient is built); 2^62 leaves it a factor of two for its own sums.
SOLVER_INT_LIMIT = 2**62


def check_range(sp: Space, horizon: int) -> None:
    """Refuse (InputError) a space whose largest integer terms could overflow the solver:
    the iteration horizon in ms times the largest factor it meets (GPUs in the cost
    objective, staleness + 1, the fusion scale), the gpus objective, and the swap's MiB × its
    ms-per-MiB. The input bounds (planner/specs/bounds.py) keep real inputs far below."""
    held = sum(max((int(c.persistent_mib) for c in cs), default=0)
               for cs in sp.candidates.values())
    terms = {
        "iteration horizon × GPUs": horizon * max(most_weighted(sp), 1),
        "iteration horizon × (staleness + 1)": horizon * (sp.staleness + 1),
        "iteration horizon × fusion scale": horizon * FUSION_SCALE * 2,
        "GPUs × GPU weight": sp.total_gpus * GPU_WEIGHT + horizon,
        "swapped MiB × swap time": held * max(max(p.swap_q for p in sp.pools), 1)
        + SWAP_SCALE * horizon,
        "memory (MiB)": held + max(p.budget_mib + p.host_budget_mib for p in sp.pools),
    }
    what, worst = max(terms.items(), key=lambda kv: kv[1])
    if worst > SOLVER_INT_LIMIT:
        raise InputError(
            f"the search is too large for the solver's integers: {what} reaches {worst:.3g}, "
            f"above {SOLVER_INT_LIMIT:.3g} (the slowest layout takes {horizon / 3.6e6:,.0f} "
            "hours per step); use fewer prompts, shorter sequences, fewer ppo_epochs, a lower "
            "max_staleness or fewer GPUs, or check the hardware profile's rates")

"""Whether host memory may bind where an option's optimum is proven: its space is pruned
without counting host memory, which is exact only where it cannot.

`pareto` keeps the candidates of a task that no other beats or ties in every number of
`Candidate.key`, and host memory is not among those numbers unless `Space.host_front`: a
candidate that offloads can stand for one that offloads less and is otherwise no better.
Counting it always kept 855 more training candidates on the 1,024-GPU PPO case
(`bench/search_speed.py`), about a second of its search. Not counting it is exact below a
score θ where the host cannot run short:

Take any plan Y, from every candidate priced, scoring at most θ. Put in place of each of its
candidates that pruning dropped one kept that beats or ties it in every number of the key (the
same task, pool, size and framework label; one exists, by transitivity): the plan Y' scores no
more, fits the GPUs as Y does, and each of its candidates has a lower bound
(`bounds.lower_bound`) of at most θ. If, for each pool, the most host memory any such kept
candidate of each task holds, summed over the tasks (and the co-located state a swap moves
out, at most the GPU budget), is within the pool's share of host memory, Y' fits the host too:
it is a plan of the pruned space scoring at most θ.

So an option proven at θ — its optimum, or the cutoff it is beaten under (no plan scores at
most it), or infeasible (θ unbounded) — is proven over every candidate priced when
`host_may_bind` says no. When it says yes the option is priced again with host memory in the
key and solved again (`solve._search`; and after a partial-rollout optimum is settled, whose
KV sizes priced make new plans: `settle.settle`). On the 1,024-GPU PPO case it says no for
every option (its candidates within the optima's bounds hold 146–220 of 256 GiB per GPU);
GRPO Qwen2.5-7B on 2 A100-40GB given 480 GiB of host memory (60 per GPU) is one where it says
yes, and the second solve is 0.9% faster (`tests/test_host_front.py`).
"""

from __future__ import annotations

from planner.search import cpsat
from planner.search.bounds import lower_bounds, stage_floors
from planner.search.candidate import Space
from planner.search.choice import generation_slot
from planner.search.deadline import Deadline
from planner.search.space import build_space


def host_may_bind(space: Space, result: cpsat.Result) -> bool:
    """Whether a plan at most as good as what `result` proves of `space` (module docstring)
    may need a candidate its pruning dropped for host memory. False when it proves nothing
    (a plan found short of the proof) or the space counts host memory already."""
    if space.host_front or not any(pool.host_budget_mib for pool in space.pools):
        return False
    if result.status == "OPTIMAL":
        theta = result.objective
    elif result.status == cpsat.BEATEN:
        theta = result.bound - 1
    elif result.status == "INFEASIBLE" and generation_slot(space) is not None:
        theta = None  # (an option whose rules contradict has no plan, whatever is priced)
    else:
        return False
    floors = stage_floors(space)
    most: dict[tuple[str, int], int] = {}  # (task, pool) → the most host MiB within θ
    for (name, p, size), cands in space.candidates.items():
        bounds = lower_bounds(space, cands, p, size, floors)
        within = [c.host_mib for c, lb in zip(cands, bounds, strict=True)
                  if theta is None or lb <= theta]
        most[name, p] = max([most.get((name, p), 0), *within])
    need = [pool.budget_mib if space.swap else 0 for pool in space.pools]
    for (_, p), mib in most.items():
        need[p] += mib
    return any(n > pool.host_budget_mib for n, pool in zip(need, space.pools, strict=True))


def counted(space: Space, deadline: Deadline) -> Space:
    """The option of `space` priced again (from its cache where it can), its candidates kept
    counting host memory: exact as it stands."""
    return build_space(space.scenario, staleness=space.staleness, fusion=space.fusion,
                       shared=space.shared, swap=space.swap, overlap_sync=space.overlap_sync,
                       partial=space.partial, cache=space.cache, deadline=deadline,
                       caps=space.caps, host_front=True)

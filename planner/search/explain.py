"""The search's explanation of a plan: alternatives named by what differs from the chosen plan
(ties merged), whether memory binds, and why GPUs are left idle."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.search.layouts import EVERY_GPU_COUNT, EVERY_NODE_COUNT
from planner.search.space import Space
from planner.specs.hardware import gpu_count
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.search.option import Outcome

BINDING_MARGIN = 0.05
"""Memory "binds" when the fullest GPU's peak is within this share of its capacity: a plan so
close to the limit is shaped by it (a larger batch, less sharding would not fit); further below,
memory did not decide the plan and the view says it does not bind."""
MAX_ALTERNATIVES = 3  # strictly worse options listed
MAX_TIES_NAMED = 3  # tying options named in the merged line; the rest counted


def memory_binds(peak_gib: float, capacity_gib: float, headroom_gib: float = 0.0) -> bool:
    """Whether memory binds: the peak within `BINDING_MARGIN` of what a plan may use, the
    capacity less the memory headroom."""
    return peak_gib >= (1 - BINDING_MARGIN) * (capacity_gib - headroom_gib)


def alternatives(best: Outcome, ranked: list[Outcome],
                 delta: Callable[[Space, int, int], float]) -> list[dict]:
    """The next-best options' plans, each named by what it changes from the chosen one, with
    its delta against it; options that tie the chosen plan's objective (a flag that changes
    nothing) merged into one entry marked `ties`."""
    ties, worse = _ties_and_worse(best, ranked)
    out = []
    if ties:
        named = [o.option.versus(best.option) for o in ties[:MAX_TIES_NAMED]]
        more = len(ties) - len(named)
        what = "; ".join(named) + (f"; and {more} more" if more else "")
        out.append({"option": what, "objective_ms": best.result.objective, "delta": 0.0,
                    "ties": True, "options": len(ties),
                    "groups": [s for s in ties[0].result.choice.sizes if s],
                    "summary": f"ties the chosen plan (the same objective): {what}"})
    for o in worse:
        d = delta(best.space, o.result.objective, best.result.objective)
        what = o.option.versus(best.option)
        out.append({"option": what, "objective_ms": o.result.objective, "delta": d,
                    "ties": False, "groups": [s for s in o.result.choice.sizes if s],
                    "summary": f"{what}: {d:+.1%}"})
    return out


def _ties_and_worse(best: Outcome, ranked: list[Outcome]) -> tuple[list[Outcome], list[Outcome]]:
    """The options tying `best` and the `MAX_ALTERNATIVES` next, in rank order."""
    rest = ranked[1:]
    ties = [o for o in rest if o.result.objective == best.result.objective]
    worse = [o for o in rest if o.result.objective != best.result.objective][:MAX_ALTERNATIVES]
    return ties, worse


def shown(ranked: list[Outcome]) -> list[Outcome]:
    """The options whose plans the plan shows: the best, the first tie (its groups) and the
    alternatives (`alternatives`); the other options' plans are never read."""
    if not ranked:
        return []
    ties, worse = _ties_and_worse(ranked[0], ranked)
    return [ranked[0], *ties[:1], *worse]


def spans(sizes: list[int]) -> str:
    """Sorted group sizes as runs: '1–8, 16, 32'."""
    runs: list[list[int]] = []
    for n in sizes:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def idle_gpus(sc: Scenario, space: Space, used: int) -> str | None:
    """Why a plan leaves GPUs of the cluster idle (None when it uses them all): the group sizes
    the search offers, the tasks with no layout on the whole cluster, and the objective."""
    total = sc.total_gpus
    if used >= total:
        return None
    menu = "; ".join((f"{pool.name}: " if len(space.pools) > 1 else "") + spans(pool.sizes)
                     for pool in space.pools)
    why = [f"{used} of {gpu_count(total)} used: the search's group sizes here are {menu} "
           f"(every size on up to {EVERY_GPU_COUNT} GPUs; beyond, every count within a node "
           f"and every multiple of a node on up to {EVERY_NODE_COUNT} nodes, else the "
           "power-of-two multiples and their complements to the whole cluster)"]
    whole = [(p, pool.total_gpus) for p, pool in enumerate(space.pools)]
    lacking = [t.words for t in space.tasks
               if not any(space.candidates.get((t.name, *shape)) for shape in whole)]
    if lacking and space.complete:
        on = f"all {total}" if len(whole) == 1 else "a whole pool's"
        why.append(f"on {on} GPUs {', '.join(lacking)} "
                   f"{'has' if len(lacking) == 1 else 'have'} no layout that fits (tp, pp "
                   "and cp are powers of two and dividing the model; every data-parallel rank "
                   "needs an equal share of the step's sequences)")
    elif not space.complete:
        why.append("the time limit cut the pricing short before every size was priced")
    why.append(f"no choice on more GPUs scored better under the {sc.search.objective} objective")
    return "; ".join(why)


def cutoff(optima: list[int], worse: int) -> int | None:
    """The score above which an option is none of the best, its ties and the `worse` next in
    the ranking, given other options' proven `optima` (None: no such score yet). With the
    `worse`-th optimum above the least as the cutoff, an option scoring more ranks after the
    least (or a later, better option) and those `worse`, whatever the options still to come;
    one scoring exactly the cutoff may still rank before an equal one (`_feasible`)."""
    least = min(optima, default=None)
    above = sorted(o for o in optima if o > least) if least is not None else []
    if least is None or len(above) < worse:
        return None
    return above[worse - 1] if worse else least

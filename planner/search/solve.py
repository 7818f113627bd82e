"""`plan`: search every inter-model option with CP-SAT, price the winner with the cost model,
and explain it (bottleneck, binding memory, bounds, alternatives, what-ifs, infeasibility).

Inter-model options are enumerated around the solver: staleness 0…max_staleness, inter-stage
fusion on/off, co-located state offloaded during generation on/off (when the profile gives
host memory), shared actor–critic when allowed. Each is one CP-SAT solve over group sizes,
placement and layouts (`model.py`, solved by `cpsat.py`), its candidates first cut by a
greedy incumbent's score (`bounds.py`, optimum unchanged); the best is re-priced by
`planner.cost.iteration.evaluate` (the same functions the candidates were priced with, at full
precision). A proven optimum
gives the same plan whatever the number of CP-SAT workers (`model.Model.solve`). The options
are solved likeliest-best first, each under the cutoff the optima proven so far set and seeded
with their plans (`_search`): the options the plan shows get their exact optima and plans,
the others are settled sooner (BEATEN), and the answer is that of solving each on its own.

One `Deadline` bounds it all (`deadline.py`): pricing stops at it, each option's solve gets an
even share of what is left, the what-ifs and the fewest-GPUs diagnosis what remains after; an
option CP-SAT could not solve in its share answers with its greedy incumbent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from planner.cost.constants import GIB
from planner.cost.iteration import evaluate
from planner.cost.legality import placement_of
from planner.cost.report import to_plan
from planner.cost.step import tokens_per_step
from planner.errors import InfeasibleError, OutOfTime
from planner.plan import Group, InterModel, Layout, Plan, PlanInput
from planner.search import aside, cpsat, last, model
from planner.search.bounds import space_lower_bound
from planner.search.candidate import MIB, MS
from planner.search.certify import kv_proof, proof
from planner.search.choice import Choice
from planner.search.deadline import Deadline
from planner.search.explain import (
    MAX_ALTERNATIVES,
    alternatives,
    cutoff,
    idle_gpus,
    memory_binds,
)
from planner.search.host import counted, host_may_bind
from planner.search.layouts import EVERY_GPU_COUNT, WHAT_IF_EVERY_GPU_COUNT, slot_sizes
from planner.search.option import Option, Outcome, options
from planner.search.pins import collect, pin_beside, pin_shown
from planner.search.scope import framework_caps, size_proof
from planner.search.settle import settle_options
from planner.search.space import GPU_WEIGHT, PriceCache, Space, build_space
from planner.specs.hardware import gpu_count
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.frameworks import Capabilities

Progress = Callable[[str], None]  # told what the search is doing, for a status line
TASK_LAYOUT = {"generation": "generation", "training": "training", "forward": "assessment"}
PRICING_SHARE = 0.9
"""Pricing the options may take this share of the time left: every option's solve, even a
greedy one once the deadline has passed, and the report need the rest."""


def to_plan_input(space: Space, ch: Choice, option: Option) -> PlanInput:
    """A solver choice as a plan: groups g0…, a layout per (role, stage), inter-model flags."""
    names = {k: f"g{k}" for k, size in enumerate(ch.sizes) if size}
    pool = {k: space.pools[ch.pool(k)].name if len(space.pools) > 1 else None for k in names}
    roles: dict[int, list[str]] = {k: [] for k in names}
    layouts: dict[str, dict[str, Layout]] = {}
    for t in space.tasks:
        k = ch.slot[t.name]
        if t.role not in roles[k]:
            roles[k].append(t.role)
        lay = ch.candidate[t.name].layout.model_copy(update={"group": names[k]})
        layouts.setdefault(t.role, {})[TASK_LAYOUT[t.kind]] = lay
    groups = [Group(name=names[k], gpus=ch.sizes[k], roles=roles[k], pool=pool[k])
              for k in names]
    placement = placement_of({g.name: set(g.roles) for g in groups})
    return PlanInput(groups=groups, layouts=layouts, inter_model=InterModel(
        placement=placement, inter_stage_fusion=option.fusion, staleness=option.staleness,
        shared_actor_critic=option.shared, offload_during_generation=option.swap,
        overlap_weight_sync=option.overlap_sync, partial_rollout=option.partial))


def _search(sc: Scenario, opts: list[Option], deadline: Deadline, workers: int,
            cache: PriceCache | None = None, progress: Progress | None = None,
            what: str = "inter-model option", caps: Capabilities | None = None,
            worse: int = MAX_ALTERNATIVES, priced: Callable[[], None] | None = None,
            solved: Callable[[Outcome, list[int]], None] | None = None,
            beside: Callable[[], bool] | None = None, idle: aside.Cores | None = None,
            every: int = EVERY_GPU_COUNT) -> list[Outcome]:
    """One CP-SAT solve per option (outcomes in the order of `opts`), each with an even share
    of what is left of `deadline` (an option past it gets its greedy plan only); candidates
    priced once per scenario (`cache`), pricing itself stopping at the deadline.

    Only the best options' optima are needed: the best, those tying it, and the `worse` next
    (`explain.alternatives`). The options are solved in order of their static lower bound
    (`bounds.space_lower_bound`, the likeliest best first) and each under the cutoff the
    optima found so far set (`cutoff`), above which it would be none of those: an option that
    cannot get under it is settled as BEATEN without its own optimum. The plans found so far
    seed each solve (`cpsat.solve`: a bound to prune by when one is a plan of this option
    too). The answer is the same as solving each to its optimum on its own, but for the
    plans: an optimum's is any optimal one until `pin_shown` makes it the canonical one.
    `priced` is called once every option is priced, before the solves; `solved` with each
    option's outcome once it is solved, and the optima proven so far (its own included).
    Where `beside()` says a child may run, the last options are solved in one beside the
    others, alone, an answer taken where it is what solving the option in its turn gives
    (`last.py`). `idle` given: only the least objective is wanted (`_best_of`, `worse`
    0), and the last options are solved beside from the back, whatever their size, once a core
    is idle, under the least objective either process has found
    (`last.least_from_the_back`), their answers taken as they are. An option whose proof
    host memory may undo is priced again counting it, and solved again (`host.py`). Options
    their share cut short are solved again once every option has had its share, in turn, in
    what the others left."""
    cache = PriceCache() if cache is None else cache
    pricing = deadline.sooner(PRICING_SHARE * deadline.left())
    spaces = []
    for i, opt in enumerate(opts):
        if progress:
            progress(f"pricing {what} {i + 1} of {len(opts)}: {opt.describe()}")
        spaces.append(build_space(sc, **asdict(opt), cache=cache, deadline=pricing, caps=caps,
                                  every=every))
    if priced is not None:
        priced()
    # Likeliest best first; once past the deadline every option gets its greedy plan only, and
    # the order is not worth its bounds' time.
    least = ([None] * len(spaces) if deadline.expired()
             else [space_lower_bound(space) for space in spaces])
    order = sorted(range(len(opts)), key=lambda i: (least[i] is None, least[i] or 0, i))
    beside_ok = len(order) > 1 and (idle is not None or (
        beside is not None and beside() and spaces[order[-1]].kept >= last.MIN_CANDIDATES))
    ends = aside.shared(lambda: aside.Ends(len(order))) if beside_ok else None
    least_found = aside.shared(aside.Least) if ends and idle is not None else None
    cut = aside.shared(aside.Least) if ends and idle is None else None  # `cutoff`, as it falls
    in_order = [spaces[i] for i in order]
    tail = (None if not ends else
            aside.start(last.least_from_the_back, in_order, ends, least_found, idle, deadline,
                        workers) if least_found
            else aside.start(last.from_the_back, in_order, ends, cut, deadline, workers)
            if cut else None)
    theirs = None  # the child's answers, by position in `order`, once it has given them
    out: dict[int, Outcome] = {}

    def take(i: int, share: Deadline, result: cpsat.Result | None, limit: int | None,
             seeds: list[Choice]) -> None:
        """Option i's outcome: `result`, else solved by `share`; priced and solved again
        counting host memory where it may bind (`host.py`)."""
        if least_found and (either := least_found.get()) is not None:
            limit = either if limit is None else min(limit, either)
        for _ in range(2):
            if result is None:
                result = cpsat.solve(spaces[i], share, workers, cutoff=limit, seeds=seeds,
                                     pin=False)
                if least_found and result.status == "OPTIMAL":
                    least_found.lower(result.objective)
            if not host_may_bind(spaces[i], result):
                break
            spaces[i], result = counted(spaces[i], share), None
        out[i] = Outcome(opts[i], result, spaces[i])
        if solved is not None:
            optima = [o.result.objective for o in out.values() if o.result.status == "OPTIMAL"]
            solved(out[i], optima)

    for n, i in enumerate(order):
        if progress:
            progress(f"{what} {n + 1} of {len(opts)}: {opts[i].describe()}")
        # an even share, but at least what a model needs to be built (`cpsat.MIN_MODEL_S`):
        # near the deadline the likeliest-best options get the time rather than none
        share = deadline.sooner(max(deadline.share(len(opts) - n), cpsat.MIN_MODEL_S))
        found = [o.result.objective for o in out.values() if o.result.status == "OPTIMAL"]
        seeds = [o.result.choice for o in out.values() if o.result.choice is not None]
        result, limit = None, cutoff(found, worse)
        if cut is not None and limit is not None:
            cut.lower(limit)
        if tail is not None and ends.front() is None:  # the child took this one and the rest
            if theirs is None:
                ok, answer = tail.result(aside.wait_s(share))
                theirs = answer if ok else {}
            result = theirs.get(n) if least_found else last.as_if_last(theirs.get(n), limit)
        take(i, share, result, limit, seeds)
    # options their share cut short get, in turn, what the others left (their plans seeds)
    short = [i for i in order if out[i].result.status not in model.SETTLED]
    for n, i in enumerate(short):
        if deadline.left() < cpsat.MIN_MODEL_S:
            break
        found = [o.result.objective for o in out.values() if o.result.status == "OPTIMAL"]
        seeds = [o.result.choice for o in out.values() if o.result.choice is not None]
        take(i, deadline.sooner(deadline.share(len(short) - n)), None, cutoff(found, worse),
               seeds)
    return [out[i] for i in range(len(opts))]


def _feasible(outcomes: list[Outcome]) -> list[Outcome]:
    ok = [o for o in outcomes if o.result.choice is not None]
    return sorted(ok, key=lambda o: (o.result.objective, o.option.staleness, o.option.fusion,
                                     o.option.shared, o.option.swap, o.option.overlap_sync,
                                     o.option.partial))


def default_workers() -> int:
    """CP-SAT workers when none are asked for: this machine's cores but one, at least 1, up to
    8. The models are small (their proofs take tenths of a second), and a worker on every core
    competes with the rest of the machine: on a shared 2-core machine one worker took 1.6 s
    less wall and CPU time than two on the 1,024-GPU PPO command (bench/search_speed.py), the
    same plans. (The plan does not depend on the count: `model.Model.canonical`.)"""
    return max(1, min((os.cpu_count() or 1) - 1, 8))


def plan(sc: Scenario, time_limit_s: float | None = None, workers: int | None = None,
         explain: bool = True, deadline: Deadline | None = None,
         progress: Progress | None = None) -> Plan:
    """The best plan for `sc` under the cost model, with its explanation, by `deadline` (by
    default `time_limit_s`, else the scenario's `search.time_limit_s`, from now).

    When the search is cut short, the best plan found — the greedy incumbent at least — is
    the answer, status `feasible`, with its gap to the best bound (None: unknown). Raises
    InfeasibleError (with the reason and what would make it feasible) when no option has a
    plan that fits in memory, or none was found in time. `explain=False` skips the extra
    searches behind the what-ifs and the fewest-GPUs diagnosis (a sweep runs its own sizes).
    `progress` is told what the search is doing (a terminal's status line). A scenario
    naming a framework (`sc.framework`) searches only what that release runs as planned (its
    preset's `Capabilities`), and the plan records it.
    """
    caps = framework_caps(sc)
    if deadline is None:
        deadline = Deadline.after(time_limit_s if time_limit_s is not None
                                  else sc.search.time_limit_s)
    workers = workers or default_workers()
    asides: dict[str, aside.Aside] = {}
    try:
        return _plan(sc, deadline, workers, explain, progress, caps, asides)
    finally:
        for child in asides.values():
            child.close()


def _plan(sc: Scenario, deadline: Deadline, workers: int, explain: bool,
          progress: Progress | None, caps: Capabilities | None,
          asides: dict[str, aside.Aside]) -> Plan:
    """`plan`, its arguments settled; the children it starts beside the search go into
    `asides` (for `plan` to end them), the what-ifs' by what they ask."""
    allowed = options(sc, sc.search.max_staleness, sc.search.allow_shared_actor_critic, caps)
    cache = PriceCache()
    # the cores a what-if's child may solve its last options on beside it: none while this
    # process and that child are busy, one more each time this process waits for one
    cores = aside.shared(lambda: aside.Cores(max(0, aside.cores() - 2))) if explain else None

    def free() -> bool:
        # the search's own children (the last options, pins as options are solved) only
        # while no what-if is searched beside it: that child has the other core, and it is
        # what the command waits for last
        return STALENESS_ASK not in asides

    def beside() -> None:  # forked once the options are priced: the child starts from them
        if explain and (child := _staleness_aside(sc, deadline, caps, cache, cores)) is not None:
            asides[STALENESS_ASK] = child

    outcomes = _search(sc, allowed, deadline, workers, cache, progress, caps=caps,
                       priced=beside,
                       solved=lambda o, optima: pin_beside(o, optima, deadline, asides)
                       if free() else None, beside=free)
    ranked = _feasible(outcomes)
    if not ranked:
        cut = [o for o in outcomes if o.result.status == "UNKNOWN" or not o.space.complete]
        if cut:  # cut short, not proven infeasible: say so rather than guess a size
            raise OutOfTime(
                f"no plan found within the time limit ({deadline.budget_s:g} s) for "
                f"{len(cut)} of {len(outcomes)} inter-model options, and none of the "
                "others has one; raise --time-limit (search.time_limit_s)")
        if sc.search.objective == "gpus":
            raise InfeasibleError(_target_unreachable(sc, allowed, deadline, workers, cache,
                                                      explain, caps))
        raise InfeasibleError(infeasible_reason(sc, outcomes, diagnose=explain,
                                                deadline=deadline))
    # partial rollouts' optima given the KV cache that fits where their rollouts sit
    settle_options(ranked, deadline, workers, lambda o: collect(o, deadline))
    ranked = _feasible(ranked)
    best = ranked[0]
    if explain and (child := _shared_aside(sc, best, deadline, caps, cache, cores)) is not None:
        asides[SHARED_ASK] = child  # the best option is known: beside the pins from here
    pin_the_rest = pin_shown(ranked, deadline, beside=free())  # the best pinned now
    if progress:
        progress("pricing the chosen plan")
    plan_in = to_plan_input(best.space, best.result.choice, best.option)
    ev = evaluate(sc, plan_in)
    objective = best.result.objective
    proven, gap = proof(outcomes, objective)
    search = {"solver": "cp-sat", "wall_s": time.monotonic() - deadline.started,
              "status": "OPTIMAL" if proven else "FEASIBLE",
              "gap": gap, "objective_ms": objective, "options_searched": len(outcomes),
              "greedy": best.result.greedy,
              "options_cut_short": sum(o.result.status not in model.SETTLED
                                       or not o.space.complete for o in outcomes),
              "time_limit_s": deadline.budget_s,
              "candidates": best.space.priced, "candidates_after_pruning": best.space.kept,
              "candidates_in_model": best.result.candidates,
              **kv_proof(outcomes, objective, deadline, proven),
              **size_proof(best.space, proven)}
    result = to_plan(sc, plan_in, ev, status="optimal" if proven else "feasible", search=search)
    explanation = dict(result.explanation)
    explanation["memory_binds"] = memory_binds(result.memory["peak_gib_per_gpu"],
                                               result.memory["capacity_gib"],
                                               result.memory["headroom_gib"])
    pin_the_rest()
    explanation["alternatives"] = alternatives(best, ranked, _delta)
    if (idle := idle_gpus(sc, best.space, sum(g.gpus for g in plan_in.groups))) is not None:
        explanation["idle_gpus"] = idle
    explanation["what_if"] = (_what_if(sc, best, deadline, workers, cache, progress, caps,
                                       asides, cores) if explain else [])
    explanation["bounds"] = (f"{ev.iteration_time_s / ev.bounds['compute_s']:.1f}× the compute "
                             f"bound, {ev.iteration_time_s / ev.bounds['decode_s']:.1f}× the "
                             "decode-chain bound" if ev.bounds["decode_s"] else
                             f"{ev.iteration_time_s / ev.bounds['compute_s']:.1f}× the compute "
                             "bound")
    search["wall_s"] = time.monotonic() - deadline.started
    return result.model_copy(update={"explanation": explanation, "search": search,
                                     "framework": sc.framework})


def _delta(space: Space, objective: int, reference: int) -> float:
    """The relative change of what the objective counts: ms, ms × GPUs, or GPUs (the gpus
    objective's tie-break on time aside)."""
    if space.objective == "gpus":
        objective, reference = objective // GPU_WEIGHT, reference // GPU_WEIGHT
    return objective / reference - 1


STALENESS_ASK = "max_staleness 1 (one step off-policy)"
SHARED_ASK = "a shared actor–critic (allow_shared_actor_critic)"


def _staleness_options(sc: Scenario, shared: bool, caps: Capabilities | None) -> list[Option]:
    """The options the staleness what-if searches (none unless the user kept staleness 0)."""
    if sc.family.offline or sc.search.max_staleness != 0:
        return []
    return [o for o in options(sc, 1, sc.search.allow_shared_actor_critic, caps)
            if (o.staleness == 1 or o.partial) and o.shared == shared]


def _staleness_aside(sc: Scenario, deadline: Deadline, caps: Capabilities | None,
                     cache: PriceCache, idle: aside.Cores | None) -> aside.Aside | None:
    """The staleness what-if, searched in a child process beside the plan's solves
    (`aside.py`, with a copy of what `cache` has priced) when its options do not wait for the
    plan: with no shared actor–critic among the plan's options, the best plan's is not
    shared. None: searched after the plan, in this process. `idle`: the cores it may solve
    its last options on beside it (`_best_of`)."""
    if sc.search.allow_shared_actor_critic and sc.critic is not None:
        return None
    opts = _staleness_options(sc, False, caps)
    return (aside.start(_best_of, sc, opts, deadline, 1, caps, cache, None, idle, nested=True)
            if opts else None)


def _best_of(sc: Scenario, opts: list[Option], deadline: Deadline, workers: int,
             caps: Capabilities | None, cache: PriceCache | None = None,
             progress: Progress | None = None, idle: aside.Cores | None = None
             ) -> tuple[int | None, bool]:
    """The best objective among `opts` (None: no plan found) and whether it is settled (every
    option proven: optimal, beaten or infeasible) — over the group sizes a what-if searches
    (`layouts.WHAT_IF_EVERY_GPU_COUNT`); `idle`: the cores the last options may be solved on
    beside (`_search`)."""
    outcomes = _search(sc, opts, deadline, workers, cache, progress, what="what-if",
                       caps=caps, worse=0, idle=idle, every=WHAT_IF_EVERY_GPU_COUNT)
    found = _feasible(outcomes)
    settled = all(o.result.status in model.SETTLED and o.space.complete for o in outcomes)
    if not found:
        return None, settled
    ties = [o for o in found if o.result.objective == found[0].result.objective]
    settle_options(ties, deadline, workers, lambda o: None)  # `settle` pins them
    return min(o.result.objective for o in ties), settled


def _shared_options(sc: Scenario, best: Outcome, caps: Capabilities | None) -> list[Option]:
    """The option the shared-critic what-if searches: the best plan's, with the actor and
    critic shared (none unless the user did not allow it and the framework runs it)."""
    if sc.critic is None or sc.search.allow_shared_actor_critic or (
            caps is not None and not caps.options.shared_actor_critic):
        return []
    o = best.option
    return [Option(o.staleness, o.fusion, True, o.swap, o.overlap_sync, o.partial)]


def _shared_aside(sc: Scenario, best: Outcome, deadline: Deadline, caps: Capabilities | None,
                  cache: PriceCache, idle: aside.Cores | None) -> aside.Aside | None:
    """The shared-critic what-if, searched in a child process beside the plan's pins and the
    staleness what-if (None: searched after the plan, in this process)."""
    opts = _shared_options(sc, best, caps)
    return (aside.start(_best_of, sc, opts, deadline, 1, caps, cache, None, idle, nested=True)
            if opts else None)


def _what_if(sc: Scenario, best: Outcome, deadline: Deadline, workers: int,
             cache: PriceCache, progress: Progress | None = None,
             caps: Capabilities | None = None, early: dict[str, aside.Aside] | None = None,
             idle: aside.Cores | None = None) -> list[str]:
    """What staleness 1, or a shared critic, would buy when the user did not allow them — in
    what is left of the deadline (skipped, and said so, when nothing is). `early`: what-ifs
    already being searched beside the plan (`_staleness_aside`, `_shared_aside`), by what
    they ask; one whose child fails is searched here. Each wait for one gives `idle` this
    process's core."""
    early = early or {}
    asks = [(STALENESS_ASK, _staleness_options(sc, best.option.shared, caps)),
            (SHARED_ASK, _shared_options(sc, best, caps))]
    notes = []
    for what, opts in asks:
        if not opts:
            continue
        if (child := early.get(what)) is not None:
            if progress:
                progress(f"what-if: {what}")
            if idle is not None:
                idle.give()
            ok, answer = child.result(aside.wait_s(deadline))
            if ok:
                notes.append(_what_if_note(sc, best, what, *answer))
                continue
        if deadline.expired():
            notes.append(f"{what}: not searched, the time limit ({deadline.budget_s:g} s) was "
                         "spent; raise --time-limit to see what it would buy")
            continue
        notes.append(_what_if_note(sc, best, what, *_best_of(
            sc, opts, deadline, workers, caps, cache, progress)))
    return notes


def _what_if_note(sc: Scenario, best: Outcome, what: str, objective: int | None,
                  settled: bool) -> str:
    """What a what-if's best objective (`_best_of`) says against the chosen plan's."""
    if objective is None:
        return (f"{what} would find no plan that fits" if settled else
                f"{what}: no plan found within the time limit")
    d = _delta(best.space, objective, best.result.objective)
    hedge = "" if settled else " (best found within the time limit)"
    per_node = [(pool.total_gpus, pool.scenario.cluster.gpus_per_node)
                for pool in best.space.pools]
    if all(slot_sizes(*pool, WHAT_IF_EVERY_GPU_COUNT) == slot_sizes(*pool)
           for pool in per_node):  # the what-if searched the plan's group sizes
        return (f"{what} would cut the {_objective_name(sc)} by {-d:.1%}{hedge}" if d < 0
                else f"{what} would not help: its best plan is {d:+.1%}{hedge}")
    # over fewer sizes, its best plan is a plan (what it cuts, it cuts at least), not a bound
    return (f"{what} would cut the {_objective_name(sc)} by at least {-d:.1%}{hedge}" if d < 0
            else f"{what} would not help over group sizes within a node or of whole nodes: "
            f"its best plan there is {d:+.1%}{hedge}")


def _objective_name(sc: Scenario) -> str:
    return {"time": "iteration time", "cost": "cost per step",
            "gpus": "GPUs needed"}[sc.search.objective]


def _target_unreachable(sc: Scenario, allowed: list[Option], deadline: Deadline, workers: int,
                        cache: PriceCache, diagnose: bool,
                        caps: Capabilities | None = None) -> str:
    """Why the gpus objective found nothing: the target is out of reach on this cluster (with
    the fastest plan's throughput when `diagnose` and time is left), or nothing fits at all."""
    target = sc.search.target_tokens_per_s
    n = sc.total_gpus
    head = (f"no plan on up to {gpu_count(n)} reaches {target:,.0f} tokens/s (an iteration "
            f"of at most {tokens_per_step(sc) / target:,.1f} s)")
    if not diagnose or deadline.expired():
        return head
    fastest_sc = sc.model_copy(update={"search": sc.search.model_copy(
        update={"objective": "time"})})
    outcomes = _search(fastest_sc, allowed, deadline, workers, cache, caps=caps, worse=0)
    ranked = _feasible(outcomes)
    if not ranked:
        return infeasible_reason(fastest_sc, outcomes, deadline=deadline)
    reach = tokens_per_step(sc) / (ranked[0].result.objective * MS)
    return (f"{head}; the fastest plan reaches {reach:,.0f} tokens/s — add nodes (`rlplan "
            f"sweep --target-tokens-per-s {target:g}` finds how many) or lower the target")


def infeasible_reason(sc: Scenario, outcomes: list[Outcome], diagnose: bool = True,
                      deadline: Deadline | None = None) -> str:
    """Why nothing fits, the fewest GPUs that would (when `diagnose`, in what is left of
    `deadline`), and which option helps."""
    space = outcomes[0].space
    gpu = sc.cluster.gpu
    missing = [t.words for t in space.tasks
               if not any(space.candidates.get((t.name, p, s)) for p, s in space.shapes)]
    where = " or ".join(f"{pool.budget_mib * MIB / GIB:.1f} GiB per GPU "
                        f"({pool.scenario.cluster.gpu.name} less its runtime reserve) on up to "
                        f"{gpu_count(pool.total_gpus)}" for pool in space.pools)
    if missing:
        why = f"no layout of {', '.join(missing)} fits in {where}"
    else:
        why = (f"every task fits alone, but no placement fits them together on "
               f"{gpu_count(sc.total_gpus)}")
    deadline = deadline or Deadline.after(sc.search.time_limit_s)
    diagnose = diagnose and not sc.multi_pool  # growing the cluster means one GPU kind
    fewest = fewestgpu_count(sc, deadline) if diagnose else None
    fix = ("" if not diagnose else f"; the fewest GPUs that fit: {fewest}" if fewest else
           f"; no {gpu.name} cluster up to 64× this size fits (or none was found within the "
           "time limit)")
    hints = ["more nodes in a pool"] if sc.multi_pool else []
    if gpu.host_link_gbps is None and not sc.multi_pool:
        hints.append("setting host_link_gbps in the profile (it allows CPU offload)")
    hints.append("fewer samples in flight (smaller prompts_per_step or max_response_len)")
    return f"infeasible: {why}{fix}; or try {', or '.join(hints)}"


def fewestgpu_count(sc: Scenario, deadline: Deadline | float,
                    factor_limit: int = 64) -> int | None:
    """The smallest cluster, growing by doubling (a node up to the profile's size, then the
    node count), on which the search finds a plan; None if none up to `factor_limit`× does
    by `deadline` (a deadline, or seconds from now)."""
    if not isinstance(deadline, Deadline):
        deadline = Deadline.after(deadline)
    c = sc.cluster
    per_node, nodes = c.gpus_per_node, c.nodes
    if c.gpu.intra_node_gbps is None:  # no scale-up figure: one GPU is all it can price
        return None
    while per_node * nodes <= c.total_gpus * factor_limit and not deadline.expired():
        if per_node < c.gpu.gpus_per_node:
            per_node = min(2 * per_node, c.gpu.gpus_per_node)
        elif c.gpu.inter_node_gbps is not None:
            nodes *= 2
        else:  # one node is all the profile allows
            return None
        bigger = sc.model_copy(update={"cluster": c.reshaped(nodes, per_node)})
        if _feasible(_search(bigger, [Option(0, False, False)], deadline, 1)):
            return nodes * per_node
    return None

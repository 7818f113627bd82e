"""The CP-SAT model over a `Space`: group sizes, task placement and one candidate per task.

Phases (STYLE.md §7.9): variables → one `add_<rule>` per rule family → objective → solve →
extract a `Choice` (no solver types escape). Units are the space's: milliseconds and MiB.
The rules and the objective are exactly `choice.valid`, `choice.fits`, `choice.meets_target`
and `choice.score`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass

from planner.plan import STAGES
from planner.search.candidate import FUSION_REST, FUSION_SCALE, SWAP_SCALE
from planner.search.choice import Choice, allowed_groups, generation_slot, resident_twins
from planner.search.deadline import Deadline
from planner.search.follow import add_follows
from planner.search.ranges import check_range, horizon_of, most_weighted
from planner.search.sat import cp_model
from planner.search.space import GPU_WEIGHT, Space

BEATEN = "BEATEN"  # proven to score above the caller's cutoff (`cpsat.solve`): no plan it needs
SETTLED = ("OPTIMAL", "INFEASIBLE", BEATEN)  # what a complete search has proven
STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE",
          cp_model.INFEASIBLE: "INFEASIBLE", cp_model.MODEL_INVALID: "MODEL_INVALID",
          cp_model.UNKNOWN: "UNKNOWN"}


@dataclass
class Result:
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | BEATEN | UNKNOWN
    choice: Choice | None
    objective: int | None
    bound: int | None
    wall_s: float
    variables: int
    candidates: int = 0  # in the model, after the bounds pruned the space's
    greedy: bool = False  # the choice is the greedy incumbent: CP-SAT found none in its time
    pinned: bool = True  # False: an optimum whose choice is any optimal one (`solve`, `pin`)


class Model:
    """Variables, keyed as documented on each dict."""

    def __init__(self, space: Space):
        self.space = space
        self.m = cp_model.CpModel()
        K = range(space.slots)
        self.multi = len(space.pools) > 1
        self.shapes = space.shapes  # (computed from the candidates: once)
        # y[k, pool, size]: slot k is a group of this size on this pool (at most one; exactly
        # one for slot 0)
        self.y = {(k, p, s): self.m.NewBoolVar(f"y[{k},{p},{s}]") for k in K
                  for p, s in self.shapes}
        self.used = {k: self.m.NewBoolVar(f"used[{k}]") for k in K}
        self.size = {k: sum(s * self.y[k, p, s] for p, s in self.shapes) for k in K}
        # on[k, pool]: slot k is on this pool (0/1, a sum of y)
        self.on = {(k, p): sum(self.y[k, q, s] for q, s in self.shapes if q == p) for k in K
                   for p in range(len(space.pools))}
        # a[task, k]: task placed on slot k
        self.a = {(t.name, k): self.m.NewBoolVar(f"a[{t.name},{k}]") for t in space.tasks
                  for k in K}
        # x[task, k, pool, size, i]: task on slot k of this shape with its i-th candidate
        self.x = {(t.name, k, p, s, i): self.m.NewBoolVar(f"x[{t.name},{k},{p},{s},{i}]")
                  for t in space.tasks for k in K for p, s in self.shapes
                  for i in range(len(space.candidates.get((t.name, p, s), [])))}

    def hint(self, ch: Choice) -> None:
        """Suggest `ch` (a feasible choice of this space) as the first solution to try: every
        variable's value, appended to the model's hint at once (what `AddHint` on each would
        append, in the same order, at a fraction of the time)."""
        sp = self.space
        pairs: list[tuple[cp_model.IntVar, bool]] = []
        for k in range(sp.slots):
            pairs.append((self.used[k], ch.sizes[k] > 0))
            pairs += [(self.y[k, p, s], ch.sizes[k] == s and ch.pool(k) == p)
                      for p, s in self.shapes]
        for key, v in self.x.items():
            name, k, p, s, _ = key
            pairs.append((v, ch.slot[name] == k and ch.sizes[k] == s and ch.pool(k) == p
                          and self.cand(key) is ch.candidate[name]))
        pairs += [(v, ch.slot[name] == k) for (name, k), v in self.a.items()]
        hint = self.m.Proto().solution_hint
        hint.vars.extend(v.Index() for v, _ in pairs)  # Boolean variables: indices ≥ 0
        hint.values.extend(int(value) for _, value in pairs)

    def cand(self, key: tuple[str, int, int, int, int]):
        name, _, p, s, i = key
        return self.space.candidates[(name, p, s)][i]

    def pool_terms(self, task: str, k: int):
        """(literal, candidate, pool index) triples of a task on slot k."""
        if not hasattr(self, "_by_slot"):  # indexed once: the rules ask for them often
            self._by_slot: dict[tuple[str, int], list] = {}
            for key, v in self.x.items():
                self._by_slot.setdefault(key[:2], []).append((v, self.cand(key), key[2]))
        return self._by_slot.get((task, k), [])

    def terms(self, task: str, k: int):
        """(literal, candidate) pairs of a task on slot k."""
        return [(v, c) for v, c, _ in self.pool_terms(task, k)]

    # --- rules ------------------------------------------------------------------------------

    def add_slots(self) -> None:
        """Each slot has at most one shape (slot 0 exactly one); used slots come first; slots
        after the first are ordered (`pools.slots_ordered`: by pool, then non-increasing
        sizes); the groups fit each pool in a total the framework sizes (`Space.total_ok`)."""
        sp, m = self.space, self.m
        for k in range(sp.slots):
            m.Add(sum(self.y[k, p, s] for p, s in self.shapes) == self.used[k])
        m.Add(self.used[0] == 1)
        for k in range(sp.slots - 1):
            m.AddImplication(self.used[k + 1], self.used[k])
            if k >= 1 and not self.multi:
                m.Add(self.size[k] >= self.size[k + 1])
            elif k >= 1:
                index = {j: sum(p * self.on[j, p] for p in range(len(sp.pools)))
                         for j in (k, k + 1)}
                m.Add(index[k] <= index[k + 1]).OnlyEnforceIf(self.used[k + 1])
                for p in range(len(sp.pools)):
                    both = m.NewBoolVar(f"same[{k},{p}]")
                    m.Add(self.on[k, p] + self.on[k + 1, p] >= 2).OnlyEnforceIf(both)
                    m.Add(self.on[k, p] + self.on[k + 1, p] <= 1).OnlyEnforceIf(both.Not())
                    m.Add(self.size[k] >= self.size[k + 1]).OnlyEnforceIf(both)
        for p, pool in enumerate(sp.pools):
            gpus = m.NewIntVarFromDomain(cp_model.Domain.FromValues(
                [g for g in range(pool.total_gpus + 1) if sp.total_ok(p, g)]), f"gpus[{p}]")
            m.Add(gpus == sum(s * self.y[k, q, s] for k in range(sp.slots) for q, s in self.shapes
                              if q == p))

    def add_placement(self) -> None:
        """Each task runs on exactly one slot, with exactly one candidate of that slot's size;
        the actor's training anchors slot 0; a used slot holds at least one task."""
        sp, m = self.space, self.m
        for t in sp.tasks:
            m.AddExactlyOne(self.a[t.name, k] for k in range(sp.slots))
            for k in range(sp.slots):
                lits = [v for v, _ in self.terms(t.name, k)]
                m.Add(cp_model.LinearExpr.sum(lits) == self.a[t.name, k])
                m.AddImplication(self.a[t.name, k], self.used[k])
        # a task's candidates of a shape on slot k sum to at most "slot k has that shape": the
        # same plans as one implication per candidate, a tighter linear relaxation (every option
        # of the shipped PPO example solved in 25% less CPU time with every pp, 5% less with the
        # default menus; the 1,024-GPU PPO case's within noise — a one-off probe)
        per_shape: dict[tuple[str, int, int, int], list[cp_model.IntVar]] = {}
        for (name, k, p, s, _), v in self.x.items():
            per_shape.setdefault((name, k, p, s), []).append(v)
        for (_, k, p, s), lits in per_shape.items():
            m.Add(cp_model.LinearExpr.sum(lits) <= self.y[k, p, s])
        m.Add(self.a["actor.training", 0] == 1)
        for k in range(sp.slots):
            m.AddBoolOr([self.a[t.name, k] for t in sp.tasks] + [self.used[k].Not()])
        if sp.caps is not None:
            self.add_framework_groups()

    def add_framework_groups(self) -> None:
        """`plan --framework`: each used slot holds exactly one of the task sets the framework
        runs on one group (`choice.allowed_groups`), and all on one pool unless it places
        groups by GPU type (`Capabilities.mixed_pools`)."""
        sp, m = self.space, self.m
        groups = allowed_groups(sp)
        if self.multi and not sp.caps.mixed_pools:  # one GPU type: every group on slot 0's
            for k in range(1, sp.slots):
                for p in range(len(sp.pools)):
                    m.Add(self.on[k, p] == self.on[0, p]).OnlyEnforceIf(self.used[k])
        for k in range(sp.slots):
            z = [m.NewBoolVar(f"group[{k},{j}]") for j in range(len(groups))]
            m.Add(sum(z) == self.used[k])
            for zj, group in zip(z, groups, strict=True):
                for t in sp.tasks:
                    m.Add(self.a[t.name, k] == int(t.name in group)).OnlyEnforceIf(zj)

    def add_generation_slot(self) -> None:
        """Swapping state out during generation needs the generation co-located (slot 0); an
        overlapped weight sync, and any staleness ≥ 1 (`PlanInput`: generation pipelined
        against training), need it on a separate rollout group."""
        sp, gen = self.space, self.space.generation
        where = generation_slot(sp)
        if where is None:
            self.m.AddBoolOr([])  # nothing generates, or both asked: the option has no plan
        elif where != "any":
            self.m.Add(self.a[gen.name, 0] == int(where == "co-located"))

    def add_fusion_separation(self) -> None:
        """Under inter-stage fusion no assessment runs on the generation group."""
        sp, gen = self.space, self.space.generation
        if not (sp.fusion and gen):
            return
        for t in sp.tasks:
            if "assessment" in t.stages:
                for k in range(sp.slots):
                    self.m.AddBoolOr([self.a[gen.name, k].Not(), self.a[t.name, k].Not()])

    def add_memory(self) -> None:
        """Per slot and stage: resident state + the stage's need ≤ the per-GPU budget; offloaded
        state ≤ the GPU's share of host memory. With several pools, once per pool over that
        pool's candidates, against its budgets: a slot's candidates all come from its one pool,
        so this says the same as one constraint against 'the slot's pool's budget', and its
        linear relaxation is tighter."""
        sp, m, gen = self.space, self.m, self.space.generation
        for k in range(sp.slots):
            for p, pool in enumerate(sp.pools):
                def terms(task: str, p: int = p, k: int = k):
                    if not self.multi:
                        return self.terms(task, k)
                    return [(v, c) for v, c, q in self.pool_terms(task, k) if q == p]

                resident = _weighted((v, c.persistent_mib) for t in sp.tasks if t is not gen
                                     for v, c in terms(t.name))
                rollout = (_weighted((v, c.persistent_mib) for v, c in terms(gen.name))
                           if gen is not None and k != 0 else 0)
                m.Add(resident + rollout <= pool.budget_mib)
                swapped = sp.swap and k == 0
                m.Add(_weighted((v, c.host_mib) for t in sp.tasks for v, c in terms(t.name))
                      + (resident if swapped else 0) <= pool.host_budget_mib)
                for t in sp.tasks:
                    for stage in t.stages:
                        own_terms = terms(t.name)
                        need = _weighted((v, c.transient_mib.get(stage, 0)
                                          + (c.reshard_mib if t is gen and k == 0 else 0))
                                         for v, c in own_terms)
                        own = (_weighted((v, c.persistent_mib) for v, c in own_terms)
                               if t is gen else rollout)
                        held = 0 if (swapped and t is gen) else resident
                        m.Add(held + own + need <= pool.budget_mib)
                        bounds = list(_must_not_fit(own_terms, pool.budget_mib, k == 0)
                                      if t is gen else ())
                        if bounds:  # a bound: the size past its gap does not fit here
                            m.Add(held >= _weighted(bounds))

    def add_objective(self) -> None:
        """Iteration time: stage maxima over groups, the controller's host time, sync, fusion
        overlap, asynchrony."""
        sp, m, gen = self.space, self.m, self.space.generation
        horizon = horizon_of(sp)
        load = {(k, st): _weighted((v, c.time_ms.get(st, 0)) for t in sp.tasks
                                   for v, c in self.terms(t.name, k))
                for k in range(sp.slots) for st in STAGES}
        S = {st: m.NewIntVar(0, horizon, f"S[{st}]") for st in STAGES}
        for (_, st), expr in load.items():
            m.Add(S[st] >= expr)
        sync = 0
        if gen is not None:
            sync = self.refit(gen.name, horizon)
            if sp.swap:
                swap = m.NewIntVar(0, horizon, "swap")
                held = _weighted((v, sp.pools[p].swap_q * c.persistent_mib) for t in sp.tasks
                                 if t is not gen for v, c, p in self.pool_terms(t.name, 0))
                m.Add(SWAP_SCALE * swap >= held)
                sync = sync + swap
        ga = S["generation"] + S["assessment"]
        if sp.fusion and gen is not None:
            ga = m.NewIntVar(0, horizon, "GA")
            m.Add(ga >= S["generation"])
            # one constraint per fusion point over the generation's literals (exactly one is
            # true: the chosen candidate's point), not one per candidate under its literal —
            # the same plans, a tighter relaxation and a smaller model (the 1,024-GPU PPO
            # case's fusion option solved in 15–20% less time, a one-off probe)
            gens = [(v, self.cand(key)) for key, v in self.x.items() if key[0] == gen.name]
            for i, rest in enumerate(FUSION_REST):
                m.Add(FUSION_SCALE * ga >= _weighted((v, FUSION_SCALE * c.done_ms[i])
                                                     for v, c in gens)
                      + rest * S["assessment"])
        sequential = ga + sp.controller_ms + sync + S["training"]
        T = m.NewIntVar(sp.controller_ms, horizon, "T")  # T ≥ the controller's host time
        if sp.staleness >= 1:
            for k in range(sp.slots):
                busy = sum(load[k, st] for st in STAGES)
                m.Add(busy <= T)
                if k == 0:
                    m.Add(busy + sync <= T)
                elif gen is not None and not sp.overlap_sync:
                    m.Add(busy + sync <= T).OnlyEnforceIf(self.a[gen.name, k])
            m.Add((sp.staleness + 1) * T >= sequential)
        else:
            m.Add(sequential == T)
        if sp.target_ms is not None and sp.target_ms < horizon:  # else T ≤ horizon says it
            m.Add(sp.target_ms >= T)
        gpus = sum(self.size.values())
        if sp.objective == "cost":
            most = most_weighted(sp)
            used = m.NewIntVar(0, most, "gpus")
            m.Add(used == sum(sp.pools[p].weight * s * v for (_, p, s), v in self.y.items()))
            cost = m.NewIntVar(0, horizon * most, "cost")
            m.AddMultiplicationEquality(cost, [T, used])
            self.objective = cost
        elif sp.objective == "gpus":
            self.objective = gpus * GPU_WEIGHT + T
        else:
            self.objective = T
        m.Minimize(self.objective)

    def refit(self, gen: str, horizon: int):
        """The actor's refit (`choice.refit_ms`): a variable no less than both sides' sums
        for the placement chosen — co-located (generation on slot 0), else a literal per (slot
        0's pool, the rollout group's pool), the conjunction of both — two linear constraints
        each, enforced under that placement's literal."""
        sp, m = self.space, self.m
        refit = m.NewIntVar(0, horizon, "refit")
        train = self.pool_terms("actor.training", 0)

        def at_least(i: int, g: int, rollout: list, when) -> None:
            """refit ≥ training side [i] + rollout's per-tensor [g], and the other way."""
            for t_part, g_part in (("refit_ms", "refit_fixed_ms"),
                                   ("refit_fixed_ms", "refit_ms")):
                m.Add(refit >= sum(getattr(c, t_part)[i] * v for v, c, _ in train)
                      + sum(getattr(c, g_part)[g] * v for v, c, _ in rollout)
                      ).OnlyEnforceIf(when)

        at_least(0, 0, self.pool_terms(gen, 0), self.a[gen, 0])
        away = [term for k in range(1, sp.slots) for term in self.pool_terms(gen, k)]
        if not self.multi:
            at_least(1, 1, away, self.a[gen, 0].Not())
            return refit
        for p0, pg in itertools.product(range(len(sp.pools)), repeat=2):
            off = sum(v for v, _, q in away if q == pg)
            z = m.NewBoolVar(f"refit[{p0},{pg}]")
            m.Add(z <= self.on[0, p0])
            m.Add(z <= off)
            m.Add(z >= self.on[0, p0] + off - 1)
            at_least(1 + pg, 1 + p0, [t for t in away if t[2] == pg], z)
        return refit

    def build(self) -> Model:
        check_range(self.space, horizon_of(self.space))  # before any term is built
        self.add_slots()
        self.add_placement()
        # `plan --framework`: followers' layouts agree with their trainers'
        add_follows(self.m, self.space.caps, {t.name for t in self.space.tasks},
                    [(key[0], v, self.cand(key).layout) for key, v in self.x.items()])
        self.add_generation_slot()
        self.add_fusion_separation()
        self.add_memory()
        self.add_objective()
        return self

    def solve(self, deadline: Deadline, workers: int = 1, seed: int = 0, pin: bool = True
              ) -> Result:
        """Minimise until `deadline`; once the optimum is proven, the canonical plan at it
        (`canonical`, unless not `pin`): the same whatever the worker count."""
        started = time.monotonic()
        solver = new_solver(deadline.left(), workers, seed)
        code = solver.Solve(self.m)
        status = STATUS.get(code, "UNKNOWN")
        nvars = len(self.m.Proto().variables)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return Result(status, None, None, None, time.monotonic() - started, nvars,
                          self.space.kept)
        objective, bound = round(solver.ObjectiveValue()), round(solver.BestObjectiveBound())
        choice = self.chosen(solver)
        if code == cp_model.OPTIMAL and pin:
            choice = self.canonical(objective, deadline, seed) or choice
        return Result(status, choice, objective, bound, time.monotonic() - started, nvars,
                      self.space.kept, pinned=pin or code != cp_model.OPTIMAL)

    def canonical(self, objective: int, deadline: Deadline, seed: int = 0) -> Choice | None:
        """Pin the objective to a proven optimum and, among the plans at it, take the layouts
        people run (`usual`: least model parallelism, then lowest ZeRO stage; `resident_twins`),
        solved by one worker in what is left of `deadline`: with several workers, which of
        equal-cost plans is found first depends on thread timing; this one depends on the model
        alone (None: nothing found in time). The step time is the optimum's whatever this picks.
        Consumes the model (its objective is replaced). The objective is held equal to the
        optimum — the same plans as ≤ (none is below it) — so CP-SAT's propagation starts from
        its value: the 1,024-GPU PPO case's three pins took a third less time than under ≤ (a
        one-off probe), the same plans."""
        self.m.Add(self.objective == objective)
        self.m.Minimize(sum(usual(self.cand(key).layout) * v for key, v in self.x.items()))
        solver = new_solver(deadline.left(), 1, seed)
        if deadline.left() > 0 and solver.Solve(self.m) in (cp_model.OPTIMAL,
                                                            cp_model.FEASIBLE):
            return resident_twins(self.space, self.chosen(solver))
        return None

    def chosen(self, solver: cp_model.CpSolver) -> Choice:
        sp = self.space
        sizes = tuple(sum(s * solver.Value(self.y[k, p, s]) for p, s in self.shapes)
                      for k in range(sp.slots))
        on = tuple(sum(p * solver.Value(self.y[k, p, s]) for p, s in self.shapes)
                   for k in range(sp.slots))
        slot, candidate = {}, {}
        for key, v in self.x.items():
            if solver.Value(v):
                slot[key[0]] = key[1]
                candidate[key[0]] = self.cand(key)
        return Choice(sizes, slot, candidate, on)


def _must_not_fit(gen_terms: list, budget_mib: int, co_located: bool
                  ) -> Iterable[tuple[cp_model.IntVar, int]]:
    """The generation's bound candidates (`Candidate.bound`) with the resident MiB each needs
    beside it for the size past its gap not to fit: held ≥ Σ need·literal says "held ≥ need
    where chosen" for all of them at once (one of the task's literals is true), in one
    constraint rather than one per candidate, each repeating the resident sum."""
    for v, c in gen_terms:
        if c.bound:
            need = budget_mib + 1 - c.persistent_mib - c.upper_mib - (
                c.reshard_mib if co_located else 0)
            if need > 0:  # held ≥ 0 always
                yield v, need


def _weighted(terms: Iterable[tuple[cp_model.IntVar, int]]) -> cp_model.LinearExprT:
    """Σ coefficient × literal as one expression: the constraint CP-SAT gets is the same as
    from a Python sum of products (it flattens both, by variable), built in a fraction of the
    time."""
    pairs = list(terms)
    return cp_model.LinearExpr.weighted_sum([v for v, _ in pairs], [c for _, c in pairs])


ZERO_STAGES = 4
RECOMPUTE = {"none": 0, "selective": 1, "full": 2}  # least recomputation first
MAX_TASKS = 5  # actor generation and training, critic, reference, reward


def usual(layout) -> int:
    """How far a layout is from what people run, for breaking ties between plans of equal
    objective: its model parallelism (tp·pp·cp, so on a given group the most data
    parallelism) first, then its ZeRO stage, then its recomputation (none, selective, full) —
    weighted so that one step of each anywhere outweighs every task's steps of the next
    together. (Then no frozen model offloads that need not: `choice.resident_twins`, after
    the solve.)"""
    zero = (layout.tp * layout.pp * layout.cp - 1) * ZERO_STAGES * MAX_TASKS + layout.zero
    return zero * len(RECOMPUTE) * MAX_TASKS + RECOMPUTE[layout.checkpointing]


def new_solver(time_limit_s: float, workers: int, seed: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    # Presolve costs more than it saves on these models (measured by bench/search_speed.py:
    # PPO 4×70B on 8 GPUs 1.0 s → 0.06 s per solve, on 64 GPUs 3.8 s → 1.4 s), and so does
    # probing (bench/pools.py's PPO 4×70B two-pool options: 1.3–2.2× faster without; the
    # 1,024-GPU PPO case's canonical pins 0.22 / 0.13 / 0.25 s → 0.15 / 0.13 / 0.18 s).
    solver.parameters.cp_model_presolve = False
    solver.parameters.cp_model_probing_level = 0
    # Every constraint in the LP relaxation (linearization level 2, default 1) bounds the
    # objective sooner, and no symmetry detection (default 2), whose graph search costs more
    # than it saves on models solved in tens of milliseconds: the same optima; CP-SAT's time on
    # the 1,024-GPU PPO case's 22 models 2.0 → 1.4–1.6 s, on the 8-GPU example's 9 models 127 →
    # 80 ms, on the shipped PPO example's 31 within noise (one-off replays of their models);
    # bench/search_speed.py, the 1,024-GPU search 1.57 → 1.31 s, the examples within noise.
    solver.parameters.linearization_level = 2
    solver.parameters.symmetry_level = 0
    # CP-SAT's own Ctrl-C handler would end the solve and swallow the interrupt (the command
    # went on with what it had), and could leave the default action behind it (a later Ctrl-C
    # killed the process, its children left running): Python's stays, and the interrupt is
    # raised once the solve returns, by its time limit at the latest
    solver.parameters.catch_sigint_signal = False
    return solver

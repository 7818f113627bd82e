"""The search space: tasks, group-size options and priced candidate layouts.

A *task* is what one model does on one group: the actor's generation; a trainable model's
training, which also carries its forward in the assessment stage (the actor's old log-probs,
the critic's values — run with the training layout, as verl and NeMo-RL do); a frozen model's
assessment forward. Up to `MAX_SLOTS` device groups ("slots") hold the tasks; slot 0 holds the
actor's training, so generation on slot 0 is the co-located hybrid engine (resharding) and
generation elsewhere a separate rollout group (weight sync).

Every candidate (`candidate.py`) is priced once by the cost model
(`planner.cost.iteration.task_time` and `task_memory`, the functions `rlplan evaluate` uses) in
integer milliseconds and MiB, and candidates no better in any number than another are dropped.
Candidates are priced a parallel shape (the degrees; `layouts.py` enumerates the legal ones)
at a time: its variants — interleaving × ZeRO × checkpointing × micro-batch × offload,
generation's KV cache sizes (`kv.py`) — go through the same functions as numpy arrays in one pass
(`planner.cost.variants`), tens of thousands of candidates costing a few hundred passes.
The CP-SAT model (`model.py`) and the brute-force enumerator (`brute.py`) read this space and
score a choice with the same integer arithmetic (`choice.py`), so their optima coincide.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from planner.cost.fit import budget_of, host_budget_of
from planner.cost.flops import Num
from planner.cost.generation import bytes_resharding_buffer
from planner.cost.iteration import (
    refit_generation_side,
    refit_training_side,
    runs_stage,
    task_memory,
    task_time,
)
from planner.cost.memory import ROLE_HEADS
from planner.cost.offload import swap_time
from planner.cost.rollout_stage import generation_memory, rollout_precision_of
from planner.cost.step import controller_seconds, tokens_per_step
from planner.cost.variants import LayoutVariants
from planner.plan import FROZEN_ROLES, Layout
from planner.search import aside
from planner.search.candidate import (
    FLOAT_SLACK,
    MIB,
    MS,
    SWAP_SCALE,
    Candidate,
    PriceCache,
    Space,
    Task,
    by_time,
    candidate_at,
    fits_alone,
    pareto,
    to_mib,
    to_ms,
)
from planner.search.deadline import Deadline
from planner.search.follow import Variant, fronts, grouped, label_of
from planner.search.kv import kv_bounds, kv_key, rollout_of
from planner.search.layouts import EVERY_GPU_COUNT, SHAPES, slot_sizes
from planner.search.pools import PoolSpace, all_shapes, price_weights
from planner.specs.scenario import Scenario
from planner.theory.shape import Head

if TYPE_CHECKING:
    from collections.abc import Iterable

    from planner.frameworks import Capabilities


MAX_SLOTS = 3
GPU_WEIGHT = 10**9  # ms: longer than any iteration, so the gpus objective counts GPUs first


def heads_for(sc: Scenario, shared: bool) -> dict[str, Head]:
    heads = {role: ROLE_HEADS[role] for role in sc.roles}
    if shared:
        heads["actor"] = Head.SHARED
    return heads


def tasks_for(sc: Scenario, shared: bool) -> list[Task]:
    """The tasks a scenario runs: generation (not DPO or SFT), training of each trainable
    model, the forward of each frozen one. Shared actor–critic folds the critic into the
    actor."""
    tasks = [] if sc.family.offline else [Task("actor", "generation")]
    tasks.append(Task("actor", "training"))
    if sc.critic is not None and not shared:
        tasks.append(Task("critic", "training"))
    tasks += [Task(r, "forward") for r in FROZEN_ROLES if r in sc.roles]
    return tasks


def _price(space: Space, ps: PoolSpace, task: Task, lay: Layout | LayoutVariants, head: Head
           ) -> Candidate:
    """A layout priced by the cost model (`task_memory` and `task_time`, the functions
    `rlplan evaluate` uses) on pool `ps` in the solvers' units; for layout variants every
    number is an array over the variants."""
    sc = ps.scenario
    role = task.role
    if task.kind == "generation":  # the variants are KV cache sizes, each its own schedule
        mem = generation_memory(sc, lay, space.overlap_sync, resharding=False)
        rollouts = [rollout_of(space, ps, one) for one in ([lay] if isinstance(lay, Layout)
                                                           else lay)]
        return Candidate(
            layout=lay, time_ms={"generation": to_ms(np.array([r.seconds for r in rollouts]))},
            persistent_mib=to_mib(mem.persistent),
            transient_mib={"generation": to_mib(mem.transient)},
            **_refit_side(space, ps, lay, head, refit_generation_side, train_first=False),
            reshard_mib=to_mib(bytes_resharding_buffer(sc.actor, lay,
                                                     rollout_precision_of(sc).weight_bytes)),
            done_ms=to_ms(np.array([[c for c, _ in r.completions] for r in rollouts])),
            floor_ms=to_ms(np.maximum(0.0, np.array([r.seconds - r.time.recompute
                                                     for r in rollouts]) * (1 - FLOAT_SLACK))))
    if task.kind == "forward":
        mem = task_memory(sc, role, "assessment", lay, head)
        return Candidate(
            layout=lay, time_ms={"assessment": to_ms(task_time(sc, role, "assessment", lay,
                                                             head)[0])},
            persistent_mib=to_mib(mem.persistent),
            transient_mib={"assessment": to_mib(mem.transient)},
            host_mib=to_mib(mem.host_offload))
    # training, with the model's assessment forward (old log-probs / values; not DPO's, SFT's)
    train = task_memory(sc, role, "training", lay, head)
    times = {"training": to_ms(task_time(sc, role, "training", lay, head)[0])}
    transient = {"training": to_mib(train.transient)}
    if runs_stage(sc, role, "assessment"):
        times["assessment"] = to_ms(task_time(sc, role, "assessment", lay, head)[0])
        transient["assessment"] = to_mib(task_memory(sc, role, "assessment", lay,
                                                   head).transient)
    refit = (_refit_side(space, ps, lay, head, refit_training_side, train_first=True)
             if space.generation is not None and role == "actor" else {})
    return Candidate(layout=lay, time_ms=times, persistent_mib=to_mib(train.persistent),
                     transient_mib=transient, host_mib=to_mib(train.host_offload), **refit)


def _refit_side(space: Space, ps: PoolSpace, lay: Layout | LayoutVariants, head: Head, side,
                train_first: bool) -> dict[str, tuple[Num, ...]]:
    """A candidate's side of the actor's refit in ms (`Candidate.refit_ms`), by placement:
    co-located on pool `ps`, then with the other group on each pool in turn. `side` prices it
    (`iteration.refit_training_side` or `refit_generation_side`, seconds)."""
    sc, here = space.scenario, ps.scenario.cluster  # the whole scenario: the link between pools
    priced = [side(sc, head, lay, here, here, True)]
    for other in space.pools:
        if other is ps and ps.total_gpus < 2:  # no second group on a one-GPU pool
            priced.append((0.0, 0.0))
            continue
        clusters = ((here, other.scenario.cluster) if train_first
                    else (other.scenario.cluster, here))
        priced.append(side(sc, head, lay, *clusters, False))
    return {"refit_ms": tuple(to_ms(np.add(transfers, fixed)) for transfers, fixed in priced),
            "refit_fixed_ms": tuple(to_ms(fixed) for _, fixed in priced)}


def _candidates(space: Space, ps: PoolSpace, task: Task, g: int, heads: dict[str, Head],
                one_at_a_time: bool = False) -> list[Candidate]:
    """The kept candidates of `task` on `g` GPUs: `pareto` of every legal layout (`space.priced`
    counts them all). Each shape's variants are priced in one numpy pass and pruned on their
    integer arrays, only the kept becoming `Candidate`s; `one_at_a_time` prices each `Layout`
    through the scalar cost model instead (the reference the tests hold the numpy pass to)."""
    head = heads[task.role]
    spec = space.scenario.roles[task.role]
    shapes = list(SHAPES[task.kind](space, ps, task.role, g))
    if space.caps is not None:  # the framework's rules, before pricing where a shape fails all
        masks = [space.caps.mask(task.kind, variants, spec, task.role) for variants in shapes]
        shapes = [v for v, m in zip(shapes, masks, strict=True) if np.any(m)]
    space.priced += sum(len(variants) for variants in shapes)
    if one_at_a_time:
        each = [[candidate_at(_price(space, ps, task, lay, head), 0, lay) for lay in variants]
                for variants in shapes]
        label = label_of(space.caps, task.name)
        cands = [c for variants, cs in zip(shapes, each, strict=True) for c in cs
                 if space.caps is None or space.caps.mask(task.kind, c.layout, spec, task.role)]
        kept = [c for group in grouped(cands, label)
                for c in pareto(ps, group, space.host_front)]
        return by_time(kept + kv_bounds(space, ps, task, shapes, [
            (np.array([c.floor_ms for c in cs]), (cs[0].refit_ms, cs[0].refit_fixed_ms),
             cs[0].reshard_mib) for cs in each], kept))
    priced = [_price(space, ps, task, variants, head) for variants in shapes]
    keys, rows = [], []  # the key and (shape, variant) of every candidate that fits alone
    for k, (c, variants) in enumerate(zip(priced, shapes, strict=True)):
        n = len(variants)
        allowed = True if space.caps is None else space.caps.mask(task.kind, variants, spec,
                                                                   task.role)
        fit = np.flatnonzero(np.broadcast_to(
            fits_alone(ps, c.persistent_mib, c.transient_mib, c.host_mib) & allowed, n))
        keys.append(_rows(c.key(space.host_front), fit))
        rows += [(k, i) for i in fit.tolist()]
    if not rows:
        return []
    kept = [candidate_at(priced[k], i, shapes[k][i]) for k, i in
            (rows[r] for r in fronts(np.concatenate(keys), label_of(space.caps, task.name), shapes,
                                     rows))]
    return by_time(kept + kv_bounds(space, ps, task, shapes, [
        (c.floor_ms, (c.refit_ms, c.refit_fixed_ms), c.reshard_mib) for c in priced], kept))


def _rows(key: tuple, fit: np.ndarray) -> np.ndarray:
    """The rows `fit` of a priced shape's `Candidate.key` (each number an array over its
    variants, or a scalar they share) as a matrix, one row per candidate."""
    out = np.empty((len(fit), len(key)), dtype=np.int64)
    for j, x in enumerate(key):
        out[:, j] = x[fit] if np.size(x) > 1 else x  # one value: every row's
    return out


def host_budget_mib(sc: Scenario) -> int:
    """CPU memory per GPU for offloaded state (`fit.host_budget_of`)."""
    return host_budget_of(sc.cluster.gpu)


def pool_space(sc: Scenario, name: str, caps: Capabilities | None, weight: int,
               every: int = EVERY_GPU_COUNT) -> PoolSpace:
    """Pool `name` of `sc` as the solvers see it (`caps`: only the sizes the framework runs;
    `every`: on up to this many GPUs every group size, `layouts.slot_sizes`)."""
    view = sc.on_pool(name)
    cluster, gpu = view.cluster, view.cluster.gpu
    return PoolSpace(
        name=name, scenario=view,
        sizes=[s for s in slot_sizes(cluster.total_gpus, cluster.gpus_per_node, every)
               if caps is None or caps.size_ok(s, cluster.gpus_per_node)],
        total_gpus=cluster.total_gpus,
        budget_mib=budget_of(gpu, sc.search.memory_headroom),
        host_budget_mib=host_budget_mib(view),
        swap_q=(round(SWAP_SCALE * swap_time(MIB, gpu, cluster.gpus_per_node) / MS)
                if gpu.host_link_gbps else 0), weight=weight)


def build_space(sc: Scenario, staleness: int = 0, fusion: bool = False, shared: bool = False,
                swap: bool = False, overlap_sync: bool = False, partial: bool = False,
                slots: int = MAX_SLOTS, cache: PriceCache | None = None,
                deadline: Deadline | None = None, caps: Capabilities | None = None,
                host_front: bool = False, every: int = EVERY_GPU_COUNT) -> Space:
    """Enumerate and price every legal candidate of every task on every group size of every
    pool — the largest sizes first, so that when `deadline` passes part way (`Space.complete`
    False) what was priced still holds the simplest plans (everything on a whole pool).
    `caps`: only the group sizes and layouts that framework runs (the cache must be for the
    same `caps`). `host_front`: the candidates kept count host memory (`Space.host_front`)."""
    heads = heads_for(sc, shared)
    tasks = tasks_for(sc, shared)
    cache = PriceCache() if cache is None else cache
    pools = [pool_space(sc, p.name, caps, w, every)
             for p, w in zip(sc.pool_list, price_weights(sc), strict=True)]
    space = Space(
        scenario=sc, staleness=staleness, fusion=fusion, shared=shared, swap=swap,
        overlap_sync=overlap_sync, partial=partial, objective=sc.search.objective, tasks=tasks,
        pools=pools, slots=min(slots, len(tasks)), total_gpus=sc.total_gpus,
        target_ms=(math.floor(tokens_per_step(sc) / sc.search.target_tokens_per_s / MS)
                   if sc.search.objective == "gpus" else None), caps=caps,
        controller_ms=int(to_ms(controller_seconds(sc))), host_front=host_front, cache=cache)
    # largest sizes first (pools in turn), so a deadline leaves each pool's whole groups
    todo = [(task, p, g) for p, g in sorted(all_shapes(pools), key=lambda shape: (-shape[1],
                                                                                   shape[0]))
            for task in tasks if _cache_key(space, task, p, g) not in cache.kept]
    # taken in turns with a child pricing beside this process where the space is large
    # enough (the generation's too: with every group size on up to 64 GPUs its rollouts are
    # most of the pricing; the KV sizes `refine` prices later simulate here again)
    turns = aside.shared(lambda: aside.Turns(todo)) if len(todo) >= MIN_ITEMS_BESIDE else None
    child = aside.start(_priced, space, turns, heads, deadline) if turns else None
    priced, complete = _priced(space, turns or todo, heads, deadline)
    if child is not None:
        ok, answer = child.result(aside.wait_s(deadline))
        if not ok:  # what the child took is priced here
            answer = _priced(space, [item for item in todo
                                     if _cache_key(space, *item) not in priced],
                             heads, deadline)
        priced.update(answer[0])
        complete = complete and answer[1]
    cache.kept.update(priced)
    space.complete = complete
    # in (task, pool, size) order whatever order they were priced in
    for t in tasks:
        for p, g in all_shapes(pools):
            key = _cache_key(space, t, p, g)
            if key in cache.kept:
                space.priced += cache.kept[key][1]
                if cache.kept[key][0]:
                    space.candidates[(t.name, p, g)] = cache.kept[key][0]
    _hide_refit(space)
    return space


MIN_ITEMS_BESIDE = 8
"""Fewer (task, size) pairs than this are priced here alone. Timed in one-off runs (not bench
figures), medians of 5, when the generation was priced here alone: at 8 rather than 16, a
node's 8 pairs of GRPO training and forwards priced beside the generation's took the search of
the shipped 7B example from 0.53 to 0.46 s, of GRPO 7B / 70B on 8 GPUs from 0.49 / 0.56 to
0.44 / 0.49 s, DPO's 0.07 s unchanged; at 4, the example no faster than at 8."""


def _priced(space: Space, todo: Iterable[tuple[Task, int, int]], heads: dict[str, Head],
            deadline: Deadline | None) -> tuple[dict[tuple, tuple[list[Candidate], int]], bool]:
    """The kept candidates of each (task, pool, size) of `todo` and how many were priced
    (`PriceCache.kept`), in order until `deadline` passes; and whether all were."""
    out = {}
    for task, p, g in todo:
        if deadline is not None and deadline.expired():
            return out, False
        before = space.priced
        cands = _candidates(space, space.pools[p], task, g, heads)
        out[_cache_key(space, task, p, g)] = (cands, space.priced - before)
        space.priced = before
    return out, True


def _hide_refit(space: Space) -> None:
    """Drop from the actor training's candidates the part of their refit side no choice sees
    (`hide_refit`), once per command for the same candidates and rollout floors
    (`PriceCache.hidden`: the options' spaces mostly share both)."""
    gen = space.generation
    if gen is None:
        return
    train = next(t for t in space.tasks if t.name == "actor.training")
    floors = {p: refit_floors(space, p) for p in range(len(space.pools))}
    for (name, p, g), cands in space.candidates.items():
        if name == train.name:
            key = (_cache_key(space, train, p, g), floors[p])
            if key not in space.cache.hidden:
                space.cache.hidden[key] = hidden_refit(space.pools[p], cands, floors[p],
                                                       space.host_front)
            space.candidates[(name, p, g)] = space.cache.hidden[key]


def hide_refit(space: Space, p: int, cands: list[Candidate]) -> list[Candidate]:
    """The actor training's candidates `cands` (on pool `p`) without the part of their refit
    side no choice sees, pruned again (`hidden_refit`)."""
    return hidden_refit(space.pools[p], cands, refit_floors(space, p), space.host_front)


def refit_floors(space: Space, p: int) -> tuple[int | None, ...]:
    """For each entry of a training candidate's refit side on pool `p` (`Candidate.refit_ms`:
    co-located, then the rollout group on each pool), the least transfer time of the rollout
    candidates it meets there (None: none)."""
    gen = space.generation
    rollout: dict[int, list[Candidate]] = {}
    for (name, q, _), those in space.candidates.items():
        if gen is not None and name == gen.name:
            rollout.setdefault(q, []).extend(those)
    # entry i of a training candidate meets entry j of the rollout candidates on pool q
    pairs = [(0, p)] + [(1 + p, q) for q in range(len(space.pools))]
    return tuple(min((c.refit_ms[j] - c.refit_fixed_ms[j] for c in rollout.get(q, [])),
                     default=None) for j, q in pairs)


def hidden_refit(ps: PoolSpace, cands: list[Candidate], floor: tuple[int | None, ...],
                 host: bool = False) -> list[Candidate]:
    """The actor training's candidates `cands` (on pool `ps`) without the part of their refit
    side no choice sees, pruned again.

    The refit is the per-tensor parts plus the longer of the two sides' transfers
    (`choice.refit_ms`): a training candidate whose transfers on a placement are no longer
    than every rollout candidate's there (`floor`, `refit_floors`) is hidden by them, so
    counting them as 0 gives every choice the same score — and training layouts that differed
    only there (the bytes a domain's ranks hold, by ZeRO stage and expert layout) become
    duplicates `pareto` drops. (Rollout candidates `refine` adds later are of the same shapes:
    the same refit sides.)"""
    return pareto(ps, [
        dataclasses.replace(c, refit_ms=tuple(
            fixed if low is None or total - fixed <= low else total
            for total, fixed, low in zip(c.refit_ms, c.refit_fixed_ms, floor, strict=True)))
        for c in cands], host)


def _cache_key(space: Space, task: Task, p: int, g: int) -> tuple:
    """Where `task`'s candidates on `g` GPUs of pool `p` are kept (`PriceCache.kept`)."""
    variant = ((space.overlap_sync, space.partial) if task.kind == "generation" else None,
               space.shared if task.role == "actor" else None)
    return (task.name, p, g, variant, space.host_front)


def add_kv_sizes(space: Space, p: int, g: int, shape: Layout, sizes: set[int]) -> None:
    """Price KV sizes `sizes` for the generation `shape` on `g` GPUs of pool `p` too
    (`kv.kv_levels`), re-pricing that group size's generation candidates in `space` and in
    the cache it shares with the other options' spaces (their rollouts are cached)."""
    gen = space.generation
    assert gen is not None, "only a generation shape has KV cache sizes"
    space.cache.kv_added.setdefault(kv_key(space, space.pools[p], shape), set()).update(sizes)
    priced = space.priced
    cands = _candidates(space, space.pools[p], gen, g, heads_for(space.scenario, space.shared))
    space.priced = priced + len(sizes)
    space.cache.kept[_cache_key(space, gen, p, g)] = (cands, len(cands))
    space.candidates[(gen.name, p, g)] = cands


def price_layout(space: Space, task: Task, p: int, layout: Layout) -> Candidate:
    """One layout of `task` on pool `p`, priced as the search prices its candidates."""
    ps = space.pools[p]
    return candidate_at(_price(space, ps, task, layout, heads_for(space.scenario,
                                                                   space.shared)[task.role]),
                        0, layout)


def dominated(space: Space, task: Task, p: int, layout: Layout,
              shapes: list[LayoutVariants]) -> bool:
    """Whether a variant of `shapes` that the framework runs is no worse than `layout` in every
    number the search prices a candidate by (`Candidate.key`, host memory included) — so that
    the search's optimum, over such variants, is no worse than any plan with `layout` (as its
    pruning, `pareto`, keeps only candidates no other is as good as)."""
    ps = space.pools[p]
    head = heads_for(space.scenario, space.shared)[task.role]
    spec = space.scenario.roles[task.role]
    mine = np.array(price_layout(space, task, p, layout).key(True))
    label = label_of(space.caps, task.name)
    for variants in shapes:
        n = len(variants)
        allowed = np.broadcast_to(True if space.caps is None else space.caps.mask(
            task.kind, variants, spec, task.role), n)
        no_worse = (_rows(_price(space, ps, task, variants, head).key(True), np.arange(n))
                    <= mine).all(axis=1) & allowed
        if label is None and no_worse.any():
            return True
        if label is not None and any(label(Variant(variants, i)) == label(layout)
                                     for i in np.flatnonzero(no_worse).tolist()):
            return True
    return False

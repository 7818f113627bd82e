"""The priced plan as the plan JSON (DESIGN.md): `to_plan` turns an `Evaluation` into a `Plan`
— times, memory, bounds, cost, precision, the breakdown per task and group, and the rollout
explained (`rollout_summary`)."""

from __future__ import annotations

import itertools

import numpy as np

from planner.cost.constants import GIB
from planner.cost.generation import Rollout
from planner.cost.iteration import Evaluation
from planner.cost.refit import Refit
from planner.cost.step import cost_per_step
from planner.frameworks.runs import frameworks_running
from planner.plan import Plan, PlanInput, StageTime
from planner.specs.scenario import Scenario


def to_plan(sc: Scenario, plan: PlanInput, ev: Evaluation, status: str = "evaluated",
            search: dict | None = None) -> Plan:
    """The priced plan as DESIGN.md's plan JSON (a `Plan`)."""
    peak_group = max(ev.memory, key=lambda g: float(ev.memory[g]["peak_bytes"]))
    # the controller's host time (runtime.controller_us_per_token) is a stage of its own
    stage_times = {**ev.stage_times, **({"controller": ev.controller_s} if ev.controller_s else {})}
    bottleneck = max(stage_times, key=stage_times.__getitem__)
    binding = ev.memory[peak_group]
    capacity = float(binding["capacity_bytes"])
    cost_usd, cost = plan_cost(sc, ev)
    layouts = {role: dict(stages) for role, stages in plan.layouts.items()}
    for t in ev.tasks:  # the KV cache the generation was priced with
        if t.stage == "generation":
            layouts[t.role][t.stage] = t.layout
    return Plan(
        status=status, objective=sc.search.objective, groups=plan.groups, layouts=layouts,
        inter_model=plan.inter_model, iteration_time_s=ev.iteration_time_s,
        tokens_per_s=ev.tokens_per_s,
        cost_per_step_usd=cost_usd, cost=cost,
        stages={**{s: StageTime(time_s=t) for s, t in stage_times.items()},
                "sync": StageTime(time_s=ev.sync_s)},
        memory={**memory_figures(binding), "capacity_gib": capacity / GIB,
                "headroom_gib": capacity * sc.search.memory_headroom / GIB,
                "groups": {g: {**memory_figures(m), "stage": m["stage"], "what": m["what"],
                               **pool_figures(sc, plan, g, m)}
                           for g, m in ev.memory.items()}},
        bounds=ev.bounds,
        scenario=(sc.source_input.written()
                  if sc.source_input else None),
        search=search or {"solver": "none", "status": "EVALUATED"},
        framework=sc.framework,
        frameworks=frameworks_running(sc, plan, float(binding["peak_bytes"]) / GIB,
                                      ev.iteration_time_s),
        precision=sc.precisions,
        explanation={"bottleneck": bottleneck,
                     "binding_constraint": f"group {peak_group} in {binding['stage']}: "
                                           f"{float(binding['peak_bytes']) / GIB:.1f} of "
                                           f"{capacity / GIB:.0f} GiB ({binding['what']})",
                     "alternatives": []},
        breakdown={"groups": ev.groups,
                   "tasks": [{"role": t.role, "stage": t.stage, "group": t.layout.group,
                              "layout": t.layout.model_dump(), "time_s": t.seconds,
                              "parts": t.parts,
                              "memory_gib": {k: float(v) / GIB
                                             for k, v in t.memory.components().items()}
                              if t.memory else {}}
                             for t in ev.tasks],
                   "generation_batch_per_replica": (ev.rollout.max_seqs if ev.rollout
                                                    else 0),
                   "rollout": rollout_summary(sc, ev.rollout) if ev.rollout else None,
                   "sync": {"time_s": ev.sync_s,
                            "refit": refit_summary(ev.refit),
                            "offload_during_generation_s": ev.swap_s,
                            "offload_during_generation_gib_per_gpu": ev.swap_bytes / GIB},
                   "timeline": ev.timeline})


def refit_summary(refit: Refit | None) -> dict | None:
    """The refit as the plan JSON gives it: the mechanism priced (`runtime.refit`, or
    colocated), its time and parts (`planner.cost.refit.Refit`); None without a rollout."""
    if refit is None:
        return None
    return {"mechanism": refit.mechanism, "time_s": refit.seconds, "send_s": refit.send_s,
            "receive_s": refit.receive_s, "assemble_s": refit.assemble_s,
            "per_tensor_s": refit.per_tensor_s}


def plan_cost(sc: Scenario, ev: Evaluation) -> tuple[float | None, dict]:
    """USD per step and the prices it was computed with: one price per GPU-hour, or with
    pools each pool's (its GPUs in the plan, price and source) and the GPU-weighted mean;
    None when a pool the plan uses has no price."""
    if not sc.multi_pool:
        price = sc.cluster.price
        return (cost_per_step(ev.iteration_time_s, ev.total_gpus, price),
                {"price_usd_per_gpu_hour": price, "price_source": sc.cluster.price_source})
    pools = {p.name: {"gpus": ev.gpus_by_pool[p.name],
                      "price_usd_per_gpu_hour": p.cluster.price,
                      "price_source": p.cluster.price_source}
             for p in sc.pools if ev.gpus_by_pool.get(p.name)}
    if any(p["price_usd_per_gpu_hour"] is None for p in pools.values()):
        return None, {"price_usd_per_gpu_hour": None, "price_source": None, "pools": pools}
    usd = sum(cost_per_step(ev.iteration_time_s, p["gpus"], p["price_usd_per_gpu_hour"])
              for p in pools.values())
    mean = sum(p["gpus"] * p["price_usd_per_gpu_hour"] for p in pools.values()) / ev.total_gpus
    return usd, {"price_usd_per_gpu_hour": mean, "price_source": "pools (GPU-weighted mean)",
                 "pools": pools}


def pool_figures(sc: Scenario, plan: PlanInput, group: str, memory: dict) -> dict:
    """With several pools, a group's pool and its GPUs' capacity (GiB); nothing with one."""
    if not sc.multi_pool:
        return {}
    pool = next(g.pool for g in plan.groups if g.name == group)
    return {"pool": pool, "capacity_gib": float(memory["capacity_bytes"]) / GIB}


def memory_figures(group: dict) -> dict[str, float]:
    """A group's peak per GPU as frameworks report it (README "What the memory figure
    means"), GiB: `peak_gib_per_gpu` (on the GPU, checked against capacity) =
    `reserved_gib_per_gpu` (the caching allocator's peak reserved) + `runtime_reserve_gib_per_gpu`
    (CUDA context, NCCL); reserved = `allocated_gib_per_gpu` (tensors) + fragmentation."""
    peak = float(group["peak_bytes"])
    reserve = float(group.get("reserve_bytes", 0.0))
    reserved = peak - reserve
    return {"peak_gib_per_gpu": peak / GIB,
            "allocated_gib_per_gpu": (reserved - float(group.get("fragmentation_bytes", 0.0)))
            / GIB,
            "reserved_gib_per_gpu": reserved / GIB,
            "runtime_reserve_gib_per_gpu": reserve / GIB}


RUNNING_POINTS = 200
"""Points of the running-sequences curve a plan JSON carries (the timeline draws it)."""


def percentile(values: np.ndarray, q: float) -> float:
    """numpy's default percentile (linear), the same float, without `np.percentile`: its
    `np.unique` imports numpy.ma, a fiftieth of a second of every `rlplan plan`."""
    s = np.sort(values)
    virtual = (len(s) - 1) * (q / 100)
    lo = int(np.floor(virtual))
    a, b, gamma = s[lo], s[min(lo + 1, len(s) - 1)], virtual - lo
    # numpy's interpolation: from the nearer end, as `np.lib._function_base_impl._lerp`
    return float(b - (b - a) * (1 - gamma) if gamma >= 0.5 else a + (b - a) * gamma)


def rollout_summary(sc: Scenario, r: Rollout) -> dict:
    """The rollout as the plan JSON explains it: KV cache and concurrency, where the time goes,
    the regime, preemption and carried tokens, the response lengths, and the slowest replica's
    running sequences over time (at most `RUNNING_POINTS` points, step-weighted means)."""
    lengths = sc.response_lengths
    run = np.array(r.running) if r.running else np.zeros((0, 3))
    edges = np.linspace(0.0, run[-1, 1], RUNNING_POINTS + 1) if len(run) else np.zeros(1)
    curve = []
    for lo, hi in itertools.pairwise(edges):
        overlap = np.clip(np.minimum(run[:, 1], hi) - np.maximum(run[:, 0], lo), 0, None)
        if hi > lo:
            curve.append([float(lo), float((overlap * run[:, 2]).sum() / (hi - lo))])
    return {
        "kv_cache_tokens": r.kv_tokens, "max_num_seqs": r.max_seqs,
        "share_per_replica": r.share, "precision": sc.precisions["generation"],
        "peak_running": r.peak_batch, "mean_running": r.mean_batch, "regime": r.regime,
        "parts": r.time.as_dict(), "tail_s": r.tail_s, "preemptions": r.preemptions,
        "recomputed_tokens": r.recomputed_tokens,
        "carried_tokens_per_step": r.carried_tokens, "steps_spanned": r.span,
        "smaller_tp": (dict(zip(("tp", "dp", "time_s"), r.smaller_tp, strict=True))
                       if r.smaller_tp else None),
        "response_lengths": {"mean": float(lengths.mean()),
                             "p50": percentile(lengths, 50), "p90": percentile(lengths, 90),
                             "max": int(lengths.max())},
        "running": curve,
    }

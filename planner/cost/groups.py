"""Per-group pieces of an iteration (`planner.cost.iteration.evaluate`): each group's memory
peak, the timeline drawn per group, the plan's lower bounds over the GPUs it uses, and the
link between pools that a weight sync across pools crosses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.cost import comm
from planner.cost.fit import Load, Overflow, whole_mib
from planner.cost.flops import (
    Head,
    bytes_weights_read_fwd,
    flops_fwd_seq,
    flops_generation,
    flops_train_seq,
)
from planner.cost.memory import MemoryBreakdown
from planner.cost.states import Precision
from planner.plan import STAGES, Layout
from planner.specs.hardware import HardwareProfile
from planner.specs.scenario import Scenario


@dataclass
class Task:
    """One (role, stage) of a plan as `evaluate` prices it: its layout, time and memory."""

    role: str
    stage: str
    layout: Layout
    seconds: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    memory: MemoryBreakdown | None = None


def inter_pool_link(sc: Scenario) -> comm.Link:
    """The link between two pools: `cluster.inter_pool_gbps` per GPU per direction, at the
    network efficiency and latency of the pool with the slower network (the side that sets the
    pace; `specs.pools` defaults the figure to its inter_node_gbps)."""
    slow = min((p.cluster.gpu for p in sc.pool_list),
               key=lambda gpu: gpu.inter_node_gbps or 0.0)
    assert sc.inter_pool_gbps is not None, "inter_pool_link needs two pools"
    return comm.Link(sc.inter_pool_gbps * 1e9 * slow.efficiency.inter_node,
                     slow.inter_node_latency_us * 1e-6, slow.collective_launch_us * 1e-6)


def group_memory(tasks: list[Task], resident: dict[str, list[tuple[str, float]]],
                 capacity: dict[str, float],
                 swapped: set[str]) -> dict[str, dict[str, float | str]]:
    """Peak bytes per GPU of each group: reserve + resident state + the stage's largest need
    (its fragmentation and runtime reserve kept apart too, for the allocated/reserved split).

    A task adds its transient bytes; the actor's generation on its own training group also
    adds its inference weights (resharded in for the stage, released after). On a `swapped`
    group the resident state is in CPU memory during generation. `capacity`: bytes per GPU of
    each group (its pool's GPU).
    """
    out: dict[str, dict[str, float | str]] = {}
    for g in capacity:
        base = sum(b for _, b in resident[g])
        # (a model asleep or streamed in holds nothing between its passes)
        names = ", ".join(r for r, b in resident[g] if b > 0) or "nothing"
        rollout_copy = any(r == "actor rollout copy" for r, _ in resident[g])
        best: dict[str, float | str] = {"peak_bytes": base, "stage": "idle",
                                        "what": f"resident: {names}", "capacity_bytes": capacity[g],
                                        "fragmentation_bytes": 0.0, "reserve_bytes": 0.0}
        for t in (t for t in tasks if t.layout.group == g):
            mem = t.memory
            assert mem is not None
            extra = float(mem.transient)
            if t.stage == "generation" and not rollout_copy:
                extra += float(mem.persistent)
            held = 0.0 if (t.stage == "generation" and g in swapped) else base
            peak = float(mem.runtime_reserve) + held + extra
            if peak > float(best["peak_bytes"]):
                best = {"peak_bytes": peak, "stage": t.stage, "capacity_bytes": capacity[g],
                        "what": f"{t.role} {t.stage} with resident: {names}",
                        "fragmentation_bytes": float(mem.fragmentation),
                        "reserve_bytes": float(mem.runtime_reserve)}
        out[g] = best
    return out



def task_loads(tasks: list[Task], homes: dict[str, str], generation: Load | None
               ) -> dict[str, list[Load]]:
    """Each group's tasks as `fit.overflow` counts them, in whole MiB — as the search's
    candidates count them: one load per model on its home group (its persistent state, its
    stages' needs, its offload), a forward run away from home as a copy of its own, and the
    generation (`rollout_stage.generation_load`)."""
    out: dict[str, list[Load]] = {}
    for role, home in homes.items():
        mine = [t for t in tasks if t.role == role and t.stage != "generation"]
        at_home = [t for t in mine if t.layout.group == home]
        held = next((t for t in at_home if t.stage == "training"), at_home[0]).memory
        assert held is not None
        out.setdefault(home, []).append(Load(
            role, whole_mib(float(held.persistent)),
            {t.stage: whole_mib(float(t.memory.transient)) for t in at_home if t.memory},
            host=whole_mib(float(held.host_offload))))
        for t in (t for t in mine if t.layout.group != home and t.memory):
            out.setdefault(t.layout.group, []).append(Load(
                f"{role} forward copy", whole_mib(float(t.memory.persistent)),
                {t.stage: whole_mib(float(t.memory.transient))}))
    gen = next((t for t in tasks if t.stage == "generation"), None)
    if gen is not None and generation is not None:
        out.setdefault(gen.layout.group, []).append(generation)
    return out


def headroom_words(gpu: HardwareProfile, headroom: float) -> str:
    """' with the memory headroom of 0.05 (…)' naming the setting and how to check against
    the full capacity; '' without a headroom."""
    if not headroom:
        return ""
    return (f" with the memory headroom of {headroom:g} (search.memory_headroom: "
            f"{gpu.memory_gib * headroom:.1f} of its {gpu.memory_gib:.0f} GiB left free; "
            "--memory-headroom 0 checks against the full capacity)")


def amount_over(mib: float) -> str:
    """An overflow in words: GiB to a tenth, a sliver under that in MiB (not "0.0 GiB")."""
    return f"{mib / 1024:.1f} GiB" if mib >= 102.4 else f"{math.ceil(mib)} MiB"


def fit_error(group: str, over: Overflow, gpu: HardwareProfile,
              report: dict[str, float | str], headroom: float = 0.0) -> str:
    """The message for a group that breaks the memory rule (`fit.overflow`); `report`: its
    peak as `group_memory` reports it; `headroom`: the share of capacity left free."""
    gib, amount = over.over_mib / 1024, amount_over(over.over_mib)
    missing = [f for f in ("host_memory_gib", "host_link_gbps") if not getattr(gpu, f)]
    if over.host and missing:
        return (f"group {group}: {amount} per GPU of offloaded state, but the {gpu.name} "
                f"profile gives no {' or '.join(missing)} to hold and move it with; set offload "
                "to none and offload_during_generation to false, or add the figure to the "
                "profile")
    if over.host:
        return (f"group {group}: offloaded state is {amount} per GPU over each GPU's share "
                f"of a node's {gpu.host_memory_gib:.0f} GiB of host memory; offload less, "
                "shard more, or turn off offload_during_generation")
    stage = over.stage or str(report["stage"])
    what = str(report["what"]) if stage == report["stage"] else over.where
    if headroom:
        return (f"group {group}, stage {stage}: {what} needs {amount} per GPU more than "
                f"each {gpu.name} may hold{headroom_words(gpu, headroom)}; shard more (ZeRO, TP, "
                "PP), checkpoint activations, offload or use smaller micro-batches")
    return (f"group {group}, stage {stage}: {gpu.memory_gib + gib:.1f} GiB per GPU ({what}) is "
            f"{amount} over the {gpu.name}'s {gpu.memory_gib:.0f} GiB; shard more (ZeRO, "
            "TP, PP), checkpoint activations, offload, or use smaller micro-batches")


def timeline(tasks: list[Task], groups: list[str], sync_s: float, sync_groups: set[str],
              phase_starts: dict[str, float] | None, period: float) -> list[dict]:
    """One iteration drawn per group: a segment per task (tasks sharing a group one after
    another), the resharding/sync, and idle gaps, in the order generation, assessment,
    training, sync. `phase_starts` gives where each stage begins on every group (staleness 0,
    stages as barriers; under fusion assessment ends with the fused phase); None packs each
    group's work from 0 and the sync at the end of the period (asynchrony: the groups overlap
    across iterations)."""
    out: list[dict] = []
    for g in groups:
        cursor, segs = 0.0, []
        for stage in (*STAGES, "sync"):
            if phase_starts is not None:
                cursor = phase_starts[stage]
            elif stage == "sync":  # one transfer every sync group joins: align it at the end
                cursor = period - sync_s
            if stage == "sync":
                work = [("actor", sync_s)] if g in sync_groups and sync_s > 0 else []
            else:
                work = [(t.role, t.seconds) for t in tasks
                        if t.layout.group == g and t.stage == stage]
            for role, seconds in work:
                segs.append({"group": g, "kind": stage, "role": role, "start_s": cursor,
                             "end_s": cursor + seconds})
                cursor += seconds
        idle_from = 0.0
        for seg in [*segs, {"start_s": period}]:
            if seg["start_s"] > idle_from + 1e-9:
                out.append({"group": g, "kind": "idle", "role": None, "start_s": idle_from,
                            "end_s": seg["start_s"]})
            idle_from = max(idle_from, seg.get("end_s", period))
        out.extend(segs)
    return sorted(out, key=lambda x: (groups.index(x["group"]), x["start_s"]))


def plan_bounds(sc: Scenario, tasks: list[Task], heads: dict[str, Head], n: int,
                used: list[tuple[int, HardwareProfile]], rollout: Precision,
                train_fp8: bool = False) -> dict[str, float]:
    """Lower bounds: all FLOPs at the peak of the GPUs the plan uses; the decode chain at full
    HBM bandwidth. `used`: (GPUs, profile) of each pool the plan's groups are on.

    compute_s = the FLOPs of every task the plan runs / (Σ GPUs × peak; the rollouts' and
    training's at the FP8 peak when they run FP8 matmuls: `train_fp8`, FP8 training's linear
    layers may reach it); decode_s = the T_max − 1 dependent decode steps of the
    longest rollout, each reading the actor's weights once (at the rollout's bytes per
    weight), spread over one scale-up domain at peak HBM bandwidth — the fastest such domain
    of the pools used.
    """
    w = sc.workload

    def rate(peak: Callable[[HardwareProfile], float]) -> float:
        return sum(gpus * peak(gpu) for gpus, gpu in used)

    def peak(fp8: bool) -> float:
        return rate(lambda gpu: gpu.fp8_tflops * 1e12 if fp8 and gpu.fp8_tflops
                    else gpu.peak_bf16_flops)

    bf16, fp8, train = peak(False), peak(rollout.fp8_matmuls), peak(train_fp8)
    compute_s = 0.0
    for t in tasks:
        spec, head = sc.roles[t.role], heads[t.role]
        if t.stage == "generation":
            work, at = n * flops_generation(spec, w.prompt_len, w.response_len).total, fp8
        elif t.stage == "assessment":
            work, at = n * flops_fwd_seq(spec, w.seq_len, head).total, bf16
        else:
            work, at = w.ppo_epochs * n * flops_train_seq(spec, w.seq_len, head).total, train
        compute_s += work / at
    decode_s = 0.0
    if any(t.stage == "generation" for t in tasks):
        longest = int(sc.response_lengths.max())
        decode_s = min((longest - 1) * bytes_weights_read_fwd(
            sc.actor, 1, weight_bytes=rollout.weight_bytes)
            / (min(gpus, gpu.scale_up_gpus) * gpu.hbm_bytes_per_s) for gpus, gpu in used)
    return {"compute_s": compute_s, "decode_s": decode_s}

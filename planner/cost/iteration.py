"""One steady-state iteration of a plan: every (role, stage) task priced on its group and
composed as Table IX composes the stages — sums where work shares devices, maxima where it
runs on disjoint groups, overlap under stage fusion and bounded asynchrony.

Composition (staleness 0): generation → assessment → training → resharding/weight sync, each
stage lasting the longest of its groups (tasks on one group run one after another), and the
controller's host time (`controller_seconds`) in series once generation ends. With
inter-stage fusion and assessment on other groups than generation, assessment streams in as
rollouts finish, in completion order: the fraction r of responses still running at time c
cannot be assessed before c + r·A (`fused_generation_assessment`, at the completion times the
rollout simulation gives). With staleness s ≥ 1 the groups pipeline across iterations: the
period is the busiest group's work per iteration (or the controller's), but no shorter than
the dependency cycle G → controller → A → T → sync spread over s + 1 iterations. Each group's
breakdown (generation, assessment, training, sync, idle) sums to the iteration time.

Memory per GPU of a group in a stage: the runtime reserve, the persistent state of every model
resident on the group (a trainable model's weights, gradients and optimizer state on its
training group; a frozen model's weights on its assessment group; the actor's inference
weights on a separate rollout group, with a shadow copy when the sync overlaps generation),
plus the largest transient need of the stage's tasks there. The actor's inference copy on its
own training group is resharded in before generation and released after (hybrid engine):
transient. With `offload_during_generation` the group's resident state moves to CPU memory
for the generation stage (`offload.swap_time`, both ways, in the sync with the resharding;
`breakdown.sync` names it) and the KV cache gets the room. Generation itself — its KV cache,
memory and time — is priced by `generation.py` through `rollout_stage.py`, the functions the
search prices its candidates with. `report.to_plan` writes an `Evaluation` as the plan JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner.cost import comm
from planner.cost.constants import BYTES_BF16
from planner.cost.fit import (
    Load,
    budget_of,
    host_budget_of,
    kv_room_mib,
    overflow,
    whole_mib,
)
from planner.cost.flops import Head, Num
from planner.cost.generation import (
    Rollout,
)
from planner.cost.groups import (
    Task,
    fit_error,
    group_memory,
    inter_pool_link,
    plan_bounds,
    task_loads,
    timeline,
)
from planner.cost.legality import check_plan
from planner.cost.memory import (
    ROLE_HEADS,
    MemoryBreakdown,
    MemoryWorkload,
    memory_per_gpu,
)
from planner.cost.offload import swap_time
from planner.cost.refit import (
    Refit,
    generation_side,
    price_refit,
    training_side,
)
from planner.cost.rollout_stage import (
    generation_load,
    generation_memory,
    generation_rollout,
    kv_cache_layout,
    rollout_precision_of,
    smaller_tp_rollout,
)
from planner.cost.software import software
from planner.cost.states import MIXED_PRECISION_ADAM
from planner.cost.step import controller_seconds, sequences, tokens_per_step
from planner.cost.time import time_forward, time_train
from planner.cost.variants import LayoutVariants
from planner.errors import InfeasibleError, InputError
from planner.plan import ROLE_STAGES, STAGES, Layout, PlanInput
from planner.specs.hardware import ClusterSpec
from planner.specs.scenario import Scenario

BREAKDOWN_KEYS = ("generation", "assessment", "training", "sync", "idle")
@dataclass
class Evaluation:
    """The priced iteration: times, per-group breakdowns and memory, bounds."""

    iteration_time_s: float
    stage_times: dict[str, float]
    sync_s: float
    tasks: list[Task]
    groups: dict[str, dict[str, float]]  # group → breakdown (sums to iteration_time_s)
    memory: dict[str, dict[str, float | str]]  # group → peak bytes, capacity, where
    tokens_per_step: float
    total_gpus: int
    bounds: dict[str, float]
    rollout: Rollout | None = None
    timeline: list[dict] = field(default_factory=list)  # segments per group (see _timeline)
    swap_s: float = 0.0  # of sync_s: state offloaded during generation, out and back
    swap_bytes: float = 0.0  # the bytes per GPU it moves each way
    gpus_by_pool: dict[str, int] = field(default_factory=dict)  # pool → GPUs the plan uses
    controller_s: float = 0.0  # host time per step off the GPUs (`controller_seconds`)
    refit: Refit | None = None  # the actor's weights into its rollout engine (of sync_s)
    kv_fits_tokens: int | None = None  # the KV cache the generation gets with it left out

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.iteration_time_s


def _heads(sc: Scenario, plan: PlanInput) -> dict[str, Head]:
    heads = {role: ROLE_HEADS[role] for role in sc.roles}
    if plan.inter_model.shared_actor_critic:
        heads["actor"] = Head.SHARED
    return heads


def _tasks(sc: Scenario, plan: PlanInput) -> list[Task]:
    """The (role, stage) tasks a scenario runs, each with its layout from the plan."""
    shared = plan.inter_model.shared_actor_critic
    if shared and sc.critic is None:
        raise InputError("inter_model.shared_actor_critic: the scenario has no critic to share")
    out = []
    for role in sc.roles:
        if role == "critic" and shared:
            continue  # the critic is a head on the actor
        layouts = plan.layouts.get(role, {})
        for stage in ROLE_STAGES[role]:
            if not runs_stage(sc, role, stage):
                continue
            layout = layouts.get(stage)
            if layout is None and stage == "assessment" and "training" in layouts:
                layout = layouts["training"]  # forward with the training layout (verl, NeMo)
            if layout is None:
                raise InputError(f"plan: layouts.{role}.{stage} is missing; give the group and "
                                 "degrees this stage runs with")
            out.append(Task(role, stage, layout))
    if sc.family.offline and (unused := set(plan.layouts.get("actor", {})) - {"training"}):
        raise InputError(f"plan: layouts.actor.{sorted(unused)[0]}: {sc.algorithm} trains on "
                         "offline data, the actor runs its training stage only; remove it")
    if "assessment" in plan.layouts.get("actor", {}) and not runs_stage(sc, "actor",
                                                                         "assessment"):
        raise InputError("plan: layouts.actor.assessment: runtime.old_log_probs is rollout (the "
                         "engine's log-probs, no actor forward pass); remove it")
    extra = {r for r in plan.layouts if r not in sc.roles or (r == "critic" and shared)}
    if extra:
        raise InputError(f"plan: layouts for {', '.join(sorted(extra))}, which the scenario "
                         f"does not run ({sc.algorithm}); remove them")
    return out


def runs_stage(sc: Scenario, role: str, stage: str) -> bool:
    """Whether the scenario runs `role`'s `stage`: DPO and SFT train the actor on offline data
    (no rollouts; DPO's policy forward is part of training), and old log-probs taken from the
    rollout engine (`runtime.old_log_probs`) drop the actor's assessment pass."""
    if role == "actor" and stage != "training":
        return not sc.family.offline and (stage == "generation"
                                          or sc.runtime.old_log_probs == "recompute")
    return True


def _home_group(role: str, tasks: list[Task]) -> str:
    """Where a model's persistent state lives: its training group, else its first task's."""
    for t in tasks:
        if t.role == role and t.stage == "training":
            return t.layout.group
    return next(t.layout.group for t in tasks if t.role == role)


def refit_links(sc: Scenario, train: ClusterSpec, gen: ClusterSpec
                ) -> tuple[bool, comm.Link | None]:
    """Where a refit from a group on pool `train` to a separate group on pool `gen` runs
    (clusters of `sc.pool_list`): (both groups in one scale-up domain — the planner does not
    place groups on nodes, so only a pool that is one domain, e.g. an NVL72 rack, says yes —,
    the link between the pools when they differ, `groups.inter_pool_link`)."""
    if train.name != gen.name:
        return False, inter_pool_link(sc)
    return train.total_gpus <= train.gpu.scale_up_gpus, None


def refit_fp8(sc: Scenario) -> bool:
    """The rollout engine runs FP8 weights: the refit quantizes the bf16 training weights."""
    return rollout_precision_of(sc).weight_bytes < BYTES_BF16


def refit_training_side(sc: Scenario, head: Head, train: Layout | LayoutVariants,
                        train_cluster: ClusterSpec, gen_cluster: ClusterSpec, colocated: bool
                        ) -> tuple[Num, float]:
    """(transfers, per-tensor latency) of a refit's training side in seconds
    (`refit.training_side`, by `runtime.refit` unless co-located)."""
    same, between = refit_links(sc, train_cluster, gen_cluster)
    return training_side(sc.actor, head, train, train_cluster.gpu, mechanism=sc.runtime.refit,
                         colocated=colocated, same_domain=same, between_pools=between)


def refit_generation_side(sc: Scenario, head: Head, gen: Layout | LayoutVariants,
                          train_cluster: ClusterSpec, gen_cluster: ClusterSpec,
                          colocated: bool) -> tuple[float, float]:
    """(transfers, per-tensor work) of a refit's generation side in seconds
    (`refit.generation_side`)."""
    same, between = refit_links(sc, train_cluster, gen_cluster)
    return generation_side(sc.actor, head, gen, gen_cluster.gpu, colocated=colocated,
                           same_domain=same, fp8=refit_fp8(sc), between_pools=between)


def refit_between(sc: Scenario, head: Head, train: Layout, train_cluster: ClusterSpec,
                  gen: Layout, gen_cluster: ClusterSpec) -> Refit:
    """The actor's refit from its training layout into its generation layout: co-located
    when both name one group, else to a separate group by `runtime.refit`."""
    same, between = refit_links(sc, train_cluster, gen_cluster)
    return price_refit(sc.actor, head, train, gen, train_gpu=train_cluster.gpu,
                       gen_gpu=gen_cluster.gpu, mechanism=sc.runtime.refit,
                       colocated=train.group == gen.group, same_domain=same, fp8=refit_fp8(sc),
                       between_pools=between)


def _pool_views(sc: Scenario, plan: PlanInput) -> dict[str, Scenario]:
    """Each group's scenario as its pool alone (`Scenario.on_pool`); checks that each group
    names a pool of the cluster (with several) and that each pool holds its groups."""
    views: dict[str, Scenario] = {}
    for i, g in enumerate(plan.groups):
        if g.pool is None and sc.multi_pool:
            raise InputError(f"plan: groups[{i}].pool is missing; the cluster has pools "
                             f"{', '.join(p.name for p in sc.pools)}: name the one group "
                             f"'{g.name}' runs on")
        try:
            views[g.name] = sc.on_pool(g.pool)
        except InputError as exc:
            raise InputError(f"plan: groups[{i}].pool: {exc}; fix the name") from None
    used = sum(g.gpus for g in plan.groups)
    if not sc.multi_pool and used > sc.cluster.total_gpus:
        raise InputError(f"plan: groups use {used} GPUs but the cluster has "
                         f"{sc.cluster.total_gpus}; shrink the groups or add nodes")
    for pool in sc.pools:
        on = [g for g in plan.groups if g.pool == pool.name]
        if (n := sum(g.gpus for g in on)) > pool.cluster.total_gpus:
            raise InputError(f"plan: groups {', '.join(g.name for g in on)} use {n} GPUs of "
                             f"pool '{pool.name}', which has {pool.cluster.total_gpus}; shrink "
                             "them or move one to another pool")
    return views


def evaluate(sc: Scenario, plan: PlanInput) -> Evaluation:
    """Price `plan` for scenario `sc`; raises InfeasibleError when a group runs out of memory.
    Each task is priced on its group's pool (`Scenario.on_pool`): its GPU, links and price."""
    view = _pool_views(sc, plan)
    sizes = {g.name: g.gpus for g in plan.groups}
    used = sum(sizes.values())
    heads, tasks = _heads(sc, plan), _tasks(sc, plan)
    check_plan(sc, plan)
    n = sequences(sc)
    staleness = plan.inter_model.staleness
    shadow = staleness >= 1 and plan.inter_model.overlap_weight_sync
    # in task order, not a set's (hash-seeded) order: it orders the plan JSON's "resident:"
    homes = {role: _home_group(role, tasks) for role in dict.fromkeys(t.role for t in tasks)}
    capacity = {g: view[g].cluster.gpu.memory_bytes for g in sizes}

    # Persistent state of each model: on its home group (training group, else where its
    # forward runs), plus forward copies elsewhere and a separate rollout group's weights.
    resident: dict[str, list[tuple[str, float]]] = {g: [] for g in sizes}
    for role, home in homes.items():
        t = next((x for x in tasks if x.role == role and x.stage == "training"), None) or next(
            x for x in tasks if x.role == role and x.stage == "assessment")
        mem = task_memory(view[home], role, t.stage, t.layout, heads[role])
        resident[home].append((role, float(mem.persistent)))
    for t in tasks:
        if t.stage == "assessment" and t.layout.group != homes[t.role]:
            mem = task_memory(view[t.layout.group], t.role, t.stage, t.layout, heads[t.role])
            resident[t.layout.group].append((f"{t.role} forward copy", float(mem.persistent)))

    gen_task = next((t for t in tasks if t.stage == "generation"), None)
    apart = gen_task is not None and gen_task.layout.group != homes["actor"]
    if plan.inter_model.overlap_weight_sync and not (staleness >= 1 and apart):
        raise InputError("inter_model.overlap_weight_sync: overlapping the weight sync needs "
                         "staleness ≥ 1 and the actor generating on its own rollout group; "
                         "set it to false")

    # Generation: the KV cache is the plan's, or gets what the group leaves free.
    rollout, swap_s, swap_bytes = None, 0.0, 0.0
    swap_out = plan.inter_model.offload_during_generation
    partial = plan.inter_model.partial_rollout
    if partial and staleness < 1 and sc.search.max_staleness < 1:
        raise InputError("inter_model.partial_rollout: responses continuing across steps are "
                         "off-policy; allow it with search.max_staleness ≥ 1 (--max-staleness "
                         "1) or set it to false")
    gen_load, kv_fits = None, None
    for t in (x for x in tasks if x.stage == "generation"):
        hybrid = t.layout.group == homes["actor"]  # resharded in from the training layout
        on, gpu = view[t.layout.group], view[t.layout.group].cluster.gpu
        others = sum(b for _, b in resident[t.layout.group])
        held = [Load(r, whole_mib(b)) for r, b in resident[t.layout.group]]
        if swap_out:
            if not hybrid:
                raise InputError("inter_model.offload_during_generation: the actor generates "
                                 "on its own group, there is no co-located state to offload; "
                                 "set it to false")
            if gpu.host_link_gbps is None or gpu.host_memory_gib is None:
                raise InputError("inter_model.offload_during_generation needs the profile's "
                                 "host_link_gbps and host_memory_gib; set them or turn it off")
            swap_s = swap_time(others, gpu, on.cluster.gpus_per_node)
            swap_bytes = others
        gen_load = generation_load(on, t.layout, shadow, hybrid)
        room = kv_room_mib(held, gen_load, budget_of(gpu, sc.search.memory_headroom), swap_out)
        given = t.layout.kv_cache_tokens
        t.layout = kv_cache_layout(on, t.layout, shadow, room, partial)
        kv_fits = int(t.layout.kv_cache_tokens if given is None else kv_cache_layout(
            on, t.layout.model_copy(update={"kv_cache_tokens": None}), shadow, room,
            partial).kv_cache_tokens)
        gen_load = generation_load(on, t.layout, shadow, hybrid)
        t.memory = generation_memory(on, t.layout, shadow, hybrid)
        if not hybrid:  # a separate rollout group keeps its weights (and shadow copy)
            resident[t.layout.group].append(("actor rollout copy", float(t.memory.persistent)))
        rollout = generation_rollout(on, t.layout, partial)
        rollout = replace(rollout, smaller_tp=smaller_tp_rollout(
            on, t.layout, held, shadow, hybrid, swap_out, partial))
        t.seconds, t.parts = rollout.seconds, rollout.time.as_dict()

    for t in (x for x in tasks if x.stage != "generation"):
        on = view[t.layout.group]
        t.seconds, t.parts = task_time(on, t.role, t.stage, t.layout, heads[t.role])
        t.memory = task_memory(on, t.role, t.stage, t.layout, heads[t.role])

    # The actor's refit every iteration: co-located (same group, with any swap out and back)
    # or to its own rollout group.
    sync_s, sync_groups, weight_refit = 0.0, set(), None
    if gen_task:
        train = next(t.layout for t in tasks if t.role == "actor" and t.stage == "training")
        weight_refit = refit_between(sc, heads["actor"], train, view[train.group].cluster,
                                     gen_task.layout, view[gen_task.layout.group].cluster)
        sync_s = weight_refit.seconds
        if gen_task.layout.group == train.group:
            sync_s += swap_s
            sync_groups = {train.group}
        else:  # an overlapped sync lands in the rollout group's shadow copy while it generates
            sync_groups = {train.group} if shadow else {train.group, gen_task.layout.group}

    busy = {g: dict.fromkeys(BREAKDOWN_KEYS, 0.0) for g in sizes}
    for t in tasks:
        busy[t.layout.group][t.stage] += t.seconds
    for g in sync_groups:
        busy[g]["sync"] += sync_s
    stage_times = {s: max(busy[g][s] for g in sizes) for s in STAGES}
    gen_s, assess_s, train_s = (stage_times[s] for s in STAGES)

    gen_and_assess = gen_s + assess_s
    fused = False
    if plan.inter_model.inter_stage_fusion and gen_task and rollout:
        assess_groups = {t.layout.group for t in tasks if t.stage == "assessment"}
        if gen_task.layout.group not in assess_groups:
            gen_and_assess = fused_generation_assessment(gen_s, assess_s, rollout.completions)
            fused = True
    controller_s = controller_seconds(sc)
    sequential = gen_and_assess + controller_s + sync_s + train_s
    if staleness >= 1:  # the controller is busy on the host, beside the groups
        busiest = max(sum(b.values()) for b in busy.values())
        iteration = max(busiest, controller_s, sequential / (staleness + 1))
    else:
        iteration = sequential
    for g in sizes:
        busy[g]["idle"] = max(0.0, iteration - sum(busy[g].values()))
    controller_start = 0.0  # asynchronous: beside the groups' work
    if staleness >= 1:  # steady state: each group runs its share of every stage in turn
        phase_starts = None
    else:  # the controller takes the responses once generated; every group waits for it
        controller_start = gen_and_assess if fused else gen_s
        assess_start = gen_and_assess - assess_s if fused else gen_s + controller_s
        train_start = gen_and_assess + controller_s
        phase_starts = {"generation": 0.0, "assessment": assess_start,
                        "training": train_start, "sync": train_start + train_s}
    drawn = timeline(tasks, list(sizes), sync_s, sync_groups, phase_starts, iteration)
    if controller_s:  # on the host, on no group's lane
        drawn.append({"group": None, "kind": "controller", "role": None,
                      "start_s": controller_start, "end_s": controller_start + controller_s})

    swapped = {homes['actor']} if swap_out else set()
    memory = group_memory(tasks, resident, capacity, swapped)
    for g, loads in task_loads(tasks, homes, gen_load).items():
        gpu = view[g].cluster.gpu
        headroom = sc.search.memory_headroom
        if (over := overflow(loads, budget_of(gpu, headroom), host_budget_of(gpu), g in swapped)):
            raise InfeasibleError(fit_error(g, over, gpu, memory[g], headroom))
    per_pool: dict[str, list] = {}  # pool → [GPUs the plan uses there, its profile]
    for g, size in sizes.items():
        c = view[g].cluster
        per_pool.setdefault(c.name or "", [0, c.gpu])[0] += size
    return Evaluation(
        iteration_time_s=iteration, stage_times=stage_times, sync_s=sync_s, tasks=tasks,
        groups=busy, memory=memory, tokens_per_step=tokens_per_step(sc), total_gpus=used,
        bounds=plan_bounds(sc, tasks, heads, n, [(k, gpu) for k, gpu in per_pool.values()],
                           rollout_precision_of(sc), software(sc).runtime.fp8_matmuls),
        rollout=rollout, timeline=drawn, swap_s=swap_s, swap_bytes=swap_bytes,
        controller_s=controller_s, refit=weight_refit, kv_fits_tokens=kv_fits,
        gpus_by_pool={p: k for p, (k, _) in per_pool.items()})


def task_memory(sc: Scenario, role: str, stage: str, layout: Layout | LayoutVariants,
                head: Head) -> MemoryBreakdown:
    """Peak bytes per GPU of one assessment or training task: sequences at the longest length;
    1F1B micro-batches per optimizer step. Layout variants give an array per component."""
    load = MemoryWorkload(seq_len=sc.workload.max_seq_len, micro_batches=micro_batches(sc, layout))
    sw = software(sc)
    precision = sw.precision if stage == "training" else MIXED_PRECISION_ADAM
    return memory_per_gpu(sc.roles[role], role, stage, layout, sc.cluster.gpu, load, head=head,
                          precision=precision, options=sw.kernels)


def micro_batches(sc: Scenario, layout: Layout | LayoutVariants) -> Num:
    """Micro-batches per optimizer step per data-parallel rank (whole, at least one)."""
    return np.maximum(1, np.ceil(sequences(sc) / sc.workload.mini_batches
                                 / (layout.dp * layout.micro_batch)))


def task_time(sc: Scenario, role: str, stage: str, layout: Layout | LayoutVariants,
              head: Head) -> tuple[Num, dict[str, Num]]:
    """Seconds of one assessment or training task over the step's sequences, and its breakdown
    (arrays for layout variants); generation is `generation_rollout`."""
    w, gpu, spec = sc.workload, sc.cluster.gpu, sc.roles[role]
    n = sequences(sc)
    per_node = sc.cluster.gpus_per_node
    sw = software(sc)
    if stage == "assessment":
        t = time_forward(spec, head, layout, gpu, n, w.seq_len, runtime=sw.runtime,
                         gpus_per_node=per_node)
    else:
        t = time_train(spec, head, layout, gpu, n, w.seq_len, w.mini_batches, w.ppo_epochs,
                       sw.precision.grad_bytes, runtime=sw.runtime, gpus_per_node=per_node)
    return t.total, t.as_dict()


def fused_generation_assessment(gen_s: float, assess_s: float,
                                completions: tuple[tuple[float, float], ...]) -> float:
    """Generation and assessment under inter-stage fusion, assessment on other groups: each
    response is assessed once it is done, so the fraction r still to assess after time c
    finishes no sooner than c + r·A (`Rollout.completions`), nor before generation ends."""
    return max(gen_s, *(done + rest * assess_s for done, rest in completions))

"""verl 0.9.1's resource pools: the GPUs a script asks Ray for, and the two roles that may get
a pool of their own — the rollout (off-policy, `separate_async`) and the reward model.

verl/trainer/ppo/v1/trainer_base.py `_init_resource_pool_mgr`: actor, reference and critic are
on `global_pool` (trainer.nnodes × trainer.n_gpus_per_node); `reward_pool` when
reward.reward_model.enable_resource_pool. trainer_separate_async.py adds the standalone rollout
pool (actor_rollout_ref.rollout.nnodes × n_gpus_per_node) and asserts train_batch_size ==
parameter_sync_step × ppo_mini_batch_size, a checkpoint engine other than `naive`, and a reward
model on its own pool.
"""

from __future__ import annotations

import math
from typing import Any

from planner.export.base import ExportError, PlanView, model_path, nodes_for
from planner.export.capabilities import capabilities
from planner.export.keys import VERL_VERSION
from planner.plan import Layout

ROLLOUT = "actor_rollout_ref.rollout"
REWARD = "reward.reward_model"
# What verl 0.9.1's main_ppo runs as planned: its preset, planner/frameworks/presets/verl@*.yaml
RELEASE = f"verl@{VERL_VERSION}"  # its preset: capabilities(RELEASE)


def offload_notes(v: PlanView, role: str, layout: Layout) -> list[str]:
    """What verl runs differently in a frozen model's offload than `layout` (as verl lays it
    out otherwise) says: its preset's offload rules, in their words."""
    where = f"layouts.{role}.assessment"
    return [why for why in capabilities(RELEASE).differences("forward", layout, v.sc.roles[role],
                                                             where, role)
            if why.startswith(f"{where}.offload")]


class Pools:
    """The pools a verl script asks for, by plan group; `check` refuses a script that would not
    run the plan on the planned cluster (more GPUs than it has, or groups left idle)."""

    def __init__(self, v: PlanView, pool: str):
        self.v = v
        self.asked: list[tuple[str, str, int]] = [("global_pool", pool, v.group_gpus(pool))]

    def add(self, name: str, group: str) -> None:
        self.asked.append((name, group, self.v.group_gpus(group)))

    def describe(self) -> str:
        return ", ".join(f"{name} {gpus} on group {group}" for name, group, gpus in self.asked)

    def check(self) -> None:
        total, planned = sum(g for _, _, g in self.asked), self.v.gpus
        if total > planned:
            raise ExportError(f"verl would ask Ray for {total} GPUs ({self.describe()}), the plan "
                              f"has {planned}: two pools on one group cannot share its GPUs")
        idle = [g.name for g in self.v.input.groups
                if g.name not in {group for _, group, _ in self.asked}]
        if idle:
            raise ExportError(f"verl would run the plan on {total} of its {planned} GPUs "
                              f"({self.describe()}); group(s) {', '.join(idle)} would sit idle: "
                              "verl 0.9.1 puts actor, reference and critic on the actor's "
                              "training group, the rollout on its own group only one step or "
                              "more off-policy — re-plan with those roles on the actor's group")


def rollout_pool(v: PlanView, gen: Layout, pools: Pools, notes: list[str]) -> dict[str, Any]:
    """A standalone rollout pool: verl's separate_async trainer, the plan's staleness as the
    bound on how many weight versions a trajectory may span."""
    w = v.sc.workload
    nnodes, per_node = nodes_for(v.group_gpus(gen.group), v.cluster_of(gen.group).gpus_per_node,
                                 f"{ROLLOUT}.n_gpus_per_node (group {gen.group})")
    pools.add("rollout pool", gen.group)
    if gen.dp * gen.tp < v.group_gpus(gen.group):
        notes.append(f"generation: the plan runs {gen.dp} × tp {gen.tp} replicas on group "
                     f"{gen.group}; verl fills its rollout pool ({v.group_gpus(gen.group)} GPUs) "
                     "with replicas")
    return {"trainer.v1.trainer_mode": "separate_async",
            "actor_rollout_ref.hybrid_engine": False,  # no rollout replicas on training GPUs
            f"{ROLLOUT}.nnodes": nnodes, f"{ROLLOUT}.n_gpus_per_node": per_node,
            f"{ROLLOUT}.checkpoint_engine.backend": "nccl",  # separate_async refuses `naive`
            # train_batch_size == parameter_sync_step × ppo_mini_batch_size (asserted)
            "trainer.v1.separate_async.parameter_sync_step": w.mini_batches,
            "trainer.v1.sampler.max_off_policy_threshold": v.inter.staleness}


def reward_overrides(v: PlanView, pools: Pools, separate: bool, notes: list[str],
                     comments: list[str]) -> dict[str, Any]:
    """The reward model: verl 0.9.1 reads reward.reward_model.* (not the legacy reward_model.*)
    and serves it with an inference engine, whose tensor parallelism must hold the weights."""
    sc = v.sc
    if sc.reward_kind == "verifier":
        comments.append("reward: a rule-based verifier; verl's reward manager runs your "
                        "reward function on CPU (nothing to place)")
        return {}
    if sc.reward_kind == "none" or sc.reward is None:
        return {}
    rm = v.need("reward", "assessment")
    own = rm.group != pools.asked[0][1]
    if separate and not own:
        raise ExportError(f"layouts.reward.assessment.group {rm.group}: verl's separate_async "
                          "trainer cannot co-locate the reward model with training (its rollout "
                          "never pauses to free memory); re-plan the reward model on a group of "
                          "its own")
    gpus = v.group_gpus(rm.group)
    tp, fraction = _reward_engine(v, rm, gpus)
    o: dict[str, Any] = {f"{REWARD}.enable": True,
                         f"{REWARD}.model_path": model_path(sc.reward, "reward"),
                         f"{REWARD}.rollout.name": "sglang" if sc.runtime.engine == "sglang"
                         else "vllm",
                         f"{REWARD}.rollout.tensor_model_parallel_size": tp,
                         f"{REWARD}.rollout.gpu_memory_utilization": fraction,
                         # the engine sleeps outside its pass, its weights in CPU memory
                         f"{REWARD}.rollout.free_cache_engine": rm.offload != "none"}
    notes += offload_notes(v, "reward", rm)
    if rm.pp > 1 or rm.cp > 1:
        notes.append(f"reward pp {rm.pp}/cp {rm.cp}: verl serves the reward model with "
                     "tensor parallelism only")
    if tp != rm.tp:
        notes.append(f"reward model: verl serves it with an inference engine, which keeps whole "
                     f"weights per tensor-parallel group; tp {tp} (not the plan's tp {rm.tp}, "
                     f"zero {rm.zero} over {rm.dp} GPUs) is the smallest that holds them")
    if own:
        nnodes, per_node = nodes_for(gpus, v.cluster_of(rm.group).gpus_per_node,
                                     f"{REWARD}.n_gpus_per_node (group {rm.group})")
        o |= {f"{REWARD}.enable_resource_pool": True, f"{REWARD}.n_gpus_per_node": per_node,
              f"{REWARD}.nnodes": nnodes}
        pools.add("reward_pool", rm.group)
    return o


def _reward_engine(v: PlanView, rm: Layout, gpus: int) -> tuple[int, float]:
    """(tensor parallel size, gpu_memory_utilization) of the reward model's engine: the
    smallest TP from the plan's that divides the heads and the pool and whose forward (weights
    per TP rank + workspace, priced as the plan prices a forward) fits a GPU."""
    gpu = v.cluster_of(rm.group).gpu
    spec, capacity, reserve = v.sc.reward, gpu.memory_gib, gpu.runtime_reserve_gib
    for tp in range(rm.tp, gpus + 1):
        if gpus % tp or spec.num_attention_heads % tp or \
                (spec.num_key_value_heads % tp and tp % spec.num_key_value_heads):
            continue
        engine = rm.model_copy(update={"dp": gpus // tp, "tp": tp, "pp": 1, "cp": 1, "ep": 1,
                                       "zero": 0, "offload": "none"})
        used = v.memory_gib("reward", "assessment", engine)
        if used <= capacity:
            return tp, math.ceil(round((used - reserve) / capacity * 100, 6)) / 100
    raise ExportError(f"reward model {spec.name}: no tensor-parallel size up to its {gpus} GPUs "
                      f"holds its weights on a {capacity:g} GiB GPU in verl's inference engine "
                      "(whole weights per TP group); plan the reward model on more GPUs")

"""NeMo-RL: a YAML config for its example runners (`uv run examples/run_grpo_math.py --config
FILE`; run_dpo.py, run_sft.py), built over the config NeMo-RL ships (`defaults:`).

Keys: planner/export/keys/nemo-rl_0.6_config.txt, copied from docs/exports.md §5 (NeMo-RL's
examples/configs/*.yaml); the file's header names the few marked [unverified] that it writes.
NeMo-RL trains the policy with Megatron-Core (`policy.megatron_cfg`: TP/PP/CP/EP, the ZeRO-1
distributed optimizer) or DTensor/FSDP2 (`policy.dtensor_cfg`: TP/CP, ZeRO-3 sharding): zero
0–1 is exported to Megatron, zero 3 to DTensor, and the preset's rules
(planner/frameworks/presets/nemo-rl@*.yaml) say how the rest is run. Generation is vLLM on the
policy's GPUs (`colocated.enabled`) or on nodes of its own (`colocated.resources`), one step or
more off-policy with async GRPO. The reference is not placed: NeMo-RL scores it in the policy's
workers with the policy's layout and `logprob_batch_size`. The plan as NeMo-RL runs it is
`Export.runs`, which `export` prices against the plan.
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.cost.constants import ENGINES
from planner.export.base import (
    Export,
    ExportError,
    PlanView,
    generation_notes,
    megatron_pipeline,
    model_path,
    nodes_for,
    split_note,
    train_batch,
)
from planner.export.capabilities import capabilities
from planner.export.keys import VERSIONS, check_keys, unverified_keys
from planner.frameworks.runs import KIND, converted, task_of
from planner.plan import Layout, PlanInput, expert_tp
from planner.specs.scenario import Scenario
from planner.specs.workload import Family

SCHEMA = "nemo-rl"
VERSION = VERSIONS["nemo-rl"][0]
# What NeMo-RL 0.6 runs as planned: its preset, planner/frameworks/presets/nemo-rl@*.yaml
RELEASE = f"nemo-rl@{VERSION}"  # its preset: capabilities(RELEASE)

# The example runner and the config it builds on (docs/exports.md §5: run_grpo.py with
# grpo_math_1B(_megatron).yaml, run_dpo.py with dpo.yaml; run_sft.py and sft.yaml per the preset).
RUNNERS = {"grpo": "examples/run_grpo_math.py", "dapo": "examples/run_grpo_math.py",
           "dpo": "examples/run_dpo.py", "sft": "examples/run_sft.py"}
BASES = {"grpo": {"dtensor": "grpo_math_1B.yaml", "megatron": "grpo_math_1B_megatron.yaml"},
         "dpo": {"dtensor": "dpo.yaml", "megatron": "dpo.yaml"},
         "sft": {"dtensor": "sft.yaml", "megatron": "sft.yaml"}}
MEGATRON, DTENSOR = "policy.megatron_cfg", "policy.dtensor_cfg"
VLLM, PLACEMENT = "policy.generation.vllm_cfg", "policy.generation.colocated"
ASYNC = "grpo.async_grpo"


def backend_of(layout: Layout) -> str:
    """DTensor (FSDP2) shards parameters, gradients and optimizer state (zero 3); Megatron's
    distributed optimizer shards optimizer state (zero 1) or nothing (zero 0)."""
    return "dtensor" if layout.zero == 3 else "megatron"


def export_nemo_rl(plan: dict[str, Any], sc: Scenario, version: str) -> Export:
    if sc.algorithm not in capabilities(RELEASE).algorithms:
        raise ExportError(f"NeMo-RL {version} has no {sc.algorithm} trainer (it runs "
                          f"{', '.join(sorted(capabilities(RELEASE).algorithms))})", replan=False)
    if sc.algorithm == "ppo":
        raise ExportError("NeMo-RL's PPO (ppo_math_1B.yaml's `value:` section): the value "
                          "model's keys are not in rlplan's NeMo-RL key list (docs/exports.md "
                          "§5 names the section only), so rlplan does not export it",
                          replan=False)
    if sc.reward_kind == "model":
        raise ExportError("models.reward: NeMo-RL's rewards come from environments (the math "
                          "verifier), it runs no reward model; set models.reward to verifier "
                          "(--reward verifier)", replan=False)
    v, notes = PlanView(plan, sc), []
    runs = as_nemo_rl_runs(v, notes)
    train = runs.layouts["actor"]["training"]
    backend = backend_of(train)
    o: dict[str, Any] = {"defaults": BASES[sc.family.value if sc.family.value in BASES
                                          else "grpo"][backend],
                         "policy.model_name": model_path(sc.actor, "actor")}
    o |= _training(v, train, backend, notes)
    o |= _batches(v, runs, train, notes)
    groups = {g.name: g.gpus for g in runs.groups}
    per_node = v.cluster_of(train.group).gpus_per_node
    if sc.family.offline:
        nodes, gpus = nodes_for(groups[train.group], per_node, "cluster.gpus_per_node")
    else:
        gen = runs.layouts["actor"]["generation"]
        o |= _generation(v, gen, train, notes)
        o |= _placement(v, runs, gen, train, notes)
        nodes, gpus = nodes_for(sum(groups.values()), per_node, "cluster.gpus_per_node")
    o |= {"cluster.num_nodes": nodes, "cluster.gpus_per_node": gpus}
    check_keys(SCHEMA, version, list(o))
    unverified = sorted(unverified_keys(SCHEMA, version) & set(o))
    runner = RUNNERS[sc.algorithm]
    header = [f"NeMo-RL {version}, {'Megatron' if backend == 'megatron' else 'DTensor (FSDP2)'} "
              f"backend; {sc.algorithm} plan on {sum(groups.values())} GPUs; keys from "
              "docs/exports.md §5 (NeMo-RL's examples/configs/*.yaml)",
              f"run: put this file in NeMo-RL's examples/configs/ (it builds on "
              f"{o['defaults']} there) and run `uv run {runner} --config "
              "examples/configs/FILE.yaml`; key=value arguments override it",
              f"keys not in docs/exports.md §5 (NeMo-RL keys, not checked against a release): "
              f"{', '.join(unverified)}"]
    if not sc.family.offline:
        header.append(v.vllm_memory_fraction()[1])
    text = "\n".join([*(f"# {h}" for h in header), *(f"# NOTE: {n}" for n in notes)])
    body = yaml.safe_dump(nested(o), sort_keys=False, default_flow_style=False)
    return Export(f"{text}\n{body}", "yaml", tuple(notes),
                  runs=runs.model_dump(mode="json", exclude_none=True))


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """{'a.b': 1, 'a.c': 2} → {'a': {'b': 1, 'c': 2}}, in the order the keys come."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


# --- the plan as NeMo-RL runs it ---------------------------------------------------------------


def policy_worker_reference(train: Layout, micro_batch: int) -> Layout:
    """The reference as NeMo-RL scores it: in the policy's workers, with the policy's parallel
    layout and sequence parallelism (whole weights per TP × PP group under Megatron, ZeRO-3
    under DTensor) and `policy.logprob_batch_size` sequences per micro-batch (the export and
    the import both)."""
    return Layout(group=train.group, dp=train.dp, tp=train.tp, pp=train.pp, vp=train.vp,
                  first_stage_layers=train.first_stage_layers,
                  last_stage_layers=train.last_stage_layers, cp=train.cp, ep=train.ep,
                  etp=train.etp, sp=train.sp, zero=3 if train.zero == 3 else 0,
                  micro_batch=micro_batch)


def as_nemo_rl_runs(v: PlanView, notes: list[str]) -> PlanInput:
    """The plan with what NeMo-RL does differently: each layout as the preset's rules run it;
    the reference scored in the policy's workers with its training layout and the log-prob
    micro-batch; async GRPO only with generation apart; no shadow-copy weight sync. Each
    change is said in `notes`."""
    plan = v.input
    for role, stages in plan.layouts.items():
        for stage, layout in stages.items():
            kind = "training" if task_of(role, stage) is None else KIND[stage]
            notes += capabilities(RELEASE).differences(kind, layout, v.sc.roles.get(role),
                                      f"layouts.{role}.{stage}")
    runs = converted(capabilities(RELEASE), v.sc, plan) or plan
    layouts = {role: dict(stages) for role, stages in runs.layouts.items()}
    train = layouts["actor"]["training"]
    logprob = layouts["actor"].get("assessment", train).micro_batch
    ref = layouts.get("reference", {}).get("assessment")
    if ref is not None:
        run = policy_worker_reference(train, logprob)
        if ref != run:
            notes.append(f"reference: NeMo-RL scores it in the policy's workers, with the "
                         f"policy's layout (group {run.group}, dp {run.dp}, tp {run.tp}, pp "
                         f"{run.pp}, cp {run.cp}, ep {run.ep}, zero {run.zero}) and "
                         f"policy.logprob_batch_size {logprob}, not as planned (group "
                         f"{ref.group}, dp {ref.dp}, tp {ref.tp}, pp {ref.pp}, zero {ref.zero}, "
                         f"micro_batch {ref.micro_batch})")
        layouts["reference"] = {"assessment": run}
    inter = runs.inter_model
    gen = layouts["actor"].get("generation")
    apart = gen is not None and gen.group != train.group
    update: dict[str, Any] = {}
    if inter.staleness and not apart:
        notes.append(f"staleness {inter.staleness}: NeMo-RL's async GRPO needs generation on "
                     "GPUs of its own (policy.generation.colocated.enabled false); with "
                     "generation on the policy's GPUs the step runs synchronously")
        update |= {"staleness": 0, "partial_rollout": False}
    elif inter.partial_rollout and not inter.staleness:
        notes.append("partial_rollout: NeMo-RL continues unfinished generations only one step "
                     "or more off-policy (async GRPO's in-flight weight updates); on-policy "
                     "every response finishes in its step")
        update["partial_rollout"] = False
    if inter.overlap_weight_sync:
        notes.append("overlap_weight_sync: NeMo-RL keeps no shadow copy of the weights; "
                     "in-flight weight updates (grpo.async_grpo.in_flight_weight_updates) go "
                     "with partial rollouts")
        update["overlap_weight_sync"] = False
    for on, what in ((inter.inter_stage_fusion, "inter_stage_fusion"),
                     (inter.intra_stage_fusion, "intra_stage_fusion"),
                     (inter.shared_actor_critic, "shared_actor_critic")):
        if on:
            notes.append(f"{what}: NeMo-RL has no such setting")
            update[what] = False
    used = {lay.group for stages in layouts.values() for lay in stages.values()}
    idle = [g.name for g in runs.groups if g.name not in used]
    if idle:
        notes.append(f"group(s) {', '.join(idle)} hold only the reference, which NeMo-RL runs "
                     "on the policy's GPUs: the config asks for fewer GPUs than the plan")
    return runs.model_copy(update={
        "groups": [g for g in runs.groups if g.name in used], "layouts": layouts,
        "inter_model": inter.model_copy(update=update)})


# --- training ----------------------------------------------------------------------------------


def _training(v: PlanView, train: Layout, backend: str, notes: list[str]) -> dict[str, Any]:
    """The policy's training layout under `policy.megatron_cfg` or `policy.dtensor_cfg`."""
    spec = v.sc.actor
    if backend == "dtensor":
        return {f"{DTENSOR}.enabled": True, f"{MEGATRON}.enabled": False,
                f"{DTENSOR}.tensor_parallel_size": train.tp,
                f"{DTENSOR}.context_parallel_size": train.cp,
                f"{DTENSOR}.sequence_parallel": train.sp and train.tp > 1,
                f"{DTENSOR}.activation_checkpointing": train.checkpointing != "none",
                f"{DTENSOR}.cpu_offload": train.offload == "both"}
    o: dict[str, Any] = {
        f"{DTENSOR}.enabled": False, f"{MEGATRON}.enabled": True,
        f"{MEGATRON}.tensor_model_parallel_size": train.tp,
        f"{MEGATRON}.pipeline_model_parallel_size": train.pp,
        f"{MEGATRON}.context_parallel_size": train.cp,
        f"{MEGATRON}.expert_model_parallel_size": train.ep,
        # Megatron switches SP off at TP 1 (megatron-core validate_args)
        f"{MEGATRON}.sequence_parallel": train.sp and train.tp > 1,
        f"{MEGATRON}.activation_checkpointing": train.checkpointing != "none"}
    if train.checkpointing != "none":
        o[f"{MEGATRON}.recompute_granularity"] = train.checkpointing
    if spec.moe is not None:
        o[f"{MEGATRON}.expert_tensor_parallel_size"] = expert_tp(train, "training")
    split = megatron_pipeline(spec, train, "layouts.actor.training")
    if split.embedding_in_split or split.loss_in_split:
        raise ExportError(
            f"layouts.actor.training: NeMo-RL 0.6's megatron_cfg has no account-for-embedding/"
            f"loss pipeline-split key (exports.md §5), and pp {train.pp} × vp {train.vp} over "
            f"{spec.num_hidden_layers} layers needs one; set first_stage_layers/"
            "last_stage_layers that every rank's chunks divide, or re-plan with --framework "
            "nemo-rl")
    if split.uneven:
        notes.append(split_note("actor", spec, train))
    o |= {f"{MEGATRON}.{key}": n for key, n in (
        ("num_layers_in_first_pipeline_stage", split.first),
        ("num_layers_in_last_pipeline_stage", split.last)) if n is not None}
    offload = train.offload == "optimizer"
    o |= {f"{MEGATRON}.optimizer.use_distributed_optimizer": train.zero >= 1,
          f"{MEGATRON}.optimizer.optimizer_cpu_offload": offload,
          # megatron-core's validate_args: CPU optimizer offload needs the precision-aware one
          f"{MEGATRON}.optimizer.use_precision_aware_optimizer": offload}
    if offload:
        o[f"{MEGATRON}.optimizer.optimizer_offload_fraction"] = 1.0
    return o


def _batches(v: PlanView, runs: PlanInput, train: Layout, notes: list[str]) -> dict[str, Any]:
    """Batch sizes: the step's prompts and samples, sequences (DPO: pairs) per optimizer step,
    per micro-batch, per log-prob micro-batch; the longest sequence."""
    sc, w = v.sc, v.sc.workload
    batch = train_batch(sc, train, "policy.train_global_batch_size",
                        "policy.train_micro_batch_size", notes)
    o: dict[str, Any] = {"policy.train_global_batch_size": batch.per_step,
                         "policy.train_micro_batch_size": batch.micro,
                         "policy.max_total_sequence_length": w.max_seq_len,
                         # the plan prices micro-batches of whole sequences, padded
                         "policy.sequence_packing.enabled": False,
                         "policy.dynamic_batching.enabled": False}
    if sc.family is Family.DPO:
        notes.append("DPO: policy.train_global_batch_size and train_micro_batch_size count "
                     "preference pairs (NeMo-RL trains chosen and rejected together)")
    if w.ppo_epochs > 1:
        notes.append(f"workload.ppo_epochs {w.ppo_epochs}: NeMo-RL makes one pass over a "
                     "step's samples (no epochs key in docs/exports.md §5)")
    ref = runs.layouts.get("reference", {}).get("assessment")
    if not sc.family.offline or ref is not None:
        o["policy.logprob_batch_size"] = (ref or runs.layouts["actor"].get(
            "assessment", train)).micro_batch
    if sc.family.offline:
        return o
    o |= {"grpo.num_prompts_per_step": w.prompts_per_step,
          "grpo.num_generations_per_prompt": w.samples_per_prompt,
          "loss_fn.reference_policy_kl_penalty": KL_PENALTY if sc.reference is not None
          else 0.0}
    if sc.reference is None:
        notes.append("no reference: loss_fn.reference_policy_kl_penalty 0 (NeMo-RL computes "
                     "the reference log-probs all the same; the plan does not price them)")
    notes.append("policy.sequence_packing and dynamic_batching off: the plan prices padded "
                 "micro-batches of whole sequences (NeMo-RL's Megatron recipes pack them, "
                 "which is quicker than priced)")
    return o


KL_PENALTY = 0.01
"""loss_fn.reference_policy_kl_penalty when the scenario has a reference: grpo_math_1B.yaml's
value as rlplan's authors know it (unverified, as the key)."""


# --- generation and placement ------------------------------------------------------------------


def _generation(v: PlanView, gen: Layout, train: Layout, notes: list[str]) -> dict[str, Any]:
    """vLLM's parallel sizes, memory fraction and maximum length."""
    sc = v.sc
    fraction, _ = v.vllm_memory_fraction()
    o: dict[str, Any] = {"policy.generation.backend": "vllm",
                         f"{VLLM}.tensor_parallel_size": gen.tp,
                         f"{VLLM}.pipeline_parallel_size": gen.pp,
                         f"{VLLM}.expert_parallel_size": gen.ep,
                         f"{VLLM}.gpu_memory_utilization": fraction,
                         f"{VLLM}.max_model_len": sc.workload.max_seq_len,
                         f"{VLLM}.enforce_eager": sc.runtime.engine == "eager"}
    if sc.runtime.engine == "sglang":
        notes.append("runtime.engine sglang: exported as NeMo-RL's vLLM generation (its SGLang "
                     "backend's keys are not in docs/exports.md §5); priced as SGLang")
    if sc.runtime.engine == "vllm-v0":
        overhead = ENGINES["vllm-v0"].step_overhead_s * 1e3
        notes.append(f"runtime.engine vllm-v0: the plan priced a V0-era engine ({overhead:g} ms "
                     "per decode step); NeMo-RL runs vLLM's V1 engine")
    if sc.rollout_weights == "fp8":
        o[f"{VLLM}.precision"] = "fp8"
        notes.append(f"rollout weights fp8 → {VLLM}.precision fp8 (the value is not in "
                     "docs/exports.md §5); training stays bf16")
    if sc.runtime.kv_cache_dtype == "fp8":
        o[f"{VLLM}.kv_cache_dtype"] = "fp8"
    if gen.max_num_seqs is not None:
        notes.append(f"generation max_num_seqs {gen.max_num_seqs}: NeMo-RL's vllm_cfg has no "
                     "such key (docs/exports.md §5); vLLM runs with its own default")
    if sc.runtime.old_log_probs == "rollout":
        notes.append("runtime.old_log_probs rollout: NeMo-RL recomputes them in the policy "
                     "(policy.logprob_batch_size), a forward the plan did not price")
    replica = gen.tp * gen.pp * (gen.ep // gen.tp if gen.ep > 1 else 1)
    notes += generation_notes(v, gen, replica, "NeMo-RL")
    return o


def _placement(v: PlanView, runs: PlanInput, gen: Layout, train: Layout,
               notes: list[str]) -> dict[str, Any]:
    """Generation on the policy's GPUs, or on nodes of its own (async GRPO off-policy)."""
    inter = runs.inter_model
    if gen.group == train.group:
        if v.inter.offload_during_generation:
            notes.append("offload_during_generation: NeMo-RL moves the policy's state off the "
                         "GPUs for generation on its own when co-located (no key)")
        return {f"{PLACEMENT}.enabled": True}
    gpus = next(g.gpus for g in runs.groups if g.name == gen.group)
    per_node = v.cluster_of(gen.group).gpus_per_node
    nodes, per = nodes_for(gpus, per_node,
                           f"{PLACEMENT}.resources.gpus_per_node (group {gen.group})")
    trainers = next(g.gpus for g in runs.groups if g.name == train.group)
    if per < per_node and trainers > per_node:
        raise ExportError(f"{PLACEMENT}.resources: generation's {gpus} GPUs are part of a node "
                          f"beside a policy on {trainers} GPUs: on more than one node NeMo-RL "
                          f"gives generation whole nodes of {per_node}; make group {gen.group} "
                          f"a multiple of {per_node}")
    o: dict[str, Any] = {f"{PLACEMENT}.enabled": False,
                         f"{PLACEMENT}.resources.num_nodes": nodes,
                         f"{PLACEMENT}.resources.gpus_per_node": per}
    if inter.staleness:
        # docs/exports.md §5: async GRPO goes with the importance-sampling correction
        o |= {f"{ASYNC}.enabled": True, f"{ASYNC}.max_trajectory_age_steps": inter.staleness,
              f"{ASYNC}.in_flight_weight_updates": inter.partial_rollout,
              "loss_fn.use_importance_sampling_correction": True}
    return o

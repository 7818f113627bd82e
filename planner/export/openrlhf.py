"""OpenRLHF: a bash script running `train_ppo_ray` (PPO, GRPO, DAPO, RLOO) or `train_dpo` (DPO).

Flags and constraints: docs/exports.md §2 and OpenRLHF's argument parsers (planner/export/keys/).
Two naming eras: 0.10.2–0.11.2 (dotted, `--vllm.tensor_parallel_size`; 0.11.2, the newest
release, is the default) and v0.9.5 (flat, `--vllm_tensor_parallel_size`), still in use.
OpenRLHF trains with DeepSpeed (ZeRO, AutoTP, ring attention: no pipeline parallelism) and gives
each role its own GPUs unless it co-locates all models, actor + reference, or critic + reward.
"""

from __future__ import annotations

from typing import Any

from planner.cost.constants import ENGINES
from planner.cost.rollout_stage import vllm_kv_tokens
from planner.export.base import (
    Export,
    ExportError,
    PlanView,
    generation_notes,
    generation_pp_refusal,
    model_path,
    nodes_for,
    shell_script,
    shell_value,
    train_batch,
)
from planner.export.capabilities import capabilities
from planner.export.keys import VERSIONS, check_keys
from planner.plan import Layout, PlanInput
from planner.specs.scenario import Scenario
from planner.specs.workload import Family

FLAT_VERSIONS = ("0.9.5",)  # flat flag names; every other version parses the dotted ones

# One concept → its flag in (v0.9.5, 0.11.2), docs/exports.md §2.2 (train_ppo_ray) and §2.3
# (train_dpo).
# None: the version has no such flag. The DeepSpeed and batch flags are the same in both scripts.
SHARED_FLAGS: dict[str, tuple[str | None, str | None]] = {
    "zero": ("--zero_stage", "--ds.zero_stage"),
    "adam_offload": ("--adam_offload", "--ds.adam_offload"),
    "ds_tp": ("--ds_tensor_parallel_size", "--ds.tensor_parallel_size"),
    "ring": ("--ring_attn_size", "--ds.ring_attn_size"),
    "train_batch": ("--train_batch_size", "--train.batch_size"),
    "micro_train": ("--micro_train_batch_size", "--train.micro_batch_size"),
    "param_dtype": ("--param_dtype", "--ds.param_dtype"),
}
PPO_FLAGS: dict[str, tuple[str | None, str | None]] = SHARED_FLAGS | {
    "actor_nodes": ("--actor_num_nodes", "--actor.num_nodes"),
    "actor_gpus": ("--actor_num_gpus_per_node", "--actor.num_gpus_per_node"),
    "critic_nodes": ("--critic_num_nodes", "--critic.num_nodes"),
    "critic_gpus": ("--critic_num_gpus_per_node", "--critic.num_gpus_per_node"),
    "reference_nodes": ("--ref_num_nodes", "--ref.num_nodes"),
    "reference_gpus": ("--ref_num_gpus_per_node", "--ref.num_gpus_per_node"),
    "reward_nodes": ("--reward_num_nodes", "--reward.num_nodes"),
    "reward_gpus": ("--reward_num_gpus_per_node", "--reward.num_gpus_per_node"),
    "vllm_engines": ("--vllm_num_engines", "--vllm.num_engines"),
    "vllm_tp": ("--vllm_tensor_parallel_size", "--vllm.tensor_parallel_size"),
    "vllm_memory": ("--vllm_gpu_memory_utilization", "--vllm.gpu_memory_utilization"),
    "vllm_sleep": ("--vllm_enable_sleep", "--vllm.enable_sleep"),
    "ds_sleep": ("--deepspeed_enable_sleep", "--ds.enable_sleep"),
    "colocate_all": ("--colocate_all_models", "--train.colocate_all"),
    "colocate_actor_ref": ("--colocate_actor_ref", "--train.colocate_actor_ref"),
    "colocate_critic_reward": ("--colocate_critic_reward", "--train.colocate_critic_reward"),
    "reference_offload": ("--ref_reward_offload", "--ref.offload"),
    "reward_offload": ("--ref_reward_offload", "--reward.offload"),
    "gradient_checkpointing": ("--gradient_checkpointing", "--actor.gradient_checkpointing_enable"),
    "async": ("--async_train", "--train.async_enable"),
    "async_queue": ("--async_queue_size", "--train.async_queue_size"),
    # docs/exports.md §2.2 lists --partial_rollout for ≤ v0.9.5, but v0.9.5's parser (shipped key
    # list) has no such flag: only the dotted releases can switch partial rollouts on.
    "partial": (None, "--train.partial_rollout_enable"),
    "enforce_eager": ("--enforce_eager", "--vllm.enforce_eager"),
    "estimator": ("--advantage_estimator", "--algo.advantage.estimator"),
    "samples": ("--n_samples_per_prompt", "--rollout.n_samples_per_prompt"),
    "rollout_batch": ("--rollout_batch_size", "--rollout.batch_size"),
    "micro_rollout": ("--micro_rollout_batch_size", "--rollout.micro_batch_size"),
    "prompt_max_len": ("--prompt_max_len", None),
    "max_new_tokens": ("--generate_max_len", "--rollout.max_new_tokens"),
    "max_len": (None, "--data.max_len"),  # dotted releases: prompt + response
    "init_kl": ("--init_kl_coef", "--algo.kl.init_coef"),
    "kl_loss": ("--use_kl_loss", "--algo.kl.use_loss"),
    "actor_model": ("--pretrain", "--actor.model_name_or_path"),
    "critic_model": ("--critic_pretrain", "--critic.model_name_or_path"),
    "reward_model": ("--reward_pretrain", "--reward.model_name_or_path"),
}
DPO_FLAGS: dict[str, tuple[str | None, str | None]] = SHARED_FLAGS | {
    "actor_model": ("--pretrain", "--model.model_name_or_path"),
    "reference_model": ("--ref_pretrain", "--ref.model_name_or_path"),
    "reference_offload": ("--ref_offload", "--ref.offload"),
    "max_len": ("--max_len", "--data.max_len"),
    "gradient_checkpointing": ("--gradient_checkpointing", "--model.gradient_checkpointing_enable"),
}

# --advantage_estimator per algorithm (docs/exports.md §2.2: GRPO = group_norm). OpenRLHF has no
# ReMax (greedy-rollout baseline).
ESTIMATOR = {"ppo": "gae", "grpo": "group_norm", "dapo": "group_norm", "rloo": "rloo"}


# What OpenRLHF runs as planned, per release: its presets
# (planner/frameworks/presets/openrlhf@*.yaml; 0.9.5 has no partial-rollout flag)
RELEASE = f"openrlhf@{VERSIONS['openrlhf'][0]}"  # its preset: capabilities(RELEASE)


class Args:
    """Flags by concept, rendered for one OpenRLHF version."""

    def __init__(self, table: dict[str, tuple[str | None, str | None]], version: str):
        self.table, self.era = table, 0 if version in FLAT_VERSIONS else 1
        self.values: dict[str, Any] = {}  # flag → value (True: a switch)

    def flag(self, concept: str) -> str | None:
        """The version's flag for `concept`; None when it has none."""
        return self.table[concept][self.era]

    def set(self, concept: str, value: Any) -> None:
        flag = self.flag(concept)
        if flag is not None and value is not False and value is not None:
            self.values[flag] = value

    def is_set(self, concept: str) -> bool:
        return self.flag(concept) in self.values

    def words(self) -> list[str]:
        return [flag if value is True else f"{flag} {shell_value(value)}"
                for flag, value in self.values.items()]


def export_openrlhf(plan: dict[str, Any], sc: Scenario, version: str) -> Export:
    if sc.family is Family.SFT:  # openrlhf.cli.train_sft exists; its script is not written
        raise ExportError("OpenRLHF's train_ppo_ray and train_dpo do not run sft, and its "
                          "train_sft (openrlhf.cli.train_sft) is not exported")
    v = PlanView(plan, sc)
    return (_dpo if sc.family is Family.DPO else _ppo)(v, version)


def _training_checks(role: str, layout: Layout, notes: list[str]) -> None:
    if capabilities(RELEASE).refusal("training", layout, None, f"layouts.{role}.training"):
        raise ExportError(f"layouts.{role}.training.pp {layout.pp}: OpenRLHF's DeepSpeed trainer "
                          "has no pipeline parallelism; re-plan with pp 1")
    if layout.ep > 1:
        notes.append(f"{role} training ep {layout.ep}: OpenRLHF has no expert-parallel flag; "
                     "ZeRO shards the experts instead")
    if layout.offload in ("params", "both"):
        notes.append(f"{role} parameter offload: OpenRLHF has no flag for it (only optimizer "
                     "offload, --adam_offload)")
    if layout.checkpointing == "selective":
        notes.append(f"{role} selective recomputation → full gradient checkpointing")


def _ppo(v: PlanView, version: str) -> Export:
    sc, w, notes, header = v.sc, v.sc.workload, [], []
    if sc.algorithm not in capabilities(RELEASE).algorithms:
        raise ExportError(f"OpenRLHF has no {sc.algorithm} advantage estimator (it has "
                          "gae, rloo, reinforce(_baseline), group_norm, dr_grpo)")
    if v.inter.shared_actor_critic and not capabilities(RELEASE).options.shared_actor_critic:
        raise ExportError("inter_model.shared_actor_critic: OpenRLHF has no critic head on the "
                          "actor; re-plan with search.allow_shared_actor_critic false")
    if ESTIMATOR[sc.algorithm] != "gae" and w.samples_per_prompt < 2:
        raise ExportError(f"{ESTIMATOR[sc.algorithm]} needs n_samples_per_prompt > 1; set "
                          "workload.samples_per_prompt to 2 or more")
    a = Args(PPO_FLAGS, version)
    train, gen = v.need("actor", "training"), v.need("actor", "generation")
    trains = {role: v.need(role, "training") for role in v.trainable}
    for role, layout in trains.items():
        _training_checks(role, layout, notes)
    if capabilities(RELEASE).refusal("generation", gen, sc.actor, "layouts.actor.generation"):
        raise generation_pp_refusal("layouts.actor.generation.pp", gen.pp,
                                    "OpenRLHF's vLLM engines have no pipeline-parallel flag", sc)
    if gen.cp > 1 or gen.ep > 1:
        notes.append(f"generation cp {gen.cp}/ep {gen.ep}: OpenRLHF's vLLM engines take tensor "
                     "parallelism only")

    # Placement: which GPUs each role gets.
    groups = {"actor": train.group, "rollout": gen.group}
    if sc.critic is not None:
        groups["critic"] = trains["critic"].group
    if sc.reference is not None:
        groups["reference"] = v.need("reference", "assessment").group
    if sc.reward_kind == "model":
        groups["reward"] = v.need("reward", "assessment").group
    colocate_all = len(set(groups.values())) == 1
    a.set("colocate_all", colocate_all)
    if not colocate_all:
        a.set("colocate_actor_ref", groups.get("reference") == groups["actor"])
        a.set("colocate_critic_reward", "critic" in groups and
              groups.get("reward") == groups["critic"])
        notes += _placement_notes(groups)
    for role, group in groups.items():
        if role != "rollout":
            nodes, per_node = nodes_for(v.group_gpus(group), sc.cluster.gpus_per_node,
                                        f"{role} (group {group})")
            a.set(f"{role}_nodes", nodes)
            a.set(f"{role}_gpus", per_node)
    run_async = _asynchrony(v, a, version, colocate_all, notes)
    actor_gpus = v.group_gpus(train.group)
    if colocate_all and not run_async and actor_gpus != gen.dp * gen.tp:
        raise ExportError(f"colocated: actor GPUs {actor_gpus} must equal vllm_num_engines "
                          f"{gen.dp} × vllm_tensor_parallel_size {gen.tp} (OpenRLHF checks it); "
                          "re-plan generation to use the whole group")
    _check_ray_gpus(v, groups, a, gen, colocate_all, run_async)
    _engines(v, a, gen, colocate_all, run_async, notes, header)

    # DeepSpeed training: one setting for every trained model.
    a.set("zero", train.zero)
    a.set("adam_offload", train.offload in ("optimizer", "both"))
    a.set("ds_tp", train.tp)
    a.set("ring", train.cp)
    a.set("gradient_checkpointing", train.checkpointing != "none")
    batch_flags = a.table["train_batch"][a.era], a.table["micro_train"][a.era]
    batch = train_batch(sc, train, *batch_flags, notes)
    a.set("train_batch", batch.per_step)
    a.set("micro_train", batch.micro)
    if "critic" in trains:
        critic = trains["critic"]  # trains with the actor's micro-batch on its own ranks
        train_batch(sc, critic.model_copy(update={"micro_batch": train.micro_batch}),
                    *batch_flags, notes)
        differs = [f for f in ("zero", "tp", "cp", "micro_batch", "offload", "checkpointing")
                   if getattr(critic, f) != getattr(train, f)]
        if differs:
            notes.append(f"critic training differs from the actor's in {', '.join(differs)}; "
                         "OpenRLHF applies the actor's DeepSpeed settings to both")

    # Experience making (assessment): one micro-batch size for every forward.
    assess = [x for r in ("actor", "reference", "critic", "reward")
              if r in groups and (x := v.layout(r, "assessment"))]
    micro_rollout = min(x.micro_batch for x in assess)
    if len({x.micro_batch for x in assess}) > 1:
        notes.append(f"micro_rollout_batch_size {micro_rollout}: the smallest of the plan's "
                     "assessment micro-batches (OpenRLHF has one for all forwards)")
    if w.samples_per_prompt * w.prompts_per_step / micro_rollout < train.dp:
        raise ExportError(f"n_samples_per_prompt × rollout_batch_size / micro_rollout_batch_size "
                          f"must be ≥ actor GPUs / ring / tp = {train.dp}; use a smaller "
                          "assessment micro_batch")
    a.set("micro_rollout", micro_rollout)
    a.set("rollout_batch", w.prompts_per_step)
    a.set("samples", w.samples_per_prompt)
    a.set("estimator", ESTIMATOR[sc.algorithm])
    a.set("prompt_max_len", w.prompt_len)
    a.set("max_new_tokens", w.max_response)
    a.set("max_len", w.prompt_len + w.max_response)
    notes.append(f"prompt length {w.prompt_len} is the scenario's mean; raise the limit to your "
                 "longest prompt")
    # docs/exports.md §2.2 ties the reference to a positive KL coefficient.
    if sc.reference is None:
        a.set("init_kl", 0)
    elif sc.family is Family.GRPO:
        a.set("kl_loss", True)  # GRPO-style KL in the loss
    if w.ppo_epochs > 1:
        notes.append(f"ppo_epochs {w.ppo_epochs}: docs/exports.md names no OpenRLHF flag for PPO "
                     "epochs; set it yourself")

    a.set("actor_model", model_path(sc.actor, "actor"))
    if sc.critic is not None:
        a.set("critic_model", model_path(sc.critic, "critic"))
    if sc.reward_kind == "model":
        a.set("reward_model", model_path(sc.reward, "reward"))
        a.set("reward_offload", v.need("reward", "assessment").offload != "none")
    elif sc.reward_kind == "verifier":
        header.append("reward: a rule-based verifier; pass a reward server (--remote_rm_url / "
                      "--reward.remote_url) as an extra argument")
    if sc.reference is not None:
        a.set("reference_offload", v.need("reference", "assessment").offload != "none")
    a.set("param_dtype", "bf16")
    if v.inter.inter_stage_fusion or v.inter.intra_stage_fusion:
        notes.append("stage fusion: OpenRLHF has no setting to overlap stages as planned")

    check_keys("openrlhf-train_ppo_ray", version, list(a.values))
    runs = _runs(v, a, trains, micro_rollout, run_async)
    header = [f"OpenRLHF {version} train_ppo_ray (flags from openrlhf/cli/train_ppo_ray.py at "
              f"{version}); `ray job submit` reads the cluster address from RAY_ADDRESS",
              "add the dataset and save path as extra arguments", *header]
    command = "ray job submit -- python3 -m openrlhf.cli.train_ppo_ray"
    return Export(shell_script(header, notes, command, [*a.words(), '"$@"']), "sh", tuple(notes),
                  runs=runs.model_dump(mode="json", exclude_none=True))


def _deepspeed(v: PlanView, train: Layout, group: str, micro: int) -> Layout:
    """A trained model as OpenRLHF's DeepSpeed runs it: the actor's ZeRO stage, AutoTP and
    ring attention on every trained model, no pipeline or expert parallelism, optimizer
    offload only, full recomputation only."""
    return Layout(group=group, dp=v.group_gpus(group) // (train.tp * train.cp), tp=train.tp,
                  cp=train.cp, zero=train.zero, micro_batch=micro,
                  offload="optimizer" if train.offload in ("optimizer", "both") else "none",
                  checkpointing="full" if train.checkpointing != "none" else "none")


def _runs(v: PlanView, a: Args, trains: dict[str, Layout], micro_rollout: int,
          run_async: bool) -> PlanInput:
    """The plan as OpenRLHF runs this export: what `import` reads back from it. Frozen models
    run DeepSpeed's eval config (ZeRO-3 under --zero_stage 3, else ZeRO-0) with the trainers'
    TP and ring attention; every forward takes --micro_rollout_batch_size."""
    train = trains["actor"]
    layouts: dict[str, dict[str, Layout]] = {}
    for role, layout in trains.items():
        run = _deepspeed(v, train, layout.group, train.micro_batch)
        layouts[role] = {"training": run}
        if micro_rollout != run.micro_batch:
            layouts[role]["assessment"] = run.model_copy(update={"micro_batch": micro_rollout})
    for role in ("reference", "reward"):
        if role in v.sc.roles and (role != "reward" or v.sc.reward_kind == "model"):
            frozen = v.need(role, "assessment")
            layouts[role] = {"assessment": _deepspeed(v, train, frozen.group, micro_rollout)
                             .model_copy(update={"zero": 3 if train.zero == 3 else 0,
                                                 "offload": "none" if frozen.offload == "none"
                                                 else "params", "checkpointing": "none"})}
    gen = v.need("actor", "generation")
    run = gen.model_copy(update={"cp": 1, "ep": 1, "etp": None, "max_num_seqs": None})
    if (run.cp, run.ep) != (gen.cp, gen.ep):  # engines of TP only: a KV cache of their own
        run = run.model_copy(update={"kv_cache_tokens": vllm_kv_tokens(
            v.views[gen.group], run.model_copy(update={"kv_cache_tokens": None}),
            a.values[a.flag("vllm_memory")])})
    layouts["actor"]["generation"] = run
    queue = a.values.get(a.flag("async_queue"), 0) if run_async else 0
    inter = v.inter.model_copy(update={
        "staleness": queue, "partial_rollout": a.is_set("partial"),
        "offload_during_generation": a.is_set("ds_sleep"), "overlap_weight_sync": False,
        "inter_stage_fusion": False, "intra_stage_fusion": False})
    return v.input.model_copy(update={"layouts": layouts, "inter_model": inter})


def _check_ray_gpus(v: PlanView, groups: dict[str, str], a: Args, gen: Layout,
                    colocate_all: bool, run_async: bool) -> None:
    """The GPUs the command asks Ray for must be the plan's. OpenRLHF (train_ppo_ray.py
    `train`) gives each model group its own placement unless co-located (all models; actor +
    reference; critic + reward), and vLLM engines their own GPUs unless all models are
    co-located and training is synchronous."""
    asked = {"actor": v.group_gpus(groups["actor"])}
    shared = {"reference": "colocate_actor_ref", "reward": "colocate_critic_reward"}
    for role in ("reference", "critic", "reward"):
        if role in groups and not colocate_all and not (role in shared and
                                                        a.is_set(shared[role])):
            asked[role] = v.group_gpus(groups[role])
    if not (colocate_all and not run_async):
        asked["vLLM engines"] = gen.dp * gen.tp
    total = sum(asked.values())
    if total != v.gpus:
        parts = ", ".join(f"{role} {gpus}" for role, gpus in asked.items())
        more = "more" if total > v.gpus else "fewer"
        raise ExportError(f"OpenRLHF would ask Ray for {total} GPUs ({parts}), {more} than the "
                          f"plan's {v.gpus}: it co-locates only all models, actor + reference, "
                          "or critic + reward, and gives vLLM its own GPUs unless all models "
                          "share them synchronously; re-plan with such a placement")


def _asynchrony(v: PlanView, a: Args, version: str, colocate_all: bool,
                notes: list[str]) -> bool:
    """Set async training and partial rollouts; True when the run is asynchronous.

    OpenRLHF runs partial rollouts only with async training (docs/exports.md §2.2). A plan with
    partial rollouts at staleness 0 priced a synchronous step whose unfinished responses go on
    with the next weights (APRIL). The choice here: turn async on with a queue of one batch and
    say so. The scenario allows one step off-policy (rlplan prices partial rollouts only when
    search.max_staleness ≥ 1), and dropping them would lose the tail the plan saves. Where every
    model shares the GPUs, async would give vLLM GPUs of its own (more than the plan has), so the
    step stays synchronous, and a note says so.
    """
    inter, sc = v.inter, v.sc
    partial = inter.partial_rollout and a.flag("partial") is not None
    if inter.partial_rollout and not partial:
        notes.append(f"partial_rollout: OpenRLHF {version} has no partial-rollout flag (its "
                     "train_ppo_ray.py), so each step waits for every response, longer than "
                     f"priced; --framework-version {VERSIONS['openrlhf'][0]} has "
                     f"{PPO_FLAGS['partial'][1]}")
    queue = inter.staleness
    if partial and not queue:
        if sc.search.max_staleness < 1:  # as `rlplan evaluate` refuses it
            raise ExportError(f"inter_model.partial_rollout: OpenRLHF needs async training "
                              f"({a.flag('async')}) for partial rollouts, one step off-policy, "
                              "beyond search.max_staleness 0; allow it with max_staleness 1 or "
                              "set partial_rollout to false")
        queue = 1
        notes.append(f"partial_rollout at staleness 0: OpenRLHF needs async training for partial "
                     f"rollouts, so {a.flag('async')} and {a.flag('async_queue')} 1 are set: "
                     "generation may also run one whole batch ahead of training (one step "
                     f"off-policy, within search.max_staleness {sc.search.max_staleness}), not "
                     "the synchronous step the plan priced")
    if queue and colocate_all:
        # train_ppo_ray.py gives vLLM the shared placement group only when training is
        # synchronous: async on co-located GPUs would ask Ray for vLLM's GPUs a second time.
        what = "partial rollouts and " if partial else ""
        notes.append(f"{what}staleness {queue}: OpenRLHF runs async training only with vLLM on "
                     "GPUs of its own, and the plan co-locates every model; exported "
                     "synchronous, so each step waits for generation, longer than priced")
        return False
    if not queue:
        return False
    a.set("async", True)
    a.set("async_queue", queue)  # batches generation may run ahead
    a.set("partial", partial)
    if inter.overlap_weight_sync:
        notes.append("overlap_weight_sync: OpenRLHF's flags (shipped key lists) have none "
                     "for receiving weights while vLLM generates; its own sync applies")
    return True


def _engines(v: PlanView, a: Args, gen: Layout, colocate_all: bool, run_async: bool,
             notes: list[str], header: list[str]) -> None:
    """vLLM engines, one per generation replica: size, memory fraction, engine flavour."""
    fraction, why = v.vllm_memory_fraction()
    header.append(why)
    a.set("vllm_engines", gen.dp)
    a.set("vllm_tp", gen.tp)
    a.set("vllm_memory", fraction)
    notes.append(f"OpenRLHF has no vLLM max_num_seqs flag: the plan's {v.max_num_seqs(gen)} "
                 "concurrent sequences per engine are left to vLLM")
    if not run_async:
        a.set("vllm_sleep", colocate_all)  # free the KV cache while training shares the GPUs
    a.set("ds_sleep", colocate_all and v.inter.offload_during_generation)
    engine = v.sc.runtime.engine
    if engine == "sglang":
        overhead = ENGINES["vllm-v1"].step_overhead_s * 1e3
        notes.append("runtime.engine sglang: OpenRLHF's rollouts run on vLLM only; the plan "
                     "priced SGLang's overlapped scheduler (no host time between decode steps), "
                     f"vLLM V1 adds about {overhead:g} ms per step")
    elif engine == "eager":
        a.set("enforce_eager", True)
        notes.append(f"runtime.engine eager → {a.flag('enforce_eager')}: the plan priced an "
                     "engine without CUDA graphs; drop it where CUDA graphs work, generation is "
                     "then quicker")
    if v.sc.rollout_weights == "fp8":  # bf16 weights would take twice the memory planned
        raise ExportError("the plan rolls out with FP8 weights and OpenRLHF has no flag for "
                          "vLLM quantization; re-plan with --rollout-weights bf16")
    if v.sc.runtime.old_log_probs == "rollout":
        notes.append("runtime.old_log_probs rollout: OpenRLHF has no flag to take the engine's "
                     "log-probs; it recomputes them with the actor (a forward pass the plan "
                     "does not have)")
    if v.sc.runtime.kv_cache_dtype == "fp8":
        notes.append("runtime.kv_cache_dtype fp8: OpenRLHF has no flag for vLLM's "
                     "kv_cache_dtype; its KV cache stays bf16 and holds half the tokens planned "
                     "(more preemption, slower rollouts)")
    notes.extend(generation_notes(v, gen, gen.tp, "OpenRLHF"))


def _placement_notes(groups: dict[str, str]) -> list[str]:
    """Roles the plan co-locates that OpenRLHF places on separate GPUs."""
    pairs = ({"actor", "reference"}, {"critic", "reward"})
    notes = []
    for group in sorted(set(groups.values())):
        roles = {r for r, g in groups.items() if g == group}
        if len(roles) > 1 and roles not in pairs:
            notes.append(f"group {group} holds {', '.join(sorted(roles))}: OpenRLHF co-locates "
                         "only all models, actor + reference, or critic + reward — these get "
                         "separate GPUs, more than the plan uses")
    return notes


def _dpo(v: PlanView, version: str) -> Export:
    sc, w, notes = v.sc, v.sc.workload, []
    if sc.algorithm not in capabilities(RELEASE).algorithms:
        raise ExportError(f"OpenRLHF's train_dpo has no {sc.algorithm} loss (it has DPO and "
                          "IPO)")
    a = Args(DPO_FLAGS, version)
    train = v.need("actor", "training")
    _training_checks("actor", train, notes)
    a.set("actor_model", model_path(sc.actor, "actor"))
    if sc.reference is not None:
        ref = v.need("reference", "assessment")
        a.set("reference_model", model_path(sc.reference, "reference"))
        a.set("reference_offload", ref.offload != "none")
        if ref.group != train.group:
            notes.append(f"reference on group {ref.group}: OpenRLHF's DPO runs it on the "
                         "policy's GPUs")
    else:
        notes.append("OpenRLHF's train_dpo always loads a reference model (default: the policy)")
    a.set("zero", train.zero)
    a.set("adam_offload", train.offload in ("optimizer", "both"))
    a.set("ds_tp", train.tp)
    a.set("ring", train.cp)
    batch = train_batch(sc, train, a.table["train_batch"][a.era],
                        a.table["micro_train"][a.era], notes)
    a.set("train_batch", batch.per_step)
    a.set("micro_train", batch.micro)
    a.set("max_len", w.prompt_len + w.max_response)
    a.set("gradient_checkpointing", train.checkpointing != "none")
    a.set("param_dtype", "bf16")
    check_keys("openrlhf-train_dpo", version, list(a.values))
    gpus = v.group_gpus(train.group)
    header = [f"OpenRLHF {version} train_dpo (flags from openrlhf/cli/train_dpo.py at "
              f"{version}); batch sizes count preference pairs",
              f"the plan trains on {gpus} GPUs: the deepspeed launcher uses this host's GPUs, or "
              "a hostfile for several nodes", "add the dataset and save path as extra arguments"]
    command = "deepspeed --module openrlhf.cli.train_dpo"
    return Export(shell_script(header, notes, command, [*a.words(), '"$@"']), "sh", tuple(notes))

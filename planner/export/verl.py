"""verl: a bash script running `verl.trainer.main_ppo` with one Hydra override per line.

Keys: verl 0.9.1's generated trainer configs (planner/export/keys/, tools/refresh_keys.py);
constraints: docs/exports.md §1 and 0.9.1's V1 trainer (verl/trainer/ppo/v1/). verl puts actor,
reference and critic on one "global pool" of GPUs, the actor's training group here, so the
training layouts are exported as planned. Generation shares that pool (the hybrid engine), or,
for a plan one step off-policy with its own rollout group, gets a standalone rollout pool
(`trainer.v1.trainer_mode=separate_async`); a reward model may get its own pool. The pools must
add up to the plan's GPUs, or the export refuses (verl_pools.py).
"""

from __future__ import annotations

from typing import Any

from planner.cost.pipeline_split import CONFIG_FIELDS, stage_layer_counts
from planner.cost.rollout_stage import vllm_kv_tokens
from planner.export.base import (
    Export,
    ExportError,
    PlanView,
    generation_notes,
    generation_pp_refusal,
    megatron_pipeline,
    model_path,
    nodes_for,
    shell_script,
    shell_value,
    split_note,
    train_batch,
)
from planner.export.capabilities import capabilities
from planner.export.keys import check_keys
from planner.export.verl_pools import (
    RELEASE,
    REWARD,
    ROLLOUT,
    Pools,
    offload_notes,
    reward_overrides,
    rollout_pool,
)
from planner.plan import Layout, PlanInput, expert_tp
from planner.specs.model import ModelSpec
from planner.specs.scenario import Scenario
from planner.specs.workload import Family

# algorithm.adv_estimator per scenario algorithm (docs/exports.md §1.3: verl's AdvantageEstimator).
# DAPO is GRPO's estimator with recipe settings (clip-higher, dynamic sampling) left to the user.
ADV_ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "dapo": "grpo", "rloo": "rloo", "remax": "remax"}

# Where each trainable role's training keys live (docs/exports.md §1.4, §1.7).
FSDP_CONFIG = {"actor": "actor_rollout_ref.actor.fsdp_config", "critic": "critic.fsdp"}
ULYSSES = {"actor": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
           "critic": "critic.ulysses_sequence_parallel_size"}
GRADIENT_CHECKPOINTING = {"actor": "actor_rollout_ref.model.enable_gradient_checkpointing",
                          "critic": "critic.model.enable_gradient_checkpointing"}
MEGATRON = {"actor": "actor_rollout_ref.actor.megatron", "critic": "critic.megatron",
            "reference": "actor_rollout_ref.ref.megatron"}
MICRO_BATCH = {"actor": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
               "critic": "critic.ppo_micro_batch_size_per_gpu"}
MINI_BATCH = "actor_rollout_ref.actor.ppo_mini_batch_size"  # the critic inherits it


def needs_megatron(layouts: list[Layout]) -> bool:
    """FSDP has no tensor, pipeline or expert parallelism (docs/exports.md §1.12)."""
    return any(x.tp > 1 or x.pp > 1 or x.ep > 1 for x in layouts)



def export_verl(plan: dict[str, Any], sc: Scenario, version: str) -> Export:
    if sc.algorithm not in capabilities(RELEASE).algorithms:
        raise ExportError(f"verl's main_ppo has no {sc.algorithm} trainer (it runs PPO-style "
                          "algorithms)")
    if sc.family is Family.SFT:  # verl 0.9.1's verl.trainer.sft_trainer has its own config
        raise ExportError("verl's main_ppo runs RL algorithms; its SFT trainer "
                          "(verl.trainer.sft_trainer, sft_trainer_engine.yaml) is not exported")
    v = PlanView(plan, sc)
    if v.inter.shared_actor_critic and not capabilities(RELEASE).options.shared_actor_critic:
        raise ExportError("inter_model.shared_actor_critic: verl has no critic head on the "
                          "actor; re-plan with search.allow_shared_actor_critic false")
    w, notes, comments = sc.workload, [], []
    trains = {role: v.need(role, "training") for role in v.trainable}
    gen = v.need("actor", "generation")
    megatron = needs_megatron(list(trains.values()))
    schema = "verl-megatron" if megatron else "verl-fsdp"
    pool = trains["actor"].group
    pool_gpus = v.group_gpus(pool)
    nnodes, per_node = nodes_for(pool_gpus, v.cluster_of(pool).gpus_per_node,
                                 f"trainer.n_gpus_per_node (group {pool})")
    pools = Pools(v, pool)

    o: dict[str, Any] = {"algorithm.adv_estimator": ADV_ESTIMATOR[sc.algorithm]}
    # The reference runs iff a KL term uses it (docs/exports.md §1.3, role activation).
    if sc.family is Family.PPO:
        o["algorithm.use_kl_in_reward"] = sc.reference is not None
    else:
        o["actor_rollout_ref.actor.use_kl_loss"] = sc.reference is not None
    if w.prompts_per_step % w.mini_batches:
        raise ExportError(f"{MINI_BATCH} counts prompts: {w.prompts_per_step} prompts per step "
                          f"do not split into {w.mini_batches} mini-batches; make "
                          "workload.prompts_per_step a multiple of mini_batches")
    o |= {"data.train_batch_size": w.prompts_per_step, "data.max_prompt_length": w.prompt_len,
          "data.max_response_length": w.max_response,
          "actor_rollout_ref.model.path": model_path(sc.actor, "actor"),
          "actor_rollout_ref.model.use_remove_padding": True,  # Ulysses SP needs it (§1.9)
          MINI_BATCH: w.prompts_per_step // w.mini_batches,
          "actor_rollout_ref.actor.ppo_epochs": w.ppo_epochs}
    notes.append(f"data.max_prompt_length {w.prompt_len} is the scenario's mean prompt length; "
                 "raise it to your longest prompt")

    for role, layout in trains.items():
        if role == "critic":
            o["critic.model.path"] = model_path(sc.critic, "critic")
        o[MICRO_BATCH[role]] = layout.micro_batch
        o |= (_megatron_training if megatron else _fsdp_training)(role, layout, v, notes)
        _check_batches(sc, role, layout, pool_gpus, megatron, notes)
        if layout.group != pool:  # its memory would land on the actor's GPUs, unplanned
            raise ExportError(f"layouts.{role}.training.group {layout.group}: verl trains "
                              f"every model on its global pool, the actor's group {pool}; "
                              f"re-plan {role} training on group {pool}")

    ran: dict[str, Layout] = {}  # the reference as verl runs it (`_assessment`)
    o |= _assessment(v, megatron, trains["actor"], pool, pool_gpus, notes, ran)
    separate = gen.group != pool and v.inter.staleness >= 1
    o |= _rollout(v, gen, pool, pool_gpus, separate, notes, comments)
    if separate:
        o |= rollout_pool(v, gen, pools, notes)
    o |= reward_overrides(v, pools, separate, notes, comments)
    o |= {"trainer.nnodes": nnodes, "trainer.n_gpus_per_node": per_node}
    notes += _inter_model_notes(v, separate)
    pools.check()  # the pools add up to the plan's GPUs

    runs = _runs(v, trains, megatron, pool, separate, ran, o)
    args = [f"{k}={shell_value(x)}" for k, x in o.items()]
    check_keys(schema, version, list(o))
    command = "python3 -m verl.trainer.main_ppo"
    if megatron:  # docs/exports.md §1.1: the Megatron backend's config file
        command += " --config-path=config --config-name=ppo_megatron_trainer.yaml"
    config = "_generated_ppo_megatron_trainer.yaml" if megatron else "_generated_ppo_trainer.yaml"
    header = [f"verl {version}, {'Megatron' if megatron else 'FSDP'} backend; keys from "
              f"verl {version}'s {config}",
              f"{sc.algorithm} plan on {v.gpus} GPUs ({pools.describe()}); set "
              "data.train_files and data.val_files: extra overrides pass through as arguments",
              *comments]
    return Export(shell_script(header, notes, command, [*args, '"$@"']), "sh", tuple(notes),
                  runs=runs.model_dump(mode="json", exclude_none=True))


def _runs(v: PlanView, trains: dict[str, Layout], megatron: bool, pool: str, separate: bool,
          ran: dict[str, Layout], o: dict[str, Any]) -> PlanInput:
    """The plan as verl runs this export: what `import` reads back from it."""
    layouts: dict[str, dict[str, Layout]] = {}
    for role, layout in trains.items():
        params, optimizer = _offloads(layout, v)
        offload = {(True, True): "both", (False, True): "optimizer",
                   (True, False): "params"}.get((params, optimizer), "none")
        if megatron:
            update = {"zero": min(layout.zero, 1), "sp": layout.sp and layout.tp > 1}
        else:  # reshard_after_forward: ZeRO-3, else ZeRO-2; full recomputation only
            update = {"zero": 3 if layout.zero == 3 else 2,
                      "checkpointing": "full" if layout.checkpointing != "none" else "none"}
        layouts[role] = {"training": layout.model_copy(update={**update, "offload": offload})}
    actor = v.layout("actor", "assessment")
    if actor is not None and actor.micro_batch != layouts["actor"]["training"].micro_batch:
        layouts["actor"]["assessment"] = layouts["actor"]["training"].model_copy(
            update={"micro_batch": actor.micro_batch})
    if "reference" in ran:
        layouts["reference"] = {"assessment": ran["reference"]}
    gen = v.need("actor", "generation")
    group = gen.group if separate else pool  # replicas fill their pool, TP only
    run = gen.model_copy(update={"group": group, "dp": v.group_gpus(group) // gen.tp, "cp": 1,
                                 "max_num_seqs": o[f"{ROLLOUT}.max_num_seqs"]})
    if (run.group, run.dp, run.cp) != (gen.group, gen.dp, gen.cp):  # a KV cache of its own
        run = run.model_copy(update={"kv_cache_tokens": vllm_kv_tokens(
            v.views[group], run.model_copy(update={"kv_cache_tokens": None}),
            o[f"{ROLLOUT}.gpu_memory_utilization"])})
    layouts["actor"]["generation"] = run
    if f"{REWARD}.rollout.tensor_model_parallel_size" in o:
        rm = v.need("reward", "assessment")
        own = o.get(f"{REWARD}.enable_resource_pool", False)
        group, tp = (rm.group if own else pool), o[f"{REWARD}.rollout.tensor_model_parallel_size"]
        sleeps = o[f"{REWARD}.rollout.free_cache_engine"]
        layouts["reward"] = {"assessment": Layout(  # micro-batch: not a verl key
            group=group, dp=v.group_gpus(group) // tp, tp=tp,
            offload="sleep" if sleeps else "none")}
    inter = v.inter.model_copy(update={
        "staleness": v.inter.staleness if separate else 0, "partial_rollout": separate,
        "overlap_weight_sync": False, "inter_stage_fusion": False, "intra_stage_fusion": False,
        "offload_during_generation": False})  # verl offloads per model: the layouts' offload
    return v.input.model_copy(update={"layouts": layouts, "inter_model": inter})


def _offloads(layout: Layout, v: PlanView) -> tuple[bool, bool]:
    """(params, optimizer state) offload. verl offloads a model's state whenever it is not
    computing, which is also what offload_during_generation asks of the co-located models."""
    swap = v.inter.offload_during_generation
    params = swap or layout.offload in ("params", "both")
    optimizer = swap or layout.offload in ("optimizer", "both")
    return params, optimizer


def _fsdp_training(role: str, layout: Layout, v: PlanView, notes: list[str]) -> dict[str, Any]:
    cfg = FSDP_CONFIG[role]
    params, optimizer = _offloads(layout, v)
    if layout.zero < 2:
        notes.append(f"{role} training zero {layout.zero}: FSDP always shards gradients and "
                     "optimizer state; reshard_after_forward=False (ZeRO-2-like) is the closest")
    if layout.cp > 1:
        notes.append(f"{role} training cp {layout.cp} → Ulysses sequence parallel (verl's FSDP "
                     "backend has no ring attention)")
    if layout.checkpointing == "selective":
        notes.append(f"{role} selective recomputation → full gradient checkpointing (FSDP has "
                     "no selective mode)")
    # reshard_after_forward: true ≈ ZeRO-3, false ≈ ZeRO-2 (docs/exports.md §1.12)
    return {f"{cfg}.param_offload": params, f"{cfg}.optimizer_offload": optimizer,
            f"{cfg}.reshard_after_forward": layout.zero == 3, ULYSSES[role]: layout.cp,
            GRADIENT_CHECKPOINTING[role]: layout.checkpointing != "none"}


def _megatron_parallel(role: str, layout: Layout, sc: Scenario, notes: list[str],
                       actor: Layout | None = None) -> dict[str, Any]:
    """Parallel degrees of one Megatron-backed role (training, or the reference's forward; for
    the reference, `actor` is the actor's training layout, whose settings it inherits)."""
    root = MEGATRON[role]
    o: dict[str, Any] = {f"{root}.tensor_model_parallel_size": layout.tp,
                         f"{root}.pipeline_model_parallel_size": layout.pp,
                         f"{root}.context_parallel_size": layout.cp,
                         f"{root}.expert_model_parallel_size": layout.ep}
    if layout.vp > 1:  # interleaved pipeline chunks per rank (Megatron's virtual pipeline)
        o[f"{root}.virtual_pipeline_model_parallel_size"] = layout.vp
    elif actor is not None and actor.vp > 1:  # the reference would inherit the actor's chunks
        o[f"{root}.virtual_pipeline_model_parallel_size"] = None
    spec = sc.critic if role == "critic" else sc.actor
    if spec.moe is not None:  # verl's default (null) is Megatron's: etp = tp
        o[f"{root}.expert_tensor_parallel_size"] = expert_tp(layout, "training")
    return o | _split_overrides(role, layout, spec, notes, actor)


def _split_overrides(role: str, layout: Layout, spec: ModelSpec, notes: list[str],
                     actor: Layout | None) -> dict[str, Any]:
    """The uneven pipeline split of one Megatron-backed role as override_transformer_config
    keys. The reference inherits the actor's whole override_transformer_config (verl 0.9.1:
    `${oc.select:actor_rollout_ref.actor.megatron.override_transformer_config,{}}`): nothing is
    written for it when its stages hold the actor's layers (whichever of Megatron's mechanisms
    the actor's chunks need, the same counts per rank); else its four keys are forced (`++`),
    which replaces the inherited block."""
    stage = "assessment" if role == "reference" else "training"
    split = megatron_pipeline(spec, layout, f"layouts.{role}.{stage}")
    if split.uneven:
        notes.append(split_note(role, spec, layout))
    values = (split.first, split.last, split.embedding_in_split or None,
              split.loss_in_split or None)
    cfg = f"{MEGATRON[role]}.override_transformer_config"
    if actor is None:
        return {f"+{cfg}.{k}": x for k, x in zip(CONFIG_FIELDS, values, strict=True)
                if x is not None}
    if _stage_layers(spec, layout) == _stage_layers(spec, actor):
        return {}
    notes.append(f"{role}: its pipeline split differs from the actor's, so its Megatron "
                 "override_transformer_config is set apart and no longer inherits the actor's "
                 "other overrides (attention_backend, recompute) — Megatron's defaults there")
    return {f"++{cfg}.{k}": x for k, x in zip(CONFIG_FIELDS, values, strict=True)}


def _stage_layers(spec: ModelSpec, layout: Layout) -> list[int]:
    return stage_layer_counts(spec.num_hidden_layers, layout.pp, layout.first_stage_layers,
                              layout.last_stage_layers)


def _megatron_training(role: str, layout: Layout, v: PlanView,
                       notes: list[str]) -> dict[str, Any]:
    root = MEGATRON[role]
    params, optimizer = _offloads(layout, v)
    o = _megatron_parallel(role, layout, v.sc, notes)
    o |= {f"{root}.sequence_parallel": layout.sp,
          f"{root}.use_distributed_optimizer": layout.zero >= 1,
          f"{root}.param_offload": params, f"{root}.optimizer_offload": optimizer}
    if layout.zero >= 2:  # refused where ZeRO-1 would not fit the GPU
        v.refuse_unless_fits(role, "training", layout.model_copy(update={"zero": 1}),
                             f"{root}.use_distributed_optimizer (ZeRO-1; the plan has zero "
                             f"{layout.zero})")
        notes.append(f"{role} training zero {layout.zero}: Megatron's distributed optimizer "
                     "shards only optimizer state (ZeRO-1); gradients"
                     f"{' and parameters' if layout.zero == 3 else ''} stay replicated across "
                     "data-parallel ranks — more memory per GPU than planned, still within it")
    recompute = f"{root}.override_transformer_config"
    if layout.checkpointing == "full":  # every layer recomputed
        o |= {f"{recompute}.recompute_granularity": "full",
              f"{recompute}.recompute_method": "uniform", f"{recompute}.recompute_num_layers": 1}
    elif layout.checkpointing == "selective":
        o[f"{recompute}.recompute_granularity"] = "selective"
    return o


def _check_batches(sc: Scenario, role: str, layout: Layout, pool_gpus: int, megatron: bool,
                   notes: list[str]) -> None:
    """verl's start-up checks (docs/exports.md §1.9, verl/utils/config.py validate_config)."""
    if megatron and pool_gpus % (layout.tp * layout.pp * layout.cp):
        raise ExportError(f"{MEGATRON[role]}: trainer GPUs {pool_gpus} are not a multiple of "
                          f"TP×PP×CP = {layout.tp * layout.pp * layout.cp}; re-plan {role} "
                          "training on the actor's group")
    sequences = sc.sequences_per_step
    if megatron:
        minimal = layout.dp * layout.micro_batch
        what = f"megatron DP {layout.dp} × {MICRO_BATCH[role]} {layout.micro_batch}"
    else:
        minimal, what = pool_gpus, "the trainer GPU count"
    if sequences % minimal:
        raise ExportError(f"data.train_batch_size × rollout.n = {sequences} is not a multiple "
                          f"of {what} = {minimal}; change workload.prompts_per_step or the "
                          "plan's micro_batch")
    # The mini-batch is normalised per GPU and must hold whole micro-batches.
    train_batch(sc, layout, f"{MINI_BATCH} × rollout.n", MICRO_BATCH[role], notes)


def _assessment(v: PlanView, megatron: bool, actor: Layout, pool: str, pool_gpus: int,
                notes: list[str], ran: dict[str, Layout]) -> dict[str, Any]:
    """Old log-probs (actor), reference log-probs and critic values: micro-batches, and the
    reference's own layout (as verl runs it, into `ran`)."""
    o: dict[str, Any] = {}
    o[f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu"] = v.need("actor", "assessment").micro_batch
    if v.sc.reference is not None:
        ref = v.need("reference", "assessment")
        o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] = ref.micro_batch
        offload = ref.offload != "none" or v.inter.offload_during_generation
        if megatron:  # param_offload: loaded for the pass, offloaded after (sleep)
            ref = _megatron_reference(v, ref, actor, pool_gpus, notes)
            o |= _megatron_parallel("reference", ref, v.sc, notes, actor)
            o[f"{MEGATRON['reference']}.param_offload"] = offload
            o[f"{MEGATRON['reference']}.sequence_parallel"] = ref.sp  # verl's default: on
            ran["reference"] = ref.model_copy(update={
                "sp": ref.sp and ref.tp > 1, "offload": "sleep" if offload else "none"})
        else:
            if needs_megatron([ref]):
                notes.append(f"reference tp {ref.tp}/pp {ref.pp}/ep {ref.ep}: verl's FSDP "
                             "backend shards the reference over all trainer GPUs instead")
            o |= {"actor_rollout_ref.ref.fsdp_config.param_offload": offload,
                  "actor_rollout_ref.ref.ulysses_sequence_parallel_size": ref.cp}
            dp = pool_gpus // ref.cp  # FSDP shards it over the pool (ZeRO-3)
            ran["reference"] = Layout(group=pool, dp=dp, cp=ref.cp, zero=3 if dp > 1 else 0,
                                      micro_batch=ref.micro_batch, offload="params")
        # the plan's offload against the layout verl runs the reference in (its preset's rules)
        notes += offload_notes(v, "reference", ran["reference"].model_copy(
            update={"offload": v.need("reference", "assessment").offload}))
        if ref.group != pool:
            notes.append(f"reference runs on verl's global pool (group {pool}), not on group "
                         f"{ref.group}: verl always co-locates it with the actor")
    if v.sc.critic is not None:
        values = v.need("critic", "assessment")
        if megatron:
            notes.append(f"critic values forward: the Megatron schema has no forward micro-batch "
                         f"key; the plan's micro_batch {values.micro_batch} is not set")
        else:
            o["critic.forward_micro_batch_size_per_gpu"] = values.micro_batch
    return o


def _megatron_reference(v: PlanView, ref: Layout, actor: Layout, pool_gpus: int,
                        notes: list[str]) -> Layout:
    """The reference's layout under verl's Megatron backend, which keeps a whole copy of the
    weights per TP × PP group: a plan sharding them over data-parallel ranks (ZeRO-3) takes the
    actor's TP/PP/EP instead when that fits; a layout that cannot fit is refused."""
    run = ref.model_copy(update={"dp": pool_gpus // (ref.tp * ref.pp * ref.cp), "zero": 0,
                                 "group": v.input.layouts["actor"]["training"].group})
    if ref.zero == 3 and v.sc.reference.name == v.sc.actor.name and \
            v.memory_gib("reference", "assessment", run) > \
            v.cluster_of(run.group).gpu.memory_gib:
        run = run.model_copy(update={"tp": actor.tp, "pp": actor.pp, "cp": actor.cp,
                                     "ep": actor.ep,
                                     "first_stage_layers": actor.first_stage_layers,
                                     "last_stage_layers": actor.last_stage_layers,
                                     "dp": pool_gpus // (actor.tp * actor.pp * actor.cp)})
        notes.append(f"reference zero 3 over {ref.dp} GPUs: verl's Megatron backend keeps whole "
                     f"weights per tensor × pipeline group, so the reference takes the actor's "
                     f"tp {actor.tp}/pp {actor.pp}/ep {actor.ep} instead")
    if pool_gpus % (run.tp * run.pp * run.cp):
        raise ExportError(f"{MEGATRON['reference']}: trainer GPUs {pool_gpus} are not a "
                          f"multiple of the reference's TP×PP×CP; re-plan it on the actor's "
                          "group")
    v.refuse_unless_fits("reference", "assessment", run,
                         f"{MEGATRON['reference']} tp {run.tp}/pp {run.pp}/ep {run.ep} "
                         f"(verl's Megatron reference keeps whole weights per TP × PP group; "
                         f"the plan has zero {ref.zero} over {ref.dp} GPUs)")
    return run


def _rollout(v: PlanView, gen: Layout, pool: str, pool_gpus: int, separate: bool,
             notes: list[str], comments: list[str]) -> dict[str, Any]:
    """The rollout engine (runtime.engine), TP/DP/EP per replica, memory fraction,
    concurrency, samples per prompt."""
    if capabilities(RELEASE).refusal("generation", gen, v.sc.actor, "layouts.actor.generation"):
        # docs/exports.md §1.5: pp > 1 raises NotImplementedError for every engine
        raise generation_pp_refusal(f"{ROLLOUT}.pipeline_model_parallel_size", gen.pp,
                                    "verl raises NotImplementedError for pipeline-parallel "
                                    "rollout (vllm, sglang, trtllm)", v.sc)
    engine = v.sc.runtime.engine
    sglang = engine == "sglang"  # docs/exports.md §1.5: rollout.name is vllm | sglang | trtllm
    fraction, why = v.vllm_memory_fraction("SGLang" if sglang else "vLLM")
    comments.append(why)
    o: dict[str, Any] = {f"{ROLLOUT}.name": "sglang" if sglang else "vllm",
                         f"{ROLLOUT}.tensor_model_parallel_size": gen.tp,
                         f"{ROLLOUT}.gpu_memory_utilization": fraction,
                         f"{ROLLOUT}.max_num_seqs": v.max_num_seqs(gen),
                         f"{ROLLOUT}.n": v.sc.workload.samples_per_prompt}
    if engine == "eager":
        o[f"{ROLLOUT}.enforce_eager"] = True
        notes.append(f"runtime.engine eager → {ROLLOUT}.enforce_eager=True: the plan priced an "
                     "engine without CUDA graphs (as verl's AMD guide reports for vLLM on ROCm "
                     "across nodes); drop it where CUDA graphs work, generation is then quicker")
    if v.sc.rollout_weights == "fp8":  # rollout.yaml: "type of quantization in vllm" (fp8)
        o[f"{ROLLOUT}.quantization"] = "fp8"
        notes.append(f"the plan rolls out with FP8 weights → {ROLLOUT}.quantization=fp8 (the "
                     "engine quantizes the synced weights); training stays bf16")
    if v.sc.runtime.old_log_probs == "rollout":  # the engine's log-probs as the old policy's
        o[f"{ROLLOUT}.calculate_log_probs"] = True
        o["algorithm.rollout_correction.bypass_mode"] = True
    if v.sc.runtime.kv_cache_dtype == "fp8":
        o[f"+{ROLLOUT}.engine_kwargs.{'sglang' if sglang else 'vllm'}.kv_cache_dtype"] = (
            "fp8_e4m3" if sglang else "fp8")
    replica = gen.tp
    if gen.ep > 1:  # verl asserts expert_parallel_size == TP × DP (docs/exports.md §1.5)
        if gen.ep % gen.tp:
            raise ExportError(f"{ROLLOUT}.expert_parallel_size {gen.ep} must equal "
                              f"tensor_model_parallel_size {gen.tp} × data_parallel_size; "
                              "re-plan generation with ep a multiple of tp")
        replica = gen.ep
        o |= {f"{ROLLOUT}.data_parallel_size": gen.ep // gen.tp,
              f"{ROLLOUT}.expert_parallel_size": gen.ep}
        comments.append("rollout data_parallel_size = EP / TP; docs/exports.md marks verl's "
                        "rollout DP semantics a guess (replicas = rollout GPUs / (TP × DP))")
    notes += generation_notes(v, gen, replica, "verl")
    if gen.cp > 1:
        notes.append(f"generation cp {gen.cp}: verl's vLLM rollout has no context parallelism; "
                     "replicas use TP only")
    if gen.group != pool and not separate:
        notes.append(f"generation runs on verl's global pool (group {pool}, {pool_gpus // replica}"
                     f" replicas), not on its own group {gen.group} ({gen.dp} replicas): verl "
                     "0.9.1 gives the rollout its own pool only off-policy (separate_async), "
                     "and the plan is synchronous")
    return o


def _inter_model_notes(v: PlanView, separate: bool) -> list[str]:
    inter, notes = v.inter, []
    if inter.offload_during_generation:
        notes.append("offload_during_generation → param_offload/optimizer_offload: verl moves "
                     "a model's state to CPU whenever it is idle, not only during generation")
    if inter.staleness and not separate:
        notes.append(f"staleness {inter.staleness}: generation shares the training GPUs, so "
                     "verl runs the step synchronously (its off-policy trainer, separate_async, "
                     "needs the rollout on its own group); a step takes longer than priced")
    if inter.partial_rollout and not separate:
        notes.append("partial_rollout: verl continues unfinished responses only in its "
                     "separate_async trainer (a rollout group of its own, staleness ≥ 1); "
                     "main_ppo here waits for every response, so a step takes longer than priced")
    if separate and not inter.partial_rollout:
        notes.append("separate_async continues unfinished responses with new weights (partial "
                     "rollouts), which the plan did not price: generation may finish sooner")
    if inter.overlap_weight_sync:
        notes.append("overlap_weight_sync: verl's checkpoint engine syncs weights its own way; "
                     "the plan's overlap is not a setting")
    if inter.inter_stage_fusion:
        notes.append("inter_stage_fusion: verl has no setting to overlap generation with "
                     "assessment")
    if inter.intra_stage_fusion:
        notes.append("intra_stage_fusion: verl has no setting to run the assessment models "
                     "concurrently")
    return notes

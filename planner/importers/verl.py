"""verl launch scripts (`python3 -m verl.trainer.main_ppo key=value ...`, either backend) and
override lists → what the script runs: models, algorithm, workload, cluster and the plan.

Keys are checked against verl 0.9.1's generated configs (planner/export/keys/) and the January
2026 schema the published examples were written for (keys/verl_b178a3cd_*.txt): a key in
neither is refused by Hydra, so by rlplan too. `+key`/`++key` (Hydra's add/force-add) are
read like the key. What the script leaves out takes verl 0.9.1's default (defaults.VERL):
Megatron's sequence parallelism and distributed optimizer on, the reference inheriting the
actor's Megatron degrees, gradient checkpointing on, rollout TP 2 and max_num_seqs 256.
"""

from __future__ import annotations

from functools import cache, partial
from importlib.resources import files
from typing import Any

from planner.cost.pipeline_split import CONFIG_FIELDS, MegatronSplit
from planner.errors import InputError
from planner.export.keys import VERL_VERSION, key_set
from planner.importers.defaults import VERL, VERL_INHERITS, VERL_SOURCE
from planner.importers.launch import Launch
from planner.importers.models import ModelRef, model_ref
from planner.importers.reading import (
    Reading,
    algorithm_of,
    kv_tokens,
    lengths,
    mini_batches,
    refused,
    uneven_stages,
    whole,
)
from planner.importers.shell import Text
from planner.importers.values import Settings, as_bool, as_float, as_int
from planner.specs.scenario import Scenario

ACTOR, REF = "actor_rollout_ref.actor", "actor_rollout_ref.ref"
ROLLOUT = "actor_rollout_ref.rollout"
# adv_estimator → rlplan's algorithm (docs/exports.md §1.3); others: reading.algorithm_of.
ALGORITHMS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo", "remax": "remax",
              "rloo_vectorized": "rloo", "grpo_vectorized": "grpo"}
# Where each role's keys live, old schema first (the examples use it), then 0.9.1's.
CRITIC_FSDP = ("critic.model.fsdp_config", "critic.fsdp")
# What a plan cannot say: refused with the key.
REFUSED = {f"{ROLLOUT}.pipeline_model_parallel_size": (1, "pipeline-parallel rollout (verl "
                                                       "raises NotImplementedError for it)"),
           "actor_rollout_ref.model.lora_rank": (0, "LoRA training (rlplan plans full "
                                                    "fine-tuning)"),
           f"{ACTOR}.fsdp_config.fsdp_size": (-1, "hybrid sharding over FSDP groups smaller "
                                                  "than the pool (HSDP)")}


@cache
def _old_keys(backend: str) -> frozenset[str]:
    text = files("planner.importers").joinpath("keys", f"verl_b178a3cd_{backend}.txt")
    return frozenset(line.strip() for line in text.read_text(encoding="utf-8").splitlines()
                     if line.strip() and not line.startswith("#"))


def _known(key: str, backend: str) -> bool:
    return key in key_set(f"verl-{backend}", VERL_VERSION) or key in _old_keys(backend)


def overrides(launch: Launch) -> tuple[Settings, str]:
    """The command's `key=value` overrides (the last of a key wins) and the backend."""
    values: dict[str, list[Text]] = {}
    shown: dict[str, str] = {}
    backend = "fsdp"
    for w in launch.args:
        flag, eq, rest = w.text.partition("=")
        if flag == "--config-name" and "megatron" in rest:
            backend = "megatron"
        if w.text.startswith("-") or not eq:
            continue
        key = flag.lstrip("+")
        values[key] = [Text(rest, w.unset)]
        shown[key] = flag
    if values.get(f"{ACTOR}.strategy", [Text("")])[0].text == "megatron":
        backend = "megatron"
    if launch.entry in ("verl.trainer.main_ppo", "overrides"):
        for key, flag in shown.items():
            if not flag.startswith("+") and not _known(key, backend):
                raise InputError(f"import: {key}: verl {VERL_VERSION} has no such key (nor "
                                 "its January 2026 schema the published examples use); fix or "
                                 "drop it — Hydra refuses it too")
    return Settings(values, shown), backend


class _Verl:
    """The overrides with verl 0.9.1's defaults behind them."""

    def __init__(self, s: Settings):
        self.s = s

    def value(self, key: str) -> tuple[str, Any]:
        """The key that gives `key`'s value (itself, or the key it inherits) and the value:
        the script's text, else verl's default (None: verl has none)."""
        if self.s.has(key):
            return self.s.name(key), self.s.values[key][0]
        if key in VERL_INHERITS:
            return self.value(VERL_INHERITS[key])
        return key, VERL.get(key)

    def int(self, key: str, minimum: int = 1, default: int = 1) -> int:
        where, value = self.value(key)
        if isinstance(value, Text):
            return as_int(where, value, minimum)
        return default if value is None else int(value)

    def optional_int(self, key: str) -> int | None:
        where, value = self.value(key)
        if isinstance(value, Text):
            return None if value.text.lower() in _NULL and not value.unset else \
                as_int(where, value)
        return value

    def bool(self, key: str) -> bool:
        where, value = self.value(key)
        return as_bool(where, value) if isinstance(value, Text) else bool(value)

    def float(self, key: str) -> float:
        where, value = self.value(key)
        return as_float(where, value) if isinstance(value, Text) else float(value)

    def str(self, key: str) -> str | None:
        _, value = self.value(key)
        return None if value is None else str(value)

    def first(self, key: str, roots: tuple[str, ...]) -> str:
        """`root.key` for the first root the script sets it under (else the last root's)."""
        return next((f"{r}.{key}" for r in roots if self.s.has(f"{r}.{key}")),
                    f"{roots[-1]}.{key}")


_NULL = ("null", "none", "~")


def read(launch: Launch) -> Reading:
    s, backend = overrides(launch)
    v = _Verl(s)
    notes: list[str] = []
    for key, (neutral, what) in REFUSED.items():
        if v.s.has(key) and v.int(key, minimum=-1) != neutral:
            raise refused(f"{s.name(key)}={v.int(key, minimum=-1)}", what)
    fields: dict[str, Any] = {}
    models: dict[str, ModelRef] = {}

    estimator = v.str("algorithm.adv_estimator")
    algorithm = algorithm_of(estimator, ALGORITHMS, "algorithm.adv_estimator", notes)
    fields["algorithm"] = algorithm
    critic_on = s.text("critic.enable")
    has_critic = (estimator == "gae") if critic_on is None or critic_on.text.lower() in (
        "null", "none") else v.bool("critic.enable")
    if has_critic and algorithm != "ppo":
        raise InputError("import: critic.enable=True with a critic-free estimator: rlplan "
                         "prices a critic with PPO (algorithm.adv_estimator=gae) only")
    # verl/trainer/ppo/utils.py: the reference runs iff a KL term needs it
    kl = v.bool("algorithm.use_kl_in_reward") or v.bool(f"{ACTOR}.use_kl_loss")
    fields["models.reference"] = "actor" if kl else "none"
    path = s.text("actor_rollout_ref.model.path")
    if path is not None:
        models["actor"] = model_ref(path, "actor_rollout_ref.model.path", "actor")
    if has_critic and (cpath := s.text("critic.model.path")) is not None:
        models["critic"] = model_ref(cpath, "critic.model.path", "critic")
    reward_on = v.bool("reward.reward_model.enable") or s.bool("reward_model.enable", False)
    if reward_on:
        rpath = s.text("reward.reward_model.model_path") or s.text("reward_model.model.path")
        if rpath is None:
            raise InputError("import: reward_model.enable=True without reward_model.model.path; "
                             "name the reward model")
        models["reward"] = model_ref(rpath, "reward_model.model.path", "reward")
    else:
        fields["models.reward"] = "verifier"

    # workload (docs/exports.md §1.1: batch sizes count prompts)
    prompts = v.int("data.train_batch_size")
    samples = v.int(f"{ROLLOUT}.n")
    fields |= {"workload.prompts_per_step": prompts, "workload.samples_per_prompt": samples,
               "workload.ppo_epochs": v.int(f"{ACTOR}.ppo_epochs"),
               "workload.mini_batches": mini_batches(
                   prompts, v.int(f"{ACTOR}.ppo_mini_batch_size"),
                   "data.train_batch_size ÷ actor_rollout_ref.actor.ppo_mini_batch_size" + (
                       "" if s.has(f"{ACTOR}.ppo_mini_batch_size") else " (verl's default)"),
                   "prompts")}
    lengths(fields, v.int("data.max_prompt_length"), v.int("data.max_response_length"),
            "data.max_prompt_length/max_response_length", notes)
    engine = v.str(f"{ROLLOUT}.name")
    if v.bool(f"{ROLLOUT}.enforce_eager"):
        fields["runtime.engine"] = "eager"
    elif engine == "sglang":
        fields["runtime.engine"] = "sglang"

    # cluster: the trainer pool, plus a rollout pool and a reward pool when the script has them
    per_node = v.int("trainer.n_gpus_per_node")
    pool = v.int("trainer.nnodes") * per_node
    total = pool
    separate = v.str("trainer.v1.trainer_mode") == "separate_async" or \
        v.int(f"{ROLLOUT}.nnodes", minimum=0) > 0
    if separate:
        total += v.int(f"{ROLLOUT}.nnodes") * v.int(f"{ROLLOUT}.n_gpus_per_node")
        staleness = v.int("trainer.v1.sampler.max_off_policy_threshold", minimum=0)
        fields["search.max_staleness"] = staleness
    reward_pool = _reward_pool(v) if reward_on else 0
    total += reward_pool
    fields |= {"cluster.gpus_per_node": per_node,
               "cluster.nodes": -(-total // per_node)}
    release = f"verl {VERL_VERSION} ({'Megatron' if backend == 'megatron' else 'FSDP'} backend)"
    notes.append(f"defaults: what the script leaves out takes {VERL_SOURCE}'s value")
    layout = partial(_plan, v, backend, pool, separate, reward_pool, notes)
    return Reading("verl", release, fields, models, layout, s, notes)


def _reward_pool(v: _Verl) -> int:
    """GPUs of a dedicated reward pool (0: the reward model shares the trainer pool)."""
    roots = ("reward_model", "reward.reward_model")
    if not v.bool(v.first("enable_resource_pool", roots)):
        return 0
    return v.int(v.first("nnodes", roots)) * v.int(v.first("n_gpus_per_node", roots))


def _plan(v: _Verl, backend: str, pool: int, separate: bool, reward_pool: int,
          notes: list[str], sc: Scenario) -> dict[str, Any]:
    groups = [{"name": "g0", "gpus": pool}]
    layouts: dict[str, dict[str, Any]] = {}
    megatron = backend == "megatron"
    for role in ("actor", "critic"):
        if role == "critic" and sc.critic is None:
            continue
        lay = _megatron(v, role, pool, sc) if megatron else _fsdp(v, role, pool)
        lay["micro_batch"] = _micro(v, role, sc, notes)
        layouts[role] = {"training": lay}
    gen_group, gen_gpus = "g0", pool
    if separate:
        gen_gpus = v.int(f"{ROLLOUT}.nnodes") * v.int(f"{ROLLOUT}.n_gpus_per_node")
        gen_group = "g1"
        groups.append({"name": "g1", "gpus": gen_gpus})
    tp = v.int(f"{ROLLOUT}.tensor_model_parallel_size")
    gen: dict[str, Any] = {"group": gen_group, "tp": tp,
                           "dp": whole(gen_gpus, tp, f"{ROLLOUT}.tensor_model_parallel_size"),
                           "max_num_seqs": v.int(f"{ROLLOUT}.max_num_seqs")}
    if v.int(f"{ROLLOUT}.expert_parallel_size") > 1:
        gen["ep"] = v.int(f"{ROLLOUT}.expert_parallel_size")
    gen["kv_cache_tokens"] = kv_tokens(sc, gen, v.float(f"{ROLLOUT}.gpu_memory_utilization"),
                                       f"{ROLLOUT}.gpu_memory_utilization")
    layouts["actor"]["generation"] = gen
    logprob = v.optional_int(f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu")
    train = layouts["actor"]["training"]
    if logprob is not None and logprob != train["micro_batch"]:  # the old log-probs' forward
        layouts["actor"]["assessment"] = {**train, "micro_batch": logprob}
    if sc.reference is not None:
        layouts["reference"] = {"assessment": _reference(v, pool, megatron, sc, notes)}
    if sc.reward_kind == "model":
        name, gpus = "g0", pool
        if reward_pool:
            name, gpus = f"g{len(groups)}", reward_pool
            groups.append({"name": name, "gpus": gpus})
        key = v.first("rollout.tensor_model_parallel_size", ("reward_model",
                                                             "reward.reward_model"))
        rtp = v.int(key)
        sleeps = v.bool(v.first("rollout.free_cache_engine", ("reward_model",
                                                               "reward.reward_model")))
        layouts["reward"] = {"assessment": {"group": name, "tp": rtp,
                                            "dp": whole(gpus, rtp, key),
                                            "offload": "sleep" if sleeps else "none"}}
        notes.append("reward model: verl serves it with an inference engine; its micro-batch "
                     "is not a verl key (1 assumed)"
                     + ("; the engine sleeps outside its pass (rollout.free_cache_engine: "
                        "weights in CPU memory)" if sleeps else ""))
    staleness = v.int("trainer.v1.sampler.max_off_policy_threshold", minimum=0) \
        if separate else 0
    inter = {"placement": "colocated" if len(groups) == 1 else "partial",
             "staleness": staleness, "partial_rollout": separate}
    return {"groups": groups, "layouts": layouts, "inter_model": inter}


def _micro(v: _Verl, role: str, sc: Scenario, notes: list[str]) -> int:
    """Sequences per micro-batch: the script's, or under dynamic batch sizes the token budget
    per GPU over the longest sequence (verl packs micro-batches up to it)."""
    root = ACTOR if role == "actor" else "critic"
    key = f"{root}.ppo_micro_batch_size_per_gpu"
    dynamic = v.bool(f"{root}.use_dynamic_bsz")
    if v.s.has(key) and not dynamic:
        return v.int(key)
    if dynamic:
        budget = v.int(f"{root}.ppo_max_token_len_per_gpu")
        micro = max(1, budget // sc.workload.max_seq_len)
        notes.append(f"{role} micro-batch: {root}.use_dynamic_bsz packs up to {budget} tokens "
                     f"per GPU: {micro} sequence(s) of {sc.workload.max_seq_len} tokens")
        return micro
    notes.append(f"{role} micro-batch: {key} is not set (verl needs it); 1 assumed")
    return 1


def _offload(v: _Verl, roots: tuple[str, ...]) -> str:
    params = v.bool(v.first("param_offload", roots))
    optimizer = v.bool(v.first("optimizer_offload", roots))
    return {(True, True): "both", (False, True): "optimizer", (True, False): "params"}.get(
        (params, optimizer), "none")


def _fsdp(v: _Verl, role: str, pool: int) -> dict[str, Any]:
    if role == "actor":
        cp_key, roots = f"{ACTOR}.ulysses_sequence_parallel_size", (f"{ACTOR}.fsdp_config",)
        ckpt = "actor_rollout_ref.model.enable_gradient_checkpointing"
    else:
        cp_key, roots = "critic.ulysses_sequence_parallel_size", CRITIC_FSDP
        ckpt = "critic.model.enable_gradient_checkpointing"
        if any(v.s.has(f"{r}.fsdp_size") and v.s.int(f"{r}.fsdp_size", -1, -1) != -1
               for r in roots):
            raise refused("critic fsdp_size", REFUSED[f"{ACTOR}.fsdp_config.fsdp_size"][1])
    cp = v.int(cp_key)
    zero3 = v.bool(v.first("reshard_after_forward", roots))
    # reshard_after_forward: true ≈ ZeRO-3, false ≈ ZeRO-2 (docs/exports.md §1.12)
    return {"group": "g0", "dp": whole(pool, cp, cp_key), "cp": cp, "zero": 3 if zero3 else 2,
            "offload": _offload(v, roots), "checkpointing": "full" if v.bool(ckpt) else "none"}


def _degrees(v: _Verl, root: str, pool: int) -> dict[str, Any]:
    d = {x: v.int(f"{root}.{key}") for x, key in (
        ("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
        ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"))}
    d["dp"] = whole(pool, d["tp"] * d["pp"] * d["cp"], f"{root} TP×PP×CP")
    for field, key in (("etp", "expert_tensor_parallel_size"),
                       ("vp", "virtual_pipeline_model_parallel_size")):
        value = v.optional_int(f"{root}.{key}")
        if value is not None and (field != "vp" or d["pp"] > 1):
            d[field] = value
    return {"group": "g0", **d}


def _uneven(v: _Verl, root: str, layers: int) -> dict[str, int]:
    """first_stage_layers / last_stage_layers from the uneven-split keys of Megatron's
    TransformerConfig in `root`.override_transformer_config (exports.md §1.4). The reference
    inherits the actor's whole block (verl 0.9.1: `${oc.select:actor_rollout_ref.actor.
    megatron.override_transformer_config,{}}`) unless the script sets it apart."""
    cfg = f"{root}.override_transformer_config"
    if root == f"{REF}.megatron" and not any(v.s.has(f"{cfg}.{k}") for k in CONFIG_FIELDS):
        cfg = f"{ACTOR}.megatron.override_transformer_config"
    first, last, embedding, loss = (f"{cfg}.{k}" for k in CONFIG_FIELDS)
    split = MegatronSplit(first=v.optional_int(first), last=v.optional_int(last),
                          embedding_in_split=v.bool(embedding), loss_in_split=v.bool(loss))
    pp = v.int(f"{root}.pipeline_model_parallel_size")
    said = [f"{cfg}.{k}" for k in CONFIG_FIELDS if v.s.has(f"{cfg}.{k}")]
    return uneven_stages(split, layers, pp,
                         ", ".join(said) or f"{root}.pipeline_model_parallel_size")


def _megatron(v: _Verl, role: str, pool: int, sc: Scenario) -> dict[str, Any]:
    root = f"{ACTOR}.megatron" if role == "actor" else "critic.megatron"
    lay = _degrees(v, root, pool) | _uneven(v, root, sc.roles[role].num_hidden_layers)
    recompute = v.s.text(f"{root}.override_transformer_config.recompute_granularity")
    mode = recompute.text if recompute is not None else "none"
    # Megatron switches sequence parallelism off at TP 1 (megatron-core 0.19.2 validate_args:
    # "Disabling sequence parallelism because tensor model parallelism is disabled")
    lay |= {"sp": v.bool(f"{root}.sequence_parallel") and lay["tp"] > 1,
            "zero": 1 if v.bool(f"{root}.use_distributed_optimizer") else 0,
            "offload": _offload(v, (root,)),
            "checkpointing": mode if mode in ("full", "selective") else "none"}
    return lay


def _reference(v: _Verl, pool: int, megatron: bool, sc: Scenario,
               notes: list[str]) -> dict[str, Any]:
    if v.bool(f"{REF}.log_prob_use_dynamic_bsz"):
        micro = max(1, v.int(f"{REF}.log_prob_max_token_len_per_gpu") // sc.workload.max_seq_len)
    else:
        micro = v.int(f"{REF}.log_prob_micro_batch_size_per_gpu")
    if megatron:  # the reference's degrees follow the actor's unless the script sets them
        root = f"{REF}.megatron"
        lay = _degrees(v, root, pool)
        lay |= _uneven(v, root, sc.reference.num_hidden_layers)
        # param_offload: the engine's eval mode loads the weights for the pass and offloads
        # them after (verl 0.9.1 workers/engine/base.py BaseEngineCtx)
        offload = v.bool(f"{root}.param_offload")
        return {**lay, "sp": v.bool(f"{root}.sequence_parallel") and lay["tp"] > 1,
                "zero": 0, "offload": "sleep" if offload else "none", "micro_batch": micro}
    cp = v.int(f"{REF}.ulysses_sequence_parallel_size")
    # FSDP shards the reference's weights over the pool (ZeRO-3-like) and, forward-only, keeps
    # them in CPU memory to stream in for each forward whatever param_offload says (verl 0.9.1
    # workers/engine/fsdp/transformer_impl.py: CPUOffload(offload_params=True))
    return {"group": "g0", "dp": whole(pool, cp, "reference ulysses"), "cp": cp,
            "zero": 3 if pool // cp > 1 else 0, "micro_batch": micro, "offload": "params"}

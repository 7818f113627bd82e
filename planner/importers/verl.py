"""verl 0.9.1 overrides (as `rlplan export --format verl` writes them) → a plan."""

from __future__ import annotations

from typing import Any

from planner.errors import InputError
from planner.export.keys import VERL_VERSION, verl_key_ok
from planner.export.verl import FSDP_CONFIG, GRADIENT_CHECKPOINTING, MEGATRON, MICRO_BATCH, ULYSSES
from planner.export.verl_pools import REWARD, ROLLOUT
from planner.importers import Imported, value, whole, words
from planner.specs.scenario import Scenario

# Keys that would change the layout in a way a plan cannot say.
UNSUPPORTED = {f"{ROLLOUT}.pipeline_model_parallel_size": "pipeline-parallel rollout"}


def overrides(text: str) -> dict[str, Any]:
    """The `key=value` overrides of a verl command; a key verl 0.9.1's config does not have is
    one error naming it (a typo there would be dropped silently by a reader, refused by
    Hydra). Shell assignments (`NAME=value`, upper case) are not overrides."""
    out = {}
    for w in words(text):
        if "=" in w and not w.startswith("-"):
            key, _, raw = w.partition("=")
            if key.isupper():
                continue
            if not any(verl_key_ok(schema, key) for schema in ("verl-fsdp", "verl-megatron")):
                raise InputError(f"import: {key}: verl {VERL_VERSION} has no such key; fix or "
                                 "drop it (rlplan reads verl's own config keys)")
            out[key.lstrip("+")] = value(raw)
    return out


def read(text: str, sc: Scenario) -> Imported:
    o = overrides(text)
    notes: list[str] = []
    for key, what in UNSUPPORTED.items():
        if o.get(key, 1) != 1:
            raise InputError(f"import: {key}={o[key]}: {what} is not something rlplan plans; "
                             "drop it")
    if "trainer.n_gpus_per_node" not in o:
        raise InputError("import: trainer.n_gpus_per_node is missing; a verl script sizes its "
                         "pool with trainer.nnodes × trainer.n_gpus_per_node — add it")
    pool = int(o.get("trainer.nnodes", 1)) * int(o["trainer.n_gpus_per_node"])
    megatron = any(".megatron." in k for k in o)
    groups = [{"name": "g0", "gpus": pool}]
    layouts: dict[str, dict[str, Any]] = {}
    for role in ("actor", "critic"):
        if role == "critic" and sc.critic is None:
            continue
        lay = _megatron(o, role, pool) if megatron else _fsdp(o, role, pool)
        lay["micro_batch"] = int(o.get(MICRO_BATCH[role], 1))
        layouts[role] = {"training": lay}
    separate = o.get("trainer.v1.trainer_mode") == "separate_async"
    gen_group, gen_gpus = "g0", pool
    if separate:
        gen_gpus = int(o.get(f"{ROLLOUT}.nnodes", 1)) * int(o[f"{ROLLOUT}.n_gpus_per_node"])
        gen_group = "g1"
        groups.append({"name": "g1", "gpus": gen_gpus})
    tp = int(o.get(f"{ROLLOUT}.tensor_model_parallel_size", 1))
    gen: dict[str, Any] = {"group": gen_group, "tp": tp,
                           "dp": whole(gen_gpus, tp, "rollout tensor_model_parallel_size")}
    if int(o.get(f"{ROLLOUT}.expert_parallel_size", 1)) > 1:
        gen["ep"] = int(o[f"{ROLLOUT}.expert_parallel_size"])
    if f"{ROLLOUT}.max_num_seqs" in o:
        gen["max_num_seqs"] = int(o[f"{ROLLOUT}.max_num_seqs"])
    layouts["actor"]["generation"] = gen
    if sc.reference is not None:
        layouts["reference"] = {"assessment": _reference(o, pool, megatron)}
    if sc.reward_kind == "model":
        if o.get(f"{REWARD}.enable_resource_pool"):
            gpus = int(o.get(f"{REWARD}.nnodes", 1)) * int(o[f"{REWARD}.n_gpus_per_node"])
            name = f"g{len(groups)}"
            groups.append({"name": name, "gpus": gpus})
        else:
            name, gpus = "g0", pool
        rtp = int(o.get(f"{REWARD}.rollout.tensor_model_parallel_size", 1))
        layouts["reward"] = {"assessment": {"group": name, "tp": rtp,
                                            "dp": whole(gpus, rtp, "reward tensor parallel")}}
        notes.append("reward model: verl serves it with an inference engine; its micro-batch "
                     "is not a verl key (1 assumed)")
    staleness = int(o.get("trainer.v1.sampler.max_off_policy_threshold", 1)) if separate else 0
    inter = {"placement": "colocated" if len(groups) == 1 else "partial",
             "staleness": staleness, "partial_rollout": separate}
    return Imported("verl", {"groups": groups, "layouts": layouts, "inter_model": inter}, notes)


def _offload(o: dict[str, Any], root: str) -> str:
    params = bool(o.get(f"{root}.param_offload"))
    optimizer = bool(o.get(f"{root}.optimizer_offload"))
    return {(True, True): "both", (False, True): "optimizer", (True, False): "params"}.get(
        (params, optimizer), "none")


def _fsdp(o: dict[str, Any], role: str, pool: int) -> dict[str, Any]:
    cp = int(o.get(ULYSSES[role], 1))
    return {"group": "g0", "dp": whole(pool, cp, ULYSSES[role]), "cp": cp,
            "zero": 3 if o.get(f"{FSDP_CONFIG[role]}.reshard_after_forward", True) else 2,
            "offload": _offload(o, FSDP_CONFIG[role]),
            "checkpointing": "full" if o.get(GRADIENT_CHECKPOINTING[role]) else "none"}


def _degrees(o: dict[str, Any], root: str, pool: int) -> dict[str, Any]:
    d = {x: int(o.get(f"{root}.{key}", 1)) for x, key in (
        ("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
        ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"))}
    d["dp"] = whole(pool, d["tp"] * d["pp"] * d["cp"], f"{root} TP×PP×CP")
    if f"{root}.expert_tensor_parallel_size" in o:
        d["etp"] = int(o[f"{root}.expert_tensor_parallel_size"])
    return {"group": "g0", **d}


def _megatron(o: dict[str, Any], role: str, pool: int) -> dict[str, Any]:
    root = MEGATRON[role]
    lay = _degrees(o, root, pool)
    recompute = o.get(f"{root}.override_transformer_config.recompute_granularity")
    if f"{root}.virtual_pipeline_model_parallel_size" in o:
        lay["vp"] = int(o[f"{root}.virtual_pipeline_model_parallel_size"])
    lay |= {"sp": bool(o.get(f"{root}.sequence_parallel")),
            "zero": 1 if o.get(f"{root}.use_distributed_optimizer") else 0,
            "offload": _offload(o, root),
            "checkpointing": recompute if recompute in ("full", "selective") else "none"}
    return lay


def _reference(o: dict[str, Any], pool: int, megatron: bool) -> dict[str, Any]:
    micro = int(o.get("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", 1))
    if megatron:
        return {**_degrees(o, MEGATRON["reference"], pool), "micro_batch": micro}
    cp = int(o.get("actor_rollout_ref.ref.ulysses_sequence_parallel_size", 1))
    # FSDP shards the reference's weights over the pool (ZeRO-3-like)
    return {"group": "g0", "dp": whole(pool, cp, "reference ulysses"), "cp": cp,
            "zero": 3 if pool // cp > 1 else 0, "micro_batch": micro}

"""DeepSpeed: one ds_config per trainable role, as a JSON document `{role: ds_config}`.

Keys and constraints: docs/exports.md §3 (DeepSpeed's docs/_pages/config-json.md, and the structure
OpenRLHF's get_train_ds_config generates). A DPO policy is the plan's `actor` role.
"""

from __future__ import annotations

import json
from typing import Any

from planner.export.base import Export, PlanView, train_batch
from planner.export.capabilities import capabilities, check
from planner.export.keys import VERSIONS
from planner.plan import Layout, expert_tp
from planner.specs.scenario import Scenario

# Every key docs/exports.md §3 names, flattened (nested dicts joined with '.'). The exporter writes
# only these; the tests check every leaf of its output against this set.
_OFFLOAD_OPTIMIZER = ("device", "nvme_path", "pin_memory", "ratio", "buffer_count", "fast_init")
_OFFLOAD_PARAM = ("device", "nvme_path", "pin_memory", "buffer_count", "buffer_size",
                  "max_in_cpu")
_ZERO = ("stage", "overlap_comm", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size",
         "allgather_bucket_size", "stage3_max_live_parameters", "stage3_max_reuse_distance",
         "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "sub_group_size",
         "stage3_gather_16bit_weights_on_model_save", "zero_hpz_partition_size",
         "zero_quantized_weights", "zero_quantized_gradients")
DEEPSPEED_KEYS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "gradient_clipping", "bf16.enabled", "fp16.enabled",
    *(f"zero_optimization.{k}" for k in _ZERO),
    *(f"zero_optimization.offload_optimizer.{k}" for k in _OFFLOAD_OPTIMIZER),
    *(f"zero_optimization.offload_param.{k}" for k in _OFFLOAD_PARAM),
    # emitted by OpenRLHF (docs/exports.md §3 notes)
    "tensor_parallel.autotp_size", "data_types.grad_accum_dtype", "compile.deepcompile",
    "checkpoint.load_universal",
})
# ds_config trains any algorithm's models; it has no pipeline parallelism (docs/exports.md §3):
# its preset, planner/frameworks/presets/deepspeed@*.yaml.
RELEASE = f"deepspeed@{VERSIONS['deepspeed'][0]}"  # its preset: capabilities(RELEASE)
GRADIENT_CLIPPING = 1.0  # the value in docs/exports.md's ZeRO-1 template; the plan does not set it


def flat_keys(config: dict[str, Any], prefix: str = "") -> list[str]:
    """The leaf keys of a nested config, joined with '.'."""
    out = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        out += flat_keys(value, f"{path}.") if isinstance(value, dict) else [path]
    return out


def ds_config(sc: Scenario, role: str, layout: Layout, notes: list[str]) -> dict[str, Any]:
    """One role's ds_config, checked against DeepSpeed's start-up rules."""
    where = f"layouts.{role}.training"
    check(capabilities(RELEASE), "training", layout, sc.roles[role], where)
    params_off = layout.offload in ("params", "both")
    optimizer_off = layout.offload in ("optimizer", "both")
    batch = train_batch(sc, layout, "train_batch_size", "train_micro_batch_size_per_gpu", notes)
    # DeepSpeed counts every GPU of the model, tensor- and sequence-parallel ranks included
    # (docs/exports.md §3: OpenRLHF multiplies train_batch_size by ring_attn_size × ds_tp).
    ranks = layout.dp * layout.tp * layout.cp
    zero: dict[str, Any] = {"stage": layout.zero}
    if optimizer_off:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if params_off:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {
        "train_batch_size": batch.micro * batch.accumulation * ranks,
        "train_micro_batch_size_per_gpu": batch.micro,
        "gradient_accumulation_steps": batch.accumulation,
        "bf16": {"enabled": True}, "gradient_clipping": GRADIENT_CLIPPING,
        "zero_optimization": zero}
    if layout.tp > 1:
        config["tensor_parallel"] = {"autotp_size": layout.tp}
    if layout.cp > 1:
        notes.append(f"{role} cp {layout.cp}: context (ring-attention) parallelism is a trainer "
                     "setting (OpenRLHF --ring_attn_size), not a DeepSpeed key")
    if layout.ep > 1:
        notes.append(f"{role} ep {layout.ep}: docs/exports.md lists no DeepSpeed "
                     "expert-parallel key")
    if sc.roles[role].moe and layout.tp > 1 and expert_tp(layout, "training") == 1:
        notes.append(f"{role} etp 1: AutoTP splits every linear layer, experts included, so "
                     f"they run split over tp {layout.tp} (less memory than planned, more "
                     "collectives)")
    if layout.checkpointing != "none":
        notes.append(f"{role} activation checkpointing ({layout.checkpointing}): docs/exports.md "
                     "lists no DeepSpeed JSON key for it; turn it on in the trainer")
    return config


def export_deepspeed(plan: dict[str, Any], sc: Scenario, version: str) -> Export:
    """`{role: ds_config}`; the ds_config format is DeepSpeed `version`'s (its config class
    accepts every export: tests/export/test_frameworks.py)."""
    v, notes = PlanView(plan, sc), []
    if v.inter.shared_actor_critic:
        notes.append("the critic is a head on the actor: one config trains both")
    configs = {role: ds_config(sc, role, v.need(role, "training"), notes)
               for role in v.trainable}
    for config in configs.values():
        unknown = set(flat_keys(config)) - DEEPSPEED_KEYS
        assert not unknown, f"exporter wrote keys outside DEEPSPEED_KEYS: {unknown}"
    return Export(json.dumps(configs, indent=2) + "\n", "json", tuple(notes))

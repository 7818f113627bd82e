"""Megatron-LM: the training arguments of each trainable role, as one bash array per role.

Flags: docs/exports.md §4 (megatron/training/arguments.py at core_v0.13.0 and the 2026-08 head; the
names are the same in both) and the start-up rules of megatron-core 0.19.2's `validate_args`
(the newest release; tests/export/test_frameworks.py runs its parse_args/validate_args on every
export, from the cp312 wheel it fetches). Megatron-LM
has no RL loop: these arguments configure each role's training engine; generation, assessment
and placement are not expressed here.
"""

from __future__ import annotations

from typing import Any

from planner.export.base import (
    Export,
    ExportError,
    PlanView,
    megatron_pipeline,
    split_note,
    train_batch,
)
from planner.frameworks.conditions import tp_divides_heads
from planner.plan import Layout, expert_tp
from planner.specs.model import ModelSpec
from planner.specs.scenario import Scenario
from planner.specs.workload import Family

# Every Megatron-LM flag docs/exports.md §4 names; the exporter writes only these.
MEGATRON_FLAGS = frozenset({
    "--tensor-model-parallel-size", "--sequence-parallel", "--pipeline-model-parallel-size",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
    "--pipeline-model-parallel-layout", "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank", "--microbatch-group-size-per-virtual-pipeline-stage",
    "--context-parallel-size", "--cp-comm-type", "--hierarchical-context-parallel-sizes",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-experts",
    "--moe-token-dispatcher-type", "--moe-grouped-gemm", "--use-distributed-optimizer",
    "--num-distributed-optimizer-instances", "--overlap-grad-reduce", "--overlap-param-gather",
    "--use-torch-fsdp2", "--use-custom-fsdp", "--data-parallel-sharding-strategy",
    "--megatron-fsdp-version", "--optimizer-cpu-offload", "--optimizer-offload-fraction",
    "--micro-batch-size", "--global-batch-size", "--recompute-granularity", "--recompute-method",
    "--recompute-num-layers", "--bf16",
    "--use-precision-aware-optimizer",  # validate_args (0.19.2): --optimizer-cpu-offload needs it
})


# Megatron-LM trains any algorithm's models (placement and generation are not in its export):
# its preset, planner/frameworks/presets/megatron@*.yaml.


def check_shape(spec: ModelSpec, layout: Layout, role: str) -> None:
    """Megatron's start-up checks on the degrees. docs/exports.md §4 states world size divisible by
    TP × PP × CP; the head, query-group and expert divisibility are not in docs/exports.md — they
    follow from how Megatron shards (each TP rank holds heads / TP heads and KV groups / TP
    groups; each EP rank holds experts / EP experts)."""
    where = f"layouts.{role}.training"
    world = layout.gpus
    if world % (layout.tp * layout.pp * layout.cp):
        raise ExportError(f"{where}: world size {world} is not divisible by "
                          f"--tensor-model-parallel-size × --pipeline-model-parallel-size × "
                          f"--context-parallel-size = {layout.tp * layout.pp * layout.cp}")
    if not tp_divides_heads(layout, spec):  # the preset's rule, said with the model's numbers
        what, count = next((w, c) for w, c in (("attention heads", spec.num_attention_heads),
                                               ("query groups (KV heads)",
                                                spec.num_key_value_heads)) if c % layout.tp)
        raise ExportError(f"{where}: --tensor-model-parallel-size {layout.tp} does not "
                          f"divide {spec.name}'s {count} {what}; re-plan with a TP that "
                          "divides it")
    if layout.ep > 1:
        if spec.moe is None:
            raise ExportError(f"{where}: --expert-model-parallel-size {layout.ep} but "
                              f"{spec.name} has no experts; set ep to 1")
        if spec.moe.num_experts % layout.ep:
            raise ExportError(f"{where}: --expert-model-parallel-size {layout.ep} does not "
                              f"divide {spec.name}'s {spec.moe.num_experts} experts")


def role_args(v: PlanView, role: str, spec: ModelSpec, layout: Layout,
              notes: list[str]) -> list[tuple[str, Any]]:
    """(flag, value) pairs of one role; value None for a switch."""
    sc = v.sc
    check_shape(spec, layout, role)
    batch = train_batch(sc, layout, "--global-batch-size", "--micro-batch-size", notes)
    args: list[tuple[str, Any]] = [
        ("--tensor-model-parallel-size", layout.tp),
        ("--pipeline-model-parallel-size", layout.pp),
        ("--context-parallel-size", layout.cp)]
    args += pipeline_args(spec, layout, f"layouts.{role}.training")
    if layout.uneven:
        notes.append(split_note(role, spec, layout))
    if layout.sp:
        args.append(("--sequence-parallel", None))
    if spec.moe is not None:
        args += [("--num-experts", spec.moe.num_experts),
                 ("--expert-model-parallel-size", layout.ep),
                 ("--expert-tensor-parallel-size", expert_tp(layout, "training"))]
    if layout.zero >= 1:
        args.append(("--use-distributed-optimizer", None))
    if layout.zero >= 2:  # refused where ZeRO-1 would not fit the GPU
        v.refuse_unless_fits(role, "training", layout.model_copy(update={"zero": 1}),
                             f"{role} --use-distributed-optimizer (ZeRO-1; the plan has zero "
                             f"{layout.zero})")
        notes.append(f"{role} zero {layout.zero}: the distributed optimizer shards optimizer "
                     "state only; sharding gradients/parameters too needs Megatron-FSDP "
                     "(--use-custom-fsdp --data-parallel-sharding-strategy at core_v0.13.0), "
                     "not emitted — more memory per GPU than planned, still within it")
    if layout.offload in ("optimizer", "both"):
        # validate_args: "The optimizer cpu offload must be used in conjunction with
        # `--use-precision-aware-optimizer`" (the hybrid device optimizer reuses its code path)
        args += [("--optimizer-cpu-offload", None), ("--optimizer-offload-fraction", 1.0),
                 ("--use-precision-aware-optimizer", None)]
    if layout.offload in ("params", "both"):
        notes.append(f"{role} parameter offload: docs/exports.md names no Megatron flag for it")
    if layout.checkpointing == "full":  # every layer recomputed
        args += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"),
                 ("--recompute-num-layers", 1)]
    elif layout.checkpointing == "selective":
        args.append(("--recompute-granularity", "selective"))
    args += [("--micro-batch-size", batch.micro), ("--global-batch-size", batch.per_step),
             ("--bf16", None)]
    assert {flag for flag, _ in args} <= MEGATRON_FLAGS
    return args


def pipeline_args(spec: ModelSpec, layout: Layout, where: str) -> list[tuple[str, Any]]:
    """The flags of the layout's pipeline split and interleaving (`pipeline_split`)."""
    split = megatron_pipeline(spec, layout, where)
    args: list[tuple[str, Any]] = [(flag, value) for flag, value in (
        ("--decoder-first-pipeline-num-layers", split.first),
        ("--decoder-last-pipeline-num-layers", split.last)) if value is not None]
    args += [(flag, None) for flag, on in (
        ("--account-for-embedding-in-pipeline-split", split.embedding_in_split),
        ("--account-for-loss-in-pipeline-split", split.loss_in_split)) if on]
    if layout.vp > 1 and split.uneven:  # validate_args: "please use
        # --num-virtual-stages-per-pipeline-rank ... when enable uneven pipeline parallelism"
        args.append(("--num-virtual-stages-per-pipeline-rank", layout.vp))
    elif layout.vp > 1:  # interleaved 1F1B: each rank's layers in vp chunks (the plan checks
        # pp·vp divides the layers); docs/exports.md §4 names this flag for VPP
        args.append(("--num-layers-per-virtual-pipeline-stage",
                     spec.num_hidden_layers // (layout.pp * layout.vp)))
    return args


def shape_comment(spec: ModelSpec, sc: Scenario) -> str:
    ffn = f", MoE {spec.moe.num_experts} experts" if spec.moe else ""
    return (f"model shape ({spec.name}): {spec.num_hidden_layers} layers, hidden "
            f"{spec.hidden_size}, {spec.num_attention_heads} heads, {spec.num_key_value_heads} "
            f"query groups, FFN {spec.intermediate_size}{ffn}, vocab {spec.vocab_size}; "
            f"sequences up to {sc.workload.max_seq_len} tokens")


def export_megatron(plan: dict[str, Any], sc: Scenario, version: str) -> Export:
    v, notes = PlanView(plan, sc), []
    unit = "preference pairs" if sc.family is Family.DPO else "sequences"
    lines = [f"# Megatron-LM training arguments per trainable role (megatron-core {version}'s "
             "validate_args rules; flag names: docs/exports.md §4)",
             f"# batch sizes count {unit}; docs/exports.md names no flags for the model shape or "
             "sequence length: give them as your model's launcher does",
             "# usage: source this file (it also sets the environment Megatron asserts), then pass "
             "\"${ACTOR_ARGS[@]}\" to the trainer"]
    layouts = {role: v.need(role, "training") for role in v.trainable}
    if any(x.tp > 1 or x.cp > 1 for x in layouts.values()):
        # validate_args asserts it before Blackwell: TP/CP communication must be ordered
        lines += ["export CUDA_DEVICE_MAX_CONNECTIONS=1  # validate_args: TP or CP > 1 needs it "
                  "(before Blackwell)"]
    for role, layout in layouts.items():
        spec = sc.critic if role == "critic" else sc.actor
        args = role_args(v, role, spec, layout, notes)
        lines += ["", f"# {role} on group {layout.group}: {layout.gpus} GPUs = DP {layout.dp} × "
                  f"TP {layout.tp} × PP {layout.pp} × CP {layout.cp}",
                  f"# {shape_comment(spec, sc)}", f"{role.upper()}_ARGS=("]
        lines += [f"  {flag}" if value is None else f"  {flag} {value}" for flag, value in args]
        lines.append(")")
    if v.inter.shared_actor_critic:
        notes.append("the critic is a head on the actor: the actor's arguments train both")
    notes.append("Megatron-LM arguments cover training only: generation, assessment and the "
                 "plan's placement are not expressed")
    return Export("\n".join(lines) + "\n", "sh", tuple(notes))

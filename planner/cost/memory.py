"""Memory in bytes per GPU for one (role, stage, layout), as a named breakdown that sums to
its total: model states (`states.py`), activations and logits (`activations.py`), the
generation's weights and KV cache (`generation.py`), buffers.

Every pipeline stage is priced and the peak one is reported. Assumptions, stated once:
- ZeRO-3 or parameter offload gathers `ZERO3_LAYERS_IN_FLIGHT` units (a layer, the embedding
  or the head, the largest) at their TP/EP shard in the compute dtype (FSDP2 keeps fp32
  shards and all-gathers bf16; `Precision.activation_bytes`), and in training holds one
  unit's unsharded gradient (in the gradient dtype) until its reduce-scatter: `gather_buffer`.
  Under pipelining (pp > 1) ZeRO-3 holds the stage's whole unsharded weights (compute dtype)
  and gradients (gradient dtype) instead: torchtitan does not reshard after forward when PP
  is on, and PyTorch's pipeline stage runs every micro-batch's backward but the last without
  gradient sync, accumulating unsharded gradients (read from torchtitan's and PyTorch's
  source, not from a row; checked against training_h100.md M13–M18 in bench/training.py).
- Offload: "optimizer" moves the optimizer state and the gradient partition to host
  (ZeRO-Offload: gradients stream to the CPU Adam); "params" moves the parameter shard
  (streamed in through the gather buffer); "both" does both. Offloaded bytes are reported in
  `host_offload`, not in the GPU total. A frozen model that sleeps ("sleep") keeps its weights
  in host memory too, and holds them on the GPU during its own stage only: `stage_weights`, a
  transient component.
- Forward-only passes do not shard weights over dp (inference engines replicate); a
  forward-only layout with zero = 3 (FSDP reference/reward, as verl runs them) shards its
  weights over dp·cp like training does.
- Gradients count as persistent: Megatron keeps its contiguous gradient buffer between steps
  (frameworks that free gradients after the step need less).
- Peak memory as frameworks report it (README "What the memory figure means"):
  allocated (`allocated_bytes.all.peak`, Megatron's figure) = persistent + transient tensors;
  reserved (`reserved_bytes.all.peak`, torchtitan's) = allocated + `fragmentation`, the caching
  allocator's slack, `ALLOCATOR_FRAGMENTATION` × the stage's transient tensors (training and
  forward passes; an inference engine preallocates its KV cache, no slack priced);
  on the GPU (nvidia-smi) = reserved + `runtime_reserve`, the profile's `runtime_reserve_gib`
  (CUDA context, NCCL buffers: outside the allocator). `fragmentation` is a transient
  component so that everything that adds transients (the search included) sees it; `total`
  is the on-GPU figure feasibility is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from planner.cost.activations import (
    MODERN_ACTIVATIONS,
    ActivationOptions,
    bytes_activation_training_stage,
    bytes_inference_workspace,
    bytes_logits,
)
from planner.cost.constants import (
    ALLOCATOR_FRAGMENTATION,
    GIB,
    ZERO3_LAYERS_IN_FLIGHT,
)
from planner.cost.flops import Num
from planner.cost.states import (
    MIXED_PRECISION_ADAM,
    Precision,
    bytes_model_states,
    params_per_gpu_stage,
    stages_that_can_peak,
)
from planner.cost.variants import LayoutVariants, isin, where
from planner.plan import ROLE_STAGES, Layout, expert_tp
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec
from planner.theory.shape import Head

# --- the breakdown ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes on one GPU by component; `total` is the sum of every GPU component.

    Persistent components stay allocated between stages while the model is resident (its
    weights, gradient buffer, optimizer state, a shadow copy); transient ones are released when
    the stage ends (activations, workspaces, logits, KV cache, gather and resharding buffers).
    A co-located group needs `reserve + Σ persistent(resident models) + max transient(stage)`.
    `host_offload` is what offloading moved to CPU memory (not part of the GPU total);
    `pipeline_stage` is the pipeline stage these numbers are for (the peak one). Priced for
    `LayoutVariants`, every field is an array with one element per variant.
    """

    PERSISTENT: ClassVar[tuple[str, ...]] = ("weights", "gradients", "optimizer_states",
                                             "shadow_weights")
    TRANSIENT: ClassVar[tuple[str, ...]] = ("activations", "recompute_workspace",
                                            "inference_workspace", "logits", "kv_cache",
                                            "gather_buffer", "resharding_buffer",
                                            "stage_weights", "fragmentation")

    weights: Num = 0.0
    gradients: Num = 0.0
    optimizer_states: Num = 0.0
    shadow_weights: Num = 0.0
    activations: Num = 0.0
    recompute_workspace: Num = 0.0
    inference_workspace: Num = 0.0
    logits: Num = 0.0
    kv_cache: Num = 0.0
    gather_buffer: Num = 0.0
    resharding_buffer: Num = 0.0
    stage_weights: Num = 0.0  # a sleeping frozen model's weights, loaded for its stage
    fragmentation: Num = 0.0
    runtime_reserve: Num = 0.0
    host_offload: Num = 0.0
    pipeline_stage: int | np.ndarray = 0

    # Written out (the search reads these for every candidate); they match PERSISTENT and
    # TRANSIENT, which `components` uses (a test checks the sums agree).
    @property
    def persistent(self) -> Num:
        return self.weights + self.gradients + self.optimizer_states + self.shadow_weights

    @property
    def transient(self) -> Num:
        return (self.activations + self.recompute_workspace + self.inference_workspace
                + self.logits + self.kv_cache + self.gather_buffer + self.resharding_buffer
                + self.stage_weights + self.fragmentation)

    @property
    def allocated(self) -> Num:
        """Peak allocated bytes (tensors): persistent + transient − fragmentation."""
        return self.persistent + self.transient - self.fragmentation

    @property
    def reserved(self) -> Num:
        """Peak bytes the caching allocator reserves: allocated + fragmentation."""
        return self.persistent + self.transient

    @property
    def total(self) -> Num:
        """Bytes on the GPU: reserved + runtime reserve (CUDA context, NCCL)."""
        return self.persistent + self.transient + self.runtime_reserve

    def components(self) -> dict[str, Num]:
        """The GPU components, keyed `memory/<kind>/<name>`; they sum to `total`."""
        out = {f"memory/persistent/{n}": getattr(self, n) for n in self.PERSISTENT}
        out |= {f"memory/transient/{n}": getattr(self, n) for n in self.TRANSIENT}
        out["memory/reserve/runtime_reserve"] = self.runtime_reserve
        return out


def peak_stage(breakdowns: list[MemoryBreakdown]) -> MemoryBreakdown:
    """The pipeline stage with the largest total (the first on ties); for arrays of candidates,
    each candidate's own peak stage."""
    if len(breakdowns) == 1:
        return breakdowns[0]
    if not any(isinstance(m.total, np.ndarray) for m in breakdowns):
        return max(breakdowns, key=lambda m: m.total)
    stage = np.argmax(np.broadcast_arrays(*(m.total for m in breakdowns)), axis=0)
    if np.all(stage == stage.flat[0]):  # one stage peaks for every candidate
        return breakdowns[int(stage.flat[0])]
    return MemoryBreakdown(**{f.name: np.choose(stage, [getattr(m, f.name) for m in breakdowns])
                              for f in fields(MemoryBreakdown)})


def _offloaded(offload: str | np.ndarray) -> tuple[bool | np.ndarray, bool | np.ndarray]:
    """(parameters on host, optimizer state + gradients on host) for a Layout.offload value."""
    return isin(offload, ("params", "both")), isin(offload, ("optimizer", "both"))


def _stage_params(spec: ModelSpec, layout: Layout | LayoutVariants, etp: Num, head: Head):
    """Each pipeline stage that can peak (`stages_that_can_peak`), with its parameters per GPU
    under the layout's split."""
    for k in stages_that_can_peak(spec, layout.pp, layout.first_stage_layers,
                                  layout.last_stage_layers):
        yield k, params_per_gpu_stage(spec, tp=layout.tp, pp=layout.pp, ep=layout.ep, etp=etp,
                                      stage=k, head=head, first=layout.first_stage_layers,
                                      last=layout.last_stage_layers)


def memory_training_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, seq_len: Num, micro_batches: Num = 1,
    head: Head = Head.POLICY, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of a trainable model in its training layout (every pipeline stage
    priced with the layers the layout's split gives it, the largest returned).

    Model states by ZeRO stage over dp·cp ([ZeRO] §3.1; experts over dp·cp·tp/(ep·etp)), after
    TP/PP/EP sharding; 1F1B activations of `layout.micro_batch` sequences of `seq_len` tokens
    ([Korthikanti]; × 1 + (pp−1)/(pp·vp) with `layout.vp` interleaved chunks); fp32 logits on
    the last stage; the recompute workspace; a gather buffer under ZeRO-3 or parameter
    offload; offloaded state moved to `host_offload`. With `LayoutVariants` every component
    is an array over the variants. Units: bytes.
    """
    nd = layout.dp * layout.cp
    etp = expert_tp(layout, "training")
    nd_e = layout.dp * layout.cp * layout.tp / (layout.ep * etp)  # an expert shard's replicas
    params_host, optim_host = _offloaded(layout.offload)
    gathers = (layout.zero >= 3) | params_host
    b = layout.micro_batch
    out = []
    for k, sp_ in _stage_params(spec, layout, etp, head):
        states = bytes_model_states(sp_.dense, psi_expert=sp_.routed_experts, zero=layout.zero,
                                    nd=nd, nd_expert=nd_e, precision=precision)
        act = bytes_activation_training_stage(
            spec, seq_len, b, tp=layout.tp, pp=layout.pp, cp=layout.cp, sp=layout.sp,
            checkpointing=layout.checkpointing, stage=k, micro_batches=micro_batches,
            interleave=layout.vp, options=options, activation_bytes=precision.activation_bytes,
            first=layout.first_stage_layers, last=layout.last_stage_layers)
        last = k == layout.pp - 1
        host = where(params_host, states.weights, 0.0) + where(
            optim_host, states.gradients + states.optimizer_states, 0.0)
        logits = (bytes_logits(spec, seq_len / layout.cp * b, tp=layout.tp, head=head,
                               sequences=b, bytes_per_logit=options.loss_bytes_per_logit)
                  if last else 0.0)
        gather = where(gathers, (ZERO3_LAYERS_IN_FLIGHT * precision.activation_bytes
                                 + precision.grad_bytes) * sp_.largest_unit, 0.0)
        if layout.pp > 1:  # FSDP2 under pipelining keeps the whole stage unsharded
            stage_unsharded = (precision.activation_bytes + precision.grad_bytes) * sp_.total
            gather = where(params_host, gather,
                           where(layout.zero >= 3, stage_unsharded, gather))
        transient = act.stored + act.recompute_workspace + logits + gather
        out.append(MemoryBreakdown(
            weights=where(params_host, 0.0, states.weights),
            gradients=where(optim_host, 0.0, states.gradients),
            optimizer_states=where(optim_host, 0.0, states.optimizer_states),
            activations=act.stored,
            recompute_workspace=act.recompute_workspace,
            logits=logits, gather_buffer=gather,
            fragmentation=ALLOCATOR_FRAGMENTATION * transient,
            runtime_reserve=reserve_bytes, host_offload=host, pipeline_stage=k))
    return peak_stage(out)


def memory_forward_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, seq_len: Num, head: Head = Head.POLICY,
    precision: Precision = MIXED_PRECISION_ADAM, options: ActivationOptions = MODERN_ACTIVATIONS,
    reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of a teacher-forced forward pass (assessment: reference, reward,
    critic values, actor log-probs) of `layout.micro_batch` sequences of `seq_len` tokens.

    Weights after TP/PP/EP sharding (and over dp·cp under zero = 3, with a gather buffer) —
    in host memory when offloaded, and also on the GPU for the stage when the model sleeps
    (`stage_weights`); the forward-only workspace (`bytes_inference_workspace`); fp32 logits on
    the last stage. With `LayoutVariants` every component is an array over the variants.
    Units: bytes.
    """
    nd = layout.dp * layout.cp
    etp = expert_tp(layout, "assessment")
    nd_e = layout.dp * layout.cp * layout.tp / (layout.ep * etp)
    params_host, _ = _offloaded(layout.offload)
    sleeps = isin(layout.offload, ("sleep",))
    sharded = layout.zero >= 3
    b = layout.micro_batch
    tokens = seq_len / layout.cp * b
    out = []
    for k, sp_ in _stage_params(spec, layout, etp, head):
        weights = precision.weight_bytes * (sp_.dense / where(sharded, nd, 1)
                                            + sp_.routed_experts / where(sharded, nd_e, 1))
        workspace = bytes_inference_workspace(spec, tokens, tp=layout.tp, context=seq_len,
                                              options=options,
                                              activation_bytes=precision.activation_bytes)
        logits = (bytes_logits(spec, tokens, tp=layout.tp, head=head, sequences=b)
                  if k == layout.pp - 1 else 0.0)
        gather = where(sharded | params_host, ZERO3_LAYERS_IN_FLIGHT
                       * precision.activation_bytes * sp_.largest_unit, 0.0)
        out.append(MemoryBreakdown(
            weights=where(params_host | sleeps, 0.0, weights),
            inference_workspace=workspace, logits=logits, gather_buffer=gather,
            stage_weights=where(sleeps, weights, 0.0),
            fragmentation=ALLOCATOR_FRAGMENTATION * (workspace + logits + gather),
            runtime_reserve=reserve_bytes,
            host_offload=where(params_host | sleeps, weights, 0.0), pipeline_stage=k))
    return peak_stage(out)


# --- one entry point per (role, stage, layout) -----------------------------------------------

ROLE_HEADS: dict[str, Head] = {
    "actor": Head.POLICY,
    "reference": Head.POLICY,
    "reward": Head.SCALAR_LAST,
    "critic": Head.SCALAR_EVERY,
}
"""The output head each role puts on its backbone (Table I)."""


@dataclass(frozen=True)
class MemoryWorkload:
    """What an assessment or training stage runs, as the memory model needs it.

    seq_len: tokens per sequence (prompt + response).
    micro_batches: micro-batches per optimizer step per data-parallel rank (1F1B in-flight).
    (Interleaving is the layout's `vp`.)
    """

    seq_len: int
    micro_batches: Num = 1


def memory_per_gpu(
    spec: ModelSpec, role: str, stage: str, layout: Layout | LayoutVariants,
    hardware: HardwareProfile,
    workload: MemoryWorkload, *, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, head: Head | None = None,
) -> MemoryBreakdown:
    """Peak bytes per GPU of `role` running `stage` (assessment or training; generation is
    `generation.memory_generation_per_gpu`) in `layout` on `hardware`.

    assessment → `memory_forward_per_gpu`; training → `memory_training_per_gpu`. The head
    defaults to the role's (`ROLE_HEADS`; pass Head.SHARED for a shared actor–critic). The
    runtime reserve is the profile's `runtime_reserve_gib`. Units: bytes.
    """
    if role not in ROLE_STAGES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLE_STAGES)}")
    if stage not in ROLE_STAGES[role] or stage == "generation":
        raise ValueError(f"{role} has no {stage} stage; its stages are "
                         f"{', '.join(ROLE_STAGES[role])}")
    head = ROLE_HEADS[role] if head is None else head
    reserve = hardware.runtime_reserve_gib * GIB
    if stage == "assessment":
        return memory_forward_per_gpu(spec, layout, seq_len=workload.seq_len, head=head,
                                      precision=precision, options=options,
                                      reserve_bytes=reserve)
    return memory_training_per_gpu(
        spec, layout, seq_len=workload.seq_len, micro_batches=workload.micro_batches, head=head,
        precision=precision, options=options, reserve_bytes=reserve)

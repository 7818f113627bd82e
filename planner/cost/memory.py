"""Memory in bytes per GPU for one (role, stage, layout): model states, activations, KV cache,
buffers — as a named breakdown that sums to its total.

Sources (memory.md, ../shared/data/calibration/):
- [ZeRO] Rajbhandari et al., SC'20 (arXiv 1910.02054) §3.1 and Fig. 1 — memory.md B.1. Model
  states per GPU of Ψ parameters over N_d data-parallel ranks, with w/g/K bytes per parameter
  of weights, gradients and optimizer state: stage 0 `(w+g+K)Ψ`, P_os (1) `(w+g)Ψ + KΨ/N_d`,
  P_os+g (2) `wΨ + (g+K)Ψ/N_d`, P_os+g+p (3) `(w+g+K)Ψ/N_d`. (w, g, K) = (2, 2, 12) is the
  paper's 16 B/param; (2, 4, 12) is Megatron's 18 B/param with fp32 gradient accumulation, and
  at stage 1 Megatron's distributed optimizer, 6 + 12/N_d.
- [Korthikanti] Korthikanti et al., MLSys'23 (arXiv 2205.05198) §4 and Table 2 — memory.md
  B.2. Per-layer activation bytes of a GPT layer (s sequence, b micro-batch, h width, a heads,
  t tensor-parallel): `sbh(34 + 5as/h)`; TP `sbh(10 + 24/t + 5as/(ht))`; TP + SP
  `sbh(34/t + 5as/(ht))`; + selective recompute drops the `5as/h` term; full recompute `2sbh`.
  The first pipeline stage under 1F1B holds min(p, micro-batches) micro-batches of L/p layers;
  interleaving with v model chunks multiplies by `1 + (p−1)/(p·v)`.

Sharding rules (DESIGN.md layout convention g = dp·tp·pp·cp, ep carved out of dp·cp·tp with
expert tensor parallelism 1):
- PP: the layers split as evenly as possible (the first `L mod pp` stages one more); the first
  stage holds the input embedding, the last the output head and final norm (a tied head keeps a
  copy of the embedding there when pp > 1, as Megatron does). Every stage is priced and the
  peak one is reported.
- TP: attention, dense FFN and shared-expert matrices, the embedding and the vocabulary head
  /tp; norms, routers and position tables are replicated. Routed experts /ep (not /tp).
- ZeRO over the data-parallel × context-parallel ranks (N_d = dp·cp, Megatron's distributed
  optimizer group); routed experts over their own replicas N_d,e = dp·cp·tp/ep.

Generalised activation coefficients (`bytes_activation_per_layer`), per layer per micro-batch,
`p` activation bytes, tokens `s·b` (s/cp with context parallelism): norms (their inputs,
`norms_per_layer·p·sbH`), attention input `p·sbH`, Q/K/V `p·sb(a·d_qk + a_kv·d_qk + a_kv·d_v)/t`
(GQA stores fewer K/V heads), scores `(p + dropout·(1 + p))·a·s²b/t` without FlashAttention or
fp32 log-sum-exp `4·a·sb/t` with it, attention output `p·sb·a·d_v/t`, FFN input `p·sbH`, FFN
inner `n·p·sbF/t` (n = 2 two-projection, 3 gated: the gated FFN's extra tensor), dropout
masks `1·sbH` after attention and FFN when dropout is on, MoE router probabilities (fp32),
k expert inputs/outputs and k expert inners (+ shared experts). Tensors written "/t" are split
by TP; the others are replicated unless SP shards them. With Korthikanti's GPT layer (MHA,
F = 4H, two-projection, 2 LayerNorms, dropout, no FlashAttention) this is exactly 34 + 5as/h.

Assumptions, stated once:
- Context parallelism splits the sequence: every per-token term uses s/cp; the score term
  (without FlashAttention) is `a·(s/cp)·s·b` (local queries × all keys).
- Full recompute keeps each layer's input (`p·sbH`, /t under SP since Megatron checkpoints
  the sequence-parallel shard); selective recompute drops the score term. Either adds a
  transient `recompute_workspace`: one layer's un-checkpointed activations for one micro-batch.
  Activation gradients during backward are not modelled (the runtime reserve covers them).
- Interleaving's `1 + (p−1)/(p·v)` factor is applied to every stage (exact on the first, the
  peak; an upper bound elsewhere).
- Logits for the loss / log-probs are fp32, `4·s·b·V/t` on the last stage ([Korthikanti]'s
  `4sbV/t`); a scalar head keeps `4·s·b` (critic) or `4·b` (reward).
- ZeRO-3 or parameter offload gathers `ZERO3_LAYERS_IN_FLIGHT` units (a layer, the embedding
  or the head, the largest) at their TP/EP shard: `gather_buffer`.
- Offload: "optimizer" moves the optimizer state and the gradient partition to host
  (ZeRO-Offload: gradients stream to the CPU Adam); "params" moves the parameter shard
  (streamed in through the gather buffer); "both" does both. Offloaded bytes are reported in
  `host_offload`, not in the GPU total.
- Resharding (hybrid engine: the actor's training layout re-laid into its generation layout on
  the same GPUs) streams one unit at a time, as verl/OpenRLHF load weights tensor by tensor: the
  transient `resharding_buffer` is the largest unit (one layer, or the embedding / head) at the
  generation layout's TP/EP shard; the destination is the generation weights, counted as
  `weights`.
- When the weight sync to a separate rollout group overlaps generation (asynchrony), a shadow
  actor copy in the generation layout (FORMULAS.md §4 M_sh = |π|) receives the next weights
  alongside the copy generating: `shadow_weights` equals the generation weights. A blocking
  sync (generation pauses for it) needs no second copy.
- Generation and forward-only passes do not shard weights over dp (inference engines
  replicate); a forward-only layout with zero = 3 (FSDP reference/reward, as verl runs them)
  shards its weights over dp·cp like training does.
- Gradients count as persistent: Megatron keeps its contiguous gradient buffer between steps
  (frameworks that free gradients after the step need less).
- The runtime reserve (CUDA context, NCCL buffers, fragmentation) is the hardware profile's
  `runtime_reserve_gib`, once per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import ClassVar

import numpy as np

from planner.cost.constants import (
    ADAM_STATE_BYTES_PER_PARAM,
    BYTES_BF16,
    BYTES_FP32,
    DEFAULT_PREFILL_CHUNK_TOKENS,
    DROPOUT_MASK_BYTES,
    FLASH_LSE_BYTES,
    GATED_FFN_STORED_TENSORS,
    GIB,
    LOGITS_BYTES,
    MLA_LATENT_PATH_TENSORS,
    MOE_EXPERT_IO_TENSORS,
    PLAIN_FFN_STORED_TENSORS,
    ROUTER_PROBS_BYTES,
    ZERO3_LAYERS_IN_FLIGHT,
)
from planner.cost.flops import Num, moe_layer_count
from planner.cost.memo import memo
from planner.cost.variants import LayoutVariants, isin, pick, where
from planner.plan import ROLE_STAGES, Checkpointing, Layout
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec
from planner.specs.params import (
    attention_params_per_layer,
    count_params,
    ffn_params,
    norm_params,
)
from planner.theory.shape import Head

__all__ = [
    "FP32_GRAD_ACCUMULATION",
    "KORTHIKANTI_GPT_ACTIVATIONS",
    "MEGATRON_DISTRIBUTED_OPTIMIZER",
    "MEGATRON_DISTRIBUTED_OPTIMIZER_ZERO",
    "MIXED_PRECISION_ADAM",
    "MODERN_ACTIVATIONS",
    "ROLE_HEADS",
    "ActivationBreakdown",
    "ActivationOptions",
    "MemoryBreakdown",
    "MemoryWorkload",
    "ModelStates",
    "Precision",
    "StageActivations",
    "StageParams",
    "bytes_activation_per_layer",
    "bytes_activation_training_stage",
    "bytes_inference_workspace",
    "bytes_kv_cache_per_gpu",
    "bytes_logits",
    "bytes_model_states",
    "bytes_per_param_model_states",
    "bytes_resharding_buffer",
    "memory_forward_per_gpu",
    "memory_generation_per_gpu",
    "memory_per_gpu",
    "memory_training_per_gpu",
    "params_per_gpu_stage",
    "pipeline_stage_layers",
]


# --- precision -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each kind of state (the one place these sizes are chosen).

    weight_bytes: the low-precision weights the forward uses (bf16: 2).
    grad_bytes: gradients (2 in bf16; 4 with fp32 gradient accumulation, Megatron's main_grad).
    optimizer_bytes: optimizer state per parameter, [ZeRO]'s K (mixed-precision Adam: fp32
        master copy + m + v = 12).
    activation_bytes: stored activations (bf16: 2).
    kv_cache_bytes: KV-cache elements (bf16: 2; fp8 KV cache: 1).
    """

    weight_bytes: float = BYTES_BF16
    grad_bytes: float = BYTES_BF16
    optimizer_bytes: float = ADAM_STATE_BYTES_PER_PARAM
    activation_bytes: float = BYTES_BF16
    kv_cache_bytes: float = BYTES_BF16

    @property
    def model_state_bytes(self) -> float:
        """Bytes per parameter without sharding: w + g + K ([ZeRO]'s (2 + 2 + K))."""
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes


MIXED_PRECISION_ADAM = Precision()
"""[ZeRO] §3.1: fp16/bf16 weights and gradients, fp32 Adam state — 16 B/param."""

FP32_GRAD_ACCUMULATION = Precision(grad_bytes=BYTES_FP32)
"""Megatron-LM with fp32 gradient accumulation (main_grad) — 18 B/param ([Korthikanti]'s
"params & optimizer" figures, memory.md B.2)."""

MEGATRON_DISTRIBUTED_OPTIMIZER = FP32_GRAD_ACCUMULATION
"""Megatron's distributed optimizer ([Megatron-DO], bf16 params, fp32 grads): 18 B/param with
the optimizer state sharded over the data-parallel ranks, i.e. 6 + 12/N_d — use it with
`MEGATRON_DISTRIBUTED_OPTIMIZER_ZERO`."""

MEGATRON_DISTRIBUTED_OPTIMIZER_ZERO = 1
"""The ZeRO stage equivalent to Megatron's distributed optimizer (optimizer state sharded)."""


# --- model states ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelStates:
    """Weights, gradients and optimizer state on one GPU. Units: bytes."""

    weights: Num
    gradients: Num
    optimizer_states: Num

    @property
    def total(self) -> Num:
        return self.weights + self.gradients + self.optimizer_states


def bytes_model_states(psi: Num, *, zero: Num, nd: Num, precision: Precision = MIXED_PRECISION_ADAM,
                       psi_expert: Num = 0.0, nd_expert: Num | None = None) -> ModelStates:
    """Model-state bytes of Ψ parameters under ZeRO stage 0–3 over N_d ranks ([ZeRO] §3.1).

    Stage 0 `(w+g+K)Ψ`; 1 (P_os) `(w+g)Ψ + KΨ/N_d`; 2 (P_os+g) `wΨ + (g+K)Ψ/N_d`;
    3 (P_os+g+p) `(w+g+K)Ψ/N_d`, with w, g, K from `precision` (16 B/param: 120 / 31.4 / 16.6 /
    1.88 GB at Ψ = 7.5B, N_d = 64, Fig. 1). `psi_expert` parameters shard over `nd_expert`
    instead (routed experts' replicas). `zero` and `nd` may be arrays. Units: bytes.
    """
    nd_e = nd if nd_expert is None else nd_expert
    w, g, K = precision.weight_bytes, precision.grad_bytes, precision.optimizer_bytes

    def sharded(bytes_per_param: float, from_stage: int) -> Num:
        # divide by N_d from this stage on; `n ** (zero >= k)` avoids branching on arrays
        if isinstance(zero, int):  # the search's scalar case, without numpy's overhead
            on = zero >= from_stage
            return bytes_per_param * (psi / (nd if on else 1) + psi_expert / (nd_e if on else 1))
        on = np.asarray(zero) >= from_stage
        return bytes_per_param * (psi / nd ** on + psi_expert / nd_e ** on)

    return ModelStates(weights=sharded(w, 3), gradients=sharded(g, 2),
                       optimizer_states=sharded(K, 1))


def bytes_per_param_model_states(precision: Precision, zero: Num, nd: Num) -> Num:
    """Model-state bytes per parameter: e.g. 16; 18; Megatron's distributed optimizer 6 + 12/N_d."""
    return bytes_model_states(1.0, zero=zero, nd=nd, precision=precision).total


# --- parameters per pipeline stage -----------------------------------------------------------


def pipeline_stage_layers(L: int, pp: int) -> list[range]:
    """Layer indices of each pipeline stage: as even as possible, the first `L mod pp` one more."""
    if pp > L:
        raise ValueError(f"pp ({pp}) exceeds the model's {L} layers; use pp ≤ {L}")
    base, extra = divmod(L, pp)
    bounds = [k * base + min(k, extra) for k in range(pp + 1)]
    return [range(bounds[k], bounds[k + 1]) for k in range(pp)]


@dataclass(frozen=True)
class StageParams:
    """Parameters one GPU holds on one pipeline stage after TP and EP sharding. Units: elements.

    layers_dense: transformer layers without routed experts (attention, dense FFN, shared
        experts /tp; routers and norms replicated).
    routed_experts: routed experts of the stage's MoE layers, /ep.
    embedding: first stage — input embedding (and OPT's projections) /tp, position table.
    head: last stage — vocabulary head (or its tied copy when pp > 1) /tp, scalar head,
        final norm.
    """

    stage: int
    layers: int
    moe_layers: int
    layers_dense: float
    routed_experts: float
    embedding: float
    head: float
    largest_unit: float  # the largest of one layer, the embedding, the head (ZeRO-3 gathers)

    @property
    def dense(self) -> float:
        """Non-expert parameters (ZeRO shards them over dp·cp)."""
        return self.layers_dense + self.embedding + self.head

    @property
    def total(self) -> float:
        return self.dense + self.routed_experts


def _layer_params(spec: ModelSpec, tp: int, ep: int) -> tuple[float, float, float]:
    """(dense layer, MoE layer without routed experts, routed experts of one MoE layer) per GPU."""
    H = spec.hidden_size
    counts = count_params(spec)
    norms = spec.traits.norms_per_layer * norm_params(spec, H)
    attn = attention_params_per_layer(spec) / tp
    dense = attn + ffn_params(spec, spec.intermediate_size, spec.mlp_bias) / tp + norms
    n_moe = moe_layer_count(spec)
    if not n_moe:
        return dense, 0.0, 0.0
    moe_nonrouted = attn + counts.shared_experts / n_moe / tp + counts.router / n_moe + norms
    return dense, moe_nonrouted, counts.routed_experts / n_moe / ep


@lru_cache(maxsize=4096)  # pure in hashable arguments; the search re-asks per variant
def params_per_gpu_stage(spec: ModelSpec, *, tp: int = 1, pp: int = 1, ep: int = 1,
                         stage: int = 0, head: Head = Head.POLICY) -> StageParams:
    """Parameters on one GPU of pipeline stage `stage` (0-based) after TP/EP sharding.

    Summed over the stages with tp = ep = 1 this is `params_with_head(spec, head)`; a GPT layer
    (no biases, no norms) gives [Korthikanti]'s `12·h²` per layer. Units: elements.
    """
    L, H = spec.num_hidden_layers, spec.hidden_size
    layers = pipeline_stage_layers(L, pp)[stage]
    moe_set = set(spec.moe.moe_layers) if spec.moe else set()
    n_moe = sum(1 for i in layers if i in moe_set)
    n_dense = len(layers) - n_moe
    dense_layer, moe_layer, routed_layer = _layer_params(spec, tp, ep)
    counts = count_params(spec)
    final_norm = counts.norms - L * spec.traits.norms_per_layer * norm_params(spec, H)
    first, last = stage == 0, stage == pp - 1
    embedding = (counts.embedding / tp + counts.position_embedding) if first else 0.0
    vocab_head = head in (Head.POLICY, Head.SHARED)
    head_params = 0.0
    if last:
        lm_head = counts.lm_head or (counts.embedding if pp > 1 else 0)  # tied: Megatron's copy
        head_params = ((lm_head / tp if vocab_head else 0.0)
                       + (H if head != Head.POLICY else 0) + final_norm)
    units = [u for u, present in ((dense_layer, n_dense), (moe_layer + routed_layer, n_moe),
                                  (embedding, first), (head_params, last)) if present]
    return StageParams(
        stage=stage, layers=len(layers), moe_layers=n_moe,
        layers_dense=n_dense * dense_layer + n_moe * moe_layer,
        routed_experts=n_moe * routed_layer, embedding=embedding, head=head_params,
        largest_unit=max(units, default=0.0))


# --- activations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ActivationOptions:
    """What the framework's kernels store.

    flash_attention: fused attention (FlashAttention / cuDNN), no s² score tensors — the default
        of every modern framework (Megatron-Core with TE, FSDP/HF with SDPA, vLLM).
    dropout: attention and hidden dropout masks are stored. RL post-training of current LLMs
        runs with dropout 0 (their configs' attention_dropout = 0), so off by default;
        [Korthikanti]'s GPT-3 setting has it on.
    """

    flash_attention: bool = True
    dropout: bool = False


MODERN_ACTIVATIONS = ActivationOptions()
"""FlashAttention, no dropout: what Megatron-Core/FSDP RL frameworks run for Llama/Qwen models."""

KORTHIKANTI_GPT_ACTIVATIONS = ActivationOptions(flash_attention=False, dropout=True)
"""[Korthikanti] Table 2's setting: materialised softmax and dropout on (34 + 5as/h)."""


@dataclass(frozen=True)
class ActivationBreakdown:
    """Stored activations of one layer for one micro-batch on one GPU, by tensor. Units: bytes."""

    norms: Num = 0.0  # inputs of the layer's norms
    attn_input: Num = 0.0  # input of the q/k/v projections
    mla_latents: Num = 0.0  # MLA q/kv latents and the RoPE key
    qkv: Num = 0.0  # Q, K, V
    scores: Num = 0.0  # softmax output (+ dropout mask and output), or FlashAttention's LSE
    attn_out: Num = 0.0  # input of the output projection
    attn_dropout_mask: Num = 0.0
    ffn_input: Num = 0.0  # input of the FFN / router / shared experts
    ffn_inner: Num = 0.0  # F-wide tensors of the dense FFN, or of the experts
    router: Num = 0.0  # MoE router probabilities (fp32)
    expert_io: Num = 0.0  # routed experts' permuted inputs and outputs
    ffn_dropout_mask: Num = 0.0
    checkpoint: Num = 0.0  # full recompute: the layer input only

    @property
    def total(self) -> Num:
        return sum(getattr(self, f.name) for f in fields(self))


def _attn_widths(spec: ModelSpec, tp: Num) -> tuple[Num, Num, Num, Num]:
    """Per-rank widths (elements per token) of Q, K, V and the attention output."""
    a = spec.num_attention_heads
    if spec.mla:
        d_qk = spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim
        d_v = spec.mla.v_head_dim
        kv_heads = a / tp  # MLA expands K and V to every query head
    else:
        d_qk = d_v = spec.head_dim
        kv_heads = np.maximum(spec.num_key_value_heads / tp, 1)  # replicated when tp > a_kv
    return a * d_qk / tp, kv_heads * d_qk, kv_heads * d_v, a * d_v / tp


def _ffn_stored_tensors(spec: ModelSpec) -> int:
    return GATED_FFN_STORED_TENSORS if spec.gated_ffn else PLAIN_FFN_STORED_TENSORS


@memo  # the same for every pipeline stage, expert-parallel degree and model head
def bytes_activation_per_layer(
    spec: ModelSpec, s: Num, b: Num, *, tp: Num = 1, cp: Num = 1, sp: bool = False,
    checkpointing: Checkpointing | np.ndarray = "none", moe: bool = False,
    options: ActivationOptions = MODERN_ACTIVATIONS, activation_bytes: float = BYTES_BF16,
) -> ActivationBreakdown:
    """Stored activations of one layer, one micro-batch of b sequences of s tokens, one GPU.

    [Korthikanti] Table 2 generalised by component (module docstring); on a GPT layer with
    `KORTHIKANTI_GPT_ACTIVATIONS` it is exactly `sbh(34 + 5as/h)`, `sbh(10 + 24/t + 5as/(ht))`
    (TP), `sbh(34/t + 5as/(ht))` (TP + SP), `sbh(10 + 24/t)` / `sbh·34/t` (selective), `2sbh`
    (full). `moe=True` prices the layer's FFN as its MoE block. `checkpointing` may be an
    array (one mode per candidate). Units: bytes.
    """
    if not np.all(isin(checkpointing, ("none", "selective", "full"))):
        raise ValueError(f"checkpointing must be none, selective or full, got {checkpointing!r}")
    p, H, a = activation_bytes, spec.hidden_size, spec.num_attention_heads
    mask = DROPOUT_MASK_BYTES * options.dropout
    t_rep = tp if sp else 1  # replicated tensors are split only under sequence parallelism
    s_loc = s / cp
    sbH = s_loc * b * H
    full = ActivationBreakdown(checkpoint=p * sbH / t_rep)
    q_w, k_w, v_w, o_w = _attn_widths(spec, tp)
    if options.flash_attention:
        scores = FLASH_LSE_BYTES * a * s_loc * b / tp
    else:
        scores = (p + options.dropout * (DROPOUT_MASK_BYTES + p)) * a * s_loc * s * b / tp
    mla = spec.mla
    latents = (MLA_LATENT_PATH_TENSORS * ((mla.q_lora_rank or 0) + mla.kv_lora_rank)
               + mla.qk_rope_head_dim) if mla else 0
    n_st = _ffn_stored_tensors(spec)
    if moe and spec.moe:
        m = spec.moe
        inner = n_st * p * s_loc * b * (m.experts_per_token * m.expert_intermediate_size
                                        + m.num_shared_experts
                                        * m.shared_expert_intermediate_size) / tp
        router = ROUTER_PROBS_BYTES * s_loc * b * m.num_experts / t_rep
        expert_io = MOE_EXPERT_IO_TENSORS * m.experts_per_token * p * sbH / tp
    else:
        inner = n_st * p * s_loc * b * spec.intermediate_size / tp
        router = expert_io = 0.0
    stored = ActivationBreakdown(
        norms=spec.traits.norms_per_layer * p * sbH / t_rep,
        attn_input=p * sbH / t_rep,
        mla_latents=p * s_loc * b * latents / t_rep,
        qkv=p * s_loc * b * (q_w + k_w + v_w),
        scores=where(checkpointing == "selective", 0.0, scores),
        attn_out=p * s_loc * b * o_w,
        attn_dropout_mask=mask * sbH / t_rep,
        ffn_input=p * sbH / t_rep,
        ffn_inner=inner,
        router=router,
        expert_io=expert_io,
        ffn_dropout_mask=mask * sbH / t_rep,
    )
    return pick(checkpointing == "full", full, stored)


@dataclass(frozen=True)
class StageActivations:
    """Stored activations on one pipeline stage under 1F1B, by part. Units: bytes.

    layers: per-layer activations × the stage's layers × micro-batches in flight × the
        interleaving factor ([Korthikanti] §4.2.3).
    embedding: the embedding dropout mask (first stage, dropout on): `sbh·p_in_flight/t`.
    head_input: final-norm and output-layer inputs on the last stage, `2·p·sbh` (/t under SP);
        with the logits this is [Korthikanti]'s `4sbh/t·(1 + V/h)`.
    recompute_workspace: one layer's un-checkpointed activations for one micro-batch
        (transient during the backward of a checkpointed layer).
    """

    layers: Num
    embedding: Num
    head_input: Num
    recompute_workspace: Num

    @property
    def stored(self) -> Num:
        return self.layers + self.embedding + self.head_input


def _in_flight(pp: int, stage: int, micro_batches: Num) -> Num:
    """Micro-batches whose activations stage `stage` holds under 1F1B: min(pp − stage, n)."""
    return np.minimum(pp - stage, micro_batches)


def _interleave_factor(pp: int, interleave: int) -> float:
    """[Korthikanti] §4.2.3: interleaving with v chunks multiplies by 1 + (p−1)/(p·v); v = 1: 1."""
    return 1 + (interleave > 1) * (pp - 1) / (pp * interleave)


@memo  # re-asked for every ZeRO/offload variant, expert-parallel degree and model
def bytes_activation_training_stage(
    spec: ModelSpec, s: Num, b: Num, *, tp: int = 1, pp: int = 1, cp: int = 1, sp: bool = False,
    checkpointing: Checkpointing | np.ndarray = "none", stage: int = 0, micro_batches: Num = 1,
    interleave: int = 1, options: ActivationOptions = MODERN_ACTIVATIONS,
    activation_bytes: float = BYTES_BF16,
) -> StageActivations:
    """Training activations held by one GPU of pipeline stage `stage` under 1F1B. Units: bytes.

    The stage holds min(pp − stage, micro_batches) micro-batches (the first stage: min(pp, n))
    of its layers; × `1 + (pp−1)/(pp·v)` with v > 1 interleaved chunks. Per-layer terms from
    `bytes_activation_per_layer` (dense and MoE layers priced separately).
    """
    kw = dict(tp=tp, cp=cp, sp=sp, options=options, activation_bytes=activation_bytes)
    layers = pipeline_stage_layers(spec.num_hidden_layers, pp)[stage]
    moe_set = set(spec.moe.moe_layers) if spec.moe else set()
    n_moe = sum(1 for i in layers if i in moe_set)
    n_dense = len(layers) - n_moe
    kinds = [(n, moe) for n, moe in ((n_dense, False), (n_moe, True)) if n]
    stored = {moe: bytes_activation_per_layer(spec, s, b, checkpointing=checkpointing, moe=moe,
                                              **kw).total for _, moe in kinds}
    per_layer = sum(n * stored[moe] for n, moe in kinds)
    workspace: Num = 0.0
    if np.any(checkpointing != "none"):  # (an array's elements without: exactly 0)
        for _, moe in kinds:
            workspace = np.maximum(workspace, bytes_activation_per_layer(
                spec, s, b, moe=moe, **kw).total - stored[moe])
    in_flight = _in_flight(pp, stage, micro_batches)
    t_rep = tp if sp else 1
    sbH = s / cp * b * spec.hidden_size
    p = activation_bytes
    embedding = (DROPOUT_MASK_BYTES * options.dropout * sbH / t_rep * in_flight
                 if stage == 0 else 0.0)
    # final norm input + output layer input, one micro-batch in flight on the last stage
    head_input = 2 * p * sbH / t_rep * in_flight if stage == pp - 1 else 0.0
    return StageActivations(
        layers=per_layer * in_flight * _interleave_factor(pp, interleave),
        embedding=embedding, head_input=head_input, recompute_workspace=workspace)


def bytes_logits(spec: ModelSpec, tokens: Num, *, tp: Num = 1, head: Head = Head.POLICY,
                 sequences: Num = 1) -> Num:
    """Logits kept for the loss / log-probs of `tokens` tokens on one GPU (last stage), fp32.

    Vocabulary head `4·tokens·V/t` ([Korthikanti]'s 4sbV/t; vocab-parallel over TP); critic
    `4·tokens`; reward `4·sequences` (last token only); shared: both. Units: bytes.
    """
    V = spec.vocab_size
    match head:
        case Head.POLICY:
            return LOGITS_BYTES * tokens * V / tp
        case Head.SCALAR_EVERY:
            return LOGITS_BYTES * tokens
        case Head.SCALAR_LAST:
            return LOGITS_BYTES * sequences
        case Head.SHARED:
            return LOGITS_BYTES * tokens * (V / tp + 1)
    raise ValueError(f"head must be a planner.theory.Head, got {head!r}")


# --- inference -------------------------------------------------------------------------------


def bytes_kv_cache_per_gpu(spec: ModelSpec, n_seqs: Num, context: Num, *, tp: Num = 1,
                           pp: int = 1, cp: Num = 1, stage: int = 0,
                           kv_bytes: float = BYTES_BF16) -> Num:
    """KV cache of `n_seqs` concurrent sequences at `context` tokens on one GPU. Units: bytes.

    n_seqs counts the sequences of one model replica (one dp rank's tp·pp·cp GPUs). Per layer
    per token: GQA `2·max(a_kv/t, 1)·hd` (KV heads split by TP, replicated when tp > a_kv);
    MLA `kv_lora_rank + qk_rope_head_dim` (the latent is replicated across TP ranks, as vLLM
    does). × the stage's layers; context split by CP.
    """
    layers = len(pipeline_stage_layers(spec.num_hidden_layers, pp)[stage])
    if spec.mla:
        per_layer = spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
    else:
        per_layer = 2 * np.maximum(spec.num_key_value_heads / tp, 1) * spec.head_dim
    return kv_bytes * n_seqs * (context / cp) * layers * per_layer


def bytes_inference_workspace(spec: ModelSpec, tokens: Num, *, tp: Num = 1,
                              context: Num | None = None,
                              options: ActivationOptions = MODERN_ACTIVATIONS,
                              activation_bytes: float = BYTES_BF16) -> Num:
    """Forward-only activation workspace for `tokens` tokens in flight (Table I's M_Inf = d per
    token, made concrete). Units: bytes.

    Only one layer is live: per token the residual stream and the normed input (`2H`) plus the
    widest intermediate — attention Q, K, V and output (per-rank widths), a dense FFN's
    n·F/t, or a MoE block's k·(n·F_e + 2H)/t + shared experts; without FlashAttention also
    a·context/t scores. Logits are separate (`bytes_logits`).
    """
    q_w, k_w, v_w, o_w = _attn_widths(spec, tp)
    widths = [q_w + k_w + v_w + o_w]
    n_st = _ffn_stored_tensors(spec)
    if moe_layer_count(spec) < spec.num_hidden_layers:
        widths.append(n_st * spec.intermediate_size / tp)
    if spec.moe:
        m = spec.moe
        widths.append((m.experts_per_token * (n_st * m.expert_intermediate_size
                                              + MOE_EXPERT_IO_TENSORS * spec.hidden_size)
                       + m.num_shared_experts * n_st * m.shared_expert_intermediate_size) / tp)
    widest = widths[0]
    for w in widths[1:]:
        widest = np.maximum(widest, w)
    scores = 0.0
    if not options.flash_attention:
        scores = spec.num_attention_heads * (tokens if context is None else context) / tp
    return activation_bytes * tokens * (2 * spec.hidden_size + widest + scores)


def bytes_resharding_buffer(spec: ModelSpec, generation: Layout,
                            weight_bytes: float = BYTES_BF16) -> float:
    """Transient buffer re-laying the actor's weights into its generation layout. Units: bytes.

    Assumption (module docstring): weights move one unit at a time (a layer, the embedding or
    the head), so the buffer is the largest unit at the generation layout's TP/EP shard.
    """
    units = [params_per_gpu_stage(spec, tp=generation.tp, pp=generation.pp, ep=generation.ep,
                                  stage=k).largest_unit for k in range(generation.pp)]
    return weight_bytes * max(units)


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
                                            "gather_buffer", "resharding_buffer")

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
                + self.logits + self.kv_cache + self.gather_buffer + self.resharding_buffer)

    @property
    def total(self) -> Num:
        """Bytes on the GPU: persistent + transient + runtime reserve."""
        return self.persistent + self.transient + self.runtime_reserve

    def components(self) -> dict[str, Num]:
        """The GPU components, keyed `memory/<kind>/<name>`; they sum to `total`."""
        out = {f"memory/persistent/{n}": getattr(self, n) for n in self.PERSISTENT}
        out |= {f"memory/transient/{n}": getattr(self, n) for n in self.TRANSIENT}
        out["memory/reserve/runtime_reserve"] = self.runtime_reserve
        return out


def _peak(breakdowns: list[MemoryBreakdown]) -> MemoryBreakdown:
    """The pipeline stage with the largest total (the first on ties); for arrays of candidates,
    each candidate's own peak stage."""
    if len(breakdowns) == 1:
        return breakdowns[0]
    if not any(isinstance(m.total, np.ndarray) for m in breakdowns):
        return max(breakdowns, key=lambda m: m.total)
    stage = np.argmax(np.broadcast_arrays(*(m.total for m in breakdowns)), axis=0)
    return MemoryBreakdown(**{f.name: np.choose(stage, [getattr(m, f.name) for m in breakdowns])
                              for f in fields(MemoryBreakdown)})


def _offloaded(offload: str | np.ndarray) -> tuple[bool | np.ndarray, bool | np.ndarray]:
    """(parameters on host, optimizer state + gradients on host) for a Layout.offload value."""
    return isin(offload, ("params", "both")), isin(offload, ("optimizer", "both"))


def memory_training_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, seq_len: Num, micro_batches: Num = 1,
    head: Head = Head.POLICY, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, interleave: int = 1,
    reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of a trainable model in its training layout (every pipeline stage
    priced, the largest returned).

    Model states by ZeRO stage over dp·cp ([ZeRO] §3.1; experts over dp·cp·tp/ep), after
    TP/PP/EP sharding; 1F1B activations of `layout.micro_batch` sequences of `seq_len` tokens
    ([Korthikanti]); fp32 logits on the last stage; the recompute workspace; a gather buffer
    under ZeRO-3 or parameter offload; offloaded state moved to `host_offload`. With
    `LayoutVariants` every component is an array over the variants. Units: bytes.
    """
    nd = layout.dp * layout.cp
    nd_e = layout.dp * layout.cp * layout.tp / layout.ep
    params_host, optim_host = _offloaded(layout.offload)
    gathers = (layout.zero >= 3) | params_host
    b = layout.micro_batch
    out = []
    for k in range(layout.pp):
        sp_ = params_per_gpu_stage(spec, tp=layout.tp, pp=layout.pp, ep=layout.ep, stage=k,
                                   head=head)
        states = bytes_model_states(sp_.dense, psi_expert=sp_.routed_experts, zero=layout.zero,
                                    nd=nd, nd_expert=nd_e, precision=precision)
        act = bytes_activation_training_stage(
            spec, seq_len, b, tp=layout.tp, pp=layout.pp, cp=layout.cp, sp=layout.sp,
            checkpointing=layout.checkpointing, stage=k, micro_batches=micro_batches,
            interleave=interleave, options=options, activation_bytes=precision.activation_bytes)
        last = k == layout.pp - 1
        host = where(params_host, states.weights, 0.0) + where(
            optim_host, states.gradients + states.optimizer_states, 0.0)
        out.append(MemoryBreakdown(
            weights=where(params_host, 0.0, states.weights),
            gradients=where(optim_host, 0.0, states.gradients),
            optimizer_states=where(optim_host, 0.0, states.optimizer_states),
            activations=act.stored,
            recompute_workspace=act.recompute_workspace,
            logits=(bytes_logits(spec, seq_len / layout.cp * b, tp=layout.tp, head=head,
                                 sequences=b) if last else 0.0),
            gather_buffer=where(gathers, ZERO3_LAYERS_IN_FLIGHT * precision.weight_bytes
                                * sp_.largest_unit, 0.0),
            runtime_reserve=reserve_bytes, host_offload=host, pipeline_stage=k))
    return _peak(out)


def memory_forward_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, seq_len: Num, head: Head = Head.POLICY,
    precision: Precision = MIXED_PRECISION_ADAM, options: ActivationOptions = MODERN_ACTIVATIONS,
    reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of a teacher-forced forward pass (assessment: reference, reward,
    critic values, actor log-probs) of `layout.micro_batch` sequences of `seq_len` tokens.

    Weights after TP/PP/EP sharding (and over dp·cp under zero = 3, with a gather buffer);
    the forward-only workspace (`bytes_inference_workspace`); fp32 logits on the last stage.
    With `LayoutVariants` every component is an array over the variants. Units: bytes.
    """
    nd = layout.dp * layout.cp
    nd_e = layout.dp * layout.cp * layout.tp / layout.ep
    params_host, _ = _offloaded(layout.offload)
    sharded = layout.zero >= 3
    b = layout.micro_batch
    tokens = seq_len / layout.cp * b
    out = []
    for k in range(layout.pp):
        sp_ = params_per_gpu_stage(spec, tp=layout.tp, pp=layout.pp, ep=layout.ep, stage=k,
                                   head=head)
        weights = precision.weight_bytes * (sp_.dense / where(sharded, nd, 1)
                                            + sp_.routed_experts / where(sharded, nd_e, 1))
        out.append(MemoryBreakdown(
            weights=where(params_host, 0.0, weights),
            inference_workspace=bytes_inference_workspace(
                spec, tokens, tp=layout.tp, context=seq_len, options=options,
                activation_bytes=precision.activation_bytes),
            logits=(bytes_logits(spec, tokens, tp=layout.tp, head=head, sequences=b)
                    if k == layout.pp - 1 else 0.0),
            gather_buffer=where(sharded | params_host, ZERO3_LAYERS_IN_FLIGHT
                                * precision.weight_bytes * sp_.largest_unit, 0.0),
            runtime_reserve=reserve_bytes, host_offload=where(params_host, weights, 0.0),
            pipeline_stage=k))
    return _peak(out)


def memory_generation_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, kv_seqs: Num, context_len: Num,
    prefill_tokens: Num = DEFAULT_PREFILL_CHUNK_TOKENS, shadow_weights: bool = False,
    resharding: bool = False, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of the actor generating: weights in the generation layout (TP/PP/EP
    sharded, replicated over dp), the KV cache of `kv_seqs` concurrent rollouts per replica at
    `context_len` tokens, the prefill workspace of `prefill_tokens` tokens and the sampling
    logits of the decode batch; a shadow copy under asynchrony; the resharding buffer when the
    training layout is re-laid into this one on the same GPUs. Units: bytes.
    """
    out = []
    for k in range(layout.pp):
        sp_ = params_per_gpu_stage(spec, tp=layout.tp, pp=layout.pp, ep=layout.ep, stage=k)
        weights = precision.weight_bytes * sp_.total
        out.append(MemoryBreakdown(
            weights=weights,
            shadow_weights=weights if shadow_weights else 0.0,
            kv_cache=bytes_kv_cache_per_gpu(spec, kv_seqs, context_len, tp=layout.tp,
                                            pp=layout.pp, cp=layout.cp, stage=k,
                                            kv_bytes=precision.kv_cache_bytes),
            inference_workspace=bytes_inference_workspace(
                spec, prefill_tokens, tp=layout.tp, context=context_len, options=options,
                activation_bytes=precision.activation_bytes),
            logits=(bytes_logits(spec, kv_seqs, tp=layout.tp) if k == layout.pp - 1 else 0.0),
            resharding_buffer=(bytes_resharding_buffer(spec, layout, precision.weight_bytes)
                               if resharding else 0.0),
            runtime_reserve=reserve_bytes, pipeline_stage=k))
    return _peak(out)


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
    """What one stage runs, as the memory model needs it.

    seq_len: tokens per sequence (prompt + response) in assessment and training.
    micro_batches: micro-batches per optimizer step per data-parallel rank (1F1B in-flight).
    kv_seqs: concurrent rollouts per generation replica; context_len: their context (default
        seq_len); prefill_tokens: chunked-prefill budget.
    shadow_weights: a second actor copy receives the next weights (overlapped weight sync).
    resharding: the generation layout is filled from the training layout on the same GPUs.
    interleave: virtual pipeline chunks per stage (1 = plain 1F1B).
    """

    seq_len: int
    micro_batches: Num = 1
    kv_seqs: Num = 0
    context_len: int | None = None
    prefill_tokens: int = DEFAULT_PREFILL_CHUNK_TOKENS
    shadow_weights: bool = False
    resharding: bool = False
    interleave: int = 1


def memory_per_gpu(
    spec: ModelSpec, role: str, stage: str, layout: Layout | LayoutVariants,
    hardware: HardwareProfile,
    workload: MemoryWorkload, *, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, head: Head | None = None,
) -> MemoryBreakdown:
    """Peak bytes per GPU of `role` running `stage` in `layout` on `hardware`.

    generation → `memory_generation_per_gpu`; assessment → `memory_forward_per_gpu`; training
    → `memory_training_per_gpu`. The head defaults to the role's (`ROLE_HEADS`; pass
    Head.SHARED for a shared actor–critic). The runtime reserve is the profile's
    `runtime_reserve_gib`. Units: bytes.
    """
    if role not in ROLE_STAGES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLE_STAGES)}")
    if stage not in ROLE_STAGES[role]:
        raise ValueError(f"{role} has no {stage} stage; its stages are "
                         f"{', '.join(ROLE_STAGES[role])}")
    head = ROLE_HEADS[role] if head is None else head
    reserve = hardware.runtime_reserve_gib * GIB
    if stage == "generation":
        return memory_generation_per_gpu(
            spec, layout, kv_seqs=workload.kv_seqs,
            context_len=workload.context_len or workload.seq_len,
            prefill_tokens=workload.prefill_tokens, shadow_weights=workload.shadow_weights,
            resharding=workload.resharding, precision=precision, options=options,
            reserve_bytes=reserve)
    if stage == "assessment":
        return memory_forward_per_gpu(spec, layout, seq_len=workload.seq_len, head=head,
                                      precision=precision, options=options,
                                      reserve_bytes=reserve)
    return memory_training_per_gpu(
        spec, layout, seq_len=workload.seq_len, micro_batches=workload.micro_batches, head=head,
        precision=precision, options=options, interleave=workload.interleave,
        reserve_bytes=reserve)

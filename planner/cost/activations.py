"""Activation, logit and workspace bytes per GPU.

Source: [Korthikanti] Korthikanti et al., MLSys'23 (arXiv 2205.05198) §4 and Table 2 —
memory.md B.2. Per-layer activation bytes of a GPT layer (s sequence, b micro-batch, h width,
a heads, t tensor-parallel): `sbh(34 + 5as/h)`; TP `sbh(10 + 24/t + 5as/(ht))`; TP + SP
`sbh(34/t + 5as/(ht))`; + selective recompute drops the `5as/h` term; full recompute `2sbh`.
The first pipeline stage under 1F1B holds min(p, micro-batches) micro-batches of L/p layers;
interleaving with v model chunks multiplies by `1 + (p−1)/(p·v)`.

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

Assumptions:
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
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from planner.cost.constants import (
    BYTES_BF16,
    DROPOUT_MASK_BYTES,
    FLASH_LSE_BYTES,
    FP8_SAVED_INPUT_BYTES,
    GATED_FFN_STORED_TENSORS,
    LOGITS_BYTES,
    MLA_LATENT_PATH_TENSORS,
    MOE_EXPERT_IO_TENSORS,
    PLAIN_FFN_STORED_TENSORS,
    ROUTER_PROBS_BYTES,
    UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT,
)
from planner.cost.flops import Num, moe_layer_count
from planner.cost.memo import memo
from planner.cost.pipeline_split import pipeline_stage_layers
from planner.cost.variants import isin, pick, where
from planner.plan import Checkpointing
from planner.specs.model import ModelSpec
from planner.theory.shape import Head

# --- activations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ActivationOptions:
    """What the framework's kernels store.

    flash_attention: fused attention (FlashAttention / cuDNN), no s² score tensors — the default
        of every modern framework (Megatron-Core with TE, FSDP/HF with SDPA, vLLM).
    dropout: attention and hidden dropout masks are stored. RL post-training of current LLMs
        runs with dropout 0 (their configs' attention_dropout = 0), so off by default;
        [Korthikanti]'s GPT-3 setting has it on.
    selective_policy: what `checkpointing = "selective"` keeps. "core_attn" (Megatron's
        selective recompute, the default): everything but the attention core's score tensors.
        "every_other_mm" (torchtitan's per-op SAC, `mode = "op"`): the layer input and the
        outputs of the 1st, 3rd, 5th, … matmul of the layer (q, v, the FFN's first projection,
        the FFN output on a gated Llama layer), the attention kernel's output and log-sum-exp;
        everything else is recomputed (dense layers; a MoE layer keeps the core_attn set).
    loss_bytes_per_logit: peak bytes per vocabulary logit of the loss on the last stage:
        `LOGITS_BYTES` (fp32 logits, [Korthikanti]'s 4sbV/t) by default;
        `UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT` for an unfused fp32 cross-entropy (torchtitan
        eager, HF); `COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT` for it under torch.compile.
    fp8_saved_inputs: FP8 training with Transformer Engine (Megatron): the inputs of the
        linear layers (q/k/v and dense-FFN-input norm outputs, the FFN's or each expert's
        last projection's input) are saved in FP8 (`FP8_SAVED_INPUT_BYTES`), and the attention
        output projection keeps an FP8 copy of its input besides the bf16 one FlashAttention
        saves. Applies to the `core_attn` and no-recompute sets (torchao's FP8 in torchtitan
        saves bf16 inputs).
    """

    flash_attention: bool = True
    dropout: bool = False
    selective_policy: str = "core_attn"
    loss_bytes_per_logit: float = LOGITS_BYTES
    fp8_saved_inputs: bool = False

    def __post_init__(self) -> None:
        if self.selective_policy not in SELECTIVE_POLICIES:
            raise ValueError(f"selective_policy must be one of {', '.join(SELECTIVE_POLICIES)}, "
                             f"got {self.selective_policy!r}")


SELECTIVE_POLICIES = ("core_attn", "every_other_mm")


MODERN_ACTIVATIONS = ActivationOptions()
"""FlashAttention, no dropout: what Megatron-Core/FSDP RL frameworks run for Llama/Qwen models."""

KORTHIKANTI_GPT_ACTIVATIONS = ActivationOptions(flash_attention=False, dropout=True)
"""[Korthikanti] Table 2's setting: materialised softmax and dropout on (34 + 5as/h)."""

TORCHTITAN_ACTIVATIONS = ActivationOptions(
    selective_policy="every_other_mm",
    loss_bytes_per_logit=UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT)
"""torchtitan (Dec 2024 – early 2025, or later without compile): per-op SAC and an eager fp32
cross-entropy."""


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
    # bytes per F-wide element kept by the FFN: n_st tensors, the last projection's input in
    # FP8 under TE FP8 (linear inputs: `lin` bytes per element)
    lin = FP8_SAVED_INPUT_BYTES if options.fp8_saved_inputs else p
    inner_bytes = (n_st - 1) * p + lin
    if moe and spec.moe:
        m = spec.moe
        inner = inner_bytes * s_loc * b * (m.experts_per_token * m.expert_intermediate_size
                                           + m.num_shared_experts
                                           * m.shared_expert_intermediate_size) / tp
        router = ROUTER_PROBS_BYTES * s_loc * b * m.num_experts / t_rep
        expert_io = MOE_EXPERT_IO_TENSORS * m.experts_per_token * p * sbH / tp
    else:
        inner = inner_bytes * s_loc * b * spec.intermediate_size / tp
        router = expert_io = 0.0
    stored = ActivationBreakdown(
        norms=spec.traits.norms_per_layer * p * sbH / t_rep,
        attn_input=lin * sbH / t_rep,
        mla_latents=p * s_loc * b * latents / t_rep,
        qkv=p * s_loc * b * (q_w + k_w + v_w),
        scores=where(checkpointing == "selective", 0.0, scores),
        attn_out=(p + options.fp8_saved_inputs * FP8_SAVED_INPUT_BYTES) * s_loc * b * o_w,
        attn_dropout_mask=mask * sbH / t_rep,
        ffn_input=(p if moe and spec.moe else lin) * sbH / t_rep,  # a router saves bf16
        ffn_inner=inner,
        router=router,
        expert_io=expert_io,
        ffn_dropout_mask=mask * sbH / t_rep,
    )
    if options.selective_policy == "every_other_mm" and not (moe and spec.moe) and not mla:
        stored = pick(checkpointing == "selective",
                      _every_other_mm(spec, s_loc * b, p, tp, t_rep, scores), stored)
    return pick(checkpointing == "full", full, stored)


def _every_other_mm(spec: ModelSpec, tokens: Num, p: float, tp: Num, t_rep: Num,
                    scores: Num) -> ActivationBreakdown:
    """torchtitan's per-op SAC on a dense layer: the layer input, the attention kernel's output
    and log-sum-exp (`scores`), and the outputs of the layer's odd-numbered matmuls in
    execution order q, k, v, o, then the FFN's (gated: w1, w3, w2; plain: fc1, fc2). Bytes.

    The policy (torchtitan `_apply_ac_to_transformer_block`, `_save_list` and its mm counter
    that recomputes every second mm) is read from torchtitan's source, not from a data row."""
    q_w, k_w, v_w, _ = _attn_widths(spec, tp)
    F, H = spec.intermediate_size / tp, spec.hidden_size / t_rep
    ffn = [F, F, H] if spec.gated_ffn else [F, H]
    widths = [q_w, k_w, v_w, H, *ffn]
    saved = widths[0::2]  # the 1st, 3rd, 5th, … (counting from one)
    attn_saved, ffn_saved = sum(saved[:2]), sum(saved[2:])
    return ActivationBreakdown(
        checkpoint=p * tokens * H,  # the block's input, kept by the checkpoint wrapper
        qkv=p * tokens * attn_saved,
        scores=scores,
        attn_out=p * tokens * spec.num_attention_heads * spec.head_dim / tp,
        ffn_inner=p * tokens * ffn_saved)


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
    activation_bytes: float = BYTES_BF16, first: int | None = None, last: int | None = None,
) -> StageActivations:
    """Training activations held by one GPU of pipeline stage `stage` under 1F1B. Units: bytes.

    The stage holds min(pp − stage, micro_batches) micro-batches (the first stage: min(pp, n))
    of its layers (`first` / `last`: the layout's first/last-stage counts, `pipeline_split`);
    × `1 + (pp−1)/(pp·v)` with v > 1 interleaved chunks. Per-layer terms from
    `bytes_activation_per_layer` (dense and MoE layers priced separately).
    """
    kw = dict(tp=tp, cp=cp, sp=sp, options=options, activation_bytes=activation_bytes)
    layers = pipeline_stage_layers(spec.num_hidden_layers, pp, first, last)[stage]
    n_moe = spec.moe.moe_layers.count(layers.start, layers.stop) if spec.moe else 0
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
                 sequences: Num = 1, bytes_per_logit: float = LOGITS_BYTES) -> Num:
    """Logits (and the loss's buffers over them) for the loss / log-probs of `tokens` tokens
    on one GPU (last stage).

    Vocabulary head `c·tokens·V/t` with c = `bytes_per_logit` (4: [Korthikanti]'s 4sbV/t;
    12: an unfused fp32 cross-entropy, `UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT`; vocab-parallel
    over TP); critic `4·tokens`; reward `4·sequences` (last token only); shared: both.
    Units: bytes.
    """
    V = spec.vocab_size
    match head:
        case Head.POLICY:
            return bytes_per_logit * tokens * V / tp
        case Head.SCALAR_EVERY:
            return LOGITS_BYTES * tokens
        case Head.SCALAR_LAST:
            return LOGITS_BYTES * sequences
        case Head.SHARED:
            return tokens * (bytes_per_logit * V / tp + LOGITS_BYTES)
    raise ValueError(f"head must be a planner.theory.Head, got {head!r}")


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


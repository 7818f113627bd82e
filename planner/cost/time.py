"""Seconds per stage for one role on one layout: the hardware time model.

Training and teacher-forced forwards are priced per pipeline stage and micro-batch, then
composed by the 1F1B schedule:

- Matmul FLOPs (`flops.py`) at the profile's peak × `efficiency.compute` (`compute`); the
  core attention's backward under FlashAttention as 2.5 forwards (it recomputes the scores,
  `FLASH_ATTENTION_BACKWARD_FLOPS_PER_FORWARD`), at `Runtime.attention_rate` of that rate.
- Element-wise kernels — norms, residual adds, activation functions, RoPE, the unfused softmax
  and dropout on the s×s scores when FlashAttention is off, the fp32 loss / log-prob over the
  vocabulary — are memory-bound: their HBM traffic at `efficiency.hbm` (`memory`). They run as
  separate kernels between the matmuls, so their time adds to the matmuls' rather than hiding
  under a roofline max (Calculon, Isaev et al. SC'23, likewise sums its per-layer times,
  vector layers included). Replicated tensors (norms, residuals) are not split by TP unless
  sequence parallelism shards them — why [Korthikanti] introduced SP. Traffic per kernel is
  counted in `constants.py` (`*_IO_TENSORS`, `LOSS_*_BYTES_PER_LOGIT`); backward moves
  `ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD` times the forward's.
- Unfused attention (no FlashAttention) computes the full s×s score matrix and masks it:
  twice the causal key visits `flops.py` counts.
- Host floor: a layer's pass cannot finish before the host has issued its kernels
  (`HOST_SECONDS_PER_LAYER_PASS`, eager PyTorch); the time is max(GPU work, host work), the
  excess reported as `host`.
- Communication is α–β (`comm.py`) on the link its ranks span: TP collectives per layer and
  pass, EP all-to-alls, the CP ring, pipeline sends between stages (1/tp of the activations per
  rank, Megatron's scatter/gather, Narayanan et al. SC'21 §4.1), and per optimizer step the
  DP/ZeRO collectives of which `DP_COMM_OVERLAP` hides behind the backward.
- Pipeline (1F1B): with per-micro-batch stage times t_s and M micro-batches the step lasts
  Σ_s t_s + (M − 1)·max_s t_s (the slowest stage paces the steady state; fill and drain pass
  through every stage once; Narayanan et al. SC'21 §2.2 for equal stages, (M + p − 1)·t).
  Reported as the balanced work M·mean(t_s) split by component, `pp_bubble` = (p − 1)·mean(t_s)
  — exactly (p − 1)/M of the balanced work — and `pp_imbalance` = (M − 1)(max − mean): the
  last stage also runs the vocabulary head and the loss, and the stages hold the layers the
  layout's split gives them (`pipeline_split`: first/last-stage counts, the middle stages even).
- Interleaved 1F1B (`vp` > 1 chunks per rank, each 1/vp of the rank's layers, Megatron's
  virtual pipeline, Narayanan et al. SC'21 §2.2.2): fill and drain pass through chunks vp times
  shorter, so `pp_bubble` = (p − 1)·mean(t_s)/vp, (p − 1)/(vp·M) of the balanced work, while
  the slowest rank still paces the steady state (`pp_imbalance` as above); every micro-batch
  crosses vp times as many stage boundaries, so `pp_comm` is vp × the sends. The closed form
  needs M ≥ p micro-batches (`interleave_problem`; Megatron's schedule warms up p of them).

Generation (rollouts) is priced in `generation.py`. Rank order is the frameworks'
(Megatron-Core): TP innermost, then CP, DP, PP outermost; expert parallelism reuses DP×CP×TP
ranks (stride tp).

Each function returns a breakdown whose fields sum to `total` (seconds); given layout variants
(`variants.py`: per-candidate options as arrays) every field is an array. How the framework
runs its kernels (FlashAttention, dropout, DP overlap, host floor) is a `Runtime`; the default
is a current RL framework (FlashAttention, no dropout) with the constants of `constants.py`.

References: [Korthikanti] Korthikanti et al., MLSys'23 (arXiv 2205.05198) §4–5; [Narayanan]
Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21 (arXiv 2104.04473); [Shoeybi] Shoeybi et al. 2019 (arXiv 1909.08053) §3;
Isaev et al., "Calculon", SC'23.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import reduce

import numpy as np

from planner.cost import comm
from planner.cost.activations import MODERN_ACTIVATIONS, ActivationOptions
from planner.cost.constants import (
    ACTIVATION_IO_TENSORS_GATED,
    ACTIVATION_IO_TENSORS_PLAIN,
    BACKWARD_FLOPS_PER_FORWARD,
    BYTES_BF16,
    CAUSAL_KEY_VISIT_FRACTION,
    DP_COMM_OVERLAP,
    DROPOUT_MASK_BYTES,
    ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD,
    EP_ALLTOALLS_PER_LAYER_PASS,
    FLASH_ATTENTION_BACKWARD_FLOPS_PER_FORWARD,
    HOST_BACKWARD_PASSES_PER_FORWARD,
    HOST_SECONDS_PER_LAYER_PASS,
    LOSS_BWD_BYTES_PER_LOGIT,
    LOSS_FWD_BYTES_PER_LOGIT,
    NORM_IO_TENSORS,
    RESIDUAL_IO_TENSORS,
    ROPE_IO_TENSORS,
    TP_ALLREDUCES_PER_LAYER_PASS,
    UNFUSED_SCORE_DROPOUT_IO_TENSORS,
    UNFUSED_SCORE_IO_TENSORS,
)
from planner.cost.flops import (
    Head,
    Num,
    bytes_kv_cache_per_token,
    bytes_optimizer_step,
    flops_fwd_per_key_attn_scores,
    flops_fwd_per_token_attn_proj,
    flops_fwd_per_token_dense_ffn,
    flops_fwd_per_token_head,
    flops_fwd_per_token_routed_experts,
    flops_fwd_per_token_router,
    flops_fwd_per_token_shared_experts,
    moe_layer_count,
)
from planner.cost.layout_comm import dp_groups, time_dispatch
from planner.cost.memo import memo
from planner.cost.offload import gpus_sharing_host, time_host_stream, time_optimizer_offload
from planner.cost.pipeline_split import pipeline_stage_layers
from planner.cost.variants import LayoutVariants, isin, where
from planner.plan import Layout, expert_tp
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec

__all__ = [
    "DEFAULT_RUNTIME",
    "DP_COMM_OVERLAP",
    "ForwardTime",
    "Runtime",
    "Seconds",
    "TrainTime",
    "bytes_elementwise_fwd_per_token",
    "compute_rate",
    "hbm_rate",
    "time_forward",
    "time_train",
]


@dataclass(frozen=True)
class Runtime:
    """How the framework runs the kernels (framework behaviour, not hardware).

    kernels: FlashAttention or the unfused softmax; dropout on or off (`memory.py`'s options).
    dp_comm_overlap: fraction of DP/ZeRO traffic hidden behind the backward.
    host_s_per_layer_pass: host time to issue one layer's forward kernels (the host floor).
    fp8_matmuls: FP8 training (Transformer Engine, torchao Float8Linear): the linear layers'
        matmuls at the profile's FP8 peak; the core attention (FlashAttention) and the
        vocabulary head stay in bf16, as both frameworks run them by default.
    fp8_recipe: "tensorwise" (one scale per tensor: Transformer Engine's delayed / current
        scaling, torchao's default) or "rowwise" (torchao Float8 rowwise: a scale per row,
        the scaled-GEMM kernels and per-row casts of its 2025 releases). Rowwise is priced at
        the bf16 matmul rate: torchtitan's own pairs measure it no faster than bf16 —
        training_h100.md T5/T1 (Llama-3.1-70B) 599.6/597.3 = 1.00, M23/M21 (8B FSDP)
        6,768/6,150 = 1.10, T8/T6 (8B TP8) 3,708.5/4,378 = 0.85; median 1.00.
    ep_dispatch: how MoE tokens cross domains. "alltoall" (Megatron's default dispatcher):
        one copy per remote expert over the NIC. "hierarchical" (DeepEP, Megatron's HybridEP):
        one copy per remote domain over the NIC (fewer under group-limited routing),
        forwarded over the scale-up link (`layout_comm.time_dispatch`,
        `flops.remote_domains_per_token`). Either posts every peer's transfer at once: one
        network latency per call.
    attention_rate: the core attention kernel's FLOP rate as a fraction of the matmuls' (1:
        FlashAttention-3 / cuDNN class; `FLASH_ATTENTION_2_RATE_ON_HOPPER` for FA2 on Hopper).
    ep_comm_overlap: the dispatch/combine all-to-alls run under another micro-batch's compute
        (Megatron-Core `--overlap-moe-expert-parallel-comm`, DeepEP's overlap in Automodel):
        a MoE layer pays max(its compute, its all-to-alls), not their sum.
    """

    kernels: ActivationOptions = field(default_factory=lambda: MODERN_ACTIVATIONS)
    dp_comm_overlap: float = DP_COMM_OVERLAP
    host_s_per_layer_pass: float = HOST_SECONDS_PER_LAYER_PASS
    fp8_matmuls: bool = False
    fp8_recipe: str = "tensorwise"
    ep_dispatch: str = "alltoall"
    ep_comm_overlap: bool = False
    attention_rate: float = 1.0


DEFAULT_RUNTIME = Runtime()
"""A current RL framework (Megatron-Core/TE, FSDP with SDPA): FlashAttention, no dropout."""


@dataclass(frozen=True)
class Seconds:
    """A named time breakdown; `total` is the sum of its fields. Units: seconds."""

    @property
    def total(self) -> Num:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, Num]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainTime(Seconds):
    compute: Num = 0.0  # matmuls at achievable peak (the balanced share of every GPU)
    memory: Num = 0.0  # element-wise kernels at achievable HBM bandwidth
    host: Num = 0.0  # where issuing the kernels outlasts their GPU work
    pp_bubble: Num = 0.0  # 1F1B fill and drain: (pp − 1)/(vp·M) of the balanced stage time
    pp_imbalance: Num = 0.0  # the slowest stage pacing the others
    pp_comm: Num = 0.0  # activations and gradients sent between stages
    tp_comm: Num = 0.0
    cp_comm: Num = 0.0
    ep_comm: Num = 0.0
    dp_comm: Num = 0.0  # the exposed (not overlapped) part
    optimizer: Num = 0.0  # the optimizer step on the GPU (0 when the optimizer is offloaded)
    optimizer_cpu: Num = 0.0  # CPU Adam of an offloaded optimizer (`offload.py`)
    offload: Num = 0.0  # host-link transfers, the exposed part (`offload.py`)


@dataclass(frozen=True)
class ForwardTime(Seconds):
    compute: Num = 0.0
    memory: Num = 0.0
    host: Num = 0.0
    pp_bubble: Num = 0.0
    pp_imbalance: Num = 0.0
    pp_comm: Num = 0.0
    tp_comm: Num = 0.0
    cp_comm: Num = 0.0
    ep_comm: Num = 0.0
    dp_comm: Num = 0.0  # ZeRO-3 / FSDP parameter gathers, exposed part
    offload: Num = 0.0  # offloaded parameters streamed over the host link


def compute_rate(gpu: HardwareProfile, fp8: bool = False) -> float:
    """Achievable FLOP/s of one GPU on dense BF16 matmuls, or FP8 ones (`fp8`) where the GPU
    has FP8 tensor cores (a profile without `fp8_tflops` runs them at its BF16 rate). The
    profile's one compute efficiency applies to both."""
    peak = gpu.fp8_tflops * 1e12 if fp8 and gpu.fp8_tflops else gpu.peak_bf16_flops
    return peak * gpu.efficiency.compute


def hbm_rate(gpu: HardwareProfile) -> float:
    """Achievable HBM bytes/s of one GPU."""
    return gpu.hbm_bytes_per_s * gpu.efficiency.hbm


# --- per-token costs of one layer ------------------------------------------------------------


def bytes_elementwise_fwd_per_token(spec: ModelSpec, seq_len: float, *, tp: int = 1,
                                    sp: bool = False, moe: bool = False,
                                    options: ActivationOptions = MODERN_ACTIVATIONS,
                                    attention_only: bool = False) -> float:
    """HBM bytes the element-wise kernels of one layer's forward move per token, on one GPU.

    Replicated over TP (split only with sequence parallelism): each norm reads and writes H
    (`NORM_IO_TENSORS`), the two residual adds read two and write one H-wide tensor
    (`RESIDUAL_IO_TENSORS`, + a 1-byte dropout mask each when dropout is on). Split over TP:
    RoPE on q and k (`ROPE_IO_TENSORS`, models without learned positions), the FFN activation
    on F (`ACTIVATION_IO_TENSORS_*`; MoE: k experts' F_e plus shared experts, and the token
    permutation and combine, 2·(1 + k)·H), and without FlashAttention the s×s scores —
    `UNFUSED_SCORE_IO_TENSORS` bf16 tensors per (head, key), dropout `2` more + its mask — with
    every query computing all `seq_len` keys (masked, not skipped). `attention_only` keeps the
    core attention alone (what selective recompute re-runs). Units: bytes per token.
    """
    p, H, a = BYTES_BF16, spec.hidden_size, spec.num_attention_heads
    drop = options.dropout
    scores = 0.0
    if not options.flash_attention:
        per_score = UNFUSED_SCORE_IO_TENSORS * p + drop * (
            UNFUSED_SCORE_DROPOUT_IO_TENSORS * p + DROPOUT_MASK_BYTES)
        scores = a * seq_len * per_score / tp
    if attention_only:
        return scores
    t_rep = tp if sp else 1
    replicated = (spec.traits.norms_per_layer * NORM_IO_TENSORS * p * H
                  + 2 * (RESIDUAL_IO_TENSORS * p * H + drop * DROPOUT_MASK_BYTES * H))
    rope = 0.0
    if not spec.traits.learned_positions and not spec.mla:
        rope = ROPE_IO_TENSORS * p * (a + spec.num_key_value_heads) * spec.head_dim
    act = ACTIVATION_IO_TENSORS_GATED if spec.gated_ffn else ACTIVATION_IO_TENSORS_PLAIN
    if moe and spec.moe:
        m = spec.moe
        ffn = act * p * (m.experts_per_token * m.expert_intermediate_size
                         + m.num_shared_experts * m.shared_expert_intermediate_size)
        ffn += 2 * p * H * (1 + m.experts_per_token)  # permute to experts and combine back
    else:
        ffn = act * p * spec.intermediate_size
    return replicated / t_rep + (rope + ffn) / tp + scores


@dataclass(frozen=True)
class _LayerCost:
    """One layer's forward on one GPU, per token: matmul FLOPs, element-wise bytes, and the
    core attention's share of both (selective recompute re-runs it)."""

    flops: float
    ew_bytes: float
    attn_flops: float
    attn_ew_bytes: float


def _layer_cost(spec: ModelSpec, seq_len: float, layout: Layout, options: ActivationOptions,
                moe: bool) -> _LayerCost:
    L, tp = spec.num_hidden_layers, layout.tp
    visits = seq_len * (CAUSAL_KEY_VISIT_FRACTION if options.flash_attention else 1.0)
    attn = visits * flops_fwd_per_key_attn_scores(spec) / L
    flops = flops_fwd_per_token_attn_proj(spec) / L + attn
    if moe:
        n_moe = moe_layer_count(spec)
        flops += (flops_fwd_per_token_router(spec) + flops_fwd_per_token_routed_experts(spec)
                  + flops_fwd_per_token_shared_experts(spec)) / n_moe
    else:
        flops += flops_fwd_per_token_dense_ffn(spec) / max(1, L - moe_layer_count(spec))
    kw = dict(tp=tp, sp=layout.sp, moe=moe, options=options)
    return _LayerCost(
        flops=flops / tp,
        ew_bytes=bytes_elementwise_fwd_per_token(spec, seq_len, **kw),
        attn_flops=attn / tp,
        attn_ew_bytes=bytes_elementwise_fwd_per_token(spec, seq_len, attention_only=True, **kw))


# --- one pipeline stage, one micro-batch -----------------------------------------------------


@dataclass(frozen=True)
class _Stage:
    """Seconds of one micro-batch on one pipeline stage, by component."""

    compute: Num = 0.0
    memory: Num = 0.0
    host: Num = 0.0
    tp_comm: Num = 0.0
    cp_comm: Num = 0.0
    ep_comm: Num = 0.0
    pp_comm: Num = 0.0

    @property
    def total(self) -> Num:
        return (self.compute + self.memory + self.host + self.tp_comm + self.cp_comm
                + self.ep_comm + self.pp_comm)


def _stage_shape(layout: Layout | LayoutVariants) -> Layout | LayoutVariants:
    """The fields `_stages` reads (not ZeRO, offload or group): the memoisation key. Layout
    variants pass through (unhashable: priced, not cached)."""
    if isinstance(layout, LayoutVariants):
        return layout
    return layout.model_copy(update={"group": "", "zero": 0, "offload": "none",
                                     "max_num_seqs": None})


@memo
def _stages(spec: ModelSpec, head: Head, layout: Layout | LayoutVariants, gpu: HardwareProfile,
            seq_len: float, runtime: Runtime, train: bool) -> tuple[_Stage, ...]:
    """Per-micro-batch seconds of every pipeline stage (training: forward, backward and
    recompute; else the forward alone). Called with `_stage_shape(layout)` so candidates that
    differ only in ZeRO stage or offload share the result."""
    L = layout
    tokens = L.micro_batch * seq_len / L.cp  # per GPU of a TP group, per micro-batch
    options = runtime.kernels
    rate, hbm = compute_rate(gpu), hbm_rate(gpu)
    # the linear layers' matmuls: FP8 rowwise scaling runs them no faster than bf16 (Runtime)
    linear_rate = compute_rate(gpu, fp8=runtime.fp8_matmuls and runtime.fp8_recipe != "rowwise")
    bwd_f = BACKWARD_FLOPS_PER_FORWARD if train else 0
    bwd_attn = 0 if not train else (FLASH_ATTENTION_BACKWARD_FLOPS_PER_FORWARD
                                    if options.flash_attention else BACKWARD_FLOPS_PER_FORWARD)
    bwd_m = ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD if train else 0
    ckpt = L.checkpointing if train else "none"
    full, selective = ckpt == "full", ckpt == "selective"
    # collective passes per layer: forward, backward (mirrors it), full recompute
    comm_passes = 1 + (1 if train else 0) + where(full, 1, 0)
    host_passes = 1 + (HOST_BACKWARD_PASSES_PER_FORWARD if train else 0) + where(full, 1, 0)

    tp_layer = 0.0
    if L.tp > 1:
        act = tokens * spec.hidden_size * BYTES_BF16
        tp_layer = comm_passes * TP_ALLREDUCES_PER_LAYER_PASS * comm.time_allreduce(
            act, L.tp, comm.link_for(gpu, L.tp))
    ep_layer = 0.0
    etp = expert_tp(L, "training" if train else "assessment")
    routed = tokens * spec.moe.experts_per_token * spec.hidden_size * BYTES_BF16 \
        if spec.moe else 0.0  # the routed copies of the TP group's tokens
    if L.ep > 1 and spec.moe:  # each TP rank dispatches its 1/tp of the tokens
        ep_layer = comm_passes * EP_ALLTOALLS_PER_LAYER_PASS * time_dispatch(
            spec, routed / L.tp, L.ep, etp, gpu, runtime.ep_dispatch)
    if etp > 1 and spec.moe:  # experts split over etp ranks: their inputs gathered and
        # their partial outputs reduce-scattered over them (one all-reduce's traffic)
        ep_layer = ep_layer + comm_passes * comm.time_allreduce(
            routed, etp, comm.link_for(gpu, etp))
    cp_layer = 0.0
    if L.cp > 1:  # ring: the local K/V chunk passed cp − 1 times; backward also returns dK/dV
        kv = tokens * bytes_kv_cache_per_token(spec) / spec.num_hidden_layers
        chunk = kv / max(1, min(L.tp, spec.num_key_value_heads))
        ring = (L.cp - 1) * comm.time_p2p(chunk, comm.link_p2p(gpu, L.cp, stride=L.tp))
        cp_layer = ring * (1 + (2 if train else 0) + where(full, 1, 0))

    def layer(moe: bool) -> _Stage:
        c = _layer_cost(spec, seq_len, L, options, moe)
        # recomputation: full re-runs the layer's forward, selective its core attention
        attn = c.attn_flops * (1 + bwd_attn) + where(full | selective, c.attn_flops, 0.0)
        linear = (c.flops - c.attn_flops) * (1 + bwd_f + where(full, 1, 0))
        ew = c.ew_bytes * (1 + bwd_m) + where(full, c.ew_bytes,
                                              where(selective, c.attn_ew_bytes, 0.0))
        compute = tokens * (linear / linear_rate + attn / (rate * runtime.attention_rate))
        memory = tokens * ew / hbm
        ep_s = ep_layer if moe else 0.0
        if runtime.ep_comm_overlap:  # hidden under the other micro-batch's compute
            ep_s = np.maximum(0.0, ep_s - compute - memory)
        comm_s = tp_layer + ep_s + cp_layer
        host = np.maximum(0.0, host_passes * runtime.host_s_per_layer_pass - compute - memory
                          - comm_s)
        return _Stage(compute=compute, memory=memory, host=host, tp_comm=tp_layer,
                      ep_comm=ep_s, cp_comm=cp_layer)

    kinds = {False: layer(False)}
    if moe_layer_count(spec):
        kinds[True] = layer(True)

    # the vocabulary (or scalar) head and the loss / log-probs, on the last stage
    head_flops = flops_fwd_per_token_head(spec, head, seq_len) / L.tp * (1 + bwd_f)
    t_rep = L.tp if L.sp else 1
    head_bytes = NORM_IO_TENSORS * BYTES_BF16 * spec.hidden_size / t_rep * (1 + bwd_m)
    if head in (Head.POLICY, Head.SHARED):
        loss = LOSS_FWD_BYTES_PER_LOGIT + (LOSS_BWD_BYTES_PER_LOGIT if train else 0)
        head_bytes += loss * spec.vocab_size / L.tp
    head_cost = _Stage(compute=tokens * head_flops / rate, memory=tokens * head_bytes / hbm)

    pp_send = 0.0
    if L.pp > 1:  # activations forward (and gradients back) to the neighbouring stage, once
        # per chunk: vp chunks per rank send vp times per micro-batch
        stride = L.tp * L.cp * L.dp
        nbytes = tokens * spec.hidden_size * BYTES_BF16 / L.tp
        pp_send = L.vp * (1 + (1 if train else 0)) * comm.time_p2p(
            nbytes, comm.link_p2p(gpu, 2, stride=stride))

    out = []
    made: dict[tuple[int, int, bool], _Stage] = {}  # stages with the same layers are alike
    for k, layers in enumerate(pipeline_stage_layers(spec.num_hidden_layers, L.pp,
                                                     L.first_stage_layers, L.last_stage_layers)):
        n_moe = spec.moe.moe_layers.count(layers.start, layers.stop) if spec.moe else 0
        key = (len(layers), n_moe, k == L.pp - 1)
        if key not in made:
            counts = {False: len(layers) - n_moe, True: n_moe}
            parts = {f.name: sum(n * getattr(kinds[moe], f.name)
                                 for moe, n in counts.items() if n) for f in fields(_Stage)}
            if k == L.pp - 1:  # the last stage also runs the head and the loss
                parts["compute"] += head_cost.compute
                parts["memory"] += head_cost.memory
            parts["pp_comm"] = pp_send
            made[key] = _Stage(**parts)
        out.append(made[key])
    return tuple(out)  # memoised: shared by every caller, so immutable


@dataclass(frozen=True)
class _Pipeline:
    """A 1F1B schedule of `micro` micro-batches over stages: the balanced work by component,
    the fill/drain bubble and the imbalance (module docstring). Units: seconds."""

    parts: dict[str, Num]
    bubble: Num
    imbalance: Num


def _pipeline(stages: tuple[_Stage, ...], micro: Num, vp: int = 1) -> _Pipeline:
    """1F1B over `stages` (`vp` interleaved chunks per rank: the bubble vp times shorter)."""
    pp = len(stages)
    mean = sum(s.total for s in stages) / pp
    slowest = reduce(np.maximum, (s.total for s in stages))  # each variant's own
    parts = {f.name: micro * sum(getattr(s, f.name) for s in stages) / pp
             for f in fields(_Stage)}
    return _Pipeline(parts=parts, bubble=(pp - 1) * mean / vp,
                     imbalance=(micro - 1) * (slowest - mean))


def interleave_problem(pp: int, vp: int, micro: Num) -> str | None:
    """Why `vp` interleaved chunks cannot run (None when they can): the bubble's closed form
    (p − 1)/(vp·M) holds with at least pp micro-batches M per optimizer step. (How the layers
    split into chunks is `pipeline_split.split_problem`'s.)"""
    if vp == 1:
        return None
    if pp == 1:
        return "needs pp > 1"
    if np.any(np.asarray(micro) < pp):
        return (f"needs at least pp = {pp} micro-batches per optimizer step per rank (the "
                f"schedule has {int(np.min(micro))}); use smaller micro-batches or vp 1")
    return None


# --- stages of an RL iteration ---------------------------------------------------------------


def time_train(spec: ModelSpec, head: Head, layout: Layout | LayoutVariants, gpu: HardwareProfile,
               n_seqs: int, seq_len: float, mini_batches: int = 1, epochs: int = 1,
               grad_bytes: float = BYTES_BF16, *, runtime: Runtime | None = None,
               gpus_per_node: int | None = None) -> TrainTime:
    """One training stage of one role: `epochs` × `mini_batches` optimizer steps over n_seqs.

    Per optimizer step each DP rank runs M = seqs/(dp·micro_batch) micro-batches through the
    1F1B pipeline (module docstring: per-stage matmuls, element-wise traffic, host floor, TP /
    EP / CP collectives, sends between stages; bubble and imbalance). Then the DP/ZeRO
    gradient collective (ZeRO-3 adds the parameter all-gathers of every micro-batch, forward
    and backward) of which `runtime.dp_comm_overlap` hides behind the backward, and the
    optimizer step: at HBM speed on the local shard, or, offloaded, CPU Adam on the host
    (`optimizer_cpu`) with the gradient and weight copies over the host link (`offload`,
    exposed part); offloaded parameters stream in for every micro-batch's forward and backward
    (`offload`). `offload.py` prices the host side. With `LayoutVariants` every component is an
    array over the variants. `gpus_per_node`: the cluster's (default the profile's), for the
    GPUs sharing a node's host.
    """
    rt = runtime or DEFAULT_RUNTIME
    L = layout
    steps = epochs * mini_batches
    seqs_per_step = n_seqs / mini_batches
    micro = np.maximum(1.0, seqs_per_step / (L.dp * L.micro_batch))
    pipe = _pipeline(_stages(spec, head, _stage_shape(L), gpu, seq_len, rt, train=True), micro,
                     L.vp)

    groups = dp_groups(spec, head, L, gpu)
    grads = 0.0
    for g in groups:
        # ZeRO-0/1 all-reduce the gradients (ZeRO-1 shards the optimizer only), 2/3
        # reduce-scatter them
        grads = grads + where(
            L.zero <= 1, comm.time_allreduce(g.params * grad_bytes, g.replicas, g.link),
            comm.time_reducescatter(g.params * grad_bytes, g.replicas, g.link))
        gather = comm.time_allgather(g.params * BYTES_BF16, g.replicas, g.link)
        grads += where(L.zero == 2, gather, 0.0)  # updated parameter shards gathered back
        grads += where(L.zero == 3, micro * 2 * gather, 0.0)  # every micro-batch's fwd, bwd
    dp = steps * grads * (1 - rt.dp_comm_overlap)

    # the rank's own optimizer shard (ZeRO ≥ 1 splits each group over its replicas)
    local = sum(g.params / where(L.zero >= 1, g.replicas, 1) for g in groups)
    optimizer = steps * bytes_optimizer_step(local, grad_bytes=grad_bytes) / hbm_rate(gpu)
    # the host is read only when some variant offloads (profiles may lack a host link)
    optimizer_cpu, offload = 0.0, 0.0
    optim_host = isin(L.offload, ("optimizer", "both"))
    params_host = isin(L.offload, ("params", "both"))
    sharing = gpus_sharing_host(gpu, L.dp * L.tp * L.pp * L.cp, gpus_per_node)
    if np.any(optim_host):  # CPU Adam on the host; gradients down, updated weights up
        off = time_optimizer_offload(local, gpu, sharing, grad_bytes, rt.dp_comm_overlap)
        optimizer = where(optim_host, 0.0, optimizer)
        optimizer_cpu = where(optim_host, steps * off.cpu_step, 0.0)
        offload = where(optim_host, steps * off.transfers, 0.0)
    if np.any(params_host):  # weights streamed in for forward and backward
        # each GPU streams the parameters it holds: its ZeRO-3 shard (gathered from the other
        # ranks as above), else the whole TP/PP shard, once per micro-batch and pass (a full
        # recompute runs inside its unit's backward, whose weights are already fetched)
        held = sum(g.params / where(L.zero == 3, g.replicas, 1) for g in groups)
        offload = offload + where(params_host, steps * time_host_stream(
            micro * 2 * held * BYTES_BF16, gpu, sharing), 0.0)
    return TrainTime(**{k: steps * v for k, v in pipe.parts.items()},
                     pp_bubble=steps * pipe.bubble, pp_imbalance=steps * pipe.imbalance,
                     dp_comm=dp, optimizer=optimizer, optimizer_cpu=optimizer_cpu,
                     offload=offload)


def time_forward(spec: ModelSpec, head: Head, layout: Layout | LayoutVariants,
                 gpu: HardwareProfile, n_seqs: int, seq_len: float, *,
                 runtime: Runtime | None = None, gpus_per_node: int | None = None
                 ) -> ForwardTime:
    """A teacher-forced forward over n_seqs sequences (reference, reward, critic, old log-probs).

    The training pipeline's forward alone: micro-batches of `micro_batch` sequences through
    the stages (bubble, imbalance), per-layer matmuls, element-wise traffic (the log-softmax
    over the vocabulary on the last stage), host floor, TP/EP/CP collectives; a ZeRO-3 (FSDP)
    layout gathers its parameters for every micro-batch, `runtime.dp_comm_overlap` of it
    hidden by prefetch; offloaded parameters stream in over the host link for every
    micro-batch, a sleeping model's are loaded once and copied back out (`offload`). With
    `LayoutVariants` every component is an array over the variants.
    """
    rt = runtime or DEFAULT_RUNTIME
    L = layout
    micro = np.maximum(1.0, n_seqs / (L.dp * L.micro_batch))
    pipe = _pipeline(_stages(spec, head, _stage_shape(L), gpu, seq_len, rt, train=False),
                     micro, L.vp)
    groups = dp_groups(spec, head, L, gpu)
    gathers = sum(comm.time_allgather(g.params * BYTES_BF16, g.replicas, g.link) for g in groups)
    dp = where(L.zero == 3, micro * gathers * (1 - rt.dp_comm_overlap), 0.0)
    offload = 0.0
    # offloaded weights cross the host link: streamed in for every micro-batch's forward
    # ("params"), or, a sleeping model's, loaded once for the stage and copied back out after
    # it (vLLM's level-1 sleep and verl's param_offload keep a CPU copy: both ways, per step)
    crossings = where(isin(L.offload, ("params", "both")), micro,
                      where(isin(L.offload, ("sleep",)), 2.0, 0.0))
    if np.any(crossings):
        held = sum(g.params / where(L.zero == 3, g.replicas, 1) for g in groups)
        offload = where(crossings > 0, time_host_stream(
            crossings * held * BYTES_BF16, gpu,
            gpus_sharing_host(gpu, L.dp * L.tp * L.pp * L.cp, gpus_per_node)), 0.0)
    return ForwardTime(**pipe.parts, pp_bubble=pipe.bubble, pp_imbalance=pipe.imbalance,
                       dp_comm=dp, offload=offload)

"""The actor's rollouts: the memory of a generation replica (weights, KV cache in tokens,
workspaces) and its time (the decode step priced on the continuous-batching schedule of
`rollout.py`). One module prices generation for `rlplan evaluate` and for the search alike.

Memory assumptions:
- Generation does not shard weights over dp (inference engines replicate).
- Resharding (hybrid engine: the actor's training layout re-laid into its generation layout on
  the same GPUs) streams one unit at a time, as verl/OpenRLHF load weights tensor by tensor: the
  transient `resharding_buffer` is the largest unit (one layer, or the embedding / head) at the
  generation layout's TP/EP shard; the destination is the generation weights, counted as
  `weights`.
- When the weight sync to a separate rollout group overlaps generation (asynchrony), a shadow
  actor copy in the generation layout (FORMULAS.md §4 M_sh = |π|) receives the next weights
  alongside the copy generating: `shadow_weights` equals the generation weights. A blocking
  sync (generation pauses for it) needs no second copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from planner.cost import comm
from planner.cost.activations import (
    MODERN_ACTIVATIONS,
    ActivationOptions,
    bytes_inference_workspace,
    bytes_logits,
)
from planner.cost.constants import (
    BYTES_BF16,
    BYTES_FP8,
    CAUSAL_KEY_VISIT_FRACTION,
    DEFAULT_PREFILL_CHUNK_TOKENS,
    TP_ALLREDUCES_PER_LAYER_PASS,
    Engine,
)
from planner.cost.flops import (
    Num,
    bytes_kv_cache_per_token,
    bytes_routed_experts_read,
    bytes_weights_read_fwd,
    flops_decode_step,
    flops_fwd_per_key_attn_scores,
    flops_fwd_per_token_head,
    flops_prefill,
    moe_layer_count,
)
from planner.cost.memo import memo
from planner.cost.memory import MemoryBreakdown, peak_stage
from planner.cost.rollout import PARTIAL_PERIODS, replica_bounds, schedule
from planner.cost.states import (
    MIXED_PRECISION_ADAM,
    Precision,
    params_per_gpu_stage,
    pipeline_stage_layers,
    stages_that_can_peak,
)
from planner.cost.time import Seconds, compute_rate
from planner.cost.variants import LayoutVariants
from planner.plan import Layout, expert_tp
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec
from planner.theory.shape import Head


def rollout_precision(weights: str, kv_cache: str) -> Precision:
    """The rollout engine's precision (`runtime.rollout_weights`, `runtime.kv_cache_dtype`,
    resolved): FP8 weights are 1 byte and run their matmuls on FP8 tensor cores (vLLM's FP8
    checkpoints and `--quantization fp8`); an FP8 KV cache is 1 byte per element (vLLM
    `kv_cache_dtype=fp8`). Everything else stays BF16."""
    fp8 = weights == "fp8"
    return Precision(weight_bytes=BYTES_FP8 if fp8 else BYTES_BF16, fp8_matmuls=fp8,
                     kv_cache_bytes=BYTES_FP8 if kv_cache == "fp8" else BYTES_BF16)

# --- memory ----------------------------------------------------------------------------------


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


def bytes_resharding_buffer(spec: ModelSpec, generation: Layout,
                            weight_bytes: float = BYTES_BF16) -> float:
    """Transient buffer re-laying the actor's weights into its generation layout. Units: bytes.

    Assumption (module docstring): weights move one unit at a time (a layer, the embedding or
    the head), so the buffer is the largest unit at the generation layout's TP/EP shard.
    """
    etp = expert_tp(generation, "generation")
    units = [params_per_gpu_stage(spec, tp=generation.tp, pp=generation.pp, ep=generation.ep,
                                  etp=etp, stage=k).largest_unit for k in range(generation.pp)]
    return weight_bytes * max(units)


def _stages(spec: ModelSpec, layout: Layout | LayoutVariants, kv_tokens: Num, decode_batch: Num,
            prefill_tokens: Num, shadow_weights: bool, resharding: bool, precision: Precision,
            options: ActivationOptions, reserve_bytes: float) -> list[MemoryBreakdown]:
    """The generation memory of each pipeline stage's GPUs (`memory_generation_per_gpu`)."""
    out = []
    for k in stages_that_can_peak(spec, layout.pp):  # (the rest never exceed these)
        sp_ = params_per_gpu_stage(spec, tp=layout.tp, pp=layout.pp, ep=layout.ep,
                                   etp=expert_tp(layout, "generation"), stage=k)
        weights = precision.weight_bytes * sp_.total
        out.append(MemoryBreakdown(
            weights=weights,
            shadow_weights=weights if shadow_weights else 0.0,
            kv_cache=bytes_kv_cache_per_gpu(spec, kv_tokens, 1, tp=layout.tp, pp=layout.pp,
                                            stage=k, kv_bytes=precision.kv_cache_bytes),
            inference_workspace=bytes_inference_workspace(
                spec, prefill_tokens, tp=layout.tp, context=prefill_tokens, options=options,
                activation_bytes=precision.activation_bytes),
            logits=(bytes_logits(spec, decode_batch, tp=layout.tp) if k == layout.pp - 1
                    else 0.0),
            resharding_buffer=(bytes_resharding_buffer(spec, layout, precision.weight_bytes)
                               if resharding else 0.0),
            runtime_reserve=reserve_bytes, pipeline_stage=k))
    return out


def memory_generation_per_gpu(
    spec: ModelSpec, layout: Layout | LayoutVariants, *, kv_tokens: Num, decode_batch: Num,
    prefill_tokens: Num = DEFAULT_PREFILL_CHUNK_TOKENS, shadow_weights: bool = False,
    resharding: bool = False, precision: Precision = MIXED_PRECISION_ADAM,
    options: ActivationOptions = MODERN_ACTIVATIONS, reserve_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Peak bytes per GPU of the actor generating: weights in the generation layout (TP/PP/EP
    sharded, replicated over dp), a KV cache of `kv_tokens` tokens per replica (the engine's
    paged pool, spread over the replica's GPUs by TP and PP), the prefill workspace of
    `prefill_tokens` tokens (one chunked-prefill batch) and the sampling logits of
    `decode_batch` sequences; a shadow copy under asynchrony; the resharding buffer when the
    training layout is re-laid into this one on the same GPUs. An array of `kv_tokens` gives
    an array per component. Units: bytes.
    """
    return peak_stage(_stages(spec, layout, kv_tokens, decode_batch, prefill_tokens,
                              shadow_weights, resharding, precision, options, reserve_bytes))


def kv_tokens_that_fit(spec: ModelSpec, layout: Layout | LayoutVariants, free_bytes: float,
                       decode_batch: Num, *, shadow_weights: bool = False,
                       resharding: bool = False, reserve_bytes: float = 0.0,
                       precision: Precision = MIXED_PRECISION_ADAM) -> int:
    """The largest KV pool (tokens per replica) whose generation memory stays within
    `free_bytes` on every GPU of the replica (0 when not even the weights fit)."""
    tokens = np.inf
    for m in _stages(spec, layout, 0, decode_batch, DEFAULT_PREFILL_CHUNK_TOKENS,
                     shadow_weights, resharding, precision, MODERN_ACTIVATIONS, reserve_bytes):
        per_token = bytes_kv_cache_per_gpu(spec, 1, 1, tp=layout.tp, pp=layout.pp,
                                           stage=m.pipeline_stage,
                                           kv_bytes=precision.kv_cache_bytes)
        tokens = min(tokens, (free_bytes - float(m.total)) / per_token)
    return max(0, int(tokens))


# --- time --------------------------------------------------------------------------------------

TAIL_FRACTION = 0.9
"""The tail of a rollout: the time after 90% of the step's responses are done (Seer's measure,
rollout.md §5: the last 10% of requests take up to half the rollout)."""

FUSION_POINTS = (0.0, 0.5, 0.75, TAIL_FRACTION)
"""Fractions q of the step's responses done at which inter-stage fusion's streaming assessment
is checked: assessment of the rest, (1 − q) of it, cannot start before the q-th response is
done (q = 0: the first response)."""


@dataclass(frozen=True)
class GenerationTime(Seconds):
    """The slowest replica's rollout, by component (seconds)."""

    prefill: Num = 0.0  # new prompts, compute-bound
    recompute: Num = 0.0  # preempted or carried-over sequences prefilled again
    decode: Num = 0.0  # decode steps until 90% of the step's responses are done
    decode_tail: Num = 0.0  # decode steps after that (the long tail)
    overhead: Num = 0.0  # the engine's per-step host time and per-layer floor's excess


@dataclass(frozen=True)
class DecodeStep:
    """Seconds of one decode step of a replica running `b` sequences that read `kv` KV tokens:

        overhead + per_seq·b + comm + comm_per_seq·b
            + max(flop_seq·b + flop_kv·kv,  weights(b) + byte_kv·kv,  host)

    — the engine's host time; TP all-reduces (two per layer, latency plus bandwidth) and
    pipeline sends; then the GPU work as a roofline of compute (each sequence's matmuls and
    head, attention over its context) and HBM traffic (the weights shard, the experts the batch
    touches, the KV read), or the engine's floor per layer when that is longer. Affine in `kv`,
    so a segment of steps (kv growing by b per step) sums in closed form (`segment_seconds`).
    Under pipeline parallelism the batch runs as pp micro-batches: each GPU reads its stage's
    weights once per micro-batch, so pp adds KV room but not weight bandwidth. With expert
    parallelism (EP = DP × TP, vLLM's rule) the routed experts live on all the replicas' GPUs
    and the replicas step together: each step reads the experts that `expert_tokens` × b tokens
    touch at `expert_rate`, and dispatches and combines tokens over EP (in `comm`)."""

    spec: ModelSpec
    weight_rate: float  # bytes/s of one GPU's HBM in decode × the TP degree
    weight_bytes: float
    overhead: float
    per_seq: float
    comm: float
    comm_per_seq: float
    flop_seq: float
    flop_kv: float
    byte_kv: float
    host: float = 0.0  # the engine's floor: its least time per layer × the layers
    expert_rate: float = 0.0  # EP: the HBM bytes/s of the EP group's GPUs (0: no EP)
    expert_tokens: float = 1.0  # EP: the replicas whose tokens share the experts

    def weights(self, b: Num) -> Num:
        total = bytes_weights_read_fwd(self.spec, b, weight_bytes=self.weight_bytes)
        if not self.expert_rate:
            return total / self.weight_rate
        routed = bytes_routed_experts_read(self.spec, b, self.weight_bytes)
        return (total - routed) / self.weight_rate + bytes_routed_experts_read(
            self.spec, self.expert_tokens * b, self.weight_bytes) / self.expert_rate

    def seconds(self, b: Num, kv: Num) -> Num:
        """One step (the calibration rows' inter-token latency)."""
        fixed = self.overhead + self.per_seq * b + self.comm + self.comm_per_seq * b
        gpu = np.maximum(self.flop_seq * b + self.flop_kv * kv,
                         self.weights(b) + self.byte_kv * kv)
        return fixed + np.maximum(gpu, self.host)

    def segment_seconds(self, b: np.ndarray, kv: np.ndarray, m: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Σ over j < m of the step at (b, kv + b·j): (the kernels and collectives, the engine
        overhead and the excess of its per-layer floor), element-wise over segments."""
        m = np.asarray(m, dtype=float)
        compute = (self.flop_seq * b + self.flop_kv * kv, self.flop_kv * b)
        memory = (self.weights(b) + self.byte_kv * kv, self.byte_kv * b)
        gpu = _sum_max(compute, memory, m)
        host = _floor_excess(compute, memory, self.host, m) if self.host else 0.0
        fixed = m * (self.comm + self.comm_per_seq * b)
        return gpu + fixed, m * (self.overhead + self.per_seq * b) + host


def _sum_line(a: Num, b: Num, lo: Num, hi: Num) -> Num:
    """Σ_{j=lo}^{hi−1} (a + b·j)."""
    return (hi - lo) * a + b * (hi * (hi - 1) - lo * (lo - 1)) / 2


def _sum_max(first: tuple[Num, Num], second: tuple[Num, Num], m: np.ndarray) -> np.ndarray:
    """Σ_{j=0}^{m−1} max(a₁ + b₁·j, a₂ + b₂·j), exactly, element-wise: the second line summed,
    plus the first's excess over it, positive on one interval of j (before or after where the
    lines cross) — worked out only where it is positive at either end (few segments: decode
    is mostly memory-bound)."""
    (a1, b1), (a2, b2) = first, second
    total = m * a2 + b2 * (m * (m - 1) / 2)
    da, db = np.broadcast_arrays(a1 - a2, b1 - b2, m)[:2]
    some = np.flatnonzero((da > 0) | (da + db * (m - 1) > 0))
    if len(some):
        da, db, m = da[some], db[some], np.broadcast_to(m, total.shape)[some]
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = np.clip(np.ceil(-da / db), 0, m)  # the first j past the crossing
        rising, falling = db > 0, db < 0
        lo = np.where(rising, cross, 0.0)
        hi = np.where(falling, cross, np.where(rising | (da > 0), m, 0.0))
        total[some] += _sum_line(da, db, lo, hi)
    return total


def _floor_excess(first: tuple[Num, Num], second: tuple[Num, Num], floor: float,
                  m: np.ndarray) -> np.ndarray:
    """Σ_{j=0}^{m−1} max(0, floor − max(a₁ + b₁·j, a₂ + b₂·j)) for slopes b ≥ 0: the max
    never falls, so the floor exceeds it on the first t steps, t where either line reaches
    it."""
    t = m
    for a, b in (first, second):
        with np.errstate(divide="ignore", invalid="ignore"):
            reach = np.where(np.asarray(b) > 0, np.ceil((floor - a) / b),
                             np.where(np.asarray(a) >= floor, 0.0, m))
        t = np.minimum(t, np.clip(reach, 0, m))
    return t * floor - _sum_max(first, second, t)


def decode_step(spec: ModelSpec, layout: Layout | LayoutVariants, gpu: HardwareProfile,
                engine: Engine, precision: Precision = MIXED_PRECISION_ADAM) -> DecodeStep:
    """The decode step of one replica of `layout` (tp × pp GPUs) on `gpu` under `engine`,
    reading weights and KV cache at `precision`'s bytes per element; the weight matmuls at the
    FP8 rate under `precision.fp8_matmuls`, attention over the KV cache in BF16."""
    tp, pp, L = layout.tp, layout.pp, spec.num_hidden_layers
    flops_rate = tp * pp * compute_rate(gpu)
    matmul_rate = tp * pp * compute_rate(gpu, fp8=precision.fp8_matmuls)
    hbm = decode_hbm_rate(gpu)
    kv_split = 1 if spec.mla else min(tp, spec.num_key_value_heads)  # replicated past a_kv
    comm_fixed, comm_seq = decode_collectives(spec, layout, gpu, engine, precision)
    ep = layout.ep if spec.moe else 1
    expert_rate, expert_tokens = 0.0, 1.0
    if ep > 1:  # EP = dp·tp (vLLM): the replicas' tokens share the experts of all ep GPUs
        expert_rate, expert_tokens = ep * hbm, ep / tp
    head = flops_fwd_per_token_head(spec, Head.POLICY)  # BF16 in FP8 checkpoints too
    matmuls = flops_decode_step(spec, 0.0).total - head
    return DecodeStep(
        spec=spec, weight_rate=tp * hbm, weight_bytes=precision.weight_bytes,
        overhead=engine.step_overhead_s,
        per_seq=engine.per_seq_s, comm=comm_fixed, comm_per_seq=comm_seq,
        flop_seq=matmuls / matmul_rate + head / flops_rate,
        flop_kv=flops_fwd_per_key_attn_scores(spec, mla_absorbed=True) / flops_rate,
        byte_kv=bytes_kv_cache_per_token(spec, precision.kv_cache_bytes) / (kv_split * pp * hbm),
        host=L * engine.layer_floor_s, expert_rate=expert_rate, expert_tokens=expert_tokens)


def decode_collectives(spec: ModelSpec, layout: Layout | LayoutVariants, gpu: HardwareProfile,
                       engine: Engine, precision: Precision = MIXED_PRECISION_ADAM
                       ) -> tuple[float, float]:
    """Seconds of one decode step's collectives, as (fixed, per running sequence): what the
    engine calls, at the sizes it calls them, on the links its group spans (README "Rollouts").

    Each GPU runs its stage's layers for the pp micro-batches of b/pp rows, so 2L/pp calls per
    micro-batch × pp micro-batches pay 2L latencies and carry 2L·b/pp rows. With tp > 1:
    - an all-reduce of the rows after attention's output projection and after the MLP (or the
      MoE layer), per layer (`TP_ALLREDUCES_PER_LAYER_PASS`); one after the vocabulary-parallel
      embedding (first stage); the vocabulary-parallel logits, V per row in BF16, gathered
      (last stage) — each on `comm.time_allreduce_decode` (the engine's own kernel inside a
      scale-up domain, NCCL's hierarchical all-reduce across) or NCCL's all-gather;
    - with expert parallelism (ep > 1, vLLM's EP = dp·tp, attention data-parallel): a dispatch
      and a combine per MoE layer (`comm.time_alltoall_decode`), each TP rank sending 1/tp of
      the rows, one copy per routed expert — in FP8 when the expert matmuls run in FP8
      (the engines quantize before dispatching), combined back in BF16;
    - with pp > 1: each stage sends its micro-batches' rows on.
    Every term is affine in b; the fixed part is the latencies."""
    tp, pp, L = layout.tp, layout.pp, spec.num_hidden_layers
    act = spec.hidden_size * BYTES_BF16  # one sequence's activation row
    fixed = per_seq = 0.0

    def add(calls: float, seconds: Callable[[float], float], row_bytes: float) -> None:
        nonlocal fixed, per_seq
        latency = seconds(0.0)
        fixed += calls * latency
        per_seq += calls * (seconds(row_bytes) - latency) / pp

    if tp > 1:
        def allreduce(n: float) -> float:
            return comm.time_allreduce_decode(n, tp, gpu, engine.custom_allreduce)
        add(TP_ALLREDUCES_PER_LAYER_PASS * L + pp, allreduce, act)  # layers; embedding
        link = comm.link_for(gpu, tp)
        add(pp, lambda n: comm.time_allgather(n, tp, link), spec.vocab_size * BYTES_BF16)
    ep = layout.ep if spec.moe else 1
    if ep > 1:
        def alltoall(n: float) -> float:
            return float(comm.time_alltoall_decode(n, ep, gpu))
        copies = spec.moe.experts_per_token / tp
        dispatch = BYTES_FP8 if precision.fp8_matmuls else BYTES_BF16
        calls = moe_layer_count(spec)
        add(calls, alltoall, copies * spec.hidden_size * dispatch)
        add(calls, alltoall, copies * act)
    if pp > 1:  # each stage sends its pp micro-batches on
        link = comm.link_p2p(gpu, pp, stride=tp)
        fixed += pp * comm.time_p2p(0.0, link)
        per_seq += comm.time_p2p(act, link) - comm.time_p2p(0.0, link)
    return fixed, per_seq


def decode_hbm_rate(gpu: HardwareProfile) -> float:
    """HBM bytes/s one GPU sustains streaming weights and KV in decode."""
    return gpu.hbm_bytes_per_s * gpu.efficiency.decode_hbm


@dataclass(frozen=True)
class PrefillCost:
    """Seconds of prefilling: per sequence (the head on its last position), per token (the
    matmuls and one all-reduce row per TP call), per squared token (causal attention)."""

    per_seq: float
    per_token: float
    per_sq: float
    per_batch: float  # the TP calls' latency, once per prefill batch

    def seconds(self, n: np.ndarray, tokens: np.ndarray, sq: np.ndarray) -> np.ndarray:
        return np.where(n > 0, self.per_batch, 0.0) + (
            self.per_seq * n + self.per_token * tokens + self.per_sq * sq)


def prefill_cost(spec: ModelSpec, layout: Layout | LayoutVariants, gpu: HardwareProfile,
                 precision: Precision = MIXED_PRECISION_ADAM) -> PrefillCost:
    """Prefill priced compute-bound (`flops_prefill`: S tokens, S²/2 key visits, one head),
    plus its TP all-reduces. The weight matmuls run at the FP8 rate under
    `precision.fp8_matmuls`; attention and the output head (kept in BF16 by FP8 checkpoints and
    vLLM's online FP8) at the BF16 rate."""
    rate = layout.tp * layout.pp * compute_rate(gpu)
    matmul_rate = layout.tp * layout.pp * compute_rate(gpu, fp8=precision.fp8_matmuls)
    head = flops_fwd_per_token_head(spec, Head.POLICY)
    per_token = flops_prefill(spec, 1.0).total - head - flops_fwd_per_key_attn_scores(spec) / 2
    latency = per_row = 0.0
    if layout.tp > 1:  # the engine's all-reduces, as in decode; a prompt's row each
        calls = TP_ALLREDUCES_PER_LAYER_PASS * spec.num_hidden_layers + 1
        latency = calls * comm.time_allreduce_decode(0.0, layout.tp, gpu)
        per_row = calls * comm.time_allreduce_decode(spec.hidden_size * BYTES_BF16, layout.tp,
                                                     gpu) - latency
    return PrefillCost(per_seq=head / rate, per_token=per_token / matmul_rate + per_row,
                    per_sq=CAUSAL_KEY_VISIT_FRACTION * flops_fwd_per_key_attn_scores(spec) / rate,
                    per_batch=latency)


@dataclass(frozen=True)
class Rollout:
    """A priced rollout: the generation stage's time and what explains it.

    `time` is the slowest replica's breakdown (it sums to the stage time); `completions` gives,
    for each of `FUSION_POINTS`, when that fraction q of the step's responses is done and the
    fraction (1 − q) still to assess; `running` the slowest replica's running batch over time
    as (start s, end s, sequences) segments; under partial rollouts the steady-state step.
    """

    time: GenerationTime
    kv_tokens: int
    max_seqs: int
    share: int  # the most sequences one replica is sent
    completions: tuple[tuple[float, float], ...]
    tail_s: float  # from the moment 90% of the responses are done to the end
    peak_batch: int
    mean_batch: float  # the slowest replica's running sequences, averaged over its steps
    preemptions: int
    recomputed_tokens: int
    carried_tokens: float = 0.0  # partial rollouts: unfinished tokens carried per step
    span: int = 1  # partial rollouts: steps the longest response runs across (decode steps)
    smaller_tp: tuple[int, int, float] | None = None  # (tp, dp, s): half the TP, priced
    # `running` as arrays (start, end, sequences): turned into tuples only when a report asks
    segments: tuple[np.ndarray, ...] = field(default=(), compare=False, repr=False)

    @cached_property
    def running(self) -> tuple[tuple[float, float, int], ...]:
        return tuple(zip(*(a.tolist() for a in self.segments), strict=True))

    @property
    def seconds(self) -> float:
        return float(self.time.total)

    @property
    def regime(self) -> str:
        """tail-bound (the last 10% of responses take over a third of the rollout), KV-bound
        (the KV cache, not the step's share or max_num_seqs, capped the running batch, or
        recomputing preempted sequences takes over 5% of the rollout — not the carried-over
        ones of partial rollouts, which recompute by design), or throughput-bound."""
        if self.tail_s > self.seconds / 3:
            return "tail-bound"
        preempted = self.time.recompute > 0.05 * self.seconds and not self.carried_tokens
        if self.peak_batch < min(self.max_seqs, self.share) or preempted:
            return "KV-bound"
        return "throughput-bound"


def rollout_floor(spec: ModelSpec, layout: Layout | LayoutVariants, gpu: HardwareProfile,
                  engine: Engine, lengths: np.ndarray, prompt_len: int, kv_tokens: np.ndarray,
                  max_seqs: int, precision: Precision = MIXED_PRECISION_ADAM) -> np.ndarray:
    """A lower bound on `time_generation(...).seconds` less its recomputation, without the
    schedule, at each of `kv_tokens` (not partial rollouts) — and at any smaller KV cache, as
    it grows as the cache shrinks. Per replica, whatever its schedule: it decodes its
    N = ΣL tokens in S ≥ max(longest L, N / running cap, K / cache) steps, where
    K = Σ (P·L + L(L+1)/2) is the KV its steps read (a sequence's t-th step reads its prompt
    and t tokens; recomputation reads nothing more) and no step reads more than the cache.
    Σ over steps of `DecodeStep.seconds` is then at least S·(overhead + comm) +
    N·(per_seq + comm_per_seq) + max(compute over N and K, S·weights(1) + KV bytes over K,
    S·host) — a max of sums being at most the sum of maxes, and the weights read by a step
    growing with its batch — and the prefill at least that of every prompt in one batch (one
    batch latency). The stage is the slowest replica's. (Within 5–17% of the priced rollout
    on the shipped GRPO example, tighter as the cache grows.)"""
    step = decode_step(spec, layout, gpu, engine, precision)
    pre = prefill_cost(spec, layout, gpu, precision)
    starts = replica_bounds(len(lengths), layout.dp)[:-1]
    n_lengths = lengths.astype(float)
    n = np.diff([*starts, len(lengths)])[:, None]  # per replica (rows) × KV size (columns)
    tokens = np.add.reduceat(n_lengths, starts)[:, None]
    kv_read = np.add.reduceat(n_lengths * prompt_len + n_lengths * (n_lengths + 1) / 2,
                              starts)[:, None]
    longest = np.maximum.reduceat(n_lengths, starts)[:, None]
    cache = np.asarray(kv_tokens, dtype=float)[None, :]
    steps = np.maximum(np.maximum(np.ceil(tokens / np.minimum(max_seqs, n)), longest),
                       np.ceil(kv_read / cache))
    gpu_s = np.maximum(np.maximum(step.flop_seq * tokens + step.flop_kv * kv_read,
                                  steps * step.weights(1) + step.byte_kv * kv_read),
                       steps * step.host)
    decode = (steps * (step.overhead + step.comm)
              + tokens * (step.per_seq + step.comm_per_seq) + gpu_s)
    prefill = pre.seconds(n, n * prompt_len, n * prompt_len**2)
    return (decode + prefill).max(axis=0)


@memo  # the search asks again for the variants of an option (shadow copy, shared critic)
def time_generation(spec: ModelSpec, layout: Layout | LayoutVariants, gpu: HardwareProfile,
                    engine: Engine, lengths: np.ndarray, prompt_len: int, kv_tokens: int,
                    max_seqs: int, partial: bool = False,
                    precision: Precision = MIXED_PRECISION_ADAM) -> Rollout:
    """Rollouts of `lengths` (response tokens per sequence, prompt major) on `layout.dp`
    replicas with `kv_tokens` KV tokens and at most `max_seqs` running sequences each: the
    continuous-batching schedule (`rollout.schedule`) priced segment by segment; the stage
    ends when the slowest replica ends. Under `partial` rollouts, the steady-state step: each
    replica's time per completed share over the periods after the first, the slowest one's."""
    sched = schedule(lengths, layout.dp, prompt_len, kv_tokens, max_seqs, partial)
    step = decode_step(spec, layout, gpu, engine, precision)
    pre = prefill_cost(spec, layout, gpu, precision)
    decode, overhead = step.segment_seconds(sched.batch, sched.kv, sched.steps)
    # the prefills, at the few segments that have any (`pre_at`)
    pre_at, pre_n = sched.prefills[:, 0], sched.prefills[:, 1:].T
    fresh = pre.seconds(pre_n[0], pre_n[1], pre_n[2])
    recompute = pre.seconds(pre_n[3], pre_n[4], pre_n[5])
    cost = decode + overhead
    cost[pre_at] = cost[pre_at] + fresh + recompute
    # each replica's clock; a group is one replica's step (partial rollouts: one period)
    group = sched.replica * (PARTIAL_PERIODS if partial else 1) + sched.period
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    end = np.cumsum(cost)
    start = end - cost
    offset = np.repeat(start[first], np.diff(np.r_[first, len(cost)]))
    start, end = start - offset, end - offset  # from the start of each group
    measured = sched.period >= 1 if partial else np.ones(len(cost), dtype=bool)
    dp = layout.dp
    # per replica: its time; under partial rollouts per token generated in the measured steps,
    # scaled to the tokens of its share (what a step generates in steady state) — but new
    # prompts per prompt admitted, scaled to its share's prompts: a step prefills each of its
    # prompts once, however few tokens the window's last period generated after admitting them
    bounds = replica_bounds(len(lengths), dp)
    share_starts, share = bounds[:-1], np.diff(bounds)  # each replica's sequences
    scale = prompts = np.ones(dp)
    if partial:
        tokens = np.bincount(sched.replica, weights=sched.steps * sched.batch * measured,
                             minlength=dp)
        scale = np.add.reduceat(lengths, share_starts) / np.maximum(tokens, 1)
        admitted = np.bincount(sched.replica[pre_at], weights=pre_n[0] * measured[pre_at],
                               minlength=dp)
        prompts = share / np.maximum(admitted, 1)
    not_fresh = cost.copy()
    not_fresh[pre_at] -= fresh
    per = (np.bincount(sched.replica, weights=not_fresh * measured, minlength=dp) * scale
           + np.bincount(sched.replica[pre_at], weights=fresh * measured[pre_at], minlength=dp)
           * prompts)
    slow = int(np.argmax(per))
    total = float(per[slow])
    mine = (sched.replica == slow) & measured
    f, f_prompts = float(scale[slow]), float(prompts[slow])
    # when the step's responses are done; under partial rollouts, as a fraction of the step
    duration = np.bincount(group, weights=cost)[group]  # each segment's group's length
    times = np.sort(np.repeat(end / duration * total if partial else end,
                              sched.done * measured))
    n = len(times)
    at = {q: float(times[max(0, int(np.ceil(q * n)) - 1)]) for q in FUSION_POINTS}
    tail_start = total if partial else at[TAIL_FRACTION]
    after = 0.0 if partial else np.clip((end - tail_start) / np.maximum(cost, 1e-30), 0, 1)
    steps = sched.steps[mine]
    shown = mine & (sched.period == sched.period.max())  # partial: the last step
    return Rollout(
        time=GenerationTime(
            prefill=f_prompts * float(fresh[mine[pre_at]].sum()),
            recompute=f * float(recompute[mine[pre_at]].sum()),
            decode=f * float((decode * (1 - after))[mine].sum()),
            decode_tail=f * float((decode * after)[mine].sum()),
            overhead=f * float(overhead[mine].sum())),
        kv_tokens=kv_tokens, max_seqs=max_seqs, share=int(share.max()),
        completions=tuple((at[q], 1.0 - q) for q in FUSION_POINTS),
        tail_s=total - tail_start, peak_batch=int(sched.batch.max()),
        mean_batch=float((sched.batch[mine] * steps).sum() / max(1, steps.sum())),
        preemptions=sched.preemptions, recomputed_tokens=int(pre_n[4].sum()),
        carried_tokens=float(np.mean(sched.carried)) if sched.carried else 0.0,
        span=int(np.ceil(lengths.max() / (f * steps.sum()))) if partial else 1,
        segments=(start[shown], end[shown], sched.batch[shown]))

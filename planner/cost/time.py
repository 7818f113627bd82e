"""Seconds per stage for one role on one layout: the hardware time model.

Compute-bound work (prefill, teacher-forced assessment, training) runs at the profile's peak
FLOP/s × `efficiency.compute`; a decode step is a roofline max of its FLOPs and its HBM traffic
(weights shard + live KV cache) at `efficiency.hbm`; communication is α–β (`comm.py`) on the
link its ranks span. Rank order is the frameworks' (Megatron-Core): TP innermost, then CP, DP,
PP outermost; expert parallelism reuses DP×CP×TP ranks (stride tp).

Each function returns a breakdown whose fields sum to `total` (seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from planner.cost import comm
from planner.cost.constants import BYTES_BF16
from planner.cost.flops import (
    Head,
    bytes_decode_step,
    bytes_kv_cache_per_token,
    bytes_optimizer_step,
    flops_decode_step,
    flops_fwd_seq,
    flops_prefill,
    flops_train_seq,
    moe_layer_count,
    params_with_head,
)
from planner.plan import Layout
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec

# Framework behaviour, not hardware (defaults; `bench/calibration.py` reports how they fare).
DP_COMM_OVERLAP = 0.5
"""Fraction of the data-parallel gradient (and ZeRO parameter) traffic hidden behind the
backward pass. Megatron overlaps the gradient reduce-scatter with backward by bucket; the
first buckets start late and the last finish after compute, so part stays exposed."""

TP_ALLREDUCES_PER_LAYER_FWD = 2
"""Megatron TP: one all-reduce (or reduce-scatter + all-gather with SP) after attention and one
after the MLP in the forward; the backward mirrors them (Shoeybi et al. 2019, §3)."""

EP_ALLTOALLS_PER_LAYER_FWD = 2
"""Token dispatch and combine all-to-alls of an expert-parallel MoE layer, forward."""


@dataclass(frozen=True)
class Seconds:
    """A named time breakdown; `total` is the sum of its fields. Units: seconds."""

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainTime(Seconds):
    compute: float = 0.0
    pp_bubble: float = 0.0
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    dp_comm: float = 0.0  # the exposed (not overlapped) part
    optimizer: float = 0.0
    offload: float = 0.0


@dataclass(frozen=True)
class ForwardTime(Seconds):
    compute: float = 0.0
    pp_bubble: float = 0.0
    tp_comm: float = 0.0
    ep_comm: float = 0.0


@dataclass(frozen=True)
class GenerationTime(Seconds):
    prefill: float = 0.0
    decode: float = 0.0  # steady state: full batches up to the mean response length
    decode_tail: float = 0.0  # the last stragglers running to the maximum response length


def compute_rate(gpu: HardwareProfile) -> float:
    """Achievable FLOP/s of one GPU on dense BF16 matmuls."""
    return gpu.peak_bf16_flops * gpu.efficiency.compute


def hbm_rate(gpu: HardwareProfile) -> float:
    """Achievable HBM bytes/s of one GPU."""
    return gpu.hbm_bytes_per_s * gpu.efficiency.hbm


def _tp_link(gpu: HardwareProfile, layout: Layout) -> comm.Link:
    return comm.link_for(gpu, layout.tp)


def _tp_comm(spec: ModelSpec, gpu: HardwareProfile, layout: Layout, tokens: float,
             passes: int) -> float:
    """TP activation collectives for `tokens` tokens through `passes` × (L/pp layers) on one
    pipeline stage: all-reduces of tokens·H activations (SP: the same volume as RS + AG)."""
    if layout.tp == 1:
        return 0.0
    nbytes = tokens * spec.hidden_size * BYTES_BF16
    per_layer = TP_ALLREDUCES_PER_LAYER_FWD * comm.time_allreduce(nbytes, layout.tp,
                                                                 _tp_link(gpu, layout))
    return passes * per_layer * spec.num_hidden_layers / layout.pp


def _ep_comm(spec: ModelSpec, gpu: HardwareProfile, layout: Layout, tokens: float,
             passes: int) -> float:
    """EP dispatch/combine all-to-alls: each rank sends its tokens × k × H activations."""
    if layout.ep == 1 or not spec.moe:
        return 0.0
    nbytes = tokens * spec.moe.experts_per_token * spec.hidden_size * BYTES_BF16
    link = comm.link_for(gpu, layout.ep, stride=layout.tp)
    per_layer = EP_ALLTOALLS_PER_LAYER_FWD * comm.time_alltoall(nbytes, layout.ep, link)
    return passes * per_layer * moe_layer_count(spec) / layout.pp


def time_train(spec: ModelSpec, head: Head, layout: Layout, gpu: HardwareProfile,
               n_seqs: int, seq_len: float, mini_batches: int = 1, epochs: int = 1,
               grad_bytes: float = BYTES_BF16) -> TrainTime:
    """One training stage of one role: `epochs` × `mini_batches` optimizer steps over n_seqs.

    Per optimizer step each DP rank runs M = seqs/(dp·micro_batch) micro-batches through a
    1F1B pipeline: bubble (pp−1)/M of the step's compute. TP collectives per layer, EP
    all-to-alls per MoE layer, the CP ring (K/V of the local chunk passed cp−1 times per layer,
    forward and twice backward), the DP/ZeRO gradient collective per step (ZeRO-3 adds the
    parameter all-gathers of every micro-batch, forward and backward) of which
    `DP_COMM_OVERLAP` hides behind the backward, the optimizer step at HBM speed on the local
    shard, and offloaded optimizer state moving over the host link each step.
    """
    L, g = layout, layout.gpus
    per_seq = flops_train_seq(spec, seq_len, head, L.checkpointing)
    steps = epochs * mini_batches
    seqs_per_step = n_seqs / mini_batches
    micro = max(1.0, seqs_per_step / (L.dp * L.micro_batch))
    step_compute = seqs_per_step * per_seq.total / (g * compute_rate(gpu))
    compute = steps * step_compute
    bubble = steps * step_compute * (L.pp - 1) / micro

    tokens_per_micro = L.micro_batch * seq_len / L.cp  # per rank, per micro-batch
    passes = 3 + (1 if L.checkpointing == "full" else 0)  # fwd, 2 × bwd, recompute
    tp = steps * micro * _tp_comm(spec, gpu, L, tokens_per_micro, passes)
    ep = steps * micro * _ep_comm(spec, gpu, L, tokens_per_micro, passes)

    cp = 0.0
    if L.cp > 1:
        kv_bytes = bytes_kv_cache_per_token(spec) / spec.num_hidden_layers  # one layer's K/V
        chunk = tokens_per_micro * kv_bytes / max(1, min(L.tp, spec.num_key_value_heads))
        link = comm.link_for(gpu, L.cp, stride=L.tp)
        per_layer = 3 * (L.cp - 1) * comm.time_p2p(chunk, link)  # fwd + 2 × bwd
        cp = steps * micro * per_layer * spec.num_hidden_layers / L.pp

    params = params_with_head(spec, head)
    shard = params / (L.tp * L.pp)  # parameters a DP rank is responsible for
    replicas = L.dp * L.cp
    dp_link = comm.link_for(gpu, replicas, stride=L.tp)
    if L.zero <= 1:  # ZeRO-1 shards the optimizer only: gradients are still all-reduced
        grads = comm.time_allreduce(shard * grad_bytes, replicas, dp_link)
    else:
        grads = comm.time_reducescatter(shard * grad_bytes, replicas, dp_link)
    if L.zero == 2:  # updated parameter shards gathered back after the step
        grads += comm.time_allgather(shard * BYTES_BF16, replicas, dp_link)
    if L.zero == 3:  # parameters gathered for every micro-batch's forward and backward
        grads += micro * 2 * comm.time_allgather(shard * BYTES_BF16, replicas, dp_link)
    dp = steps * grads * (1 - DP_COMM_OVERLAP)

    local = shard / (replicas if L.zero >= 1 else 1)
    optimizer = steps * bytes_optimizer_step(local, grad_bytes=grad_bytes) / hbm_rate(gpu)
    offload = 0.0
    if L.offload in ("optimizer", "both"):  # gradients down, updated weights back up
        offload += steps * local * (grad_bytes + BYTES_BF16) / comm.link_host(gpu).bandwidth
        optimizer = 0.0  # the step runs on the CPU, overlapped with the transfers
    if L.offload in ("params", "both"):  # weights streamed in for forward and backward
        offload += steps * micro * 2 * local * BYTES_BF16 / comm.link_host(gpu).bandwidth
    return TrainTime(compute=compute, pp_bubble=bubble, tp_comm=tp, cp_comm=cp, ep_comm=ep,
                     dp_comm=dp, optimizer=optimizer, offload=offload)


def time_forward(spec: ModelSpec, head: Head, layout: Layout, gpu: HardwareProfile,
                 n_seqs: int, seq_len: float) -> ForwardTime:
    """A teacher-forced forward over n_seqs sequences (reference, reward, critic, old log-probs).

    Compute-bound; micro-batches of `micro_batch` sequences stream through the pipeline
    (bubble (pp−1)/M), TP all-reduces and EP all-to-alls per layer.
    """
    L, g = layout, layout.gpus
    compute = n_seqs * flops_fwd_seq(spec, seq_len, head).total / (g * compute_rate(gpu))
    micro = max(1.0, n_seqs / (L.dp * L.micro_batch))
    tokens_per_micro = L.micro_batch * seq_len / L.cp
    return ForwardTime(compute=compute, pp_bubble=compute * (L.pp - 1) / micro,
                       tp_comm=micro * _tp_comm(spec, gpu, L, tokens_per_micro, 1),
                       ep_comm=micro * _ep_comm(spec, gpu, L, tokens_per_micro, 1))


def decode_step_time(spec: ModelSpec, layout: Layout, gpu: HardwareProfile, batch: float,
                     context: float) -> float:
    """One decode step of `batch` sequences at `context` on one replica (tp × pp GPUs).

    Roofline: max(FLOPs at achievable peak, HBM traffic at achievable bandwidth) on each GPU's
    share (weights and KV heads split over tp, layers over pp with pp micro-batches in flight),
    plus the TP all-reduces of the step's activations (latency-bound at small batch).
    """
    shard = layout.tp * layout.pp
    flops = batch * flops_decode_step(spec, context).total / shard
    traffic = bytes_decode_step(spec, batch, context)
    kv_split = max(1, min(layout.tp, spec.num_key_value_heads))  # KV heads replicate past a_kv
    nbytes = traffic.weights / shard + (traffic.kv_read + traffic.kv_write) / (kv_split
                                                                              * layout.pp)
    roofline = max(flops / compute_rate(gpu), nbytes / hbm_rate(gpu))
    return roofline + _tp_comm(spec, gpu, layout, batch, 1)


def time_generation(spec: ModelSpec, layout: Layout, gpu: HardwareProfile, n_seqs: int,
                    prompt_len: float, response_len: float, max_response_len: float,
                    max_batch: float) -> GenerationTime:
    """Rollouts of n_seqs sequences on `layout.dp` replicas with continuous batching.

    Each replica decodes its n = n_seqs/dp sequences at a concurrency b = min(n, max_batch),
    `max_batch` being what its free KV-cache memory holds. The steady phase is n·T̄/b steps at
    batch b and average context S + T̄/2 (when n > b these are the waves of rollouts, new
    sequences filling freed slots); the tail is the longest response running on alone,
    (T_max − T̄) steps at batch 1. Prefill of the prompts is compute-bound.
    """
    n = n_seqs / layout.dp
    batch = max(1.0, min(n, max_batch))
    prefill = n * flops_prefill(spec, prompt_len).total / (layout.tp * layout.pp
                                                            * compute_rate(gpu))
    steady_steps = n * response_len / batch
    steady = steady_steps * decode_step_time(spec, layout, gpu, batch,
                                             prompt_len + response_len / 2)
    tail_steps = max_response_len - response_len
    tail = tail_steps * decode_step_time(spec, layout, gpu, 1.0,
                                         prompt_len + (response_len + max_response_len) / 2)
    return GenerationTime(prefill=prefill, decode=steady, decode_tail=tail)

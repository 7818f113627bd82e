"""The weight refit: the actor's trained weights into its rollout engine, every step.

Four mechanisms, a framework fact (`runtime.refit`, `specs.runtime.REFIT_MECHANISMS`) for a
rollout group of its own; a rollout on the training GPUs (co-located) always re-lays through
GPU memory (CUDA IPC handles or the same process), apart from any offload out and back
(`offload.swap_time`, priced beside it).

What every mechanism shares (rollout.md §6, "Reading"):
- The rollout engine loads whole checkpoint tensors: the frameworks hand vLLM's `load_weights`
  Hugging Face tensors and each worker keeps its slice. So every rollout GPU takes in the full
  tensors of its pipeline stage (`bytes_stage_in`), whatever its TP; a scale-up domain takes
  each tensor in once over all its NICs and fans it out over the scale-up link (NCCL's
  broadcast trees and PXN): the receive side is the stage's bytes over min(scale-up link,
  NICs of the domain × NIC).
- Each tensor costs the engine a load call (`RefitRates.tensor_s`): MoE layers carry thousands of
  expert tensors (`tensor_counts`), a cost no bandwidth hides.
- A precision change costs a quantization pass per weight matrix on the rollout GPUs
  (`RefitRates.fp8_quantize_s`): bf16 training weights into an FP8 engine.
- Assembling a whole tensor from the training layout costs one collective step per extra TP
  and PP rank for each non-expert tensor (`RefitRates.gather_step_s`; routed experts go in
  grouped calls), in series with the transfers.

Mechanisms (the send side; the receive side above for all):
- `sharded` (NeMo-RL's NCCL resharding refit): every training rank sends its share of the
  model at once; the senders push W / G_t each.
- `checkpoint_engine` (verl's checkpoint engine, one sender: verl 0.8's NCCL engine, the
  fully-async recipe's engine its figures were measured with): one training rank gathers the
  model and broadcasts it in buckets: its inbound (the parts its domain lacks over its NIC)
  and its outbound (the whole model over its link) overlap, bucket after bucket; its
  per-tensor generator assembles every tensor first (`RefitRates.engine_tensor_s`).
- `checkpoint_engine_relays` (verl 0.9.1's NCCL checkpoint engine as it ships,
  `multi_sender=True`, verl/checkpoint_engine/nccl_checkpoint_engine.py:143, 200-219): the
  same one-rank gather and bucketed broadcast, with the training ranks of the source's node
  in the broadcast group as relays: NCCL fans each bucket out over NVLink to them and on over
  their NICs, so the outbound crosses every NIC of that node (no more than NVLink carries).
- `one_rank_broadcast` (OpenRLHF, verl's naive NCCL sync): the same rank, tensor by tensor,
  gather then broadcast in series, each tensor a synchronised collective
  (`RefitRates.broadcast_tensor_s`).
- Co-located: each GPU takes the full tensors of its generation stage over the scale-up link
  (`colocated_in`), and its domain takes what its training ranks do not hold over its NICs
  (`colocated_out`, a training-layout term).

Every refit is max(send, receive) + assemble + per-tensor (`Refit.seconds`): the send side and
the assembly depend on the training layout and group alone, the receive side and the
per-tensor work on the generation layout alone (and the pools and placement of the two
groups) — the split the search states exactly with two linear constraints
(`planner/search/model.py`). Constants (`RefitRates`) are fitted in `bench/refit.py` on
../shared/data/calibration/rollout.md §6 and the calibration README's refit table, and
nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.cost import comm
from planner.cost.constants import BYTES_BF16
from planner.cost.flops import Head, Num, params_with_head
from planner.cost.states import params_per_gpu_stage, pipeline_stage_layers
from planner.cost.time import hbm_rate
from planner.plan import expert_tp
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec


@dataclass(frozen=True)
class RefitRates:
    """The refit's constants, fitted in bench/refit.py on ../shared/data/calibration/rollout.md
    §6 and the calibration README's refit table, and nowhere else (each field says on which
    figures)."""

    link_share: float = 0.45
    """The share of a link's effective bandwidth (peak × the profile's efficiency) a refit's
    transfers reach. Fitted with `tensor_s`, `gather_step_s` and `engine_tensor_s` on
    NeMo-RL's refit table and verl's checkpoint-engine figures; the bandwidth-bound ones set
    it: NeMo-RL's Qwen3-235B-A22B and DeepSeek-V3 (470 and 1,342 GB into DGX-H100 domains of 8
    NICs in 4.56–4.85 s and 7.65–9.94 s) and verl's checkpoint engine on Qwen3-235B-A22B
    (23.7 s through one rank's NIC). Under half: many mid-sized messages, host-side packing."""

    tensor_s: float = 10e-6
    """Seconds per checkpoint tensor the rollout engine loads (vLLM `load_weights`: a lookup,
    a slice, a copy). Set by NeMo-RL's Qwen3-30B-A3B refits (18,867 tensors, 0.50–0.67 s on
    every layout pair, whichever of them crosses NICs) against its Qwen3-4B ones (398
    tensors, 0.07–0.08 s): the 30B moves 7.6× the bytes in 7–8× the time, so the tensors add
    a fraction (0.19 s of its 0.6 s)."""

    gather_step_s: float = 75e-6
    """Seconds per collective step to assemble one non-expert tensor from the training layout
    (a TP all-gather, a PP broadcast: one step per extra rank). Fitted on NeMo-RL's Qwen3-4B
    refits on one node: DP8 0.07–0.08 s, PP2 0.09 s, PP4 0.13–0.15 s, TP2×PP2 0.13 s — each
    extra rank adds ~0.02 s over the 398 tensors."""

    broadcast_tensor_s: float = 15e-3
    """Seconds per tensor of a one-rank broadcast sent tensor by tensor (the gather to the
    rank, the NCCL broadcast, the engine's load, each synchronised with the driver). Fitted on
    verl's naive NCCL sync on H100 nodes: Qwen2.5-7B 1+1 nodes 5.5–6.0 s, 32B 2+2 17.7–18.1 s,
    72B 4+4 28.5–29.1 s (calibration README, "Weight sync"): 13–15 ms per tensor beyond the
    bytes."""

    engine_tensor_s: float = 80e-6
    """Seconds per tensor of verl's checkpoint engine on the training side: its per-tensor
    generator assembles each checkpoint tensor before the buckets are broadcast. Fitted on
    verl's checkpoint-engine refits of Qwen3-30B-A3B (4.38 s on 16+16 H20s, ≈ 7 s on 4×8
    H100s) against the bytes one rank's NIC moves (~3.4 s)."""

    fp8_quantize_s: float = 130e-6
    """Seconds per weight matrix to quantize bf16 weights into an FP8 engine during the refit
    (an amax, a scale and a cast per tensor). Fitted on NeMo-RL's Qwen3-30B-A3B refit with FP8
    generation weights, 2.9–4.3 s (pull request 2971; 0.74–1.53 s in bf16 on the same path):
    ~2.4 s over its 18,624 weight matrices."""


REFIT_RATES = RefitRates()


# --- what the model is made of ----------------------------------------------------------------


@dataclass(frozen=True)
class TensorCounts:
    """Checkpoint tensors per layer kind and outside the layers (Hugging Face naming: one
    tensor per weight, bias and norm; each routed expert its own projections)."""

    attention: int  # per layer: projections, biases, QK-norms, sinks
    attention_matrices: int  # per layer: of those, the projection matrices
    norms: int  # per layer
    dense_ffn: int  # per dense layer
    dense_ffn_matrices: int
    moe_nonrouted: int  # per MoE layer: router (and its biases), shared experts
    moe_nonrouted_matrices: int
    routed: int  # per MoE layer: every routed expert's tensors
    routed_matrices: int
    embedding: int  # first stage: input embedding, position table, projections
    head: int  # last stage: untied output head, final norm

    def stage(self, spec: ModelSpec, pp: int, k: int) -> tuple[int, int, int]:
        """(tensors, of those non-expert, weight matrices) of pipeline stage k of pp."""
        layers = pipeline_stage_layers(spec.num_hidden_layers, pp)[k]
        moe = spec.moe.moe_layers.count(layers.start, layers.stop) if spec.moe else 0
        dense = len(layers) - moe
        per_layer = self.attention + self.norms
        nonexpert = (len(layers) * per_layer + dense * self.dense_ffn
                     + moe * self.moe_nonrouted + (self.embedding if k == 0 else 0)
                     + (self.head if k == pp - 1 else 0))
        matrices = (len(layers) * self.attention_matrices + dense * self.dense_ffn_matrices
                    + moe * (self.moe_nonrouted_matrices + self.routed_matrices))
        return nonexpert + moe * self.routed, nonexpert, matrices


@lru_cache(maxsize=256)
def tensor_counts(spec: ModelSpec) -> TensorCounts:
    """The checkpoint tensors of `spec`, counted from its architecture."""
    t = spec.traits
    bias = 2 if t.norm == "layernorm" else 1  # tensors per norm: weight (and bias)
    ffn_m = 3 if spec.gated_ffn else 2
    if spec.mla:
        attn_m = (2 if spec.mla.q_lora_rank else 1) + 3  # q_a, q_b | q; kv_a, kv_b; o
        attn = attn_m + (1 if spec.mla.q_lora_rank else 0) + 1  # q_a and kv_a layernorms
    else:
        attn_m = 4
        attn = (attn_m + (3 if spec.qkv_bias else 0) + (1 if spec.o_bias else 0)
                + (2 if t.qk_norm != "none" else 0) + (1 if t.attention_sinks else 0))
    ffn = ffn_m + (ffn_m if spec.mlp_bias else 0)
    nonrouted = nonrouted_m = routed = routed_m = 0
    if spec.moe:
        m = spec.moe
        shared = ffn_m if m.num_shared_experts else 0  # one module of the shared width
        nonrouted_m = shared
        nonrouted = (shared + 1 + (1 if t.router_bias else 0)
                     + (1 if m.score_correction_bias else 0)
                     + (1 if t.shared_expert_gate else 0))
        routed_m = m.num_experts * ffn_m
        routed = routed_m * (2 if t.expert_bias else 1)
    embedding = 1 + (1 if t.learned_positions else 0) + (2 if spec.word_embed_proj_dim else 0)
    head = (0 if spec.tie_word_embeddings else 1) + (bias if t.final_norm else 0)
    return TensorCounts(attention=attn, attention_matrices=attn_m,
                        norms=t.norms_per_layer * bias, dense_ffn=ffn,
                        dense_ffn_matrices=ffn_m, moe_nonrouted=nonrouted,
                        moe_nonrouted_matrices=nonrouted_m, routed=routed,
                        routed_matrices=routed_m, embedding=embedding, head=head)


def bytes_model(spec: ModelSpec, head: Head) -> float:
    """The trained weights a refit moves: bf16, every parameter once. Units: bytes."""
    return params_with_head(spec, head) * BYTES_BF16


def bytes_stage_in(spec: ModelSpec, pp: int, head: Head) -> float:
    """Whole tensors of the largest generation pipeline stage: what each rollout GPU takes in
    (the engine slices its share out of whole tensors). Units: bytes."""
    return BYTES_BF16 * max(params_per_gpu_stage(spec, pp=pp, stage=k, head=head).total
                            for k in range(pp))


def _held_in_domain(spec: ModelSpec, layout, gpu: HardwareProfile, head: Head) -> Num:
    """The fraction of the model's bytes the training ranks of one scale-up domain hold.

    Megatron's rank order (TP innermost, then CP and DP, PP outermost; ZeRO-3 shards over the
    DP·CP ranks): a domain of d consecutive ranks covers d // (tp·cp·dp) whole stages, or part
    of one stage — min(1, d / distinct shards) of its dense and of its expert weights.
    """
    block = layout.dp * layout.cp * layout.tp  # the ranks of one pipeline stage
    domain = min(gpu.scale_up_gpus, block * layout.pp)
    if block <= domain:
        return min(1.0, (domain // block) / layout.pp)
    stage = params_per_gpu_stage(spec, pp=layout.pp, head=head)  # a typical stage, unsharded
    zero3 = np.asarray(layout.zero) >= 3
    etp = expert_tp(layout, "training")
    dense_shards = layout.tp * np.where(zero3, layout.dp * layout.cp, 1)
    expert_shards = layout.ep * etp * np.where(zero3, block // (layout.ep * etp), 1)
    held = (stage.dense * np.minimum(1.0, domain / dense_shards)
            + stage.routed_experts * np.minimum(1.0, domain / expert_shards)) / stage.total
    return held / layout.pp


def _domain_nic(gpu: HardwareProfile, gpus: int, link: comm.Link | None = None) -> float:
    """Bytes/s one scale-up domain of a group of `gpus` GPUs takes in over its NICs (`link`:
    another per-GPU network figure, e.g. between pools), no more than its scale-up link fans
    out. Units: bytes/s."""
    nic = (link or comm.link_inter_node(gpu)).bandwidth
    r = min(gpus, gpu.scale_up_gpus)
    fan_out = comm.link_intra_node(gpu).bandwidth if gpu.intra_node_gbps and r > 1 else np.inf
    return min(r * nic, fan_out)


def assemble_s(spec: ModelSpec, train, mechanism: str, rates: RefitRates = REFIT_RATES
               ) -> float:
    """The training side's per-tensor latency, in series with the transfers: one collective
    step per extra TP and PP rank for each non-expert tensor (`RefitRates.gather_step_s`);
    through verl's checkpoint engine, also a pass of its per-tensor generator over every
    tensor (`RefitRates.engine_tensor_s`). Depends on the training layout alone. Units: s."""
    tensors, nonexpert, _ = tensor_counts(spec).stage(spec, 1, 0)
    steps = rates.gather_step_s * nonexpert * ((train.tp - 1) + (train.pp - 1))
    engine = mechanism in ("checkpoint_engine", "checkpoint_engine_relays")
    return steps + (rates.engine_tensor_s * tensors if engine else 0.0)


# --- the two sides -------------------------------------------------------------------------------


def colocated_out(spec: ModelSpec, train, gpu: HardwareProfile, head: Head,
                  rates: RefitRates = REFIT_RATES) -> Num:
    """Co-located, the training side: the bytes each domain's training ranks do not hold, in
    over the domain's NICs. Depends on the training layout alone. Units: seconds."""
    gpus = train.dp * train.cp * train.tp * train.pp
    if gpus <= gpu.scale_up_gpus:
        return 0.0
    remote = bytes_model(spec, head) * (1 - _held_in_domain(spec, train, gpu, head))
    return remote / (rates.link_share * _domain_nic(gpu, gpus))


def colocated_in(spec: ModelSpec, gen, gpu: HardwareProfile, head: Head,
                 rates: RefitRates = REFIT_RATES) -> float:
    """Co-located, the generation side: each GPU takes the whole tensors of its generation
    stage over the scale-up link (one GPU alone: a copy in HBM). Units: seconds."""
    stage = bytes_stage_in(spec, gen.pp, head)
    if gen.dp * gen.tp * gen.pp == 1 or not gpu.intra_node_gbps:
        return 2 * stage / hbm_rate(gpu)
    return stage / (rates.link_share * comm.link_intra_node(gpu).bandwidth)


def link_between(gpu: HardwareProfile, same_domain: bool,
                 between_pools: comm.Link | None = None) -> comm.Link:
    """The per-GPU link a separate rollout group is reached over: the scale-up link when both
    groups sit in one scale-up domain, else each GPU's NIC (or the link between pools)."""
    if between_pools is not None:
        return between_pools
    return comm.link_intra_node(gpu) if same_domain else comm.link_inter_node(gpu)


def separate_out(spec: ModelSpec, train, gpu: HardwareProfile, head: Head, mechanism: str,
                 link: comm.Link, rates: RefitRates = REFIT_RATES) -> Num:
    """A separate rollout group, the training side's transfers (`mechanism`, over `link` per
    GPU): sharded, every rank pushes its W / G_t; one rank, its gather (what its domain lacks
    over its NIC, the rest over the scale-up link) and its broadcast of W over `link` —
    overlapped in buckets (checkpoint_engine; checkpoint_engine_relays: out over `link` of
    each training GPU of the source's domain, no more than the scale-up link carries from the
    source), or tensor by tensor in series, each tensor a
    synchronised round (one_rank_broadcast, `RefitRates.broadcast_tensor_s`). Depends on the
    training layout and group alone. Units: seconds."""
    weights = bytes_model(spec, head)
    gpus = train.dp * train.cp * train.tp * train.pp
    share = rates.link_share
    if mechanism == "sharded":
        return weights / gpus / (share * link.bandwidth)
    held = _held_in_domain(spec, train, gpu, head)
    local = comm.link_intra_node(gpu).bandwidth if gpu.intra_node_gbps else np.inf
    remote = weights * (1 - held)  # 0 when the group is one domain: no NIC figure needed
    inward = 0.0 if gpus == 1 else np.maximum(
        weights * np.maximum(held - 1 / gpus, 0.0) / local,
        remote / comm.link_inter_node(gpu).bandwidth if np.any(remote > 0) else 0.0) / share
    outward = weights / (share * link.bandwidth)
    if mechanism == "checkpoint_engine_relays":  # the source's node-local peers relay
        relays = np.minimum(gpus, gpu.scale_up_gpus)
        outward = weights / (share * np.minimum(relays * link.bandwidth,
                                                max(local, link.bandwidth)))
    if mechanism in ("checkpoint_engine", "checkpoint_engine_relays"):
        return np.maximum(inward, outward)
    tensors = tensor_counts(spec).stage(spec, 1, 0)[0]
    return inward + outward + rates.broadcast_tensor_s * tensors


def separate_in(spec: ModelSpec, gen, gpu: HardwareProfile, head: Head, link: comm.Link,
                same_domain: bool, rates: RefitRates = REFIT_RATES) -> float:
    """A separate rollout group, the generation side: each domain of the group takes the
    whole tensors of its stage over its NICs (`link` per GPU; the scale-up link when the
    groups share a domain), fanned out over the scale-up link. Units: seconds."""
    stage = bytes_stage_in(spec, gen.pp, head)
    rate = (link.bandwidth if same_domain
            else _domain_nic(gpu, gen.dp * gen.tp * gen.pp, link))
    return stage / (rates.link_share * rate)


def per_tensor(spec: ModelSpec, gen, fp8: bool, rates: RefitRates = REFIT_RATES) -> float:
    """The rollout side's per-tensor work: one load per tensor of its largest stage, and an
    FP8 quantization per weight matrix when the engine runs FP8 weights. Units: seconds."""
    counts = tensor_counts(spec)
    stages = [counts.stage(spec, gen.pp, k) for k in range(gen.pp)]
    tensors = max(s[0] for s in stages)
    matrices = max(s[2] for s in stages)
    return rates.tensor_s * tensors + (rates.fp8_quantize_s * matrices if fp8 else 0.0)


def training_side(spec: ModelSpec, head: Head, train, gpu: HardwareProfile, *, mechanism: str,
                  colocated: bool, same_domain: bool, between_pools: comm.Link | None = None,
                  rates: RefitRates = REFIT_RATES) -> tuple[Num, float]:
    """(transfers, per-tensor latency) of the training side, seconds: co-located
    (`colocated_out`), else to a separate group by `mechanism` (`separate_out`, over
    `link_between`). Arrays for layout variants."""
    if colocated:
        return (colocated_out(spec, train, gpu, head, rates),
                assemble_s(spec, train, "colocated", rates))
    link = link_between(gpu, same_domain, between_pools)
    return (separate_out(spec, train, gpu, head, mechanism, link, rates),
            assemble_s(spec, train, mechanism, rates))


def generation_side(spec: ModelSpec, head: Head, gen, gpu: HardwareProfile, *, colocated: bool,
                    same_domain: bool, fp8: bool, between_pools: comm.Link | None = None,
                    rates: RefitRates = REFIT_RATES) -> tuple[float, float]:
    """(transfers, per-tensor work) of the generation side, seconds: co-located
    (`colocated_in`), else from a separate group (`separate_in`, over `link_between`)."""
    into = (colocated_in(spec, gen, gpu, head, rates) if colocated
            else separate_in(spec, gen, gpu, head, link_between(gpu, same_domain,
                                                                between_pools),
                             same_domain, rates))
    return into, per_tensor(spec, gen, fp8, rates)


@dataclass(frozen=True)
class Refit:
    """One priced refit (seconds): the training side's transfers and per-tensor latency, the
    generation side's transfers and per-tensor work. The transfers overlap (the longer
    counts); the per-tensor terms do not."""

    mechanism: str  # sharded | checkpoint_engine[_relays] | one_rank_broadcast | colocated
    send_s: float
    receive_s: float
    assemble_s: float  # training side, per tensor
    per_tensor_s: float  # generation side, per tensor

    @property
    def seconds(self) -> float:
        return max(self.send_s, self.receive_s) + self.assemble_s + self.per_tensor_s


def price_refit(spec: ModelSpec, head: Head, train, gen, *, train_gpu: HardwareProfile,
                gen_gpu: HardwareProfile, mechanism: str, colocated: bool, same_domain: bool,
                fp8: bool, between_pools: comm.Link | None = None,
                rates: RefitRates = REFIT_RATES) -> Refit:
    """The refit of the actor from its training layout `train` into its generation layout
    `gen`: co-located (the same GPUs), or to a separate group by `mechanism` — over the
    scale-up link when `same_domain`, else each GPU's NIC or `between_pools`. `fp8`: the
    engine runs FP8 weights (the refit quantizes)."""
    send, assemble = training_side(spec, head, train, train_gpu, mechanism=mechanism,
                                   colocated=colocated, same_domain=same_domain,
                                   between_pools=between_pools, rates=rates)
    receive, tensors = generation_side(spec, head, gen, gen_gpu, colocated=colocated,
                                       same_domain=same_domain, fp8=fp8,
                                       between_pools=between_pools, rates=rates)
    return Refit("colocated" if colocated else mechanism, float(send), receive,
                 float(assemble), tensors)

"""Model states per GPU: weights, gradients and optimizer state by precision and ZeRO stage,
and the parameters each pipeline stage holds after TP/EP sharding.

Sources (memory.md, ../shared/data/calibration/):
- [ZeRO] Rajbhandari et al., SC'20 (arXiv 1910.02054) §3.1 and Fig. 1 — memory.md B.1. Model
  states per GPU of Ψ parameters over N_d data-parallel ranks, with w/g/K bytes per parameter
  of weights, gradients and optimizer state: stage 0 `(w+g+K)Ψ`, P_os (1) `(w+g)Ψ + KΨ/N_d`,
  P_os+g (2) `wΨ + (g+K)Ψ/N_d`, P_os+g+p (3) `(w+g+K)Ψ/N_d`. (w, g, K) = (2, 2, 12) is the
  paper's 16 B/param; (2, 4, 12) is Megatron's 18 B/param with fp32 gradient accumulation, and
  at stage 1 Megatron's distributed optimizer, 6 + 12/N_d.

Sharding rules (DESIGN.md layout convention g = dp·tp·pp·cp, ep carved out of dp·cp·tp with
expert tensor parallelism 1):
- PP: the layers split as the layout says (`pipeline_split`: the first/last-stage counts it
  gives and the rest even, else as evenly as possible); the first stage holds the input
  embedding, the last the output head and final norm (a tied head keeps a copy of the
  embedding there when pp > 1, as Megatron does).
- TP: attention, dense FFN and shared-expert matrices, the embedding and the vocabulary head
  /tp; norms, routers and position tables are replicated. Routed experts /ep (not /tp).
- ZeRO over the data-parallel × context-parallel ranks (N_d = dp·cp, Megatron's distributed
  optimizer group); routed experts over their own replicas N_d,e = dp·cp·tp/ep.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.cost.constants import (
    ADAM_STATE_BYTES_PER_PARAM,
    BYTES_BF16,
    BYTES_FP32,
)
from planner.cost.flops import Num, moe_layer_count
from planner.cost.pipeline_split import pipeline_stage_layers
from planner.specs.model import (
    ModelSpec,
    attention_params_per_layer,
    count_params,
    ffn_params,
    norm_params,
)
from planner.theory.shape import Head

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
    fp8_matmuls: the weight matmuls run on FP8 tensor cores (W8A8, as vLLM runs FP8 weights on
        GPUs that have them; elsewhere FP8 weights are dequantized to BF16 matmuls).
    """

    weight_bytes: float = BYTES_BF16
    grad_bytes: float = BYTES_BF16
    optimizer_bytes: float = ADAM_STATE_BYTES_PER_PARAM
    activation_bytes: float = BYTES_BF16
    kv_cache_bytes: float = BYTES_BF16
    fp8_matmuls: bool = False

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


@dataclass(frozen=True)
class StageParams:
    """Parameters one GPU holds on one pipeline stage after TP and EP sharding. Units: elements.

    layers_dense: transformer layers without routed experts (attention, dense FFN, shared
        experts /tp; routers and norms replicated).
    routed_experts: routed experts of the stage's MoE layers, /(ep·etp).
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


def _layer_params(spec: ModelSpec, tp: int, ep: int, etp: int
                  ) -> tuple[float, float, float]:
    """(dense layer, MoE layer without routed experts, routed experts of one MoE layer) per GPU:
    the routed experts spread over ep ranks, each expert split over etp."""
    H = spec.hidden_size
    counts = count_params(spec)
    norms = spec.traits.norms_per_layer * norm_params(spec, H)
    attn = attention_params_per_layer(spec) / tp
    dense = attn + ffn_params(spec, spec.intermediate_size, spec.mlp_bias) / tp + norms
    n_moe = moe_layer_count(spec)
    if not n_moe:
        return dense, 0.0, 0.0
    moe_nonrouted = attn + counts.shared_experts / n_moe / tp + counts.router / n_moe + norms
    return dense, moe_nonrouted, counts.routed_experts / n_moe / (ep * etp)


@lru_cache(maxsize=1024)
def stages_that_can_peak(spec: ModelSpec, pp: int, first: int | None = None,
                         last: int | None = None) -> tuple[int, ...]:
    """The pipeline stages whose memory per GPU can be the largest, in order: the first, the
    last, and each middle stage whose layers (dense and MoE counts) no earlier middle stage
    has. A later middle stage with the same layers holds the same parameters and no more
    activations (1F1B keeps fewer micro-batches in flight further down the pipeline), so it
    never exceeds the earlier one, which `memory.peak_stage` takes on ties: pricing only these
    gives the same peak, in a fraction of the time for a deep pipeline."""
    kept, seen = [], set()
    for k, layers in enumerate(pipeline_stage_layers(spec.num_hidden_layers, pp, first, last)):
        n_moe = spec.moe.moe_layers.count(layers.start, layers.stop) if spec.moe else 0
        if 0 < k < pp - 1:
            if (len(layers), n_moe) in seen:
                continue
            seen.add((len(layers), n_moe))
        kept.append(k)
    return tuple(kept)


@lru_cache(maxsize=4096)  # pure in hashable arguments; the search re-asks per variant
def params_per_gpu_stage(spec: ModelSpec, *, tp: int = 1, pp: int = 1, ep: int = 1,
                         etp: int = 1, stage: int = 0, head: Head = Head.POLICY,
                         first: int | None = None, last: int | None = None) -> StageParams:
    """Parameters on one GPU of pipeline stage `stage` (0-based) after TP/EP sharding (routed
    experts over ep ranks, each split over etp: `planner.plan.expert_tp`); `first` / `last`:
    the layout's first/last-stage layer counts (`pipeline_split`).

    Summed over the stages with tp = ep = 1 this is `params_with_head(spec, head)`; a GPT layer
    (no biases, no norms) gives [Korthikanti]'s `12·h²` per layer. Units: elements.
    """
    L, H = spec.num_hidden_layers, spec.hidden_size
    layers = pipeline_stage_layers(L, pp, first, last)[stage]
    n_moe = spec.moe.moe_layers.count(layers.start, layers.stop) if spec.moe else 0
    n_dense = len(layers) - n_moe
    dense_layer, moe_layer, routed_layer = _layer_params(spec, tp, ep, etp)
    counts = count_params(spec)
    final_norm = counts.norms - L * spec.traits.norms_per_layer * norm_params(spec, H)
    on_first, on_last = stage == 0, stage == pp - 1
    embedding = (counts.embedding / tp + counts.position_embedding) if on_first else 0.0
    vocab_head = head in (Head.POLICY, Head.SHARED)
    head_params = 0.0
    if on_last:
        lm_head = counts.lm_head or (counts.embedding if pp > 1 else 0)  # tied: Megatron's copy
        head_params = ((lm_head / tp if vocab_head else 0.0)
                       + (H if head != Head.POLICY else 0) + final_norm)
    units = [u for u, present in ((dense_layer, n_dense), (moe_layer + routed_layer, n_moe),
                                  (embedding, on_first), (head_params, on_last)) if present]
    return StageParams(
        stage=stage, layers=len(layers), moe_layers=n_moe,
        layers_dense=n_dense * dense_layer + n_moe * moe_layer,
        routed_experts=n_moe * routed_layer, embedding=embedding, head=head_params,
        largest_unit=max(units, default=0.0))


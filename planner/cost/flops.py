"""Architecture-exact work (FLOPs) and traffic (bytes) of one model invocation.

Where the theory (`planner/theory`, FORMULAS.md §1) reads only L, d, d_ff, h, V, this module
prices the architecture a `ModelSpec` describes: GQA with an explicit head_dim, gated or
two-projection FFNs, MoE (router, k active routed experts, shared experts, dense first layers),
DeepSeek multi-head latent attention (MLA), tied embeddings and scalar (reward / critic) heads.
On the paper's canonical Transformer (MHA with head_dim = d/h, two-projection FFN, untied
vocabulary head) every FLOPs function reduces exactly to its Table I counterpart:

| here | FORMULAS.md §1 |
|---|---|
| `flops_fwd_per_token(spec, m, head)` | `C_f^tok(π)`, `C_f^tok(R)`, `C_f^tok(V_ψ)` |
| `flops_prefill(spec, S)` | `C_prefill(π, S)` |
| `flops_decode_sum(spec, S, T)` | `C_decode(π, S, T)` |
| `flops_generation(spec, S, T)` | `C_gen^roll(π)` |
| `flops_train_seq(spec, m, head) / m` | `C_tr^tok(M) = 3·C_f^tok(M)` |

Conventions (documented once, used everywhere below):
- FLOPs count matrix multiplications only, `FLOPS_PER_MAC` (2) per multiply–accumulate, as the
  paper does. Element-wise work (norms, activations, softmax, RoPE, residual adds, bias adds,
  the router's top-k) is lower-order and not counted; biases and norms do count in parameters
  and bytes (`planner/specs/model.py`, `count_params`).
- Attention cost is priced per *key visit* (one query attending one cached key): a score
  (q·k over the query/key head width) and a weighted value sum (over the value head width), for
  every query head. A causal pass over n tokens makes n²/2 key visits
  (`CAUSAL_KEY_VISIT_FRACTION`): this is the paper's convention behind `m·d` in C_f^tok
  (average context m/2) and `S·d` in C_prefill; the exact count n(n+1)/2 differs by a
  lower-order term. A decode step at context c makes c key visits (FORMULAS.md: step t of a
  rollout attends S + t keys). GQA shares K/V between query heads but not the work: the score
  cost is per query head.
- MLA: projections are priced per token (q down/up or direct, kv down to the latent plus the
  RoPE key, kv up-projection, output). Prefill and training use the expanded form (key visit:
  `a·(qk_nope + qk_rope) + a·v_head`). Decode uses weight absorption (`mla_absorbed=True`, as
  vLLM/SGLang run it): W_UK folds into the query and W_UV into the output, so the per-token
  projection work is *unchanged* (a·nope·r + a·r·v = r·a·(nope + v), r = kv_lora_rank) while a
  key visit reads the cached latent directly: `a·(r + qk_rope) + a·r`.
- Heads: the vocabulary projection `2·V·H` per token whether or not it is tied to the input
  embedding (tying changes parameters, not work); a scalar head `2·H` per token for the critic
  (every token) and per sequence for the reward model (last token only, `2·H/m` per token as
  Table I writes it). OPT's `word_embed_proj_dim` adds its project_in/out matmuls to the head.
- Backward = `BACKWARD_FLOPS_PER_FORWARD` (2) × forward (Table I). Selective recompute re-runs
  the attention scores/values forward ([Korthikanti] §5: only the core attention is recomputed);
  full recompute re-runs the transformer layers' forward (not the output head and loss, which
  Megatron and HF do not checkpoint). The theory instead adds a whole C_f (FORMULAS.md §3); the
  difference is the head's forward.

Bytes: weights read per forward (all resident weights once, routed experts only as touched),
KV-cache bytes per token (`ModelSpec.kv_cache_elements_per_token` × dtype bytes), KV read per
decode step, optimizer-step traffic. Arguments that are counts of tokens, contexts or sequences
may be numpy arrays: the arithmetic has no Python branching on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TypeAlias

import numpy as np

from planner.cost.constants import (
    ADAM_FLOPS_PER_PARAM,
    ADAM_STATE_BYTES_PER_PARAM,
    BACKWARD_FLOPS_PER_FORWARD,
    BYTES_BF16,
    CAUSAL_KEY_VISIT_FRACTION,
    FLOPS_PER_MAC,
    GATED_FFN_MATRICES,
    PLAIN_FFN_MATRICES,
)
from planner.plan import Checkpointing
from planner.specs.model import ModelSpec, count_params
from planner.theory.shape import Head

__all__ = [
    "Checkpointing",
    "FlopsBreakdown",
    "Head",
    "Num",
    "TrafficBreakdown",
    "TrainFlops",
    "bytes_decode_step",
    "bytes_decode_sum",
    "bytes_kv_cache_per_token",
    "bytes_kv_read_decode_step",
    "bytes_optimizer_step",
    "bytes_routed_experts_read",
    "bytes_weights_read_fwd",
    "experts_touched",
    "ffn_matrices",
    "flops_decode_step",
    "flops_decode_sum",
    "flops_fwd_per_key_attn_scores",
    "flops_fwd_per_token",
    "flops_fwd_per_token_attn_proj",
    "flops_fwd_per_token_dense_ffn",
    "flops_fwd_per_token_head",
    "flops_fwd_per_token_routed_experts",
    "flops_fwd_per_token_router",
    "flops_fwd_per_token_shared_experts",
    "flops_fwd_seq",
    "flops_generation",
    "flops_optimizer_step",
    "flops_prefill",
    "flops_train_per_token",
    "flops_train_seq",
    "moe_layer_count",
    "params_with_head",
    "remote_domains_per_token",
]

Num: TypeAlias = float | np.ndarray
"""A scalar or a numpy array of candidates (token counts, contexts, batch sizes)."""


# --- breakdowns ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlopsBreakdown:
    """Forward FLOPs by component; `total` is their sum. Units: FLOPs."""

    attn_proj: Num = 0.0  # q/k/v/o projections (MLA: low-rank q and kv paths)
    attn_scores: Num = 0.0  # scores q·k and the weighted value sum, per key visit
    dense_ffn: Num = 0.0  # FFN of the dense (non-MoE) layers
    router: Num = 0.0  # MoE router H·E (+ Qwen2-MoE shared-expert gate)
    routed_experts: Num = 0.0  # k active routed experts per token
    shared_experts: Num = 0.0  # always-on shared experts
    head: Num = 0.0  # vocabulary projection or scalar head (+ OPT embedding projections)

    @property
    def total(self) -> Num:
        return sum(getattr(self, f.name) for f in fields(self))

    def scaled(self, k: Num) -> FlopsBreakdown:
        """Every component multiplied by k."""
        return FlopsBreakdown(**{f.name: getattr(self, f.name) * k for f in fields(self)})

    def __add__(self, other: FlopsBreakdown) -> FlopsBreakdown:
        return FlopsBreakdown(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                                 for f in fields(self)})

    def as_dict(self) -> dict[str, Num]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainFlops:
    """Training FLOPs of one invocation: forward, backward (2× forward), recompute."""

    forward: FlopsBreakdown
    backward: FlopsBreakdown
    recompute: FlopsBreakdown

    @property
    def total(self) -> Num:
        return self.forward.total + self.backward.total + self.recompute.total

    def as_dict(self) -> dict[str, Num]:
        """Hierarchical keys, e.g. `"backward/attn_scores"`; the values sum to `total`."""
        return {f"{part}/{k}": v for part in ("forward", "backward", "recompute")
                for k, v in getattr(self, part).as_dict().items()}


@dataclass(frozen=True)
class TrafficBreakdown:
    """HBM bytes moved by one invocation, by component; `total` is their sum. Units: bytes."""

    weights: Num = 0.0
    kv_read: Num = 0.0
    kv_write: Num = 0.0

    @property
    def total(self) -> Num:
        return self.weights + self.kv_read + self.kv_write


# --- architecture helpers --------------------------------------------------------------------


def ffn_matrices(spec: ModelSpec) -> int:
    """Matmuls in one FFN: 3 if gated (gate, up, down), else 2 (up, down)."""
    return GATED_FFN_MATRICES if spec.gated_ffn else PLAIN_FFN_MATRICES


def moe_layer_count(spec: ModelSpec) -> int:
    """Layers whose FFN is a mixture of experts (0 for a dense model)."""
    return spec.moe.moe_layers.count() if spec.moe else 0


def _embed_dim(spec: ModelSpec) -> int:
    """Width of the embedding table and vocabulary head (OPT may project H → e)."""
    return spec.word_embed_proj_dim or spec.hidden_size


def _macs_attn_proj_per_layer(spec: ModelSpec) -> int:
    """Multiply–accumulates of one layer's attention projections for one token."""
    H, a, a_kv, hd = (spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads,
                      spec.head_dim)
    if spec.mla:
        r_q, r_kv = spec.mla.q_lora_rank, spec.mla.kv_lora_rank
        nope, rope, v = spec.mla.qk_nope_head_dim, spec.mla.qk_rope_head_dim, spec.mla.v_head_dim
        qk = nope + rope
        q = H * r_q + r_q * a * qk if r_q else H * a * qk
        kv = H * (r_kv + rope) + r_kv * a * (nope + v)
        return q + kv + a * v * H
    return H * a * hd + 2 * H * a_kv * hd + a * hd * H


def _macs_per_key_visit_per_layer(spec: ModelSpec, mla_absorbed: bool) -> int:
    """Multiply–accumulates of one layer for one (query, key) pair, all query heads."""
    a = spec.num_attention_heads
    if spec.mla:
        nope, rope, v = spec.mla.qk_nope_head_dim, spec.mla.qk_rope_head_dim, spec.mla.v_head_dim
        r_kv = spec.mla.kv_lora_rank
        if mla_absorbed:
            return a * (r_kv + rope) + a * r_kv
        return a * (nope + rope) + a * v
    return a * spec.head_dim + a * spec.head_dim


# --- per-token components (summed over layers) -------------------------------------------------


def flops_fwd_per_token_attn_proj(spec: ModelSpec) -> float:
    """Attention projections, forward FLOPs per token over all layers.

    GQA: `2L(H·a·hd + 2·H·a_kv·hd + a·hd·H)`; MHA with hd = H/a gives Table I's `2L·4d²`.
    MLA: `2L(H·r_q + r_q·a·(n+ρ) + H·(r_kv+ρ) + r_kv·a·(n+v) + a·v·H)` (r_q, r_kv the q/kv
    LoRA ranks, n/ρ/v the nope/rope/value head widths; no r_q: `H·a·(n+ρ)`). Units: FLOPs.
    """
    L = spec.num_hidden_layers
    return float(FLOPS_PER_MAC * L * _macs_attn_proj_per_layer(spec))


def flops_fwd_per_key_attn_scores(spec: ModelSpec, mla_absorbed: bool = False) -> float:
    """Attention scores + values, forward FLOPs per key visit over all layers.

    `2L·(a·d_qk + a·d_v)`: MHA/GQA `4L·a·hd` (= `4L·d` at hd = d/h); MLA expanded
    `2L·a·(n+ρ+v)`, absorbed `2L·a·(2r_kv+ρ)`. Units: FLOPs per (query, key) pair.
    """
    L = spec.num_hidden_layers
    return float(FLOPS_PER_MAC * L * _macs_per_key_visit_per_layer(spec, mla_absorbed))


def flops_fwd_per_token_dense_ffn(spec: ModelSpec) -> float:
    """Dense-layer FFNs, forward FLOPs per token: `2·L_dense·n_mat·H·F` (n_mat = 3 gated, 2 not).

    The canonical two-projection FFN gives Table I's `2L·2d·d_ff`. Units: FLOPs.
    """
    L_dense = spec.num_hidden_layers - moe_layer_count(spec)
    return float(FLOPS_PER_MAC * L_dense * ffn_matrices(spec) * spec.hidden_size
                 * spec.intermediate_size)


def flops_fwd_per_token_router(spec: ModelSpec) -> float:
    """MoE routers, forward FLOPs per token: `2·L_moe·H·E` (+ `2·L_moe·H` for a shared-expert
    gate, Qwen2-MoE). Units: FLOPs."""
    if not spec.moe:
        return 0.0
    H, E = spec.hidden_size, spec.moe.num_experts
    gate = H if spec.traits.shared_expert_gate else 0
    return float(FLOPS_PER_MAC * moe_layer_count(spec) * (H * E + gate))


def flops_fwd_per_token_routed_experts(spec: ModelSpec) -> float:
    """Active routed experts, forward FLOPs per token: `2·L_moe·k·n_mat·H·F_e`.

    Only the k = `experts_per_token` experts a token is routed to do work (the theory's
    `2·E_a·d·d_e`). Units: FLOPs.
    """
    if not spec.moe:
        return 0.0
    m = spec.moe
    return float(FLOPS_PER_MAC * moe_layer_count(spec) * m.experts_per_token * ffn_matrices(spec)
                 * spec.hidden_size * m.expert_intermediate_size)


def flops_fwd_per_token_shared_experts(spec: ModelSpec) -> float:
    """Shared experts, forward FLOPs per token: `2·L_moe·n_shared·n_mat·H·F_shared` (FLOPs)."""
    if not spec.moe:
        return 0.0
    m = spec.moe
    return float(FLOPS_PER_MAC * moe_layer_count(spec) * m.num_shared_experts * ffn_matrices(spec)
                 * spec.hidden_size * m.shared_expert_intermediate_size)


def flops_fwd_per_token_head(spec: ModelSpec, head: Head = Head.POLICY, m: Num = 1.0) -> Num:
    """Output head, forward FLOPs per token of a sequence of m tokens (Table I heads).

    Policy `2V·e` (e = H unless OPT's word_embed_proj_dim; tied or not, the same work);
    critic (scalar head on every token) `2H`; reward (scalar head on the last token only)
    `2H/m`; shared actor–critic `2V·e + 2H`. OPT's project_in/out add `2·2·H·e` per token.
    Units: FLOPs.
    """
    H, V, e = spec.hidden_size, spec.vocab_size, _embed_dim(spec)
    projection = FLOPS_PER_MAC * 2 * H * e if spec.word_embed_proj_dim else 0
    vocab = FLOPS_PER_MAC * V * e
    scalar = FLOPS_PER_MAC * H
    match head:
        case Head.POLICY:
            return float(vocab + projection)
        case Head.SCALAR_EVERY:
            return float(scalar + projection)
        case Head.SCALAR_LAST:
            return scalar / m + projection
        case Head.SHARED:
            return float(vocab + scalar + projection)
    raise ValueError(f"head must be a planner.theory.Head, got {head!r}")


def _forward(spec: ModelSpec, tokens: Num, key_visits: Num, head_flops: Num,
             mla_absorbed: bool = False) -> FlopsBreakdown:
    """Forward FLOPs of `tokens` tokens making `key_visits` key visits, plus a head total."""
    return FlopsBreakdown(
        attn_proj=tokens * flops_fwd_per_token_attn_proj(spec),
        attn_scores=key_visits * flops_fwd_per_key_attn_scores(spec, mla_absorbed),
        dense_ffn=tokens * flops_fwd_per_token_dense_ffn(spec),
        router=tokens * flops_fwd_per_token_router(spec),
        routed_experts=tokens * flops_fwd_per_token_routed_experts(spec),
        shared_experts=tokens * flops_fwd_per_token_shared_experts(spec),
        head=head_flops,
    )


# --- per invocation --------------------------------------------------------------------------


def flops_fwd_per_token(spec: ModelSpec, m: Num, head: Head = Head.POLICY) -> FlopsBreakdown:
    """Forward FLOPs per token of a teacher-forced causal pass over m tokens (Table I C_f^tok).

    Average context m/2 (`CAUSAL_KEY_VISIT_FRACTION`): on the canonical Transformer
    `2L[4d² + 2d·d_ff + m·d] + head`, head as in `flops_fwd_per_token_head`. Units: FLOPs.
    """
    return _forward(spec, 1.0, CAUSAL_KEY_VISIT_FRACTION * m,
                    flops_fwd_per_token_head(spec, head, m))


def flops_fwd_seq(spec: ModelSpec, m: Num, head: Head = Head.POLICY) -> FlopsBreakdown:
    """Teacher-forced forward over a sequence of m tokens: `m·C_f^tok`, FLOPs per sequence.

    The assessment pass (reference / reward / critic / actor log-probs) and the forward half of
    training. Key visits m²/2; the head on every token (policy, critic) or the last (reward).
    """
    return flops_fwd_per_token(spec, m, head).scaled(m)


def flops_prefill(spec: ModelSpec, S: Num) -> FlopsBreakdown:
    """Prefill of an S-token prompt, FLOPs per rollout (Table I C_prefill).

    S tokens, S²/2 key visits, the vocabulary head on the last prompt position only:
    canonical `2L·S·(4d² + 2d·d_ff + S·d) + 2V·d`. MLA in expanded form.
    """
    return _forward(spec, S, CAUSAL_KEY_VISIT_FRACTION * S * S,
                    flops_fwd_per_token_head(spec, Head.POLICY))


def flops_decode_step(spec: ModelSpec, context: Num, mla_absorbed: bool = True) -> FlopsBreakdown:
    """One decode step of one sequence at context c (keys attended, the new token included).

    One token, c key visits, the vocabulary head: canonical `2L(4d² + 2d·d_ff + 2c·d) + 2V·d`
    (Table I's summand at c = S + t). FLOPs per sequence per step.
    """
    return _forward(spec, 1.0, context, flops_fwd_per_token_head(spec, Head.POLICY),
                    mla_absorbed)


def flops_decode_sum(spec: ModelSpec, S: Num, T: Num, mla_absorbed: bool = True) -> FlopsBreakdown:
    """All decode steps of a T-token response after an S-token prompt, closed form (C_decode).

    `Σ_{t=1}^{T-1} step(S + t)`: T − 1 tokens, `(T−1)S + (T−1)T/2` key visits, T − 1 heads;
    canonical `2(T−1)L(4d² + 2d·d_ff) + 4L·d((T−1)S + (T−1)T/2) + 2(T−1)V·d`. The first
    response token comes from the prefill. FLOPs per rollout.
    """
    steps = T - 1
    key_visits = steps * S + steps * T / 2
    return _forward(spec, steps, key_visits,
                    steps * flops_fwd_per_token_head(spec, Head.POLICY), mla_absorbed)


def flops_generation(spec: ModelSpec, S: Num, T: Num, mla_absorbed: bool = True) -> FlopsBreakdown:
    """One rollout: prefill + decode sum (Table I C_gen^roll), FLOPs per rollout."""
    return flops_prefill(spec, S) + flops_decode_sum(spec, S, T, mla_absorbed)


def flops_train_seq(spec: ModelSpec, m: Num, head: Head = Head.POLICY,
                    checkpointing: Checkpointing = "none") -> TrainFlops:
    """Training forward + backward over one m-token sequence, with recomputation. FLOPs.

    backward = 2 × forward (Table I, C_tr = 3·C_f without recomputation). Recompute:
    "selective" adds the attention scores/values forward ([Korthikanti] §5), "full" adds the
    transformer layers' forward (everything but the head).
    """
    fwd = flops_fwd_seq(spec, m, head)
    match checkpointing:
        case "none":
            recompute = FlopsBreakdown()
        case "selective":
            recompute = FlopsBreakdown(attn_scores=fwd.attn_scores)
        case "full":
            recompute = FlopsBreakdown(**{**fwd.as_dict(), "head": 0.0})
        case _:
            raise ValueError(f"checkpointing must be none, selective or full, got "
                             f"{checkpointing!r}")
    return TrainFlops(forward=fwd, backward=fwd.scaled(BACKWARD_FLOPS_PER_FORWARD),
                      recompute=recompute)


def flops_train_per_token(spec: ModelSpec, m: Num, head: Head = Head.POLICY,
                          checkpointing: Checkpointing = "none") -> Num:
    """Training FLOPs per token of an m-token sequence (Table I C_tr^tok without recompute)."""
    return flops_train_seq(spec, m, head, checkpointing).total / m


def flops_optimizer_step(n_params: Num) -> Num:
    """Adam(W) step: `ADAM_FLOPS_PER_PARAM · n_params` FLOPs (element-wise, memory-bound)."""
    return ADAM_FLOPS_PER_PARAM * n_params


# --- bytes -----------------------------------------------------------------------------------


def params_with_head(spec: ModelSpec, head: Head = Head.POLICY) -> int:
    """Parameters of the model as a role uses it, elements (Table I |π|, |R|, |V_ψ|, |π_SH|).

    Policy / reference: every parameter of the spec. Reward / critic: the vocabulary head
    replaced by a scalar head of H (an untied lm_head is dropped; a tied one is the input
    embedding and stays). Shared actor–critic: both heads, total + H.
    """
    counts = count_params(spec)
    H = spec.hidden_size
    match head:
        case Head.POLICY:
            return counts.total
        case Head.SCALAR_LAST | Head.SCALAR_EVERY:
            return counts.total - counts.lm_head + H
        case Head.SHARED:
            return counts.total + H
    raise ValueError(f"head must be a planner.theory.Head, got {head!r}")


def experts_touched(num_experts: int, experts_per_token: int, tokens: Num) -> Num:
    """Expected distinct experts of one MoE layer that `tokens` tokens are routed to.

    `E·(1 − (1 − k/E)^b)` for b tokens each picking k of E experts, assuming uniform and
    independent routing (each expert is missed by one token with probability 1 − k/E). b = 1
    gives k; b → ∞ gives E. Real routers are skewed, so this is an upper bound on the typical
    count for a given b. Units: experts.
    """
    E, k = num_experts, experts_per_token
    return E * (1 - (1 - k / E) ** tokens)


@lru_cache(maxsize=256)
def remote_domains_per_token(num_experts: int, experts_per_token: int, domains: int,
                             groups: int = 1, groups_per_token: int = 1) -> float:
    """Expected distinct domains other than its own that one token's k experts sit in, the E
    experts spread evenly over `domains` domains in index order (expert parallelism across
    nodes).

    Uniform routing, k of E without replacement: a given domain holds E/D experts and is
    missed with probability C(E − E/D, k)/C(E, k), so the count is (D − 1)·(1 − that). A
    hierarchical dispatch (DeepEP, HybridEP; DeepSeek-V3 report §3.2.2) sends the token over
    the network once per such domain instead of once per remote expert. Group-limited routing
    (`groups` G in index order, the token's k experts drawn from its `groups_per_token` m
    best, DeepSeek's n_group / topk_group) touches fewer domains: for each set S of m groups
    (all equally likely) domain d is missed with probability C(P − n_d(S), k)/C(P, k), P the
    m·E/G experts of S and n_d(S) those of them in d; the token's own domain is any of the D
    alike, so the remote count is (D − 1)/D × the expected domains touched. Units: domains.
    """
    E, k, D = num_experts, experts_per_token, domains
    if D <= 1:
        return 0.0
    if groups <= 1 or groups_per_token >= groups:
        missed = math.comb(E - E // D, k) / math.comb(E, k)
        return (D - 1) * (1 - missed)
    G, m = groups, groups_per_token
    group, domain, pool = E // G, E // D, m * E // G
    touched = 0.0
    for d in range(D):  # experts of group g inside domain d: the overlap of two index ranges
        inside = [n for g in range(G) if (n := max(0, min((d + 1) * domain, (g + 1) * group)
                                                    - max(d * domain, g * group)))]
        # sets of j overlapping groups by the experts they hold in d; the other m − j groups
        # of S come from the G − len(inside) that miss d
        sets: dict[tuple[int, int], int] = {(0, 0): 1}
        for n in inside:
            for (j, t), c in list(sets.items()):
                if j < m:
                    sets[j + 1, t + n] = sets.get((j + 1, t + n), 0) + c
        missed = sum(c * math.comb(G - len(inside), m - j) * math.comb(pool - t, k)
                     for (j, t), c in sets.items())
        touched += 1 - missed / (math.comb(G, m) * math.comb(pool, k))
    return (D - 1) / D * touched


def bytes_weights_read_fwd(spec: ModelSpec, tokens: Num, head: Head = Head.POLICY,
                           weight_bytes: float = BYTES_BF16) -> Num:
    """Weight bytes read by one forward over `tokens` tokens (a decode step of batch b: b).

    Every non-expert weight once (attention, dense FFN, shared experts, routers, norms, OPT
    projections); the routed experts of each MoE layer only as touched (`experts_touched`);
    the vocabulary head V·e once (tied or not) and embedding rows `tokens·e` unless the head
    already reads the tied table; learned position rows `tokens·H`; a scalar head H.
    Units: bytes.
    """
    counts = count_params(spec)
    H, V, e = spec.hidden_size, spec.vocab_size, _embed_dim(spec)
    resident = (counts.attention + counts.dense_ffn + counts.shared_experts + counts.router
                + counts.norms + (counts.embedding - V * e))  # last: OPT project_in/out
    routed = bytes_routed_experts_read(spec, tokens, 1.0)
    vocab_head = head in (Head.POLICY, Head.SHARED)
    head_params = (V * e if vocab_head else 0) + (H if head != Head.POLICY else 0)
    lookup = 0 if (vocab_head and spec.tie_word_embeddings) else tokens * e
    positions = tokens * H if counts.position_embedding else 0
    return weight_bytes * (resident + routed + head_params + lookup + positions)


def bytes_routed_experts_read(spec: ModelSpec, tokens: Num,
                              weight_bytes: float = BYTES_BF16) -> Num:
    """Routed-expert weight bytes one forward over `tokens` tokens reads: the experts each MoE
    layer's tokens touch (`experts_touched`). 0 for a dense model. Units: bytes."""
    if not spec.moe:
        return 0.0
    counts, n_moe, m = count_params(spec), moe_layer_count(spec), spec.moe
    per_expert = counts.routed_experts / (n_moe * m.num_experts)
    return weight_bytes * n_moe * experts_touched(m.num_experts, m.experts_per_token,
                                                  tokens) * per_expert


def bytes_kv_cache_per_token(spec: ModelSpec, kv_bytes: float = BYTES_BF16) -> float:
    """KV-cache bytes per token over all layers.

    GQA/MHA `2·a_kv·hd·L·bytes`; MLA `(kv_lora_rank + qk_rope_head_dim)·L·bytes` (the latent
    and the shared RoPE key). The canonical MHA gives Table I's `M_KV/m = 2L·d` elements.
    """
    return float(spec.kv_cache_elements_per_token * kv_bytes)


def bytes_kv_read_decode_step(spec: ModelSpec, context: Num, batch: Num = 1,
                              kv_bytes: float = BYTES_BF16) -> Num:
    """KV bytes read by one decode step: `b·c·bytes_kv_cache_per_token` (c keys per sequence)."""
    return batch * context * bytes_kv_cache_per_token(spec, kv_bytes)


def bytes_decode_step(spec: ModelSpec, batch: Num, context: Num,
                      weight_bytes: float = BYTES_BF16,
                      kv_bytes: float = BYTES_BF16) -> TrafficBreakdown:
    """HBM traffic of one decode step of `batch` sequences at context c. Units: bytes.

    Weights read once for the batch (`bytes_weights_read_fwd` with b tokens), the live KV
    cache read (`b·c` tokens), the new tokens' KV written (`b` tokens).
    """
    per_token = bytes_kv_cache_per_token(spec, kv_bytes)
    return TrafficBreakdown(
        weights=bytes_weights_read_fwd(spec, batch, Head.POLICY, weight_bytes),
        kv_read=batch * context * per_token,
        kv_write=batch * per_token,
    )


def bytes_decode_sum(spec: ModelSpec, S: Num, T: Num, batch: Num = 1,
                     weight_bytes: float = BYTES_BF16,
                     kv_bytes: float = BYTES_BF16) -> TrafficBreakdown:
    """HBM traffic of the T − 1 decode steps of `batch` rollouts decoding in lock-step.

    Step t at context S + t (as `flops_decode_sum`): weights `(T−1)·bytes_weights_read_fwd(b)`,
    KV read `b·((T−1)S + (T−1)T/2)` tokens, KV written `b·(T−1)` tokens. Units: bytes.
    """
    steps = T - 1
    per_token = bytes_kv_cache_per_token(spec, kv_bytes)
    return TrafficBreakdown(
        weights=steps * bytes_weights_read_fwd(spec, batch, Head.POLICY, weight_bytes),
        kv_read=batch * (steps * S + steps * T / 2) * per_token,
        kv_write=batch * steps * per_token,
    )


def bytes_optimizer_step(n_params: Num, weight_bytes: float = BYTES_BF16,
                         grad_bytes: float = BYTES_BF16,
                         state_bytes: float = ADAM_STATE_BYTES_PER_PARAM) -> Num:
    """HBM traffic of an Adam step over `n_params` parameters. Units: bytes.

    Reads the optimizer state (fp32 master, m, v: `state_bytes`) and the gradient, writes the
    state back and the low-precision weight copy: `n·(2·state + grad + weight)`.
    """
    return n_params * (2 * state_bytes + grad_bytes + weight_bytes)

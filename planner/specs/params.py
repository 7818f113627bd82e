"""Exact parameter counts of a ModelSpec, by component.

The formula is the one in ../shared/data/models.md ("Parameter-count formula"), which reproduces
the official counts of the catalog's models; it is generalised here with LayerNorm biases,
learned position tables and all-biased projections so GPT-2/OPT-style models count exactly too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.specs.model import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Parameters per component, summed over layers. `active` counts k routed experts of E."""

    embedding: int
    position_embedding: int
    lm_head: int
    attention: int
    dense_ffn: int
    routed_experts: int
    routed_experts_active: int
    shared_experts: int
    router: int
    norms: int

    @property
    def total(self) -> int:
        return (self.embedding + self.position_embedding + self.lm_head + self.attention
                + self.dense_ffn + self.routed_experts + self.shared_experts + self.router
                + self.norms)

    @property
    def active(self) -> int:
        return self.total - self.routed_experts + self.routed_experts_active

    @property
    def non_embedding(self) -> int:
        """Total less the input embedding and an untied output head (the Qwen cards' figure)."""
        return self.total - self.embedding - self.lm_head


def attention_params_per_layer(spec: ModelSpec) -> int:
    """q, k, v, o projections with their biases, QK-norm and attention sinks of one layer."""
    H, nh, nkv, hd = (spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads,
                      spec.head_dim)
    if spec.mla:
        m = spec.mla
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (H * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nh * qk_dim  # + q_a_layernorm
             if m.q_lora_rank else H * nh * qk_dim)
        kv = (H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # + kv_a_layernorm
              + m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim))
        return q + kv + nh * m.v_head_dim * H
    n = H * nh * hd + 2 * H * nkv * hd + nh * hd * H
    if spec.qkv_bias:
        n += nh * hd + 2 * nkv * hd
    if spec.o_bias:
        n += H
    if spec.traits.qk_norm == "head":
        n += 2 * hd
    elif spec.traits.qk_norm == "full":
        n += nh * hd + nkv * hd
    if spec.traits.attention_sinks:
        n += nh
    return n


def ffn_params(spec: ModelSpec, width: int, bias: bool) -> int:
    """One FFN of inner width `width`: 3 projections if gated, else 2; biases if `bias`."""
    H = spec.hidden_size
    if spec.gated_ffn:
        return 3 * H * width + ((2 * width + H) if bias else 0)
    return 2 * H * width + ((width + H) if bias else 0)


def norm_params(spec: ModelSpec, dim: int) -> int:
    return dim * (2 if spec.traits.norm == "layernorm" else 1)


@lru_cache(maxsize=256)  # specs are frozen (hashable); the search asks thousands of times
def count_params(spec: ModelSpec) -> ParamCounts:
    """Every parameter of the model, by component."""
    H, L, V = spec.hidden_size, spec.num_hidden_layers, spec.vocab_size
    emb_dim = spec.word_embed_proj_dim or H
    moe = spec.moe
    moe_layers = moe.moe_layers.count() if moe else 0
    routed = expert = shared = router = 0
    if moe:
        expert = ffn_params(spec, moe.expert_intermediate_size, spec.traits.expert_bias)
        routed = moe_layers * moe.num_experts * expert
        shared = moe_layers * moe.num_shared_experts * ffn_params(
            spec, moe.shared_expert_intermediate_size, False)
        per_layer_router = H * moe.num_experts + (moe.num_experts if spec.traits.router_bias
                                                  else 0)
        per_layer_router += moe.num_experts if moe.score_correction_bias else 0
        per_layer_router += H if spec.traits.shared_expert_gate else 0
        router = moe_layers * per_layer_router
    positions = 0
    if spec.traits.learned_positions and spec.max_position_embeddings:
        positions = (spec.max_position_embeddings + spec.traits.position_offset) * H
    projection = 2 * H * emb_dim if spec.word_embed_proj_dim else 0  # OPT project_in/out
    norms = L * spec.traits.norms_per_layer * norm_params(spec, H)
    norms += norm_params(spec, H) if spec.traits.final_norm else 0
    return ParamCounts(
        embedding=V * emb_dim + projection,
        position_embedding=positions,
        lm_head=0 if spec.tie_word_embeddings else V * emb_dim,
        attention=L * attention_params_per_layer(spec),
        dense_ffn=(L - moe_layers) * ffn_params(spec, spec.intermediate_size, spec.mlp_bias),
        routed_experts=routed,
        routed_experts_active=moe_layers * moe.experts_per_token * expert if moe else 0,
        shared_experts=shared,
        router=router,
        norms=norms,
    )

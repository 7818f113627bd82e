"""planner.cost.flops: reduction to FORMULAS.md §1 on the canonical Transformer, and hand-checked
architecture cases (GQA, gated FFN, MoE, MLA, tied embeddings)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.cost import flops as F
from planner.cost.constants import ADAM_FLOPS_PER_PARAM
from planner.specs.model import attention_params_per_layer, count_params, spec_from_hf_config
from planner.theory import blocks
from planner.theory.shape import Head, TheoryModel

REL = 1e-12

# The paper's canonical Transformer: MHA (kv heads = heads, head_dim = d/h), two-projection FFN,
# untied vocabulary head, no biases (Llama traits), and no norm parameters so |π| is exact too.
L, d, d_ff, h, V = 6, 1024, 2816, 16, 32000


def spec(config: dict, name: str = "test"):
    return spec_from_hf_config(config, name, "test")


CANON_CONFIG = {"model_type": "llama", "hidden_size": d, "num_hidden_layers": L,
                "num_attention_heads": h, "intermediate_size": d_ff, "vocab_size": V,
                "tie_word_embeddings": False,
                "rlplan": {"gated_ffn": False, "norms_per_layer": 0, "final_norm": False}}
CANON = spec(CANON_CONFIG)


def close(a, b, rel=REL):
    return math.isclose(float(a), float(b), rel_tol=rel)


# --- FORMULAS.md §1, written literally -----------------------------------------------------------

def cf_policy(m):  # C_f^tok(π) = 2L[4d² + 2d·d_ff + m·d] + 2V·d
    return 2 * L * (4 * d**2 + 2 * d * d_ff + m * d) + 2 * V * d


def cf_reward(m):  # C_f^tok(R) = 2L[4d² + 2d·d_ff + m·d] + 2d/m
    return 2 * L * (4 * d**2 + 2 * d * d_ff + m * d) + 2 * d / m


def cf_critic(m):  # C_f^tok(V_ψ) = 2L[4d² + 2d·d_ff + m·d] + 2d
    return 2 * L * (4 * d**2 + 2 * d * d_ff + m * d) + 2 * d


def c_prefill(S):  # 2L·S·(4d² + 2d·d_ff + S·d) + 2V·d
    return 2 * L * S * (4 * d**2 + 2 * d * d_ff + S * d) + 2 * V * d


def c_decode(S, T):  # closed form of Σ_{t=1}^{T-1} [2L(4d² + 2d·d_ff + 2(S+t)·d) + 2V·d]
    return (2 * (T - 1) * L * (4 * d**2 + 2 * d * d_ff)
            + 4 * L * d * ((T - 1) * S + (T - 1) * T / 2) + 2 * (T - 1) * V * d)


@pytest.mark.parametrize("m", [1, 7, 512, 4096 + 1024])
def test_canonical_per_token_forward_is_table_I(m):
    assert close(F.flops_fwd_per_token(CANON, m, Head.POLICY).total, cf_policy(m))
    assert close(F.flops_fwd_per_token(CANON, m, Head.SCALAR_LAST).total, cf_reward(m))
    assert close(F.flops_fwd_per_token(CANON, m, Head.SCALAR_EVERY).total, cf_critic(m))
    assert close(F.flops_fwd_per_token(CANON, m, Head.SHARED).total, cf_policy(m) + 2 * d)


@pytest.mark.parametrize("S,T", [(1, 1), (128, 2), (1024, 4096), (333, 77)])
def test_canonical_generation_is_table_I(S, T):
    assert close(F.flops_prefill(CANON, S).total, c_prefill(S))
    assert close(F.flops_decode_sum(CANON, S, T).total, c_decode(S, T))
    explicit = math.fsum(2 * L * (4 * d**2 + 2 * d * d_ff + 2 * (S + t) * d) + 2 * V * d
                         for t in range(1, T))
    assert close(F.flops_decode_sum(CANON, S, T).total, explicit) or T == 1
    assert close(F.flops_generation(CANON, S, T).total, c_prefill(S) + c_decode(S, T))


@pytest.mark.parametrize("head,cf", [(Head.POLICY, cf_policy), (Head.SCALAR_LAST, cf_reward),
                                     (Head.SCALAR_EVERY, cf_critic)])
def test_canonical_training_is_three_forwards(head, cf):
    m = 1536
    assert close(F.flops_train_per_token(CANON, m, head), 3 * cf(m))  # C_tr^tok = 3·C_f^tok
    assert close(F.flops_fwd_seq(CANON, m, head).total, m * cf(m))


def test_canonical_params_and_kv_are_table_I():
    policy = L * (4 * d**2 + 2 * d * d_ff) + V * d  # |π|
    # Table I counts one V·d table: a tied model is |π| exactly; an untied one also has its
    # input embedding (no work, but memory). A scalar head replaces the untied vocabulary head.
    tied = spec({**CANON_CONFIG, "tie_word_embeddings": True})
    assert F.params_with_head(tied, Head.POLICY) == policy
    assert F.params_with_head(tied, Head.SHARED) == policy + d  # |π_SH| = |π| + d
    assert F.params_with_head(CANON, Head.POLICY) == policy + V * d
    assert F.params_with_head(CANON, Head.SCALAR_LAST) == policy + d  # |R| = |V_ψ|
    assert F.params_with_head(CANON, Head.SCALAR_EVERY) == policy + d
    m = 4000
    assert F.bytes_kv_cache_per_token(CANON, kv_bytes=1) * m == 2 * m * L * d  # M_KV elements


def test_canonical_agrees_with_theory_module():
    M = TheoryModel(L=L, d=d, d_ff=d_ff, h=h, V=V)
    assert close(F.flops_fwd_per_token(CANON, 900, Head.SCALAR_LAST).total,
                 blocks.c_f_tok(M, Head.SCALAR_LAST, 900))
    assert close(F.flops_generation(CANON, 300, 200).total, blocks.c_gen(M, 300, 200))


def test_decode_step_is_the_summand_and_arrays_work():
    S, t = 100, 5
    assert close(F.flops_decode_step(CANON, S + t).total,
                 2 * L * (4 * d**2 + 2 * d * d_ff + 2 * (S + t) * d) + 2 * V * d)
    S_arr, T_arr = np.array([64, 512, 1000]), np.array([10, 300, 7])
    vec = F.flops_decode_sum(CANON, S_arr, T_arr).total
    assert np.allclose(vec, [c_decode(s, t) for s, t in zip(S_arr, T_arr, strict=True)],
                       rtol=REL)
    m = np.array([16.0, 2048.0])
    assert np.allclose(F.flops_fwd_per_token(CANON, m, Head.SCALAR_LAST).total,
                       [cf_reward(x) for x in m], rtol=REL)


# --- architectures, by hand ----------------------------------------------------------------------

GQA = spec({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16,
            "intermediate_size": 96, "vocab_size": 100})


def test_gqa_with_explicit_head_dim():
    # per layer: q 64·(8·16) + k,v 2·64·(2·16) + o (8·16)·64 = 8192 + 4096 + 8192 = 20480 MACs
    assert F.flops_fwd_per_token_attn_proj(GQA) == 2 * 2 * 20480
    # a key visit: score over 8 heads × 16 + values 8 × 16 = 256 MACs per layer
    assert F.flops_fwd_per_key_attn_scores(GQA) == 2 * 2 * 256
    # gated FFN: 3 matmuls of 64 × 96
    assert F.flops_fwd_per_token_dense_ffn(GQA) == 2 * 2 * 3 * 64 * 96
    assert F.flops_fwd_per_token_head(GQA) == 2 * 100 * 64
    # KV cache: 2 (K, V) · 2 kv heads · 16 · 2 layers · 2 bytes
    assert F.bytes_kv_cache_per_token(GQA) == 2 * 2 * 16 * 2 * 2
    assert F.bytes_kv_read_decode_step(GQA, context=300, batch=4) == 4 * 300 * 256
    # no biases: matmul FLOPs per token = 2 × non-embedding parameters (the 2N rule)
    c = count_params(GQA)
    fwd = F.flops_fwd_per_token(GQA, 1)
    assert fwd.total - fwd.attn_scores == 2 * (c.total - c.embedding - c.norms)


def test_gated_ffn_costs_three_halves_of_two_projection():
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 200, "vocab_size": 50}
    gated = spec(cfg)
    plain = spec({**cfg, "rlplan": {"gated_ffn": False}})
    assert F.flops_fwd_per_token_dense_ffn(gated) == 2 * 2 * 3 * 64 * 200
    assert F.flops_fwd_per_token_dense_ffn(plain) == 2 * 2 * 2 * 64 * 200


MOE = spec({"model_type": "custom_moe", "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
            "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "n_shared_experts": 1, "first_k_dense_replace": 1})


def test_moe_active_vs_total():
    assert [i for i in range(4) if i in MOE.moe.moe_layers] == [1, 2, 3]  # one dense first layer
    assert F.flops_fwd_per_token_dense_ffn(MOE) == 2 * 1 * 3 * 64 * 128
    assert F.flops_fwd_per_token_router(MOE) == 2 * 3 * 64 * 8
    assert F.flops_fwd_per_token_routed_experts(MOE) == 2 * 3 * 2 * 3 * 64 * 32  # k = 2 of 8
    assert F.flops_fwd_per_token_shared_experts(MOE) == 2 * 3 * 1 * 3 * 64 * 32
    c = count_params(MOE)
    assert c.routed_experts == 4 * c.routed_experts_active  # E / k
    fwd = F.flops_fwd_per_token(MOE, 1)
    # work follows the active parameters, not the total
    assert fwd.total - fwd.attn_scores == 2 * (c.active - c.embedding - c.norms)


def test_moe_experts_touched_and_weight_bytes():
    assert F.experts_touched(8, 2, 1) == pytest.approx(2)
    assert F.experts_touched(8, 2, 4) == pytest.approx(8 * (1 - 0.75**4))
    assert F.experts_touched(8, 2, 10_000) == pytest.approx(8)
    c = count_params(MOE)
    per_expert = c.routed_experts / (3 * 8)
    one = F.bytes_weights_read_fwd(MOE, 1)
    many = F.bytes_weights_read_fwd(MOE, 10_000)
    # one token reads k experts per MoE layer, a big batch reads all E; the rest is the same
    # (apart from the embedding rows: `tokens·H`)
    assert many - one == pytest.approx(2 * (3 * (8 - 2) * per_expert + (10_000 - 1) * 64))
    # one token, untied: every weight except the embedding table, plus one embedding row
    assert one == pytest.approx(2 * (c.active - c.embedding + 64))


MLA = spec({"model_type": "deepseek_v3", "hidden_size": 128, "num_hidden_layers": 3,
            "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100,
            "q_lora_rank": 48, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16, "v_head_dim": 32})


def test_mla_projections_scores_and_kv_bytes():
    # per layer: q 128·48 + 48·4·48, kv 128·(64+16) + 64·4·(32+32), o 4·32·128
    macs = 128 * 48 + 48 * 4 * 48 + 128 * 80 + 64 * 4 * 64 + 4 * 32 * 128
    assert F.flops_fwd_per_token_attn_proj(MLA) == 2 * 3 * macs
    # = 2 × the attention parameters less the two latent RMSNorm weights (48 + 64)
    assert macs == attention_params_per_layer(MLA) - 48 - 64
    assert F.flops_fwd_per_key_attn_scores(MLA) == 2 * 3 * 4 * (32 + 16 + 32)
    assert F.flops_fwd_per_key_attn_scores(MLA, mla_absorbed=True) == 2 * 3 * 4 * (64 + 16 + 64)
    # KV cache holds the latent and the RoPE key: (64 + 16) · 3 layers · 2 bytes
    assert F.bytes_kv_cache_per_token(MLA) == (64 + 16) * 3 * 2
    # decode defaults to the absorbed form, prefill to the expanded one
    step = F.flops_decode_step(MLA, 10)
    assert step.attn_scores == 10 * F.flops_fwd_per_key_attn_scores(MLA, mla_absorbed=True)
    assert F.flops_prefill(MLA, 10).attn_scores == 50 * F.flops_fwd_per_key_attn_scores(MLA)


def test_tied_embeddings_change_params_and_bytes_not_flops():
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 1000}
    tied, untied = spec({**cfg, "tie_word_embeddings": True}), spec(cfg)
    assert F.flops_fwd_per_token(tied, 50).total == F.flops_fwd_per_token(untied, 50).total
    assert F.params_with_head(untied) - F.params_with_head(tied) == 1000 * 64
    # tied: the head reads the table that also serves the lookups; untied: table + head + rows
    delta = F.bytes_weights_read_fwd(untied, 3) - F.bytes_weights_read_fwd(tied, 3)
    assert delta == 2 * 3 * 64
    # a reward model keeps the tied table as its input embedding, adds a scalar head of H
    assert F.params_with_head(tied, Head.SCALAR_LAST) == count_params(tied).total + 64


def test_training_recompute_and_breakdown_sums():
    m = 777
    fwd = F.flops_fwd_seq(GQA, m)
    none = F.flops_train_seq(GQA, m)
    sel = F.flops_train_seq(GQA, m, checkpointing="selective")
    full = F.flops_train_seq(GQA, m, checkpointing="full")
    assert none.total == pytest.approx(3 * fwd.total)
    assert sel.total - none.total == pytest.approx(fwd.attn_scores)
    assert full.total - none.total == pytest.approx(fwd.total - fwd.head)
    for t in (none, sel, full):
        assert sum(t.as_dict().values()) == pytest.approx(t.total)
    assert sum(fwd.as_dict().values()) == pytest.approx(fwd.total)
    with pytest.raises(ValueError, match="checkpointing"):
        F.flops_train_seq(GQA, m, checkpointing="sometimes")


def test_decode_sum_is_the_sum_of_steps_for_moe_and_mla():
    S, T = 40, 9
    for s_ in (MOE, MLA):
        steps = math.fsum(F.flops_decode_step(s_, S + t).total for t in range(1, T))
        assert close(F.flops_decode_sum(s_, S, T).total, steps)
        traffic = F.bytes_decode_sum(s_, S, T, batch=3)
        kv = math.fsum(F.bytes_decode_step(s_, 3, S + t).kv_read for t in range(1, T))
        assert close(traffic.kv_read, kv)
        assert close(traffic.weights, (T - 1) * F.bytes_weights_read_fwd(s_, 3))


def test_reward_head_runs_once_per_sequence():
    assert F.flops_fwd_seq(GQA, 500, Head.SCALAR_LAST).head == pytest.approx(2 * 64)
    assert F.flops_fwd_seq(GQA, 500, Head.SCALAR_EVERY).head == pytest.approx(500 * 2 * 64)


def test_optimizer_step():
    assert F.flops_optimizer_step(1e9) == ADAM_FLOPS_PER_PARAM * 1e9
    # read and write fp32 master + m + v (12 B), read the bf16 grad, write the bf16 weight
    assert F.bytes_optimizer_step(10) == 10 * (2 * 12 + 2 + 2)

"""Paper-canonical check (FORMULAS.md conventions): a model spec with multi-head attention
(num_key_value_heads == num_attention_heads) and a non-gated two-projection FFN, read through
`TheoryModel.from_spec`, reproduces FORMULAS.md to relative error < 1e-9.

The expected numbers come from `theory_literal` (a line-by-line transcription of the sheet
that never imports the package) and, for generation, from the closed forms written here
(C_decode's closed form; D_gen with Σ log(S+t) = log Γ(S+T) − log Γ(S+1)).
"""

import math
from types import SimpleNamespace

import pytest
from theory_literal import (
    MKV,
    Cdecode,
    Cf_pi,
    Cf_R,
    Cf_V,
    Cprefill,
    Df,
    Df_tp,
    Dgen,
    Dgen_tp,
    P_pi,
    P_scalar,
    dpo_table_ix,
    intra_rows,
    ppo_table_ix,
    ppo_terms,
)

from planner.theory import analyze_intra, analyze_pipeline
from planner.theory.shape import TheoryModel

REL = 1e-9


def _mha_spec(L, d, d_ff, h, V):
    """An OPT-style config: MHA, GELU two-projection FFN, untied details the theory ignores."""
    return SimpleNamespace(
        num_hidden_layers=L,
        hidden_size=d,
        intermediate_size=d_ff,
        num_attention_heads=h,
        num_key_value_heads=h,
        hidden_act="gelu",
        vocab_size=V,
        moe=None,
    )


ACTOR = TheoryModel.from_spec(_mha_spec(32, 4096, 16384, 32, 50272))  # OPT-6.7B shape
REWARD = TheoryModel.from_spec(_mha_spec(24, 2048, 8192, 32, 50272))  # OPT-1.3B shape
B, K, S, T, P_T = 64, 8, 512, 1024, 8
m = S + T


def _rel(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-300)


def test_spec_reads_the_canonical_symbols():
    assert (ACTOR.L, ACTOR.d, ACTOR.d_ff, ACTOR.h, ACTOR.V) == (32, 4096, 16384, 32, 50272)
    assert (ACTOR.E, ACTOR.E_a, ACTOR.d_e) == (1, 1, 16384)


def test_closed_forms_agree_with_the_literal_sums():
    L, d, d_ff, V = ACTOR.L, ACTOR.d, ACTOR.d_ff, ACTOR.V
    closed = (
        2 * (T - 1) * L * (4 * d**2 + 2 * d * d_ff)
        + 4 * L * d * ((T - 1) * S + (T - 1) * T / 2)
        + 2 * (T - 1) * V * d
    )
    assert _rel(closed, Cdecode(ACTOR, S, T))
    log_sum = (math.lgamma(S + T) - math.lgamma(S)) / math.log(2)  # Σ_{n=S}^{S+T-1} log n
    per_pass = L * (4 * math.log2(d) + math.log2(d_ff) - math.log2(ACTOR.h)) + math.log2(d)
    assert _rel(T * per_pass + L * log_sum, Dgen(ACTOR, S, T))


def test_ppo_pipeline_reproduces_the_sheet():
    roles = {"actor": ACTOR, "reference": ACTOR, "reward": REWARD, "critic": REWARD}
    theory = analyze_pipeline("ppo", roles, B, K, S, T, gpus_per_node=P_T)["theory"]

    actor = theory["building_blocks"]["actor"]
    expected_actor = {
        "params": P_pi(ACTOR),
        "cf_tok": Cf_pi(ACTOR, m),
        "c_prefill": Cprefill(ACTOR, S),
        "c_decode": Cdecode(ACTOR, S, T),
        "c_gen": Cprefill(ACTOR, S) + Cdecode(ACTOR, S, T),
        "m_kv": MKV(ACTOR, m),
        "d_f": Df(ACTOR, m),
        "d_f_tp": Df_tp(ACTOR, m, P_T),
        "d_gen": Dgen(ACTOR, S, T),
        "d_gen_tp": Dgen_tp(ACTOR, S, T, P_T),
    }
    for key, value in expected_actor.items():
        assert _rel(actor[key], value), key
    reward = theory["building_blocks"]["reward"]
    assert _rel(reward["params"], P_scalar(REWARD))
    assert _rel(reward["cf_tok"], Cf_R(REWARD, m))
    assert _rel(theory["building_blocks"]["critic"]["cf_tok"], Cf_V(REWARD, m))

    terms = ppo_terms(ACTOR, ACTOR, REWARD, REWARD, B, K, S, T, 1, P_T)
    st = theory["stages"]
    for stage, (w, d, mem) in {
        "generation": ("W_G", "D_G", "M_G"),
        "assessment": ("W_A", "D_A_sum", "M_A_sum"),
        "training": ("W_T", "D_T_sum", "M_T_sum"),
    }.items():
        assert _rel(st[stage]["work"], terms[w]), stage
        assert _rel(st[stage]["depth"], terms[d]), stage
        assert _rel(st[stage]["memory"], terms[mem]), stage

    rows = ppo_table_ix(ACTOR, ACTOR, REWARD, REWARD, B, K, S, T, 1, P_T)
    assert list(theory["inter_model"]) == list(rows)
    for name, (w, d, mem) in rows.items():
        cell = theory["inter_model"][name]
        assert _rel(cell["work"], w) and _rel(cell["depth"], d) and _rel(cell["memory"], mem), name


def test_grpo_rlvr_pipeline_reproduces_the_sheet():
    theory = analyze_pipeline(
        "grpo", {"actor": ACTOR, "reference": ACTOR}, B, K, S, T, ppo_epochs=2, gpus_per_node=P_T
    )["theory"]
    rows = ppo_table_ix(ACTOR, ACTOR, None, None, B, K, S, T, 2, P_T)
    assert list(theory["inter_model"]) == list(rows)
    for name, (w, d, mem) in rows.items():
        cell = theory["inter_model"][name]
        assert _rel(cell["work"], w) and _rel(cell["depth"], d) and _rel(cell["memory"], mem), name


def test_dpo_pipeline_reproduces_the_sheet():
    theory = analyze_pipeline("dpo", {"actor": ACTOR, "reference": ACTOR}, B, 1, S, T,
                              gpus_per_node=P_T)["theory"]
    for name, (w, d, mem) in dpo_table_ix(ACTOR, ACTOR, B, S, T, P_T).items():
        cell = theory["inter_model"][name]
        assert _rel(cell["work"], w) and _rel(cell["depth"], d) and _rel(cell["memory"], mem), name


@pytest.mark.parametrize(
    ("degrees", "row"),
    [
        ({}, "none"),
        ({"P_d": 8}, "data"),
        ({"P_p": 4}, "pipeline"),
        ({"P_t": 8}, "tensor"),
        ({"P_c": 2}, "context"),
        ({"P_d": 4, "P_p": 2, "P_t": 8}, "3d"),
        ({"P_d": 2, "P_p": 2, "P_t": 4, "P_c": 2, "P_e": 2}, "5d"),
    ],
)
def test_intra_reproduces_tables_vii_and_viii(degrees, row):
    out = analyze_intra(ACTOR, B * K, S, T, **degrees)
    lit = intra_rows(ACTOR, B * K, m, **degrees)[row]
    for scope, cell in zip(("per_rank", "global"), lit, strict=True):
        for q, value in zip(("work", "depth", "memory"), cell, strict=True):
            assert _rel(out[scope][q], value), (scope, q)

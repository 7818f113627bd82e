"""Table I building blocks against hand values on the tiny model and against independent
formulations (explicit sum vs closed form), plus properties over random shapes."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from theory_cases import PROPERTY, TINY, close, m, models
from theory_cases import S as S0
from theory_cases import T as T0

from planner.theory import blocks
from planner.theory.shape import Head, TheoryInputError, TheoryModel

log = math.log2
L, d, d_ff, h, V = 2, 8, 16, 2, 10  # TINY, written out for the literal arithmetic below


def test_params_hand_values():
    # |π| = L(4d² + 2d·d_ff) + V·d = 2(256 + 256) + 80
    assert blocks.params(TINY, Head.POLICY) == 1104
    assert blocks.params(TINY, Head.POLICY) == L * (4 * d**2 + 2 * d * d_ff) + V * d
    # |R| = |V_ψ| = |π| + d; |π_SH| = |π| + d
    for head in (Head.SCALAR_LAST, Head.SCALAR_EVERY, Head.SHARED):
        assert blocks.params(TINY, head) == 1112


def test_forward_flops_per_token_hand_values():
    body = 2 * L * (4 * d**2 + 2 * d * d_ff + m * d)  # 2·2·(256 + 256 + 56) = 2272
    assert body == 2272
    assert blocks.c_f_tok(TINY, Head.POLICY, m) == 2432  # + 2V·d = 160
    assert close(blocks.c_f_tok(TINY, Head.SCALAR_LAST, m), 2272 + 2 * d / m)
    assert blocks.c_f_tok(TINY, Head.SCALAR_EVERY, m) == 2288  # + 2d
    assert blocks.c_f_tok(TINY, Head.SHARED, m) == 2432 + 2 * d  # C_f(π) + 2d


@pytest.mark.parametrize("head", list(Head))
def test_backward_and_training_are_two_and_three_forwards(head):
    f = blocks.c_f_tok(TINY, head, m)
    assert close(blocks.c_b_tok(TINY, head, m), 2 * f)
    assert close(blocks.c_tr_tok(TINY, head, m), 3 * f)


def test_prefill_decode_gen_hand_values():
    # C_prefill = 2L·S·(4d² + 2d·d_ff + S·d) + 2V·d = 12·536 + 160
    assert blocks.c_prefill(TINY, S0) == 6592
    # C_decode = Σ_{t=1}^{3} [4(512 + 16(3+t)) + 160] = 2464 + 2528 + 2592
    assert blocks.c_decode(TINY, S0, T0) == 7584
    assert blocks.c_decode_sum(TINY, S0, T0) == 7584
    assert blocks.c_gen(TINY, S0, T0) == 6592 + 7584


def test_single_token_response_has_no_decode():
    assert blocks.c_decode(TINY, S0, 1) == 0
    assert blocks.c_decode_sum(TINY, S0, 1) == 0
    assert blocks.d_gen(TINY, S0, 1) == blocks.d_f(TINY, S0)


def test_depth_hand_values():
    # D_f(n) = L(4 log d + log d_ff + log n − log h) + log d = 2(12 + 4 + log n − 1) + 3
    assert close(blocks.d_f(TINY, m), 33 + 2 * log(7))
    # D_b = D_f + log(N_seq·m); D_tr = D_f + D_b
    assert close(blocks.d_b(TINY, m, 6), 33 + 2 * log(7) + log(42))
    assert close(blocks.d_tr(TINY, m, 6), 2 * (33 + 2 * log(7)) + log(42))
    # D_f^TP(n, P_t=2) = L(12 + 4 + log n − 1 − 2) + log(8/2)
    assert close(blocks.d_f_tp(TINY, m, 2), 2 * (13 + log(7)) + 2)
    # D_gen = Σ_{n=3}^{6} D_f(n) = 4·33 + 2·log(3·4·5·6)
    assert close(blocks.d_gen(TINY, S0, T0), 132 + 2 * log(360))
    assert close(blocks.d_gen_tp(TINY, S0, T0, 2), 4 * (26 + 2) + 2 * log(360))


def test_memory_hand_values():
    assert blocks.m_kv(TINY, m) == 2 * 7 * 2 * 8 == 224
    assert blocks.m_act(TINY) == 16
    assert blocks.m_inf(TINY) == 8


def test_moe_uses_active_experts_in_work_and_all_experts_in_params():
    M = TheoryModel(L=2, d=8, d_ff=16, h=2, V=10, E=4, E_a=2, d_e=6)
    assert blocks.params(M, Head.POLICY) == 2 * (4 * 64 + 2 * 4 * 8 * 6) + 80
    assert blocks.c_f_tok(M, Head.POLICY, m) == 2 * 2 * (4 * 64 + 2 * 2 * 8 * 6 + 7 * 8) + 160
    assert close(blocks.d_f(M, m), 2 * (12 + log(6) + log(7) - 1) + 3)


def test_bad_inputs_are_refused():
    with pytest.raises(TheoryInputError, match="T"):
        blocks.c_decode(TINY, 3, 0)
    with pytest.raises(TheoryInputError, match="m"):
        blocks.c_f_tok(TINY, Head.POLICY, 0)
    with pytest.raises(TheoryInputError, match="P_t"):
        blocks.d_f_tp(TINY, 7, 0)
    with pytest.raises(TheoryInputError, match="head"):
        blocks.params(TINY, "policy")  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------------


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(1, 60))
def test_decode_closed_form_equals_explicit_sum(M, S, T):
    assert close(blocks.c_decode(M, S, T), blocks.c_decode_sum(M, S, T))


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(1, 40))
def test_generation_depth_is_the_chain_of_forward_depths(M, S, T):
    chain = sum(blocks.d_f(M, n) for n in range(S, S + T))
    assert close(blocks.d_gen(M, S, T), chain)
    assert close(blocks.d_gen_tp(M, S, T, 1), blocks.d_gen(M, S, T))


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(1, 40), st.integers(1, 8))
def test_tensor_parallel_depth_is_lower_by_the_p_t_terms(M, S, T, P_t):
    n = S + T
    drop = M.L * 2 * log(P_t) + log(P_t)
    assert close(blocks.d_f(M, n) - blocks.d_f_tp(M, n, P_t), drop, rel=1e-9)
    assert blocks.d_gen_tp(M, S, T, P_t) <= blocks.d_gen(M, S, T) + 1e-9


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(1, 300))
def test_monotone_in_context_length(M, n1, n2):
    lo, hi = sorted((n1, n2))
    assert blocks.d_f(M, lo) <= blocks.d_f(M, hi)
    for head in (Head.POLICY, Head.SCALAR_EVERY, Head.SHARED):
        assert blocks.c_f_tok(M, head, lo) <= blocks.c_f_tok(M, head, hi)
    # the reward's per-token head share 2d/m falls with m, its per-sequence work does not
    assert lo * blocks.c_f_tok(M, Head.SCALAR_LAST, lo) <= hi * blocks.c_f_tok(
        M, Head.SCALAR_LAST, hi
    )
    assert blocks.m_kv(M, lo) <= blocks.m_kv(M, hi)


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(1, 60))
def test_shared_actor_critic_forms(M, S, T):
    n = S + T
    assert blocks.params(M, Head.SHARED) == blocks.params(M, Head.POLICY) + M.d
    assert close(blocks.c_f_tok(M, Head.SHARED, n), blocks.c_f_tok(M, Head.POLICY, n) + 2 * M.d)
    # generation of π_SH is the policy's (the head does not enter C_gen, D_gen or M_KV)
    assert blocks.c_gen(M, S, T) == blocks.c_prefill(M, S) + blocks.c_decode(M, S, T)


@PROPERTY
@given(models(), st.integers(1, 300), st.integers(2, 60))
def test_generation_work_grows_with_response_length(M, S, T):
    assert blocks.c_gen(M, S, T - 1) < blocks.c_gen(M, S, T)
    assert blocks.d_gen(M, S, T - 1) < blocks.d_gen(M, S, T)

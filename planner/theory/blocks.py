"""Table I building blocks (Appendix B-A): parameters, per-token FLOPs, generation FLOPs,
depths and per-token memory of one model.

Source: Besta et al., "Performance Foundations of Parallel & Distributed Reasoning Language
Models", Table I and Appendix B-A, restated in FORMULAS.md §1 (which is binding where the
extracted text garbles a fraction). Symbols: L, d, d_ff→d_e, h, V, E, E_a of `TheoryModel`;
m = S + T the sequence length (prompt + response); n a context length; P_t the tensor-parallel
degree; N_seq the sequences in a training batch. `log` is log2.

Units: `params` and `m_*` in elements; `c_*` in FLOPs (multiply + add = 2); `d_*` in log2
reduction steps. Every formula is written in the MoE symbols (FORMULAS.md conventions):
`2·E_a·d·d_e` in work, `2·E·d·d_e` in parameters, `log d_e` in depth; a dense model has
E = E_a = 1, d_e = d_ff and these are the paper's `2d·d_ff` and `log d_ff`.
"""

from __future__ import annotations

import math

from planner.theory.shape import (
    Head,
    TheoryInputError,
    TheoryModel,
    require_positive,
    require_positive_int,
)

__all__ = [
    "c_b_tok",
    "c_decode",
    "c_decode_sum",
    "c_f_tok",
    "c_gen",
    "c_prefill",
    "c_tr_tok",
    "d_b",
    "d_f",
    "d_f_tp",
    "d_gen",
    "d_gen_tp",
    "m_act",
    "m_inf",
    "m_kv",
    "params",
]

log = math.log2


def _head(head: Head) -> Head:
    if not isinstance(head, Head):
        raise TheoryInputError(f"head must be a theory.Head, got {head!r}")
    return head


def params(M: TheoryModel, head: Head) -> float:
    """|M|, parameter count in elements (Table I).

    Policy / reference: `L(4d² + 2E·d·d_e) + V·d`; reward, critic (scalar head):
    `L(4d² + 2E·d·d_e) + V·d + d`; shared actor–critic: `|π| + d` (the same count).
    """
    L, d, V, E, d_e = M.L, M.d, M.V, M.E, M.d_e
    policy = L * (4 * d**2 + 2 * E * d * d_e) + V * d
    match _head(head):
        case Head.POLICY:
            return float(policy)
        case Head.SCALAR_LAST | Head.SCALAR_EVERY | Head.SHARED:
            return float(policy + d)


def c_f_tok(M: TheoryModel, head: Head, m: float) -> float:
    """C_f^tok(M), forward FLOPs per token of a sequence of length m (Table I).

    `2L[4d² + 2E_a·d·d_e + m·d]` plus the head: `2V·d` (policy), `2d/m` (reward: scalar head on
    the last token only), `2d` (critic: scalar head on every token), `2V·d + 2d` (shared).
    """
    m = require_positive("m", m)
    L, d, V, E_a, d_e = M.L, M.d, M.V, M.E_a, M.d_e
    body = 2 * L * (4 * d**2 + 2 * E_a * d * d_e + m * d)
    match _head(head):
        case Head.POLICY:
            return body + 2 * V * d
        case Head.SCALAR_LAST:
            return body + 2 * d / m
        case Head.SCALAR_EVERY:
            return body + 2 * d
        case Head.SHARED:
            return body + 2 * V * d + 2 * d


def c_b_tok(M: TheoryModel, head: Head, m: float) -> float:
    """C_b^tok(M) = 2·C_f^tok(M), backward FLOPs per token (Table I)."""
    return 2 * c_f_tok(M, head, m)


def c_tr_tok(M: TheoryModel, head: Head, m: float) -> float:
    """C_tr^tok(M) = C_f^tok + C_b^tok = 3·C_f^tok(M), training FLOPs per token (Table I)."""
    return c_f_tok(M, head, m) + c_b_tok(M, head, m)


def c_prefill(M: TheoryModel, S: float) -> float:
    """C_prefill(π, S) = `2L·S·(4d² + 2E_a·d·d_e + S·d) + 2V·d`, FLOPs per rollout (Table I).

    The vocabulary head runs on the last prompt position only.
    """
    S = require_positive("S", S)
    L, d, V, E_a, d_e = M.L, M.d, M.V, M.E_a, M.d_e
    return 2 * L * S * (4 * d**2 + 2 * E_a * d * d_e + S * d) + 2 * V * d


def c_decode_sum(M: TheoryModel, S: float, T: int) -> float:
    """C_decode(π, S, T) as Table I's explicit sum, FLOPs per rollout.

    `Σ_{t=1}^{T-1} [2L(4d² + 2E_a·d·d_e + 2(S+t)·d) + 2V·d]`. Same value as `c_decode`
    (its closed form); kept as the independent formulation the tests compare against.
    """
    S = require_positive("S", S)
    T = require_positive_int("T", T)
    L, d, V, E_a, d_e = M.L, M.d, M.V, M.E_a, M.d_e
    return math.fsum(
        2 * L * (4 * d**2 + 2 * E_a * d * d_e + 2 * (S + t) * d) + 2 * V * d for t in range(1, T)
    )


def c_decode(M: TheoryModel, S: float, T: int) -> float:
    """C_decode(π, S, T), closed form of Table I's sum, FLOPs per rollout.

    `2(T-1)L(4d² + 2E_a·d·d_e) + 4L·d·((T-1)S + (T-1)T/2) + 2(T-1)V·d`.
    """
    S = require_positive("S", S)
    T = require_positive_int("T", T)
    L, d, V, E_a, d_e = M.L, M.d, M.V, M.E_a, M.d_e
    return (
        2 * (T - 1) * L * (4 * d**2 + 2 * E_a * d * d_e)
        + 4 * L * d * ((T - 1) * S + (T - 1) * T / 2)
        + 2 * (T - 1) * V * d
    )


def c_gen(M: TheoryModel, S: float, T: int) -> float:
    """C_gen^roll(π) = C_prefill + C_decode, FLOPs per rollout (Table I).

    The shared actor–critic generates with its policy head only: C_gen(π_SH) = C_gen(π).
    """
    return c_prefill(M, S) + c_decode(M, S, T)


def d_f(M: TheoryModel, n: float) -> float:
    """D_f(M; n) = `L(4 log d + log d_e + log n − log h) + log d`, log2 steps (Table I).

    n is the context length (m = S + T for a teacher-forced pass). The last `log d` is the
    output head's reduction over d, the same for vocabulary and scalar heads, so D_f does not
    depend on the head (D_f(π_SH) = D_f(π)).
    """
    n = require_positive("n", n)
    L, d, h, d_e = M.L, M.d, M.h, M.d_e
    return L * (4 * log(d) + log(d_e) + log(n) - log(h)) + log(d)


def d_b(M: TheoryModel, m: float, n_seq: int) -> float:
    """D_b(M) = D_f(M; m) + log(N_seq·m), log2 steps (Table I).

    N_seq is the number of sequences in the training batch (B·K for PPO/GRPO, B for DPO); the
    extra term is the parameter-gradient reduction over all batch tokens.
    """
    n_seq = require_positive_int("N_seq", n_seq)
    return d_f(M, m) + log(n_seq * m)


def d_tr(M: TheoryModel, m: float, n_seq: int) -> float:
    """D_tr(M) = D_f(M; m) + D_b(M), log2 steps (Table I, Appendix B-D1)."""
    return d_f(M, m) + d_b(M, m, n_seq)


def d_f_tp(M: TheoryModel, n: float, P_t: int) -> float:
    """D_f^TP(M; n) = `L(4 log d + log d_e + log n − log h − 2 log P_t) + log(d/P_t)`, log2 steps.

    Forward depth under P_t-way tensor parallelism (FORMULAS.md §1; Table VII's tensor row).
    """
    n = require_positive("n", n)
    P_t = require_positive_int("P_t", P_t)
    L, d, h, d_e = M.L, M.d, M.h, M.d_e
    return L * (4 * log(d) + log(d_e) + log(n) - log(h) - 2 * log(P_t)) + log(d / P_t)


def d_gen(M: TheoryModel, S: float, T: int) -> float:
    """D_gen(π) = `D_f(π; S) + Σ_{t=1}^{T-1} D_f(π; S+t)`, log2 steps (Table I).

    The prefill pass, then T − 1 decode steps chained one after another (the decode chain).
    """
    T = require_positive_int("T", T)
    return math.fsum([d_f(M, S), *(d_f(M, S + t) for t in range(1, T))])


def d_gen_tp(M: TheoryModel, S: float, T: int, P_t: int) -> float:
    """D_gen^TP(π) = `D_f^TP(π; S) + Σ_{t=1}^{T-1} D_f^TP(π; S+t)`, log2 steps (Table I)."""
    T = require_positive_int("T", T)
    return math.fsum([d_f_tp(M, S, P_t), *(d_f_tp(M, S + t, P_t) for t in range(1, T))])


def m_kv(M: TheoryModel, m: float) -> float:
    """M_KV = 2·m·L·d, KV-cache elements of one rollout of length m (Table I)."""
    m = require_positive("m", m)
    return 2 * m * M.L * M.d


def m_act(M: TheoryModel) -> float:
    """M_Act = L·d, stored training activations per token, no checkpointing, elements (Table I)."""
    return float(M.L * M.d)


def m_inf(M: TheoryModel) -> float:
    """M_Inf = d, forward-only inference buffer per token, elements (Table I)."""
    return float(M.d)

"""An independent, literal transcription of FORMULAS.md for the tests.

Written straight from the sheet, line by line, without importing `planner.theory` (only the
model's fields are read): the tests compare the package against these, and the tiny-model
hand values anchor these themselves. Missing roles are passed as None; "deleting the terms"
of a missing role is done here by filtering, row by row, as the sheet says.
MoE symbols throughout (dense: E = E_a = 1, d_e = d_ff).
"""

from __future__ import annotations

import math

lg = math.log2


# --- §1 Table I ------------------------------------------------------------------------------
def P_pi(M):  # |π| = L(4d² + 2d·d_ff) + V·d
    return M.L * (4 * M.d**2 + 2 * M.E * M.d * M.d_e) + M.V * M.d


def P_scalar(M):  # |R|, |V_ψ|, |π_ac| = L(4d² + 2d·d_ff) + V·d + d
    return M.L * (4 * M.d**2 + 2 * M.E * M.d * M.d_e) + M.V * M.d + M.d


def Cf_pi(M, m):  # 2L[4d² + 2d·d_ff + m·d] + 2V·d
    return 2 * M.L * (4 * M.d**2 + 2 * M.E_a * M.d * M.d_e + m * M.d) + 2 * M.V * M.d


def Cf_R(M, m):  # 2L[...] + 2d/m
    return 2 * M.L * (4 * M.d**2 + 2 * M.E_a * M.d * M.d_e + m * M.d) + 2 * M.d / m


def Cf_V(M, m):  # 2L[...] + 2d
    return 2 * M.L * (4 * M.d**2 + 2 * M.E_a * M.d * M.d_e + m * M.d) + 2 * M.d


def Cprefill(M, S):
    return 2 * M.L * S * (4 * M.d**2 + 2 * M.E_a * M.d * M.d_e + S * M.d) + 2 * M.V * M.d


def Cdecode(M, S, T):  # the explicit sum of Table I
    return sum(
        2 * M.L * (4 * M.d**2 + 2 * M.E_a * M.d * M.d_e + 2 * (S + t) * M.d) + 2 * M.V * M.d
        for t in range(1, T)
    )


def Cgen(M, S, T):
    return Cprefill(M, S) + Cdecode(M, S, T)


def Df(M, n):  # L(4 log d + log d_ff + log n − log h) + log d
    return M.L * (4 * lg(M.d) + lg(M.d_e) + lg(n) - lg(M.h)) + lg(M.d)


def Db(M, m, n_seq):
    return Df(M, m) + lg(n_seq * m)


def Dtr(M, m, n_seq):
    return Df(M, m) + Db(M, m, n_seq)


def Df_tp(M, n, P_t):
    return M.L * (4 * lg(M.d) + lg(M.d_e) + lg(n) - lg(M.h) - 2 * lg(P_t)) + lg(M.d / P_t)


def Dgen(M, S, T):
    return Df(M, S) + sum(Df(M, S + t) for t in range(1, T))


def Dgen_tp(M, S, T, P_t):
    return Df_tp(M, S, P_t) + sum(Df_tp(M, S + t, P_t) for t in range(1, T))


def MKV(M, m):
    return 2 * m * M.L * M.d


# --- §4 stage terms, PPO with deletions (critic None = GRPO) --------------------------------
def _keep(*pairs):
    return [(M, f) for M, f in pairs if M is not None]


def ppo_terms(actor, ref, R, V, B, K, S, T, E=1, P_t=1):
    """Every §4 stage term as a dict; E = epochs (§5)."""
    m = S + T
    A = _keep((ref, "pol"), (R, "R"), (V, "V"))
    cf = {"pol": Cf_pi, "R": Cf_R, "V": Cf_V}
    size = {"pol": P_pi, "R": P_scalar, "V": P_scalar}
    t = {}
    t["W_G"] = B * K * Cgen(actor, S, T)
    t["D_G"] = Dgen(actor, S, T)
    t["M_G"] = P_pi(actor) + B * K * MKV(actor, m)
    t["W_A"] = B * K * m * sum(cf[k](X, m) for X, k in A)
    t["D_A_sum"] = sum(Df(X, m) for X, _ in A)
    t["D_A_max"] = max([Df(X, m) for X, _ in A], default=0)
    t["D_A_sum_tp"] = sum(Df_tp(X, m, P_t) for X, _ in A)
    t["M_A_sum"] = sum(size[k](X) for X, k in A) + B * K * m * max([X.d for X, _ in A], default=0)
    t["W_T"] = E * B * K * m * (3 * Cf_pi(actor, m) + (3 * Cf_V(V, m) if V else 0))
    dtr = [Dtr(actor, m, B * K)] + ([Dtr(V, m, B * K)] if V else [])
    t["D_T_sum"] = E * sum(dtr)
    t["D_T_max"] = E * max(dtr)
    t["M_T_sum"] = 4 * (P_pi(actor) + (P_scalar(V) if V else 0)) + B * K * m * (
        actor.L * actor.d + (V.L * V.d if V else 0)
    )
    groups_T = [4 * P_pi(actor) + B * K * m * actor.L * actor.d]
    if V:
        groups_T.append(4 * P_scalar(V) + B * K * m * V.L * V.d)
    t["M_T_max"] = max(groups_T)
    t["groups_T"] = groups_T
    t["groups_A"] = [size[k](X) + B * K * m * X.d for X, k in A]
    t["sizes_A"] = [size[k](X) for X, k in A]
    t["Df_A"] = [Df(X, m) for X, _ in A]
    return t


def ppo_table_ix(actor, ref, R, V, B, K, S, T, E=1, P_t=8):
    """Table IX rows (FORMULAS.md §4) as {config: (work, depth, memory)}."""
    m = S + T
    t = ppo_terms(actor, ref, R, V, B, K, S, T, E, P_t)
    W = t["W_G"] + t["W_A"] + t["W_T"]
    rows = {}
    rows["baseline"] = (
        W,
        t["D_G"] + t["D_A_sum"] + t["D_T_sum"],
        max(t["M_G"], t["M_A_sum"], t["M_T_sum"]),
    )
    if V is not None:
        frozen = _keep((ref, "pol"), (R, "R"))
        cf = {"pol": Cf_pi, "R": Cf_R}
        size = {"pol": P_pi, "R": P_scalar}
        P_sh = P_pi(actor) + actor.d
        Cf_sh = Cf_pi(actor, m) + 2 * actor.d
        rows["shared_actor_critic"] = (
            B * K * Cgen(actor, S, T)
            + B * K * m * (sum(cf[k](X, m) for X, k in frozen) + Cf_sh)
            + B * K * m * 3 * Cf_sh * E,
            Dgen(actor, S, T)
            + (sum(Df(X, m) for X, _ in frozen) + Df(actor, m))
            + Dtr(actor, m, B * K) * E,
            max(
                P_sh + B * K * MKV(actor, m),
                sum(size[k](X) for X, k in frozen)
                + P_sh
                + B * K * m * max([X.d for X, _ in frozen] + [actor.d]),
                4 * P_sh + B * K * m * actor.L * actor.d,
            ),
        )
    rows["disaggregated"] = (
        W,
        t["D_G"] + t["D_A_max"] + t["D_T_max"],
        max([t["M_G"], *t["groups_A"], *t["groups_T"]]),
    )
    rows["hybrid"] = (
        W,
        Dgen_tp(actor, S, T, P_t) + t["D_A_sum_tp"] + t["D_T_sum"],
        max(t["M_G"], t["M_A_sum"], t["M_T_sum"]),
    )
    rows["stage_fusion"] = (
        W,
        max(t["D_G"], t["D_A_max"]) + t["D_T_max"],
        max(max(P_pi(actor) + B * K * MKV(actor, m), sum(t["sizes_A"])), t["M_T_sum"]),
    )
    M_async = max([P_pi(actor) + B * K * MKV(actor, m) + P_pi(actor), *t["sizes_A"],
                   *t["groups_T"]])
    rows["async"] = (W, max(t["D_G"] + t["D_A_max"], t["D_T_max"]), M_async)
    rows["combined"] = (
        W,
        max(max([Dgen_tp(actor, S, T, P_t), *t["Df_A"]]), t["D_T_max"]),
        M_async,
    )
    return rows


def dpo_table_ix(actor, ref, B, S, T, P_t=8):
    """DPO rows (FORMULAS.md §4), one epoch; ref None deletes every ref term."""
    m = S + T
    cf_ref = Cf_pi(ref, m) if ref else 0
    df_ref = Df(ref, m) if ref else 0
    p_ref = P_pi(ref) if ref else 0
    W = B * m * (cf_ref + 3 * Cf_pi(actor, m))
    M_base = max(
        P_pi(actor) + p_ref + B * m * actor.L * actor.d,
        4 * P_pi(actor) + B * m * actor.L * actor.d,
    )
    groups = [4 * P_pi(actor) + B * m * actor.L * actor.d]
    if ref:
        groups.append(p_ref + B * m * ref.d)
    return {
        "baseline": (W, df_ref + Dtr(actor, m, B), M_base),
        "disaggregated": (W, max(Df(actor, m), df_ref) + Db(actor, m, B), max(groups)),
        "hybrid": (W, (Df_tp(ref, m, P_t) if ref else 0) + Dtr(actor, m, B), M_base),
    }


# --- §3 Tables VII / VIII --------------------------------------------------------------------
def intra_rows(M, B, m, P_d=1, P_p=1, P_t=1, P_c=1, P_e=1):
    """{row: ((work, depth, memory) per rank, (work, depth, memory) global)}."""
    L, d, d_ff, h, V, E, E_a, d_e = M.L, M.d, M.d_e, M.h, M.V, M.E, M.E_a, M.d_e
    body = 4 * d**2 + 2 * E_a * d * d_ff + m * d
    state = L * (16 * d**2 + 8 * E * d * d_ff) + 4 * V * d
    act = B * m * L * d
    W0 = 6 * B * m * L * body
    D0 = 2 * L * lg(d**4 * d_ff * m / h) + lg(B * m)
    M0 = state + act
    g0 = (W0, D0, M0)
    return {
        "none": ((W0, D0, M0), g0),
        "data": (
            (W0 / P_d, 2 * L * lg(d**4 * d_ff * m / h) + lg(B * m / P_d), state + act / P_d),
            (W0, D0, P_d * state + act),
        ),
        "pipeline": (
            (
                W0 / P_p,
                2 * (L / P_p) * lg(d**4 * d_ff * m / h) + lg(B * m),
                (L / P_p) * (16 * d**2 + 8 * E * d * d_ff) + 4 * V * d + act / P_p,
            ),
            g0,
        ),
        "tensor": (
            (W0 / P_t, 2 * L * lg(d**4 * d_ff * m / (P_t**2 * h)) + lg(B * m),
             state / P_t + act / P_t),
            g0,
        ),
        "context": (
            (W0 / P_c, 2 * L * lg(d**4 * d_ff * m / h) + lg(B * m / P_c), state + act / P_c),
            (W0, D0, P_c * state + act),
        ),
        "expert": (
            (
                6 * B * m * L * (4 * d**2 + 2 * E_a * d * d_e / P_e + m * d),
                2 * L * lg(d**4 * d_e * m / h) + lg(B * m),
                L * (16 * d**2 + 8 * E * d * d_e / P_e) + 4 * V * d + act,
            ),
            (
                6 * B * m * L * (P_e * (4 * d**2 + m * d) + 2 * E_a * d * d_e),
                2 * L * lg(d**4 * d_e * m / h) + lg(B * m),
                P_e * (16 * L * d**2 + 4 * V * d + act) + 8 * L * E * d * d_e,
            ),
        ),
        "3d": (
            (
                W0 / (P_d * P_p * P_t),
                2 * (L / P_p) * lg(d**4 * d_ff * m / (P_t**2 * h)) + lg(B * m / P_d),
                L * (16 * d**2 + 8 * E * d * d_ff) / (P_p * P_t)
                + 4 * V * d / P_t
                + act / (P_d * P_p * P_t),
            ),
            (W0, D0, P_d * state + act),
        ),
        "5d": (
            (
                6 * (B / (P_d * P_e)) * (m / P_c) * (L / P_p)
                * (4 * d**2 + 2 * E_a * d * d_e + m * d) / P_t,
                2 * (L / P_p) * lg(d**4 * d_e * m / (P_t**2 * h)) + lg(B * m / (P_d * P_e * P_c)),
                16 * L * d**2 / (P_p * P_t)
                + 8 * L * E * d * d_e / (P_p * P_t * P_e)
                + 4 * V * d / P_t
                + act / (P_d * P_e * P_c * P_p * P_t),
            ),
            (
                6 * B * m * L * (4 * d**2 + 2 * E_a * d * d_e + m * d),
                2 * L * lg(d**4 * d_e * m / h) + lg(B * m),
                P_d * P_c * P_e * (16 * L * d**2 + 4 * V * d)
                + 8 * P_d * P_c * L * E * d * d_e
                + act,
            ),
        ),
    }

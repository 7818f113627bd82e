"""Table IX: inter-model configurations of one iteration — total work, iteration depth and
peak memory per device group.

Source: Besta et al., Table IX and Appendix B-D2 … B-D8, restated in FORMULAS.md §4 (PPO rows;
GRPO deletes every critic term; DPO has its own three rows) and §5 (epochs multiply training
work and depth). Built on the stage primitives of `planner.theory.stages`.

Configurations: `baseline` (co-located, sequential), `shared_actor_critic` (PPO only: one
backbone with policy and value heads), `disaggregated` (one device group per model), `hybrid`
(TP generation and assessment with P_t = GPUs per node, ZeRO-3 training, one group),
`stage_fusion` (generation streamed into assessment; actor and critic training interleaved),
`async` (bounded asynchrony, steady state), `combined` (async + disaggregated + hybrid +
fusion). DPO: `baseline`, `disaggregated`, `hybrid`.

Units: work in FLOPs, depth in log2 steps, memory in elements.
"""

from __future__ import annotations

import math

from planner.theory import blocks
from planner.theory.shape import Head, TheoryInputError, WorkDepthMemory, require_positive_int
from planner.theory.stages import (
    ROLE_HEAD,
    Scenario,
    d_a_max,
    d_a_sum,
    d_a_sum_tp,
    d_g,
    d_t_max,
    d_t_sum,
    m_a_sum,
    m_assess_each,
    m_g,
    m_t_sum,
    m_train_each,
    w_a,
    w_g,
    w_t,
)

__all__ = [
    "CONFIGURATIONS",
    "DPO_CONFIGURATIONS",
    "async_",
    "baseline",
    "combined",
    "configurations",
    "disaggregated",
    "dpo_baseline",
    "dpo_disaggregated",
    "dpo_hybrid",
    "hybrid",
    "m_sh",
    "shared_actor_critic",
    "stage_fusion",
    "w_total",
]

CONFIGURATIONS = (
    "baseline",
    "shared_actor_critic",
    "disaggregated",
    "hybrid",
    "stage_fusion",
    "async",
    "combined",
)
"""Table IX's PPO rows, in order (GRPO: all but `shared_actor_critic`)."""

DPO_CONFIGURATIONS = ("baseline", "disaggregated", "hybrid")
"""FORMULAS.md §4's DPO rows."""


def _online(sc: Scenario, config: str) -> None:
    if sc.family == "dpo":
        raise TheoryInputError(
            f"the {config!r} row is for PPO/GRPO; DPO uses dpo_baseline, dpo_disaggregated, "
            "dpo_hybrid"
        )


def _offline(sc: Scenario, config: str) -> None:
    if sc.family != "dpo":
        raise TheoryInputError(f"{config!r} is DPO's row; PPO/GRPO use the Table IX rows")


def m_sh(pi: blocks.TheoryModel) -> float:
    """M_sh(π) = |π|, the inference-side shadow copy of the actor stale readers use, elements."""
    return blocks.params(pi, Head.POLICY)


def w_total(sc: Scenario) -> float:
    """W_G + W_A + W_T, FLOPs: the work of every PPO/GRPO row except the shared actor–critic."""
    return w_g(sc) + w_a(sc) + w_t(sc)


def baseline(sc: Scenario) -> WorkDepthMemory:
    """Co-located, sequential (Table IX; B-D2; FLOPs, log2 steps, elements).

    W = W_G + W_A + W_T; D = D_G + D_AΣ + D_TΣ; M = max(M_G, M_AΣ, M_TΣ).
    """
    _online(sc, "baseline")
    return WorkDepthMemory(
        work=w_total(sc),
        depth=d_g(sc) + d_a_sum(sc) + d_t_sum(sc),
        memory=max(m_g(sc), m_a_sum(sc), m_t_sum(sc)),
    )


def shared_actor_critic(sc: Scenario) -> WorkDepthMemory:
    """One backbone π_SH with policy and value heads replaces the critic (Table IX; B-D3).

    Work in FLOPs, depth in log2 steps, memory in elements.

    W = B·K·C_gen(π_SH) + B·K·m·[C_f(ref) + C_f(R) + C_f(π_SH)] + B·K·m·C_tr(π_SH)·epochs;
    D = D_gen(π_SH) + [D_f(ref) + D_f(R) + D_f(π_SH)] + D_tr(π_SH)·epochs;
    M = max(|π_SH| + B·K·M_KV, |ref| + |R| + |π_SH| + B·K·m·max(d_ref, d_R, d_π),
    4|π_SH| + B·K·m·L_π d_π). π_SH has the actor's architecture (the critic's is unused).
    """
    _online(sc, "shared_actor_critic")
    if "critic" not in sc.roles:
        raise TheoryInputError("the shared actor–critic replaces a critic; GRPO has none")
    B, K, S, T, m, E = sc.B, sc.K, sc.S, sc.T, sc.m, sc.epochs
    pi = sc.actor
    frozen = [r for r in ("reference", "reward") if r in sc.roles]  # the critic is gone
    sh = Head.SHARED
    cf_frozen = math.fsum(blocks.c_f_tok(sc.roles[r], ROLE_HEAD[r], m) for r in frozen)
    df_frozen = math.fsum(blocks.d_f(sc.roles[r], m) for r in frozen)
    p_frozen = math.fsum(blocks.params(sc.roles[r], ROLE_HEAD[r]) for r in frozen)
    p_sh = blocks.params(pi, sh)
    work = (
        B * K * blocks.c_gen(pi, S, T)
        + B * K * m * (cf_frozen + blocks.c_f_tok(pi, sh, m))
        + B * K * m * blocks.c_tr_tok(pi, sh, m) * E
    )
    depth = blocks.d_gen(pi, S, T) + (df_frozen + blocks.d_f(pi, m)) + blocks.d_tr(pi, m, B * K) * E
    widths = [*(blocks.m_inf(sc.roles[r]) for r in frozen), blocks.m_inf(pi)]
    memory = max(
        p_sh + B * K * blocks.m_kv(pi, m),
        p_frozen + p_sh + B * K * m * max(widths),
        4 * p_sh + B * K * m * blocks.m_act(pi),
    )
    return WorkDepthMemory(work, depth, memory)


def disaggregated(sc: Scenario) -> WorkDepthMemory:
    """Every model on its own device group (Table IX; B-D4; FLOPs, log2 steps, elements).

    W = W_G + W_A + W_T; D = D_G + D_Amax + D_Tmax; M = max(M_G, |X| + B·K·m·M_Inf(X) for
    each assessment model X, 4|π| + B·K·m·L_π d_π, 4|V| + B·K·m·L_V d_V).
    """
    _online(sc, "disaggregated")
    return WorkDepthMemory(
        work=w_total(sc),
        depth=d_g(sc) + d_a_max(sc) + d_t_max(sc),
        memory=max([m_g(sc), *m_assess_each(sc).values(), *m_train_each(sc).values()]),
    )


def hybrid(sc: Scenario, P_t: int) -> WorkDepthMemory:
    """TP generation and assessment, ZeRO-3 training, one device group (Table IX; B-D5).

    Work in FLOPs, depth in log2 steps, memory in elements.

    W = W_G + W_A + W_T; D = D_gen^TP + D_AΣ^TP + D_TΣ with P_t = GPUs per node;
    M = max(M_G, M_AΣ, M_TΣ) (the resharding buffer is the practical model's).
    """
    _online(sc, "hybrid")
    P_t = require_positive_int("P_t", P_t)
    return WorkDepthMemory(
        work=w_total(sc),
        depth=blocks.d_gen_tp(sc.actor, sc.S, sc.T, P_t) + d_a_sum_tp(sc, P_t) + d_t_sum(sc),
        memory=max(m_g(sc), m_a_sum(sc), m_t_sum(sc)),
    )


def stage_fusion(sc: Scenario) -> WorkDepthMemory:
    """Generation streamed into assessment; actor and critic training interleaved (Table IX;
    B-D6).

    W = W_G + W_A + W_T; D = max(D_G, D_Amax) + D_Tmax;
    M = max(max(|π| + B·K·M_KV, |ref| + |R| + |V|), M_TΣ).
    """
    _online(sc, "stage_fusion")
    assessment_states = math.fsum(
        blocks.params(sc.roles[r], ROLE_HEAD[r]) for r in sc.assessment_roles
    )
    return WorkDepthMemory(
        work=w_total(sc),
        depth=max(d_g(sc), d_a_max(sc)) + d_t_max(sc),
        memory=max(max(m_g(sc), assessment_states), m_t_sum(sc)),
    )


def async_(sc: Scenario) -> WorkDepthMemory:
    """Bounded asynchrony, steady state (Table IX; B-D7). JSON key `async`.

    Work in FLOPs, depth in log2 steps, memory in elements.

    W = W_G + W_A + W_T; D = max(D_G + D_Amax, D_Tmax);
    M = max(|π| + B·K·M_KV + M_sh(π), |ref|, |R|, |V|, 4|π| + B·K·m·L_π d_π,
    4|V| + B·K·m·L_V d_V).
    """
    _online(sc, "async")
    return WorkDepthMemory(
        work=w_total(sc),
        depth=max(d_g(sc) + d_a_max(sc), d_t_max(sc)),
        memory=_m_async(sc),
    )


def _m_async(sc: Scenario) -> float:
    """Table IX's asynchrony memory (also the combined row's), elements."""
    return max(
        [
            m_g(sc) + m_sh(sc.actor),
            *(blocks.params(sc.roles[r], ROLE_HEAD[r]) for r in sc.assessment_roles),
            *m_train_each(sc).values(),
        ]
    )


def combined(sc: Scenario, P_t: int) -> WorkDepthMemory:
    """Async + disaggregated + hybrid + fusion (Table IX; B-D8; FLOPs, log2 steps, elements).

    W = W_G + W_A + W_T; D = max(max(D_gen^TP, D_f(ref), D_f(R), D_f(V)), D_Tmax) with P_t =
    GPUs per node; M as asynchrony.
    """
    _online(sc, "combined")
    P_t = require_positive_int("P_t", P_t)
    front = [
        blocks.d_gen_tp(sc.actor, sc.S, sc.T, P_t),
        *(blocks.d_f(sc.roles[r], sc.m) for r in sc.assessment_roles),
    ]
    return WorkDepthMemory(
        work=w_total(sc),
        depth=max(max(front), d_t_max(sc)),
        memory=_m_async(sc),
    )


# --- DPO (FORMULAS.md §4, DPO table) -------------------------------------------------------
# The policy's forward is counted once (Algorithm 4 backpropagates through it). With several
# epochs the first one's forward is the one shared with the reference pass; every further
# epoch is a full D_tr(π) (FORMULAS.md §5 applied to DPO's training term).


def _dpo_terms(sc: Scenario) -> tuple[float, float, float]:
    """(C_f(ref), D_f(ref), |ref|), each 0 without a reference model."""
    if "reference" not in sc.roles:
        return 0.0, 0.0, 0.0
    ref = sc.roles["reference"]
    return (
        blocks.c_f_tok(ref, Head.POLICY, sc.m),
        blocks.d_f(ref, sc.m),
        blocks.params(ref, Head.POLICY),
    )


def _dpo_work(sc: Scenario) -> float:
    """`B·m·[C_f(ref) + C_tr(π)·epochs]`, FLOPs (every DPO row)."""
    B, m, E, pi = sc.B, sc.m, sc.epochs, sc.actor
    cf_ref, _, _ = _dpo_terms(sc)
    return B * m * (cf_ref + blocks.c_tr_tok(pi, Head.POLICY, m) * E)


def _dpo_memory_baseline(sc: Scenario) -> float:
    """`max(|π| + |ref| + B·m·L_π d_π, 4|π| + B·m·L_π d_π)`, elements."""
    B, m, pi = sc.B, sc.m, sc.actor
    _, _, p_ref = _dpo_terms(sc)
    p_pi = blocks.params(pi, Head.POLICY)
    return max(p_pi + p_ref + B * m * blocks.m_act(pi), 4 * p_pi + B * m * blocks.m_act(pi))


def dpo_baseline(sc: Scenario) -> WorkDepthMemory:
    """DPO co-located (FORMULAS.md §4; FLOPs, log2 steps, elements).

    W = B·m·[C_f(ref) + C_tr(π)]; D = D_f(ref) + D_tr(π);
    M = max(|π| + |ref| + B·m·L_π d_π, 4|π| + B·m·L_π d_π). Training terms × epochs.
    """
    _offline(sc, "dpo_baseline")
    _, df_ref, _ = _dpo_terms(sc)
    depth = df_ref + blocks.d_tr(sc.actor, sc.m, sc.B) * sc.epochs
    return WorkDepthMemory(_dpo_work(sc), depth, _dpo_memory_baseline(sc))


def dpo_disaggregated(sc: Scenario) -> WorkDepthMemory:
    """DPO, reference and policy on separate groups (FORMULAS.md §4; FLOPs, log2, elements).

    W as baseline; D = max(D_f(π), D_f(ref)) + D_b(π) (+ (epochs − 1)·D_tr(π));
    M = max(|ref| + B·m·d_ref, 4|π| + B·m·L_π d_π).
    """
    _offline(sc, "dpo_disaggregated")
    B, m, E, pi = sc.B, sc.m, sc.epochs, sc.actor
    _, df_ref, p_ref = _dpo_terms(sc)
    depth = (
        max(blocks.d_f(pi, m), df_ref) + blocks.d_b(pi, m, B) + (E - 1) * blocks.d_tr(pi, m, B)
    )
    groups = [4 * blocks.params(pi, Head.POLICY) + B * m * blocks.m_act(pi)]
    if "reference" in sc.roles:
        groups.append(p_ref + B * m * blocks.m_inf(sc.roles["reference"]))
    return WorkDepthMemory(_dpo_work(sc), depth, max(groups))


def dpo_hybrid(sc: Scenario, P_t: int) -> WorkDepthMemory:
    """DPO with a TP reference pass (FORMULAS.md §4; FLOPs, log2 steps, elements).

    W as baseline; D = D_f^TP(ref) + D_tr(π) (× epochs on D_tr), P_t = GPUs per node;
    M as baseline.
    """
    _offline(sc, "dpo_hybrid")
    P_t = require_positive_int("P_t", P_t)
    df_ref_tp = (
        blocks.d_f_tp(sc.roles["reference"], sc.m, P_t) if "reference" in sc.roles else 0.0
    )
    depth = df_ref_tp + blocks.d_tr(sc.actor, sc.m, sc.B) * sc.epochs
    return WorkDepthMemory(_dpo_work(sc), depth, _dpo_memory_baseline(sc))


def configurations(sc: Scenario, P_t: int) -> dict[str, WorkDepthMemory]:
    """Every Table IX row that applies to the scenario, keyed by its JSON name, in order.

    PPO: all seven; GRPO: no `shared_actor_critic`; DPO: `baseline`, `disaggregated`,
    `hybrid` (its own formulas). P_t is the GPUs per node (hybrid and combined rows).
    """
    if sc.family == "dpo":
        return {
            "baseline": dpo_baseline(sc),
            "disaggregated": dpo_disaggregated(sc),
            "hybrid": dpo_hybrid(sc, P_t),
        }
    rows = {"baseline": baseline(sc)}
    if "critic" in sc.roles:
        rows["shared_actor_critic"] = shared_actor_critic(sc)
    rows["disaggregated"] = disaggregated(sc)
    rows["hybrid"] = hybrid(sc, P_t)
    rows["stage_fusion"] = stage_fusion(sc)
    rows["async"] = async_(sc)
    rows["combined"] = combined(sc, P_t)
    return rows

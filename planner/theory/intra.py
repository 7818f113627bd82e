"""Tables VII (per rank) and VIII (global): intra-model parallelism of one training iteration.

Source: Besta et al., Tables VII and VIII, Appendix B-C and §I-G (ZeRO/FSDP, activation
checkpointing), restated in FORMULAS.md §3. One function per row (`none`, `data`, `pipeline`,
`tensor`, `context`, `expert` — the isolated-expert abstraction — `three_d`, `five_d`), each
returning both tables' cells. The paper's degrees: P_d data, P_p pipeline, P_t tensor,
P_c context, P_e expert (N = P_d·P_p·P_t·P_c·P_e ranks). Any combination of degrees is the 5D
row; the single-strategy and 3D rows are its special cases (the tests check where they
coincide); only the isolated-expert row is a different model (every EP rank runs the shared
dense path on the same tokens).

Shorthands (FORMULAS.md §3), MoE-general (dense: E = E_a = 1, d_e = d_ff):
`body = 4d² + 2E_a·d·d_e + m·d`, `state = L(16d² + 8E·d·d_e) + 4V·d` (= 4 × parameters),
`act = B·m·L·d`, `W0 = 6·B·m·L·body`, `D0 = 2L·log(d⁴·d_e·m/h) + log(B·m)`, `M0 = state + act`.
B is the sequences in the batch, m = S + T. These rows count the Transformer layers only: the
output head's work (Table I's 2V·d per token) and depth (2 log d) are not in them.

Global depth under TP, 3D and 5D is the baseline depth (Table VIII holds over Appendix B-C);
the per-rank depth keeps the P_t term.

ZeRO (`zero` = 0…3) replaces the `4P` Adam model state of each state term by `4P` (0),
`2P + 2P/P_z` (1), `P + 3P/P_z` (2) or `4P/P_z` (3), where P_z is the number of ranks holding
that term's replicas: P_d (data, 3D), P_c (context), P_e for the dense state of the
isolated-expert row, P_d·P_c·P_e for 5D's dense state and P_d·P_c for its expert state; 1 where
the term is not replicated (none, pipeline, tensor, the isolated row's experts).

Activation checkpointing (`kappa` = κ ∈ (0, 1)) multiplies `act` by κ and adds the recomputed
forward pass: one third of the row's work (the row's work is forward + backward = 3 × forward)
and the row's forward layer chain (half of its `2·(L/P_p)·log(…)` term) to its depth. This is
FORMULAS.md's `N_seq·m·C_f(M)` and `D_f(M)` taken in the rows' own accounting (no head term).

Units: work in FLOPs, depth in log2 steps, memory in elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.theory.shape import (
    TheoryInputError,
    TheoryModel,
    WorkDepthMemory,
    require_positive,
    require_positive_int,
)

__all__ = [
    "ZERO_STAGES",
    "IntraCost",
    "context",
    "data",
    "expert",
    "five_d",
    "none",
    "pipeline",
    "tensor",
    "three_d",
    "zero_model_state",
]

log = math.log2

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class IntraCost:
    """One row of Tables VII and VIII: the cell of one rank and of the whole job."""

    per_rank: WorkDepthMemory
    global_: WorkDepthMemory

    def as_dict(self) -> dict[str, dict[str, float]]:
        """`{"per_rank": {"work","depth","memory"}, "global": {...}}` (DESIGN.md)."""
        return {"per_rank": self.per_rank.as_dict(), "global": self.global_.as_dict()}


def zero_model_state(P: float, stage: int | None, P_z: int) -> float:
    """Adam model state of P parameters under ZeRO stage `stage` over P_z ranks, elements.

    Stage 0 (or None): `4P`; 1: `2P + 2P/P_z`; 2: `P + 3P/P_z`; 3: `4P/P_z` (§I-G1; FORMULAS.md
    §3). P_z = 1 gives 4P at every stage.
    """
    P = float(P)
    P_z = require_positive_int("P_z", P_z)
    match _zero(stage):
        case None | 0:
            return 4 * P
        case 1:
            return 2 * P + 2 * P / P_z
        case 2:
            return P + 3 * P / P_z
        case 3:
            return 4 * P / P_z
    raise AssertionError("unreachable")  # pragma: no cover


def _zero(stage: int | None) -> int | None:
    if stage is None:
        return None
    if isinstance(stage, bool) or stage not in ZERO_STAGES:
        raise TheoryInputError(f"zero must be one of 0, 1, 2, 3 (or None), got {stage!r}")
    return int(stage)


def _zf(stage: int | None, P_z: int) -> float:
    """ZeRO factor on a `4P` state term: zero_model_state(P)/(4P)."""
    return zero_model_state(1.0, stage, P_z) / 4


def _kappa(kappa: float | None) -> float:
    """κ, the fraction of activations kept (1 without checkpointing)."""
    if kappa is None:
        return 1.0
    kappa = require_positive("kappa", kappa)
    if kappa >= 1:
        raise TheoryInputError(f"kappa must lie in (0, 1), got {kappa!r}")
    return kappa


def _recompute(work: float, depth: float, chain: float, kappa: float | None) -> tuple[float, float]:
    """Add the recomputed forward under checkpointing: work + work/3, depth + forward chain."""
    if kappa is None:
        return work, depth
    return work + work / 3, depth + chain


def _cell(
    work: float, depth: float, memory: float, chain: float, kappa: float | None
) -> WorkDepthMemory:
    w, dd = _recompute(work, depth, chain, kappa)
    return WorkDepthMemory(w, dd, memory)


@dataclass(frozen=True)
class _Baseline:
    """§3's shorthands for one model and batch: state, act, W0, D0 (and D0's layer chain)."""

    state: float
    act: float
    W0: float
    D0: float
    chain: float


def _layer_chain(M: TheoryModel, m: float, P_p: int = 1, P_t: int = 1) -> float:
    """`(L/P_p)·log(d⁴·d_e·m/(P_t²·h))`: one pass's layer chain (half the rows' depth term)."""
    L, d, h, d_e = M.L, M.d, M.h, M.d_e
    return (L / P_p) * log(d**4 * d_e * m / (P_t**2 * h))


def _baseline(M: TheoryModel, B: float, m: float) -> _Baseline:
    """`state = L(16d² + 8E·d·d_e) + 4V·d`, `act = B·m·L·d`,
    `W0 = 6·B·m·L·(4d² + 2E_a·d·d_e + m·d)`, `D0 = 2L·log(d⁴·d_e·m/h) + log(B·m)`."""
    B, m = require_positive("B", B), require_positive("m", m)
    L, d, V, E, E_a, d_e = M.L, M.d, M.V, M.E, M.E_a, M.d_e
    body = 4 * d**2 + 2 * E_a * d * d_e + m * d
    chain = _layer_chain(M, m)
    return _Baseline(
        state=L * (16 * d**2 + 8 * E * d * d_e) + 4 * V * d,
        act=B * m * L * d,
        W0=6 * B * m * L * body,
        D0=2 * chain + log(B * m),
        chain=chain,
    )


def none(
    M: TheoryModel, B: int, m: float, *, zero: int | None = None, kappa: float | None = None
) -> IntraCost:
    """No parallelism (Tables VII/VIII, row "none"): W0, D0, M0 on one rank.

    Work in FLOPs, depth in log2 steps, memory in elements.
    """
    b = _baseline(M, B, m)
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    M0 = _zf(zero, 1) * state + _kappa(kappa) * act
    cell = _cell(W0, D0, M0, chain, kappa)
    return IntraCost(cell, cell)


def data(
    M: TheoryModel,
    B: int,
    m: float,
    P_d: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """Data parallelism over P_d ranks (Tables VII/VIII, row "data"; FLOPs, log2, elements).

    Per rank: `W0/P_d`, `2L·log(d⁴d_e·m/h) + log(B·m/P_d)`, `state + act/P_d`.
    Global: `W0`, `D0`, `P_d·state + act`.
    """
    b = _baseline(M, B, m)
    P_d = require_positive_int("P_d", P_d)
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    zf, k = _zf(zero, P_d), _kappa(kappa)
    return IntraCost(
        _cell(W0 / P_d, 2 * chain + log(B * m / P_d), zf * state + k * act / P_d, chain, kappa),
        _cell(W0, D0, P_d * zf * state + k * act, chain, kappa),
    )


def pipeline(
    M: TheoryModel,
    B: int,
    m: float,
    P_p: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """Pipeline parallelism, P_p stages (Tables VII/VIII, row "pipeline"; FLOPs, log2, elements).

    Per rank: `W0/P_p`, `2(L/P_p)·log(d⁴d_e·m/h) + log(B·m)`,
    `(L/P_p)(16d² + 8E·d·d_e) + 4V·d + act/P_p` (the embedding on a boundary stage).
    Global: `W0`, `D0`, `M0`.
    """
    b = _baseline(M, B, m)
    P_p = require_positive_int("P_p", P_p)
    L, d, V, E, d_e = M.L, M.d, M.V, M.E, M.d_e
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    chain_rank = _layer_chain(M, m, P_p=P_p)
    zf, k = _zf(zero, 1), _kappa(kappa)
    memory_rank = zf * ((L / P_p) * (16 * d**2 + 8 * E * d * d_e) + 4 * V * d) + k * act / P_p
    return IntraCost(
        _cell(W0 / P_p, 2 * chain_rank + log(B * m), memory_rank, chain_rank, kappa),
        _cell(W0, D0, zf * state + k * act, chain, kappa),
    )


def tensor(
    M: TheoryModel,
    B: int,
    m: float,
    P_t: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """Tensor parallelism over P_t ranks (Tables VII/VIII, row "tensor"; FLOPs, log2, elements).

    Per rank: `W0/P_t`, `2L·log(d⁴d_e·m/(P_t²·h)) + log(B·m)`, `state/P_t + act/P_t`.
    Global: `W0`, `D0` (Table VIII), `M0`.
    """
    b = _baseline(M, B, m)
    P_t = require_positive_int("P_t", P_t)
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    chain_rank = _layer_chain(M, m, P_t=P_t)
    zf, k = _zf(zero, 1), _kappa(kappa)
    return IntraCost(
        _cell(W0 / P_t, 2 * chain_rank + log(B * m), zf * state / P_t + k * act / P_t,
              chain_rank, kappa),
        _cell(W0, D0, zf * state + k * act, chain, kappa),
    )


def context(
    M: TheoryModel,
    B: int,
    m: float,
    P_c: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """Context parallelism, P_c ranks (Tables VII/VIII, row "context"; FLOPs, log2, elements).

    Per rank: `W0/P_c`, `2L·log(d⁴d_e·m/h) + log(B·m/P_c)`, `state + act/P_c`.
    Global: `W0`, `D0`, `P_c·state + act`.
    """
    b = _baseline(M, B, m)
    P_c = require_positive_int("P_c", P_c)
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    zf, k = _zf(zero, P_c), _kappa(kappa)
    return IntraCost(
        _cell(W0 / P_c, 2 * chain + log(B * m / P_c), zf * state + k * act / P_c, chain, kappa),
        _cell(W0, D0, P_c * zf * state + k * act, chain, kappa),
    )


def expert(
    M: TheoryModel,
    B: int,
    m: float,
    P_e: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """Isolated expert parallelism (Tables VII/VIII, row "expert"; FLOPs, log2 steps, elements).

    Only the expert FFNs are partitioned; every rank runs the shared dense path on the same
    tokens. Per rank: `6Bm·L(4d² + 2E_a·d·d_e/P_e + m·d)`, `2L·log(d⁴d_e·m/h) + log(B·m)`,
    `L(16d² + 8E·d·d_e/P_e) + 4V·d + act`. Global: `6Bm·L(P_e(4d² + m·d) + 2E_a·d·d_e)`, the
    same depth, `P_e(16L·d² + 4V·d + act) + 8L·E·d·d_e`.
    """
    b = _baseline(M, B, m)
    P_e = require_positive_int("P_e", P_e)
    L, d, V, E, E_a, d_e = M.L, M.d, M.V, M.E, M.E_a, M.d_e
    act, chain, depth = b.act, b.chain, b.D0
    zf_dense, zf_expert, k = _zf(zero, P_e), _zf(zero, 1), _kappa(kappa)
    work_rank = 6 * B * m * L * (4 * d**2 + 2 * E_a * d * d_e / P_e + m * d)
    memory_rank = (
        L * (zf_dense * 16 * d**2 + zf_expert * 8 * E * d * d_e / P_e)
        + zf_dense * 4 * V * d
        + k * act
    )
    work_global = 6 * B * m * L * (P_e * (4 * d**2 + m * d) + 2 * E_a * d * d_e)
    memory_global = (
        P_e * (zf_dense * (16 * L * d**2 + 4 * V * d) + k * act)
        + zf_expert * 8 * L * E * d * d_e
    )
    return IntraCost(
        _cell(work_rank, depth, memory_rank, chain, kappa),
        _cell(work_global, depth, memory_global, chain, kappa),
    )


def three_d(
    M: TheoryModel,
    B: int,
    m: float,
    P_d: int,
    P_p: int,
    P_t: int,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """3D parallelism (P_d, P_p, P_t) (Tables VII/VIII, row "3D"; FLOPs, log2 steps, elements).

    Per rank: `W0/(P_d P_p P_t)`, `2(L/P_p)·log(d⁴d_e·m/(P_t²h)) + log(B·m/P_d)`,
    `L(16d² + 8E·d·d_e)/(P_p P_t) + 4V·d/P_t + act/(P_d P_p P_t)`.
    Global: `W0`, `D0` (Table VIII), `P_d·state + act`.
    """
    b = _baseline(M, B, m)
    P_d = require_positive_int("P_d", P_d)
    P_p = require_positive_int("P_p", P_p)
    P_t = require_positive_int("P_t", P_t)
    L, d, V, E, d_e = M.L, M.d, M.V, M.E, M.d_e
    state, act, W0, D0, chain = b.state, b.act, b.W0, b.D0, b.chain
    chain_rank = _layer_chain(M, m, P_p=P_p, P_t=P_t)
    zf, k = _zf(zero, P_d), _kappa(kappa)
    memory_rank = (
        zf * (L * (16 * d**2 + 8 * E * d * d_e) / (P_p * P_t) + 4 * V * d / P_t)
        + k * act / (P_d * P_p * P_t)
    )
    return IntraCost(
        _cell(W0 / (P_d * P_p * P_t), 2 * chain_rank + log(B * m / P_d), memory_rank,
              chain_rank, kappa),
        _cell(W0, D0, P_d * zf * state + k * act, chain, kappa),
    )


def five_d(
    M: TheoryModel,
    B: int,
    m: float,
    P_d: int = 1,
    P_p: int = 1,
    P_t: int = 1,
    P_c: int = 1,
    P_e: int = 1,
    *,
    zero: int | None = None,
    kappa: float | None = None,
) -> IntraCost:
    """5D parallelism (P_d, P_p, P_t, P_c, P_e), EP ranks owning disjoint token shards
    (Tables VII/VIII, row "5D"; Appendix B-C8; FLOPs, log2 steps, elements).

    Per rank: `6·(B/(P_d P_e))·(m/P_c)·(L/P_p)·(4d² + 2E_a·d·d_e + m·d)/P_t`,
    `2(L/P_p)·log(d⁴d_e·m/(P_t²h)) + log(B·m/(P_d P_e P_c))`,
    `16L·d²/(P_p P_t) + 8L·E·d·d_e/(P_p P_t P_e) + 4V·d/P_t + act/(P_d P_e P_c P_p P_t)`.
    Global: `6Bm·L(4d² + 2E_a·d·d_e + m·d)`, `2L·log(d⁴d_e·m/h) + log(B·m)` (Table VIII),
    `P_d P_c P_e(16L·d² + 4V·d) + 8P_d P_c·L·E·d·d_e + act`.
    """
    b = _baseline(M, B, m)
    P_d = require_positive_int("P_d", P_d)
    P_p = require_positive_int("P_p", P_p)
    P_t = require_positive_int("P_t", P_t)
    P_c = require_positive_int("P_c", P_c)
    P_e = require_positive_int("P_e", P_e)
    L, d, V, E, E_a, d_e = M.L, M.d, M.V, M.E, M.E_a, M.d_e
    act, chain = b.act, b.chain
    chain_rank = _layer_chain(M, m, P_p=P_p, P_t=P_t)
    zf_dense, zf_expert = _zf(zero, P_d * P_c * P_e), _zf(zero, P_d * P_c)
    k = _kappa(kappa)
    work_rank = (
        6 * (B / (P_d * P_e)) * (m / P_c) * (L / P_p) * (4 * d**2 + 2 * E_a * d * d_e + m * d) / P_t
    )
    depth_rank = 2 * chain_rank + log(B * m / (P_d * P_e * P_c))
    memory_rank = (
        zf_dense * 16 * L * d**2 / (P_p * P_t)
        + zf_expert * 8 * L * E * d * d_e / (P_p * P_t * P_e)
        + zf_dense * 4 * V * d / P_t
        + k * act / (P_d * P_e * P_c * P_p * P_t)
    )
    work_global = 6 * B * m * L * (4 * d**2 + 2 * E_a * d * d_e + m * d)
    depth_global = b.D0  # Table VIII: 2L·log(d⁴d_e·m/h) + log(B·m), the baseline depth
    memory_global = (
        zf_dense * P_d * P_c * P_e * (16 * L * d**2 + 4 * V * d)
        + zf_expert * 8 * P_d * P_c * L * E * d * d_e
        + k * act
    )
    return IntraCost(
        _cell(work_rank, depth_rank, memory_rank, chain_rank, kappa),
        _cell(work_global, depth_global, memory_global, chain, kappa),
    )

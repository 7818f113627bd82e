"""Table IV: per-algorithm stage work, depth and memory (and the §4 stage primitives).

Source: Besta et al., Table IV and Appendix B-D1, restated in FORMULAS.md §2 and §4. A
`Scenario` names the algorithm family, the roles it runs (a mapping role → `TheoryModel`; a
role the scenario lacks is simply missing) and the batch shape. Every term of a missing role
is deleted, and an empty sum or maximum is 0 (FORMULAS.md conventions): a rule-based verifier
is "no `reward`", GRPO without KL is "no `reference`", SimPO/ORPO is DPO without `reference`.

The stage primitives carry §4's names (`w_g`, `d_g`, `m_g`, `w_a`, `d_a_sum`, `d_a_max`,
`d_a_sum_tp`, `m_a_sum`, `w_t`, `d_t_sum`, `d_t_max`, `m_t_sum`, `m_t_max`); PPO and GRPO are
the same formulas (GRPO has no critic), DPO takes Table IV's DPO column (assessment models
{π, ref}, training model {π}, N_seq = B, W_G = D_G = M_G = 0). Training work and depth are
multiplied by the number of epochs (FORMULAS.md §5).

Units: work in FLOPs, depth in log2 steps, memory in elements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from planner.theory import blocks
from planner.theory.shape import (
    Head,
    TheoryInputError,
    TheoryModel,
    require_positive,
    require_positive_int,
)

__all__ = [
    "ASSESSMENT_ROLES",
    "FAMILIES",
    "ROLES",
    "ROLE_HEAD",
    "TRAINING_ROLES",
    "Scenario",
    "StageCost",
    "d_a_max",
    "d_a_sum",
    "d_a_sum_tp",
    "d_g",
    "d_t_max",
    "d_t_sum",
    "m_a_sum",
    "m_assess_each",
    "m_g",
    "m_t_max",
    "m_t_sum",
    "m_train_each",
    "stage_assessment",
    "stage_generation",
    "stage_training",
    "table_iv",
    "w_a",
    "w_a_parts",
    "w_g",
    "w_g_parts",
    "w_t",
    "w_t_parts",
]

FAMILIES = ("ppo", "grpo", "dpo")
ROLES = ("actor", "reference", "reward", "critic")

ROLE_HEAD: Mapping[str, Head] = MappingProxyType(
    {
        "actor": Head.POLICY,
        "reference": Head.POLICY,
        "reward": Head.SCALAR_LAST,
        "critic": Head.SCALAR_EVERY,
    }
)
"""The head each role puts on its backbone (Table I)."""

ASSESSMENT_ROLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "ppo": ("reference", "reward", "critic"),
        "grpo": ("reference", "reward"),
        "dpo": ("actor", "reference"),
    }
)
"""Models run forward-only in Assessment (Table IV), before dropping the absent ones."""

TRAINING_ROLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"ppo": ("actor", "critic"), "grpo": ("actor",), "dpo": ("actor",)}
)
"""Models trained in Training (Table IV)."""

_ALLOWED_ROLES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "ppo": frozenset(ROLES),
        "grpo": frozenset({"actor", "reference", "reward"}),
        "dpo": frozenset({"actor", "reference"}),
    }
)


@dataclass(frozen=True)
class Scenario:
    """What one iteration runs: the family, its roles and the batch shape (Table IV).

    family: "ppo", "grpo" or "dpo". roles: role → TheoryModel; `actor` is required, `critic`
    is required by PPO and refused by GRPO and DPO, DPO refuses `reward`; other roles may be
    missing. B: prompts per step (DPO: preference pairs). K: samples per prompt (ignored by
    DPO, stored as 1). S: prompt length (mean). T: response length (an integer, the decode
    steps). epochs: passes over the batch in Training (`ppo_epochs`).
    """

    family: str
    roles: Mapping[str, TheoryModel]
    B: int
    K: int
    S: float
    T: int
    epochs: int = 1

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise TheoryInputError(
                f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}"
            )
        if not isinstance(self.roles, Mapping):
            raise TheoryInputError("roles must be a mapping role → TheoryModel")
        unknown = sorted(set(self.roles) - set(ROLES))
        if unknown:
            raise TheoryInputError(
                f"unknown role(s) {', '.join(map(repr, unknown))}; roles are {', '.join(ROLES)}"
            )
        for role, model in self.roles.items():
            if not isinstance(model, TheoryModel):
                raise TheoryInputError(f"role {role!r} must be a TheoryModel, got {model!r}")
        if "actor" not in self.roles:
            raise TheoryInputError("every scenario needs an `actor` model")
        if self.family == "ppo" and "critic" not in self.roles:
            raise TheoryInputError("PPO needs a `critic` model (GRPO is PPO without a critic)")
        refused = sorted(set(self.roles) - _ALLOWED_ROLES[self.family])
        if refused:
            raise TheoryInputError(
                f"{self.family.upper()} has no {', '.join(map(repr, refused))} model; "
                "remove it from the scenario"
            )
        object.__setattr__(self, "roles", MappingProxyType(dict(self.roles)))
        object.__setattr__(self, "B", require_positive_int("B", self.B))
        k = 1 if self.family == "dpo" else require_positive_int("K", self.K)
        object.__setattr__(self, "K", k)
        object.__setattr__(self, "S", require_positive("S", self.S))
        object.__setattr__(self, "T", require_positive_int("T", self.T))
        object.__setattr__(self, "epochs", require_positive_int("epochs", self.epochs))

    @property
    def m(self) -> float:
        """m = S + T, tokens per sequence."""
        return self.S + self.T

    @property
    def n_seq(self) -> int:
        """N_seq, sequences per step: B·K for PPO/GRPO, B for DPO (K is 1 there)."""
        return self.B * self.K

    @property
    def actor(self) -> TheoryModel:
        """π_θ."""
        return self.roles["actor"]

    @property
    def generates(self) -> bool:
        """False for DPO, which has no Generation stage (offline data)."""
        return self.family != "dpo"

    @property
    def assessment_roles(self) -> tuple[str, ...]:
        """The assessment models this scenario has, in Table IV's order."""
        return tuple(r for r in ASSESSMENT_ROLES[self.family] if r in self.roles)

    @property
    def training_roles(self) -> tuple[str, ...]:
        """The trainable models this scenario has, in Table IV's order."""
        return tuple(r for r in TRAINING_ROLES[self.family] if r in self.roles)


def _max(values: list[float]) -> float:
    """Maximum with the paper's convention that an empty maximum is 0."""
    return max(values, default=0.0)


# --- Generation ------------------------------------------------------------------------------


def w_g_parts(sc: Scenario) -> dict[str, float]:
    """W_G split into `prefill` (B·K·C_prefill) and `decode` (B·K·C_decode), FLOPs.

    Empty for DPO (no Generation).
    """
    if not sc.generates:
        return {}
    B, K, S, T, pi = sc.B, sc.K, sc.S, sc.T, sc.actor
    return {
        "prefill": B * K * blocks.c_prefill(pi, S),
        "decode": B * K * blocks.c_decode(pi, S, T),
    }


def w_g(sc: Scenario) -> float:
    """W_G = B·K·C_gen(π), FLOPs (Table IV; §4). 0 for DPO."""
    return math.fsum(w_g_parts(sc).values())


def d_g(sc: Scenario) -> float:
    """D_G = D_gen(π), log2 steps (Table IV; §4). 0 for DPO."""
    return blocks.d_gen(sc.actor, sc.S, sc.T) if sc.generates else 0.0


def m_g(sc: Scenario) -> float:
    """M_G = |π| + B·K·M_KV, elements (Table IV; §4). 0 for DPO."""
    if not sc.generates:
        return 0.0
    pi = sc.actor
    return blocks.params(pi, Head.POLICY) + sc.B * sc.K * blocks.m_kv(pi, sc.m)


# --- Assessment ------------------------------------------------------------------------------


def w_a_parts(sc: Scenario) -> dict[str, float]:
    """W_A by assessment model X: N_seq·m·C_f(X), FLOPs (Table IV).

    PPO: B·K·m·C_f(X) for X in {ref, R, V}; GRPO: {ref, R}; DPO: B·m·C_f(X) for X in {ref, π}.
    """
    N, m = sc.n_seq, sc.m
    return {
        r: N * m * blocks.c_f_tok(sc.roles[r], ROLE_HEAD[r], m) for r in sc.assessment_roles
    }


def w_a(sc: Scenario) -> float:
    """W_A = N_seq·m·Σ_X C_f(X), FLOPs (Table IV; §4)."""
    return math.fsum(w_a_parts(sc).values())


def d_a_sum(sc: Scenario) -> float:
    """D_AΣ = Σ_X D_f(X; m), co-located sequential assessment, log2 steps (§4)."""
    return math.fsum(blocks.d_f(sc.roles[r], sc.m) for r in sc.assessment_roles)


def d_a_max(sc: Scenario) -> float:
    """D_Amax = max_X D_f(X; m), disaggregated concurrent assessment, log2 steps (§4)."""
    return _max([blocks.d_f(sc.roles[r], sc.m) for r in sc.assessment_roles])


def d_a_sum_tp(sc: Scenario, P_t: int) -> float:
    """D_AΣ^TP = Σ_X D_f^TP(X; m), co-located assessment under P_t-way TP, log2 steps (§4)."""
    return math.fsum(blocks.d_f_tp(sc.roles[r], sc.m, P_t) for r in sc.assessment_roles)


def m_a_sum(sc: Scenario) -> float:
    """M_AΣ, co-located assessment memory, elements (Table IV; §4).

    PPO/GRPO: `Σ_X |X| + B·K·m·max_X M_Inf(X)`. DPO: `|π| + |ref| + B·m·L_π d_π` (the policy's
    forward keeps its activations for the backward pass).
    """
    N, m = sc.n_seq, sc.m
    states = math.fsum(blocks.params(sc.roles[r], ROLE_HEAD[r]) for r in sc.assessment_roles)
    if sc.family == "dpo":
        return states + N * m * blocks.m_act(sc.actor)
    return states + N * m * _max([blocks.m_inf(sc.roles[r]) for r in sc.assessment_roles])


# --- Training --------------------------------------------------------------------------------


def w_t_parts(sc: Scenario) -> dict[str, float]:
    """W_T by trainable model X: epochs·N_seq·m·C_tr(X), FLOPs (Table IV; §5)."""
    N, m, E = sc.n_seq, sc.m, sc.epochs
    return {
        r: E * N * m * blocks.c_tr_tok(sc.roles[r], ROLE_HEAD[r], m) for r in sc.training_roles
    }


def w_t(sc: Scenario) -> float:
    """W_T = epochs·N_seq·m·Σ_X C_tr(X), FLOPs (Table IV; §4, §5)."""
    return math.fsum(w_t_parts(sc).values())


def d_t_sum(sc: Scenario) -> float:
    """D_TΣ = epochs·Σ_X D_tr(X), sequential actor/critic training, log2 steps (§4, §5)."""
    return sc.epochs * math.fsum(
        blocks.d_tr(sc.roles[r], sc.m, sc.n_seq) for r in sc.training_roles
    )


def d_t_max(sc: Scenario) -> float:
    """D_Tmax = epochs·max_X D_tr(X), concurrent actor/critic training, log2 steps (§4, §5)."""
    return sc.epochs * _max([blocks.d_tr(sc.roles[r], sc.m, sc.n_seq) for r in sc.training_roles])


def _m_train(sc: Scenario, role: str) -> float:
    """`4|X| + N_seq·m·L_X d_X`: Adam model state plus stored activations of one trainable model."""
    X = sc.roles[role]
    return 4 * blocks.params(X, ROLE_HEAD[role]) + sc.n_seq * sc.m * blocks.m_act(X)


def m_t_sum(sc: Scenario) -> float:
    """M_TΣ = `4(|π| + |V|) + N_seq·m·(L_π d_π + L_V d_V)`, elements (Table IV; §4)."""
    return math.fsum(_m_train(sc, r) for r in sc.training_roles)


def m_t_max(sc: Scenario) -> float:
    """M_Tmax = `max(4|π| + N_seq·m·L_π d_π, 4|V| + N_seq·m·L_V d_V)`, elements (§4)."""
    return _max([_m_train(sc, r) for r in sc.training_roles])


def m_train_each(sc: Scenario) -> dict[str, float]:
    """`4|X| + N_seq·m·L_X d_X` per trainable model (a disaggregated training group), elements."""
    return {r: _m_train(sc, r) for r in sc.training_roles}


def m_assess_each(sc: Scenario) -> dict[str, float]:
    """`|X| + N_seq·m·M_Inf(X)` per assessment model (a disaggregated group), elements (§4)."""
    N, m = sc.n_seq, sc.m
    return {
        r: blocks.params(sc.roles[r], ROLE_HEAD[r]) + N * m * blocks.m_inf(sc.roles[r])
        for r in sc.assessment_roles
    }


# --- Table IV view ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StageCost:
    """One Table IV stage: work (FLOPs), depth co-located (sum) and disaggregated (max),
    memory (elements, co-located) and the work split by term or model (sums to `work`)."""

    work: float
    depth: float
    depth_disaggregated: float
    memory: float
    work_parts: Mapping[str, float]

    def as_dict(self) -> dict[str, object]:
        """JSON form: `{"work", "depth", "depth_disaggregated", "memory", "work_parts"}`."""
        return {
            "work": self.work,
            "depth": self.depth,
            "depth_disaggregated": self.depth_disaggregated,
            "memory": self.memory,
            "work_parts": dict(self.work_parts),
        }


def stage_generation(sc: Scenario) -> StageCost:
    """Generation (Table IV): `B·K·C_gen(π)`, `D_gen(π)`, `|π| + B·K·M_KV`. Not for DPO."""
    if not sc.generates:
        raise TheoryInputError("DPO has no Generation stage (its data is offline)")
    D = d_g(sc)
    return StageCost(w_g(sc), D, D, m_g(sc), w_g_parts(sc))


def stage_assessment(sc: Scenario) -> StageCost:
    """Assessment (Table IV): forward passes of the assessment models; depth sum or max."""
    return StageCost(w_a(sc), d_a_sum(sc), d_a_max(sc), m_a_sum(sc), w_a_parts(sc))


def stage_training(sc: Scenario) -> StageCost:
    """Training (Table IV): forward + backward of the trainable models; depth sum or max.

    Memory is the co-located M_TΣ. DPO keeps Table IV's entries: its policy forward appears
    here and in Assessment (the Table IX totals count it once).
    """
    return StageCost(w_t(sc), d_t_sum(sc), d_t_max(sc), m_t_sum(sc), w_t_parts(sc))


def table_iv(sc: Scenario) -> dict[str, StageCost]:
    """The stages of one iteration, in order; DPO has no `generation` entry."""
    stages: dict[str, StageCost] = {}
    if sc.generates:
        stages["generation"] = stage_generation(sc)
    stages["assessment"] = stage_assessment(sc)
    stages["training"] = stage_training(sc)
    return stages

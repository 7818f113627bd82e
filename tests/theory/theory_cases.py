"""Shared cases for the theory tests: the tiny hand-checkable model, tolerances, strategies.

The tiny model (L=2, d=8, d_ff=16, h=2, V=10) with S=3, T=4 (m=7) keeps every value small
enough to check on paper; the expected values in the tests are written as FORMULAS.md's
arithmetic, literally, never by calling the code under test.
"""

from __future__ import annotations

import math

from hypothesis import settings
from hypothesis import strategies as st

from planner.theory.shape import TheoryModel
from planner.theory.stages import Scenario

TINY = TheoryModel(L=2, d=8, d_ff=16, h=2, V=10)
S, T = 3, 4
m = S + T

REL = 1e-9

# Fast, deterministic-enough property runs: the whole theory suite stays well under 30 s.
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)


def close(a: float, b: float, rel: float = REL) -> bool:
    """Relative closeness with a tiny absolute floor for values that are exactly 0."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


@st.composite
def models(draw: st.DrawFn, moe: bool | None = None) -> TheoryModel:
    """Random shapes with d a multiple of h (d_k ≥ 1), dense or MoE."""
    h = draw(st.sampled_from([1, 2, 4, 8, 16]))
    d = h * draw(st.integers(1, 64))
    L = draw(st.integers(1, 12))
    d_ff = draw(st.integers(1, 512))
    V = draw(st.integers(1, 5000))
    is_moe = draw(st.booleans()) if moe is None else moe
    if not is_moe:
        return TheoryModel(L=L, d=d, d_ff=d_ff, h=h, V=V)
    E = draw(st.integers(2, 16))
    E_a = draw(st.integers(1, E))
    d_e = draw(st.integers(1, 256))
    return TheoryModel(L=L, d=d, d_ff=d_ff, h=h, V=V, E=E, E_a=E_a, d_e=d_e)


degrees = st.integers(1, 8)

# (family, frozen assessment roles) of the online algorithms; PPO adds its critic itself.
ONLINE_ROLE_SETS = st.sampled_from([
    (family, roles) for family in ("ppo", "grpo")
    for roles in (("reference", "reward"), ("reference",), ("reward",), ())
])


def online_draws(max_s: int, max_t: int) -> tuple:
    """The strategies of an online scenario's draws, in `online_scenario`'s order: the family
    and optional roles, actor, reference, reward and critic shapes, B, K, S (1–`max_s`),
    T (1–`max_t`), E."""
    return (ONLINE_ROLE_SETS, models(), models(), models(), models(), st.integers(1, 8),
            st.integers(1, 4), st.integers(1, max_s), st.integers(1, max_t), st.integers(1, 3))


def online_scenario(family_roles, actor, ref, R, V, B, K, S, T, E):
    """The scenario of `online_draws`' values, and its roles by name."""
    family, optional = family_roles
    roles = {"actor": actor}
    if "reference" in optional:
        roles["reference"] = ref
    if "reward" in optional:
        roles["reward"] = R
    if family == "ppo":
        roles["critic"] = V
    return Scenario(family, roles, B, K, S, T, E), roles

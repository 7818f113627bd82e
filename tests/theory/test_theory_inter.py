"""Table IX inter-model configurations: hand values, the literal transcription over random
shapes and role sets, and the orderings the formulas imply."""

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from theory_cases import PROPERTY, TINY, close, models, online_draws, online_scenario
from theory_cases import S as S0
from theory_cases import T as T0
from theory_literal import Dtr, dpo_table_ix, ppo_table_ix

from planner.theory import inter
from planner.theory.shape import TheoryInputError
from planner.theory.stages import Scenario

log = math.log2
B0, K0 = 3, 2
PPO_ALL = {"actor": TINY, "reference": TINY, "reward": TINY, "critic": TINY}


def _rows(sc, P_t=8):
    return {k: (v.work, v.depth, v.memory) for k, v in inter.configurations(sc, P_t).items()}


def test_ppo_baseline_hand_values():
    sc = Scenario("ppo", PPO_ALL, B0, K0, S0, T0)
    row = inter.baseline(sc)
    assert close(row.work, 85056 + 293760 + 594720)
    df = 33 + 2 * log(7)
    assert close(row.depth, (132 + 2 * log(360)) + 3 * df + 2 * (2 * df + log(42)))
    assert row.memory == max(2448, 3664, 10208)


def test_ppo_shared_actor_critic_hand_values():
    sc = Scenario("ppo", PPO_ALL, B0, K0, S0, T0)
    row = inter.shared_actor_critic(sc)
    # C_f(π_SH) = 2432 + 16; W = 6·14176 + 42·(2432 + 2272 + 16/7 + 2448) + 42·3·2448
    assert close(row.work, 85056 + 42 * (2432 + 2272 + 16 / 7 + 2448) + 42 * 3 * 2448)
    # |π_SH| = 1112: max(1112 + 1344, 1104 + 1112 + 1112 + 42·8, 4·1112 + 42·16)
    assert row.memory == max(1112 + 1344, 1104 + 1112 + 1112 + 336, 4 * 1112 + 672)


def test_configuration_sets_per_family():
    ppo = Scenario("ppo", PPO_ALL, B0, K0, S0, T0)
    grpo = Scenario("grpo", {"actor": TINY}, B0, K0, S0, T0)
    dpo = Scenario("dpo", {"actor": TINY, "reference": TINY}, B0, 1, S0, T0)
    assert list(inter.configurations(ppo, 8)) == list(inter.CONFIGURATIONS)
    assert list(inter.configurations(grpo, 8)) == [
        c for c in inter.CONFIGURATIONS if c != "shared_actor_critic"
    ]
    assert list(inter.configurations(dpo, 8)) == list(inter.DPO_CONFIGURATIONS)
    with pytest.raises(TheoryInputError, match="critic"):
        inter.shared_actor_critic(grpo)
    with pytest.raises(TheoryInputError, match="DPO"):
        inter.baseline(dpo)
    with pytest.raises(TheoryInputError, match="DPO"):
        inter.dpo_baseline(grpo)


def test_dpo_hand_values():
    sc = Scenario("dpo", {"actor": TINY, "reference": TINY}, B0, 1, S0, T0)
    df = 33 + 2 * log(7)
    base = inter.dpo_baseline(sc)
    # B·m·[C_f(ref) + C_tr(π)] = 21·(2432 + 7296): the policy forward counted once
    assert base.work == 204288
    assert close(base.depth, df + 2 * df + log(21))
    assert base.memory == max(1104 + 1104 + 336, 4416 + 336)
    dis = inter.dpo_disaggregated(sc)
    assert close(dis.depth, df + df + log(21))  # max(D_f(π), D_f(ref)) + D_b(π)
    assert dis.memory == max(1104 + 21 * 8, 4416 + 336)
    hyb = inter.dpo_hybrid(sc, 2)
    assert close(hyb.depth, (2 * (13 + log(7)) + 2) + 2 * df + log(21))


def test_dpo_epochs_add_full_training_passes():
    one = Scenario("dpo", {"actor": TINY, "reference": TINY}, B0, 1, S0, T0, epochs=1)
    two = Scenario("dpo", {"actor": TINY, "reference": TINY}, B0, 1, S0, T0, epochs=2)
    d_tr = Dtr(TINY, 7, 3)
    for row in ("baseline", "disaggregated", "hybrid"):
        a, b = inter.configurations(one, 8)[row], inter.configurations(two, 8)[row]
        assert close(b.work - a.work, 21 * 7296)
        assert close(b.depth - a.depth, d_tr)
        assert b.memory == a.memory


# --- properties -------------------------------------------------------------------------------


online = (*online_draws(48, 16), st.integers(1, 8))


@PROPERTY
@given(*online)
def test_table_ix_matches_literal(fam, actor, ref, R, V, B, K, S, T, E, P_t):
    sc, roles = online_scenario(fam, actor, ref, R, V, B, K, S, T, E)
    lit = ppo_table_ix(
        actor, roles.get("reference"), roles.get("reward"), roles.get("critic"),
        B, K, S, T, E, P_t,
    )
    got = _rows(sc, P_t)
    assert list(got) == list(lit)
    for name, cell in lit.items():
        for quantity, a, b in zip(("work", "depth", "memory"), got[name], cell, strict=True):
            assert close(a, b), (name, quantity)


@PROPERTY
@given(*online)
def test_orderings_implied_by_the_rows(fam, actor, ref, R, V, B, K, S, T, E, P_t):
    sc, _ = online_scenario(fam, actor, ref, R, V, B, K, S, T, E)
    rows = inter.configurations(sc, P_t)
    base = rows["baseline"]
    eps = 1e-9 * base.depth
    # placement, hybrid layouts, fusion and asynchrony change depth and memory, not work
    for name in ("disaggregated", "hybrid", "stage_fusion", "async", "combined"):
        assert close(rows[name].work, base.work), name
    # sums become maxima: never deeper than the sequential baseline
    assert rows["disaggregated"].depth <= base.depth + eps
    assert rows["hybrid"].depth <= base.depth + eps
    assert rows["stage_fusion"].depth <= rows["disaggregated"].depth + eps
    assert rows["async"].depth <= rows["disaggregated"].depth + eps
    assert rows["combined"].depth <= rows["async"].depth + eps
    # no configuration removes the decode chain of the (TP-sharded) generation
    from theory_literal import Df_tp, Dgen_tp

    chain_tp = Dgen_tp(actor, S, T, P_t) - Df_tp(actor, S, P_t)
    for name, row in rows.items():
        assert row.depth >= chain_tp - eps, name


@PROPERTY
@given(models(), models(), models(), st.integers(1, 8), st.integers(1, 4), st.integers(1, 48),
       st.integers(1, 16), st.integers(1, 3))
def test_shared_actor_critic_cuts_work_iff_the_critic_backbone_outweighs_the_heads(
    actor, ref, R, B, K, S, T, E
):
    # critic with the actor's architecture: W_SH − W_base = B·K·m·(2V·d − 6E·L·body)
    sc = Scenario("ppo", {"actor": actor, "reference": ref, "reward": R, "critic": actor},
                  B, K, S, T, E)
    m = S + T
    body = 4 * actor.d**2 + 2 * actor.E_a * actor.d * actor.d_e + m * actor.d
    delta = B * K * m * (2 * actor.V * actor.d - 6 * E * actor.L * body)
    assume(abs(delta) > 1e-6 * inter.baseline(sc).work)
    shared, base = inter.shared_actor_critic(sc), inter.baseline(sc)
    assert close(shared.work - base.work, delta, rel=1e-6)
    assert (shared.work < base.work) == (delta < 0)


@PROPERTY
@given(models(), models(), st.booleans(), st.integers(1, 16), st.integers(1, 48),
       st.integers(1, 48), st.integers(1, 8))
def test_dpo_rows_match_literal(actor, ref, with_ref, B, S, T, P_t):
    roles = {"actor": actor} | ({"reference": ref} if with_ref else {})
    sc = Scenario("dpo", roles, B, 1, S, T)
    lit = dpo_table_ix(actor, ref if with_ref else None, B, S, T, P_t)
    got = _rows(sc, P_t)
    assert list(got) == list(lit)
    for name, cell in lit.items():
        for a, b in zip(got[name], cell, strict=True):
            assert close(a, b), name

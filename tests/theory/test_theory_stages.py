"""Table IV stage costs: hand values on the tiny model, the literal transcription over random
shapes, deletions (verifier, no reference), epochs, and breakdowns summing to totals."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from theory_cases import PROPERTY, TINY, close, models, online_draws, online_scenario
from theory_cases import S as S0
from theory_cases import T as T0
from theory_literal import Cf_pi, Df, Dtr, P_pi, ppo_terms

from planner.theory import stages
from planner.theory.shape import TheoryInputError
from planner.theory.stages import Scenario

log = math.log2
B0, K0 = 3, 2  # N_seq = 6, N_seq·m = 42

PPO_ALL = {"actor": TINY, "reference": TINY, "reward": TINY, "critic": TINY}


def test_ppo_stages_hand_values():
    sc = Scenario("ppo", PPO_ALL, B0, K0, S0, T0)
    # W_G = B·K·C_gen = 6·(6592 + 7584)
    assert stages.w_g(sc) == 85056
    # W_A = 42·[C_f(ref) + C_f(R) + C_f(V)] = 42·(2432 + 2272 + 16/7 + 2288)
    assert close(stages.w_a(sc), 293760)
    # W_T = 42·[3·2432 + 3·2288]
    assert close(stages.w_t(sc), 594720)
    # M_G = |π| + B·K·M_KV = 1104 + 6·224
    assert stages.m_g(sc) == 2448
    # M_AΣ = |ref| + |R| + |V| + 42·max(d) = 1104 + 1112 + 1112 + 336
    assert stages.m_a_sum(sc) == 3664
    # M_TΣ = 4(1104 + 1112) + 42·(16 + 16)
    assert stages.m_t_sum(sc) == 10208
    # M_Tmax = max(4·1104 + 42·16, 4·1112 + 42·16)
    assert stages.m_t_max(sc) == 4 * 1112 + 672
    df = 33 + 2 * log(7)
    assert close(stages.d_a_sum(sc), 3 * df)
    assert close(stages.d_a_max(sc), df)
    assert close(stages.d_t_sum(sc), 2 * (2 * df + log(42)))
    assert close(stages.d_t_max(sc), 2 * df + log(42))
    assert close(stages.d_g(sc), 132 + 2 * log(360))


def test_grpo_is_ppo_without_critic_terms():
    sc = Scenario("grpo", {"actor": TINY, "reference": TINY, "reward": TINY}, B0, K0, S0, T0)
    assert close(stages.w_a(sc), 42 * (2432 + 2272 + 16 / 7))
    assert stages.w_t(sc) == 42 * 3 * 2432
    assert stages.m_a_sum(sc) == 1104 + 1112 + 336
    assert stages.m_t_sum(sc) == 4 * 1104 + 42 * 16


def test_grpo_with_verifier_and_no_reference_has_empty_assessment():
    sc = Scenario("grpo", {"actor": TINY}, B0, K0, S0, T0)
    cost = stages.stage_assessment(sc)
    assert (cost.work, cost.depth, cost.depth_disaggregated, cost.memory) == (0, 0, 0, 0)
    assert dict(cost.work_parts) == {}


def test_dpo_stages_hand_values():
    sc = Scenario("dpo", {"actor": TINY, "reference": TINY}, B0, 99, S0, T0)
    assert sc.K == 1 and sc.n_seq == 3  # K is ignored by DPO
    # Assessment: B·m·[C_f(ref) + C_f(π)] = 21·4864; |π| + |ref| + B·m·L_π d_π
    assert stages.w_a(sc) == 102144
    assert stages.m_a_sum(sc) == 1104 + 1104 + 21 * 16
    # Training: B·m·C_tr(π); 4|π| + B·m·L_π d_π
    assert stages.w_t(sc) == 21 * 7296
    assert stages.m_t_sum(sc) == 4416 + 336
    # no Generation
    assert (stages.w_g(sc), stages.d_g(sc), stages.m_g(sc)) == (0, 0, 0)
    assert list(stages.table_iv(sc)) == ["assessment", "training"]
    with pytest.raises(TheoryInputError, match="Generation"):
        stages.stage_generation(sc)


def test_simpo_like_dpo_without_reference():
    sc = Scenario("dpo", {"actor": TINY}, B0, 1, S0, T0)
    assert stages.w_a(sc) == 21 * 2432
    assert stages.m_a_sum(sc) == 1104 + 21 * 16


def test_epochs_multiply_training_work_and_depth_only():
    one = Scenario("ppo", PPO_ALL, B0, K0, S0, T0, epochs=1)
    three = Scenario("ppo", PPO_ALL, B0, K0, S0, T0, epochs=3)
    assert close(stages.w_t(three), 3 * stages.w_t(one))
    assert close(stages.d_t_sum(three), 3 * stages.d_t_sum(one))
    assert close(stages.d_t_max(three), 3 * stages.d_t_max(one))
    assert stages.m_t_sum(three) == stages.m_t_sum(one)
    assert stages.w_a(three) == stages.w_a(one)


@pytest.mark.parametrize(
    ("family", "roles", "match"),
    [
        ("sft", {"actor": TINY}, "family"),
        ("ppo", {"actor": TINY}, "critic"),
        ("grpo", {"actor": TINY, "critic": TINY}, "critic"),
        ("dpo", {"actor": TINY, "reward": TINY}, "reward"),
        ("ppo", {"critic": TINY}, "actor"),
        ("ppo", {"actor": TINY, "critic": TINY, "judge": TINY}, "judge"),
        ("grpo", {"actor": "qwen"}, "TheoryModel"),
    ],
)
def test_scenario_refuses_inconsistent_roles(family, roles, match):
    with pytest.raises(TheoryInputError, match=match):
        Scenario(family, roles, B0, K0, S0, T0)


def test_scenario_refuses_bad_batch_shape():
    with pytest.raises(TheoryInputError, match="T"):
        Scenario("grpo", {"actor": TINY}, B0, K0, S0, 2.5)
    with pytest.raises(TheoryInputError, match="B"):
        Scenario("grpo", {"actor": TINY}, 0, K0, S0, T0)


# --- properties -------------------------------------------------------------------------------



@PROPERTY
@given(*online_draws(64, 24))
def test_ppo_grpo_stage_terms_match_literal(
    family_roles, actor, ref, R, V, B, K, S, T, E
):
    sc, roles = online_scenario(family_roles, actor, ref, R, V, B, K, S, T, E)
    lit = ppo_terms(
        actor, roles.get("reference"), roles.get("reward"), roles.get("critic"), B, K, S, T, E
    )
    for name in ("w_g", "d_g", "m_g", "w_a", "d_a_sum", "d_a_max", "m_a_sum", "w_t",
                 "d_t_sum", "d_t_max", "m_t_sum", "m_t_max"):
        key = name.upper()[:3] + name[3:]
        assert close(getattr(stages, name)(sc), lit[key]), name
    # breakdowns sum to their totals, stage by stage
    for cost in stages.table_iv(sc).values():
        assert close(math.fsum(cost.work_parts.values()), cost.work)
        assert cost.depth_disaggregated <= cost.depth + 1e-9


@PROPERTY
@given(models(), models(), st.booleans(), st.integers(1, 16), st.integers(1, 64),
       st.integers(1, 64), st.integers(1, 3))
def test_dpo_stage_terms_match_literal(actor, ref, with_ref, B, S, T, E):
    roles = {"actor": actor} | ({"reference": ref} if with_ref else {})
    sc = Scenario("dpo", roles, B, 1, S, T, E)
    m = S + T
    assess = [actor] + ([ref] if with_ref else [])
    assert close(stages.w_a(sc), B * m * sum(Cf_pi(X, m) for X in assess))
    assert close(stages.d_a_sum(sc), sum(Df(X, m) for X in assess))
    assert close(stages.m_a_sum(sc), sum(P_pi(X) for X in assess) + B * m * actor.L * actor.d)
    assert close(stages.w_t(sc), E * B * m * 3 * Cf_pi(actor, m))
    assert close(stages.d_t_sum(sc), E * Dtr(actor, m, B))
    assert close(stages.m_t_sum(sc), 4 * P_pi(actor) + B * m * actor.L * actor.d)


@PROPERTY
@given(models(), st.integers(1, 8), st.integers(1, 4), st.integers(1, 64), st.integers(1, 24))
def test_generation_work_is_prefill_plus_decode(actor, B, K, S, T):
    sc = Scenario("grpo", {"actor": actor}, B, K, S, T)
    parts = stages.w_g_parts(sc)
    assert set(parts) == {"prefill", "decode"}
    assert close(stages.w_g(sc), parts["prefill"] + parts["decode"])

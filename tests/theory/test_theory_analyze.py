"""The analyze JSON (DESIGN.md, "Interfaces other tools rely on"): shapes, absences, agreement
with the table modules, and readings computed from the numbers."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from theory_cases import PROPERTY, TINY, close, degrees, models

from planner.theory import (
    analyze_intra,
    analyze_pipeline,
    blocks,
    inter,
    intra,
    readings,
    stages,
)
from planner.theory.shape import TheoryInputError, TheoryModel
from planner.theory.stages import Scenario

ACTOR = TheoryModel(L=4, d=64, d_ff=256, h=4, V=1000)
SMALL_CRITIC = TheoryModel(L=1, d=8, d_ff=16, h=2, V=1000)
PPO_ROLES = {"actor": ACTOR, "reference": ACTOR, "reward": ACTOR, "critic": ACTOR}
DESIGN_ACTOR_KEYS = {"params", "cf_tok", "c_prefill", "c_decode", "c_gen", "m_kv", "d_f", "d_gen"}
GENERATION_KEYS = {"c_prefill", "c_decode", "c_gen", "m_kv", "d_gen", "d_gen_tp",
                   "d_decode_chain", "d_decode_chain_tp"}
CELL = {"work", "depth", "memory"}


def _numbers(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _numbers(v)
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        yield tree


def test_ppo_shape():
    result = analyze_pipeline("ppo", PPO_ROLES, 8, 4, 32, 16)
    theory = result["theory"]
    assert set(result) == {"theory"}
    assert {"building_blocks", "stages", "inter_model"} <= set(theory)
    assert list(theory["building_blocks"]) == ["actor", "reference", "reward", "critic"]
    assert set(theory["building_blocks"]["actor"]) >= DESIGN_ACTOR_KEYS | GENERATION_KEYS
    for role in ("reference", "reward", "critic"):
        block = theory["building_blocks"][role]
        assert {"params", "cf_tok", "d_f"} <= set(block)
        assert not GENERATION_KEYS & set(block), role
    assert list(theory["stages"]) == ["generation", "assessment", "training"]
    for stage in theory["stages"].values():
        assert {"work", "depth", "memory"} <= set(stage)
    assert list(theory["inter_model"]) == list(inter.CONFIGURATIONS)
    for cell in theory["inter_model"].values():
        assert set(cell) == CELL
    assert json.loads(json.dumps(result)) == result
    assert all(math.isfinite(x) for x in _numbers(result))


def test_grpo_with_verifier_and_no_reference_lacks_those_roles_and_shared_critic():
    theory = analyze_pipeline("grpo", {"actor": ACTOR}, 8, 4, 32, 16)["theory"]
    assert list(theory["building_blocks"]) == ["actor"]
    assert "shared_actor_critic" not in theory["inter_model"]
    assessment = theory["stages"]["assessment"]
    assert (assessment["work"], assessment["depth"], assessment["memory"]) == (0, 0, 0)


def test_dpo_has_no_generation_anywhere():
    theory = analyze_pipeline("dpo", {"actor": ACTOR, "reference": ACTOR}, 8, 4, 32, 16)["theory"]
    assert "generation" not in theory["stages"]
    assert list(theory["inter_model"]) == ["baseline", "disaggregated", "hybrid"]
    assert not GENERATION_KEYS & set(theory["building_blocks"]["actor"])
    assert "K" not in theory["inputs"]


def test_numbers_are_the_table_modules_numbers():
    result = analyze_pipeline("ppo", PPO_ROLES, 8, 4, 32, 16, ppo_epochs=2, gpus_per_node=4)
    sc = Scenario("ppo", PPO_ROLES, 8, 4, 32, 16, 2)
    for name, cost in stages.table_iv(sc).items():
        assert result["theory"]["stages"][name] == cost.as_dict()
    for name, cell in inter.configurations(sc, 4).items():
        assert result["theory"]["inter_model"][name] == cell.as_dict()
    actor = result["theory"]["building_blocks"]["actor"]
    assert close(actor["c_gen"], actor["c_prefill"] + actor["c_decode"])
    assert close(actor["d_gen"] - actor["d_decode_chain"], blocks.d_f(ACTOR, 32))  # D_f(π; S)
    assert actor["d_gen"] == blocks.d_gen(ACTOR, 32, 16)


def test_bad_inputs_raise_input_errors():
    with pytest.raises(TheoryInputError, match="gpus_per_node"):
        analyze_pipeline("grpo", {"actor": ACTOR}, 8, 4, 32, 16, gpus_per_node=0)
    with pytest.raises(TheoryInputError, match="critic"):
        analyze_pipeline("ppo", {"actor": ACTOR}, 8, 4, 32, 16)
    with pytest.raises(TheoryInputError, match="analyze_pipeline"):
        readings({"per_rank": {}})


# --- readings -----------------------------------------------------------------------------------


def test_readings_cover_every_stage_and_configuration():
    result = analyze_pipeline("ppo", PPO_ROLES, 8, 4, 32, 256)
    lines = readings(result)
    expected = {f"stages.{s}" for s in result["theory"]["stages"]}
    expected |= {f"inter_model.{c}" for c in result["theory"]["inter_model"]}
    assert set(lines) == expected | {"inter_model.overall"}
    assert all(isinstance(v, str) and v and "\n" not in v for v in lines.values())


def test_generation_reading_names_the_dominant_term():
    decode_heavy = readings(analyze_pipeline("grpo", {"actor": ACTOR}, 8, 4, 16, 512))
    prefill_heavy = readings(analyze_pipeline("grpo", {"actor": ACTOR}, 8, 4, 4096, 2))
    assert decode_heavy["stages.generation"].startswith("Generation: decode is")
    assert prefill_heavy["stages.generation"].startswith("Generation: prefill is")
    assert "1 decode steps" in prefill_heavy["stages.generation"]


def test_assessment_reading_names_the_dominant_model():
    big_reward = TheoryModel(L=8, d=128, d_ff=512, h=4, V=1000)
    roles = {"actor": ACTOR, "reference": ACTOR, "reward": big_reward}
    line = readings(analyze_pipeline("grpo", roles, 8, 4, 32, 16))["stages.assessment"]
    assert line.startswith("Assessment: the reward forward is")
    empty = readings(analyze_pipeline("grpo", {"actor": ACTOR}, 8, 4, 32, 16))
    assert "no assessment model" in empty["stages.assessment"]


def test_overall_reading_follows_the_numbers():
    result = analyze_pipeline("ppo", PPO_ROLES, 8, 4, 32, 256)
    configs = result["theory"]["inter_model"]
    deepest_cut = min((c for c in configs if c != "baseline"), key=lambda c: configs[c]["depth"])
    overall = readings(result)["inter_model.overall"]
    assert overall.startswith(deepest_cut)
    assert "only shared_actor_critic also cuts work" in overall
    assert "no configuration removes the decode chain" in overall
    # a critic far smaller than the actor: sharing the backbone now adds work, and says so
    roles = PPO_ROLES | {"critic": SMALL_CRITIC}
    small = readings(analyze_pipeline("ppo", roles, 8, 4, 32, 256))
    assert "shared_actor_critic adds work" in small["inter_model.overall"]
    assert "shared_actor_critic: work +" in small["inter_model.shared_actor_critic"]


def test_readings_quote_computed_deltas():
    result = analyze_pipeline("ppo", PPO_ROLES, 8, 4, 32, 256)
    cells = result["theory"]["inter_model"]
    change = 100 * (cells["hybrid"]["depth"] - cells["baseline"]["depth"]) / cells["baseline"][
        "depth"
    ]
    assert f"depth −{abs(change):.3g}%" in readings(result)["inter_model.hybrid"]
    assert "same work as baseline" in readings(result)["inter_model.disaggregated"]


def test_dpo_readings_say_there_is_no_decode_chain():
    result = analyze_pipeline("dpo", {"actor": ACTOR, "reference": ACTOR}, 8, 1, 32, 16)
    lines = readings(result)
    assert "stages.generation" not in lines
    assert "no decode chain" in lines["inter_model.overall"]


# --- analyze intra ------------------------------------------------------------------------------


def test_intra_shape_and_labels():
    out = analyze_intra(TINY, 3, 3, 4)
    assert set(out) == {"strategy", "per_rank", "global"}
    assert set(out["per_rank"]) == set(out["global"]) == CELL
    assert out["strategy"] == "none"
    assert analyze_intra(TINY, 3, 3, 4, P_d=2)["strategy"] == "data"
    assert analyze_intra(TINY, 3, 3, 4, P_p=2)["strategy"] == "pipeline"
    assert analyze_intra(TINY, 3, 3, 4, P_t=2)["strategy"] == "tensor"
    assert analyze_intra(TINY, 3, 3, 4, P_c=2)["strategy"] == "context"
    assert analyze_intra(TINY, 3, 3, 4, P_d=2, P_t=2)["strategy"] == "3d"
    assert analyze_intra(TINY, 3, 3, 4, P_e=2)["strategy"] == "5d"
    assert analyze_intra(TINY, 3, 3, 4, P_d=2, P_c=2)["strategy"] == "5d"
    assert analyze_intra(TINY, 3, 3, 4, P_e=2, isolated_expert=True)["strategy"] == "expert"
    with pytest.raises(TheoryInputError, match="isolated"):
        analyze_intra(TINY, 3, 3, 4, P_d=2, P_e=2, isolated_expert=True)


def test_intra_isolated_expert_is_the_expert_row():
    out = analyze_intra(TINY, 3, 3, 4, P_e=4, isolated_expert=True, zero=2, kappa=0.5)
    assert out["global"] == intra.expert(TINY, 3, 7, 4, zero=2, kappa=0.5).global_.as_dict()


@PROPERTY
@given(models(), st.integers(1, 32), st.integers(1, 256), st.integers(1, 256), degrees, degrees,
       degrees, degrees, degrees, st.sampled_from([None, 0, 1, 2, 3]),
       st.sampled_from([None, 0.3]))
def test_intra_answer_is_the_5d_row_for_any_degrees(M, B, S, T, P_d, P_p, P_t, P_c, P_e, z, k):
    out = analyze_intra(M, B, S, T, P_d, P_p, P_t, P_c, P_e, zero=z, kappa=k)
    five = intra.five_d(M, B, S + T, P_d, P_p, P_t, P_c, P_e, zero=z, kappa=k).as_dict()
    for scope in ("per_rank", "global"):
        for q in CELL:
            assert close(out[scope][q], five[scope][q]), (scope, q)

"""TheoryModel: validation, defaults, and reading a model spec (FORMULAS.md conventions)."""

from types import SimpleNamespace

import pytest

from planner.errors import InputError
from planner.theory.shape import TheoryInputError, TheoryModel, WorkDepthMemory


def _spec(**overrides):
    fields = {
        "num_hidden_layers": 2,
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_attention_heads": 2,
        "vocab_size": 10,
        "moe": None,
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


def test_dense_defaults_are_one_expert_of_width_d_ff():
    M = TheoryModel(L=2, d=8, d_ff=16, h=2, V=10)
    assert (M.E, M.E_a, M.d_e) == (1, 1, 16)
    assert not M.is_moe


def test_from_spec_dense():
    model = TheoryModel.from_spec(_spec())
    assert model == TheoryModel(L=2, d=8, d_ff=16, h=2, V=10)


def test_from_spec_moe_reads_experts():
    moe = SimpleNamespace(num_experts=8, experts_per_token=2, expert_intermediate_size=4)
    M = TheoryModel.from_spec(_spec(moe=moe))
    assert (M.E, M.E_a, M.d_e, M.d_ff) == (8, 2, 4, 16)
    assert M.is_moe


def test_from_spec_moe_without_dense_width_uses_expert_width():
    moe = SimpleNamespace(num_experts=8, experts_per_token=2, expert_intermediate_size=4)
    M = TheoryModel.from_spec(_spec(moe=moe, intermediate_size=None))
    assert M.d_ff == 4


def test_from_spec_names_the_missing_field():
    spec = _spec()
    del spec.hidden_size
    with pytest.raises(TheoryInputError, match="hidden_size"):
        TheoryModel.from_spec(spec)
    moe = SimpleNamespace(num_experts=8, experts_per_token=2)
    with pytest.raises(TheoryInputError, match="expert_intermediate_size"):
        TheoryModel.from_spec(_spec(moe=moe))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"L": 0},
        {"d": -8},
        {"h": 1.5},
        {"V": "10"},
        {"d_ff": True},
        {"E": 0},
        {"d_e": 0},
    ],
)
def test_non_positive_or_non_integer_fields_are_refused(kwargs):
    fields = {"L": 2, "d": 8, "d_ff": 16, "h": 2, "V": 10} | kwargs
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        TheoryModel(**fields)


def test_more_active_experts_than_experts_is_refused():
    with pytest.raises(TheoryInputError, match="E_a"):
        TheoryModel(L=2, d=8, d_ff=16, h=2, V=10, E=2, E_a=3)


def test_error_is_both_value_error_and_input_error():
    with pytest.raises(ValueError) as info:
        TheoryModel(L=0, d=8, d_ff=16, h=2, V=10)
    assert isinstance(info.value, InputError)


def test_integral_floats_are_accepted_as_integers():
    assert TheoryModel(L=2.0, d=8, d_ff=16, h=2, V=10).L == 2


def test_model_is_frozen_and_hashable():
    M = TheoryModel(L=2, d=8, d_ff=16, h=2, V=10)
    with pytest.raises(AttributeError):
        M.L = 3  # type: ignore[misc]
    assert {M: 1}[TheoryModel(L=2, d=8, d_ff=16, h=2, V=10)] == 1


def test_work_depth_memory_as_dict():
    assert WorkDepthMemory(1.0, 2.0, 3.0).as_dict() == {"work": 1.0, "depth": 2.0, "memory": 3.0}

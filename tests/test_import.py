"""`rlplan import`: export then import gives back the plan (groups, layouts' degrees, ZeRO,
offload, recomputation, inter-model options), for each format; bad input is one error line."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.export import export
from planner.importers import detect, import_config
from planner.plan import PlanInput
from tests.export.plans import (
    colocated,
    dpo_plan,
    ppo_rollout_apart,
    ppo_scenario,
    ppo_split,
    priced,
    scenario,
)

FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "offload", "checkpointing", "micro_batch",
          "vp", "first_stage_layers", "last_stage_layers")
SIZES = {"grpo": scenario, "ppo3": lambda: ppo_scenario(nodes=3)}


def _same(sc, plan: dict, fmt: str, roles_stages: list[tuple[str, str]]) -> None:
    data = priced(sc, plan)
    text = export(data, sc, fmt).text
    assert detect(text) == fmt
    back = PlanInput.model_validate(import_config(text, sc).plan)
    want = PlanInput.model_validate(plan)
    assert sorted(g.gpus for g in back.groups) == sorted(g.gpus for g in want.groups)
    sizes = ({g.name: g.gpus for g in want.groups}, {g.name: g.gpus for g in back.groups})
    for role, stage in roles_stages:
        a, b = want.layouts[role][stage], back.layouts[role][stage]
        assert {f: getattr(b, f) for f in FIELDS} == {f: getattr(a, f) for f in FIELDS}, \
            (role, stage)
        assert sizes[0][a.group] == sizes[1][b.group], (role, stage)
    for key in ("staleness", "partial_rollout"):
        assert getattr(back.inter_model, key) == getattr(want.inter_model, key)


TRAIN_FSDP = {"dp": 8, "zero": 3, "micro_batch": 2, "checkpointing": "full"}
TRAIN_MEGATRON = {"dp": 4, "tp": 2, "sp": True, "zero": 1, "micro_batch": 2,
                  "checkpointing": "full", "offload": "optimizer"}


@pytest.mark.parametrize("train", [TRAIN_FSDP, TRAIN_MEGATRON])
def test_verl_round_trip(train):
    sc = scenario()
    _same(sc, colocated(train=train, ref={"dp": 8, "zero": 3, "micro_batch": 4}), "verl",
          [("actor", "training"), ("actor", "generation")])


def test_verl_round_trip_off_policy():
    sc = ppo_scenario(nodes=3)
    _same(sc, ppo_rollout_apart(staleness=1, partial_rollout=True), "verl",
          [("actor", "training"), ("actor", "generation"), ("critic", "training")])


@pytest.mark.parametrize("version", ["0.11.2", "0.9.5"])
def test_openrlhf_round_trip(version):
    sc = ppo_scenario(nodes=3)
    plan = ppo_split()
    data = priced(sc, plan)
    text = export(data, sc, "openrlhf", version).text
    back = PlanInput.model_validate(import_config(text, sc).plan)
    want = PlanInput.model_validate(plan)
    for role, stage in [("actor", "training"), ("critic", "training"), ("actor", "generation"),
                        ("reference", "assessment"), ("reward", "assessment")]:
        a, b = want.layouts[role][stage], back.layouts[role][stage]
        # OpenRLHF has one micro-batch for every forward (the smallest): not compared there
        fields = [f for f in FIELDS if f != "micro_batch"] if stage == "assessment" else FIELDS
        if stage == "assessment":  # OpenRLHF runs frozen models at ZeRO-3 under --zero_stage 3
            a = a.model_copy(update={"zero": 3 if want.layouts["actor"]["training"].zero == 3
                                     else 0})
        assert {f: getattr(b, f) for f in fields} == {f: getattr(a, f) for f in fields}, \
            (role, stage)
    assert [g.gpus for g in back.groups] == [g.gpus for g in want.groups]


def test_openrlhf_round_trip_colocated():
    sc = scenario()
    _same(sc, colocated(train={"dp": 4, "tp": 2, "zero": 1, "micro_batch": 2,
                               "offload": "optimizer"}), "openrlhf",
          [("actor", "training"), ("actor", "generation")])


@pytest.mark.parametrize("train", [TRAIN_FSDP, TRAIN_MEGATRON])
def test_megatron_round_trip(train):
    sc = scenario()
    train = {**train, "zero": min(train["zero"], 1)}  # Megatron's distributed optimizer
    _same(sc, colocated(train=train), "megatron", [("actor", "training")])


TRAIN_INTERLEAVED = {"dp": 2, "tp": 2, "pp": 2, "vp": 2, "zero": 1, "micro_batch": 1,
                     "checkpointing": "full"}


@pytest.mark.parametrize("fmt", ["verl", "megatron"])
def test_interleaved_pipelines_round_trip(fmt):
    sc = scenario()
    _same(sc, colocated(train=TRAIN_INTERLEAVED), fmt, [("actor", "training")])


# 24 layers: 4, 8, 8, 4 in 2 chunks (counts); 4, 5, 5, 5, 5 in 5 chunks (accounting for the
# embedding); 5, 5, 5, 5, 4 (the last only)
UNEVEN = [(8, {"dp": 2, "pp": 4, "vp": 2, "first_stage_layers": 4, "last_stage_layers": 4}),
          (5, {"dp": 1, "pp": 5, "vp": 5, "first_stage_layers": 4}),
          (5, {"dp": 1, "pp": 5, "last_stage_layers": 4})]


@pytest.mark.parametrize("fmt", ["verl", "megatron"])
@pytest.mark.parametrize(("gpus", "train"), UNEVEN)
def test_uneven_pipelines_round_trip(fmt, gpus, train):
    sc = scenario()
    train = {**train, "zero": 1, "micro_batch": 1}
    ref = {k: v for k, v in train.items() if k not in ("vp", "zero")}
    _same(sc, colocated(gpus=gpus, gen={"dp": gpus}, train=train, ref=ref), fmt,
          [("actor", "training"), ("reference", "assessment")])


def test_unknown_verl_key_is_named():
    sc = scenario()
    text = export(priced(sc, colocated()), sc, "verl").text.replace(
        "python3 -m verl.trainer.main_ppo \\\n", "python3 -m verl.trainer.main_ppo \\\n"
        "  actor_rollout_ref.rollout.tensor_parallel_sise=2 \\\n")
    with pytest.raises(InputError, match="tensor_parallel_sise: verl 0.9.1 has no such key"):
        import_config(text, sc)


def test_unknown_flag_is_named_in_a_note():
    """A flag no known OpenRLHF parser has is not refused (an older release may have it) but
    named, beside the list of what rlplan ignored."""
    sc = scenario()
    text = export(priced(sc, colocated()), sc, "openrlhf").text.replace('"$@"', "--bogus 3")
    notes = import_config(text, sc).notes
    assert any("not flags of OpenRLHF" in n and "--bogus" in n for n in notes)
    assert any(n.startswith("ignored (") and "--bogus" in n for n in notes)


def test_unrecognised_file():
    with pytest.raises(InputError, match="--format"):
        detect("hello world\n")


@pytest.mark.parametrize("fmt", ["openrlhf", "megatron"])
def test_dpo_round_trip(fmt):
    sc = scenario("dpo")
    plan = dpo_plan()
    if fmt == "megatron":  # Megatron's distributed optimizer is ZeRO-1
        train = plan["layouts"]["actor"]["training"]
        plan["layouts"]["actor"]["training"] = {**train, "zero": min(train["zero"], 1)}
    _same(sc, plan, fmt, [("actor", "training")])


def test_sft_round_trip_through_megatron():
    sc = scenario("sft")
    plan = {"groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"training": {"group": "g0", **TRAIN_MEGATRON}}},
            "inter_model": {"placement": "colocated"}}
    _same(sc, plan, "megatron", [("actor", "training")])

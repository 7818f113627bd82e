"""Framework presets as data (planner/frameworks/presets/): strict loading with sources, the
capabilities they declare, a scenario naming a framework (its runtime defaults under the
scenario's own fields, its algorithms and roles), and the plan JSON's record of which
frameworks run a plan."""

from __future__ import annotations

from importlib.resources import files

import pytest

from planner.errors import InputError
from planner.frameworks import all_presets, capabilities, load_preset, parse_name, releases
from planner.frameworks.presets import PRESETS, Preset
from planner.frameworks.runs import differences
from planner.plan import Layout, PlanInput
from planner.specs.files import validate_as
from planner.specs.runtime import RuntimeInput
from tests.export.plans import scenario

RELEASES = {"verl": ("0.9.1",), "openrlhf": ("0.11.2", "0.9.5"), "deepspeed": ("0.19.8",),
            "megatron": ("0.19.2",), "nemo-rl": ("0.6",)}


def test_every_release_has_a_preset_that_loads():
    assert releases() == dict(sorted(RELEASES.items()))
    names = [p.name for p in all_presets()]
    assert len(names) == 6 and len(set(names)) == 6
    for preset in all_presets():
        caps = preset.caps()
        assert caps.framework == preset.name and caps.algorithms
        assert set(preset.runtime_defaults()) <= set(RuntimeInput.model_fields)


def test_the_exporters_know_the_same_releases():
    from planner.export.keys import VERSIONS

    for fmt, versions in VERSIONS.items():
        assert releases()[fmt] == versions
        for v in versions:
            assert load_preset(f"{fmt}@{v}").export_format == fmt


def test_names_default_to_the_newest_release_and_bad_names_say_which_exist():
    assert parse_name("openrlhf") == "openrlhf@0.11.2"
    assert parse_name("OpenRLHF@0.9.5") == "openrlhf@0.9.5"
    with pytest.raises(InputError, match="unknown framework 'trl'; choose one of deepspeed"):
        parse_name("trl")
    with pytest.raises(InputError, match="verl has no preset for version '0.8'; choose 0.9.1"):
        parse_name("verl@0.8")


def _raw(name: str) -> dict:
    import yaml

    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text(encoding="utf-8"))


def test_every_value_carries_its_source():
    raw = _raw("verl@0.9.1")
    raw["engine"]["gpu_memory_utilization"] = {"value": 0.5}
    with pytest.raises(InputError, match="engine.gpu_memory_utilization.source"):
        validate_as(Preset, raw, "preset")
    raw = _raw("verl@0.9.1")
    del raw["capabilities"]["rules"][0]["source"]
    with pytest.raises(InputError, match=r"capabilities.rules\[0\].source' is missing"):
        validate_as(Preset, raw, "preset")


@pytest.mark.parametrize(("where", "change", "message"), [
    ("runtime", {"engine_speed": {"value": 1, "source": "x"}}, "unknown runtime field"),
    ("runtime", {"engine": {"value": "trt", "source": "x"}}, "engine"),
    ("rule", {"require": {"pipeline": 1}}, "unknown field 'pipeline'"),
    ("rule", {"require": {"zero": {"atmost": 1}}}, "bounds are min, max, in, not_in"),
    ("rule", {"why": "{where} {depth}"}, "a placeholder other than"),
    ("algorithms", {"value": ["ppo", "a2c"]}, "unknown algorithm"),
    ("pattern", {"tasks": ["actor.rollout"]}, "tasks"),
])
def test_a_malformed_preset_is_refused_naming_the_field(where, change, message):
    raw = _raw("verl@0.9.1")
    if where == "runtime":
        raw["runtime"].update(change)
    elif where == "rule":
        raw["capabilities"]["rules"][0].update(change)
    elif where == "algorithms":
        raw["capabilities"]["algorithms"].update(change)
    else:
        raw["capabilities"]["groups"]["patterns"][0].update(change)
    with pytest.raises(InputError, match=message):
        validate_as(Preset, raw, "preset")


def test_presets_ship_inside_the_package():
    shipped = {p.name for p in files("planner.frameworks").joinpath("presets").iterdir()}
    assert "verl@0.9.1.yaml" in shipped and "nemo-rl@0.6.yaml" in shipped


# --- capabilities as the presets declare them ----------------------------------------------


def test_verl_places_roles_as_its_resource_pools_do():
    caps = capabilities("verl")
    tasks = frozenset({"actor.generation", "actor.training", "reference.forward",
                       "reward.forward"})
    trainer = frozenset({"actor.training", "reference.forward"})
    assert caps.group_ok(trainer | {"actor.generation"}, tasks, 0)
    assert caps.group_ok(trainer | {"actor.generation", "reward.forward"}, tasks, 0)
    assert not caps.group_ok(trainer, tasks, 0)  # on-policy: the rollout on the trainer's GPUs
    assert caps.group_ok(trainer, tasks, 1)  # off-policy: a rollout pool of its own
    assert not caps.group_ok(trainer | {"reward.forward"}, tasks, 1)
    assert not caps.group_ok(frozenset({"actor.training"}), tasks, 0)  # the reference with it
    assert caps.group_ok(frozenset({"reward.forward"}), tasks, 0)


def test_openrlhf_pairs_and_dpo():
    caps = capabilities("openrlhf")
    ppo = frozenset({"actor.generation", "actor.training", "critic.training",
                     "reference.forward", "reward.forward"})
    assert caps.group_ok(ppo, ppo, 0) and not caps.group_ok(ppo, ppo, 1)
    assert caps.group_ok(frozenset({"critic.training", "reward.forward"}), ppo, 1)
    assert not caps.group_ok(frozenset({"actor.training", "critic.training"}), ppo, 0)
    dpo = frozenset({"actor.training", "reference.forward"})
    assert caps.group_ok(dpo, dpo, 0)
    assert not caps.group_ok(frozenset({"actor.training"}), dpo, 0)  # train_dpo: together


def test_partial_rollouts_per_release():
    assert capabilities("verl").options.partial(1, True)
    assert not capabilities("verl").options.partial(1, False)  # separate_async always continues
    assert capabilities("openrlhf@0.11.2").options.partial(1, True)
    assert not capabilities("openrlhf@0.11.2").options.partial(0, True)
    assert not capabilities("openrlhf@0.9.5").options.partial(1, True)  # no flag for it


def test_layout_rules_work_on_one_layout_and_on_arrays():
    from types import SimpleNamespace

    import numpy as np

    caps = capabilities("verl")
    spec = scenario().actor
    ref = SimpleNamespace(dp=np.array([8, 8, 4]), tp=np.array([1, 1, 2]), pp=np.array([1, 1, 1]),
                          cp=np.array([1, 1, 1]), ep=np.array([1, 1, 1]),
                          zero=np.array([0, 3, 0]), checkpointing=np.array(["none"] * 3),
                          offload=np.array(["none"] * 3), micro_batch=np.array([1, 1, 1]))
    # verl serves the reward model with an engine: whole weights (ZeRO-0), one sequence per
    # micro-batch; the rule is the reward's alone
    assert list(caps.mask("forward", ref, spec, "reward")) == [True, False, True]
    # its FSDP reference (ZeRO-3) always streams its parameters from CPU memory
    assert list(caps.mask("forward", ref, spec, "reference")) == [True, False, True]
    streamed = SimpleNamespace(**{**vars(ref), "offload": np.array(["none", "params", "sleep"])})
    assert list(caps.mask("forward", streamed, spec, "reference")) == [True, True, True]
    assert list(caps.mask("forward", streamed, spec, "reward")) == [True, False, True]
    gen = Layout(group="g0", dp=4, pp=2)
    assert "NotImplementedError" in caps.refusal("generation", gen, spec, "g")


# --- a scenario naming a framework ----------------------------------------------------------


def test_the_preset_sets_runtime_defaults_and_the_scenario_wins():
    sc = scenario(framework="nemo-rl")
    assert sc.framework == "nemo-rl@0.6"
    assert sc.runtime.controller_us_per_token == load_preset("nemo-rl").runtime[
        "controller_us_per_token"].value > 0
    assert any("nemo-rl@0.6 preset: controller_us_per_token" in n for n in sc.notes)
    own = scenario(framework="nemo-rl", **{"runtime.controller_us_per_token": 2.0})
    assert own.runtime.controller_us_per_token == 2.0
    assert scenario().runtime.controller_us_per_token == 0.0  # no framework: the planner's
    assert scenario(framework="deepspeed").runtime.engine == "eager"


def test_a_framework_refuses_what_it_does_not_run():
    with pytest.raises(InputError, match="nemo-rl@0.6.*runs no reward model.*--reward verifier"):
        scenario(framework="nemo-rl", **{"models.reward": "qwen2.5-0.5b"})
    with pytest.raises(InputError, match="verl 0.9.1 has no sft trainer"):
        scenario("sft", framework="verl")
    with pytest.raises(InputError, match="field 'framework'.*unknown framework 'vllm'"):
        scenario(framework="vllm")


def _colocated(ref_zero: int, ref_offload: str = "none") -> PlanInput:
    return PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 3}},
                    "reference": {"assessment": {"group": "g0", "dp": 8, "zero": ref_zero,
                                                 "offload": ref_offload}}},
        "inter_model": {"placement": "colocated"}})


def test_which_frameworks_run_a_plan_and_what_each_changes():
    sc = scenario()
    assert differences(capabilities("verl"), sc, _colocated(3, "params")) == []
    assert differences(capabilities("verl"), sc, _colocated(3)) == [
        "layouts.reference.assessment.offload none: verl 0.9.1's FSDP backend keeps a "
        "forward-only model's parameters in CPU memory and streams them in for every forward, "
        "whatever ref.fsdp_config.param_offload says; re-plan with offload params"]
    said = differences(capabilities("verl"), sc, _colocated(0))
    assert said == ["layouts.reference.assessment: verl runs the reference on the trainers' "
                    "backend: an FSDP module over the pool (ZeRO-3) beside FSDP trainers, whole "
                    "weights per TP × PP group (ZeRO-0) beside Megatron ones"]
    apart = _colocated(3).model_copy(update={"inter_model": _colocated(3).inter_model.model_copy(
        update={"inter_stage_fusion": True})})
    assert "no inter-stage fusion" in differences(capabilities("openrlhf"), sc, apart)
    assert differences(capabilities("megatron"), sc, _colocated(0)) == [
        "layouts.actor.training.zero 3: --use-distributed-optimizer shards optimizer state "
        "only (ZeRO-1); re-plan with zero 0 or 1"]


def test_evaluate_says_what_the_named_framework_would_change(cli, write):
    import json

    from tests.conftest import grpo_scenario

    sc = write("s.yaml", grpo_scenario())
    plan = write("p.json", _colocated(0).model_dump(mode="json"))
    done = cli("evaluate", str(sc), str(plan), "--framework", "verl", "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["framework"] == "verl@0.9.1"
    (verl,) = data["frameworks"]
    assert not verl["runs_as_is"]
    assert verl["changes"][0].startswith("layouts.reference.assessment: verl runs the "
                                         "reference on the trainers' backend")
    # as verl runs it, the reference is sharded (ZeRO-3): less memory per GPU
    assert verl["as_it_runs"].startswith("as it runs it: -")
    view = cli("evaluate", str(sc), str(plan))  # none named: every release, in the view
    assert "frameworks that run it as is: " in view.stdout
    assert "  verl 0.9.1: layouts.reference.assessment: verl runs the reference" in view.stdout


def test_a_nemo_rl_plan_is_planned_and_exported_with_no_format_named(cli, write):
    import json

    from tests.conftest import grpo_scenario

    out = write("p.json", {})
    done = cli("plan", str(write("s.yaml", grpo_scenario())), "--framework", "nemo-rl",
               "--workers", "1", "--out", str(out), "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["framework"] == "nemo-rl@0.6" and data["stages"]["controller"]["time_s"] > 0
    # the plan carries the runtime fields the scenario set, not the preset's: read back, the
    # preset fills them again
    from planner.specs.scenario import scenario_from_plan

    assert "runtime" not in data["scenario"]
    preset = load_preset("nemo-rl@0.6").runtime["controller_us_per_token"].value
    assert scenario_from_plan(data, "p.json").runtime.controller_us_per_token == preset > 0
    config = out.parent / "run.yaml"
    done = cli("export", str(out), "--out", str(config))  # the plan's framework: nemo-rl
    assert done.exit_code == 0, done.stderr
    assert config.read_text().startswith("# NeMo-RL 0.6")


def test_the_python_api_plans_for_a_framework():
    import planner
    from tests.conftest import grpo_scenario

    found = planner.plan(grpo_scenario(), framework="openrlhf@0.9.5", workers=1, time_limit=30)
    assert found.framework == "openrlhf@0.9.5"
    assert [f["framework"] for f in found.frameworks] == ["openrlhf@0.9.5"]

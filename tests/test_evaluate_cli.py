"""`rlplan evaluate`: the plan JSON contract and the exit codes 0 / 2 / 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_cli import assert_bad_input

SCENARIO = str(REPO / "examples/grpo-qwen2.5-7b.yaml")
PLAN = str(REPO / "examples/plans/grpo-qwen2.5-7b-colocated.json")


def test_evaluate_example_json(cli, tmp_path):
    out = tmp_path / "priced.json"
    result = cli("evaluate", SCENARIO, PLAN, "--json", "--out", str(out))
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["status"] == "evaluated" and plan["schema_version"] == 1
    assert plan["iteration_time_s"] > 0 and plan["memory"]["capacity_gib"] == 80
    assert json.loads(out.read_text()) == plan
    training = plan["layouts"]["actor"]["training"]  # DESIGN.md: checkpointing is a boolean
    assert training["checkpointing"] is True and training["recompute"] == "full"
    # a priced plan is itself a valid plan input, and prices the same
    again = json.loads(cli("evaluate", SCENARIO, str(out), "--json").stdout)
    assert again["iteration_time_s"] == plan["iteration_time_s"]


def test_evaluate_human_view(cli):
    result = cli("evaluate", SCENARIO, PLAN)
    assert result.exit_code == 0
    for text in ("One iteration", "Memory per GPU", "lower bounds", "binding memory",
                 "inter-model: colocated"):
        assert text in result.stdout


def test_inter_model_choices_in_words():
    from planner.plan import InterModel

    assert InterModel().choices() == []
    words = InterModel(staleness=1, inter_stage_fusion=True, overlap_weight_sync=True).choices()
    assert words == ["staleness 1", "inter-stage fusion", "weight sync overlapped (shadow copy)"]


def test_a_plan_with_its_kv_cache_set_changes_that_alone():
    from planner.plan import PlanInput

    plan = PlanInput.model_validate_json(Path(PLAN).read_text(encoding="utf-8"))
    for tokens in (123_456, None):
        other = plan.with_kv_cache(tokens)
        assert other.layouts["actor"]["generation"].kv_cache_tokens == tokens
        unchanged = other.layouts["actor"]["generation"].model_copy(
            update={"kv_cache_tokens": plan.layouts["actor"]["generation"].kv_cache_tokens})
        assert unchanged == plan.layouts["actor"]["generation"]
        assert other.model_copy(update={"layouts": plan.layouts}) == plan


def test_plan_that_does_not_fit_exits_3(cli, write):
    plan = json.loads(Path(PLAN).read_text())
    plan["layouts"]["actor"]["training"] = {"group": "g0", "dp": 32, "zero": 0,
                                            "micro_batch": 16}
    path = write("plan.json", plan)
    result = cli("evaluate", SCENARIO, str(path), "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["status"] == "infeasible"
    line = result.stderr.strip()
    assert "group g0, stage " in line and "GiB over" in line
    assert "Traceback" not in result.stderr


def test_plan_with_wrong_degrees_is_bad_input(cli, write):
    plan = json.loads(Path(PLAN).read_text())
    plan["layouts"]["actor"]["generation"]["dp"] = 8  # 8 × tp 2 = 16 ≠ 32
    result = cli("evaluate", SCENARIO, str(write("plan.json", plan)))
    assert_bad_input(result, "layouts.actor.generation", "dp·tp·pp·cp = 16", "32 GPUs")


@pytest.mark.parametrize("role, stage, field", [("actor", "training", "kv_cache_tokens"),
                                                ("reference", "assessment", "max_num_seqs")])
def test_an_engine_setting_off_the_rollout_is_bad_input(cli, write, role, stage, field):
    # once accepted and ignored: a plan priced without what its author wrote
    plan = json.loads(Path(PLAN).read_text())
    plan["layouts"][role][stage][field] = 4096
    assert_bad_input(cli("evaluate", SCENARIO, str(write("plan.json", plan))),
                     f"layouts.{role}.{stage}.{field}: a rollout engine's setting",
                     "layouts.actor.generation")


def test_plan_naming_a_missing_group(cli, write):
    plan = json.loads(Path(PLAN).read_text())
    plan["layouts"]["reference"]["assessment"]["group"] = "g9"
    assert_bad_input(cli("evaluate", SCENARIO, str(write("plan.json", plan))),
                     "no group named 'g9'")


def test_malformed_plan(cli, write):
    assert_bad_input(cli("evaluate", SCENARIO, str(write("plan.json", "{oops"))),
                     "malformed JSON")


def test_timeline_picture(cli, tmp_path):
    svg, png = tmp_path / "it.svg", tmp_path / "it.png"
    assert cli("evaluate", SCENARIO, PLAN, "--timeline", str(svg)).exit_code == 0
    text = svg.read_text()
    for label in ("g0 (32 GPUs)", "generation", "assessment", "training", "reference",
                  "seconds into the iteration", "One iteration"):
        assert label in text
    assert cli("evaluate", SCENARIO, PLAN, "--timeline", str(png)).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_with_an_unknown_extension_is_refused_before_pricing(cli, tmp_path):
    out, pic = tmp_path / "p.json", tmp_path / "it.gif"
    result = cli("evaluate", SCENARIO, PLAN, "--timeline", str(pic), "--out", str(out))
    assert_bad_input(result, "--timeline")
    assert not out.exists() and not pic.exists()

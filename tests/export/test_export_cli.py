"""`rlplan export`: the config on stdout or --out, notes on stderr, exit 2 on bad input."""

from __future__ import annotations

import json
import os

from tests.conftest import REPO
from tests.export.plans import colocated, priced, scenario
from tests.test_cli import assert_bad_input

HAND_WRITTEN = str(REPO / "examples/plans/grpo-qwen2.5-7b-colocated.json")  # no scenario key
SCENARIO = str(REPO / "examples/grpo-qwen2.5-7b.yaml")


def plan_file(write):
    return str(write("plan.json", priced(scenario(), colocated())))


def test_writes_the_file(cli, write, tmp_path):
    out = tmp_path / "run_verl.sh"
    result = cli("export", plan_file(write), "--format", "verl", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert out.read_text().startswith("#!/usr/bin/env bash") and os.access(out, os.X_OK)
    for line in result.stderr.splitlines():
        assert line.startswith("rlplan: note: ")


def test_prints_json_on_stdout(cli, write):
    result = cli("export", plan_file(write), "--format", "deepspeed")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == {"actor"}


def test_openrlhf_version_flag(cli, write):
    result = cli("export", plan_file(write), "--format", "openrlhf",
                 "--framework-version", "0.9.5")
    assert result.exit_code == 0, result.output
    assert "--vllm_num_engines" in result.stdout


def test_plan_without_scenario(cli, tmp_path):
    out = tmp_path / "cfg.sh"
    assert_bad_input(cli("export", HAND_WRITTEN, "--format", "verl", "--out", str(out)),
                     "field 'scenario' is missing")
    assert not out.exists()
    # with the scenario given, the hand-written plan is priced and exported
    result = cli("export", HAND_WRITTEN, "--format", "verl", "--scenario", SCENARIO)
    assert result.exit_code == 0, result.output
    assert "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B" in result.stdout


def test_bad_format_and_version_write_nothing(cli, write, tmp_path):
    out = tmp_path / "cfg.sh"
    path = plan_file(write)
    assert_bad_input(cli("export", path, "--format", "nemo", "--out", str(out)),
                     "unknown format 'nemo'")
    assert_bad_input(cli("export", path, "--format", "openrlhf", "--framework-version", "v0.1",
                         "--out", str(out)), "no version 'v0.1'")
    assert_bad_input(cli("export", path, "--format", "deepspeed", "--framework-version", "x",
                         "--out", str(out)), "deepspeed has no version 'x'")
    assert not out.exists()


def test_constraint_violation_writes_nothing(cli, write, tmp_path):
    out = tmp_path / "run.sh"
    sc = scenario("dpo")
    plan = priced(sc, {"groups": [{"name": "g0", "gpus": 8}],
                       "layouts": {"actor": {"training": {"group": "g0", "dp": 8}},
                                   "reference": {"assessment": {"group": "g0", "dp": 8}}},
                       "inter_model": {"placement": "colocated"}})
    result = cli("export", str(write("dpo.json", plan)), "--format", "verl", "--out", str(out))
    assert_bad_input(result, "no dpo trainer")
    assert not out.exists()


def test_infeasible_plan(cli, write):
    path = write("bad.json", {"schema_version": 1, "status": "infeasible", "reason": "too big"})
    assert_bad_input(cli("export", str(path), "--format", "verl"), "infeasible (too big)")


SMALL_PLAN = ("plan", "--algo", "grpo", "--actor", "qwen2.5-0.5b", "--prompts", "8", "--samples",
              "2", "--prompt-len", "128", "--response-len", "256", "--max-response-len", "512",
              "--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "2")


def test_plan_exports_what_it_found(cli, tmp_path):
    out, config = tmp_path / "plan.json", tmp_path / "ds.json"
    result = cli(*SMALL_PLAN, "--json", "--out", str(out), "--export", "deepspeed",
                 "--export-out", str(config))
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    ds = json.loads(config.read_text())
    assert ds["actor"]["zero_optimization"]["stage"] == plan["layouts"]["actor"]["training"][
        "zero"]


def test_plan_export_needs_a_file_and_a_known_format(cli, tmp_path):
    out = tmp_path / "plan.json"
    assert_bad_input(cli(*SMALL_PLAN, "--out", str(out), "--export", "verl"), "--export-out")
    assert_bad_input(cli(*SMALL_PLAN, "--out", str(out), "--export", "nemo", "--export-out",
                         str(tmp_path / "x")), "--export")
    assert not out.exists()

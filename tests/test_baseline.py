"""`rlplan plan --baseline FILE`: the plan a user runs today priced beside the best one — its
figures, the gain, what changes — in the JSON and the view; a baseline that does not fit is
reported, not fatal."""

from __future__ import annotations

import json

from tests.conftest import grpo_scenario

BASELINE = {"groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                                  "training": {"group": "g0", "dp": 8, "zero": 0,
                                               "checkpointing": "full"}},
                        "reference": {"assessment": {"group": "g0", "dp": 8}}},
            "inter_model": {"placement": "colocated"}}


def run(cli, write, baseline: dict, *flags: str):
    sc = write("s.yaml", grpo_scenario())
    return cli("plan", str(sc), "--baseline", str(write("base.json", baseline)),
               "--time-limit", "20", "--workers", "1", *flags)


def test_the_best_plan_against_the_baseline_in_json(cli, write):
    result = run(cli, write, BASELINE, "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    b = plan["baseline"]
    assert b["fits"] and b["iteration_time_s"] > 0
    assert b["gain"]["iteration_time"] == b["iteration_time_s"] / plan["iteration_time_s"] - 1
    assert b["gain"]["iteration_time"] >= -1e-6  # the optimum is no slower than a plan it covers
    assert isinstance(b["changes"], list)


def test_the_view_names_the_gain_and_the_changes(cli, write):
    result = run(cli, write, BASELINE)
    assert result.exit_code == 0, result.stderr
    assert "baseline: " in result.stdout and " s per step → " in result.stdout
    assert "change: " in result.stdout or "no change" in result.stdout


def test_a_baseline_that_does_not_fit_is_reported(cli, write):
    tight = json.loads(json.dumps(BASELINE))  # a 0.5B model fits anywhere: force a tiny KV
    tight["layouts"]["actor"]["generation"]["kv_cache_tokens"] = 16
    result = run(cli, write, tight, "--json")
    assert result.exit_code == 0, result.stderr
    b = json.loads(result.stdout)["baseline"]
    assert b["fits"] is False and "one sequence" in b["reason"]


def _verl_script() -> str:
    from planner.export import export
    from tests.export.plans import colocated, priced, scenario

    sc = scenario()
    return export(priced(sc, colocated()), sc, "verl").text


def _scenario(write):
    return write("s.yaml", grpo_scenario(workload={
        "prompts_per_step": 64, "samples_per_prompt": 4, "prompt_len": 256,
        "response_len": 512, "max_response_len": 1024, "mini_batches": 2}))


def test_an_imported_baseline_restricts_the_search_to_its_framework(cli, write):
    result = cli("plan", str(_scenario(write)), "--baseline", str(write("run.sh", _verl_script())),
                 "--time-limit", "20", "--workers", "1", "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["framework"] == "verl@0.9.1"
    assert [f["runs_as_is"] for f in plan["frameworks"]] == [True]  # searched for it
    assert plan["scenario"]["framework"] == "verl@0.9.1"
    assert plan["baseline"]["fits"]


def test_a_plan_json_baseline_brings_its_framework_and_a_named_one_wins(cli, write):
    recorded = write("base.json", {**BASELINE, "framework": "openrlhf@0.9.5"})
    sc = _scenario(write)
    result = cli("plan", str(sc), "--baseline", str(recorded), "--time-limit", "20",
                 "--workers", "1", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["framework"] == "openrlhf@0.9.5"
    result = cli("plan", str(sc), "--baseline", str(recorded), "--framework", "verl",
                 "--time-limit", "20", "--workers", "1", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["framework"] == "verl@0.9.1"
    bad = write("bad.json", {**BASELINE, "framework": "trl"})
    result = cli("plan", str(sc), "--baseline", str(bad))
    assert result.exit_code == 2 and "field 'framework'" in result.stderr


def test_import_writes_the_scripts_framework(cli, write, tmp_path):
    out, scenario = tmp_path / "today.json", tmp_path / "s.yaml"
    result = cli("import", str(write("run.sh", _verl_script())), "--scenario",
                 str(_scenario(write)), "--out", str(out), "--out-scenario", str(scenario))
    assert result.exit_code == 0, result.stderr
    assert json.loads(out.read_text())["framework"] == "verl@0.9.1"
    assert "framework: verl@0.9.1" in scenario.read_text()
    evaluated = cli("evaluate", str(scenario), str(out), "--json")
    assert evaluated.exit_code == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["framework"] == "verl@0.9.1"

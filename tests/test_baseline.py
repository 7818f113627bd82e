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

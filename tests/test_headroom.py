"""`search.memory_headroom` (`--memory-headroom`): a share of each GPU left free, in the one
memory rule (`fit.budget_of`) the search and `evaluate` both apply, shown in the JSON and the
view."""

from __future__ import annotations

import json

from planner.cost.fit import budget_of
from planner.specs.hardware import load_profile
from planner.specs.search import DEFAULT_MEMORY_HEADROOM
from tests.conftest import REPO, grpo_scenario

PLAN = {"groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 3,
                                           "checkpointing": "full"}},
                    "reference": {"assessment": {"group": "g0", "dp": 8, "zero": 3}}},
        "inter_model": {"placement": "colocated"}}


def test_the_budget_leaves_the_headroom_free():
    gpu = load_profile("h100-sxm")
    full, kept = budget_of(gpu, 0.0), budget_of(gpu, 0.05)
    assert full - kept in (round(0.05 * gpu.memory_bytes / 2**20),
                           round(0.05 * gpu.memory_bytes / 2**20) + 1)
    assert DEFAULT_MEMORY_HEADROOM == 0.05


def test_evaluate_refuses_a_plan_within_capacity_but_not_the_headroom(cli, write):
    sc = write("s.yaml", grpo_scenario(
        models={"actor": "qwen2.5-7b", "reference": "actor"},
        workload={"prompts_per_step": 512, "samples_per_prompt": 8, "prompt_len": 1024,
                  "response_len": 2048, "max_response_len": 4096}))  # more KV than fits
    full = write("full.json", {})
    # at headroom 0 the rollout's KV cache takes every MiB left: the plan fills the capacity
    done = cli("evaluate", str(sc), str(write("p.json", PLAN)), "--memory-headroom", "0",
               "--out", str(full), "--json")
    assert done.exit_code == 0, done.stderr
    priced = json.loads(done.stdout)
    assert priced["memory"]["headroom_gib"] == 0
    again = cli("evaluate", str(sc), str(full))  # its KV cache as priced, the default headroom
    assert again.exit_code == 3
    assert "memory headroom of 0.05" in again.stderr and "--memory-headroom 0" in again.stderr
    assert "Traceback" not in again.stderr
    ok = cli("evaluate", str(sc), str(full), "--memory-headroom", "0", "--json")
    assert ok.exit_code == 0, ok.stderr


def test_plans_leave_the_headroom_free_and_say_so(cli):
    for example in ("grpo-qwen2.5-7b.yaml", "dpo-qwen3-8b.yaml"):
        done = cli("plan", str(REPO / "examples" / example), "--json", "--workers", "1")
        assert done.exit_code == 0, done.stderr
        memory = json.loads(done.stdout)["memory"]
        assert memory["headroom_gib"] == DEFAULT_MEMORY_HEADROOM * memory["capacity_gib"]
        assert memory["peak_gib_per_gpu"] <= memory["capacity_gib"] - memory["headroom_gib"]
    view = cli("plan", str(REPO / "examples" / "grpo-qwen2.5-7b.yaml"), "--workers", "1")
    assert "GiB per GPU left free (search.memory_headroom" in view.stdout


def test_headroom_out_of_range_is_one_error_line(cli, write):
    sc = write("s.yaml", grpo_scenario())
    done = cli("plan", str(sc), "--memory-headroom", "0.9")
    assert done.exit_code == 2
    assert "search.memory_headroom" in done.stderr and "--memory-headroom" in done.stderr

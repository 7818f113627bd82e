"""Prices are defaults a user overrides: --price > the scenario's cluster.price_usd_per_gpu_hour
> the profile's; the plan says which it used; the cost objective needs one."""

from __future__ import annotations

import json

import pytest

from planner.specs.hardware import load_profile
from tests.conftest import grpo_scenario
from tests.test_cli import assert_bad_input

PLAN = {"groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 3}},
                    "reference": {"assessment": {"group": "g0", "dp": 8, "zero": 3}}},
        "inter_model": {"placement": "colocated"}}


def priced(cli, write, *flags: str, **cluster) -> dict:
    sc = grpo_scenario(cluster={"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, **cluster})
    result = cli("evaluate", str(write("sc.yaml", sc)), str(write("plan.json", PLAN)),
                 "--json", *flags)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def step_cost(plan: dict, price: float) -> float:
    return plan["iteration_time_s"] * 8 * price / 3600


def test_the_profile_price_by_default_with_its_source(cli, write):
    profile = load_profile("h100-sxm")
    plan = priced(cli, write)
    assert plan["cost"]["price_usd_per_gpu_hour"] == profile.price_usd_per_gpu_hour
    assert plan["cost"]["price_source"] == (
        f"profile h100-sxm ({profile.sources['price_usd_per_gpu_hour']})")
    assert plan["cost_per_step_usd"] == pytest.approx(
        step_cost(plan, profile.price_usd_per_gpu_hour))


def test_the_scenario_price_overrides_the_profile(cli, write):
    plan = priced(cli, write, price_usd_per_gpu_hour=2.0)
    assert plan["cost"] == {"price_usd_per_gpu_hour": 2.0, "price_source": "scenario"}
    assert plan["cost_per_step_usd"] == pytest.approx(step_cost(plan, 2.0))


def test_the_flag_overrides_the_scenario(cli, write):
    plan = priced(cli, write, "--price", "1.5", price_usd_per_gpu_hour=2.0)
    assert plan["cost"] == {"price_usd_per_gpu_hour": 1.5, "price_source": "flag"}
    assert plan["cost_per_step_usd"] == pytest.approx(step_cost(plan, 1.5))
    again = priced(cli, write, "--price", "1.5")  # the plan's own scenario keeps the price
    assert again["scenario"]["cluster"]["price_usd_per_gpu_hour"] == 1.5


def test_the_human_view_says_which_price(cli, write):
    sc = write("sc.yaml", grpo_scenario())
    result = cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--price", "1.25")
    assert result.exit_code == 0, result.stderr
    assert "at $1.25 per GPU-hour, from --price" in result.stdout


def test_no_price_is_no_cost_and_the_view_says_how_to_give_one(cli, write):
    sc = write("sc.yaml", grpo_scenario(cluster={"gpu": "mi300x", "nodes": 1}))
    result = cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["cost_per_step_usd"] is None
    assert plan["cost"] == {"price_usd_per_gpu_hour": None, "price_source": None}


def test_the_cost_objective_without_any_price_names_the_flag(cli, write):
    sc = write("sc.yaml", grpo_scenario(cluster={"gpu": "mi300x", "nodes": 1}))
    assert_bad_input(cli("plan", str(sc), "--objective", "cost"), "search.objective", "--price")
    assert_bad_input(cli("sweep", str(sc), "--gpus", "8", "--objective", "cost"), "--price")


def test_a_bad_price_is_bad_input(cli, write):
    sc = write("sc.yaml", grpo_scenario())
    assert_bad_input(cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--price", "0"),
                     "price_usd_per_gpu_hour")


def test_the_cost_objective_plans_with_the_flag_price(cli, write):
    sc = write("sc.yaml", grpo_scenario(cluster={"gpu": "mi300x", "nodes": 1}))
    result = cli("plan", str(sc), "--objective", "cost", "--price", "2", "--time-limit", "2",
                 "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["objective"] == "cost" and plan["cost"]["price_source"] == "flag"
    assert plan["cost_per_step_usd"] == pytest.approx(
        plan["iteration_time_s"] * sum(g["gpus"] for g in plan["groups"]) * 2 / 3600)


@pytest.mark.parametrize(("price", "words"), [("250", "far above published rental prices"),
                                              ("0.004", "far below published rental prices")])
def test_an_implausible_price_is_warned_about_and_kept(cli, write, price, words):
    sc = write("sc.yaml", grpo_scenario())
    result = cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--price", price, "--json")
    assert result.exit_code == 0, result.stderr
    warning = [ln for ln in result.stderr.splitlines() if ln.startswith("rlplan: warning:")]
    assert len(warning) == 1 and f"--price {price}" in warning[0] and words in warning[0]
    assert json.loads(result.stdout)["cost"]["price_usd_per_gpu_hour"] == float(price)


def test_a_published_price_passes_without_a_word(cli, write):
    sc = write("sc.yaml", grpo_scenario())
    result = cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--price", "3.99")
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_a_warned_price_with_bad_input_says_the_error_alone(cli, write):
    sc = write("sc.yaml", grpo_scenario())
    assert_bad_input(cli("evaluate", str(sc), str(write("plan.json", PLAN)), "--price", "250",
                         "--nodes", "0"), "--nodes")

"""Heterogeneous GPU pools (issue 13): the scenario's `cluster.pools`, the search over
(pool, size) shapes, `evaluate` per pool, and the errors on bad pool specs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cost.iteration import evaluate
from planner.frameworks import capabilities
from planner.search import brute, cpsat
from planner.search.choice import fits, iteration_ms, score, valid, weighted_gpus
from planner.search.option import Option
from planner.search.pools import price_weights
from planner.search.solve import plan, to_plan_input
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_cli import assert_bad_input

SMALL = {"models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.prompt_len": 128, "workload.response_len": 256,
         "workload.max_response_len": 512}


def pools(*specs: tuple[str, str, int, float | None]) -> list[dict]:
    """cluster.pools entries from (name, gpu, GPUs on one node, price)."""
    return [{"name": n, "gpu": gpu, "nodes": 1, "gpus_per_node": per_node}
            | ({"price_usd_per_gpu_hour": price} if price else {})
            for n, gpu, per_node, price in specs]


def two_pools(first, second, **flags):
    """Two one-node pools; L40S nodes state no network, so the link between pools is given."""
    return load_scenario(None, {**SMALL, "cluster.pools": pools(first, second),
                                "cluster.inter_pool_gbps": 25, **flags})


# PPO's four tasks on 2 + 2 GPUs make ~10^7 choices (minutes of brute force): it gets 1 + 1
# below (`test_cpsat_equals_brute_force_on_two_pools_ppo`)
scenarios = st.fixed_dictionaries({
    "algorithm": st.sampled_from(["grpo", "dpo"]),
    "workload.samples_per_prompt": st.sampled_from([2, 4]),
})
first_pool = st.tuples(st.just("a"), st.sampled_from(["h100-sxm", "a100-sxm-40gb"]),
                       st.sampled_from([1, 2]), st.sampled_from([2.5, 3.99]))
second_pool = st.tuples(st.just("b"), st.sampled_from(["l40s", "h20"]), st.sampled_from([1, 2]),
                        st.sampled_from([0.8, 1.5, 2.5]))
objectives = st.one_of(
    st.sampled_from([{"search.objective": "time"}, {"search.objective": "cost"}]),
    st.builds(lambda t: {"search.objective": "gpus", "search.target_tokens_per_s": t},
              st.sampled_from([300.0, 1000.0])))
# (staleness, fusion, swap, overlap sync, partial rollouts)
inter = st.sampled_from([(0, False, False, False, False), (1, False, False, False, False),
                         (0, True, False, False, False), (0, False, True, False, False),
                         (1, False, False, True, False)])


@pytest.mark.usefixtures("fewer_group_sizes")
@settings(max_examples=14, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=scenarios, first=first_pool, second=second_pool, option=inter,
       objective=objectives)
def test_cpsat_equals_brute_force_on_two_pools(flags, first, second, option, objective):
    sc = two_pools(first, second, **flags, **objective)
    staleness, fusion, swap, overlap_sync, partial = option
    space = build_space(sc, staleness=staleness, fusion=fusion, swap=swap,
                        overlap_sync=overlap_sync, partial=partial, slots=2)
    assert len(space.pools) == 2
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    if best is None:
        assert result.status == "INFEASIBLE" and result.choice is None
        return
    assert count > 0 and result.status == "OPTIMAL" and result.objective == best
    assert valid(space, result.choice) and fits(space, result.choice)
    assert score(space, result.choice) == best


@pytest.mark.parametrize("option", [(0, False, False), (0, False, True), (1, False, False)])
def test_cpsat_equals_brute_force_on_two_pools_ppo(option):
    """PPO (actor, critic, reference, generation) on one H100 and one H20: ~10^5 choices."""
    staleness, fusion, swap = option
    sc = two_pools(("a", "h100-sxm", 1, 3.99), ("b", "h20", 1, 1.5), algorithm="ppo",
                   **{"workload.samples_per_prompt": 2, "search.objective": "cost"})
    space = build_space(sc, staleness=staleness, fusion=fusion, swap=swap, slots=2)
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 0
    if best is None:
        assert result.status == "INFEASIBLE"
        return
    assert result.status == "OPTIMAL" and result.objective == best


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(first=first_pool, second=second_pool,
       option=st.sampled_from([Option(0, False, False), Option(1, False, False),
                               Option(0, True, False)]),
       objective=st.sampled_from(["time", "cost"]))
def test_evaluate_of_a_two_pool_plan_equals_the_search_price(first, second, option, objective):
    """The search's optimum, written as a plan and priced by evaluate (each group on its pool,
    a sync across pools on the inter-pool link): the solver's ms to the rounding of its
    candidates, and under the cost objective the price-weighted GPUs of the plan."""
    sc = two_pools(first, second, algorithm="grpo", **{"workload.samples_per_prompt": 4,
                                                     "search.objective": objective})
    space = build_space(sc, staleness=option.staleness, fusion=option.fusion, slots=2)
    result = cpsat.solve(space, 30)
    if result.choice is None:
        return
    ms = iteration_ms(space, result.choice)
    plan_in = to_plan_input(space, result.choice, option)
    ev = evaluate(sc, plan_in)
    assert ev.iteration_time_s * 1000 == pytest.approx(ms, abs=len(space.tasks) + 2)
    if objective == "cost":
        assert result.objective == ms * weighted_gpus(space, result.choice)
    used = {g.pool for g in plan_in.groups}
    assert used <= {"a", "b"} and all(g.pool for g in plan_in.groups)


def test_price_weights_are_the_prices_exact_ratio():
    sc = two_pools(("a", "h100-sxm", 1, 3.99), ("b", "h20", 1, 1.5), algorithm="grpo",
                   **{"workload.samples_per_prompt": 2})
    assert price_weights(sc) == [133, 50]  # 3.99 : 1.50 = 399 : 150, over their gcd 3
    alone = load_scenario(None, {**SMALL, "algorithm": "grpo", "cluster.gpu": "h100-sxm",
                                 "workload.samples_per_prompt": 2})
    assert price_weights(alone) == [1]


ROLLOUT_POOL = {"algorithm": "grpo", "models.actor": "qwen2.5-7b",
                "workload.prompts_per_step": 64, "workload.samples_per_prompt": 8,
                "workload.prompt_len": 256, "workload.response_len": 1024,
                "workload.max_response_len": 4096, "search.max_staleness": 1}


def test_generation_goes_to_the_rollout_pool():
    """4 H100 beside 8 H20, one step of asynchrony allowed: the H100s have 6.7× the H20's
    BF16 compute (989 vs 148 TFLOP/s) but less HBM bandwidth (3.35 vs 4.0 TB/s) and memory
    (80 vs 96 GB), so the search trains on the H100s and decodes on the H20s, the two
    overlapping — faster than anything on the H100 pool alone."""
    sc = load_scenario(None, {**ROLLOUT_POOL, "cluster.pools": pools(
        ("train", "h100-sxm", 4, None), ("rollout", "h20", 8, 1.5))})
    found = plan(sc, workers=1, explain=False)
    assert found.status == "optimal"
    pool_of = {g.name: g.pool for g in found.groups}
    assert pool_of[found.layouts["actor"]["generation"].group] == "rollout"
    assert pool_of[found.layouts["actor"]["training"].group] == "train"
    alone = load_scenario(None, {**ROLLOUT_POOL, "cluster.gpu": "h100-sxm",
                                 "cluster.nodes": 1, "cluster.gpus_per_node": 4})
    assert found.iteration_time_s < plan(alone, workers=1, explain=False).iteration_time_s


def _comparable(p) -> dict:
    data = p.model_dump(mode="json", exclude={"scenario"})
    data["search"].pop("wall_s")
    return data


def test_a_one_pool_list_plans_as_the_plain_cluster():
    flat = {**SMALL, "algorithm": "grpo", "workload.samples_per_prompt": 4}
    plain = load_scenario(None, {**flat, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
                                 "cluster.gpus_per_node": 4})
    listed = load_scenario(None, {**flat, "cluster.pools": pools(("only", "h100-sxm", 4, None))})
    a, b = plan(plain, workers=1), plan(listed, workers=1)
    assert _comparable(a) == _comparable(b)
    assert "pool" not in a.model_dump(mode="json")["groups"][0]


def test_a_two_pool_plan_names_its_pools_and_prices_each(cli, write, tmp_path):
    scenario = write("s.yaml", _scenario_file(pools(("a", "h100-sxm", 2, 4.0),
                                                    ("b", "h20", 2, 1.0))))
    out = tmp_path / "plan.json"
    result = cli("plan", str(scenario), "--json", "--out", str(out), "--workers", "1")
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(out.read_text())
    assert all(g["pool"] in ("a", "b") for g in data["groups"])
    gpus = {p: sum(g["gpus"] for g in data["groups"] if g["pool"] == p) for p in ("a", "b")}
    usd = data["iteration_time_s"] * (gpus["a"] * 4.0 + gpus["b"] * 1.0) / 3600
    assert data["cost_per_step_usd"] == pytest.approx(usd, rel=1e-12)
    again = cli("evaluate", str(scenario), str(out), "--json")
    assert again.exit_code == 0, again.output
    assert math.isclose(json.loads(again.stdout)["iteration_time_s"], data["iteration_time_s"],
                        rel_tol=1e-12)


def _scenario_file(cluster_pools: list[dict], **cluster) -> dict:
    return {"algorithm": "grpo", "models": {"actor": "qwen2.5-0.5b"},
            "workload": {"prompts_per_step": 8, "samples_per_prompt": 2, "prompt_len": 128,
                         "response_len": 256, "max_response_len": 512},
            "cluster": {"pools": cluster_pools, **cluster}, "search": {"time_limit_s": 30}}


@pytest.mark.parametrize(("cluster", "fragments"), [
    ({"pools": pools(("a", "h100-sxm", 1, None), ("b", "h2x", 1, None))},
     ["cluster.pools[1].gpu", "unknown GPU profile 'h2x'"]),
    ({"pools": pools(("a", "h100-sxm", 1, None), ("a", "h20", 1, None))},
     ["cluster.pools[1].name", "'a'", "own"]),
    ({"pools": pools(("a", "h100-sxm", 1, None)), "gpu": "h100-sxm"},
     ["cluster.gpu cannot be given with cluster.pools"]),
    ({"pools": pools(("a", "h100-sxm", 1, None), ("b", "h20", 16, None))},
     ["cluster.pools[1]", "gpus_per_node (16)"]),
    ({"pools": [{"name": "a", "gpu": "h100-sxm", "nodes": 0}]}, ["cluster.pools[0].nodes"]),
])
def test_bad_pool_specs_exit_2_naming_the_field(cli, write, cluster, fragments):
    rest = {k: v for k, v in cluster.items() if k != "pools"}
    path = write("s.yaml", _scenario_file(cluster["pools"], **rest))
    assert_bad_input(cli("validate", str(path)), *fragments)


@pytest.mark.parametrize("flag", [("--gpu", "b200"), ("--nodes", "4"),
                                  ("--gpus-per-node", "4"), ("--price", "2")])
def test_one_kind_cluster_flags_on_a_pools_scenario_exit_2_naming_the_flag(cli, flag):
    example = str(Path(__file__).resolve().parent.parent / "examples"
                  / "grpo-qwen2.5-7b-pools.yaml")
    assert_bad_input(cli("validate", example, *flag), flag[0], "cluster.pools")


def test_the_cost_objective_needs_every_pool_priced(cli, write):
    raw = _scenario_file(pools(("a", "h100-sxm", 1, None), ("b", "h20", 1, None)))
    raw["search"]["objective"] = "cost"
    assert_bad_input(cli("validate", str(write("s.yaml", raw))),
                     "cluster.pools[1].price_usd_per_gpu_hour")


@pytest.mark.parametrize(("groups", "fragments"), [
    ([{"name": "g0", "gpus": 2, "roles": ["actor"], "pool": "c"}],
     ["groups[0].pool", "no pool named 'c'", "a, b"]),
    ([{"name": "g0", "gpus": 2, "roles": ["actor"]}], ["groups[0].pool is missing"]),
    ([{"name": "g0", "gpus": 4, "roles": ["actor"], "pool": "b"}],
     ["pool 'b'", "which has 2"]),
])
def test_bad_plan_pools_exit_2(cli, write, groups, fragments):
    scenario = write("s.yaml", _scenario_file(pools(("a", "h100-sxm", 2, None),
                                                    ("b", "h20", 2, None))))
    g = groups[0]["gpus"]
    plan_file = write("p.json", {"groups": groups, "inter_model": {"placement": "colocated"},
                                 "layouts": {"actor": {"training": {"group": "g0", "dp": g},
                                                       "generation": {"group": "g0", "dp": g}},
                                             "reference": {"assessment": {"group": "g0",
                                                                          "dp": g}}}})
    assert_bad_input(cli("evaluate", str(scenario), str(plan_file)), *fragments)


def test_exports_follow_the_pools(cli, write, tmp_path):
    """verl gets a resource pool per group, with a note that it does not pin GPU types; the
    frameworks that launch one job on one GPU type refuse a plan across pools (exit 2)."""
    raw = _scenario_file(pools(("a", "h100-sxm", 4, None), ("b", "h20", 8, None)))
    raw["models"]["actor"] = "qwen2.5-7b"  # `test_generation_goes_to_the_rollout_pool`'s case
    raw["workload"] = {"prompts_per_step": 64, "samples_per_prompt": 8, "prompt_len": 256,
                       "response_len": 1024, "max_response_len": 4096}
    raw["search"]["max_staleness"] = 1
    scenario = write("s.yaml", raw)
    out = tmp_path / "plan.json"
    result = cli("plan", str(scenario), "--framework", "verl", "--json", "--out", str(out),
                 "--workers", "1")
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(out.read_text())
    assert {g["pool"] for g in data["groups"]} == {"a", "b"}
    verl = cli("export", str(out), "--format", "verl")
    assert verl.exit_code == 0, verl.output
    assert "names no GPU type" in verl.stderr and "ray status" in verl.stderr
    for fmt in ("openrlhf", "deepspeed", "megatron"):
        assert_bad_input(cli("export", str(out), "--format", fmt), "groups: the plan runs on pools",
                         f"{fmt} launches its roles as one job on one GPU type",
                         f"re-plan with --framework {fmt}@")
    # planned for OpenRLHF, every group is on one pool, and the export takes it
    result = cli("plan", str(scenario), "--framework", "openrlhf", "--json", "--out", str(out),
                 "--workers", "1")
    assert result.exit_code == 0, result.output
    assert len({g["pool"] for g in json.loads(out.read_text())["groups"]}) == 1
    assert cli("export", str(out)).exit_code == 0


def test_a_sweep_of_a_pools_scenario_is_refused(cli):
    example = Path(__file__).parents[1] / "examples" / "grpo-qwen2.5-7b-pools.yaml"
    assert_bad_input(cli("sweep", str(example), "--gpus", "8,16"),
                     "cluster.pools", "sweep sizes one GPU type")


@pytest.mark.parametrize("framework", ["openrlhf", "verl"])
def test_a_framework_on_one_gpu_type_keeps_its_groups_on_one_pool(framework):
    """OpenRLHF launches one job on one GPU type (its preset's mixed_pools false): CP-SAT and
    brute force agree on the best plan within one pool; verl's resource pools may span both."""
    sc = two_pools(("a", "h100-sxm", 2, 3.99), ("b", "h20", 2, 1.5), algorithm="grpo",
                   **{"workload.samples_per_prompt": 2, "search.max_staleness": 1,
                      "framework": framework})
    caps = capabilities(sc.framework)
    space = build_space(sc, staleness=1, slots=2, caps=caps)
    best, choice, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 0 and result.status == "OPTIMAL" and result.objective == best
    if not caps.mixed_pools:
        assert len({choice.pool(k) for k, s in enumerate(choice.sizes) if s}) == 1
        assert len({result.choice.pool(k) for k, s in enumerate(result.choice.sizes) if s}) == 1


def test_a_pool_without_a_price_is_named_with_the_field_that_prices_it(cli, write, tmp_path):
    """The cost line names the pool left unpriced and the field to set (not --price, which a
    pools scenario refuses)."""
    scenario = write("s.yaml", _scenario_file(pools(("a", "h100-sxm", 2, 4.0),
                                                    ("b", "h20", 2, None))))
    result = cli("plan", str(scenario), "--workers", "1", "--out", str(tmp_path / "p.json"))
    assert result.exit_code == 0, result.output
    line = " ".join(next(ln for ln in result.stdout.splitlines() if "cost" in ln
                         and "per GPU-hour" in ln).split())
    used = json.loads((tmp_path / "p.json").read_text())["cost"]["pools"]
    if "b" in used:  # the plan uses the unpriced pool: no cost, and how to give one
        assert "× b without a price; set price_usd_per_gpu_hour on pool b under " \
               "cluster.pools" in line
    assert "× a at $4 per GPU-hour" in line
    assert "--price" not in line

"""`rlplan sweep --pool NAME:SIZES`: grids over a scenario's pool sizes — the points, each
point's scenario, the rows' cost over every pool at its price, the frontier and target over
the rows, CSV/JSON/picture, and bad specs.

One small GRPO scenario (Qwen2.5-0.5B, 1024 short rollouts) on an H100 pool beside an H20 pool
is swept once over train 0, 2, 4 × rollout 0, 8 in two worker processes (5 points: 0 + 0 is
none); the tests read that run's outputs.
"""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli.main import app
from planner.errors import InputError
from planner.specs.hardware import load_profile
from planner.specs.scenario import load_scenario
from planner.sweep import NoPlan, Row, parse_gpus
from planner.sweep.grid import beats
from planner.sweep.pools import grid_points, parse_pools, point_scenario, prepare
from tests.conftest import REPO
from tests.test_cli import assert_bad_input
from tests.test_sweep import SMALL

ROLLOUT_PRICE = 1.5  # the H20 profile has none: the scenario sets it
POOLS = {"pools": [{"name": "train", "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
                   {"name": "rollout", "gpu": "h20", "nodes": 1, "gpus_per_node": 8,
                    "price_usd_per_gpu_hour": ROLLOUT_PRICE}]}
POOLED = {**SMALL, "cluster": POOLS, "search": {"time_limit_s": 60}}
GRID = ["--pool", "train:0,2,4", "--pool", "rollout:0,8"]
POINTS = [(0, 8), (2, 0), (2, 8), (4, 0), (4, 8)]  # the product, rollout fastest, 0 + 0 dropped
TARGET_STEP_S = 10.0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The pool grid, run once through the CLI: its JSON, CSV and SVG, and the scenario."""
    tmp = tmp_path_factory.mktemp("pools")
    scenario = tmp / "pooled.yaml"
    scenario.write_text(yaml.safe_dump(POOLED))
    result = CliRunner().invoke(app, [
        "sweep", str(scenario), *GRID, "--jobs", "2", "--json", "--csv", str(tmp / "grid.csv"),
        "--picture", str(tmp / "grid.svg"), "--target-step-s", str(TARGET_STEP_S)],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"json": json.loads(result.stdout), "csv": (tmp / "grid.csv").read_text(),
            "svg": (tmp / "grid.svg").read_text(), "scenario": scenario, "tmp": tmp}


def pooled(tmp_path, cluster=None):
    path = tmp_path / "pooled.yaml"
    path.write_text(yaml.safe_dump({**POOLED, "cluster": cluster or POOLS}))
    return load_scenario(path)


# --- the points ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "node", "sizes"), [
    ("0..64", 8, [0, 8, 16, 32, 64]),  # 0, then one node doubling
    ("0..4", 8, [0, 4]),  # below a node the range starts at its end
    ("0,8,16", 8, [0, 8, 16]),
    ("0", 8, [0]),
    ("2..8", 8, [2, 4, 8]),  # without 0, a range as --gpus takes it
])
def test_pool_sizes(spec, node, sizes):
    assert parse_gpus(spec, node, "--pool x", absent=True) == sizes


def test_zero_is_a_pool_size_only():
    with pytest.raises(InputError, match="--gpus: 0 GPUs; sizes start at 1"):
        parse_gpus("0,8", 8)


def test_grid_points_are_the_product_without_empty_points(tmp_path):
    sc = pooled(tmp_path)
    named = parse_pools(["rollout:0,8", "train:0,2,4"], sc)  # the order given does not matter
    assert [tuple(p.values()) for p in grid_points(sc, named)] == POINTS
    assert all(list(p) == ["train", "rollout"] for p in grid_points(sc, named))
    # a pool not named keeps its scenario size at every point
    assert [tuple(p.values()) for p in grid_points(sc, parse_pools(["rollout:0,16"], sc))] == [
        (8, 0), (8, 16)]


def test_a_point_is_the_scenario_written_with_its_sizes(tmp_path):
    three = {"pools": [*POOLS["pools"], {"name": "big", "gpu": "b200", "nodes": 1,
                                         "gpus_per_node": 8}]}
    sc = pooled(tmp_path, three)
    assert sc.inter_pool_gbps == load_profile("h20").inter_node_gbps  # the slower pool's
    two = point_scenario(sc, {"train": 16, "rollout": 0, "big": 4})
    assert [(p.name, p.cluster.nodes, p.cluster.gpus_per_node) for p in two.pools] == [
        ("train", 2, 8), ("big", 1, 4)]
    # without the H20 pool the default link is the slower remaining pool's
    assert two.inter_pool_gbps == min(load_profile("h100-sxm").inter_node_gbps,
                                      load_profile("b200").inter_node_gbps)
    # the plan JSON carries the point's own cluster
    assert [p.nodes for p in two.source_input.cluster.pools] == [2, 1]
    one = point_scenario(sc, {"train": 0, "rollout": 32, "big": 0})
    assert not one.multi_pool and one.cluster.name == "rollout"
    assert (one.cluster.gpu.name, one.cluster.nodes, one.cluster.price) == ("h20", 4,
                                                                           ROLLOUT_PRICE)


def test_a_size_a_pool_cannot_form_is_a_row_saying_why(tmp_path):
    profile = yaml.safe_load((REPO / "hardware_profiles" / "h100-sxm.yaml").read_text())
    profile.pop("inter_node_gbps")
    profile.get("sources", {}).pop("inter_node_gbps", None)
    profile["name"] = "no-network"
    (tmp_path / "nonet.yaml").write_text(yaml.safe_dump(profile))
    cluster = {"pools": [{"name": "a", "gpu": str(tmp_path / "nonet.yaml"), "nodes": 1,
                          "gpus_per_node": 8},
                         {"name": "b", "gpu": "h20", "nodes": 1, "gpus_per_node": 8}],
               "inter_pool_gbps": 25}
    sc = pooled(tmp_path, cluster)
    points = dict((tuple(s.values()), p) for s, p in prepare(sc, parse_pools(["a:8,16"], sc)))
    assert not isinstance(points[(8, 8)], NoPlan)
    assert isinstance(points[(16, 8)], NoPlan) and not points[(16, 8)].searched
    assert "pool a" in points[(16, 8)].reason and "inter_node_gbps" in points[(16, 8)].reason


# --- the run's rows -----------------------------------------------------------------------------


def test_one_row_per_point_naming_each_pool(run):
    rows = run["json"]["rows"]
    assert [(r["pools"]["train"], r["pools"]["rollout"]) for r in rows] == POINTS
    assert [r["gpus"] for r in rows] == [t + r for t, r in POINTS]
    assert all(r["status"] == "optimal" for r in rows)
    assert [p["name"] for p in run["json"]["pools"]] == ["train", "rollout"]
    assert [p["sizes"] for p in run["json"]["pools"]] == [[0, 2, 4], [0, 8]]
    assert "profiles" not in run["json"] and "knee_gpus" not in run["json"]


def test_cost_counts_every_gpu_of_each_pool_at_its_price(run):
    h100 = load_profile("h100-sxm").price_usd_per_gpu_hour
    for r in run["json"]["rows"]:
        train, rollout = r["pools"]["train"], r["pools"]["rollout"]
        expected = r["iteration_time_s"] * (train * h100 + rollout * ROLLOUT_PRICE) / 3600
        assert r["cost_per_step_usd"] == pytest.approx(expected, rel=1e-12)
        tokens = r["tokens_per_s"] * r["iteration_time_s"]
        assert r["cost_per_million_tokens_usd"] == pytest.approx(expected / tokens * 1e6,
                                                                 rel=1e-12)


def test_plans_name_pools_only_on_two_pool_points(run):
    for r in run["json"]["rows"]:
        both = all(r["pools"].values())
        groups = r["plan"]["groups"]
        assert all(("pool" in g) == both for g in groups), r["pools"]
        written = r["plan"]["scenario"]["cluster"]["pools"]
        assert [p["name"] for p in written] == [n for n, g in r["pools"].items() if g]
        assert [p["nodes"] * p["gpus_per_node"] for p in written] == [
            g for g in r["pools"].values() if g]
        for g in groups:
            if both:
                assert f"{g['name']}×{g['gpus']} on {g['pool']}" in r["placement"]


def test_frontier_and_target_follow_the_rows(run):
    doc = run["json"]
    rows = [r for r in doc["rows"] if r["status"] in ("optimal", "feasible")]
    key = lambda r: (r["pools"]["train"], r["pools"]["rollout"])  # noqa: E731
    on = [key(p) for p in doc["frontier"]]
    costs = [p["cost_per_step_usd"] for p in doc["frontier"]]
    assert on and costs == sorted(costs)
    as_row = {key(r): Row(r["gpus"], r["status"], iteration_time_s=r["iteration_time_s"],
                          cost_per_step_usd=r["cost_per_step_usd"]) for r in rows}
    for k, row in as_row.items():
        assert (k in on) == (not any(beats(q, row) for q in as_row.values())), k
    meeting = [r for r in rows if r["iteration_time_s"] <= TARGET_STEP_S]
    best = min(meeting, key=lambda r: r["cost_per_step_usd"])
    assert doc["target"]["by"] == "cost" and doc["target"]["pools"] == best["pools"]


def test_a_point_plans_as_its_scenario_written_by_hand(run, cli):
    """The train 4 + rollout 8 point: `rlplan plan` on the same pools written in the file
    finds the same step."""
    row = next(r for r in run["json"]["rows"] if r["pools"] == {"train": 4, "rollout": 8})
    hand = {**POOLED, "cluster": {"pools": [
        {**POOLS["pools"][0], "gpus_per_node": 4}, POOLS["pools"][1]]}}
    path = run["tmp"] / "by-hand.yaml"
    path.write_text(yaml.safe_dump(hand))
    result = cli("plan", str(path), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["status"] == "optimal"
    assert plan["iteration_time_s"] == pytest.approx(row["iteration_time_s"], rel=1e-9)


def test_csv_and_picture(run):
    table = list(csv.DictReader(run["csv"].splitlines()))
    assert [(int(r["train_gpus"]), int(r["rollout_gpus"])) for r in table] == POINTS
    assert "scaling_efficiency" not in table[0]
    for r, j in zip(table, run["json"]["rows"], strict=True):
        assert float(r["cost_per_step_usd"]) == pytest.approx(j["cost_per_step_usd"])
    assert "throughput against rollout GPUs" in run["svg"]
    assert "cost–time frontier" in run["svg"]


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "fragments"), [
    (["--pool", "gpu:8"], ("--pool gpu", "no pool named 'gpu'", "train, rollout")),
    (["--pool", "train:8", "--pool", "train:4"], ("--pool train", "given twice")),
    (["--pool", "train:0", "--pool", "rollout:0"], ("--pool", "every point has no GPU")),
    (["--pool", "train:8", "--gpus", "8"], ("--pool with --gpus",)),
    (["--pool", "train:8", "--gpu", "b200"], ("--pool with --gpu",)),
    (["--pool", "train:12"], ("--pool train", "whole nodes of 8")),
    (["--pool", "train"], ("--pool 'train'", "NAME:SIZES")),
    (["--gpus", "8"], ("cluster.pools", "--pool NAME:SIZES")),
])
def test_bad_pool_grids_exit_2(cli, write, args, fragments):
    path = write("pooled.yaml", POOLED)
    assert_bad_input(cli("sweep", str(path), *args), *fragments)


def test_pool_on_a_scenario_without_pools_exits_2(cli, write):
    path = write("plain.yaml", SMALL)
    assert_bad_input(cli("sweep", str(path), "--pool", "train:8"), "--pool",
                     "no cluster.pools")


# --- pools in the other commands ----------------------------------------------------------------

EXAMPLE = REPO / "examples" / "grpo-qwen2.5-7b-pools.yaml"


def test_analyze_takes_the_node_the_pools_share(cli, write):
    """The paper's model counts no GPUs: a pooled cluster gives what its one-pool part gives
    (P_t, the node, being shared); different nodes need --gpus-per-node."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    pooled_run = cli("analyze", "pipeline", str(EXAMPLE), "--json")
    assert pooled_run.exit_code == 0, pooled_run.output
    one = write("one.yaml", {**raw, "cluster": {"pools": raw["cluster"]["pools"][:1]}})
    single = cli("analyze", "pipeline", str(one), "--json")
    assert json.loads(pooled_run.stdout) == json.loads(single.stdout)

    mixed = {**raw, "cluster": {"pools": [raw["cluster"]["pools"][0],
                                          {**raw["cluster"]["pools"][1], "nodes": 16,
                                           "gpus_per_node": 4}]}}
    path = write("mixed.yaml", mixed)
    assert_bad_input(cli("analyze", "pipeline", str(path)), "cluster.pools", "8 (train)",
                     "4 (rollout)", "--gpus-per-node")
    given = cli("analyze", "pipeline", str(path), "--gpus-per-node", "2", "--json")
    assert given.exit_code == 0, given.output
    assert json.loads(given.stdout)["theory"]["inputs"]["gpus_per_node"] == 2


def test_import_takes_one_gpu_type(cli, write, tmp_path):
    """A framework config names no GPU type: with a one-pool scenario the plan is that pool's
    (no `pool` key); with several pools, exit 2 naming cluster.pools."""
    script = cli("export", str(REPO / "examples" / "plans" / "grpo-qwen2.5-7b-colocated.json"),
                 "--scenario", str(REPO / "examples" / "grpo-qwen2.5-7b.yaml"), "--format",
                 "verl")
    assert script.exit_code == 0, script.output
    verl = write("run.sh", script.stdout)
    raw = yaml.safe_load(EXAMPLE.read_text())
    one = write("one.yaml", {**raw, "cluster": {"pools": raw["cluster"]["pools"][:1]}})
    result = cli("import", str(verl), "--scenario", str(one), "--json")
    assert result.exit_code == 0, result.output
    assert all("pool" not in g for g in json.loads(result.stdout)["groups"])
    out = tmp_path / "imported.json"
    assert_bad_input(cli("import", str(verl), "--scenario", str(EXAMPLE), "--out", str(out)),
                     "cluster.pools", "2 pools", "names no GPU type")
    assert not out.exists()

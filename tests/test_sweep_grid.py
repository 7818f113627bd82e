"""`rlplan sweep` over several GPU types: per-profile prices, the cost–time frontier, the
target's answer (cheapest, else fewest GPUs), and bad grid specs."""

from __future__ import annotations

import json
import sys

import pytest

from planner.specs.hardware import load_profile
from planner.sweep import Row
from planner.sweep.grid import beats, frontier, pick_target
from tests.test_cli import assert_bad_input
from tests.test_sweep import SMALL

PROFILES = ("h100-sxm", "b200")


def point(gpu: str, gpus: int, time_s: float, cost: float | None, tokens: float = 0.0) -> Row:
    return Row(gpus, "optimal", iteration_time_s=time_s, tokens_per_s=tokens or 1e6 / time_s,
               cost_per_step_usd=cost, gpu=gpu)


def key(r: Row) -> tuple[str, int]:
    return (r.gpu, r.gpus)


# --- the frontier on hand-made points -------------------------------------------------------


def test_frontier_hand_made():
    rows = [
        point("a", 8, 10.0, 1.00),   # cheapest: on it
        point("a", 16, 6.0, 1.50),   # on it
        point("b", 8, 6.0, 1.60),    # as fast as a/16 but dearer: beaten
        point("b", 16, 4.0, 2.00),   # on it
        point("a", 32, 4.0, 2.00),   # ties b/16 on both: neither beats the other, both on it
        point("a", 64, 4.5, 3.00),   # slower and dearer than b/16: beaten
        point("b", 32, 2.0, 4.00),   # fastest: on it
        point("c", 8, 1.0, None),    # fastest of all, but no price: listed apart
        Row(64, "infeasible", reason="no plan", gpu="b"),  # no plan: neither
    ]
    best, unpriced = frontier(rows)
    # ties keep the rows' order
    assert [key(r) for r in best] == [("a", 8), ("a", 16), ("b", 16), ("a", 32), ("b", 32)]
    assert [key(r) for r in unpriced] == [("c", 8)]
    # cheapest first, and step time falls along it
    assert [r.cost_per_step_usd for r in best] == sorted(r.cost_per_step_usd for r in best)
    assert [r.iteration_time_s for r in best] == sorted((r.iteration_time_s for r in best),
                                                        reverse=True)
    # the defining property, checked against every priced point
    priced = [r for r in rows if r.feasible and r.cost_per_step_usd is not None]
    for r in priced:
        assert (r in best) == (not any(beats(q, r) for q in priced)), key(r)


def test_frontier_without_prices():
    best, unpriced = frontier([point("a", 8, 10.0, None), point("a", 16, 6.0, None)])
    assert best == [] and [r.gpus for r in unpriced] == [8, 16]


# --- the target -----------------------------------------------------------------------------


def test_cheapest_meeting_a_target():
    rows = [point("a", 8, 10.0, 1.00), point("a", 16, 6.0, 1.50), point("b", 8, 5.0, 1.20),
            point("b", 16, 3.0, 1.80)]
    # a step of at most 6 s: a/16 ($1.50) and b/8 ($1.20) and b/16 meet it; b/8 is cheapest
    t = pick_target(rows, None, 6.0)
    assert (t.by, key(t.row)) == ("cost", ("b", 8))
    assert "cheapest" in t.message and "8 GPUs of b" in t.message
    # both targets: at least 250,000 tokens/s (a step of at most 4 s) and a step of at most 6 s
    t = pick_target(rows, 1e6 / 4.0, 6.0)
    assert key(t.row) == ("b", 16)
    # throughput alone
    assert key(pick_target(rows, 1e6 / 7.0, None).row) == ("b", 8)


def test_target_fewest_gpus_when_a_price_is_missing():
    rows = [point("a", 16, 5.0, None), point("b", 8, 6.0, 9.00), point("b", 16, 3.0, 1.00)]
    t = pick_target(rows, None, 6.0)  # all three meet it; a/16 has no price
    assert (t.by, key(t.row)) == ("gpus", ("b", 8))
    assert "fewest" in t.message and "1 of the 3" in t.message and "--price" in t.message
    # a tie on GPUs goes to the faster point
    t = pick_target([point("a", 8, 5.0, None), point("b", 8, 4.0, 1.0)], None, 6.0)
    assert key(t.row) == ("b", 8)


def test_target_out_of_reach_names_the_fastest():
    t = pick_target([point("a", 8, 10.0, 1.0), point("b", 8, 7.0, 2.0)], None, 5.0)
    assert t.row is None
    assert "a step of at most 5 s" in t.message and "7.00 s" in t.message
    assert "8 GPUs of b" in t.message


# --- the grid through the CLI ----------------------------------------------------------------


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    from typer.testing import CliRunner

    from planner.cli.main import app

    tmp = tmp_path_factory.mktemp("grid")
    path = tmp / "s.yaml"
    path.write_text(json.dumps(SMALL))  # JSON is YAML
    result = CliRunner().invoke(app, [
        "sweep", str(path), "--gpu", ",".join(PROFILES), "--gpus", "1,2,4", "--jobs", "2",
        "--json", "--target-step-s", "20", "--csv", str(tmp / "g.csv"),
        "--picture", str(tmp / "g.svg")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"json": json.loads(result.stdout), "csv": (tmp / "g.csv").read_text(),
            "svg": (tmp / "g.svg").read_text()}


def test_grid_rows_per_profile_with_own_price(grid):
    doc = grid["json"]
    rows = doc["rows"]
    assert [(r["gpu"], r["gpus"]) for r in rows] == [(g, n) for g in PROFILES for n in (1, 2, 4)]
    assert [p["gpu"] for p in doc["profiles"]] == list(PROFILES)
    for r in rows:
        price = load_profile(r["gpu"]).price_usd_per_gpu_hour
        assert price is not None and r["price_usd_per_gpu_hour"] == price
        if r["status"] in ("optimal", "feasible"):
            assert r["cost_per_step_usd"] == pytest.approx(
                r["iteration_time_s"] * r["gpus"] * price / 3600)
            assert r["plan"]["scenario"]["cluster"]["gpu"] == r["gpu"]
    assert load_profile(PROFILES[0]).price_usd_per_gpu_hour != \
        load_profile(PROFILES[1]).price_usd_per_gpu_hour  # the test tells the prices apart
    for p in doc["profiles"]:
        assert p["cost"]["price_usd_per_gpu_hour"] == load_profile(p["gpu"]).price_usd_per_gpu_hour
    assert "knee_gpus" not in doc  # several profiles: the answers are per profile
    header = grid["csv"].splitlines()[0].split(",")
    assert header[:2] == ["gpu", "gpus"]


def test_grid_frontier_and_target_agree_with_the_rows(grid):
    doc = grid["json"]
    rows = [Row(**r) for r in doc["rows"]]
    best, _ = frontier(rows)
    assert doc["frontier"] == [{k: getattr(r, k) for k in doc["frontier"][0]} for r in best]
    assert doc["unpriced"] == []
    meeting = [r for r in rows if r.feasible and r.iteration_time_s <= 20]
    cheapest = min(meeting, key=lambda r: r.cost_per_step_usd)
    assert doc["target"]["by"] == "cost"
    assert (doc["target"]["gpu"], doc["target"]["gpus"]) == (cheapest.gpu, cheapest.gpus)
    assert "cost–time frontier" in grid["svg"] and "target step 20 s" in grid["svg"]
    for g in PROFILES:
        assert g in grid["svg"]


def test_price_flag_applies_to_every_profile(cli, write):
    result = cli("sweep", str(write("s.yaml", SMALL)), "--gpu", ",".join(PROFILES), "--gpus",
                 "1", "--price", "2.5", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {r["price_usd_per_gpu_hour"] for r in doc["rows"]} == {2.5}
    assert {p["cost"]["price_source"] for p in doc["profiles"]} == {"flag"}


def test_one_profile_keeps_the_top_level_answers(cli, write):
    result = cli("sweep", str(write("s.yaml", SMALL)), "--gpus", "1,2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["smallest_feasible_gpus"] == doc["profiles"][0]["smallest_feasible_gpus"]
    assert doc["cost"]["price_usd_per_gpu_hour"] == load_profile("h100-sxm").price_usd_per_gpu_hour
    assert {r["gpu"] for r in doc["rows"]} == {"h100-sxm"}


# --- bad input --------------------------------------------------------------------------------


def test_bad_grid_specs_exit_2(cli, write):
    path = str(write("s.yaml", SMALL))
    assert_bad_input(cli("sweep", path, "--gpu", "h100-sxm,,b200", "--gpus", "8"),
                     "--gpu", "empty profile name")
    assert_bad_input(cli("sweep", path, "--gpu", "b200,h100-sxm,b200", "--gpus", "8"),
                     "--gpu", "b200 given twice")
    assert_bad_input(cli("sweep", path, "--gpu", "h100-sxm,nope", "--gpus", "8"),
                     "--gpu nope", "unknown GPU profile")
    assert_bad_input(cli("sweep", path, "--gpu", "h100-sxm,b200", "--gpus", "8,12"),
                     "--gpus", "multiple of 8")
    assert_bad_input(cli("sweep", path, "--gpus", "8", "--target-step-s", "0"),
                     "--target-step-s", "above 0")
    assert_bad_input(cli("sweep", path, "--gpus", "8", "--ray", " "), "--ray")


def test_ray_missing_exits_2_with_the_install_hint(cli, write, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as when not installed
    assert_bad_input(cli("sweep", str(write("s.yaml", SMALL)), "--gpus", "8", "--ray", "auto"),
                     "--ray", "pip install 'rlplan[ray]'")


def test_each_profile_of_a_grid_takes_its_own_price(cli, write):
    """`--gpu NAME:PRICE`: a profile without a shipped price (MI300X) reaches the frontier;
    --price prices the profiles given none; an implausible one is warned about."""
    assert load_profile("mi300x").price_usd_per_gpu_hour is None
    path = write("s.yaml", SMALL)
    result = cli("sweep", str(path), "--gpu", "h100-sxm:2.5,mi300x:2.25,b200", "--price", "7",
                 "--gpus", "1", "--jobs", "1", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    prices = {r["gpu"]: r["price_usd_per_gpu_hour"] for r in doc["rows"]}
    assert prices == {"h100-sxm": 2.5, "mi300x": 2.25, "b200": 7.0}
    assert "mi300x" in {r["gpu"] for r in doc["frontier"]} | {r["gpu"] for r in doc["rows"]
                                                              if r["status"] != "optimal"}
    assert doc["unpriced"] == []
    warned = cli("sweep", str(path), "--gpu", "h100-sxm:300", "--gpus", "1", "--jobs", "1",
                 "--json")
    assert warned.exit_code == 0 and "--gpu h100-sxm:300" in warned.stderr
    assert "far above published rental prices" in warned.stderr


@pytest.mark.parametrize(("spec", "fragments"), [
    ("h100-sxm:abc,b200", ["--gpu h100-sxm:abc", "USD per GPU-hour", "h100-sxm:3.99"]),
    ("h100-sxm:0", ["--gpu h100-sxm:0", "above 0"]),
    (":3,b200", ["--gpu", "empty profile name"]),
    ("h100-sxm:2,h100-sxm:3", ["h100-sxm given twice"]),
])
def test_bad_profile_prices_exit_2(cli, write, spec, fragments):
    assert_bad_input(cli("sweep", str(write("s.yaml", SMALL)), "--gpu", spec, "--gpus", "1"),
                     *fragments)


def test_the_grid_picture_rings_the_point_it_answers_with(grid):
    """The GPU-type grid's throughput panel marks the target's answer, named in the legend."""
    doc = grid["json"]
    hit = f"{doc['target']['gpus']} GPU{'s' if doc['target']['gpus'] > 1 else ''} of " \
          f"{doc['target']['gpu']}"
    assert f"cheapest meeting the target: {hit}" in grid["svg"]

"""`rlplan sweep`: sizes, the table's arithmetic and consistency, CSV/JSON, pictures, errors.

One small GRPO scenario (Qwen2.5-0.5B, 1024 short rollouts, H100) is swept once over
1, 2, 4, 8, 16 GPUs in two worker processes; the tests read that run's outputs.
"""

from __future__ import annotations

import csv
import json
from itertools import pairwise

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli.main import app
from planner.errors import InputError
from planner.plan import Group, Plan
from planner.specs.hardware import load_profile
from planner.sweep import (
    CSV_COLUMNS,
    KNEE_MARGINAL,
    TIE,
    NoPlan,
    Row,
    parse_gpus,
    summarize,
)
from planner.sweep.grid import pick_target
from tests.conftest import grpo_scenario
from tests.test_cli import assert_bad_input

SIZES = [1, 2, 4, 8, 16]
TARGET = 40_000.0
SMALL = grpo_scenario(workload={"prompts_per_step": 128, "samples_per_prompt": 8,
                                "prompt_len": 256, "response_len": 512,
                                "max_response_len": 1024},
                      search={"time_limit_s": 60})  # generous: every point proves its optimum


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The sweep, run once through the CLI: its JSON, CSV and SVG."""
    tmp = tmp_path_factory.mktemp("sweep")
    scenario = tmp / "grpo.yaml"
    scenario.write_text(yaml.safe_dump(SMALL))
    result = CliRunner().invoke(app, [
        "sweep", str(scenario), "--gpus", "1..16", "--jobs", "2", "--json",
        "--csv", str(tmp / "sweep.csv"), "--picture", str(tmp / "sweep.svg"),
        "--target-tokens-per-s", str(TARGET)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"json": json.loads(result.stdout), "csv": (tmp / "sweep.csv").read_text(),
            "svg": (tmp / "sweep.svg").read_text()}


def feasible(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] in ("optimal", "feasible")]


# --- sizes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "sizes"), [
    ("8,16,32", [8, 16, 32]),
    ("8..64", [8, 16, 32, 64]),
    ("8..48", [8, 16, 32, 48]),  # a range ends at its end even off the doubling
    ("1..8", [1, 2, 4, 8]),
    ("4, 1..2, 4", [1, 2, 4]),
    ("16..16", [16]),
])
def test_parse_gpus(spec, sizes):
    assert parse_gpus(spec, 8) == sizes


@pytest.mark.parametrize(("spec", "fragment"), [
    ("12", "multiple of 8"),  # above a node: whole nodes
    ("3", "below one node use 1, 2, 4, 8"),  # below: divides the node
    ("8..x", "not a size or a range"),
    ("64..8", "range 64..8"),
    (",", "no sizes given"),
    ("0", "sizes start at 1"),
])
def test_parse_gpus_refuses(spec, fragment):
    with pytest.raises(InputError, match="--gpus") as exc:
        parse_gpus(spec, 8)
    assert fragment in str(exc.value)


def test_bad_sizes_exit_2(cli, write):
    path = write("s.yaml", SMALL)
    assert_bad_input(cli("sweep", str(path), "--gpus", "8,12"), "--gpus", "12", "multiple of 8")
    assert_bad_input(cli("sweep", str(path)), "--gpus is required")
    assert_bad_input(cli("sweep", str(path), "--gpus", "8", "--target-tokens-per-s", "0"),
                     "--target-tokens-per-s")


def test_bad_picture_refused_before_solving(cli, write, tmp_path, monkeypatch):
    def no_solving(*args, **kwargs):
        raise AssertionError("solved despite bad input")

    monkeypatch.setattr("planner.cli.sweep.run_grid", no_solving)
    path = write("s.yaml", SMALL)
    csv_out = tmp_path / "out.csv"
    result = cli("sweep", str(path), "--gpus", "8", "--picture", str(tmp_path / "chart.pdf"),
                 "--csv", str(csv_out))
    assert_bad_input(result, "--picture", "chart.pdf", ".svg", ".png")
    assert not csv_out.exists()  # nothing written
    result = cli("sweep", str(path), "--gpus", "8", "--csv", str(tmp_path / "no/such/x.csv"))
    assert_bad_input(result, "--csv", "does not exist")


# --- the table --------------------------------------------------------------------------------


def test_rows_in_size_order_with_design_keys(run):
    rows = run["json"]["rows"]
    assert [r["gpus"] for r in rows] == SIZES
    for r in rows:
        assert {"gpus", "status", "iteration_time_s", "tokens_per_s", "cost_per_step_usd",
                "plan"} <= set(r)
        assert r["status"] in ("optimal", "feasible", "infeasible", "timeout")
    ok = feasible(rows)
    assert ok, "the small scenario fits"
    for r in ok:
        assert Plan.model_validate(r["plan"]).iteration_time_s == r["iteration_time_s"]
        assert r["gpus_used"] <= r["gpus"]
        assert r["placement"].startswith(r["plan"]["inter_model"]["placement"])


def test_a_rows_plan_carries_its_own_cluster_and_evaluates_to_its_row(run):
    """A row's plan JSON names the cluster it was planned on (its `scenario` key), so
    `rlplan evaluate plan.json` alone prices it on that cluster, to the row's step time."""
    from planner.cost.iteration import evaluate
    from planner.plan import PlanInput
    from planner.specs.scenario import scenario_from_plan

    for r in feasible(run["json"]["rows"]):
        sc = scenario_from_plan(r["plan"], "row")
        assert sc.cluster.total_gpus == r["gpus"]
        ev = evaluate(sc, PlanInput.model_validate(r["plan"]))
        assert ev.iteration_time_s == pytest.approx(r["iteration_time_s"], rel=1e-9)


def test_more_gpus_never_slower_unless_noted(run):
    fastest = None
    for r in feasible(run["json"]["rows"]):
        if fastest is not None and r["iteration_time_s"] > fastest * (1 + TIE):
            assert r["note"] and r["note"].startswith("slower than"), r
        fastest = min(fastest or r["iteration_time_s"], r["iteration_time_s"])


def test_row_arithmetic(run):
    doc = run["json"]
    ok = feasible(doc["rows"])
    price = load_profile("h100-sxm").price_usd_per_gpu_hour
    first = ok[0]
    assert doc["smallest_feasible_gpus"] == first["gpus"]
    for r in ok:
        per_gpu = r["tokens_per_s"] / r["gpus"]
        assert r["tokens_per_s_per_gpu"] == pytest.approx(per_gpu)
        assert r["scaling_efficiency"] == pytest.approx(
            per_gpu / (first["tokens_per_s"] / first["gpus"]))
        assert r["cost_per_step_usd"] == pytest.approx(
            r["iteration_time_s"] * r["gpus"] * price / 3600)
        tokens_per_step = r["tokens_per_s"] * r["iteration_time_s"]
        assert r["cost_per_million_tokens_usd"] == pytest.approx(
            r["cost_per_step_usd"] / tokens_per_step * 1e6)


def test_knee_and_target(run):
    doc = run["json"]
    ok = feasible(doc["rows"])
    knee = None
    for a, b in pairwise(ok):
        gain = (b["tokens_per_s"] / a["tokens_per_s"] - 1) / (b["gpus"] / a["gpus"] - 1)
        assert b["marginal_scaling"] == pytest.approx(gain)
        if knee is None and gain < KNEE_MARGINAL:
            knee = a["gpus"]
    assert doc["knee_gpus"] == knee
    # every size is priced (the profile's price): the cheapest size reaching the target
    reaching = [r for r in ok if r["tokens_per_s"] >= TARGET]
    cheapest = min(reaching, key=lambda r: r["cost_per_step_usd"]) if reaching else None
    assert doc["target"]["gpus"] == (cheapest["gpus"] if cheapest else None)
    assert doc["target"]["by"] == ("cost" if reaching else "gpus")
    assert doc["target"]["tokens_per_s"] == TARGET


def test_target_out_of_reach():
    rows = [Row(8, "optimal", iteration_time_s=2.0, tokens_per_s=100.0),
            Row(16, "infeasible", reason="x")]
    target = pick_target(rows, 1e9, None)
    assert target.row is None
    assert "no swept size reaches" in target.message and "on 8 GPUs" in target.message
    assert pick_target(rows, 50.0, None).row.gpus == 8


def test_slower_larger_size_carries_a_note(run):
    """A larger size made slower than a smaller one gets a note naming why."""
    answers = [(r["gpus"], Plan.model_validate(r["plan"])) for r in feasible(run["json"]["rows"])]
    (g0, p0), (g1, p1) = answers[0], answers[-1]
    slow = p1.model_copy(update={"iteration_time_s": p0.iteration_time_s * 2, "status": "feasible",
                                 "search": {**p1.search, "gap": 0.25}})
    sweep = summarize([(g0, p0), (g1, slow), (g1 * 2, NoPlan("infeasible: no layout fits")),
                       (g1 * 4, NoPlan("no plan found within the time limit", timeout=True))],
                      8, 4.0)
    _, larger, infeasible, late = sweep.rows
    assert larger.note.startswith(f"slower than {g0} GPU")
    assert "time limit" in larger.note and "25%" in larger.note
    assert "group sizes offered here" in infeasible.note and infeasible.status == "infeasible"
    # a size whose time ran out is not proven infeasible: its own status, its reason, no note
    assert late.status == "timeout" and not late.feasible and late.note is None
    assert "time limit" in late.reason
    # 136 + 8 on 144 GPUs: 256 GPUs (32 nodes) offer no 136-GPU group (power-of-two node
    # multiples and their complements to 256), so that plan is not in the larger search
    split = p0.model_copy(update={"groups": [Group(name="g0", gpus=136),
                                             Group(name="g1", gpus=8)]})
    proven_slower = p1.model_copy(update={"iteration_time_s": p0.iteration_time_s * 2,
                                          "status": "optimal"})
    note = summarize([(144, split), (256, proven_slower)], 8, None).rows[1].note
    assert "136-GPU group is not a group size the search offers on 256 GPUs" in note
    assert "time limit" not in note
    refused = summarize([(g0, p0), (g1, NoPlan("no network", searched=False))], 8, None)
    assert refused.rows[1].note is None and refused.rows[1].reason == "no network"
    assert refused.rows[0].cost_per_step_usd is None  # no price: no cost
    assert refused.rows[0].cost_per_million_tokens_usd is None


# --- files ------------------------------------------------------------------------------------


def test_csv_parses_with_header(run):
    reader = csv.DictReader(run["csv"].splitlines())
    assert tuple(reader.fieldnames) == CSV_COLUMNS
    rows = list(reader)
    assert [int(r["gpus"]) for r in rows] == SIZES
    by_json = {r["gpus"]: r for r in run["json"]["rows"]}
    for r in rows:
        if r["tokens_per_s"]:
            expected = by_json[int(r["gpus"])]["tokens_per_s"]
            assert float(r["tokens_per_s"]) == pytest.approx(expected)


def test_svg_holds_the_labels(run):
    svg = run["svg"]
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for label in ("GPUs", "throughput (tokens/s)", "cost per million tokens (USD)",
                  "smallest feasible", f"target {TARGET:,.0f} tokens/s"):
        assert label in svg, label
    if run["json"]["knee_gpus"] is not None:
        assert "knee" in svg


def test_png_and_infeasible_sizes(cli, write, tmp_path):
    """A profile with no network and no price: multi-node sizes are infeasible rows saying
    why, crossed out on the picture's GPU axis."""
    path = write("s.yaml", SMALL)
    png, svg = tmp_path / "chart.png", tmp_path / "chart.svg"
    result = cli("sweep", str(path), "--gpu", "mi250x-gcd", "--gpus", "1,16", "--json",
                 "--picture", str(png), "--json-out", str(tmp_path / "out.json"))
    assert result.exit_code == 0, result.output
    assert png.read_bytes().startswith(b"\x89PNG")
    rows = json.loads(result.stdout)["rows"]
    assert json.loads((tmp_path / "out.json").read_text())["rows"] == rows
    assert rows[1]["status"] == "infeasible" and "inter_node_gbps" in rows[1]["reason"]
    assert rows[1]["plan"] is None
    result = cli("sweep", str(path), "--gpu", "mi250x-gcd", "--gpus", "1,16", "--picture", str(svg))
    assert result.exit_code == 0, result.output
    assert "infeasible (no plan)" in svg.read_text()
    assert "no price in the profile" in svg.read_text()
    assert "inter_node_gbps" in result.stdout  # the table's note says why

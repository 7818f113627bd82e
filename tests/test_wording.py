"""What people read, worded as meant (issue 24): directions in words rather than signs that
read the wrong way, one precision for a price, grammatical counts, the search's tasks as the
rest of the output names them, a TP note only where there is TP, `rlplan gpus` at any width,
and labels the pictures carry (checked in the SVG's text, never in pixels)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from planner.cli.baseline import _by
from planner.cli.sweep import _usd
from planner.export.base import generation_notes
from planner.plan import Layout, Plan
from planner.search.candidate import Task
from planner.specs.hardware import list_profiles
from planner.sweep.grid import usd, without_price

REPO = Path(__file__).resolve().parent.parent


def test_a_change_is_worded_by_its_direction():
    assert _by(10.0, 8.0, "faster", "slower") == "25.0% faster"
    assert _by(10.0, 14.17, "faster", "slower") == "41.7% slower"  # not "+41.7% faster"
    assert _by(1.0, 0.861, "lower", "higher") == "16.1% lower"
    assert _by(1.0, 1.139, "lower", "higher") == "13.9% higher"  # not "-13.9% cheaper"
    assert _by(3.0, 3.0, "faster", "slower") == "0.0% faster"


def test_a_price_reads_the_same_in_the_table_and_the_lines():
    for amount in (0.9154, 0.03072, 6.54, 1234.5):
        assert _usd(amount) == usd(amount)
    assert _usd(0.9154) == "$0.9154" and _usd(None) == "—"


@pytest.mark.parametrize(("unpriced", "reaching", "words"), [
    (1, 1, "the point reaching it has no price"),
    (3, 3, "none of the 3 points reaching it has a price"),
    (1, 3, "1 of the 3 points reaching it has no price"),
    (2, 3, "2 of the 3 points reaching it have no price")])
def test_points_without_a_price_are_counted_grammatically(unpriced, reaching, words):
    assert without_price(unpriced, reaching) == words


def test_search_tasks_are_named_as_the_plan_names_stages():
    assert Task("reference", "forward").words == "reference assessment"
    assert Task("actor", "training").words == "actor training"
    assert Task("actor", "generation").words == "actor generation"


@pytest.mark.parametrize(("tp", "ep", "says", "not_says"), [
    (1, 16, "expert all-to-alls cross", "tensor-parallel"),
    (16, 1, "tensor-parallel all-reduces cross", "expert"),
    (2, 16, "tensor-parallel all-reduces and expert all-to-alls cross", "traffic")])
def test_an_engine_spanning_nodes_names_the_traffic_it_has(tp, ep, says, not_says):
    view = SimpleNamespace(cluster_of=lambda group: SimpleNamespace(gpus_per_node=8),
                           sc=SimpleNamespace(runtime=SimpleNamespace(engine="vllm-v1")))
    gen = Layout(group="g0", dp=16 // tp, tp=tp, ep=ep)
    note = generation_notes(view, gen, 16, "verl")[0]
    assert f"generation tp {tp}" in note and says in note and not_says not in note


@pytest.mark.parametrize("columns", [80, 200])
def test_gpus_honours_columns_and_never_cuts_a_name(columns):
    run = subprocess.run([sys.executable, "-c", "from planner.cli.main import main; main()",
                          "gpus"], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "COLUMNS": str(columns)}, check=False)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    for profile in list_profiles():
        assert any(re.search(rf"│ {re.escape(profile.name)} +│", line) for line in lines), \
            profile.name


def test_every_task_bar_of_the_timeline_is_labelled():
    """The reference's and the reward model's assessments are narrow bars: labelled beside
    them when the word does not fit inside."""
    from planner.pictures.timeline import render
    from tests.export.plans import ppo_disaggregated, ppo_scenario, priced

    plan = Plan.model_validate(priced(ppo_scenario(), ppo_disaggregated()))
    tasks = [s for s in plan.breakdown["timeline"]
             if s["role"] and s["kind"] in ("generation", "assessment", "training")]
    narrow = [s for s in tasks if s["end_s"] - s["start_s"] <= 0.06 * plan.iteration_time_s]
    assert {s["role"] for s in narrow} >= {"reference", "reward"}  # the case in point
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", render(plan, "svg").decode())
    for role in {s["role"] for s in tasks}:
        assert texts.count(role) >= sum(s["role"] == role for s in tasks), role


def test_the_ideal_line_ends_on_the_plots_edge():
    from planner.pictures.sweep_chart import _up_to

    xs, ideal = [8, 16, 32, 64], [10.0, 20.0, 40.0, 80.0]
    cut_x, cut_y = _up_to(xs, ideal, 30.0)
    assert cut_x[:2] == [8, 16] and cut_y[-1] == 30.0 and 16 < cut_x[-1] < 32
    assert _up_to(xs, ideal, 100.0) == (xs, ideal)


def test_the_sweep_picture_names_its_marks_in_the_legend(cli, write, tmp_path):
    from tests.test_sweep import SMALL

    svg = tmp_path / "s.svg"
    result = cli("sweep", str(write("s.yaml", SMALL)), "--gpus", "1,2", "--jobs", "1",
                 "--target-tokens-per-s", "1000", "--picture", str(svg), "--json")
    assert result.exit_code == 0, result.stderr
    target = json.loads(result.stdout)["target"]
    text = svg.read_text()
    assert "smallest feasible: 1 GPU" in text
    assert f"cheapest meeting the target: {target['gpus']} GPU" in text

"""The report page as a file (the browser's view of it is tests/test_report_browser.py): what
`rlplan report`, `plan --html`, `evaluate --html` and `sweep --html` write — the same page from
the same JSON, every section, nothing to fetch, values escaped, the headroom when the plan JSON
has one, refusals shown as refusals — and the command's errors."""

from __future__ import annotations

import json
import re

import pytest

import planner
from planner.report import render
from planner.report.documents import SweepDocument
from planner.report.page import _choose
from planner.report.plan_sections import SECTIONS
from planner.specs.scenario import load_scenario
from tests.conftest import grpo_scenario
from tests.test_cli import assert_bad_input
from tests.test_sft import SMALL as SFT
from tests.test_sweep_pools import POOLED

QUICK = {"time_limit_s": 60}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """One small GRPO plan through the CLI: the scenario, the plan JSON and its --html page."""
    tmp = tmp_path_factory.mktemp("small")
    scenario = tmp / "s.yaml"
    scenario.write_text(json.dumps(grpo_scenario(search=QUICK)))
    from typer.testing import CliRunner

    from planner.cli.main import app
    result = CliRunner().invoke(app, ["plan", str(scenario), "--out", str(tmp / "plan.json"),
                                      "--html", str(tmp / "plan.html")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"scenario": scenario, "json": tmp / "plan.json", "html": tmp / "plan.html",
            "tmp": tmp}


def section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def test_report_of_a_saved_plan_is_the_page_plan_html_wrote(cli, small, tmp_path):
    out = tmp_path / "again.html"
    result = cli("report", str(small["json"]), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert out.read_bytes() == small["html"].read_bytes()


def test_the_page_has_every_section_and_needs_nothing_from_outside(small):
    page = small["html"].read_text()
    assert section_ids(page) == list(SECTIONS)
    assert all(f'href="#{key}"' in page for key in SECTIONS)  # the navigation
    assert "default-src 'none'" in page  # the browser refuses any load
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r'(src|href)="(?!#|data:)', page)  # only anchors and inline data
    assert "running sequences" in page  # the timeline's rollout curve
    assert "@media print" in page
    for fmt in ("verl", "openrlhf", "deepspeed", "megatron"):
        assert re.search(rf"<h3>{fmt} [\d.]+</h3>", page)
    plan = json.loads(small["json"].read_text())
    assert f"{plan['iteration_time_s']:.2f} s" in page
    assert "prompts_per_step: 64" in page  # the scenario as given


def test_evaluate_html_is_the_report_of_its_json(cli, small, tmp_path):
    page, out = tmp_path / "e.html", tmp_path / "e.json"
    result = cli("evaluate", str(small["scenario"]), str(small["json"]), "--out", str(out),
                 "--html", str(page))
    assert result.exit_code == 0, result.output
    assert cli("report", str(out), "--out", str(tmp_path / "r.html")).exit_code == 0
    assert (tmp_path / "r.html").read_bytes() == page.read_bytes()
    assert "No alternative" in page.read_text()  # evaluated as given: nothing else searched


def test_headroom_is_shown_when_the_plan_json_has_it(small):
    plan = json.loads(small["json"].read_text())
    assert plan["memory"]["headroom_gib"] > 0  # the search leaves it (search.memory_headroom)
    del plan["memory"]["headroom_gib"]  # a plan JSON written before the headroom
    page = render(plan)
    assert "headroom GiB" not in page and "headroom starts" not in page
    plan["memory"]["headroom_gib"] = 4.0
    page = render(plan)
    assert "headroom GiB" in page and "headroom starts" in page
    assert 'class="limit"' in page  # the line where the headroom starts, in the chart


def test_values_from_the_files_are_escaped(small):
    plan = json.loads(small["json"].read_text())
    plan["explanation"]["what_if"] = ["<img src=x onerror=alert(1)> & more"]
    page = render(plan)
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; more" in page


def test_a_refusal_is_shown_and_a_plan_without_rollout_says_so(tmp_path):
    sft = planner.plan(SFT)
    page = render(sft.model_dump(mode="json"))
    assert section_ids(page) == list(SECTIONS)
    assert "No rollout" in page
    for fmt in ("verl", "openrlhf"):  # neither exports SFT: each says so, as `export` would
        assert re.search(rf'<h3>{fmt} [\d.]+</h3><p class="refused">refused: [^<]*sft', page)
    assert re.search(r"<h3>deepspeed [\d.]+</h3>(<ul class=\"note\">.*?</ul>)?<pre", page)


def test_a_plan_without_its_scenario_still_renders(small):
    plan = json.loads(small["json"].read_text())
    del plan["scenario"]
    page = render(plan, plan_source="p.json")
    assert section_ids(page) == list(SECTIONS)
    assert "Not exported: p.json: field &#x27;scenario&#x27; is missing" in page
    assert "The plan carries no scenario" in page


def test_sweep_html_is_the_report_of_its_json_and_a_plan_is_marked(cli, small, tmp_path):
    page, doc = tmp_path / "s.html", tmp_path / "s.json"
    result = cli("sweep", str(small["scenario"]), "--gpus", "4,8", "--jobs", "1", "--price", "2",
                 "--target-step-s", "1000", "--json-out", str(doc), "--html", str(page))
    assert result.exit_code == 0, result.output
    assert cli("report", "--sweep", str(doc), "--out", str(tmp_path / "r.html")).exit_code == 0
    text = page.read_text()
    assert (tmp_path / "r.html").read_text() == text
    assert section_ids(text) == ["sweep", *SECTIONS]  # the sweep, then its chosen point's plan
    target = json.loads(doc.read_text())["target"]
    assert f"Chosen: {target['gpus']} GPUs of h100-sxm, the target" in text
    assert text.count('class="chosen"') == 4  # a ring in each of the three charts, the row

    # the 8-GPU plan with the sweep: its point marked, the plan first
    result = cli("report", str(small["json"]), "--sweep", str(doc), "--out",
                 str(tmp_path / "both.html"))
    assert result.exit_code == 0, result.output
    both = (tmp_path / "both.html").read_text()
    assert section_ids(both) == [*SECTIONS, "sweep"]
    assert "Marked: 8 GPUs of h100-sxm, the plan&#x27;s cluster" in both
    row = re.search(r'<tr class="chosen">(.*?)</tr>', both).group(1)
    assert "<td class=\"num\">8</td>" in row


def test_a_sweep_without_a_target_marks_nothing(small):
    doc = {"schema_version": 1, "scenario": {"algorithm": "grpo"},
           "rows": [{"gpus": 8, "status": "infeasible", "reason": "too small", "gpu": "x"}],
           "frontier": [], "unpriced": [], "target": None}
    page = render(sweep=doc)
    assert section_ids(page) == ["sweep"]
    assert "No point is chosen" in page and 'class="chosen"' not in page
    assert "no point to draw" in page


def test_the_chosen_point_of_a_pool_grid_is_the_plans_pools(tmp_path):
    path = tmp_path / "pooled.json"
    path.write_text(json.dumps(POOLED))
    sc = load_scenario(path)  # train 8 + rollout 8
    swept = {"schema_version": 1, "frontier": [], "unpriced": [], "target": None,
             "scenario": {"algorithm": "grpo", "models": {"actor": {"name": "qwen2.5-0.5b"}}},
             "rows": [{"gpus": 8, "status": "optimal", "pools": {"train": 8, "rollout": 0}},
                      {"gpus": 16, "status": "optimal", "pools": {"train": 8, "rollout": 8}}]}
    chosen, why = _choose(SweepDocument.model_validate(swept), sc, with_plan=True)
    assert chosen == 1 and "train 8 + rollout 8" in why
    swept["scenario"]["models"]["actor"]["name"] = "qwen3-8b"  # a sweep of another scenario
    chosen, why = _choose(SweepDocument.model_validate(swept), sc, with_plan=True)
    assert chosen is None
    assert why == ("No point is marked: the sweep is of grpo qwen3-8b, the plan of grpo "
                   "qwen2.5-0.5b.")


def test_report_errors(cli, small, tmp_path, write):
    out = str(tmp_path / "p.html")
    assert_bad_input(cli("report", str(small["json"])), "--out is missing")
    assert_bad_input(cli("report", "--out", out), "give a plan JSON")
    assert_bad_input(cli("report", str(small["json"]), "--out", str(tmp_path / "p.json")),
                     "--out: 'p.json' is not an HTML file name")
    infeasible = write("i.json", {"schema_version": 1, "status": "infeasible",
                                  "reason": "nothing fits"})
    assert_bad_input(cli("report", str(infeasible), "--out", out),
                     "the plan is infeasible (nothing fits)")
    assert_bad_input(cli("report", str(write("x.json", {"status": "optimal"})), "--out", out),
                     "field 'groups' is missing")
    assert_bad_input(cli("report", str(small["json"]), "--sweep", str(small["json"]), "--out",
                         out), "field 'rows' is missing")
    assert not (tmp_path / "p.html").exists()  # nothing half-written


def test_html_flags_refuse_a_name_that_is_not_a_page(cli, small, tmp_path):
    for args in (["plan", str(small["scenario"])],
                 ["evaluate", str(small["scenario"]), str(small["json"])],
                 ["sweep", str(small["scenario"]), "--gpus", "8"]):
        result = cli(*args, "--html", str(tmp_path / "page.svg"))
        assert_bad_input(result, "--html: 'page.svg' is not an HTML file name")


def test_an_infeasible_plan_writes_no_page(cli, write, tmp_path):
    scenario = write("big.yaml", grpo_scenario(models={"actor": "llama-3.1-70b"},
                                               cluster={"gpu": "h100-sxm", "nodes": 1,
                                                        "gpus_per_node": 1}))
    result = cli("plan", str(scenario), "--html", str(tmp_path / "p.html"))
    assert result.exit_code == 3
    assert not (tmp_path / "p.html").exists()

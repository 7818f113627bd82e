"""The Python API (`from planner import load_scenario, plan, evaluate, sweep`): a path, a dict
or a Scenario in, the CLI's flags as keywords, the models the CLI prints as JSON out (equal to
its JSON but for how long the search took), the one error type with the CLI's message;
importing `planner` stays light; the example script runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import planner
from planner import evaluate, load_scenario, plan, sweep
from planner.errors import InfeasibleError, InputError, RlplanError
from planner.plan import Plan
from planner.report.documents import SweepDocument
from planner.specs.scenario import Scenario
from planner.sweep.run import without_timing
from tests.conftest import REPO, grpo_scenario

SMALL = grpo_scenario(search={"time_limit_s": 60})


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small scenario as a file, and `rlplan plan FILE --json` of it."""
    from typer.testing import CliRunner

    from planner.cli.main import app

    path = tmp_path_factory.mktemp("api") / "s.yaml"
    path.write_text(json.dumps(SMALL))
    result = CliRunner().invoke(app, ["plan", str(path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"path": path, "cli": json.loads(result.stdout)}


def test_importing_planner_loads_neither_the_search_nor_the_plotting():
    code = ("import sys, planner; from planner import load_scenario, plan, evaluate, sweep; "
            "print([m for m in sys.modules if m.split('.')[0] in ('ortools', 'matplotlib') "
            "or m.startswith(('planner.search', 'planner.cost', 'planner.sweep'))])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_the_api_names_outlive_the_submodules_they_share_a_name_with():
    import planner.plan
    import planner.sweep  # noqa: F401 - imported for its effect on the package
    from planner import plan as again
    from planner import sweep as sweep_again
    assert again is plan and sweep_again is sweep and callable(again)
    from planner.plan import Plan as Imported  # the submodule is still there by name
    assert Imported is Plan
    assert sys.modules["planner.plan"].Plan is Plan


def test_plan_returns_what_the_cli_prints(small):
    found = plan(small["path"])
    assert isinstance(found, Plan)
    assert without_timing(found.model_dump(mode="json")) == without_timing(small["cli"])


def test_a_path_a_dict_and_a_scenario_are_the_same_scenario(small):
    from_path = load_scenario(small["path"])
    from_str = load_scenario(str(small["path"]))
    from_dict = load_scenario(SMALL)
    assert isinstance(from_dict, Scenario)
    assert from_path == from_str
    assert from_dict.model_dump(exclude={"source_input"}) == \
        from_path.model_dump(exclude={"source_input"})
    assert load_scenario(from_dict) is from_dict  # no flags: as it is


def test_flags_are_keywords_with_the_clis_names(small):
    sc = load_scenario(small["path"], gpus_per_node=4, samples=8, max_staleness=1, price=2.5)
    assert sc.total_gpus == 4 and sc.workload.samples_per_prompt == 8
    assert sc.search.max_staleness == 1
    assert sc.cluster.price == 2.5 and sc.cluster.price_source == "flag"
    again = load_scenario(sc, samples=16)  # a Scenario with flags: over the fields it was given
    assert again.workload.samples_per_prompt == 16 and again.total_gpus == 4
    assert load_scenario(SMALL, nodes=None).total_gpus == 8  # None: not given, as in the CLI


def test_evaluate_takes_a_path_a_dict_or_a_plan(small, tmp_path):
    from typer.testing import CliRunner

    from planner.cli.main import app

    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(small["cli"]))
    result = CliRunner().invoke(app, ["evaluate", str(small["path"]), str(saved), "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    by_path = evaluate(small["path"], saved)
    assert by_path.status == "evaluated"
    assert by_path.model_dump(mode="json") == json.loads(result.stdout)
    for given in (small["cli"], Plan.model_validate(small["cli"]), str(saved)):
        assert evaluate(SMALL, given) == by_path


def test_sweep_returns_what_the_cli_prints(small):
    from typer.testing import CliRunner

    from planner.cli.main import app

    args = ["--gpus", "4,8", "--jobs", "1", "--price", "2"]
    result = CliRunner().invoke(app, ["sweep", str(small["path"]), *args, "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    swept = sweep(small["path"], gpus=[4, 8], jobs=1, price=2)
    assert isinstance(swept, SweepDocument)
    assert [r.gpus for r in swept.rows] == [4, 8] and all(r.feasible for r in swept.rows)
    assert isinstance(swept.rows[0].plan, Plan)
    assert without_timing(swept.model_dump(mode="json")) == \
        without_timing(json.loads(result.stdout))
    assert sweep(SMALL, gpus="4,8", jobs=1, price=2).rows[1].gpus == 8  # a dict, a spec


def test_errors_are_the_one_domain_error_with_the_clis_message(small):
    with pytest.raises(InputError, match=r"plan\(\): unknown flag 'gpus'; the scenario flags "
                                         r"are algo, actor"):
        plan(small["path"], gpus=8)
    with pytest.raises(InputError, match="scenario: give a scenario file's path, a dict of its "
                                         "fields or a Scenario, not int"):
        load_scenario(3)
    with pytest.raises(InputError, match="field 'cluster' is missing"):
        load_scenario({k: v for k, v in SMALL.items() if k != "cluster"})
    with pytest.raises(InputError, match="no-such.yaml"):
        load_scenario(small["path"].parent / "no-such.yaml")
    with pytest.raises(InputError, match=r"sweep\(\): nodes is not a flag of the sweep"):
        sweep(SMALL, gpus=[8], nodes=2)
    with pytest.raises(InputError, match="--gpus is required"):
        sweep(SMALL)
    with pytest.raises(InputError, match="plan: give a plan JSON's path"):
        evaluate(SMALL, 42)
    with pytest.raises(InfeasibleError) as infeasible:
        plan(SMALL, actor="llama-3.1-70b", gpus_per_node=1, time_limit=60)
    assert isinstance(infeasible.value, RlplanError) and infeasible.value.exit_code == 3


def test_the_api_example_runs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(REPO / "examples" / "api_example.py"),
                           str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "the plan run today:" in done.stdout and "best on 8 GPUs: optimal" in done.stdout
    assert "one sample per prompt: scenario: field 'workload.samples_per_prompt'" in done.stdout
    assert (tmp_path / "plan.html").read_text().count('<section id="') == 10
    assert planner.__version__ in (tmp_path / "plan.html").read_text()

"""Start-up (issue 24): each command imports only what it uses, `--time-limit` counts from the
process's start, and typer's shell completion works. What is imported is checked, never how
long it takes (bench/startup.py prints that)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the venv's bin, where `pip install -e` put `rlplan`

_LISTED = """
import json, sys
from planner.cli.main import main
sys.argv = ["rlplan", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
_TINY = ("algorithm: grpo\nmodels: {actor: qwen2.5-0.5b, reference: actor, reward: verifier}\n"
         "workload: {prompts_per_step: 8, samples_per_prompt: 2, prompt_len: 128, "
         "response_len: 256, max_response_len: 512}\n"
         "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 1}\n")  # a search of a second
# what no quick command needs: the solver, pictures and Ray, the search and the cost model, the
# framework presets (a scenario naming none), numpy's random generators (lengths' statistics)
HEAVY = ("ortools", "pandas", "matplotlib", "ray", "planner.search", "planner.cost",
         "planner.theory", "planner.plan", "planner.frameworks", "planner.export",
         "planner.sweep", "planner.pictures", "planner.importers", "planner.report",
         "numpy.random")


def _run(*args: str, code: str = _LISTED, env: dict | None = None
         ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}  # None: unset
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, check=False, env=env)


def _imported(*args: str) -> set[str]:
    return set(json.loads(_run(*args).stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules))


@pytest.mark.parametrize(("args", "ran"), [
    (["--version"], "planner.cli.main"), (["gpus"], "planner.cli.catalog"),
    (["models"], "planner.cli.catalog"), (["clusters"], "planner.cli.catalog"),
    (["validate", "examples/grpo-qwen2.5-7b.yaml"], "planner.specs.scenario")])
def test_quick_commands_import_no_solver_no_pictures(args, ran):
    modules = _imported(*args)
    assert ran in modules  # the command did run
    assert _heavy(modules) == []


def test_version_imports_no_command():
    modules = _imported("--version")
    commands = {m for m in modules if m.startswith("planner.cli.")}
    assert commands <= {"planner.cli.main", "planner.cli.clock", "planner.cli.output"}
    assert not any(m.startswith(("planner.specs", "pydantic", "numpy")) for m in modules)


def test_evaluate_loads_no_solver_and_plan_no_pictures():
    evaluate = _imported("evaluate", "examples/grpo-qwen2.5-7b.yaml",
                         "examples/plans/grpo-qwen2.5-7b-colocated.json", "--json")
    assert "planner.cost.iteration" in evaluate  # it priced the plan
    assert {"ortools", "planner.search.cpsat", "matplotlib"}.isdisjoint(evaluate)
    plan = _imported("plan", "--help")
    assert {"matplotlib", "planner.sweep", "ortools"}.isdisjoint(plan)


def test_plan_loads_the_solver_without_pandas_or_numpy_ma(tmp_path):
    """OR-Tools' cp_model imports pandas for helpers rlplan never calls (`search/sat.py`), and
    np.percentile imports numpy.ma (`report.percentile`): a search loads the solver, not
    them."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(_TINY)
    modules = _imported("plan", str(scenario), "--json")
    assert "planner.search.cpsat" in modules and "ortools.sat.python.cp_model" in modules
    assert "pandas" not in modules and "numpy.ma" not in modules


def test_cp_models_pandas_helpers_still_work():
    """cp_model loaded through `search/sat.py` imports pandas when one of its pandas helpers is
    called, and the helper gives what it gives with pandas loaded first."""
    out = _run(code="""
import sys
from planner.search.sat import cp_model
assert "pandas" not in sys.modules
import pandas as pd
m = cp_model.CpModel()
x = m.new_int_var_series("x", pd.Index(["a", "b"]), 0, 3)
print(type(x).__name__, list(x.index), "pandas" in sys.modules)
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Series", "['a',", "'b']", "True"]


_FAKE_CP_MODEL = """
from __future__ import annotations
import pandas as pd
Alias = pd.Index | pd.Series  # read at load, as cp_model's type aliases are
{more}
def is_series(x) -> bool:
    return isinstance(x, pd.Series)
"""


@pytest.mark.parametrize(("more", "threads", "stand_in"), [
    ("", 1, True),  # as cp_model is today
    ("Frame = pd.DataFrame", 1, False),  # a release reading more of pandas at load
    ("", 2, False),  # another thread could import pandas meanwhile
])
def test_the_stand_in_is_used_only_where_safe(tmp_path, more, threads, stand_in):
    """`sat.load` imports a module against the pandas stand-in only in a one-thread process
    and only when the stand-in has what the module reads at load; either way the module works
    with the real pandas, and the stand-in is never left in `sys.modules`."""
    (tmp_path / "fake_cp_model.py").write_text(_FAKE_CP_MODEL.format(more=more))
    out = _run(str(tmp_path), str(threads), code="""
import sys, threading
sys.path.insert(0, sys.argv[1])
stop = threading.Event()
for _ in range(int(sys.argv[2]) - 1):
    threading.Thread(target=stop.wait, daemon=True).start()
from planner.search.sat import load
module = load("fake_cp_model")
loaded_early = "pandas" in sys.modules
import pandas as pd
print(loaded_early, module.is_series(pd.Series([1])), sys.modules["pandas"] is pd)
stop.set()
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(not stand_in), "True", "True"]


# --- --time-limit counts from the process's start ----------------------------------------------

def test_the_entry_point_counts_from_the_process_start():
    """Started by the entry point, a command's clock starts no later than the process's first
    line of Python ran (where the system says when the process started) and no later than the
    entry point's first line (everywhere)."""
    out = _run(code="""
import time
first = time.monotonic()
from planner.cli import clock
from planner.cli.main import _IMPORTED
clock.mark_start(_IMPORTED)
print(clock.process_started() is not None, clock.command_started() <= first,
      clock.command_started() <= _IMPORTED)
""")
    known, before_first, before_entry = out.stdout.split()
    assert before_entry == "True"
    assert before_first == known  # Linux: /proc says when; elsewhere the entry point's time


def test_a_plans_clock_includes_what_ran_before_the_command(tmp_path):
    """The plan JSON's wall time counts from the process's start: a process that waited half
    a second before calling the entry point reports at least that."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(_TINY)
    out = _run("plan", str(scenario), "--json", code="""
import sys, time
time.sleep(0.5)
from planner.cli.main import main
sys.argv = ["rlplan", *sys.argv[1:]]
main()
""")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["search"]["wall_s"] >= 0.5


def test_a_process_that_ran_a_shell_before_python_counts_from_the_entry_point(tmp_path):
    """A shell runs the last command of `bash -c "a && b"` in its own process (exec), so the
    process's start is the shell's: what the shell ran before (an install, here a sleep) is
    not the command's and does not count against its time limit (`clock.MAX_START_UP_S`)."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(_TINY)
    gap = 2.5  # over MAX_START_UP_S
    entry = ("import sys\nfrom planner.cli.main import main\n"
             "sys.argv = ['rlplan', *sys.argv[1:]]\nmain()")
    started = time.monotonic()
    out = subprocess.run(
        ["bash", "-c", f'sleep {gap} && exec "$0" -c "$1" plan "$2" --json', sys.executable,
         entry, str(scenario)], capture_output=True, text=True, cwd=REPO, timeout=300,
        check=False)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["search"]["wall_s"] < took - gap / 2  # Python's part only


_EXIT_STATE = """
import gc, os, sys
from planner.cli.main import main
sys.argv = ["rlplan", "validate", "examples/grpo-qwen2.5-7b.yaml", "--json"]
try:
    main()
except SystemExit as done:
    print(done.code, os.environ.get("OPENBLAS_NUM_THREADS"), gc.get_freeze_count() > 0,
          file=sys.stderr)
"""


@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("3", "3")])
def test_the_entry_point_starts_blas_on_one_thread_and_leaves_its_heap_frozen(given, kept):
    """rlplan calls no BLAS routine: numpy's OpenBLAS gets one thread, not a pool of one per
    core, unless the user chose a number. The finished command's heap is frozen, so the exit
    does not walk it; the command's output is whole."""
    out = _run(code=_EXIT_STATE, env={"OPENBLAS_NUM_THREADS": given})
    assert json.loads(out.stdout)["valid"] is True
    assert out.stderr.split() == ["0", kept, "True"]


def test_a_command_run_in_process_starts_its_clock_when_it_starts():
    """typer's test runner (and any caller of `app()`) never ran the entry point: the clock is
    the command's own start, not this test process's."""
    from planner.cli import clock

    assert clock._started is None  # the entry point never ran in this process
    before = time.monotonic()
    assert clock.command_started() >= before


# --- shell completion (typer's own) ------------------------------------------------------------

def _rlplan_on_path() -> dict[str, str]:
    if not (BIN / "rlplan").exists():
        pytest.skip(f"no rlplan script beside {sys.executable}: install the package (pip "
                    "install -e .) to test completion")
    return {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_show_completion_prints_a_bash_script_that_completes_commands_and_options():
    env = _rlplan_on_path()
    shown = subprocess.run(["rlplan", "--show-completion", "bash"], capture_output=True,
                           text=True, env={**os.environ, **env}, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "complete -o default -F _rlplan_completion rlplan" in shown.stdout
    assert "_RLPLAN_COMPLETE=complete_bash" in shown.stdout

    def complete(*words: str) -> list[str]:  # what bash offers after `rlplan WORDS<TAB>`
        script = (f"{shown.stdout}\nCOMP_WORDS=(rlplan {' '.join(words)}); "
                  f"COMP_CWORD={len(words)}; _rlplan_completion rlplan; "
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                             env={**os.environ, **env}, timeout=120, check=False)
        return run.stdout.split()

    assert complete("sw") == ["sweep"]
    assert set(complete("plan", "--time")) == {"--timeline", "--time-limit"}


def test_install_completion_writes_the_bash_script(tmp_path):
    env = {**_rlplan_on_path(), "HOME": str(tmp_path)}
    run = subprocess.run(["rlplan", "--install-completion", "bash"], capture_output=True,
                         text=True, env={**os.environ, **env}, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    script = tmp_path / ".bash_completions" / "rlplan.sh"
    assert "_rlplan_completion" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()

"""The error contract on every input and output path (issue 15): one `rlplan: error:` line on
stderr, exit 2, no traceback, no warning text, and no file left behind, half-written or not."""

from __future__ import annotations

import errno
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from planner.cli import files
from planner.errors import InputError
from planner.specs import bounds as lim
from tests.conftest import REPO, grpo_scenario

# pytest records warnings instead of printing them: make any warning (numpy's "invalid value
# encountered in cast" above all) an error, so that no run here can hide one
pytestmark = pytest.mark.filterwarnings("error")

SCENARIO = REPO / "examples" / "grpo-qwen2.5-7b.yaml"
PLAN = REPO / "examples" / "plans" / "grpo-qwen2.5-7b-colocated.json"


def one_error(result, *fragments: str, code: int = 2) -> str:
    """Exit `code`, exactly one stderr line, an `rlplan: error:` one naming `fragments`, no
    traceback and no warning anywhere. Returns the line."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rlplan: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    for text in (result.stdout, result.stderr):
        assert "Traceback" not in text and "Warning" not in text
    return lines[0]


def listing(folder: Path) -> set[str]:
    """Every file under `folder` (temporary files included: none may be left)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def small(write):
    """A scenario that plans in about a second."""
    return write("s.yaml", grpo_scenario())


def full_disk(fd: int, data) -> int:
    """os.write on a full disk: writes part of the bytes, then fails."""
    os.write(fd, bytes(data[: max(1, len(data) // 2)]))
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# --- 1. output paths: checked before any work ----------------------------------------------

@pytest.mark.parametrize(("args", "flag", "fragment"), [
    (["--out", "missing/dir/plan.json"], "--out", "does not exist"),
    (["--out", "."], "--out", "is a folder"),
    (["--timeline", "missing/t.svg"], "--timeline", "does not exist"),
    (["--out", "ok.json", "--timeline", "missing/t.svg"], "--timeline", "does not exist"),
    (["--out", "a.json", "--timeline", "a.json"], "both name", "a.json"),
])
def test_plan_output_paths_checked_first(cli, tmp_path, monkeypatch, args, flag, fragment):
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    # a scenario that does not exist: the output check must come before reading it
    result = cli("plan", "nowhere.yaml", *args)
    one_error(result, flag, fragment)
    assert listing(tmp_path) == before


def test_export_out_named_and_nothing_written(cli, small, tmp_path):
    out = tmp_path / "plan.json"
    result = cli("plan", str(small), "--out", str(out), "--export", "verl",
                 "--export-out", str(tmp_path / "missing" / "run.sh"))
    line = one_error(result, "--export-out", "does not exist")
    assert "--out " not in line
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--out", "--timeline"])
def test_evaluate_output_paths(cli, tmp_path, flag):
    name = "e.json" if flag == "--out" else "e.svg"
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), flag, str(tmp_path / "no" / name)),
              flag, "does not exist")
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), flag, str(tmp_path)), flag,
              "is a folder")
    assert listing(tmp_path) == set()


def test_unwritable_folder(cli, tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    # root may write anywhere: stand in for a folder the user cannot write to
    monkeypatch.setattr(files.os, "access",
                        lambda p, mode: False if Path(p) == locked else real(p, mode))
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(locked / "e.json")),
              "--out", "not writable")
    assert listing(locked) == set()


@pytest.mark.parametrize(("flags", "names"), [
    (["--out", "e.json"], ["e.json"]),
    (["--timeline", "e.svg"], ["e.svg"]),
    (["--out", "e.json", "--timeline", "e.png"], ["e.json", "e.png"]),
])
def test_evaluate_full_disk_leaves_nothing(cli, tmp_path, monkeypatch, flags, names):
    monkeypatch.setattr(files, "_write_fd", full_disk)
    args = [str(tmp_path / a) if a in names else a for a in flags]
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), *args), "No space left on device")
    assert listing(tmp_path) == set()


def test_plan_full_disk_leaves_nothing(cli, small, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_write_fd", full_disk)
    one_error(cli("plan", str(small), "--out", str(tmp_path / "p.json"), "--timeline",
                  str(tmp_path / "t.svg")), "--out", "No space left")
    assert listing(tmp_path) == {"s.yaml"}


def test_sweep_full_disk_leaves_nothing(cli, small, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_write_fd", full_disk)
    result = cli("sweep", str(small), "--gpus", "8", "--jobs", "1", "--json",
                 "--csv", str(tmp_path / "s.csv"), "--json-out", str(tmp_path / "s.json"),
                 "--picture", str(tmp_path / "s.svg"))
    assert result.exit_code == 2
    assert result.stderr.count("rlplan: error:") == 1 and "No space left" in result.stderr
    assert listing(tmp_path) == {"s.yaml"}


def test_export_full_disk_leaves_nothing(cli, tmp_path, monkeypatch):
    plan = tmp_path / "p.json"
    assert cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(plan)).exit_code == 0
    monkeypatch.setattr(files, "_write_fd", full_disk)
    one_error(cli("export", str(plan), "-f", "verl", "--out", str(tmp_path / "run.sh")),
              "--out", "No space left")
    assert listing(tmp_path) == {"p.json"}


def test_failed_rename_undoes_the_run(cli, tmp_path, monkeypatch):
    """The second rename fails: the first file is put back as it was (or removed if new)."""
    old = tmp_path / "e.json"
    old.write_text("the previous answer")
    calls = []

    def second_fails(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.replace(src, dst)

    monkeypatch.setattr(files, "_rename", second_fails)
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(old), "--timeline",
                  str(tmp_path / "e.svg")), "--timeline", "Input/output error")
    assert old.read_text() == "the previous answer"
    assert listing(tmp_path) == {"e.json"}


def test_atomic_write_keeps_mode_and_makes_scripts_runnable(tmp_path):
    target = tmp_path / "run.sh"
    files.write_atomic(target, "#!/bin/sh\n", executable=True)
    assert target.read_text() == "#!/bin/sh\n" and os.access(target, os.X_OK)
    target.chmod(0o600)
    files.write_atomic(target, b"again")
    assert target.read_bytes() == b"again" and target.stat().st_mode & 0o777 == 0o600
    assert listing(tmp_path) == {"run.sh"}


# --- 2. typer's and click's own errors on one line ------------------------------------------

@pytest.mark.parametrize(("args", "fragment"), [
    (["plan", "--nodes", "abc"], "'--nodes'"),
    (["plan", "--workers", "0"], "'--workers'"),
    (["schema", "bogus"], "'bogus' is not one of"),
    (["evaluate"], "Missing argument"),
    (["plan", "--no-such-flag"], "--no-such-flag"),
    (["no-such-command"], "no-such-command"),
    (["sweep", "--jobs", "x"], "'--jobs'"),
    (["analyze", "--bogus"], "--bogus"),
])
def test_usage_errors_one_line(cli, args, fragment):
    line = one_error(cli(*args), fragment)
    assert "--help" in line  # where to look next
    assert "╭" not in line and "Value error" not in line


def test_bare_rlplan_prints_help_and_a_group_without_its_command_is_an_error(cli):
    """A bare `rlplan` is how people discover the tool: help, exit 0. `rlplan analyze` without
    its command is a missing argument like `rlplan evaluate` without its files: one line."""
    result = cli()
    assert result.exit_code == 0 and "Usage" in result.stdout and result.stderr == ""
    one_error(cli("analyze"), "Missing command", "rlplan analyze --help")


def test_control_characters_in_a_value_are_escaped(cli):
    """A newline inside a value made a two-line error; an escape sequence drove the terminal."""
    line = one_error(cli("validate", str(SCENARIO), "--actor", "qwen\nfoo\x1b[31m\u2028"),
                     "models.actor")
    assert "'qwen\\nfoo\\x1b[31m\\u2028'" in line


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "-inf", "0", "-1"])
def test_time_limit_must_be_finite_and_positive(cli, value):
    one_error(cli("validate", str(SCENARIO), "--time-limit", value), "--time-limit",
              "search.time_limit_s")


def test_time_limit_infinite_in_the_file_is_refused(cli, write):
    path = write("s.yaml", grpo_scenario(search={"time_limit_s": float("inf")}))
    one_error(cli("validate", str(path)), "search.time_limit_s", "finite")


@pytest.mark.parametrize(("spec", "fragment"), [("8,,16", "empty size"), ("8,16,", "empty size"),
                                                ("8," + "9" * 5_000, "5,000 digits")])
def test_sweep_sizes_refused_like_profiles(cli, small, spec, fragment):
    one_error(cli("sweep", str(small), "--gpus", spec), "--gpus", fragment)


def test_unreadable_file(cli, write):
    bad = write("s.yaml", "")
    bad.write_bytes(b"\xff\xfe algorithm: grpo")
    one_error(cli("validate", str(bad)), "s.yaml", "cannot read it")


def test_help_still_works(cli):
    for args in (["--help"], ["plan", "--help"], ["evaluate", "--help"]):
        result = cli(*args)
        assert result.exit_code == 0 and "Usage" in result.stdout


# --- 3. huge numbers: rejected up front, naming the field, the flag and the limit ----------

@pytest.mark.parametrize(("args", "fragments"), [
    (["--nodes", "10000000000000000"], ["cluster.nodes", "--nodes", "100,000"]),
    (["--prompts", "13723684229", "--ppo-epochs", "45204"],
     ["prompts_per_step", "--prompts", "10,000,000", "ppo_epochs", "1,000"]),
    (["--ppo-epochs", "1000000"], ["workload.ppo_epochs", "--ppo-epochs", "1,000"]),
    (["--prompts", "1000000", "--samples", "8"], ["sequences per step", "1,048,576"]),
    (["--response-len", "20000000", "--max-response-len", "20000000"],
     ["workload.response_len", "10,000,000"]),
])
def test_huge_flags(cli, small, args, fragments):
    one_error(cli("plan", str(small), *args), *fragments)


def test_sweep_huge_size(cli, small):
    one_error(cli("sweep", str(small), "--gpus", "8,100000000000000000000"), "--gpus",
              "above the limit")


def test_huge_numbers_in_files(cli, write):
    profile = yaml.safe_load((REPO / "hardware_profiles" / "h100-sxm.yaml").read_text())
    write("slow.yaml", profile | {"host_link_gbps": 1e-12})
    sc = grpo_scenario(cluster={"gpu": "slow.yaml", "nodes": 1, "gpus_per_node": 8})
    path = write("s.yaml", sc)
    one_error(cli("plan", str(path)), "host_link_gbps", "0.001")
    sc = grpo_scenario()
    sc["workload"] |= {"ppo_epochs": 1_000_000}
    one_error(cli("validate", str(write("e.yaml", sc))), "workload.ppo_epochs", "1,000")


def test_ms_conversion_refuses_beyond_int64_without_warning():
    from planner.search.candidate import MAX_UNITS, to_ms

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy cast warning would fail here
        assert to_ms(np.array([1.0, 0.0101])).tolist() == [1000, 11]
        for seconds in (np.array([1.0, np.inf]), np.array([np.nan]), (MAX_UNITS + 2) * 1e-3):
            with pytest.raises(InputError, match="too large to plan"):
                to_ms(seconds)


def test_solver_range_guard(write):
    """A space whose terms cannot overflow passes; one whose horizon × GPUs could is refused
    before any CP-SAT term is built."""
    from planner.search import ranges
    from planner.search.space import build_space
    from planner.specs.scenario import load_scenario

    space = build_space(load_scenario(write("s.yaml", grpo_scenario())))
    horizon = ranges.horizon_of(space)
    ranges.check_range(space, horizon)
    assert horizon * space.total_gpus <= ranges.SOLVER_INT_LIMIT
    with pytest.raises(InputError, match="too large for the solver"):
        ranges.check_range(space, ranges.SOLVER_INT_LIMIT // space.total_gpus + 1)


def test_bounds_keep_the_worst_case_in_range():
    """The documented maxima, combined, stay inside what the arithmetic can hold exactly."""
    tokens = lim.MAX_SEQUENCES_PER_STEP * 2 * lim.MAX_SEQUENCE_TOKENS
    assert tokens < 2**53  # token counts exact in float64
    assert lim.MAX_TOTAL_GPUS <= lim.MAX_NODES * lim.MAX_GPUS_PER_NODE


# --- 4. messages that read right ------------------------------------------------------------

def test_plan_json_folder_and_top_level_messages(cli, tmp_path, write):
    folder = tmp_path / "plan"
    folder.mkdir()
    one_error(cli("evaluate", str(SCENARIO), str(folder)), "plan JSON")
    plan = json.loads(PLAN.read_text())
    plan["groups"] = plan["groups"] * 2  # duplicate names: a check of the whole file
    line = one_error(cli("evaluate", str(SCENARIO), str(write("dup.json", plan))),
                     "names must be unique")
    assert "(top level)" not in line


def test_scenario_of_wrong_type_in_plan(cli, write):
    plan = json.loads(PLAN.read_text()) | {"status": "evaluated", "scenario": 5}
    line = one_error(cli("export", str(write("p.json", plan)), "-f", "verl"), "'scenario'",
                     "not a mapping")
    assert "missing" not in line


def test_offload_hint_reads_right():
    import inspect

    from planner.search import solve

    text = inspect.getsource(solve.infeasible_reason)
    assert "would allow CPU offload" not in text
    assert "setting host_link_gbps in the profile" in text


# --- 5. evaluate takes the scenario flags; schema plan; docs shipped ------------------------

def test_evaluate_takes_scenario_flags(cli):
    result = cli("evaluate", str(SCENARIO), str(PLAN), "--json", "--prompts", "256")
    assert result.exit_code in (0, 3), result.stderr
    assert json.loads(result.stdout)["scenario"]["workload"]["prompts_per_step"] == 256
    base = json.loads(cli("evaluate", str(SCENARIO), str(PLAN), "--json").stdout)
    assert base["scenario"]["workload"]["prompts_per_step"] == 512


def test_every_command_reading_a_scenario_has_its_flags(cli):
    from planner.specs.scenario import SCENARIO_FLAGS

    for command in ("plan", "evaluate", "validate"):
        text = cli(command, "--help").stdout
        for flag in SCENARIO_FLAGS:
            assert "--" + flag.replace("_", "-") in text, (command, flag)


def test_schema_plan(cli):
    result = cli("schema", "plan")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "Plan"
    assert {"groups", "layouts", "inter_model", "status"} <= set(schema["properties"])
    assert json.loads(cli("schema", "plan-input").stdout)["title"] == "PlanInput"


def test_docs_are_shipped():
    """Every docs/NAME.md the README, the code or a message cites is in the repository, and the
    README cites no design document outside it."""
    cited = set()
    for path in [REPO / "README.md", *(REPO / "planner").rglob("*.py")]:
        cited |= set(re.findall(r"docs/(\w+\.md)", path.read_text()))
    assert {"DESIGN.md", "exports.md"} <= cited
    for name in cited:
        assert (REPO / "docs" / name).is_file(), name
    shipped = {p.name for p in REPO.rglob("*.md") if ".venv" not in p.parts}
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r"(?<![./\w])(\w+\.md)", readme))  # not ../shared/... sources
    assert named and named <= shipped, named - shipped


def test_tiny_throughput_is_not_shown_as_zero(cli, write):
    """At the floors (planner/specs/bounds.py) a plan is priced without overflow or warning,
    and its throughput is printed with its digits, not as "0 tokens/s"."""
    profile = yaml.safe_load((REPO / "hardware_profiles" / "h100-sxm.yaml").read_text())
    floor = {k: lim.MIN_RATE for k in ("bf16_tflops", "hbm_tbps", "host_link_gbps")}
    slow = write("floor.yaml", profile | floor)
    result = cli("evaluate", str(SCENARIO), str(PLAN), "--gpu", str(slow), "--ppo-epochs",
                 str(lim.MAX_PPO_EPOCHS))
    assert result.exit_code == 0, result.stderr
    line = next(t for t in result.stdout.splitlines() if t.startswith("throughput"))
    assert not line.startswith("throughput 0 ") and re.match(r"throughput 0\.0\d+", line)
    assert "Warning" not in result.stdout + result.stderr

"""Inputs and outputs that cannot hurt the machine (issue 25): only regular files are read, at
most `MAX_INPUT_BYTES`, nothing blocks (a FIFO, /dev/zero, /dev/urandom); nesting and numbers
are bounded before a parser recurses or `int()` fails; outputs are written only to regular
files (a device or a FIFO is refused and stays what it was; a symbolic link is written through
and stays a link). Every refusal is one `rlplan: error:` line, exit 2."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.specs import bounds as lim
from planner.specs.files import read_mapping
from planner.specs.model import spec_from_hf_config
from tests.conftest import REPO, grpo_scenario
from tests.fuzzing import run_isolated
from tests.test_cli_errors import PLAN, SCENARIO, listing, one_error

# A command reading a FIFO or a device would block or read until memory runs out: each runs in
# a killable child, and a run still going after this many seconds is a failure, not a hang.
QUICK_S = 60.0
DEVICES = [d for d in ("/dev/zero", "/dev/urandom") if os.path.exists(d)]


def isolated(*args: str):
    """`rlplan ARGS` in a killable child, as a result with exit_code, stdout and stderr."""
    answer = run_isolated([str(a) for a in args], QUICK_S)
    assert answer is not None, f"rlplan {' '.join(map(str, args))} still running after {QUICK_S} s"
    code, stdout, stderr, error, _ = answer
    assert error is None, error
    return type("Result", (), {"exit_code": code, "stdout": stdout, "stderr": stderr})


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


# --- inputs ------------------------------------------------------------------------------------

def _input_commands(bad: Path, tmp_path: Path) -> list[list[str]]:
    """Every way the CLI reads a file, with `bad` as that file."""
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump(grpo_scenario()))
    return [["validate", bad], ["plan", bad], ["evaluate", bad, PLAN], ["evaluate", SCENARIO, bad],
            ["validate", sc, "--actor", bad], ["validate", sc, "--gpu", bad],
            ["evaluate", SCENARIO, PLAN, "--gpu", bad], ["export", bad, "-f", "verl"],
            ["import", bad], ["plan", sc, "--baseline", bad], ["sweep", bad, "--gpus", "8"]]


def test_a_fifo_is_refused_before_it_is_opened(fifo, tmp_path):
    """Nobody writes to the FIFO: opening it to read would block forever."""
    for args in _input_commands(fifo, tmp_path):
        one_error(isolated(*args), "pipe.yaml", "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("device", DEVICES)
def test_an_endless_device_is_refused_before_it_is_read(device, tmp_path):
    for args in _input_commands(Path(device), tmp_path):
        one_error(isolated(*args), device, "character device")


def test_a_socket_is_refused_as_input_and_as_output(cli, tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        one_error(cli("validate", str(path)), "s.sock", "a socket")
        one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(path)), "--out",
                  "a socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_a_file_beyond_the_size_limit_is_refused(write):
    big = write("big.yaml", "")
    with big.open("wb") as f:  # sparse: the size without the disk
        f.truncate(lim.MAX_INPUT_BYTES + 1)
    one_error(isolated("validate", big), "big.yaml", f"larger than "
              f"{lim.MAX_INPUT_BYTES // 1024**2} MiB")


def test_a_symlink_to_a_scenario_is_read_through(cli, tmp_path):
    link = tmp_path / "link.yaml"
    link.symlink_to(SCENARIO)
    assert cli("validate", str(link), "--json").exit_code == 0


@pytest.mark.parametrize("depth", [1_000, 50_000])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_deep_nesting_is_refused_with_its_line(cli, write, depth, suffix):
    body = "[" * depth + "]" * depth
    path = write(f"deep{suffix}", f'{{"algorithm": "grpo",\n "models": {body}}}')
    one_error(cli("validate", str(path)), f"deep{suffix}: line 2", "nested deeper than 64")


def test_deep_yaml_blocks_and_flow_mappings_are_refused(cli, write):
    flow = write("flow.yaml", "algorithm: " + "{a: " * 2_000 + "1" + "}" * 2_000 + "\n")
    one_error(cli("validate", str(flow)), "flow.yaml: line 1", "nested deeper")
    block = "".join(f"{'  ' * k}k{k}:\n" for k in range(200)) + "  " * 200 + "x: 1\n"
    one_error(cli("validate", str(write("block.yaml", block))), "nested deeper")


def test_nesting_within_the_limit_is_read(write):
    inner = {"a": 1}
    for _ in range(lim.MAX_NESTING - 2):
        inner = {"a": inner}
    assert read_mapping(write("ok.json", {"x": inner}))["x"]["a"]


def test_yaml_aliases_count_as_what_they_stand_for(cli, write):
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(  # 10^8 values once expanded
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True))
    one_error(cli("validate", str(write("bomb.yaml", bomb))), "line 8",
              "aliases expand the document beyond")
    one_error(cli("validate", str(write("cycle.yaml", "a: &a [1, *a]\n"))), "line 1",
              "contains itself")
    deep = "x0: &x0 [1]\n" + "".join(f"x{k}: &x{k} [[[*x{k - 1}]]]\n" for k in range(1, 40))
    one_error(cli("validate", str(write("aliases.yaml", deep))), "nested deeper",
              "counting what its aliases stand for")
    merged = write("merge.yaml", "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n")
    assert read_mapping(merged)["other"] == {"x": 1, "y": 2}  # an ordinary alias still reads


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_number_of_thousands_of_digits_is_refused_with_its_line(cli, write, suffix):
    sc = grpo_scenario()
    text = (json.dumps(sc, indent=1) if suffix == ".json" else yaml.safe_dump(sc)).replace(
        "64", "9" * 5_000)  # prompts_per_step
    path = write(f"big{suffix}", text)
    line = next(k for k, t in enumerate(text.splitlines(), 1) if "9" * 5_000 in t)
    one_error(cli("validate", str(path)), f"line {line}", "a number of 5,000 characters")


def test_a_file_name_over_255_bytes_is_one_error_line(cli, tmp_path):
    name = str(tmp_path / ("a" * 300 + ".yaml"))
    one_error(cli("plan", name), "file name too long", "a part of 305 bytes")
    one_error(cli("validate", name), "no such file")
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", name), "--out",
              "file name too long")
    one_error(cli("validate", str(SCENARIO), "--gpu", name), "file name too long")


# --- outputs -----------------------------------------------------------------------------------

def test_dev_null_is_refused_and_stays_a_device(cli):
    """As root, the atomic rename would have put a regular file in /dev/null's place."""
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", "/dev/null"), "--out",
              "/dev/null", "character device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("flag", ["--out", "--timeline"])
def test_a_fifo_output_is_refused_and_stays_a_fifo(cli, fifo, flag):
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), flag, str(fifo)), flag, "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_sweep_and_export_outputs_refuse_a_device(cli, write, tmp_path):
    small = write("s.yaml", grpo_scenario())
    for flag in ("--csv", "--json-out", "--picture"):
        one_error(cli("sweep", str(small), "--gpus", "8", flag, "/dev/null"), flag,
                  "character device")
    plan = tmp_path / "p.json"
    assert cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(plan)).exit_code == 0
    one_error(cli("export", str(plan), "-f", "verl", "--out", "/dev/null"), "--out")
    one_error(cli("plan", str(small), "--export", "verl", "--export-out", "/dev/null"),
              "--export-out", "character device")


def test_a_symlink_is_written_through_and_stays_a_link(cli, tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    dangling = tmp_path / "new-link.json"
    dangling.symlink_to(tmp_path / "new.json")
    for out in (link, dangling):
        assert cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(out)).exit_code == 0
        assert out.is_symlink()
    assert json.loads(target.read_text())["status"] == "evaluated"
    assert json.loads((tmp_path / "new.json").read_text())["status"] == "evaluated"
    assert listing(tmp_path) == {"real.json", "link.json", "new-link.json", "new.json"}


def test_a_symlink_to_a_device_or_a_loop_is_refused(cli, tmp_path):
    (tmp_path / "null").symlink_to("/dev/null")
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(tmp_path / "null")),
              "a link to /dev/null", "character device")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", str(tmp_path / "a")),
              "loop of symbolic links")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("suffix", ["new/", "new/.", "./"])
def test_a_name_ending_in_a_slash_is_a_folder_not_a_file(cli, tmp_path, suffix):
    out = f"{tmp_path}/{suffix}"
    line = one_error(cli("evaluate", str(SCENARIO), str(PLAN), "--out", out), "'--out'",
                     "folder")
    assert ("does not exist" in line) == suffix.startswith("new")
    assert listing(tmp_path) == set()


def test_stdout_on_a_full_device_is_one_error_line():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    for args in (["models", "--json"], ["validate", str(SCENARIO)], ["--help"]):
        with open("/dev/full", "w") as full:
            out = subprocess.run([sys.executable, "-c", "from planner.cli.main import main; "
                                  "main()", *args], stdout=full, stderr=subprocess.PIPE,
                                 text=True, cwd=REPO, timeout=120)
        assert out.returncode == 2, out.stderr
        assert out.stderr.splitlines() == ["rlplan: error: standard output: cannot write it "
                                           "(No space left on device); free space or send the "
                                           "output elsewhere"]


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly():
    # `rlplan gpus | head -1`: the rest is not wanted, so no error line, and the status a
    # shell gives a process SIGPIPE ends (as `yes | head` does)
    child = subprocess.Popen([sys.executable, "-c", "from planner.cli.main import main; main()",
                              "gpus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=REPO)
    child.stdout.close()  # before the command has written anything
    _, err = child.communicate(timeout=120)
    assert child.returncode == 141 and err == b""


# --- an MoE config with no MoE layer ---------------------------------------------------------

def _moe_config(**changes) -> dict:
    cfg = json.loads((REPO / "model_specs" / "qwen3-30b-a3b.json").read_text())
    cfg.update(num_hidden_layers=8, **changes)
    return cfg


@pytest.mark.parametrize("changes", [{"mlp_only_layers": list(range(8))},
                                     {"decoder_sparse_step": 9},
                                     {"first_k_dense_replace": 8}])
def test_an_moe_config_without_moe_layers_is_a_dense_model(cli, write, changes):
    """The modeling code builds the dense MLP in every layer: validate, plan and evaluate all
    price a dense model (it crashed plan and evaluate with ZeroDivisionError)."""
    cfg = _moe_config(**changes)
    dense = {k: v for k, v in _moe_config().items()
             if k not in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")}
    spec = spec_from_hf_config(cfg, "m", "m")
    assert spec.moe is None and any("no layer is MoE" in n for n in spec.notes)
    assert spec.params_total == spec_from_hf_config(dense, "m", "m").params_total
    folder = write("m/config.json", cfg).parent
    assert "no layer is MoE" in cli("validate", str(folder)).stdout
    small = write("s.yaml", grpo_scenario(
        models={"actor": str(folder), "reference": "actor", "reward": "verifier"},
        cluster={"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 1}))
    planned = cli("plan", str(small), "--json", "--out", str(folder / "plan.json"))
    assert planned.exit_code == 0, planned.stderr
    priced = cli("evaluate", str(small), str(folder / "plan.json"), "--json")
    assert priced.exit_code == 0, priced.stderr
    assert json.loads(priced.stdout)["iteration_time_s"] == pytest.approx(
        json.loads(planned.stdout)["iteration_time_s"])

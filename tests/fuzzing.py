"""Mutation fuzzing of rlplan's inputs against its error contract (README "Errors").

A case takes one shipped input — a scenario, a plan, a hardware profile or a model config —
mutates it (a value replaced by a hostile one, a key deleted or added, a duplicated key, bytes
flipped, brackets nested thousands deep, a number of thousands of digits), writes it, runs
the command that reads it in-process and checks the contract:

- the exit code is 0, 2 (bad input) or 3 (nothing fits);
- no exception escapes, no traceback and no warning text reach the output;
- a failing run prints exactly one `rlplan: error:` line on stderr;
- a failing run leaves no output file behind, and no run leaves a temporary file;
- timed (`bench/fuzz.py`; the suite asserts no timing): the run ends within its time limit
  plus `ALLOWANCE_S` (loading and rendering). Untimed, a run still going after `HANG_S` is
  killed and counted as hung, so a hang cannot stall the suite.

Mutations draw from a `random.Random`, so the pytest suite (hypothesis feeds the seed) and the
longer campaign of `bench/fuzz.py` share them.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import random
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from typer.testing import CliRunner

from planner.cli.main import app
from tests.conftest import grpo_scenario

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "examples" / "grpo-qwen2.5-7b.yaml"
PLAN = REPO / "examples" / "plans" / "grpo-qwen2.5-7b-colocated.json"
# `plan` runs are the slow ones: they get this time limit, and the contract allows this much
# on top of it for loading, the greedy start and rendering on a loaded 2-core machine.
PLAN_TIME_LIMIT_S = 1.0
ALLOWANCE_S = 20.0
HANG_S = 300.0
# A run needing more address space than this counts as a failure (MemoryError), not a crash
# of the fuzzer: bad input must be refused before it allocates.
MEMORY_CAP_BYTES = 4 * 1024**3
# A small scenario `plan` can search quickly (8 GPUs, a 0.5B model).
SMALL_SCENARIO = grpo_scenario(search={"max_staleness": 1})

HOSTILE = [0, -1, 1, 3, 2**31, 2**63, 10**20, 10**30, 0.0, -0.0, 0.5, 1e-12, 1e300,
           float("nan"), float("inf"), float("-inf"), True, False, None, "", "abc", "none",
           "actor", "ü" * 5000, "../../etc/passwd", "8", "1e3", [], {}, [1, 2], {"x": 1}]


def _paths(doc, prefix=()):
    """Every key path in a nested mapping/list, parents before children."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


def _parent(doc, path):
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutate_document(doc, rng: random.Random):
    """A copy of `doc` with one structural mutation; returns (document, description)."""
    doc = copy.deepcopy(doc)
    paths = list(_paths(doc))
    op = rng.choice(["replace", "replace", "replace", "delete", "add"])
    if not paths:
        return rng.choice(HOSTILE), "replace the whole document"
    path = rng.choice(paths)
    parent = _parent(doc, path)
    if op == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
        return doc, f"delete {'.'.join(map(str, path))}"
    if op == "add" and isinstance(parent, dict):
        parent[rng.choice(["bogus", "Extra_Field", "nodes", "dp", "zero"])] = rng.choice(HOSTILE)
        return doc, f"add a key beside {'.'.join(map(str, path))}"
    value = rng.choice(HOSTILE)
    parent[path[-1]] = value
    return doc, f"{'.'.join(map(str, path))} = {value!r:.40}"


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """Byte-level mutations of a serialized document."""
    op = rng.choice(["flip", "truncate", "duplicate line", "insert", "nest", "long number"])
    if not text:
        return "\x00", "NUL"
    i = rng.randrange(len(text))
    if op == "flip":
        return text[:i] + chr(rng.randrange(1, 0x2FF)) + text[i + 1:], f"char {i} replaced"
    if op == "truncate":
        return text[:i], f"truncated at {i}"
    if op == "nest":  # deep enough to exhaust a recursive parser's stack
        depth = rng.choice([100, 1_000, 50_000])
        return text[:i] + "[" * depth + "]" * depth + text[i:], f"{depth} brackets at {i}"
    if op == "long number":  # beyond the 4,300 digits Python converts
        return text[:i] + "9" * rng.choice([120, 5_000]) + text[i:], f"long number at {i}"
    if op == "duplicate line":
        lines = text.splitlines(keepends=True)
        j = rng.randrange(len(lines))
        return "".join(lines[:j + 1] + lines[j:]), f"line {j + 1} duplicated"
    return text[:i] + rng.choice(["{", "]", ":", "\t", "- ", "\n  x: 1\n", "'"]) + text[i:], \
        f"insert at {i}"


@dataclass
class Case:
    """One fuzz case: the inputs written and the command to run on them."""

    kind: str
    mutation: str
    files: dict[str, str]  # name under the case folder → content
    args: list[str]  # `{dir}` stands for the case folder
    outputs: list[str]  # files the command is asked to write (names under the folder)
    time_limit_s: float | None = None
    elapsed_s: float | None = None  # set by `check_case`: the command's own wall time


def _dump(doc, name: str) -> str:
    return json.dumps(doc, indent=1) if name.endswith(".json") else yaml.safe_dump(doc)


def _load(path: Path):
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(
        path.read_text())


def _mutated(doc, name: str, rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.25:
        return mutate_text(_dump(doc, name), rng)
    new, what = mutate_document(doc, rng)
    try:
        return _dump(new, name), what
    except (TypeError, ValueError):  # unrepresentable (e.g. a huge int in JSON is fine; NaN...)
        return _dump(doc, name), what + " (unrepresentable: unchanged)"


def draw_case(rng: random.Random, plan_runs: bool = True) -> Case:
    """A random case over the four input kinds (and `plan` on a small scenario)."""
    kinds = ["scenario", "plan", "profile", "model"] + (["search"] if plan_runs else [])
    kind = rng.choice(kinds)
    if kind == "scenario":
        text, what = _mutated(_load(rng.choice(sorted((REPO / "examples").glob("*.yaml")))),
                              "s.yaml", rng)
        return Case(kind, what, {"s.yaml": text}, ["validate", "{dir}/s.yaml", "--json"], [])
    if kind == "plan":
        text, what = _mutated(_load(PLAN), "p.json", rng)
        return Case(kind, what, {"p.json": text},
                    ["evaluate", str(SCENARIO), "{dir}/p.json", "--json", "--out",
                     "{dir}/out.json"], ["out.json"])
    if kind == "profile":
        name = rng.choice(sorted((REPO / "hardware_profiles").glob("*.yaml")))
        text, what = _mutated(_load(name), "gpu.yaml", rng)
        return Case(kind, f"{name.stem}: {what}", {"gpu.yaml": text},
                    ["evaluate", str(SCENARIO), str(PLAN), "--gpu", "{dir}/gpu.yaml", "--json",
                     "--out", "{dir}/out.json"], ["out.json"])
    if kind == "model":
        name = rng.choice(sorted((REPO / "model_specs").glob("*.json")))
        text, what = _mutated(_load(name), "m/config.json", rng)
        scenario = _dump({**_load(SCENARIO), "models": {"actor": "{dir}/m", "reference": "actor",
                                                       "reward": "verifier"}}, "s.yaml")
        command = rng.choice([["validate", "{dir}/m"],
                              ["evaluate", "{dir}/s.yaml", str(PLAN), "--json"]])
        return Case(kind, f"{name.stem}: {what}", {"m/config.json": text, "s.yaml": scenario},
                    command, [])
    text, what = _mutated(SMALL_SCENARIO, "s.yaml", rng)
    return Case(kind, what, {"s.yaml": text},
                ["plan", "{dir}/s.yaml", "--json", "--time-limit", str(PLAN_TIME_LIMIT_S),
                 "--workers", "1", "--out", "{dir}/plan.json"], ["plan.json"], PLAN_TIME_LIMIT_S)


def _invoke(args: list[str], conn) -> None:
    """Child process: run the CLI under a memory cap, send back what it did."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
    started = time.monotonic()
    result = CliRunner().invoke(app, args, catch_exceptions=True)
    exc = result.exception
    error = None if exc is None or isinstance(exc, SystemExit) else \
        f"{type(exc).__name__}: {exc}"[:300]
    conn.send((result.exit_code, result.stdout, result.stderr, error,
               time.monotonic() - started))
    conn.close()


def run_isolated(args: list[str], timeout_s: float):
    """(exit code, stdout, stderr, escaped exception or None, seconds), or None when the
    command did not end within `timeout_s` (it is killed). A forked child keeps a case that
    eats memory or time from taking the test run down with it."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_invoke, args=(args, send))
    child.start()
    send.close()
    answer = receive.recv() if receive.poll(timeout_s) else None
    if answer is None:
        child.kill()
    child.join()
    if answer is None and child.exitcode not in (None, -9):  # died without answering
        return (child.exitcode, "", "", f"child died (exit {child.exitcode})", 0.0)
    return answer


def check_case(case: Case, folder: Path, timed: bool = False) -> list[str]:
    """Run `case` in `folder` (empty); the contract's violations, [] when it holds (`timed`:
    the time limit counts too)."""
    for name, content in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        content = content.replace("{dir}", str(folder))
        (folder / name).write_text(content, encoding="utf-8", errors="surrogatepass")
    before = {p for p in folder.rglob("*")}
    args = [a.replace("{dir}", str(folder)) for a in case.args]
    limit = (case.time_limit_s or 0.0) + ALLOWANCE_S if timed else HANG_S
    answer = run_isolated(args, limit)
    if answer is None:
        return [f"still running after {limit:.0f} s (killed)"]
    exit_code, stdout, stderr, error, elapsed = answer
    case.elapsed_s = elapsed
    problems = []
    if error is not None:
        problems.append(f"exception {error}")
    if exit_code not in (0, 2, 3):
        problems.append(f"exit code {exit_code}")
    text = stdout + stderr
    for marker in ("Traceback", "Warning:", "warnings.warn"):
        if marker in text:
            problems.append(f"'{marker}' in the output")
    if exit_code in (2, 3):
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("rlplan: error: "):
            problems.append(f"stderr is not one error line: {stderr[:300]!r}")
    new = {p for p in folder.rglob("*")} - before
    expected = {folder / o for o in case.outputs} if exit_code == 0 else set()
    stray = sorted(str(p.relative_to(folder)) for p in new - expected if p.is_file())
    if stray:
        problems.append(f"files left behind: {stray}")
    if timed and elapsed > limit:
        problems.append(f"took {elapsed:.1f} s, limit {limit:.0f} s")
    return problems

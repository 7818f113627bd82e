"""Shared fixtures: a CLI runner, paths to the test data, helpers for writing inputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import settings
from typer.testing import CliRunner

# The tests read the CLI's captured output as a pipe gives it, whole rows (planner/cli/output.py
# widens a console that is not a terminal unless COLUMNS says a width): pytest-xdist's workers
# set COLUMNS=80, so it is dropped before the CLI is imported.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from planner.cli.main import app

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent

# Property tests draw the same examples on every run, so a run's verdict does not depend on
# luck; HYPOTHESIS_PROFILE=explore draws new ones (run it to look for counterexamples).
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture
def cli():
    """Invoke `rlplan ARGS...`; returns click's Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return run


@pytest.fixture
def write(tmp_path: Path):
    """Write a YAML (dict), JSON (dict, .json) or raw text file under tmp_path."""

    def _write(name: str, content) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content)
        elif name.endswith(".json"):
            path.write_text(json.dumps(content))
        else:
            path.write_text(yaml.safe_dump(content))
        return path

    return _write


def grpo_scenario(**changes) -> dict:
    """A small valid GRPO scenario as a dict; `changes` replace top-level sections."""
    base = {
        "algorithm": "grpo",
        "models": {"actor": "qwen2.5-0.5b", "reference": "actor", "reward": "verifier"},
        "workload": {"prompts_per_step": 64, "samples_per_prompt": 4, "prompt_len": 256,
                     "response_len": 512, "max_response_len": 1024},
        "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
    }
    base.update(changes)
    return base


def power_of_two_group_sizes(total: int, per_node: int, every: int = 0) -> list[int]:
    """The search's group sizes before 2026-12-02: powers of two within a node, power-of-two
    node multiples and their complements to the cluster (`every` ignored)."""
    sizes = {1 << k for k in range(per_node.bit_length()) if 1 << k <= min(per_node, total)}
    nodes = total // per_node
    whole = {per_node * (1 << k) for k in range(nodes.bit_length()) if (1 << k) <= nodes}
    sizes |= whole | {total - s for s in whole if total - s > 0} | {total}
    return sorted(s for s in sizes if 0 < s <= total)


@pytest.fixture
def fewer_group_sizes():
    """The search offers the former, smaller menu of group sizes
    (`power_of_two_group_sizes`): for the tests of the solver's mechanics against brute force,
    whose enumeration grows with the sizes as a power of the slots (the full menu is held to
    brute force in `tests/test_search.py`). For the test that asks only: a module-scoped patch
    stayed on for every later test of the module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("planner.search.space.slot_sizes", power_of_two_group_sizes)
        yield


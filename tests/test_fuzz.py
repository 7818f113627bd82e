"""Property-based fuzzing of the error contract (tests/fuzzing.py): mutated scenarios, plans,
hardware profiles and model configs never crash, never leave files behind, always answer with
exit 0/2/3 and one error line. `bench/fuzz.py` runs longer campaigns and also holds each `plan`
run to its time limit (timings are measured there, not asserted here)."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzzing import check_case, draw_case

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def _holds(seed: int, plan_runs: bool) -> None:
    case = draw_case(random.Random(seed), plan_runs=plan_runs)
    if not plan_runs and case.kind == "search":
        return
    with tempfile.TemporaryDirectory() as folder:
        problems = check_case(case, Path(folder))
    assert not problems, f"{case.kind}: {case.mutation}: {problems}"


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=SEEDS)
def test_mutated_inputs_keep_the_contract(seed):
    _holds(seed, plan_runs=False)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=SEEDS)
def test_mutated_scenarios_keep_the_contract_when_planned(seed):
    rng = random.Random(seed)
    case = draw_case(rng, plan_runs=True)
    while case.kind != "search":
        case = draw_case(rng, plan_runs=True)
    with tempfile.TemporaryDirectory() as folder:
        problems = check_case(case, Path(folder))
    assert not problems, f"{case.kind}: {case.mutation}: {problems}"


@pytest.mark.parametrize("cluster", ["", {"gpu": ""}, {"preset": ""}])
def test_an_empty_cluster_name_is_one_error_line(cli, write, cluster):
    """Found by a longer campaign (bench/fuzz.py --seed 4): an empty cluster or profile name
    crashed with AttributeError."""
    from tests.conftest import grpo_scenario
    from tests.test_cli import assert_bad_input

    path = write("s.yaml", grpo_scenario(cluster=cluster))
    assert_bad_input(cli("validate", str(path)), "cluster")

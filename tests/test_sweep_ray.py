"""`rlplan sweep --ray local`: the grid's points run as tasks on a real Ray instance the command
starts (two CPUs), and the answer equals the local processes' run.

The time limit is generous so that every point proves its optimum in both runs: a search cut
short by its budget may stop on a different incumbent, and Ray's start counts against the
command's time limit."""

from __future__ import annotations

import json

import pytest

from planner.sweep.run import without_timing
from tests.test_sweep import SMALL

pytest.importorskip("ray", reason="the Ray extra is not installed: pip install 'rlplan[ray]'")



def test_ray_sweep_equals_the_local_one(cli, write):
    path = str(write("s.yaml", {**SMALL, "search": {"time_limit_s": 120}}))
    args = ["sweep", path, "--gpu", "h100-sxm,b200", "--gpus", "1,2,8", "--jobs", "2", "--json",
            "--target-step-s", "10"]
    local = cli(*args)
    assert local.exit_code == 0, local.output
    on_ray = cli(*args, "--ray", "local")
    assert on_ray.exit_code == 0, on_ray.output
    a, b = json.loads(local.stdout), json.loads(on_ray.stdout)
    assert [r["status"] for r in a["rows"]] == ["optimal"] * 6  # proven: the same plan anywhere
    assert without_timing(b) == without_timing(a)
    assert b["frontier"] and b["target"]["gpus"] is not None


def test_ray_pool_grid_equals_the_local_one(cli, write):
    """A grid over pool sizes (planner.sweep.pools): each point's scenario travels to the Ray
    task whole, and the answers equal the local processes'."""
    from tests.test_sweep_pools import POOLED

    path = str(write("pooled.yaml", POOLED))
    args = ["sweep", path, "--pool", "train:0,4", "--pool", "rollout:0,8", "--jobs", "2",
            "--json", "--target-step-s", "10"]
    local = cli(*args)
    assert local.exit_code == 0, local.output
    on_ray = cli(*args, "--ray", "local")
    assert on_ray.exit_code == 0, on_ray.output
    a, b = json.loads(local.stdout), json.loads(on_ray.stdout)
    assert [r["status"] for r in a["rows"]] == ["optimal"] * 3
    assert [r["pools"] for r in b["rows"]] == [{"train": 0, "rollout": 8},
                                               {"train": 4, "rollout": 0},
                                               {"train": 4, "rollout": 8}]
    assert without_timing(b) == without_timing(a)
    assert b["frontier"] and b["target"]["pools"] is not None

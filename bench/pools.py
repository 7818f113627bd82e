"""Heterogeneous pools: the search on 2 DGX H100 nodes + 8 H20 nodes against the same search on
the larger pool (the 8 H20 nodes) alone, for GRPO on Qwen2.5-7B and PPO with four 70B roles
(the shipped examples' workloads). Issue 13's target: the two-pool search proven optimal
within 2× the single-pool time.

Not a test: prints a table. Run: .venv/bin/python bench/pools.py [--workers N]
`search s` is the search proper (`plan(explain=False)`: every inter-model option priced, solved
and proven, as `rlplan plan` before its what-ifs), each in a fresh process so that no search
starts from another's warm caches (the rollout simulations are memoised per profile);
`step s` the plan's iteration time; `groups` its groups as GPUs@pool. The H20 price (1.50
USD/GPU-hour) is the example's assumption.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from planner.search.solve import default_workers, plan
from planner.specs.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {"GRPO 7B": "grpo-qwen2.5-7b.yaml", "PPO 4×70B": "ppo-llama-3.1-70b.yaml"}
TRAIN = {"name": "train", "gpu": "h100-sxm", "nodes": 2, "gpus_per_node": 8}
ROLLOUT = {"name": "rollout", "gpu": "h20", "nodes": 8, "gpus_per_node": 8,
           "price_usd_per_gpu_hour": 1.5}
CLUSTERS = {"2×H100 + 8×H20 nodes": {"pools": [TRAIN, ROLLOUT]},
            "8×H20 nodes alone": {"gpu": "h20", "nodes": 8, "gpus_per_node": 8,
                                  "price_usd_per_gpu_hour": 1.5}}


def scenario(example: str, cluster: dict, tmp: Path, time_limit_s: float):
    raw = yaml.safe_load((ROOT / "examples" / example).read_text())
    raw["cluster"] = cluster
    raw.setdefault("search", {})["time_limit_s"] = time_limit_s
    path = tmp / example
    path.write_text(yaml.safe_dump(raw))
    return load_scenario(path)


def timed(example: str, cluster: dict, tmp: str, time_limit_s: float, workers: int
          ) -> tuple[float, str, float, str]:
    """(search s, status, step s, groups) of one search, run in this (fresh) process."""
    sc = scenario(example, cluster, Path(tmp), time_limit_s)
    started = time.perf_counter()
    found = plan(sc, workers=workers, explain=False)
    wall = time.perf_counter() - started
    groups = ", ".join(f"{g.gpus}@{g.pool or sc.cluster.gpu.name}" for g in found.groups)
    return wall, found.status, found.iteration_time_s, groups


def main() -> None:
    import multiprocessing
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="CP-SAT workers (default: the cores, as rlplan plan)")
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
    print(f"workers {args.workers}")
    print("| workload | cluster | status | search s | step s | groups |")
    print("|---|---|---|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, example in WORKLOADS.items():
            walls = {}
            for label, cluster in CLUSTERS.items():
                with multiprocessing.get_context("spawn").Pool(1) as one:
                    wall, status, step, groups = one.apply(
                        timed, (example, cluster, tmp, args.time_limit, args.workers))
                walls[label] = wall
                print(f"| {name} | {label} | {status} | {wall:.1f} | {step:.1f} | {groups} |",
                      flush=True)
            two, one = walls.values()
            print(f"| {name} | two pools / one pool | | {two / one:.2f}× | | |", flush=True)


if __name__ == "__main__":
    main()

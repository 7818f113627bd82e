"""A 100-point capacity grid, run in local worker processes and then on Ray (issue 13's
target): the wall time of each and whether the answers are equal.

    python bench/sweep_ray.py                 # 10 GPU types x 10 sizes, 2 jobs each way
    python bench/sweep_ray.py --jobs 4 --time-limit 900

Both runs are `rlplan sweep ... --json` in a fresh process (Python's start-up and imports
included; Ray's start-up counts in the Ray run, as it does for a user). The answers are compared
without the fields that record how long things took (`wall_s`, `time_limit_s`): every point
that proves its optimum gives the same plan wherever it runs; a point stopped by its budget may
not, and the bench prints how many points were proven.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from planner.sweep.run import without_timing

REPO = Path(__file__).resolve().parent.parent
PROFILES = ("h100-sxm,h200-sxm,b200,h20,a100-sxm-80gb,a100-sxm-40gb,l40s,mi300x,mi325x,"
            "h100-pcie")
SIZES = "1,2,4,8,16,24,32,48,64,128"
SCENARIO = {  # small enough that a point takes about a second
    "algorithm": "grpo",
    "models": {"actor": "qwen2.5-0.5b", "reference": "actor", "reward": "verifier"},
    "workload": {"prompts_per_step": 128, "samples_per_prompt": 8, "prompt_len": 256,
                 "response_len": 512, "max_response_len": 1024},
    "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
}


def run(args: list[str]) -> tuple[float, dict]:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "from planner.cli.main import main; main()",
                          *args], capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - started
    if out.returncode != 0:
        sys.exit(f"exit {out.returncode}: {out.stderr.strip()[-400:]}")
    return wall, json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=PROFILES)
    parser.add_argument("--gpus", default=SIZES)
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--time-limit", default="1800")
    args = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("the Ray extra is not installed: pip install 'rlplan[ray]'")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.yaml"
        path.write_text(yaml.safe_dump(SCENARIO))
        common = ["sweep", str(path), "--gpu", args.profiles, "--gpus", args.gpus,
                  "--jobs", args.jobs, "--time-limit", args.time_limit, "--json"]
        local_s, local = run(common)
        ray_s, on_ray = run([*common, "--ray", "local"])
    rows = local["rows"]
    proven = sum(r["status"] == "optimal" for r in rows)
    print(f"grid: {len(rows)} points ({len(args.profiles.split(','))} GPU types x "
          f"{len(args.gpus.split(','))} sizes), {args.jobs} jobs; {proven} proven optimal, "
          f"{sum(r['status'] == 'infeasible' for r in rows)} infeasible, "
          f"{sum(r['status'] not in ('optimal', 'infeasible') for r in rows)} other")
    print(f"local processes: {local_s:7.1f} s")
    print(f"Ray (local):     {ray_s:7.1f} s")
    same = without_timing(local) == without_timing(on_ray)
    print(f"answers equal (timing fields aside): {same}")
    if not same:
        differ = [r["gpu"] + "@" + str(r["gpus"]) for r, s in zip(rows, on_ray["rows"], strict=True)
                  if without_timing(r) != without_timing(s)]
        print(f"points that differ: {', '.join(differ)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

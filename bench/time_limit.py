"""How long `rlplan plan` and `rlplan sweep` take against their `--time-limit` (the tests check
that the deadline reaches every solve and that a sweep hands out no point once its time is up;
this measures the wall time, which no test asserts).

    python bench/time_limit.py                     # the 70B PPO example on 1,024 GPUs
    python bench/time_limit.py --limits 1,3,10 --nodes 128
    python bench/time_limit.py --sweep 399 --limits 3,10   # a sweep of 399 sizes (8, 16, ...)

For `plan`, each limit: the wall time inside the command (the plan JSON's `search.wall_s`), the
whole process's (with Python's start-up and imports, before the clock starts), the status and
the gap. For `sweep`, each limit: the whole process's wall time, Python's start-up alone
(`rlplan --version`), and the rows by status.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RLPLAN = [sys.executable, "-c", "from planner.cli.main import main; main()"]


def run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    out = subprocess.run([*RLPLAN, *args], capture_output=True, text=True, cwd=REPO)
    return out, time.monotonic() - started


def plans(scenario: str, nodes: str, limits: list[str]) -> None:
    print(f"{'limit s':>8} {'command s':>10} {'process s':>10}  status    gap")
    for limit in limits:
        out, process = run("plan", scenario, "--nodes", nodes, "--time-limit", limit, "--json")
        if out.returncode != 0:
            print(f"{limit:>8} exit {out.returncode}: {out.stderr.strip()[:100]}")
            continue
        plan = json.loads(out.stdout)
        gap = plan["search"].get("gap")
        print(f"{limit:>8} {plan['search']['wall_s']:10.2f} {process:10.2f}  "
              f"{plan['status']:9} {'unknown' if gap is None else f'{gap:.1%}'}")


def sweeps(scenario: str, sizes: int, limits: list[str]) -> None:
    gpus = ",".join(str(8 * k) for k in range(1, sizes + 1))
    _, startup = run("--version")
    print(f"sweep of {sizes} sizes (8 to {8 * sizes} GPUs) of {Path(scenario).name}; Python "
          f"start-up and imports alone: {startup:.2f} s")
    print(f"{'limit s':>8} {'process s':>10}  rows")
    for limit in limits:
        out, process = run("sweep", scenario, "--gpus", gpus, "--time-limit", limit, "--json")
        if out.returncode not in (0, 3) or not out.stdout:
            print(f"{limit:>8} exit {out.returncode}: {out.stderr.strip()[:100]}")
            continue
        rows = collections.Counter(r["status"] for r in json.loads(out.stdout)["rows"])
        print(f"{limit:>8} {process:10.2f}  "
              + ", ".join(f"{n} {status}" for status, n in sorted(rows.items())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=None,
                        help="default: the 70B PPO example (plan), the 7B GRPO one (sweep)")
    parser.add_argument("--nodes", default="128")
    parser.add_argument("--limits", default="1,3,10")
    parser.add_argument("--sweep", type=int, metavar="SIZES", default=None,
                        help="time a sweep of this many sizes instead of plan")
    args = parser.parse_args()
    limits = args.limits.split(",")
    if args.sweep:
        sweeps(args.scenario or str(REPO / "examples" / "grpo-qwen2.5-7b.yaml"), args.sweep,
               limits)
    else:
        plans(args.scenario or str(REPO / "examples" / "ppo-llama-3.1-70b.yaml"), args.nodes,
              limits)
    return 0


if __name__ == "__main__":
    sys.exit(main())

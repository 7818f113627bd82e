"""How long `rlplan plan` takes against its `--time-limit` (the tests check that the deadline
reaches every solve; this measures the wall time, which no test asserts).

    python bench/time_limit.py                     # the 70B PPO example on 1,024 GPUs
    python bench/time_limit.py --limits 1,3,10 --nodes 128

For each limit: the wall time inside the command (the plan JSON's `search.wall_s`), the whole
process's (with Python's start-up and imports, before the clock starts), the status and the gap.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "examples" / "ppo-llama-3.1-70b.yaml"))
    parser.add_argument("--nodes", default="128")
    parser.add_argument("--limits", default="1,3,10")
    args = parser.parse_args()
    print(f"{'limit s':>8} {'command s':>10} {'process s':>10}  status    gap")
    for limit in args.limits.split(","):
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", "from planner.cli.main import main; main()", "plan",
             args.scenario, "--nodes", args.nodes, "--time-limit", limit, "--json"],
            capture_output=True, text=True, cwd=REPO)
        process = time.monotonic() - started
        if out.returncode != 0:
            print(f"{limit:>8} exit {out.returncode}: {out.stderr.strip()[:100]}")
            continue
        plan = json.loads(out.stdout)
        gap = plan["search"].get("gap")
        print(f"{limit:>8} {plan['search']['wall_s']:10.2f} {process:10.2f}  "
              f"{plan['status']:9} {'unknown' if gap is None else f'{gap:.1%}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

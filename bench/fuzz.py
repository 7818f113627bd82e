"""A longer fuzz campaign against the error contract (tests/fuzzing.py has the cases and the
checks; tests/test_fuzz.py runs a short derandomized one in the suite).

    python bench/fuzz.py --cases 1000 --seed 0          # prints cases tried and every failure

Exit status 1 when any case broke the contract.
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzzing import PLAN_TIME_LIMIT_S, check_case, draw_case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plan", action="store_true", help="skip the slow `plan` cases")
    parser.add_argument("--verbose", action="store_true", help="print each case before it runs")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tried = collections.Counter()
    failures = []
    timed: list[float] = []  # wall time of the `plan` runs (they carry a time limit)
    started = time.monotonic()
    for i in range(args.cases):
        case = draw_case(rng, plan_runs=not args.no_plan)
        if args.verbose:
            print(f"case {i} [{case.kind}] {case.mutation} ...", flush=True)
        tried[case.kind] += 1
        with tempfile.TemporaryDirectory() as folder:
            problems = check_case(case, Path(folder), timed=True)
        if case.time_limit_s is not None and case.elapsed_s is not None:
            timed.append(case.elapsed_s)
        if problems:
            failures.append((i, case, problems))
            print(f"case {i} [{case.kind}] {case.mutation}: {'; '.join(problems)}", flush=True)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(tried.items()))
    if timed:
        print(f"`plan` runs at --time-limit {PLAN_TIME_LIMIT_S:g} s: {len(timed)}, the slowest "
              f"{max(timed):.2f} s in the command, median {statistics.median(timed):.2f} s")
    print(f"{args.cases} cases ({kinds}) in {time.monotonic() - started:.0f} s, "
          f"seed {args.seed}: {len(failures)} broke the contract")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

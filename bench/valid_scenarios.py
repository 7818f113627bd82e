"""Random valid scenarios through every command a plan goes through: `plan`, then `evaluate`,
`report` and `export` to each framework of the plan it printed — none may end in a traceback
(tests/drawn_scenarios.py draws them and runs the commands; tests/test_drawn_scenarios.py runs
a few in the suite).

`bench/fuzz.py` mutates inputs into hostile ones; this draws plausible ones, where the
search's corners are (its first run found `rlplan plan` dividing by zero on a PPO plan whose
reward model sat on fewer GPUs than the actor's TP × its own PP).

    python bench/valid_scenarios.py --cases 150 --seed 6     # about 2 minutes
    python bench/valid_scenarios.py --frameworks              # half plan for a framework release

Exit status 1 when any command failed.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.drawn_scenarios import check, draw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--frameworks", action="store_true",
                        help="half the scenarios name a framework release (`framework:`)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    codes: collections.Counter = collections.Counter()
    failed = 0
    started = time.monotonic()
    for k in range(args.cases):
        sc = draw(rng, args.frameworks)
        with tempfile.TemporaryDirectory() as folder:
            problems = check(sc, Path(folder), codes)
        if problems:
            failed += len(problems)
            print(f"case {k}: {sc}: {'; '.join(problems)}", flush=True)
    print(", ".join(f"{what} exit {code}: {n}" for (what, code), n in sorted(codes.items())))
    print(f"{args.cases} scenarios in {time.monotonic() - started:.0f} s, seed {args.seed}: "
          f"{failed} commands failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

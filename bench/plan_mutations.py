"""Plans off the search's grid against the proven optimum (issue 25: every plan `evaluate`
accepts lies in the space the optimum is proven over): for each scenario of a small grid,
`rlplan plan`'s proven optimum, then `--mutations` plans drawn from it by
`tests/plan_mutations.py` (layouts changed to degrees, stages, memory settings, KV sizes and
caps the search may not enumerate; the actor's generation moved to a group of a random size),
each priced by `evaluate`. It prints, per scenario, how many `evaluate` accepted and how many of
those it says lie in the search's space (`search.outside_search` empty), the fastest against
the optimum, and how many beat it (the claim says none), then why the others lie outside and
the refusals most often met (each a clear one-line error: nothing else may come out of
`evaluate`).

    python bench/plan_mutations.py                 # 6 scenarios × 1,000 plans (about a minute)
    python bench/plan_mutations.py --mutations 200 --seed 3
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.search.solve import plan
from planner.specs.scenario import load_scenario
from tests.plan_mutations import SCENARIOS, tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    refused: Counter = Counter()
    outside: Counter = Counter()
    accepted = inside = faster = 0
    print(f"{'scenario':30} {'optimum':>9} {'accepted':>9} {'inside':>7} {'fastest':>9} "
          f"{'vs opt':>8} {'faster':>7}")
    for name, flags in SCENARIOS.items():
        sc = load_scenario(None, flags)
        best = plan(sc, explain=False)
        out = tally(sc, best, random.Random(args.seed), args.mutations)
        refused.update(out.refused)
        outside.update(out.outside)
        accepted += out.accepted
        inside += out.inside
        faster += len(out.faster)
        least = out.least_s if out.least_s is not None else float("nan")
        print(f"{name:30} {best.iteration_time_s:8.3f}s {out.accepted:9,} {out.inside:7,} "
              f"{least:8.3f}s {least / best.iteration_time_s - 1:+8.2%} {len(out.faster):7}")
        for seconds, data in out.faster[:3]:
            print(f"    faster: {seconds:.3f} s {data}")
    print(f"\n{len(SCENARIOS)} scenarios, {len(SCENARIOS) * args.mutations:,} plans drawn, "
          f"{accepted:,} priced by evaluate ({inside:,} inside the search's space, "
          f"`search.outside_search` empty), {faster} faster than their proven optimum "
          "(the claim: none).")
    print("outside the search, by the kind of line `evaluate` gives:")
    for text, count in outside.most_common(8):
        print(f"  {count:6,}  {text} …")
    print("refusals met most often:")
    for text, count in refused.most_common(8):
        print(f"  {count:6,}  {text} …")
    print(f"(bench wall time {time.monotonic() - started:.0f} s)")
    return 1 if faster else 0


if __name__ == "__main__":
    raise SystemExit(main())

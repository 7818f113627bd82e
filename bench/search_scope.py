"""Which layouts `evaluate` accepts that the search's proof does not cover (issue 25: every plan
`evaluate` accepts lies in the space the optimum is proven over, or `evaluate` says it does
not): for each scenario of the plan-mutation grid (`tests/plan_mutations.SCENARIOS`), the
proven optimum, then every training and assessment layout with the optimum's degrees and
every option `evaluate` could be given (vp, ZeRO, recomputation, micro-batch, offload), each
put in the optimum's place (`--shapes`: with every shape of degrees the search prices on its
group too) and priced by `evaluate` (`scope.evaluated_plan`). It prints per
scenario how many it accepted, how many lie in the search's space (enumerated, or no better
in any number the search prices than a layout it enumerates), how many of those beat the
optimum (the proof says none), and the option values of those outside it: the search's
menus' holes.

    python bench/search_scope.py            # 6 scenarios (under a minute)
    python bench/search_scope.py --shapes   # every shape the search prices on each group (slow)
    python bench/search_scope.py --shapes --set search.min_cp_chunk=1   # every cp offered
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.errors import InfeasibleError, InputError
from planner.plan import PlanInput
from planner.search import scope
from planner.search.layouts import SHAPES
from planner.search.scope import bare_space, evaluated_plan
from planner.search.solve import plan
from planner.specs.scenario import load_scenario
from tests.plan_mutations import SCENARIOS, SLACK_S

OFFLOADS = ("none", "optimizer", "params", "both", "sleep")


DEGREES = (*scope.DEGREES, "sp")  # a shape's degrees, as `evaluate` reads them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a scenario field for every scenario (e.g. search.min_cp_chunk=1)")
    args = parser.parse_args()
    fields = {k: int(v) if v.isdigit() else v for k, v in (x.split("=", 1) for x in args.set)}
    started = time.monotonic()
    holes: Counter = Counter()
    print(f"{'scenario':30} {'accepted':>9} {'inside':>7} {'faster':>7} {'outside':>8}")
    for name, flags in SCENARIOS.items():
        sc = load_scenario(None, {**flags, **fields})
        best = plan(sc, explain=False)
        base = PlanInput.model_validate(best.model_dump())
        accepted = inside = faster = 0
        for role, stages in base.layouts.items():
            for stage, lay in stages.items():
                if stage == "generation":
                    continue
                degrees = [{k: getattr(lay, k) for k in DEGREES}]
                if args.shapes:
                    space = bare_space(sc, base)
                    g = next(x.gpus for x in base.groups if x.name == lay.group)
                    kind = "forward" if stage == "assessment" else stage
                    degrees += [{k: getattr(s, k) for k in DEGREES} for s in SHAPES[kind](
                        space, space.pools[0], role, g)]
                for shape, vp, zero, ckpt, mb, off in product(
                        degrees, (1, 2, 4), range(4), ("none", "selective", "full"),
                        (1, 2, 3, 4, 8), OFFLOADS):
                    changed = base.with_layout(role, stage, vp=vp, zero=zero, micro_batch=mb,
                                               checkpointing=ckpt, offload=off, **shape)
                    try:
                        priced = evaluated_plan(sc, PlanInput.model_validate(
                            changed.model_dump()))
                    except (InputError, InfeasibleError, ValueError):
                        continue
                    accepted += 1
                    why = [w for w in priced.search["outside_search"]
                           if w.startswith(f"layouts.{role}.{stage}")]
                    if not why:
                        inside += 1
                        faster += priced.iteration_time_s < best.iteration_time_s - SLACK_S
                    else:
                        holes[f"{role} {stage}: dp {changed.layouts[role][stage].dp}, pp "
                              f"{changed.layouts[role][stage].pp}, zero {zero}, offload {off}"
                              + (f", vp {vp}" if vp > 1 else "")] += 1
        print(f"{name:30} {accepted:9} {inside:7} {faster:7} {accepted - inside:8}")
    print("\noutside the search, by role, stage and options (count of micro-batch and "
          "recomputation settings):")
    for what, n in sorted(holes.items()):
        print(f"  {n:4}  {what}")
    print(f"\nwall {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The shipped examples planned for each framework release, and exported: per example and
release, the plan's status and step time against the unrestricted plan's, its peak memory
against the capacity less the headroom, and whether its export is accepted (the refusal when
not). Issue 23's "Done when": with a framework named, the examples' plans export without
refusal and no default plan exceeds the headroom.

Not a test: prints a report. Run: .venv/bin/python bench/framework_examples.py
[--time-limit S] [--examples NAME,...] [--frameworks NAME,...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.errors import InfeasibleError, InputError, OutOfTime
from planner.export import ExportError, export
from planner.frameworks import load_preset, releases
from planner.search.solve import plan
from planner.specs.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--examples", default=None, help="comma-separated example file names")
    parser.add_argument("--frameworks", default=None, help="comma-separated names (newest "
                        "release of each unless NAME@VERSION)")
    args = parser.parse_args()
    examples = (args.examples.split(",") if args.examples else
                sorted(p.name for p in EXAMPLES.glob("*.yaml")))
    names = (args.frameworks.split(",") if args.frameworks else
             [f"{f}@{v}" for f, versions in releases().items() for v in versions])
    started = time.monotonic()
    print(f"{'example':<28} {'framework':<17} {'status':<11} {'step s':>8} {'vs free':>8} "
          f"{'peak/usable':>11}  export")
    for name in examples:
        path = EXAMPLES / name
        free = plan(load_scenario(path, {}), time_limit_s=args.time_limit, explain=False)
        print(f"{name:<28} {'(none)':<17} {free.status:<11} {free.iteration_time_s:>8.2f} "
              f"{'':>8} {_usage(free):>11}")
        for fw in names:
            preset = load_preset(fw)
            try:
                sc = load_scenario(path, {"framework": fw})
                found = plan(sc, time_limit_s=args.time_limit, explain=False)
            except (InputError, InfeasibleError, OutOfTime) as exc:
                print(f"{'':<28} {preset.name:<17} {'no plan':<11} {'':>8} {'':>8} {'':>11}  "
                      f"{str(exc)[:110]}")
                continue
            if preset.export_format is None:
                verdict = "no exporter yet"
            else:
                try:
                    export(found.model_dump(mode="json"), sc, preset.export_format,
                           preset.version)
                    verdict = "accepted"
                except ExportError as exc:
                    verdict = f"REFUSED: {str(exc)[:140]}"
            delta = found.iteration_time_s / free.iteration_time_s - 1
            print(f"{'':<28} {preset.name:<17} {found.status:<11} "
                  f"{found.iteration_time_s:>8.2f} {delta:>+8.1%} {_usage(found):>11}  {verdict}")
    print(f"\n(bench wall time {time.monotonic() - started:.0f} s, time limit "
          f"{args.time_limit:g} s per plan; statuses 'feasible' were cut short by it)")


def _usage(p) -> str:
    m = p.memory
    return f"{m['peak_gib_per_gpu'] / (m['capacity_gib'] - m['headroom_gib']):.1%}"


if __name__ == "__main__":
    main()

"""rlplan from Python: load a scenario, price the plan run today, search the best plan, sweep
cluster sizes, and write the page to share — what `rlplan validate/evaluate/plan/sweep/report`
do, as objects (the models the CLI prints as JSON).

    python examples/api_example.py [OUT_FOLDER]
"""

from __future__ import annotations

import sys
from pathlib import Path

import planner
from planner.errors import RlplanError
from planner.report import render

HERE = Path(__file__).parent


def main(out: Path) -> None:
    # a path, a dict of the file's fields, or a Scenario; flags as keywords (the CLI's names)
    scenario = planner.load_scenario(HERE / "grpo-qwen2.5-7b.yaml")
    print(f"{scenario.algorithm} {scenario.actor.name} on {scenario.gpus_words()}")

    today = planner.evaluate(scenario, HERE / "plans" / "grpo-qwen2.5-7b-colocated.json")
    print(f"the plan run today: {today.iteration_time_s:.1f} s per step, "
          f"{today.tokens_per_s:,.0f} tokens/s")

    # a smaller run of the same recipe, so that the search and the sweep take seconds
    small = {"actor": "qwen2.5-0.5b", "prompts": 64, "response_len": 512,
             "max_response_len": 1024}
    best = planner.plan(scenario, nodes=1, time_limit=60, **small)
    print(f"best on 8 GPUs: {best.status}, {best.iteration_time_s:.2f} s per step, "
          f"bottleneck {best.explanation['bottleneck']}")
    for alternative in best.explanation["alternatives"]:
        print(f"  alternative: {alternative['summary']}")

    swept = planner.sweep(scenario, gpus=[2, 4, 8], jobs=1, time_limit=120, **small)
    for row in swept.rows:
        print(f"  {row.gpus} GPUs: {row.status}, "
              + (f"{row.tokens_per_s:,.0f} tokens/s" if row.feasible else row.reason or ""))

    try:  # the one error type (InputError, InfeasibleError, OutOfTime), the CLI's message
        planner.load_scenario(scenario, samples=1)
    except RlplanError as exc:
        print(f"one sample per prompt: {exc}")

    page = out / "plan.html"
    page.write_text(render(best.model_dump(mode="json"), swept.model_dump(mode="json")))
    print(f"wrote {page}")


if __name__ == "__main__":  # the sweep's workers are spawned: scripts need this guard
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))

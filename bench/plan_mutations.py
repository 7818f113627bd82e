"""Plans off the search's grid against the proven optimum (issue 25: every plan `evaluate`
accepts lies in the space the optimum is proven over): for each scenario of a small grid,
`rlplan plan`'s proven optimum, then `--mutations` plans drawn from it by
`tests/plan_mutations.py` (layouts changed to degrees, stages, memory settings, KV sizes and
caps the search may not enumerate; the actor's generation moved to a group of a random size),
each priced by `evaluate`. It prints, per scenario, how many `evaluate` accepted, the fastest of
those against the optimum, and how many beat it (the claim says none), then the refusals most
often met (each a clear one-line error: nothing else may come out of `evaluate`).

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
from tests.plan_mutations import tally

WORKLOAD = {"workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
            "workload.prompt_len": 256, "workload.response_len": 1024,
            "workload.max_response_len": 4096, "search.max_staleness": 1}
A100S = {"cluster.gpu": "a100-sxm-40gb", "cluster.nodes": 1, "cluster.gpus_per_node": 4}
H100S = {"cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 8}
SCENARIOS = {
    "grpo 1.5b 4×a100-40gb": {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b",
                              "models.reference": "actor", **WORKLOAD, **A100S},
    "ppo 1.5b+0.5b 4×a100-40gb": {"algorithm": "ppo", "models.actor": "qwen2.5-1.5b",
                                  "models.reference": "actor", "models.critic": "qwen2.5-0.5b",
                                  "models.reward": "qwen2.5-0.5b", **WORKLOAD, **A100S},
    "grpo 7b 8×h100": {"algorithm": "grpo", "models.actor": "qwen2.5-7b",
                       "models.reference": "actor", **WORKLOAD, **H100S},
    "grpo 1.5b 2×4×a100-40gb": {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b",
                                "models.reference": "actor", **WORKLOAD, **A100S,
                                "cluster.nodes": 2},
    "grpo qwen3-30b-a3b 8×h100": {"algorithm": "grpo", "models.actor": "qwen3-30b-a3b",
                                  "models.reference": "actor", **WORKLOAD, **H100S},
    "dpo 1.5b 4×a100-40gb": {"algorithm": "dpo", "models.actor": "qwen2.5-1.5b",
                             "models.reference": "actor", "workload.prompts_per_step": 32,
                             "workload.prompt_len": 256, "workload.response_len": 512,
                             **A100S},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    refused: Counter = Counter()
    accepted = faster = 0
    print(f"{'scenario':30} {'optimum':>9} {'accepted':>9} {'fastest':>9} {'vs opt':>8} "
          f"{'faster':>7}")
    for name, flags in SCENARIOS.items():
        sc = load_scenario(None, flags)
        best = plan(sc, explain=False)
        out = tally(sc, best, random.Random(args.seed), args.mutations)
        refused.update(out.refused)
        accepted += out.accepted
        faster += len(out.faster)
        least = out.least_s if out.least_s is not None else float("nan")
        print(f"{name:30} {best.iteration_time_s:8.3f}s {out.accepted:9,} {least:8.3f}s "
              f"{least / best.iteration_time_s - 1:+8.2%} {len(out.faster):7}")
        for seconds, data in out.faster[:3]:
            print(f"    faster: {seconds:.3f} s {data}")
    print(f"\n{len(SCENARIOS)} scenarios, {len(SCENARIOS) * args.mutations:,} plans drawn, "
          f"{accepted:,} priced by evaluate, {faster} faster than their proven optimum "
          "(the claim: none).")
    print("refusals met most often:")
    for text, count in refused.most_common(8):
        print(f"  {count:6,}  {text} …")
    print(f"(bench wall time {time.monotonic() - started:.0f} s)")
    return 1 if faster else 0


if __name__ == "__main__":
    raise SystemExit(main())

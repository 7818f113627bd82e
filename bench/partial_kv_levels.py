"""How many of the KV ladder's largest sizes the search should price under partial rollouts
(`planner.search.kv.PARTIAL_KV_LEVELS`): each scenario of a grid planned with the shipped
count and with `--against N`, their optima side by side. Partial rollouts have no bound
candidates for the sizes between those priced (`kv.kv_bounds`), so a rollout shape whose
priced sizes fit no group beside the training state is left out of co-located plans.

    python bench/partial_kv_levels.py                 # against 2 (about 1.5 minutes)
    python bench/partial_kv_levels.py --against 99    # against every level of the ladder
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.errors import InfeasibleError
from planner.search import kv
from planner.search.solve import plan
from planner.specs.scenario import load_scenario

MODELS = ("qwen2.5-1.5b", "qwen2.5-7b", "qwen3-30b-a3b")
GPUS = ("h100-sxm", "a100-sxm-80gb")
RESPONSES = ((1024, 2048), (512, 4096))  # mean, max


def scenarios() -> dict[str, dict]:
    """GRPO and PPO (a 0.5B critic and reward model), one node of 8, one step off-policy."""
    out = {}
    for model, gpu, (mean, most), algorithm in itertools.product(MODELS, GPUS, RESPONSES,
                                                                 ("grpo", "ppo")):
        flags = {"algorithm": algorithm, "models.actor": model, "models.reference": "actor",
                 "workload.prompts_per_step": 32, "workload.samples_per_prompt": 4,
                 "workload.prompt_len": 512, "workload.response_len": mean,
                 "workload.max_response_len": most, "cluster.gpu": gpu, "cluster.nodes": 1,
                 "cluster.gpus_per_node": 8, "search.max_staleness": 1}
        if algorithm == "ppo":
            flags |= {"models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b"}
        out[f"{algorithm} {model} {gpu} {mean}/{most}"] = flags
    return out


def optimum(flags: dict, levels: int) -> float | None:
    kv.PARTIAL_KV_LEVELS = levels
    try:
        return plan(load_scenario(None, flags), explain=False).iteration_time_s
    except InfeasibleError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=int, default=2, metavar="N",
                        help="the other count of levels (default 2, the count before 2026-12-03)")
    args = parser.parse_args()
    shipped, started = kv.PARTIAL_KV_LEVELS, time.monotonic()
    better = worse = counted = 0
    print(f"{'scenario':45} {f'{args.against} levels':>10} {f'{shipped} levels':>10}  change")
    for name, flags in scenarios().items():
        theirs, ours = optimum(flags, args.against), optimum(flags, shipped)
        if theirs is None or ours is None:
            print(f"{name:45} {'no plan' if theirs is None else f'{theirs:9.3f}s':>10} "
                  f"{'no plan' if ours is None else f'{ours:9.3f}s':>10}")
            continue
        counted += 1
        change = ours / theirs - 1
        better += change < -1e-6
        worse += change > 1e-6
        print(f"{name:45} {theirs:9.3f}s {ours:9.3f}s  {change:+.1%}")
    print(f"\n{counted} scenarios: {better} faster with {shipped} levels than with "
          f"{args.against}, {worse} slower (bench wall time {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

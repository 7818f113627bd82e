"""`rlplan plan` against each inter-model option solved alone, over a grid of one-node scenarios.

For GRPO and PPO (a 1.5B critic and reward model beside the actor), Qwen2.5 7B / 14B / 32B
actors, A100-40GB and H100 nodes of 4 or 8 GPUs, responses of 256 or 1,024 tokens (at most
twice that) and 64 or 256 prompts × 8: `plan` (staleness 0, `explain=False`), and each of its
options solved alone in a fresh space (`cpsat.solve`, 60 s). It prints per scenario the plan's
status, its score and the least optimum of the options alone, and counts:
- plans not proven optimal (status FEASIBLE: some option cut short, its bound under the plan);
- plans scoring above the options' least optimum (the search missed it: none expected);
- plans scoring below it (allowed: an option in `plan` can use a KV size another option priced,
  faster than the size that fits where it sits when that one preempts, a size an option solved
  alone proves nothing about: README "What the optimum is proven over").

    python bench/plan_vs_options.py            # 96 scenarios, about 10 minutes
    python bench/plan_vs_options.py --quick    # GRPO only, 8-GPU nodes (24)
"""

from __future__ import annotations

import argparse
import itertools
import time

from planned import planned  # bench/planned.py

from planner.search import cpsat
from planner.search.option import options
from planner.search.space import build_space
from planner.specs.scenario import load_scenario


def grid(quick: bool):
    algos = ["grpo"] if quick else ["grpo", "ppo"]
    per_node = [8] if quick else [4, 8]
    for algo, actor, gpu, resp, prompts, per in itertools.product(
            algos, ["qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b"], ["a100-sxm-40gb", "h100-sxm"],
            [256, 1024], [64, 256], per_node):
        flags = {"algorithm": algo, "models.actor": actor, "models.reference": "actor",
                 "workload.prompt_len": 256, "workload.response_len": resp,
                 "workload.max_response_len": 2 * resp, "workload.samples_per_prompt": 8,
                 "workload.prompts_per_step": prompts, "cluster.gpu": gpu, "cluster.nodes": 1,
                 "cluster.gpus_per_node": per}
        if algo == "ppo":
            flags |= {"models.critic": "qwen2.5-1.5b", "models.reward": "qwen2.5-1.5b"}
        yield f"{algo} {actor} {gpu}×{per} resp {resp} prompts {prompts}", flags


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    counts = dict.fromkeys(["scenarios", "infeasible", "not proven", "above", "below"], 0)
    walls = []
    print(f"{'scenario':52} {'status':10} {'plan ms':>10} {'alone ms':>10} {'wall s':>7}")
    for name, flags in grid(args.quick):
        sc = load_scenario(None, flags)
        counts["scenarios"] += 1
        started = time.monotonic()
        if (chosen := planned(sc, name, 52)) is None:
            counts["infeasible"] += 1
            continue
        walls.append(time.monotonic() - started)
        got, status = chosen.search["objective_ms"], chosen.search["status"]
        alone = [cpsat.solve(build_space(sc, staleness=o.staleness, fusion=o.fusion,
                                         shared=o.shared, swap=o.swap,
                                         overlap_sync=o.overlap_sync, partial=o.partial),
                             60, pin=False) for o in options(sc, 0, False)]
        least = min((r.objective for r in alone if r.status == "OPTIMAL"), default=None)
        counts["not proven"] += status != "OPTIMAL"
        counts["above"] += least is not None and got > least
        counts["below"] += least is not None and got < least
        print(f"{name:52} {status:10} {got:>10,} {least or 0:>10,} {walls[-1]:7.1f}")
    walls.sort()
    print(f"\n{counts['scenarios']} scenarios ({counts['infeasible']} infeasible): "
          f"{counts['not proven']} plans not proven optimal, {counts['above']} scoring above "
          f"the options' least optimum alone, {counts['below']} below it (a KV size another "
          f"option priced); plan wall time median {walls[len(walls) // 2]:.1f} s, "
          f"worst {walls[-1]:.1f} s")


if __name__ == "__main__":
    main()

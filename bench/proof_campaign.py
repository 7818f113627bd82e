"""How far the search's proof reaches over KV cache sizes: plans `evaluate` accepts, priced
against the proven optimum (issue 25: every plan `evaluate` accepts should lie in the space the
optimum is proven over).

For each scenario of a grid (GRPO on one node of 8 or 4 GPUs, memory-tight enough that the KV
cache decides the rollout; `--ppo`: PPO with a 1.5B critic and reward model), `rlplan plan`'s
proven optimum, then each inter-model option's own optimum (`cpsat.solve`, over the candidates
kept counting host memory, which `plan` prunes without where it cannot bind), its rollout given
other KV sizes: left out (`evaluate` gives the largest that fits where it sits) and `--points`
sizes from one longest sequence up to 2% past its own. It prints, per option, the fastest of
those against the option's optimum, and counts the plans faster than the scenario's proven
optimum (the claim the plan makes) and the plans faster with their own KV cache left out, and
`--random` random plans of each partial-rollout option priced with the KV cache left out
against it. The search covers a size left out (`refine.py`; under partial rollouts for the
options `plan` proves, `settle.py`), but not every size one writes in: the rollout model is not
monotone in the KV cache (preemptions; partial rollouts' steady state), so a size between those
priced can be faster than the priced one above it.

    python bench/proof_campaign.py              # the grid, 30 sizes per plan (about 2.5 minutes)
    python bench/proof_campaign.py --points 10 --quick
    python bench/proof_campaign.py --ppo         # PPO's grid (36 scenarios)
    python bench/proof_campaign.py --nodes 2     # two nodes of 4 GPUs (27 scenarios; --ppo 18)
    python bench/proof_campaign.py --certify     # and whether a proof over written-in sizes holds

`--certify` asks, for each option without partial rollouts, whether its plans with any KV size
written in are provably no faster than the scenario's proven optimum (`planner/search/certify.py`,
what `rlplan plan` reports as `search.kv_sizes_proven`): "not proven" is a bound under the
optimum, not a faster plan (the `--points` sizes say whether one is).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planned import planned  # bench/planned.py

from planner.cost.iteration import evaluate
from planner.errors import InfeasibleError, InputError
from planner.plan import PlanInput
from planner.search import cpsat
from planner.search.candidate import MS
from planner.search.certify import certify
from planner.search.deadline import Deadline
from planner.search.option import options
from planner.search.solve import to_plan_input
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_proof import random_choices

SLACK_S = 8e-3  # candidates are priced in whole ms, rounded up: a few ms per plan
MODELS = ("qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b")
PPO_ACTORS = MODELS[:2]  # beside a 1.5B critic and reward model (--ppo)
GPUS = ("h100-sxm", "a100-sxm-40gb", "a100-sxm-80gb")
LENGTHS = ((1024, 2048), (2048, 8192), (512, 4096))  # mean and longest response
PER_NODE = (8, 4)


def scenario(model: str, gpu: str, mean: int, longest: int, per_node: int, ppo: bool = False,
             nodes: int = 1):
    roles = ({"models.critic": MODELS[0], "models.reward": MODELS[0]} if ppo else {})
    return load_scenario(None, {
        "algorithm": "ppo" if ppo else "grpo", "models.actor": model,
        "models.reference": "actor", **roles,
        "workload.prompts_per_step": 128, "workload.samples_per_prompt": 4,
        "workload.prompt_len": 512, "workload.response_len": mean,
        "workload.max_response_len": longest, "workload.mini_batches": 2,
        "cluster.gpu": gpu, "cluster.nodes": nodes, "cluster.gpus_per_node": per_node,
        "search.max_staleness": 1})


def fastest(sc, p: PlanInput, points: int) -> tuple[float, float, int | None, int]:
    """(the plan's time, the fastest time over other KV sizes, the size giving it — None:
    left out —, how many sizes fit)."""
    own = evaluate(sc, p).iteration_time_s
    kv0 = p.layouts["actor"]["generation"].kv_cache_tokens or 0
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    sizes = [None, *sorted(set(np.linspace(longest, kv0 * 1.02, points).astype(int).tolist()))]
    best, at, fit = own, kv0, 0
    for kv in sizes:
        try:
            t = evaluate(sc, p.with_kv_cache(kv)).iteration_time_s
        except (InfeasibleError, InputError):  # does not fit beside the rest
            continue
        fit += 1
        if t < best:
            best, at = t, kv
    return own, best, at, fit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=30, help="KV sizes per plan")
    parser.add_argument("--quick", action="store_true", help="H100 only")
    parser.add_argument("--nodes", type=int, default=1,
                        help="nodes per scenario (2: nodes of 4 GPUs only, a rollout group "
                             "across nodes)")
    parser.add_argument("--ppo", action="store_true",
                        help="PPO: actors Qwen2.5-1.5B and 7B beside a 1.5B critic and reward "
                             "model, instead of GRPO")
    parser.add_argument("--random", type=int, default=12,
                        help="random plans per partial-rollout option, priced with the KV cache "
                             "left out")
    parser.add_argument("--certify", action="store_true",
                        help="whether the proof stretches to KV sizes written in (docstring)")
    args = parser.parse_args()
    rng = random.Random(0)
    started = time.monotonic()
    per_node = PER_NODE if args.nodes == 1 else PER_NODE[1:]
    grid = [(m, g, *lengths, n) for n in per_node for m in (PPO_ACTORS if args.ppo else MODELS)
            for g in GPUS[:1 if args.quick else None] for lengths in LENGTHS]
    beaten, plan_beaten, plans, drawn, drawn_beaten = 0, 0, 0, 0, 0
    worst = {"left out": (0.0, ""), "written in": (0.0, "")}
    certified = dict.fromkeys(("covered", "proven", "bound", "partial"), 0)
    print(f"{'scenario':42} {'option':58} {'its optimum':>11} {'fastest':>9} {'at KV':>10}")
    for m, g, mean, longest, n in grid:
        sc = scenario(m, g, mean, longest, n, args.ppo, args.nodes)
        nodes = f"{args.nodes}×" if args.nodes > 1 else ""
        name = f"{m} {nodes}{n}×{g} responses {mean}/{longest}"
        if (chosen := planned(sc, name, 42)) is None:
            continue
        proven = chosen.iteration_time_s
        left_out = evaluate(sc, PlanInput.model_validate(chosen.model_dump(mode="json"))
                            .with_kv_cache(None)).iteration_time_s
        plan_beaten += left_out < proven - SLACK_S
        for opt in options(sc, 1, False):
            space = build_space(sc, staleness=opt.staleness, fusion=opt.fusion, swap=opt.swap,
                                overlap_sync=opt.overlap_sync, partial=opt.partial,
                                host_front=True)
            if opt.partial:  # random plans of it, left to the KV cache that fits where they sit
                for ch in itertools.islice(random_choices(space, rng), args.random):
                    try:
                        t = evaluate(sc, to_plan_input(space, ch, opt).with_kv_cache(None))
                    except (InfeasibleError, InputError):
                        continue
                    drawn += 1
                    drawn_beaten += t.iteration_time_s < proven - SLACK_S
            found = cpsat.solve(space, 60)
            if found.choice is None:
                continue
            if args.certify:
                held = "partial" if opt.partial else certify(
                    space, min(found.objective, int(np.ceil(proven / MS))), found.objective,
                    Deadline.after(60))
                certified[held] += 1
                if held == "bound":
                    print(f"{name:42} {opt.describe():58} a size written in: {held}")
            own, best, at, fit = fastest(sc, to_plan_input(space, found.choice, opt),
                                         args.points)
            plans += fit
            beaten += best < proven - SLACK_S
            gain = (own - best) / own
            kind = "left out" if at is None else "written in"
            if gain > worst[kind][0]:
                worst[kind] = (gain, f"{name}, {opt.describe()}")
            if best < own - SLACK_S:
                beats = (f"  beats the plan's {proven:.2f}s" if best < proven - SLACK_S
                         else "")
                print(f"{name:42} {opt.describe():58} {own:10.2f}s {best:8.2f}s "
                      f"{'left out' if at is None else f'{at:,}':>10} ({-gain:+.1%}){beats}")
    print(f"\n{len(grid)} scenarios, {plans:,} plans priced. The claim of `rlplan plan`: "
          f"options with a KV size at which their plan beats the scenario's proven optimum: "
          f"{beaten}; plans faster with their own KV cache left out: {plan_beaten}; of "
          f"{drawn:,} random partial-rollout plans with the KV cache left out, faster than "
          f"their scenario's proven optimum: {drawn_beaten}.")
    print("An option's optimum as `cpsat.solve` proves it over the sizes priced (before "
          "`planner/search/settle.py` settles the ones `plan` proves) against its own plan at "
          f"another KV size, the largest gain: KV left out {worst['left out'][0]:.2%} "
          f"({worst['left out'][1] or 'none'}); a size written in "
          f"{worst['written in'][0]:.2%} ({worst['written in'][1] or 'none'}).")
    if args.certify:
        print(f"Sizes written in (--certify), of the options solved: the priced proof covers "
              f"them (no priced size preempts) in {certified['covered']}; proven with the "
              f"bounds allowed in {certified['proven']}; a bound under the scenario's optimum "
              f"in {certified['bound']}; partial rollouts, no bound: {certified['partial']}.")
    print(f"(bench wall time {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

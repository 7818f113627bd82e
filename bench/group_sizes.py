"""Group sizes against the search's proven optimum (issue 25's "every plan `evaluate` accepts
lies in the space the optimum is proven over").

`evaluate` accepts a group of any number of GPUs; the search offers the sizes of
`planner.search.layouts.slot_sizes`. For each scenario of a grid (GRPO and PPO; Qwen2.5 0.5B,
1.5B and 7B actors on H100 and A100-40GB; 48 or 96 prompts × 8 — batches three divides, so a
data-parallel degree of 3 or 6 runs whole micro-batches — up to one step off-policy; one node
of 8 GPUs, or N with `--nodes N`), `rlplan plan`'s optimum against the optimum of the same
search offered every group size from 1 to the whole cluster: it prints both and counts the
scenarios where every size does better than the whole-ms rounding.

    python bench/group_sizes.py              # 48 one-node scenarios (~3 min)
    python bench/group_sizes.py --nodes 9 --only "staleness 1" --only '!7b'   # past 64 GPUs

On up to 64 GPUs (`layouts.EVERY_GPU_COUNT`) the search offers every size, so the two searches
are one: the figures the former menus gave there (one, two and three nodes) are in that
constant's docstring, each from this script run at the revision before the menu grew.
"""

from __future__ import annotations

import argparse
import itertools

from planned import ROUNDING_S, planned  # bench/planned.py

import planner.search.space as space_module
from planner.search.layouts import slot_sizes
from planner.specs.scenario import load_scenario


def every_size(total: int, per_node: int, every: int = 0) -> list[int]:
    """Every group size, whatever `every` asks (the what-ifs' too)."""
    return list(range(1, total + 1))


def scenarios(nodes: int) -> list[tuple[str, dict]]:
    out = []
    for algorithm, actor, gpu, prompts, staleness in itertools.product(
            ["grpo", "ppo"], ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"],
            ["h100-sxm", "a100-sxm-40gb"], [48, 96], [0, 1]):
        flags = {"algorithm": algorithm, "models.actor": actor, "models.reference": "actor",
                 "workload.prompts_per_step": prompts, "workload.samples_per_prompt": 8,
                 "workload.prompt_len": 512, "workload.response_len": 1024,
                 "workload.max_response_len": 2048, "cluster.gpu": gpu, "cluster.nodes": nodes,
                 "cluster.gpus_per_node": 8, "search.max_staleness": staleness}
        if algorithm == "ppo":
            flags |= {"models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b"}
        name = f"{algorithm} {actor.split('-')[1]} {gpu} {prompts}x8 staleness {staleness}"
        out.append((name, flags))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only the scenarios whose name holds TEXT (each --only one more "
                        "condition, all must hold; a leading ! negates: --only '!7b')")
    args = parser.parse_args()
    beaten = total = 0
    worst = (0.0, "")
    for name, flags in scenarios(args.nodes):
        if not all((t[1:] not in name) if t.startswith("!") else (t in name)
                   for t in args.only):
            continue
        space_module.slot_sizes = slot_sizes
        if (shipped := planned(load_scenario(None, flags), name, 46)) is None:
            continue
        space_module.slot_sizes = every_size
        every = planned(load_scenario(None, flags), name, 46)
        total += 1
        gain = shipped.iteration_time_s - every.iteration_time_s
        beaten += gain > ROUNDING_S
        worst = max(worst, (gain / shipped.iteration_time_s,
                            f"{name}: {[g.gpus for g in every.groups]}"))
        print(f"{name:46} {shipped.iteration_time_s:8.2f} s {[g.gpus for g in shipped.groups]}"
              f"  every size {every.iteration_time_s:8.2f} s {[g.gpus for g in every.groups]}"
              + (f"  beaten by {gain / shipped.iteration_time_s:.1%}" if gain > ROUNDING_S
                 else ""), flush=True)
    print(f"\n{beaten} of {total} optima beaten by a plan with group sizes the search did not "
          f"offer; the largest gain {worst[0]:.1%} ({worst[1] if worst[0] > 0 else 'none'})")


if __name__ == "__main__":
    main()

"""Micro-batch sizes against the search's proven optimum (issue 25's "every plan `evaluate`
accepts lies in the space the optimum is proven over").

`evaluate` accepts a training or forward micro-batch that divides its data-parallel rank's
share (`legality.micro_batch_sizes`), and the search draws every such size
(`planner/search/layouts.py`). For each scenario of a one-node grid (GRPO: Qwen2.5 0.5B /
1.5B / 7B / 14B / 32B actors, H100 and A100-40GB, responses of 256 or 1,024 tokens, 64 or
256 prompts × 8), `rlplan plan`'s optimum, then its plan with one training or assessment
layout's micro-batch changed to every other size `evaluate` accepts: it prints each
scenario's changes that fit and are faster than the optimum by more than its whole-ms
rounding, and counts them.

    python bench/micro_batches.py     # 40 scenarios, a few minutes
"""

from __future__ import annotations

import itertools

from planned import Tally, planned  # bench/planned.py

from planner.cost.legality import interleaved_micro_batch_sizes, rank_share
from planner.plan import PlanInput
from planner.specs.scenario import load_scenario


def changes(sc, best):
    """(label, plan) for each training or forward layout of `best` with its micro-batch
    changed to every other size `evaluate` accepts."""
    given = PlanInput.model_validate(best.model_dump(mode="json"))
    for role, stages in given.layouts.items():
        for stage, lay in stages.items():
            if stage == "generation":
                continue
            for mb in interleaved_micro_batch_sizes(rank_share(sc, stage, lay.dp), lay.pp,
                                                    lay.vp):
                if mb != lay.micro_batch:
                    yield (f"{role}.{stage} {lay.micro_batch} -> {mb}",
                           given.with_layout(role, stage, micro_batch=mb))


def main() -> None:
    tally = Tally(44)
    for actor, gpu, resp, prompts in itertools.product(
            ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b"],
            ["h100-sxm", "a100-sxm-40gb"], [256, 1024], [64, 256]):
        sc = load_scenario(None, {
            "algorithm": "grpo", "models.actor": actor, "models.reference": "actor",
            "workload.prompt_len": 256, "workload.response_len": resp,
            "workload.max_response_len": resp, "workload.samples_per_prompt": 8,
            "workload.prompts_per_step": prompts, "cluster.gpu": gpu, "cluster.nodes": 1,
            "cluster.gpus_per_node": 8})
        name = f"{actor} {gpu} resp {resp} prompts {prompts}"
        if (best := planned(sc, name, 44)) is not None:
            tally.check(sc, best, name, changes(sc, best))
    print("\n" + tally.summary("another micro-batch size"))


if __name__ == "__main__":
    main()

"""Caps on running sequences against the search's proven optimum (issue 25's "every plan
`evaluate` accepts lies in the space the optimum is proven over").

`evaluate` accepts any `max_num_seqs` for a rollout layout. Without partial rollouts a cap
above the replica's share changes nothing but the sampler's memory, and one below it runs
fewer sequences at once; under partial rollouts the next step's prompts are always queued, so
a cap above the share fills too, and the search prices caps above it
(`planner.search.kv.concurrency_caps`). For each scenario of a one-node grid (GRPO and PPO,
Qwen2.5-1.5B actor on A100-40GB, 2/4/8 GPUs, 4/8/16 samples of 16 prompts, responses of
1,024 up to 4,096, staleness up to 1 — the optima with partial rollouts among them — and
7B/14B actors on 8 GPUs), `rlplan plan`'s optimum, then its plan with the rollout's cap set
to each of 13 sizes from a tenth of the share to 16 times it (up to 1,024), its KV cache as
planned and left out (the largest that fits where it sits): it prints each scenario's
changes that fit and are faster than the optimum by more than its whole-ms rounding, and
counts them.

    python bench/concurrency_caps.py     # 21 scenarios, about a minute
"""

from __future__ import annotations

import itertools

from planned import Tally, planned  # bench/planned.py

from planner.cost.rollout_stage import DEFAULT_MAX_NUM_SEQS
from planner.plan import PlanInput
from planner.specs.scenario import load_scenario

SHARE_FACTORS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.25, 1.5, 2, 3, 4, 6, 8, 16)


def scenarios() -> list[tuple[str, dict]]:
    small = {"models.actor": "qwen2.5-1.5b", "models.reference": "actor",
             "workload.prompts_per_step": 16, "workload.prompt_len": 256,
             "workload.response_len": 1024, "workload.max_response_len": 4096,
             "cluster.gpu": "a100-sxm-40gb", "cluster.nodes": 1, "search.max_staleness": 1}
    out = []
    for algorithm, gpus, samples in itertools.product(["grpo", "ppo"], [2, 4, 8], [4, 8, 16]):
        flags = {**small, "algorithm": algorithm, "cluster.gpus_per_node": gpus,
                 "workload.samples_per_prompt": samples}
        if algorithm == "ppo":
            flags |= {"models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b"}
        out.append((f"{algorithm} 1.5B {gpus} GPUs x{samples}", flags))
    for actor, gpu in [("qwen2.5-7b", "h100-sxm"), ("qwen2.5-14b", "h100-sxm"),
                       ("qwen2.5-7b", "a100-sxm-40gb")]:
        out.append((f"grpo {actor.split('-')[1].upper()} 8 {gpu}", {
            "algorithm": "grpo", "models.actor": actor, "models.reference": "actor",
            "workload.prompts_per_step": 128, "workload.samples_per_prompt": 4,
            "workload.prompt_len": 512, "workload.response_len": 1024,
            "workload.max_response_len": 2048, "cluster.gpu": gpu, "cluster.nodes": 1,
            "cluster.gpus_per_node": 8, "search.max_staleness": 1}))
    return out


def changes(sc, best):
    """(label, plan) for `best` with its rollout's cap at each of `SHARE_FACTORS` times the
    replica's share, its KV cache as planned and left out."""
    given = PlanInput.model_validate(best.model_dump(mode="json"))
    gen = given.layouts["actor"]["generation"]
    share = -(-len(sc.response_lengths) // gen.dp)
    caps = sorted({min(DEFAULT_MAX_NUM_SEQS, max(1, int(share * f))) for f in SHARE_FACTORS})
    for cap, kv in itertools.product(caps, (gen.kv_cache_tokens, None)):
        yield (f"max_num_seqs {cap}, KV {kv or 'left out'}",
               given.with_layout("actor", "generation", max_num_seqs=cap, kv_cache_tokens=kv))


def main() -> None:
    tally, partial = Tally(34), 0
    for name, flags in scenarios():
        sc = load_scenario(None, flags)
        if (best := planned(sc, name, 34)) is None:
            continue
        partial += best.inter_model.partial_rollout
        mode = "partial" if best.inter_model.partial_rollout else "whole"
        cap = best.layouts["actor"]["generation"].max_num_seqs or "share"
        tally.check(sc, best, name, changes(sc, best), f"{mode:7} cap {cap:>5}  ")
    print("\n" + tally.summary("a cap") + f"; {partial} optima with partial rollouts")


if __name__ == "__main__":
    main()

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

from planned import planned  # bench/planned.py

from planner.cost.iteration import evaluate
from planner.cost.rollout_stage import DEFAULT_MAX_NUM_SEQS
from planner.errors import InfeasibleError
from planner.plan import PlanInput
from planner.specs.scenario import load_scenario

ROUNDING_S = 5e-3
"""Each task's candidate is priced in whole ms, rounded up: the optimum's score can stand up to
that much above `evaluate`'s price of the same plan (`tests/test_proof.py`'s slack)."""

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


def faster(sc, best) -> tuple[list[tuple[int, int | None, float]], int]:
    """(cap, KV size or None: left out, seconds saved) of the changes that fit and are faster
    than `best`, and how many changes fit."""
    given = PlanInput.model_validate(best.model_dump(mode="json"))
    gen = given.layouts["actor"]["generation"]
    share = -(-len(sc.response_lengths) // gen.dp)
    caps = sorted({min(DEFAULT_MAX_NUM_SEQS, max(1, int(share * f))) for f in SHARE_FACTORS})
    out, fitted = [], 0
    for cap, kv in itertools.product(caps, (gen.kv_cache_tokens, None)):
        try:
            t = evaluate(sc, given.with_layout("actor", "generation", max_num_seqs=cap,
                                               kv_cache_tokens=kv))
        except InfeasibleError:
            continue
        fitted += 1
        if t.iteration_time_s < best.iteration_time_s - ROUNDING_S:
            out.append((cap, kv, best.iteration_time_s - t.iteration_time_s))
    return out, fitted


def main() -> None:
    beaten = total = priced = partial = 0
    worst = (0.0, "")
    for name, flags in scenarios():
        sc = load_scenario(None, flags)
        if (best := planned(sc, name, 34)) is None:
            continue
        total += 1
        gen = best.layouts["actor"]["generation"]
        partial += best.inter_model.partial_rollout
        found, fitted = faster(sc, best)
        priced += fitted
        beaten += bool(found)
        for cap, kv, saved in found:
            worst = max(worst, (saved / best.iteration_time_s,
                                f"{name}: max_num_seqs {cap}, KV {kv or 'left out'}"))
        top = max(found, key=lambda f: f[2], default=None)
        mode = "partial" if best.inter_model.partial_rollout else "whole"
        print(f"{name:34} {best.iteration_time_s:8.2f} s  {mode:7} cap "
              f"{gen.max_num_seqs or 'share':>5}  " + (
                  "none faster" if top is None else
                  f"{len(found)} faster, best max_num_seqs {top[0]}: -{top[2]:.2f} s"))
    print(f"\n{beaten} of {total} optima ({partial} with partial rollouts) beaten by a cap "
          f"`evaluate` accepts ({priced:,} changed plans that fit priced); the largest gain "
          f"{worst[0]:.2%} ({worst[1] or 'none'})")


if __name__ == "__main__":
    main()

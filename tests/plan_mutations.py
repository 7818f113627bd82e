"""Plans drawn off the search's grid, priced against its proven optimum (issue 25: every plan
`evaluate` accepts lies in the space the optimum is proven over).

A mutation takes the proven plan and either changes one to three fields of one of its layouts
to values the search may not enumerate — tp 3 or 6, pp 3, cp 3, vp, uneven pipeline stages,
ZeRO, micro-batch, recomputation, offload, expert parallelism, a KV cache size or a cap on
running sequences written in — or moves the actor's generation to a group of its own of a
random size, the other tasks on a group of another. `evaluate` prices what it accepts; none of
those may beat the optimum, and nothing but a refusal (exit 2) or infeasibility (exit 3) may
come out of it. Shared by `tests/test_plan_mutations.py` and `bench/plan_mutations.py`, with
the scenarios they run (`SCENARIOS`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from planner.errors import InfeasibleError, InputError
from planner.plan import Plan, PlanInput
from planner.search.scope import evaluated_plan
from planner.specs.files import validate_as
from planner.specs.scenario import Scenario

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

DEGREES = (1, 2, 3, 4, 6, 8)
CHANGES = ("tp", "pp", "cp", "vp", "stages", "zero", "micro_batch", "checkpointing", "offload",
           "ep", "kv_cache_tokens", "max_num_seqs")
SLACK_S = 8e-3
"""The search scores candidates in whole ms, each rounded up (a few ms per plan,
`bench/proof_campaign.py` likewise): a plan is faster than the optimum past this."""


@dataclass
class Tally:
    """What `evaluate` made of the mutations: how many it priced, the least time among them,
    the plans faster than the optimum, and its refusals by their first words."""

    accepted: int = 0
    inside: int = 0  # of those, plans `evaluate` says lie in the search's space
    least_s: float | None = None
    faster: list[tuple[float, dict]] = field(default_factory=list)
    refused: Counter = field(default_factory=Counter)
    outside: Counter = field(default_factory=Counter)  # why the others lie outside, by words


def _layout_change(data: dict, rng: random.Random) -> None:
    """One to three fields of one layout of `data` (a plan's groups, layouts, inter_model)."""
    role = rng.choice(sorted(data["layouts"]))
    stage = rng.choice(sorted(data["layouts"][role]))
    lay = data["layouts"][role][stage]
    gpus = next(g["gpus"] for g in data["groups"] if g["name"] == lay["group"])
    for what in rng.sample(CHANGES, rng.randint(1, 3)):
        if what in ("tp", "pp", "cp"):  # a degree the group's GPUs hold, dp filling the rest
            rest = gpus // (lay["tp"] * lay["pp"] * lay["cp"] // lay[what])
            lay[what] = rng.choice([d for d in DEGREES if rest % d == 0])
            lay["dp"] = rest // lay[what]
            lay["sp"] = lay["tp"] > 1
        elif what == "vp":
            lay["vp"] = rng.randint(1, 4)
        elif what == "stages":
            lay["first_stage_layers"] = rng.choice([None, rng.randint(1, 40)])
            lay["last_stage_layers"] = rng.choice([None, rng.randint(1, 40)])
        elif what == "zero":
            lay["zero"] = rng.randint(0, 3)
        elif what == "micro_batch":
            lay["micro_batch"] = rng.choice([1, 2, 3, 4, 8, 16])
        elif what == "checkpointing":
            lay["recompute"] = rng.choice(["none", "selective", "full"])
        elif what == "offload":
            lay["offload"] = rng.choice(["none", "optimizer", "params", "both", "sleep"])
        elif what == "ep":
            lay["ep"] = rng.choice([1, 2, 4, 8])
            lay["etp"] = rng.choice([None, 1, lay["tp"]])
        elif what == "kv_cache_tokens" and stage == "generation":
            kv = lay.get("kv_cache_tokens") or 100_000
            lay["kv_cache_tokens"] = rng.choice([None, int(kv * rng.uniform(0.2, 1.5)),
                                                 rng.randint(2_000, 4_000_000)])
        elif what == "max_num_seqs" and stage == "generation":
            lay["max_num_seqs"] = rng.choice([None, rng.randint(1, 2048)])


def _own_group(data: dict, total: int, rng: random.Random) -> None:
    """The actor's generation on a group of its own of a random size, every other layout on a
    group of the rest (data parallelism filling each)."""
    rollout = rng.randint(1, total - 1)
    rest = rng.randint(1, total - rollout)
    data["groups"] = [{"name": "g0", "gpus": rest, "roles": []},
                      {"name": "g1", "gpus": rollout, "roles": ["actor"]}]
    for role, stages in data["layouts"].items():
        for stage, lay in stages.items():
            g, gpus = ("g1", rollout) if (role, stage) == ("actor", "generation") else ("g0", rest)
            lay.update(group=g, dp=gpus, tp=1, pp=1, cp=1, vp=1, sp=False, ep=1, etp=None,
                       first_stage_layers=None, last_stage_layers=None, kv_cache_tokens=None)
            if g == "g0" and role not in data["groups"][0]["roles"]:
                data["groups"][0]["roles"].append(role)
    data["inter_model"].update(placement=rng.choice(["partial", "disaggregated"]),
                               offload_during_generation=False, inter_stage_fusion=False)
    if rng.random() < 0.5:
        _layout_change(data, rng)


def mutations(sc: Scenario, best: Plan, rng: random.Random, n: int) -> Iterator[dict]:
    """`n` mutations of the proven plan `best` (module docstring), as plan JSON."""
    base = PlanInput.model_validate(best.model_dump()).model_dump()
    for _ in range(n):
        data = _copy(base)
        if "generation" in data["layouts"].get("actor", {}) and sc.total_gpus > 1 \
                and rng.random() < 0.3:
            _own_group(data, sc.total_gpus, rng)
        else:
            _layout_change(data, rng)
        yield data


def _copy(data: dict) -> dict:
    """A plan JSON's copy to change, each layout's recomputation as `recompute` alone."""
    return {"groups": [dict(g) for g in data["groups"]],
            "layouts": {role: {stage: {k: v for k, v in lay.items() if k != "checkpointing"}
                               for stage, lay in stages.items()}
                        for role, stages in data["layouts"].items()},
            "inter_model": dict(data["inter_model"])}


def _gist(why: str) -> str:
    """An `outside_search` line by its kind: its words up to the first number or colon."""
    words = why.split(": ", 1)[-1].split()
    return " ".join(w for w in words[:6] if not any(c.isdigit() for c in w))


def tally(sc: Scenario, best: Plan, rng: random.Random, n: int) -> Tally:
    """Each mutation priced by `evaluate` (as `rlplan evaluate` reads and prices a plan, with
    what puts it outside the search's space), against `best`."""
    out = Tally()
    for data in mutations(sc, best, rng, n):
        try:
            priced = evaluated_plan(sc, validate_as(PlanInput, data, "plan"))
        except (InputError, InfeasibleError) as exc:
            out.refused[" ".join(str(exc).split()[:4])] += 1
            continue
        seconds = priced.iteration_time_s
        out.accepted += 1
        why = priced.search["outside_search"]
        out.inside += not why
        out.outside.update(_gist(w) for w in why)
        out.least_s = seconds if out.least_s is None else min(out.least_s, seconds)
        if seconds < best.iteration_time_s - SLACK_S:
            out.faster.append((seconds, data))
    return out

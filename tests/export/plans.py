"""Small priced plans for the exporter tests, built by hand (no solver): a scenario, a layout,
`evaluate` + `to_plan`, and the plan JSON as `rlplan plan --out` writes it."""

from __future__ import annotations

import shlex
from typing import Any

from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.plan import PlanInput
from planner.specs.scenario import Scenario, load_scenario

BASE = {"models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 64,
        "workload.samples_per_prompt": 4, "workload.prompt_len": 256,
        "workload.response_len": 512, "workload.max_response_len": 1024,
        "workload.mini_batches": 2, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
        "cluster.gpus_per_node": 8}


FIVE_RANKS = {"workload.prompts_per_step": 80}
"""320 sequences per step: a whole share on each of 5 data-parallel ranks (a plan's micro-batches
divide its ranks' shares, `legality.micro_batch_sizes`)."""


def edited(plan: dict[str, Any], role: str, stage: str, **fields: Any) -> dict[str, Any]:
    """A priced plan JSON with one layout's fields changed by hand, unpriced (as a user might
    edit it before `rlplan export`, which does not price it again)."""
    plan["layouts"][role][stage].update(fields)
    return plan


def scenario(algorithm: str = "grpo", **changes: Any) -> Scenario:
    """A small scenario; `changes` are dotted scenario fields (e.g. models.critic)."""
    return load_scenario(None, {**BASE, "algorithm": algorithm, **changes})


def partial_scenario(algorithm: str = "grpo", **changes: Any) -> Scenario:
    """A scenario allowing one step off-policy: rlplan prices partial rollouts only then."""
    return scenario(algorithm, **{"search.max_staleness": 1, **changes})


def priced(sc: Scenario, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan JSON `rlplan evaluate --out` would write for this hand-written plan."""
    plan_in = PlanInput.model_validate(plan)
    return to_plan(sc, plan_in, evaluate(sc, plan_in)).model_dump(mode="json")


def layout(group: str = "g0", **degrees: Any) -> dict[str, Any]:
    return {"group": group, **degrees}


def colocated(gpus: int = 8, gen: dict | None = None, train: dict | None = None,
              ref: dict | None = None, **inter: Any) -> dict[str, Any]:
    """Actor (and reference) on one group: the hybrid-engine layout."""
    layouts = {"actor": {"generation": layout(**(gen or {"dp": gpus // 2, "tp": 2})),
                         "training": layout(**(train or {"dp": gpus, "zero": 3,
                                                         "micro_batch": 2}))},
               "reference": {"assessment": layout(**(ref or {"dp": gpus, "micro_batch": 4}))}}
    return {"groups": [{"name": "g0", "gpus": gpus}], "layouts": layouts,
            "inter_model": {"placement": "colocated", **inter}}


def ppo_disaggregated() -> dict[str, Any]:
    """PPO with Megatron-style training (TP 2 + SP) on g0 and rollout + reward model on g1."""
    train = {"dp": 4, "tp": 2, "sp": True, "zero": 1, "micro_batch": 2, "checkpointing": "full"}
    return {"groups": [{"name": "g0", "gpus": 8}, {"name": "g1", "gpus": 8}],
            "layouts": {"actor": {"generation": layout("g1", dp=4, tp=2),
                                  "training": layout(**train)},
                        "critic": {"training": layout(**train)},
                        "reference": {"assessment": layout(dp=8, micro_batch=4)},
                        "reward": {"assessment": layout("g1", dp=8, micro_batch=4)}},
            "inter_model": {"placement": "disaggregated"}}


def ppo_split(**inter: Any) -> dict[str, Any]:
    """PPO as OpenRLHF places it: actor + reference on g0, critic + reward on g1, rollout on g2."""
    train = {"dp": 8, "zero": 3, "micro_batch": 2}
    return {"groups": [{"name": n, "gpus": 8} for n in ("g0", "g1", "g2")],
            "layouts": {"actor": {"generation": layout("g2", dp=4, tp=2),
                                  "training": layout(**train)},
                        "critic": {"training": layout("g1", **train)},
                        "reference": {"assessment": layout(dp=8, micro_batch=4)},
                        "reward": {"assessment": layout("g1", dp=8, micro_batch=4)}},
            "inter_model": {"placement": "disaggregated", **inter}}


def ppo_rollout_apart(**inter: Any) -> dict[str, Any]:
    """PPO as verl places it off-policy: actor, critic and reference on g0 (the global pool),
    rollout on g1, reward model on g2."""
    train = {"dp": 8, "zero": 3, "micro_batch": 2}
    return {"groups": [{"name": n, "gpus": 8} for n in ("g0", "g1", "g2")],
            "layouts": {"actor": {"generation": layout("g1", dp=4, tp=2),
                                  "training": layout(**train)},
                        "critic": {"training": layout(**train)},
                        "reference": {"assessment": layout(dp=8, micro_batch=4)},
                        "reward": {"assessment": layout("g2", dp=8, micro_batch=4)}},
            "inter_model": {"placement": "disaggregated", **inter}}


def ppo_scenario(nodes: int = 2) -> Scenario:
    return scenario("ppo", **{"models.reward": "qwen2.5-0.5b", "models.critic": "qwen2.5-0.5b",
                              "cluster.nodes": nodes})


def dpo_plan(train: dict | None = None) -> dict[str, Any]:
    return {"groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"training": layout(**(train or {"dp": 8, "zero": 2,
                                                                  "micro_batch": 2}))},
                        "reference": {"assessment": layout(dp=8, micro_batch=2)}},
            "inter_model": {"placement": "colocated"}}


def command_words(script: str, module: str) -> list[str]:
    """The shell words after `module` in an exported script (comments dropped, "$@" dropped)."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)  # line continuations
    return [w for w in words[words.index(module) + 1:] if w != "$@"]


def overrides(script: str) -> dict[str, str]:
    """verl's `key=value` overrides."""
    words = command_words(script, "verl.trainer.main_ppo")
    return dict(w.split("=", 1) for w in words if not w.startswith("--"))


def flags(script: str, module: str) -> dict[str, str | None]:
    """OpenRLHF's `--flag [value]` words, flag → value (None for a switch)."""
    out: dict[str, str | None] = {}
    words = command_words(script, module)
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[word] = None if nxt is None or nxt.startswith("--") else nxt
    return out

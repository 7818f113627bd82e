"""What one step of a scenario processes, whatever the plan: its sequences and tokens, the
controller's host time on them, and what the step costs at a GPU-hour price."""

from __future__ import annotations

from planner.specs.scenario import Scenario
from planner.specs.workload import Family


def sequences(sc: Scenario) -> int:
    """Sequences each stage processes per step: B·K rollouts, 2B for DPO (chosen and
    rejected response of every pair), B for SFT."""
    w = sc.workload
    return 2 * w.prompts_per_step if sc.family is Family.DPO else sc.sequences_per_step


def generated_tokens_per_step(sc: Scenario) -> float:
    """Tokens a step generates: every rollout's mean response (0 for DPO and SFT)."""
    return 0.0 if sc.family.offline else sequences(sc) * sc.workload.response_len


def controller_seconds(sc: Scenario) -> float:
    """Host seconds a step spends off the GPUs on the responses it generates: the single
    controller's processing and the rule-based reward, `runtime.controller_us_per_token` per
    generated token. A synchronous step waits for it; with staleness ≥ 1 it runs beside the
    groups' work (`evaluate`)."""
    return sc.runtime.controller_us_per_token * 1e-6 * generated_tokens_per_step(sc)


def cost_per_step(iteration_time_s: float, gpus: int, price_per_gpu_hour: float | None
                  ) -> float | None:
    """USD of one step on `gpus` GPUs at an hourly price per GPU (None: no price)."""
    if price_per_gpu_hour is None:
        return None
    return iteration_time_s * gpus * price_per_gpu_hour / 3600


def tokens_per_step(sc: Scenario) -> float:
    """Tokens a step processes: every sequence's prompt and mean response."""
    return sequences(sc) * sc.workload.seq_len

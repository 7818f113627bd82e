"""Algorithm and workload: which RL algorithm, which roles it needs, and the batch shape.

The variants are the practical ones of FORMULAS.md §2: each maps onto a family (PPO, GRPO or
DPO) whose stage structure the cost model prices, plus the models it does or does not need.
SFT (DESIGN.md) is the actor's training stage alone: prompts_per_step sequences of
prompt_len + response_len tokens per optimizer step, no generation, reference or reward.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.specs import bounds as lim
from planner.specs.lengths import ResponseLengthsInput


class Family(StrEnum):
    PPO = "ppo"  # actor + critic (+ reward, reference): GAE advantages
    GRPO = "grpo"  # actor only, group-relative advantages over K samples per prompt
    DPO = "dpo"  # offline preference pairs: no generation stage
    SFT = "sft"  # supervised: the actor's training stage alone on offline sequences

    @property
    def offline(self) -> bool:
        """Trains on a fixed data set: no generation stage, one sequence per prompt (DPO: a
        pair)."""
        return self in (Family.DPO, Family.SFT)


@dataclass(frozen=True)
class AlgorithmInfo:
    family: Family
    reference_default: bool  # uses a reference model unless the scenario says none
    reference_allowed: bool
    min_samples: int  # K needed for the advantage estimate (group baselines need two)
    description: str


ALGORITHMS: dict[str, AlgorithmInfo] = {
    "ppo": AlgorithmInfo(Family.PPO, True, True, 1, "PPO with a critic (GAE)"),
    "grpo": AlgorithmInfo(Family.GRPO, True, True, 2, "GRPO: group-relative advantages"),
    "dapo": AlgorithmInfo(Family.GRPO, False, True, 2, "DAPO: GRPO-like without the KL term"),
    "rloo": AlgorithmInfo(Family.GRPO, True, True, 2, "RLOO: leave-one-out baseline"),
    "remax": AlgorithmInfo(Family.GRPO, True, True, 1, "ReMax: greedy-rollout baseline"),
    "dpo": AlgorithmInfo(Family.DPO, True, True, 1, "DPO on preference pairs"),
    "simpo": AlgorithmInfo(Family.DPO, False, False, 1, "SimPO: DPO-like, reference-free"),
    "orpo": AlgorithmInfo(Family.DPO, False, False, 1, "ORPO: DPO-like, reference-free"),
    "sft": AlgorithmInfo(Family.SFT, False, False, 1, "SFT: supervised fine-tuning, the "
                         "actor's training stage alone"),
}


class WorkloadInput(BaseModel):
    """One training step's batch shape as written (symbols of FORMULAS.md: B, K, S, T)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts_per_step: int = Field(gt=0, le=lim.MAX_PROMPTS_PER_STEP,
                                  description="B: prompts per step (DPO: preference pairs)")
    samples_per_prompt: int = Field(1, gt=0, le=lim.MAX_SAMPLES_PER_PROMPT,
                                    description="K: responses per prompt (not DPO)")
    prompt_len: int = Field(gt=0, le=lim.MAX_SEQUENCE_TOKENS, description="S: mean prompt tokens")
    response_len: int | None = Field(None, gt=0, le=lim.MAX_SEQUENCE_TOKENS,
                                     description="T: mean response tokens; may be "
                                     "left out when response_lengths gives quantiles or a file "
                                     "(then it is their mean)")
    max_response_len: int | None = Field(None, gt=0, le=lim.MAX_SEQUENCE_TOKENS,
                                         description="longest response (the cap; "
                                         "the tail); default response_len, or a file's longest")
    response_lengths: ResponseLengthsInput | None = Field(
        None, description="the spread of response lengths, one of: {distribution: lognormal, "
        "sigma: 1.0}; {distribution: fixed}; quantiles {p10, p25, p50, p75, p90, p95, p99 (at "
        "least one), clipped}; or {file, column} of observed lengths. Default: fixed when "
        "max_response_len equals response_len (or is absent), else lognormal with sigma 1.0 "
        "truncated at max_response_len (the mass beyond it at the cap). Ignored by DPO.")
    ppo_epochs: int = Field(1, gt=0, le=lim.MAX_PPO_EPOCHS,
                            description="passes over the step's data")
    mini_batches: int = Field(1, gt=0, le=lim.MAX_MINI_BATCHES,
                              description="optimizer steps per epoch")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.max_response_len is not None and self.response_len is not None
                and self.max_response_len < self.response_len):
            raise ValueError(f"max_response_len ({self.max_response_len}) is below response_len "
                             f"({self.response_len}); the tail cannot be shorter than the mean")
        return self


class Workload(WorkloadInput):
    """A resolved workload: response_len is always known (scenario resolution fills it in from
    response_lengths when they carry their own mean)."""

    response_len: int = Field(gt=0, le=lim.MAX_SEQUENCE_TOKENS,
                              description="T: mean response tokens")

    @property
    def max_response(self) -> int:
        return self.max_response_len or self.response_len

    @property
    def seq_len(self) -> int:
        """m = S + T (mean)."""
        return self.prompt_len + self.response_len

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + self.max_response

"""What a launch script says, before the scenario is resolved: the scenario fields it gives,
its models, and how to lay the plan out once the scenario is known."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planner.cost.legality import micro_batch_at_most, rank_share
from planner.cost.pipeline_split import MegatronSplit, split_from_megatron, split_problem
from planner.errors import InputError
from planner.importers.models import ModelRef
from planner.importers.values import Settings
from planner.specs.scenario import Scenario


@dataclass
class Reading:
    fmt: str
    release: str  # the framework release whose keys and defaults were applied
    fields: dict[str, Any]  # scenario field (dotted) → value the script gives
    models: dict[str, ModelRef]  # role → the script's model
    layout: Callable[[Scenario], dict[str, Any]]  # the plan: groups, layouts, inter_model
    settings: Settings | None = None  # what the launch command sets, read by key
    notes: list[str] = field(default_factory=list)

    def said(self) -> list[str]:
        """The settings rlplan read that the script sets, `key=value` as written."""
        s = self.settings
        if s is None:
            return []
        return [f"{s.name(k)}={' '.join(v.text for v in vals) or 'true'}"
                for k, vals in s.values.items() if k in s.read]

    def ignored(self) -> list[str]:
        """The settings rlplan does not price (after the plan was laid out)."""
        return self.settings.unread() if self.settings is not None else []


def whole(gpus: int, per: int, what: str) -> int:
    if per <= 0 or gpus % per:
        raise InputError(f"import: {what}: {gpus} GPUs do not split into groups of {per}; fix "
                         "the parallel sizes")
    return gpus // per


def uneven_stages(settings: MegatronSplit, layers: int, pp: int, where: str) -> dict[str, int]:
    """The plan's first_stage_layers / last_stage_layers from a Megatron configuration's
    uneven-split settings (`pipeline_split.split_from_megatron`); what Megatron refuses is
    refused naming `where` (the split into interleaved chunks is checked with the plan)."""
    try:
        first, last = split_from_megatron(layers, pp, settings)
    except ValueError as err:
        raise InputError(f"import: {where}: {err}") from None
    if bad := split_problem(layers, pp, 1, first, last):
        raise InputError(f"import: {where}: {bad[1]}")
    return {k: n for k, n in (("first_stage_layers", first), ("last_stage_layers", last))
            if n is not None}


def lengths(fields: dict[str, Any], prompt_cap: int, response_cap: int, where: str,
            notes: list[str]) -> None:
    """A script caps the lengths; rlplan prices means and a cap. The caps stand in for the
    means (every sequence at its cap: the longest step the script allows), said in a note."""
    fields |= {"workload.prompt_len": prompt_cap, "workload.response_len": response_cap,
               "workload.max_response_len": response_cap}
    notes.append(f"lengths: {where} caps prompts at {prompt_cap} and responses at "
                 f"{response_cap} tokens; priced with every sequence at its cap — give the "
                 "means you observe with --prompt-len and --response-len")


def mini_batches(per_step: int, per_update: int, what: str, unit: str = "sequences") -> int:
    if per_update <= 0 or per_step % per_update:
        raise InputError(f"import: {what}: {per_step} {unit} per step are not a whole number "
                         f"of mini-batches of {per_update}; fix the batch sizes")
    return per_step // per_update


def algorithm_of(estimator: str | None, table: dict[str, str], where: str,
                 notes: list[str]) -> str:
    """rlplan's algorithm for a framework's advantage estimator; a critic-free estimator rlplan
    has no name for is priced as GRPO (same stages: K samples per prompt, no critic)."""
    algorithm = table.get(estimator or "")
    if algorithm is None:
        algorithm = "grpo"
        notes.append(f"{where} {estimator}: priced as grpo (no critic, K samples per prompt)")
    return algorithm


def refused(where: str, what: str) -> InputError:
    """A setting that changes the layout in a way a plan cannot say."""
    return InputError(f"import: {where}: {what} is not something a plan can say; drop it to "
                      "import the script")


def kv_tokens(sc: Scenario, gen: dict[str, Any], fraction: float, key: str) -> int:
    """The KV cache (tokens per replica) vLLM allocates for generation layout `gen` at
    `gpu_memory_utilization` `fraction` (`rollout_stage.vllm_kv_tokens`)."""
    from planner.cost.rollout_stage import vllm_kv_tokens
    from planner.plan import Layout

    if not 0 < fraction <= 1:
        raise InputError(f"import: {key}={fraction}: expected a fraction of the GPU's memory "
                         "in (0, 1]")
    tokens = vllm_kv_tokens(sc, Layout(**gen), fraction)
    if tokens < 1:
        raise InputError(f"import: {key}={fraction}: vLLM's weights and workspaces alone take "
                         "more of the GPU; raise it")
    return tokens


def dividing_micro_batches(plan: dict[str, Any], sc: Scenario) -> list[str]:
    """Each training or forward micro-batch of `plan` that does not divide its rank's share
    set, in place, to the largest size that does (`legality.micro_batch_at_most`), with a note
    per change. (A forward that splits off a shorter last micro-batch runs no more micro-batches
    than the size priced.)"""
    notes = []
    for role, stages in plan.get("layouts", {}).items():
        for stage, lay in stages.items():
            if stage == "generation":
                continue
            share = rank_share(sc, stage, lay.get("dp", 1))
            micro = lay.get("micro_batch", 1)
            if (fit := micro_batch_at_most(share, micro)) != micro:
                lay["micro_batch"] = fit
                notes.append(f"{role} {stage} micro-batch: {micro} sequence(s) do not divide the "
                             f"{int(share)} each data-parallel rank runs; priced at {fit}, the "
                             "largest size that does")
    return notes

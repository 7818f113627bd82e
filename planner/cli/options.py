"""Scenario-override flags, declared once and shared by the commands that read a scenario.

Every flag maps to a scenario field through `planner.specs.scenario.SCENARIO_FLAGS`; a flag
given on the command line wins over the file (DESIGN.md: "every field also a CLI flag").
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.output import warning
from planner.specs import bounds as lim
from planner.specs.scenario import SCENARIO_FLAGS
from planner.specs.search import EVERY_PP_GPU_COUNT

_PANEL = "Scenario overrides (flag > file)"
PRICE = SCENARIO_FLAGS["price"]  # the scenario field --price sets
PUBLISHED_PRICES_USD = (1.19, 16.0)
"""The range of the published GPU-hour prices the shipped profiles cite (hardware_profiles/,
from Table 5 of ../shared/data/hardware_host_domain_prices.md: RunPod's A100 PCIe spot at
$1.19 to Oracle's B200 at about $16). A price far outside it is most likely another unit."""


def warn_price(usd: float, given: str) -> None:
    """A warning on stderr (the run goes on) for a price an order of magnitude outside the
    published range: a node's price, a month's, or cents."""
    low, high = PUBLISHED_PRICES_USD
    if not 0 < usd <= lim.MAX_PRICE_USD_PER_GPU_HOUR:
        return  # not a price at all: the scenario refuses it
    if usd > 3 * high:
        warning(f"{given}: ${usd:g} per GPU-hour is far above published rental prices "
                f"(${low:g}–${high:g} per GPU-hour); is it a node's price (divide by its GPUs) "
                "or a month's?")
    elif usd < low / 10:
        warning(f"{given}: ${usd:g} per GPU-hour is far below published rental prices "
                f"(${low:g}–${high:g} per GPU-hour); the price is in dollars, not cents")


def _opt(help_text: str) -> Any:
    return typer.Option(help=help_text, rich_help_panel=_PANEL, show_default=False)


Algo = Annotated[str | None, _opt("Algorithm: ppo, grpo, dpo, dapo, rloo, remax, simpo, orpo.")]
Actor = Annotated[str | None, _opt("Actor model: shipped name or path to a config.json/folder.")]
Reference = Annotated[str | None, _opt("Reference model, 'actor' or 'none'.")]
Reward = Annotated[str | None, _opt("Reward model, 'verifier' or 'none'.")]
Critic = Annotated[str | None, _opt("Critic model (PPO).")]
Prompts = Annotated[int | None, _opt("Prompts per step B (DPO: preference pairs).")]
Samples = Annotated[int | None, _opt("Samples per prompt K.")]
PromptLen = Annotated[int | None, _opt("Mean prompt length S (tokens).")]
ResponseLen = Annotated[int | None, _opt("Mean response length T (tokens).")]
MaxResponseLen = Annotated[int | None, _opt("Longest response (tokens).")]
PpoEpochs = Annotated[int | None, _opt("Passes over each step's data.")]
MiniBatches = Annotated[int | None, _opt("Optimizer steps per epoch.")]
Engine = Annotated[str | None, _opt("Inference engine of the rollouts: vllm-v1 (default), "
                                    "sglang, vllm-v0, eager (no CUDA graphs).")]
RolloutWeights = Annotated[str | None, _opt("Rollout weight precision: auto (default: fp8 for "
                                            "an FP8 checkpoint, else bf16), bf16, fp8.")]
KvCacheDtype = Annotated[str | None, _opt("Rollout KV-cache precision: bf16 (default) or fp8.")]
OldLogProbs = Annotated[str | None, _opt("Old-policy log-probs: recompute (default, an actor "
                                         "forward pass) or rollout (the engine's own).")]
ControllerUsPerToken = Annotated[float | None, _opt(
    "Host time per generated token off the GPUs, µs (controller, rule-based reward): in series "
    "with a synchronous step, overlapped with staleness ≥ 1 (--framework nemo-rl sets its "
    "fitted rate).")]
Refit = Annotated[str | None, _opt(
    "How weights reach a separate rollout group: checkpoint_engine (default, verl), "
    "checkpoint_engine_relays (verl 0.9.1's NCCL engine), sharded (NeMo-RL), "
    "one_rank_broadcast (OpenRLHF, verl's naive sync).")]
Gpu = Annotated[str | None, _opt("Hardware profile name or path (rlplan gpus).")]
Nodes = Annotated[int | None, _opt("Number of nodes.")]
GpusPerNode = Annotated[int | None, _opt("GPUs per node.")]
Price = Annotated[float | None, _opt("Price in USD per GPU-hour (default: the scenario's "
                                     "cluster.price_usd_per_gpu_hour, else the profile's); "
                                     "sweep --gpu also takes one per profile: h100-sxm:3.99.")]
Objective = Annotated[str | None, _opt("Objective: time, cost, or gpus (fewest GPUs reaching "
                                       "--target-tokens-per-s).")]
TargetTokensPerS = Annotated[float | None, _opt("Throughput the gpus objective must reach.")]
MaxStaleness = Annotated[int | None, _opt("Steps of asynchrony allowed (0 = on-policy).")]
TimeLimit = Annotated[float | None, _opt("Solver time limit in seconds.")]
MemoryHeadroom = Annotated[float | None, _opt(
    "Fraction of each GPU's capacity a plan leaves free (default 0.05; 0 = the full "
    "capacity).")]
MinCpChunk = Annotated[int | None, _opt(
    "Shortest chunk (tokens) of the longest sequence the search splits over context-parallel "
    "ranks (default 4096; 1 searches every cp, slower on large clusters).")]
EveryPp = Annotated[bool | None, typer.Option(
    "--every-pp/--pow2-pp", help="Search every pipeline degree dividing a group's GPUs, or its "
    "powers of two alone (faster; the proof covers those). Default: every pp on clusters of up "
    f"to {EVERY_PP_GPU_COUNT} GPUs, powers of two on larger ones.",
    rich_help_panel=_PANEL, show_default=False)]
Framework = Annotated[str | None, _opt(
    "The framework the plan is for: verl, openrlhf, deepspeed, megatron or nemo-rl, optionally "
    "@VERSION (default the newest preset): search only what it runs, priced as it runs it.")]


def output_path(raw: str) -> Path:
    """An output flag's value. A name ending in '/' (or '/.', '/..') is a folder's: refused
    here, since Path() drops the '/' and the run would write a file named like the folder."""
    if os.path.basename(raw) in ("", ".", ".."):
        what = "is a folder" if os.path.isdir(raw) else "names a folder, which does not exist"
        raise typer.BadParameter(f"'{raw}' {what}; give a file name inside it")
    return Path(raw)


def output(help_text: str, *names: str) -> Any:
    """An option naming a file a command writes (`planner.cli.files` checks and writes it)."""
    return typer.Option(*names, help=help_text, parser=output_path, metavar="FILE",
                        show_default=False)


# Not scenario fields: outputs of a priced plan.
Timeline = Annotated[Path | None, output("Also draw one iteration's timeline (lanes per group) "
                                         "to this .svg or .png file.")]


# Every scenario flag, by parameter name (the keys of SCENARIO_FLAGS): `scenario_flags` adds them
# to a command, so each command that reads a scenario declares them the same way.
OPTIONS: dict[str, Any] = {
    "algo": Algo, "actor": Actor, "reference": Reference, "reward": Reward, "critic": Critic,
    "prompts": Prompts, "samples": Samples, "prompt_len": PromptLen,
    "response_len": ResponseLen, "max_response_len": MaxResponseLen, "ppo_epochs": PpoEpochs,
    "mini_batches": MiniBatches, "engine": Engine, "rollout_weights": RolloutWeights,
    "kv_cache_dtype": KvCacheDtype, "old_log_probs": OldLogProbs,
    "controller_us_per_token": ControllerUsPerToken, "refit": Refit, "gpu": Gpu,
    "nodes": Nodes,
    "gpus_per_node": GpusPerNode, "price": Price, "objective": Objective,
    "target_tokens_per_s": TargetTokensPerS, "max_staleness": MaxStaleness,
    "memory_headroom": MemoryHeadroom, "min_cp_chunk": MinCpChunk, "every_pp": EveryPp,
    "time_limit": TimeLimit, "framework": Framework,
}
assert OPTIONS.keys() == SCENARIO_FLAGS.keys(), "a scenario field without its flag"


def scenario_flags(exclude: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Decorate a typer command taking `flags` (scenario field → value) with every
    scenario-override flag but `exclude`; the flags given arrive in `flags`."""

    def decorate(command: Callable) -> Callable:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "flags"]
        names = [n for n in OPTIONS if n not in exclude]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=OPTIONS[n]) for n in names]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {n: kwargs.pop(n, None) for n in names}
            if given.get("price") is not None:
                warn_price(given["price"], f"--price {given['price']:g}")
            return command(*args, flags=overrides(given), **kwargs)

        params = [*own, *added]
        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def overrides(params: dict[str, Any]) -> dict[str, Any]:
    """The scenario-override flags among a command's parameters (pass `locals()`), keyed by
    the scenario field they set; flags not given (None) are left out."""
    return {field: params[flag] for flag, field in SCENARIO_FLAGS.items()
            if params.get(flag) is not None}

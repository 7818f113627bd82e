"""The generation stage of a scenario's plan: how many sequences a replica runs at once, its
KV cache (the plan's, or the largest that fits where the layout sits), its memory as the
engine allocates it (and vLLM's `gpu_memory_utilization` both ways), and its rollout schedule
— the functions `evaluate` and the search price generation with (`generation.py` below)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from planner.cost.constants import ENGINES, GIB
from planner.cost.fit import Load, budget_of, kv_room_mib, kv_tokens_within, whole_mib
from planner.cost.flops import Num
from planner.cost.generation import (
    Rollout,
    bytes_resharding_buffer,
    kv_tokens_that_fit,
    memory_generation_per_gpu,
    rollout_floor,
    rollout_precision,
    time_generation,
)
from planner.cost.groups import amount_over, headroom_words
from planner.cost.memory import MemoryBreakdown
from planner.cost.states import Precision
from planner.cost.step import sequences
from planner.cost.variants import LayoutVariants
from planner.errors import InfeasibleError
from planner.plan import Layout
from planner.specs.scenario import Scenario

DEFAULT_MAX_NUM_SEQS = 1024
"""The most sequences a replica runs at once unless the plan says (`max_num_seqs`): verl's
default for its reward-model rollout (docs/exports.md §1.8); the engine's sampler is sized for it
(`generation_memory` prices its logits)."""


def max_seqs(sc: Scenario, layout: Layout | LayoutVariants) -> int:
    """The most sequences a generation replica runs at once: the plan's `max_num_seqs`, else
    its share of the step up to `DEFAULT_MAX_NUM_SEQS`."""
    if layout.max_num_seqs is not None:
        return int(layout.max_num_seqs)
    return min(math.ceil(sequences(sc) / layout.dp), DEFAULT_MAX_NUM_SEQS)


def useful_kv_tokens(sc: Scenario, layout: Layout | LayoutVariants, partial: bool = False
                     ) -> int:
    """A KV cache past which nothing waits: every sequence of the largest replica share, or
    `max_seqs` of them, at the longest length — under partial rollouts `max_seqs` of them
    (the next step's prompts are always queued, so a cap above the share fills too)."""
    running = max_seqs(sc, layout)
    if not partial:
        running = min(math.ceil(sequences(sc) / layout.dp), running)
    return running * (sc.workload.prompt_len + int(sc.response_lengths.max()))


def generation_memory(sc: Scenario, layout: Layout | LayoutVariants, shadow: bool,
                      resharding: bool, kv_tokens: Num | None = None) -> MemoryBreakdown:
    """Peak bytes per GPU of the actor generating with `kv_tokens` (default the layout's
    `kv_cache_tokens`) of KV cache per replica; `shadow`: a shadow copy of the weights
    (overlapped weight sync); `resharding`: filled from the training layout on its GPUs."""
    kv = layout.kv_cache_tokens if kv_tokens is None else kv_tokens
    return memory_generation_per_gpu(
        sc.actor, layout, kv_tokens=kv, decode_batch=max_seqs(sc, layout),
        shadow_weights=shadow, resharding=resharding, precision=rollout_precision_of(sc),
        reserve_bytes=sc.cluster.gpu.runtime_reserve_gib * GIB)


def rollout_precision_of(sc: Scenario) -> Precision:
    """The rollout engine's precision for this scenario (`Scenario.rollout_weights`)."""
    return rollout_precision(sc.rollout_weights, sc.runtime.kv_cache_dtype)


def kv_need_mib(sc: Scenario, layout: Layout | LayoutVariants, shadow: bool
                ) -> Callable[[int], int]:
    """KV tokens per replica → the generation's transient need in whole MiB per GPU, its KV
    cache with it (`fit.Load.stages`; the re-laying buffer apart)."""
    return lambda kv: whole_mib(float(generation_memory(sc, layout, shadow, resharding=False,
                                                        kv_tokens=kv).transient))


def vllm_kv_tokens(sc: Scenario, gen: Layout, utilization: float, shadow: bool = False
                   ) -> int:
    """The KV cache (tokens per replica) vLLM allocates at `gpu_memory_utilization`: what is
    left of that fraction of each GPU's memory once the generation weights (and a `shadow`
    copy), workspaces and the runtime reserve are placed (vLLM profiles its activation peak and
    the memory outside torch — CUDA context, NCCL — and gives the rest of the budget to the
    cache). The inverse of `vllm_utilization`, the exporters' fraction."""
    gpu = sc.cluster.gpu
    return kv_tokens_that_fit(sc.actor, gen, utilization * gpu.memory_gib * GIB - ROUNDING_SLACK,
                              max_seqs(sc, gen), shadow_weights=shadow,
                              reserve_bytes=gpu.runtime_reserve_gib * GIB,
                              precision=rollout_precision_of(sc))


def vllm_utilization(sc: Scenario, gen: Layout, shadow: bool = False) -> float:
    """The `gpu_memory_utilization` at which vLLM allocates `gen`'s KV cache
    (`kv_cache_tokens`): its weights, KV cache, workspaces and the runtime reserve over the
    GPU's memory, the inverse of `vllm_kv_tokens`."""
    mem = memory_generation_per_gpu(sc.actor, gen, kv_tokens=gen.kv_cache_tokens,
                                    decode_batch=max_seqs(sc, gen), shadow_weights=shadow,
                                    reserve_bytes=sc.cluster.gpu.runtime_reserve_gib * GIB,
                                    precision=rollout_precision_of(sc))
    return (float(mem.total) + ROUNDING_SLACK) / (sc.cluster.gpu.memory_gib * GIB)


ROUNDING_SLACK = 2 * 2**20
"""Bytes per GPU a fraction of vLLM's leaves aside (`vllm_kv_tokens`, `vllm_utilization`): the
fit check rounds the budget down and each load up to whole MiB (`fit.budget_of`,
`fit.whole_mib`), so a fraction exactly at the memory headroom (OpenRLHF's 0.95 under the 5%
default) would miss it by those MiB."""


def generation_load(sc: Scenario, layout: Layout, shadow: bool, hybrid: bool) -> Load:
    """The generation's memory as `fit.overflow` counts it (its KV cache the layout's, or
    one longest sequence when not set yet: only the weights and buffer are read then)."""
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    kv = layout.kv_cache_tokens or longest
    mem = generation_memory(sc, layout, shadow, resharding=False, kv_tokens=kv)
    buffer = bytes_resharding_buffer(sc.actor, layout, rollout_precision_of(sc).weight_bytes)
    return Load("actor generation", whole_mib(float(mem.persistent)),
                {"generation": whole_mib(float(mem.transient))}, generation=True,
                apart=not hybrid, reshard=whole_mib(float(buffer)) if hybrid else 0)


def kv_cache_layout(sc: Scenario, layout: Layout, shadow: bool, room_mib: int,
                    partial: bool = False) -> Layout:
    """The generation layout with its KV cache in tokens: the plan's `kv_cache_tokens`, else
    the largest whose need is within `room_mib` (`fit.kv_tokens_within`, up to
    `useful_kv_tokens`; `partial`: partial rollouts). Raises InfeasibleError when it does not
    fit, or cannot hold one sequence of the longest length."""
    gpu, w = sc.cluster.gpu, sc.workload
    longest = w.prompt_len + int(sc.response_lengths.max())
    need = kv_need_mib(sc, layout, shadow)
    kv = layout.kv_cache_tokens or kv_tokens_within(need, room_mib, longest,
                                                    useful_kv_tokens(sc, layout, partial))
    if kv is None or kv < longest or need(kv) > room_mib:
        what = (f"a KV cache of {kv:,} tokens per replica" if kv is not None and kv >= longest
                else f"even one sequence of {longest:,} tokens")
        wanted = need(max(kv or 0, longest))
        raise InfeasibleError(
            f"group {layout.group}, stage generation: the actor's rollouts need "
            f"{wanted / 1024:.1f} GiB per GPU of KV cache and buffers for {what}, "
            f"{amount_over(wanted - room_mib)} over what the group leaves free of the "
            f"{gpu.name}'s {gpu.memory_gib:.0f} GiB"
            f"{headroom_words(gpu, sc.search.memory_headroom)}; use more tensor parallelism, "
            "offload, a larger group"
            + (", or a smaller kv_cache_tokens" if layout.kv_cache_tokens else ""))
    return layout.model_copy(update={"kv_cache_tokens": kv})


def generation_rollout(sc: Scenario, layout: Layout | LayoutVariants, partial: bool = False
                       ) -> Rollout:
    """The actor's rollouts on `layout` (its `kv_cache_tokens` set): the continuous-batching
    schedule of the step's response lengths priced by the decode step (`generation.py`)."""
    return time_generation(sc.actor, layout, sc.cluster.gpu, ENGINES[sc.runtime.engine],
                           sc.response_lengths, sc.workload.prompt_len,
                           int(layout.kv_cache_tokens), max_seqs(sc, layout), partial,
                           rollout_precision_of(sc))


def generation_floor(sc: Scenario, layout: Layout | LayoutVariants, kv_tokens: np.ndarray
                     ) -> np.ndarray:
    """`rollout_floor` of the actor's rollouts on `layout` at each of `kv_tokens` (seconds):
    no KV cache up to each is faster, recomputation aside."""
    return rollout_floor(sc.actor, layout, sc.cluster.gpu, ENGINES[sc.runtime.engine],
                         sc.response_lengths, sc.workload.prompt_len, kv_tokens,
                         max_seqs(sc, layout), rollout_precision_of(sc))


def smaller_tp_rollout(sc: Scenario, layout: Layout, held: list[Load], shadow: bool,
                       hybrid: bool, swap_out: bool, partial: bool
                       ) -> tuple[int, int, float] | None:
    """The rollout on the same GPUs with half the tensor parallelism and twice the replicas —
    the KV cache what the group then leaves free, experts as before (EP = dp·tp unchanged) —
    as (tp, dp, seconds), what the plan's advice compares with (README "Rollouts"); None when
    tp is 1, the heads do not split that way, or it does not fit in memory."""
    tp = layout.tp // 2
    if tp < 1 or sc.actor.num_attention_heads % tp:
        return None
    alt = layout.model_copy(update={"tp": tp, "dp": layout.dp * 2, "kv_cache_tokens": None,
                                    "etp": layout.etp if layout.ep > 1 else None})
    try:
        load = generation_load(sc, alt, shadow, hybrid)
        alt = kv_cache_layout(sc, alt, shadow, kv_room_mib(
            held, load, budget_of(sc.cluster.gpu, sc.search.memory_headroom), swap_out),
            partial)
    except InfeasibleError:
        return None
    return tp, alt.dp, generation_rollout(sc, alt, partial).seconds

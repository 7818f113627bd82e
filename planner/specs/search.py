"""The scenario's `search` section: what the search optimises and over which menus, and the
limits it keeps to (`planner.specs.scenario` reads it with the rest)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.specs import bounds as lim

DEFAULT_MEMORY_HEADROOM = 0.05
"""`search.memory_headroom` unless the scenario says: 5% of each GPU left free beyond the
profile's runtime reserve. The memory model is checked to within a few percent of measured
peaks (README "What the memory figure means"), and allocator fragmentation and framework
buffers that it does not count grow with the run: a plan at 99-100% of the capacity (79.7 of
80 GiB, issue 23) is one a real run may not survive. `--memory-headroom 0` checks against the
full capacity, as the published runs the calibration benches price ran."""
DEFAULT_MIN_CP_CHUNK = 4096
"""`search.min_cp_chunk` unless the scenario says: context parallelism is searched in chunks of
4,096 tokens or more. Shorter chunks can win (finer micro-batches shrink a pipeline's bubble:
PPO with four 70B roles on 1,024 H100s, 5,120-token sequences, prices 1.95% faster at cp 4 in
1,280-token chunks), but searching every cp took that search from 1.8 to 5.7 s
(`bench/menus.py --widen cp`; README "Context parallelism")."""


EVERY_PP_GPU_COUNT = 128
"""Clusters of up to this many GPUs search every pp dividing a group's GPUs unless
`search.every_pp` says otherwise; larger ones its powers of two. Every pp found the shipped PPO
example's optimum 8.6% faster (pp 3 on 48 of its 128 GPUs), its search 2.2× as long (11.3 →
24.7 s, `bench/menus.py --widen pp`); on the 1,024-GPU PPO case of `bench/search_speed.py` no
faster plan, the search 1.4× as long (2.3 → 3.2 s), the command 5.9 → 7.1 s (README "Pipeline
degrees")."""


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: Literal["time", "cost", "gpus"] = Field(
        "time", description="time: shortest iteration; cost: cheapest step; gpus: fewest GPUs "
                            "reaching target_tokens_per_s")
    target_tokens_per_s: float | None = Field(
        None, ge=lim.MIN_TARGET_TOKENS_PER_S, le=lim.MAX_TARGET_TOKENS_PER_S,
        description="the throughput the gpus objective must reach")
    max_staleness: int = Field(0, ge=0, description="bounded asynchrony: steps of lag allowed")
    memory_headroom: float = Field(
        DEFAULT_MEMORY_HEADROOM, ge=0, le=lim.MAX_MEMORY_HEADROOM, allow_inf_nan=False,
        description="the fraction of each GPU's capacity a plan leaves free, beyond the "
        "profile's runtime reserve (planner/cost/fit.py budget_of); 0 plans up to the full "
        "capacity")
    allow_shared_actor_critic: bool = False
    min_cp_chunk: int = Field(
        DEFAULT_MIN_CP_CHUNK, ge=1, le=lim.MAX_SEQUENCE_TOKENS,
        description="the shortest chunk (tokens) of the longest sequence the search splits "
        "over context-parallel ranks: cp where max_seq_len / cp is at least this; 1 searches "
        "every cp (the proof then covers every cp `evaluate` accepts; slower on large "
        "clusters)")
    every_pp: bool | None = Field(
        None, description="search every pipeline degree dividing a group's GPUs (up to 16) in "
        "training and forwards; false: its powers of two alone (faster; the proof then covers "
        f"those); unset: every pp on clusters of up to {EVERY_PP_GPU_COUNT} GPUs, powers of two "
        "on larger ones")
    time_limit_s: float = Field(30.0, gt=0, le=lim.MAX_TIME_LIMIT_S, allow_inf_nan=False,
                                description="seconds the whole command may take (finite)")

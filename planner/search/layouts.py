"""The legal layouts the search prices, one parallel shape (the degrees) at a time.

Legal layouts (DESIGN.md convention g = dp·tp·pp·cp, ep carved out of dp·cp·tp):
- tp a power of two dividing g, within one scale-up domain, dividing the attention heads and
  compatible with the KV heads (one divides the other); sequence parallelism on whenever tp > 1
  (training and forwards: it splits the element-wise kernels' traffic and the activations over
  TP and adds no communication in the model, so a layout without it is never faster nor
  smaller — unless the framework does not run it, `Capabilities.sequence_parallel`);
- pp any divisor of the GPUs (a power of two alone on clusters of more than
  `EVERY_PP_GPU_COUNT` GPUs or with `search.every_pp` false, `every_pp`), at most `MAX_PP`:
  dividing the layers (Megatron's even split), or, where it does not, with the one uneven
  split `pipeline_split.offered_split` gives (first/last-stage layer counts, the middle
  stages even); in training, vp interleaved chunks per rank (1, or
  2 … `MAX_VP` with pp > 1 — where pp divides the layers, pp·vp dividing them; where it does
  not, the most chunks Megatron interleaves the split into — and at least pp micro-batches per
  step);
- cp a power of two splitting the longest sequence into chunks of `search.min_cp_chunk`
  tokens or more (`_cp_options`; 1 offers every cp), in training and forwards, with odd
  micro-batches only where cp > 1: micro-batches of b = 2k sequences over cp ranks hold and
  run what b/2 do over cp/2 ranks with twice the data-parallel ranks (the same tokens per
  micro-batch and micro-batches per step), with a longer ring to pass K/V around (`_odd`).
  What cp buys is micro-batches finer than one sequence — a smaller bubble, fewer
  activations — however short its chunks;
- ep dividing the experts and dp·cp·tp (MoE only);
- micro-batches: every size dividing each rank's share (of a mini-batch in training, of the
  step's batch in a forward; `legality.micro_batch_sizes`, the rule `evaluate` checks): fewer,
  larger micro-batches gather a ZeRO-3 shard or stream offloaded weights fewer times and
  run the matmuls larger, more hold fewer activations (sizes that do not fit are priced and
  dropped);
- ZeRO 0–3 for data-parallel training (0–1 with pipeline parallelism: `legality.zero_problem`),
  0 or 3 for a frozen model's forward — where it has ranks to shard over (`_shards`: dp·cp,
  or a MoE model's expert data-parallel ranks); checkpointing none / selective / full; CPU
  offload of the optimizer state, of the parameters (streamed in, as DeepSpeed's
  offload_param) or of both — of a frozen model, its weights streamed in or asleep outside its
  stage — when the profile gives a host link and host memory (offloaded bytes per GPU within
  its share of the node's host memory).
Generation: tp and ep as above with cp = 1 — and, for a model no such shape holds, TP across
scale-up domains and pipeline stages — KV cache sizes (`planner.search.kv`) as
`kv_cache_tokens`, and under partial rollouts caps on running sequences as `max_num_seqs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from planner.cost.legality import (
    ep_problem,
    interleaved_micro_batch_sizes,
    micro_batch_sizes,
    rank_share,
    tp_problem,
    zero_problem,
)
from planner.cost.pipeline_split import offered_split
from planner.cost.step import sequences
from planner.cost.variants import LayoutVariants
from planner.search.kv import concurrency_caps, kv_levels
from planner.search.pools import PoolSpace
from planner.specs.model import ModelSpec
from planner.specs.search import EVERY_PP_GPU_COUNT

if TYPE_CHECKING:
    from collections.abc import Callable

    from planner.search.candidate import Space
    from planner.specs.scenario import Scenario

    KvSizes = Callable[[Space, PoolSpace, LayoutVariants], list[int]]


MAX_PP = 16


MAX_VP = 4  # interleaved chunks per rank: the bubble's gain (1 − 1/vp) flattens past 4


CHECKPOINTING = ("none", "selective", "full")


EVERY_GPU_COUNT = 64
"""Clusters of up to this many GPUs offer a group of every size. Groups spanning part of a node
beat every plan of the former menus (`bench/group_sizes.py --nodes N`): on two nodes of 8, 12 + 4
by up to 10.4%; on three, 12 + 6 + 6 by up to 7.2% (4 of 48 optima); on eight (two of its
scenarios, one-off), one by 5.5%.
Past 64 the cost grows with the cluster: on 9 nodes every size beat 4 of the 16 one-step-off
optima of the 0.5B/1.5B grid by up to 3.9% (`--nodes 9 --only "staleness 1" --only '!7b'`);
with the what-ifs on the former menus (`WHAT_IF_EVERY_GPU_COUNT`) it took the shipped examples
(one-off runs, the whole search): GRPO on 9 / 16 / 32 / 128 nodes 1.2 / 1.5 / 1.4 / 2.2 s to
1.4 / 1.8 / 2.1 / 6.1 s, PPO's four 70B roles on 16 nodes 6.7 s to 10.6 s. With this limit at
128, that example's command took 13.0 s against 8.3 s, for the same plan (`bench/search_speed.py
--examples --runs 3 --against`, medians)."""

WHAT_IF_EVERY_GPU_COUNT = 16
"""The what-ifs (`solve._what_if`) search every group size on up to this many GPUs only (past
it the former menus: every count within a node, whole nodes): they say what an option would
buy from a plan it has, not a proven optimum, and searched every size the staleness what-if
was most of the command (`bench/search_speed.py --examples`: the shipped GRPO example on 32
GPUs 2.1 → 1.2 s, the two-pool one 5.2 → 4.1 s, the same notes)."""

EVERY_NODE_COUNT = 16
"""Clusters of up to this many nodes offer a group of every node count; larger ones the powers
of two and their complements (the sizes grow the model: 128 nodes would price 128 sizes)."""


def slot_sizes(total: int, per_node: int, every: int = EVERY_GPU_COUNT) -> list[int]:
    """Group sizes: every size on up to `every` GPUs; else every count inside a node,
    and every node multiple on up to `EVERY_NODE_COUNT` nodes, else the power-of-two node
    multiples and their complements to the whole cluster (so two groups can use every GPU)."""
    if total <= every:
        return list(range(1, total + 1))
    sizes = set(range(1, min(per_node, total) + 1))
    nodes = total // per_node
    if nodes <= EVERY_NODE_COUNT:
        whole = {per_node * k for k in range(1, nodes + 1)}
    else:
        whole = {per_node * (1 << k) for k in range(nodes.bit_length()) if (1 << k) <= nodes}
    sizes |= whole | {total - s for s in whole if total - s > 0} | {total}
    return sorted(s for s in sizes if 0 < s <= total)


def _pow2_divisors(n: int, cap: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0 and (1 << k) <= cap]


def _tp_options(spec: ModelSpec, g: int, scale_up: int) -> list[int]:
    return [tp for tp in _pow2_divisors(g, scale_up) if tp_problem(spec, tp) is None]


def every_pp(sc: Scenario) -> bool:
    """Whether the search draws every pp dividing a group's GPUs (else its powers of two):
    `search.every_pp`, or unset, on clusters of up to `EVERY_PP_GPU_COUNT` GPUs."""
    chosen = sc.search.every_pp
    return sc.total_gpus <= EVERY_PP_GPU_COUNT if chosen is None else chosen


def pp_offered(sc: Scenario, pp: int) -> bool:
    """Whether the search draws `pp` stages (where they divide the GPUs, up to `MAX_PP`): any
    (`every_pp`: pp 3 on 48 GPUs at tp 4 is the shipped PPO example's optimum, 8.6% faster than
    over powers of two), or a power of two."""
    return pp <= MAX_PP and (every_pp(sc) or pp & (pp - 1) == 0)


def cp_offered(sc: Scenario, cp: int) -> bool:
    """Whether the search draws context parallelism `cp` (a power of two, where it divides the
    GPUs): cp 1, or chunks of the longest sequence of `search.min_cp_chunk` tokens or more."""
    return cp == 1 or (cp & (cp - 1) == 0
                       and sc.workload.max_seq_len / cp >= sc.search.min_cp_chunk)


def _pp_options(sc: Scenario, ranks: int) -> list[int]:
    """Pipeline stages on `ranks` = g/tp GPUs (`pp_offered`)."""
    return [p for p in range(1, min(ranks, MAX_PP) + 1) if ranks % p == 0 and pp_offered(sc, p)]


def _cp_options(sc: Scenario, ranks: int) -> list[int]:
    """Context parallelism on `ranks` = g/(tp·pp) GPUs (`cp_offered`)."""
    return [c for c in _pow2_divisors(ranks, ranks) if cp_offered(sc, c)]


def _ep_options(spec: ModelSpec, ranks: int) -> list[int]:
    if not spec.moe:
        return [1]
    return [ep for ep in _pow2_divisors(ranks, ranks) if ep_problem(spec, ep, None) is None]


def _expert_layouts(spec: ModelSpec, ranks: int, tp: int) -> list[tuple[int, int | None]]:
    """(ep, etp) a training or forward shape may use on `ranks` = dp·cp·tp ranks: both ways of
    sharding experts — whole experts over EP (etp 1), and split over the TP ranks as
    Megatron-Core's default (etp = tp) — with ep·etp dividing the ranks. Dense: (1, None)."""
    if not spec.moe:
        return [(1, None)]
    return [(ep, etp) for ep in _ep_options(spec, ranks) for etp in sorted({1, tp})
            if ranks % (ep * etp) == 0]


def _generation_experts(spec: ModelSpec, dp: int, tp: int) -> list[tuple[int, int | None]]:
    """(ep, etp) of a generation shape, as vLLM runs MoE models: experts split over the TP
    ranks (ep 1, etp = tp), or expert parallelism over all dp·tp GPUs with whole experts."""
    if not spec.moe:
        return [(1, None)]
    out = [(1, tp)]
    if dp * tp > 1 and spec.moe.num_experts % (dp * tp) == 0:
        out.append((dp * tp, 1))
    return out


def _product(**options: list) -> dict[str, np.ndarray]:
    """Every combination of the options, one array per option, in `itertools.product` order."""
    rows = list(product(*options.values()))
    return {name: np.array([row[k] for row in rows]) for k, name in enumerate(options)}


# --- the legal layouts, one shape (the degrees) at a time ------------------------------------


def generation_shapes(space: Space, ps: PoolSpace, role: str, g: int,
                       levels: KvSizes = kv_levels) -> Iterator[LayoutVariants]:
    """Generation: tp, pp and ep (`_generation_experts`) with cp = 1, and under partial
    rollouts the cap on running sequences (`concurrency_caps`); the variants are KV cache
    sizes (`kv_levels`; `kv.kv_ladder` gives every size of the ladder, priced or not, without
    simulating). Shapes within one scale-up domain with pp = 1 first; only when none fits, TP
    across domains and pipeline stages, as engines run a model too large for one domain
    (vLLM)."""
    sc = ps.scenario
    spec, gpu, n = sc.roles[role], sc.cluster.gpu, sequences(sc)
    inside = [(tp, 1) for tp in _tp_options(spec, g, gpu.scale_up_gpus)]
    wide = [(tp, pp) for tp in _tp_options(spec, g, g)
            for pp in _pow2_divisors(g // tp, min(MAX_PP, spec.num_hidden_layers))
            if (tp, pp) not in inside]
    for shapes in (inside, wide):
        found = False
        for tp, pp in shapes:
            dp = g // (tp * pp)
            if n / dp < 1:
                continue
            for ep, etp in _generation_experts(spec, dp, tp):
                shape = LayoutVariants(dp=dp, tp=tp, pp=pp, ep=ep, etp=etp)
                for cap in concurrency_caps(space, ps, shape):
                    capped = dataclasses.replace(shape, max_num_seqs=cap)
                    if sizes := levels(space, ps, capped):
                        found = True
                        yield dataclasses.replace(capped, kv_cache_tokens=np.array(sizes))
        if found:
            return


def _training_shapes(space: Space, ps: PoolSpace, role: str, g: int
                     ) -> Iterator[LayoutVariants]:
    """Training: tp, pp (with its split), cp, ep, etp; the variants are interleaving vp ×
    ZeRO × checkpointing × micro-batch × offload. Interleaved chunks vp (powers of two up to
    `MAX_VP`) where Megatron splits the stages into them (`_pipelines`; those of one split in
    one shape, so fewer shapes to price), with the micro-batch sizes that leave at least pp
    micro-batches per step (`time.interleave_problem`)."""
    sc = ps.scenario
    spec, gpu = sc.roles[role], sc.cluster.gpu
    host = bool(ps.host_budget_mib)
    # AutoTP (OpenRLHF, DeepSpeed) has no sequence parallelism (`Capabilities`)
    sequence_parallel = space.caps is None or space.caps.sequence_parallel
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in _pp_options(sc, g // tp):
            pipelines = _pipelines(spec.num_hidden_layers, pp, MAX_VP)
            if not pipelines:
                continue
            for cp in _cp_options(sc, g // (tp * pp)):
                dp = g // (tp * pp * cp)
                share = rank_share(sc, "training", dp)
                if not _odd(micro_batch_sizes(share), cp):
                    continue
                zeros = tuple(z for z in range(4) if zero_problem(pp, z) is None)
                # the interleavings of one split priced together: vp is a variant (`variants`)
                for (first, last), vps in _by_split(pipelines).items():
                    by_zeros: dict[tuple[int, ...], dict[str, np.ndarray] | None] = {}
                    for ep, etp in _expert_layouts(spec, dp * cp * tp, tp):
                        stages = zeros if _shards(spec, dp * cp, tp, ep, etp) else (0,)
                        if stages not in by_zeros:
                            by_zeros[stages] = _training_options(share, pp, tuple(vps),
                                                                 stages, host, cp > 1)
                        if (options := by_zeros[stages]) is not None:
                            yield LayoutVariants(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp,
                                                 sp=tp > 1 and sequence_parallel,
                                                 first_stage_layers=first,
                                                 last_stage_layers=last, **options)


def _shards(spec: ModelSpec, replicas: int, tp: int, ep: int, etp: int | None) -> bool:
    """Whether ZeRO has ranks to shard over: the dp·cp `replicas` of the dense parameters, or
    the routed experts' own data-parallel ranks dp·cp·tp/(ep·etp) (`layout_comm.dp_groups`:
    with dp 1 and experts not split over TP, each TP rank holds a copy ZeRO shards)."""
    return replicas > 1 or (spec.moe is not None and replicas * tp // (ep * (etp or 1)) > 1)


@cache  # the same for every shape of one pipeline and data-parallel share
def _training_options(share: float, pp: int, vps: tuple[int, ...], zeros: tuple[int, ...],
                      host: bool, odd: bool) -> dict[str, np.ndarray] | None:
    """A training shape's variants: vp × ZeRO × checkpointing × micro-batch × offload (with
    `host` memory: of the optimizer state, of both, or of the parameters alone), the
    micro-batches those that leave an interleaved pipeline enough (None: no vp has any). The
    parameters alone are streamed from CPU memory at the highest ZeRO stage only (3 as
    DeepSpeed runs it, offload_param "valid only with stage 3"; FSDP's CPU offload steps the
    optimizer on the CPU too: `both`): a lower stage streams the same parameters and shards
    less (`bench/search_scope.py --shapes`: no such layout outside), and a quarter of the
    variants stay out. `odd`: the odd micro-batches only (cp > 1, `_odd`)."""
    offloads = ["none"] + (["optimizer", "both"] if host else [])
    blocks = [block for vp in vps
              if (sizes := _odd(interleaved_micro_batch_sizes(share, pp, vp), 2 if odd else 1))
              for block in [_product(vp=[vp], zero=list(zeros), checkpointing=CHECKPOINTING,
                                     micro_batch=list(sizes), offload=offloads)]
              + ([_product(vp=[vp], zero=[max(zeros)], checkpointing=CHECKPOINTING,
                           micro_batch=list(sizes), offload=["params"])] if host else [])]
    if not blocks:
        return None
    out = {name: np.concatenate([b[name] for b in blocks]) for name in blocks[0]}
    for array in out.values():
        array.flags.writeable = False  # shared by every shape that asks (`cache`)
    return out


def _odd(micro_batches: tuple[int, ...], cp: int) -> tuple[int, ...]:
    """The micro-batches a shape with context parallelism `cp` offers: all at cp 1, the odd
    ones past it — b = 2k sequences in chunks over cp ranks are the tokens, activations and
    micro-batch count of k over cp/2 ranks with twice the data-parallel ranks (a shape the
    search offers, with ZeRO sharding and gradients over the same dp·cp ranks) plus a longer
    K/V ring, so never faster nor smaller (`tests/test_search_scope.py` checks it)."""
    return micro_batches if cp == 1 else tuple(b for b in micro_batches if b % 2)


Split = tuple[int | None, int | None]


def _pipelines(layers: int, pp: int, max_vp: int) -> list[tuple[int, Split]]:
    """(vp, (first_stage_layers, last_stage_layers)) the search offers for pp stages: vp 1 and,
    with pp > 1, the powers of two up to `max_vp`. Where pp divides the layers, the even split
    with every vp whose pp·vp divides them too; where it does not, `offered_split`'s for vp 1
    and for the most chunks it runs in (the bubble's gain flattens with vp, and fewer shapes
    keep the search's pricing modest). Empty: pp has no split."""
    vps = [v for v in (1 << k for k in range(max_vp.bit_length())) if v == 1 or pp > 1]
    if layers % pp == 0:
        return [(vp, (None, None)) for vp in vps if layers % (pp * vp) == 0]
    splits = [(vp, split) for vp in vps if (split := offered_split(layers, pp, vp)) is not None]
    return [s for s in splits if s[0] == 1] + [s for s in splits[-1:] if s[0] > 1]


def _by_split(pipelines: list[tuple[int, Split]]) -> dict[Split, list[int]]:
    """The interleavings `_pipelines` offers, by the split they run (in its order)."""
    out: dict[Split, list[int]] = {}
    for vp, split in pipelines:
        out.setdefault(split, []).append(vp)
    return out


def _forward_shapes(space: Space, ps: PoolSpace, role: str, g: int
                    ) -> Iterator[LayoutVariants]:
    """A frozen model's forward: tp, pp (with its split, `_pipelines`), cp (as in training), ep,
    etp; the variants are ZeRO and offload × micro-batch (every size dividing the rank's
    share, `_odd` past cp 1): whole weights
    (ZeRO-0) resident or, with host memory, asleep outside the stage (an inference engine's
    sleep mode, verl's Megatron reference); sharded (ZeRO-3, FSDP or DeepSpeed) resident or
    streamed in from CPU memory for each micro-batch (FSDP's CPUOffload, DeepSpeed's
    offload_param, which needs stage 3)."""
    sc = ps.scenario
    spec, gpu = sc.roles[role], sc.cluster.gpu
    host = bool(ps.host_budget_mib)
    sequence_parallel = space.caps is None or space.caps.sequence_parallel
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in _pp_options(sc, g // tp):
            for _, (first, last) in _pipelines(spec.num_hidden_layers, pp, 1):
                for cp in _cp_options(sc, g // (tp * pp)):
                    dp = g // (tp * pp * cp)
                    micro_batches = _odd(micro_batch_sizes(rank_share(sc, "assessment", dp)), cp)
                    if not micro_batches:
                        continue
                    for ep, etp in _expert_layouts(spec, dp * cp * tp, tp):
                        options = _forward_variants(_shards(spec, dp * cp, tp, ep, etp),
                                                    list(micro_batches), host)
                        yield LayoutVariants(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp,
                                             sp=tp > 1 and sequence_parallel,
                                             first_stage_layers=first, last_stage_layers=last,
                                             **options)


def _forward_variants(shards: bool, micro_batches: list[int], host: bool
                      ) -> dict[str, np.ndarray]:
    """A frozen model's (zero, offload) pairs × micro-batches (`_forward_shapes`): with no
    ranks to shard over (`_shards`) ZeRO-3 shards nothing, and the weights may stream in or
    sleep alike; a sharded model may sleep too (its shard loaded back whole for the stage, as
    verl's FSDP param_offload), less to load and hold than the whole weights, more to hold
    than streaming (`bench/search_scope.py` found it beyond every pair offered before). ZeRO
    1–2 and the optimizer's offload change nothing a forward holds."""
    pairs = [(0, "none")] + ([(3, "none")] if shards else [])
    if host:
        pairs += [(0, "sleep"), (3 if shards else 0, "params")] + ([(3, "sleep")] if shards
                                                                   else [])
    rows = [(z, o, b) for z, o in pairs for b in micro_batches]
    return {"zero": np.array([z for z, _, _ in rows]), "offload": np.array([o for _, o, _ in rows]),
            "micro_batch": np.array([b for _, _, b in rows])}


SHAPES = {"generation": generation_shapes, "training": _training_shapes,
          "forward": _forward_shapes}

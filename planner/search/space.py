"""The search space: tasks, group-size options and priced candidate layouts.

A *task* is what one model does on one group: the actor's generation; a trainable model's
training, which also carries its forward in the assessment stage (the actor's old log-probs,
the critic's values — run with the training layout, as verl and NeMo-RL do); a frozen model's
assessment forward. Up to `MAX_SLOTS` device groups ("slots") hold the tasks; slot 0 holds the
actor's training, so generation on slot 0 is the co-located hybrid engine (resharding) and
generation elsewhere a separate rollout group (weight sync).

Every candidate is priced once by the cost model (`planner.cost.iteration.task_time` and
`task_memory`, the functions `rlplan evaluate` uses) in integer milliseconds and MiB, and
candidates no better in any number than another are dropped. Candidates are priced a parallel
shape (the degrees) at a time: its variants — ZeRO × checkpointing × micro-batch × offload,
generation's concurrency levels — go through the same functions as numpy arrays in one pass
(`planner.cost.variants`), tens of thousands of candidates costing a few hundred passes.
The CP-SAT model (`cpsat.py`) and the brute-force enumerator (`brute.py`) read this space and
score a choice with the same integer arithmetic (`choice.py`), so their optima coincide.

Legal layouts (DESIGN.md convention g = dp·tp·pp·cp, ep carved out of dp·cp·tp):
- tp a power of two dividing g, within one scale-up domain, dividing the attention heads and
  compatible with the KV heads (one divides the other); sequence parallelism on whenever tp > 1
  (it only saves memory in the model);
- pp dividing the layers (Megatron's even split), at most `MAX_PP`; in training, vp interleaved
  chunks per rank (1, or 2 … `MAX_VP` with pp > 1, pp·vp dividing the layers and at least pp
  micro-batches per step);
- cp a power of two dividing the longest sequence into chunks of ≥ `MIN_CP_CHUNK` tokens;
- ep dividing the experts and dp·cp·tp (MoE only);
- micro-batches dividing each rank's share of a mini-batch;
- ZeRO 0–3 for data-parallel training (0–1 with pipeline parallelism, as Megatron), 0 or 3 for
  a frozen model's forward; checkpointing none / selective / full; CPU offload of the optimizer
  state, or of optimizer state and parameters, when the profile gives a host link and host
  memory (offloaded bytes per GPU within its share of the node's host memory).
Generation: tp and ep as above with cp = 1 — and, for a model no such shape holds, TP across
scale-up domains and pipeline stages — and KV cache sizes (tokens per replica, from one
sequence of the longest length, doubling, up to what fits; the largest two under partial
rollouts) as
`kv_cache_tokens`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from planner.cost.flops import Num
from planner.cost.generation import FUSION_POINTS, bytes_resharding_buffer, kv_tokens_that_fit
from planner.cost.iteration import (
    controller_seconds,
    generation_memory,
    generation_rollout,
    max_seqs,
    resharding_time,
    rollout_precision_of,
    runs_stage,
    sequences,
    sync_between,
    task_memory,
    task_time,
    tokens_per_step,
    useful_kv_tokens,
)
from planner.cost.memory import ROLE_HEADS
from planner.cost.offload import swap_time
from planner.cost.variants import LayoutVariants
from planner.errors import InputError
from planner.plan import STAGES, Layout
from planner.search.deadline import Deadline
from planner.search.pools import PoolSpace, Shape, all_shapes, price_weights
from planner.specs.model import ModelSpec
from planner.specs.scenario import Scenario
from planner.theory.shape import Head

if TYPE_CHECKING:
    from planner.export.capabilities import Capabilities

MAX_SLOTS = 3
MAX_PP = 16
MAX_VP = 4  # interleaved chunks per rank: the bubble's gain (1 − 1/vp) flattens past 4
MIN_CP_CHUNK = 4096
KV_LEVEL_SHIFT = 1  # generation KV sizes double from one longest sequence
PARTIAL_KV_LEVELS = 2  # KV sizes offered under partial rollouts: the largest two
MICRO_BATCHES = (1, 2, 4, 8)
MS = 1e-3  # seconds per time unit of the solver
MIB = 2**20  # bytes per memory unit of the solver
FUSION_SCALE = 1000  # fixed-point scale of the fraction still to assess (FUSION_POINTS)
FUSION_REST = tuple(round(FUSION_SCALE * (1 - q)) for q in FUSION_POINTS)
SWAP_SCALE = 1000  # fixed-point scale of the swap time per MiB
MAX_UNITS = 2**53  # largest ms or MiB count of one candidate: exact in float64, far from int64
GPU_WEIGHT = 10**9  # ms: longer than any iteration, so the gpus objective counts GPUs first
CHECKPOINTING = ("none", "selective", "full")


@dataclass(frozen=True)
class Task:
    """One model's work on one group. `stages` are the stages it loads (training tasks carry
    their model's assessment forward)."""

    role: str
    kind: str  # generation | training | forward

    @property
    def name(self) -> str:
        return f"{self.role}.{self.kind}"

    @property
    def stages(self) -> tuple[str, ...]:
        return {"generation": ("generation",), "training": ("assessment", "training"),
                "forward": ("assessment",)}[self.kind]


@dataclass(frozen=True)
class Candidate:
    """One priced layout of a task on a group of a given size. (`_price` also returns one for
    layout variants, the numbers then arrays over the variants.)"""

    layout: Layout
    time_ms: dict[str, int]  # load per stage on its group
    persistent_mib: int  # kept between stages (model states; a rollout group's weights)
    transient_mib: dict[str, int]  # needed during a stage only
    host_mib: int = 0  # CPU memory per GPU holding offloaded state
    reshard_ms: int = 0  # generation on the training group: re-laying the weights
    reshard_mib: int = 0  # generation on the training group: the re-laying buffer (transient)
    done_ms: tuple[int, ...] = ()  # generation: when each of FUSION_POINTS' fractions is done

    def key(self) -> tuple:
        """Numbers a better candidate is no worse in (lower is better)."""
        done = self.done_ms if len(self.done_ms) else (0,) * len(FUSION_POINTS)
        return (*(self.time_ms.get(s, 0) for s in STAGES), self.reshard_ms, self.reshard_mib,
                *(np.asarray(done).T if np.ndim(done) == 2 else done), self.persistent_mib,
                *(self.transient_mib.get(s, 0) for s in STAGES))


@dataclass
class Space:
    """Everything the solvers need: tasks, the pools (`pools.PoolSpace`: their group sizes,
    memory budgets, price weights), candidates per (task, pool index, size)."""

    scenario: Scenario
    staleness: int
    fusion: bool
    shared: bool
    swap: bool  # co-located state moves to CPU memory during generation
    overlap_sync: bool  # the weight sync lands in the rollout group's shadow copy (staleness ≥ 1)
    partial: bool  # partial rollouts: unfinished responses continue in the next step
    objective: str
    tasks: list[Task]
    pools: list[PoolSpace]
    slots: int
    total_gpus: int
    # weight sync to a separate rollout group, by (slot 0's pool, the rollout group's pool)
    sync_ms: dict[tuple[int, int], int]
    target_ms: int | None = None  # gpus objective: the longest iteration reaching the target
    controller_ms: int = 0  # the controller's host time per step (`controller_seconds`)
    candidates: dict[tuple[str, int, int], list[Candidate]] = field(default_factory=dict)
    priced: int = 0  # candidates priced before pruning
    complete: bool = True  # False: the deadline passed before every (task, size) was priced
    caps: Capabilities | None = None  # `plan --framework`: only what the framework runs

    @property
    def kept(self) -> int:
        return sum(len(c) for c in self.candidates.values())

    @property
    def shapes(self) -> list[Shape]:
        """Every (pool index, size) a slot may take."""
        return all_shapes(self.pools)

    @property
    def generation(self) -> Task | None:
        return next((t for t in self.tasks if t.kind == "generation"), None)


def heads_for(sc: Scenario, shared: bool) -> dict[str, Head]:
    heads = {role: ROLE_HEADS[role] for role in sc.roles}
    if shared:
        heads["actor"] = Head.SHARED
    return heads


def tasks_for(sc: Scenario, shared: bool) -> list[Task]:
    """The tasks a scenario runs: generation (not DPO or SFT), training of each trainable
    model, the forward of each frozen one. Shared actor–critic folds the critic into the
    actor."""
    tasks = [] if sc.family.offline else [Task("actor", "generation")]
    tasks.append(Task("actor", "training"))
    if sc.critic is not None and not shared:
        tasks.append(Task("critic", "training"))
    tasks += [Task(r, "forward") for r in ("reference", "reward") if r in sc.roles]
    return tasks


def slot_sizes(total: int, per_node: int) -> list[int]:
    """Group sizes: powers of two inside a node, node multiples that are powers of two, and
    their complements to the whole cluster (so two groups can use every GPU)."""
    sizes = {1 << k for k in range(per_node.bit_length()) if 1 << k <= min(per_node, total)}
    nodes = total // per_node
    whole = {per_node * (1 << k) for k in range(nodes.bit_length()) if (1 << k) <= nodes}
    sizes |= whole | {total - s for s in whole if total - s > 0} | {total}
    return sorted(s for s in sizes if 0 < s <= total)


def _pow2_divisors(n: int, cap: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0 and (1 << k) <= cap]


def _tp_options(spec: ModelSpec, g: int, scale_up: int) -> list[int]:
    heads, kv = spec.num_attention_heads, spec.num_key_value_heads
    return [tp for tp in _pow2_divisors(g, scale_up)
            if heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)]


def _ep_options(spec: ModelSpec, ranks: int) -> list[int]:
    if not spec.moe:
        return [1]
    return [ep for ep in _pow2_divisors(ranks, ranks) if spec.moe.num_experts % ep == 0]


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


def _ms(seconds: Num) -> Num:
    """Whole milliseconds, rounded up (element-wise on arrays)."""
    return _whole(np.divide(seconds, MS), "milliseconds of one task")


def _mib(nbytes: Num) -> Num:
    """Whole MiB, rounded up (element-wise on arrays)."""
    return _whole(np.divide(nbytes, MIB), "MiB of one task")


def _whole(units: Num, what: str) -> Num:
    """`units` rounded up to int64, refused (InputError) beyond MAX_UNITS: the input bounds
    (planner/specs/bounds.py) keep every shipped case far below, but their extremes combined
    could leave int64 (and float64's exact integers), which numpy would cast silently."""
    up = np.ceil(units)
    if not np.all(up <= MAX_UNITS):  # also catches inf and NaN
        worst = float(np.nanmax(up)) if np.any(~np.isnan(up)) else float("nan")
        raise InputError(f"the workload is too large to plan: {worst:.3g} {what}, above the "
                         f"limit of {MAX_UNITS:.3g}; use fewer prompts, shorter sequences or "
                         "fewer ppo_epochs, or check the hardware profile's rates")
    return up.astype(np.int64)


def _product(**options: list) -> dict[str, np.ndarray]:
    """Every combination of the options, one array per option, in `itertools.product` order."""
    rows = list(product(*options.values()))
    return {name: np.array([row[k] for row in rows]) for k, name in enumerate(options)}


# --- the legal layouts, one shape (the degrees) at a time ------------------------------------


def _generation_shapes(space: Space, ps: PoolSpace, role: str, g: int
                       ) -> Iterator[LayoutVariants]:
    """Generation: tp, pp and ep (`_generation_experts`) with cp = 1; the variants are KV cache
    sizes (`_kv_levels`). Shapes within one scale-up domain with pp = 1 first; only when none
    fits, TP across domains and pipeline stages, as engines run a model too large for one
    domain (vLLM)."""
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
                levels = _kv_levels(space, ps, LayoutVariants(dp=dp, tp=tp, pp=pp, ep=ep, etp=etp))
                if levels:
                    found = True
                    yield LayoutVariants(dp=dp, tp=tp, pp=pp, ep=ep, etp=etp,
                                         kv_cache_tokens=np.array(levels))
        if found:
            return


def _kv_levels(space: Space, ps: PoolSpace, shape: LayoutVariants) -> list[int]:
    """KV cache sizes (tokens per replica) to offer a generation shape: one sequence of the
    longest length, doubling, up to what fits on a GPU alone or what the replica can use
    (`useful_kv_tokens`), that top included; under partial rollouts the `PARTIAL_KV_LEVELS`
    largest. Empty when not even one sequence fits. (Each size is a simulation; the ladder is
    shared by the shapes with the same replica count.)"""
    sc = ps.scenario
    gpu = sc.cluster.gpu
    reserve = gpu.runtime_reserve_gib * 2**30
    # the candidate's two memory numbers are rounded up to whole MiB: keep 2 MiB for that
    room = kv_tokens_that_fit(sc.actor, shape, (ps.budget_mib - 2) * MIB + reserve,
                              max_seqs(sc, shape), shadow_weights=space.overlap_sync,
                              resharding=True, reserve_bytes=reserve,
                              precision=rollout_precision_of(sc))
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    top = min(room, useful_kv_tokens(sc, shape))
    if top < longest:
        return []
    levels = [longest << k for k in range(0, top.bit_length(), KV_LEVEL_SHIFT)
              if longest << k < top] + [top]
    # partial rollouts keep the engine full: offer the largest sizes only (their simulation,
    # several steps of a stream, costs several times one rollout's)
    return levels[-PARTIAL_KV_LEVELS:] if space.partial else levels


def _training_shapes(space: Space, ps: PoolSpace, role: str, g: int
                     ) -> Iterator[LayoutVariants]:
    """Training: tp, pp, vp, cp, ep, etp; the variants are ZeRO × checkpointing × micro-batch
    × offload. Interleaved chunks vp (powers of two up to `MAX_VP`) where pp·vp divides the
    layers, with the micro-batch sizes that leave at least pp micro-batches per step
    (`time.interleave_problem`)."""
    sc = ps.scenario
    spec, gpu, w, n = sc.roles[role], sc.cluster.gpu, sc.workload, sequences(sc)
    offloads = ["none"] + (["optimizer", "both"] if ps.host_budget_mib else [])
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in (p for p in _pow2_divisors(g // tp, MAX_PP)
                   if spec.num_hidden_layers % p == 0):
            for cp in (c for c in _pow2_divisors(g // (tp * pp), g) if c == 1
                       or (w.max_seq_len % c == 0 and w.max_seq_len // c >= MIN_CP_CHUNK)):
                dp = g // (tp * pp * cp)
                per_rank = n / (w.mini_batches * dp)
                micro_batches = [b for b in MICRO_BATCHES if per_rank % b == 0]
                if per_rank < 1 or not micro_batches:
                    continue
                zeros = ([0, 1] if pp > 1 else [0, 1, 2, 3]) if dp * cp > 1 else [0]
                for vp in _vp_options(spec.num_hidden_layers, pp):
                    sizes = [b for b in micro_batches if vp == 1 or per_rank // b >= pp]
                    if not sizes:
                        continue
                    options = _product(zero=zeros, checkpointing=CHECKPOINTING,
                                       micro_batch=sizes, offload=offloads)
                    for ep, etp in _expert_layouts(spec, dp * cp * tp, tp):
                        yield LayoutVariants(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp,
                                             vp=vp, sp=tp > 1, **options)


def _vp_options(layers: int, pp: int) -> list[int]:
    """Interleaved chunks per rank the search offers: 1, and with pp > 1 the powers of two up
    to `MAX_VP` with pp·vp dividing the layers (Megatron's even split into chunks)."""
    return [1] + [v for v in (1 << k for k in range(1, MAX_VP.bit_length()))
                  if pp > 1 and v <= MAX_VP and layers % (pp * v) == 0]


def _forward_shapes(space: Space, ps: PoolSpace, role: str, g: int
                    ) -> Iterator[LayoutVariants]:
    """A frozen model's forward: tp, pp, ep, etp; the variants are ZeRO (0 or 3) × micro-batch."""
    sc = ps.scenario
    spec, gpu, n = sc.roles[role], sc.cluster.gpu, sequences(sc)
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in (p for p in _pow2_divisors(g // tp, MAX_PP)
                   if spec.num_hidden_layers % p == 0):
            dp = g // (tp * pp)
            micro_batches = [b for b in MICRO_BATCHES if (n / dp) % b == 0]
            if n / dp < 1 or not micro_batches:
                continue
            options = _product(zero=[0, 3] if dp > 1 else [0], micro_batch=micro_batches)
            for ep, etp in _expert_layouts(spec, dp * tp, tp):
                yield LayoutVariants(dp=dp, tp=tp, pp=pp, ep=ep, etp=etp, **options)


SHAPES = {"generation": _generation_shapes, "training": _training_shapes,
          "forward": _forward_shapes}


# --- pricing -----------------------------------------------------------------------------------


def _price(space: Space, ps: PoolSpace, task: Task, lay: Layout | LayoutVariants, head: Head
           ) -> Candidate:
    """A layout priced by the cost model (`task_memory` and `task_time`, the functions
    `rlplan evaluate` uses) on pool `ps` in the solvers' units; for layout variants every
    number is an array over the variants."""
    sc = ps.scenario
    role = task.role
    if task.kind == "generation":  # the variants are KV cache sizes, each its own schedule
        mem = generation_memory(sc, lay, space.overlap_sync, resharding=False)
        rollouts = [generation_rollout(sc, one, space.partial)
                    for one in ([lay] if isinstance(lay, Layout) else lay)]
        return Candidate(
            layout=lay, time_ms={"generation": _ms(np.array([r.seconds for r in rollouts]))},
            persistent_mib=_mib(mem.persistent), transient_mib={"generation": _mib(mem.transient)},
            reshard_ms=_ms(resharding_time(sc.actor, head, lay, sc.cluster.gpu)),
            reshard_mib=_mib(bytes_resharding_buffer(sc.actor, lay,
                                                     rollout_precision_of(sc).weight_bytes)),
            done_ms=_ms(np.array([[c for c, _ in r.completions] for r in rollouts])))
    if task.kind == "forward":
        mem = task_memory(sc, role, "assessment", lay, head)
        return Candidate(
            layout=lay, time_ms={"assessment": _ms(task_time(sc, role, "assessment", lay,
                                                             head)[0])},
            persistent_mib=_mib(mem.persistent), transient_mib={"assessment": _mib(mem.transient)})
    # training, with the model's assessment forward (old log-probs / values; not DPO's, SFT's)
    train = task_memory(sc, role, "training", lay, head)
    times = {"training": _ms(task_time(sc, role, "training", lay, head)[0])}
    transient = {"training": _mib(train.transient)}
    if runs_stage(sc, role, "assessment"):
        times["assessment"] = _ms(task_time(sc, role, "assessment", lay, head)[0])
        transient["assessment"] = _mib(task_memory(sc, role, "assessment", lay,
                                                   head).transient)
    return Candidate(layout=lay, time_ms=times, persistent_mib=_mib(train.persistent),
                     transient_mib=transient, host_mib=_mib(train.host_offload))


def _at(priced: Candidate, i: int, layout: Layout) -> Candidate:
    """Candidate `i` of a priced batch (numbers or arrays), in Python ints."""
    def num(x: Num) -> int:
        return int(x[i] if np.ndim(x) else x)

    done = np.asarray(priced.done_ms)
    return Candidate(layout=layout, time_ms={s: num(v) for s, v in priced.time_ms.items()},
                     persistent_mib=num(priced.persistent_mib),
                     transient_mib={s: num(v) for s, v in priced.transient_mib.items()},
                     host_mib=num(priced.host_mib), reshard_ms=num(priced.reshard_ms),
                     reshard_mib=num(priced.reshard_mib),
                     done_ms=tuple(int(x) for x in (done[i] if done.ndim == 2 else done)))


def _candidates(space: Space, ps: PoolSpace, task: Task, g: int, heads: dict[str, Head],
                one_at_a_time: bool = False) -> list[Candidate]:
    """The kept candidates of `task` on `g` GPUs: `pareto` of every legal layout (`space.priced`
    counts them all). Each shape's variants are priced in one numpy pass and pruned on their
    integer arrays, only the kept becoming `Candidate`s; `one_at_a_time` prices each `Layout`
    through the scalar cost model instead (the reference the tests hold the numpy pass to)."""
    head = heads[task.role]
    spec = space.scenario.roles[task.role]
    shapes = list(SHAPES[task.kind](space, ps, task.role, g))
    if space.caps is not None:  # the framework's rules, before pricing where a shape fails all
        masks = [space.caps.mask(task.kind, variants, spec) for variants in shapes]
        shapes = [v for v, m in zip(shapes, masks, strict=True) if np.any(m)]
    space.priced += sum(len(variants) for variants in shapes)
    if one_at_a_time:
        return pareto(ps, [_at(_price(space, ps, task, lay, head), 0, lay)
                              for variants in shapes for lay in variants
                              if space.caps is None or space.caps.mask(task.kind, lay, spec)])
    priced = [_price(space, ps, task, variants, head) for variants in shapes]
    keys, rows = [], []  # the key and (shape, variant) of every candidate that fits alone
    for k, (c, variants) in enumerate(zip(priced, shapes, strict=True)):
        n = len(variants)
        allowed = True if space.caps is None else space.caps.mask(task.kind, variants, spec)
        fit = np.flatnonzero(np.broadcast_to(
            fits_alone(ps, c.persistent_mib, c.transient_mib, c.host_mib) & allowed, n))
        keys.append(np.column_stack([np.broadcast_to(x, n) for x in c.key()])[fit])
        rows += [(k, i) for i in fit.tolist()]
    if not rows:
        return []
    kept = [rows[r] for r in _front(np.concatenate(keys))]
    return _by_time([_at(priced[k], i, shapes[k][i]) for k, i in kept])


def fits_alone(ps: PoolSpace, persistent_mib: Num, transient_mib: dict[str, Num],
               host_mib: Num = 0) -> bool | np.ndarray:
    """Whether a candidate fits a GPU of pool `ps` with nothing else resident (and its offload
    the host); element-wise on arrays of candidates."""
    peak = reduce(np.maximum, transient_mib.values(), 0)  # max(…, default=0): bytes ≥ 0
    return (persistent_mib + peak <= ps.budget_mib) & (host_mib <= ps.host_budget_mib)


def pareto(ps: PoolSpace, cands: list[Candidate]) -> list[Candidate]:
    """Drop candidates that cannot fit alone, and those another candidate beats or ties in every
    number (ties keep the first); the result is sorted by total stage time."""
    fits = [c for c in cands
            if fits_alone(ps, c.persistent_mib, c.transient_mib, c.host_mib)]
    if not fits:
        return []
    return _by_time([fits[i] for i in _front(np.array([c.key() for c in fits], dtype=np.int64))])


def _front(keys: np.ndarray) -> list[int]:
    """The rows of `keys` (one candidate's `Candidate.key` each) that no other row beats or ties
    in every number; of equal rows the first."""
    order = np.lexsort(keys.T[::-1])  # lexicographic, stable: a dominating key sorts first
    kept: list[int] = []
    front = np.empty_like(keys)  # the kept keys, in the order kept
    for i in order:
        if not (front[:len(kept)] <= keys[i]).all(axis=1).any():
            front[len(kept)] = keys[i]
            kept.append(i)
    return kept


def _by_time(cands: list[Candidate]) -> list[Candidate]:
    return sorted(cands, key=lambda c: (sum(c.time_ms.values()), c.key()))


def host_budget_mib(sc: Scenario) -> int:
    """CPU memory per GPU for offloaded state: the node's host memory shared by its GPUs; 0
    (no offload) when the profile gives no host memory or no host link to price it with."""
    gpu = sc.cluster.gpu
    if gpu.host_bytes_per_gpu is None or gpu.host_link_gbps is None:
        return 0
    return math.floor(gpu.host_bytes_per_gpu / MIB)


PriceCache = dict[tuple, tuple[list[Candidate], int]]
"""(task, pool, size, variant) → (kept candidates, candidates priced): what a build already priced
for the same scenario. Generation varies with an overlapped weight sync (the shadow copy) and
partial rollouts, the actor with a shared critic head; nothing else depends on the inter-model
options."""


def pool_space(sc: Scenario, name: str, caps: Capabilities | None, weight: int) -> PoolSpace:
    """Pool `name` of `sc` as the solvers see it (`caps`: only the sizes the framework runs)."""
    view = sc.on_pool(name)
    cluster, gpu = view.cluster, view.cluster.gpu
    return PoolSpace(
        name=name, scenario=view,
        sizes=[s for s in slot_sizes(cluster.total_gpus, cluster.gpus_per_node)
               if caps is None or caps.size_ok(s, cluster.gpus_per_node)],
        total_gpus=cluster.total_gpus,
        budget_mib=math.floor((gpu.memory_bytes - gpu.runtime_reserve_gib * 2**30) / MIB),
        host_budget_mib=host_budget_mib(view),
        swap_q=(round(SWAP_SCALE * swap_time(MIB, gpu, cluster.gpus_per_node) / MS)
                if gpu.host_link_gbps else 0), weight=weight)


def build_space(sc: Scenario, staleness: int = 0, fusion: bool = False, shared: bool = False,
                swap: bool = False, overlap_sync: bool = False, partial: bool = False,
                slots: int = MAX_SLOTS, cache: PriceCache | None = None,
                deadline: Deadline | None = None, caps: Capabilities | None = None) -> Space:
    """Enumerate and price every legal candidate of every task on every group size of every
    pool — the largest sizes first, so that when `deadline` passes part way (`Space.complete`
    False) what was priced still holds the simplest plans (everything on a whole pool).
    `caps`: only the group sizes and layouts that framework runs (the cache must be for the
    same `caps`)."""
    heads = heads_for(sc, shared)
    tasks = tasks_for(sc, shared)
    cache = {} if cache is None else cache
    pools = [pool_space(sc, p.name, caps, w)
             for p, w in zip(sc.pool_list, price_weights(sc), strict=True)]
    sync = {(a, b): int(_ms(sync_between(sc, heads["actor"], pa.scenario.cluster,
                                         pb.scenario.cluster)))
            for a, pa in enumerate(pools) for b, pb in enumerate(pools)}
    space = Space(
        scenario=sc, staleness=staleness, fusion=fusion, shared=shared, swap=swap,
        overlap_sync=overlap_sync, partial=partial, objective=sc.search.objective, tasks=tasks,
        pools=pools, slots=min(slots, len(tasks)), total_gpus=sc.total_gpus, sync_ms=sync,
        target_ms=(math.floor(tokens_per_step(sc) / sc.search.target_tokens_per_s / MS)
                   if sc.search.objective == "gpus" else None), caps=caps,
        controller_ms=int(_ms(controller_seconds(sc))))
    # largest sizes first (pools in turn), so a deadline leaves each pool's whole groups
    for p, g in sorted(space.shapes, key=lambda shape: (-shape[1], shape[0])):
        for task in tasks:
            variant = ((overlap_sync, partial) if task.kind == "generation" else None,
                       shared if task.role == "actor" else None)
            key = (task.name, p, g, variant)
            if key not in cache:
                if deadline is not None and deadline.expired():
                    space.complete = False
                    continue
                before = space.priced
                cache[key] = (_candidates(space, pools[p], task, g, heads),
                              space.priced - before)
            else:
                space.priced += cache[key][1]
            if cache[key][0]:
                space.candidates[(task.name, p, g)] = cache[key][0]
    # in (task, pool, size) order whatever order they were priced in
    space.candidates = {(t.name, p, g): space.candidates[(t.name, p, g)] for t in tasks
                        for p, g in space.shapes if (t.name, p, g) in space.candidates}
    return space

"""The search space: tasks, group-size options and priced candidate layouts.

A *task* is what one model does on one group: the actor's generation; a trainable model's
training, which also carries its forward in the assessment stage (the actor's old log-probs,
the critic's values — run with the training layout, as verl and NeMo-RL do); a frozen model's
assessment forward. Up to `MAX_SLOTS` device groups ("slots") hold the tasks; slot 0 holds the
actor's training, so generation on slot 0 is the co-located hybrid engine (resharding) and
generation elsewhere a separate rollout group (weight sync).

Every candidate is priced once by the cost model (`planner.cost.iteration.task_time` and
`task_memory`, the functions `rlplan evaluate` uses) in integer milliseconds and MiB, and
candidates no better in any number than another are dropped. The CP-SAT model (`cpsat.py`) and
the brute-force enumerator (`brute.py`) read this space and score a choice with the same
integer arithmetic (`score`), so their optima coincide.

Legal layouts (DESIGN.md convention g = dp·tp·pp·cp, ep carved out of dp·cp·tp):
- tp a power of two dividing g, within one scale-up domain, dividing the attention heads and
  compatible with the KV heads (one divides the other); sequence parallelism on whenever tp > 1
  (it only saves memory in the model);
- pp dividing the layers (Megatron's even split), at most `MAX_PP`;
- cp a power of two dividing the longest sequence into chunks of ≥ `MIN_CP_CHUNK` tokens;
- ep dividing the experts and dp·cp·tp (MoE only);
- micro-batches dividing each rank's share of a mini-batch;
- ZeRO 0–3 for data-parallel training (0–1 with pipeline parallelism, as Megatron), 0 or 3 for
  a frozen model's forward; checkpointing none / selective / full; CPU offload of the optimizer
  state, or of optimizer state and parameters, when the profile gives a host link and host
  memory (offloaded bytes per GPU within its share of the node's host memory).
Generation: tp and ep as above, pp = cp = 1, and concurrency levels (powers of two up to the
replica's share of the step) as `max_num_seqs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from planner.cost.iteration import (
    resharding_time,
    sequences,
    swap_time,
    task_memory,
    task_time,
    weight_sync_time,
)
from planner.cost.memory import ROLE_HEADS
from planner.plan import Layout
from planner.specs.model import ModelSpec
from planner.specs.scenario import Scenario
from planner.specs.workload import Family
from planner.theory.shape import Head

MAX_SLOTS = 3
MAX_PP = 16
MIN_CP_CHUNK = 4096
MICRO_BATCHES = (1, 2, 4, 8)
MS = 1e-3  # seconds per time unit of the solver
MIB = 2**20  # bytes per memory unit of the solver
FUSION_SCALE = 1000  # fixed-point scale of the fusion overlap coefficient
SWAP_SCALE = 1000  # fixed-point scale of the swap time per MiB
STAGES = ("generation", "assessment", "training")


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
    """One priced layout of a task on a group of a given size."""

    layout: Layout
    time_ms: dict[str, int]  # load per stage on its group
    persistent_mib: int  # kept between stages (model states; a rollout group's weights)
    transient_mib: dict[str, int]  # needed during a stage only
    host_mib: int = 0  # CPU memory per GPU holding offloaded state
    reshard_ms: int = 0  # generation on the training group: re-laying the weights
    tail_ms: int = 0  # generation: the straggler tail (fusion overlaps it)
    overlap: int = 0  # generation: FUSION_SCALE / waves (share of assessment after the last wave)

    def key(self) -> tuple:
        """Numbers a better candidate is no worse in (lower is better)."""
        return (*(self.time_ms.get(s, 0) for s in STAGES), self.reshard_ms, -self.tail_ms,
                self.overlap, self.persistent_mib,
                *(self.transient_mib.get(s, 0) for s in STAGES))


@dataclass
class Space:
    """Everything the solvers need: tasks, slot sizes, candidates per (task, size)."""

    scenario: Scenario
    staleness: int
    fusion: bool
    shared: bool
    swap: bool  # co-located state moves to CPU memory during generation
    objective: str
    tasks: list[Task]
    sizes: list[int]
    slots: int
    total_gpus: int
    budget_mib: int  # per GPU, after the runtime reserve
    host_budget_mib: int  # CPU memory per GPU for offloaded state (its share of the node)
    sync_ms: int  # weight sync to a separate rollout group
    swap_q: int  # ms per 1000 MiB per GPU moved to CPU memory and back (swap)
    candidates: dict[tuple[str, int], list[Candidate]] = field(default_factory=dict)
    priced: int = 0  # candidates priced before pruning

    @property
    def kept(self) -> int:
        return sum(len(c) for c in self.candidates.values())

    @property
    def generation(self) -> Task | None:
        return next((t for t in self.tasks if t.kind == "generation"), None)


def heads_for(sc: Scenario, shared: bool) -> dict[str, Head]:
    heads = {role: ROLE_HEADS[role] for role in sc.roles}
    if shared:
        heads["actor"] = Head.SHARED
    return heads


def tasks_for(sc: Scenario, shared: bool) -> list[Task]:
    """The tasks a scenario runs: generation (not DPO), training of each trainable model,
    the forward of each frozen one. Shared actor–critic folds the critic into the actor."""
    tasks = [] if sc.family is Family.DPO else [Task("actor", "generation")]
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


def _ms(seconds: float) -> int:
    return math.ceil(seconds / MS)


def _mib(nbytes: float) -> int:
    return math.ceil(nbytes / MIB)


def _generation(space: Space, g: int, heads: dict[str, Head]) -> list[Candidate]:
    sc = space.scenario
    spec, gpu, n = sc.actor, sc.cluster.gpu, sequences(sc)
    out = []
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        dp = g // tp
        share = n / dp
        if share < 1:
            continue
        for ep in _ep_options(spec, g):
            base = Layout(group="g", dp=dp, tp=tp, ep=ep)
            levels = sorted({min(1 << k, math.ceil(share)) for k in range(
                math.ceil(share).bit_length() + 1)})
            for batch in levels:
                lay = base.model_copy(update={"max_num_seqs": batch})
                mem = task_memory(sc, "actor", "generation", lay, heads["actor"], batch,
                                  space.staleness, resharding=True)
                space.priced += 1
                persistent, transient = _mib(mem.persistent), {"generation": _mib(mem.transient)}
                if not fits_alone(space, persistent, transient):
                    continue
                seconds, parts = task_time(sc, "actor", "generation", lay, heads["actor"], batch)
                waves = max(1.0, share / batch)
                out.append(Candidate(
                    layout=lay, time_ms={"generation": _ms(seconds)},
                    persistent_mib=persistent, transient_mib=transient,
                    reshard_ms=_ms(resharding_time(spec, heads["actor"], lay, gpu)),
                    tail_ms=int(parts["decode_tail"] / MS),
                    overlap=round(FUSION_SCALE / waves)))
    return out


def _training(space: Space, role: str, g: int, heads: dict[str, Head]) -> list[Candidate]:
    sc = space.scenario
    spec, gpu, w = sc.roles[role], sc.cluster.gpu, sc.workload
    n = sequences(sc)
    offloads = ["none"] + (["optimizer", "both"] if space.host_budget_mib else [])
    out = []
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in (p for p in _pow2_divisors(g // tp, MAX_PP)
                   if spec.num_hidden_layers % p == 0):
            for cp in (c for c in _pow2_divisors(g // (tp * pp), g) if c == 1
                       or (w.max_seq_len % c == 0 and w.max_seq_len // c >= MIN_CP_CHUNK)):
                dp = g // (tp * pp * cp)
                per_rank = n / (w.mini_batches * dp)
                if per_rank < 1:
                    continue
                zeros = ([0, 1] if pp > 1 else [0, 1, 2, 3]) if dp * cp > 1 else [0]
                for ep, zero, ckpt, mb, off in product(
                        _ep_options(spec, dp * cp * tp), zeros, ("none", "selective", "full"),
                        [b for b in MICRO_BATCHES if per_rank % b == 0], offloads):
                    lay = Layout(group="g", dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, sp=tp > 1,
                                 zero=zero, checkpointing=ckpt, micro_batch=mb, offload=off)
                    if (c := _trainable(space, role, lay, heads[role])) is not None:
                        out.append(c)
    return out


def _trainable(space: Space, role: str, lay: Layout, head: Head) -> Candidate | None:
    """A training candidate (with its assessment forward), or None when it cannot fit even
    alone — then its time is not worth pricing."""
    sc = space.scenario
    space.priced += 1
    train = task_memory(sc, role, "training", lay, head, 0, space.staleness)
    transient = {"training": _mib(train.transient)}
    forward = sc.family is not Family.DPO  # old log-probs / values in the assessment stage
    if forward:
        transient["assessment"] = _mib(task_memory(sc, role, "assessment", lay, head, 0,
                                                   space.staleness).transient)
    persistent, host = _mib(train.persistent), _mib(train.host_offload)
    if not fits_alone(space, persistent, transient, host):
        return None
    times = {"training": _ms(task_time(sc, role, "training", lay, head)[0])}
    if forward:
        times["assessment"] = _ms(task_time(sc, role, "assessment", lay, head)[0])
    return Candidate(layout=lay, time_ms=times, persistent_mib=persistent,
                     transient_mib=transient, host_mib=host)


def _forward(space: Space, role: str, g: int, heads: dict[str, Head]) -> list[Candidate]:
    sc = space.scenario
    spec, gpu, n = sc.roles[role], sc.cluster.gpu, sequences(sc)
    out = []
    for tp in _tp_options(spec, g, gpu.scale_up_gpus):
        for pp in (p for p in _pow2_divisors(g // tp, MAX_PP)
                   if spec.num_hidden_layers % p == 0):
            dp = g // (tp * pp)
            if n / dp < 1:
                continue
            for ep, zero, mb in product(_ep_options(spec, dp * tp), [0, 3] if dp > 1 else [0],
                                        MICRO_BATCHES):
                if (n / dp) % mb:
                    continue
                lay = Layout(group="g", dp=dp, tp=tp, pp=pp, ep=ep, zero=zero, micro_batch=mb)
                mem = task_memory(sc, role, "assessment", lay, heads[role])
                space.priced += 1
                persistent, transient = _mib(mem.persistent), {"assessment": _mib(mem.transient)}
                if not fits_alone(space, persistent, transient):
                    continue
                seconds, _ = task_time(sc, role, "assessment", lay, heads[role])
                out.append(Candidate(layout=lay, time_ms={"assessment": _ms(seconds)},
                                     persistent_mib=persistent, transient_mib=transient))
    return out


def fits_alone(space: Space, persistent_mib: int, transient_mib: dict[str, int],
               host_mib: int = 0) -> bool:
    """Whether a candidate fits a GPU with nothing else resident (and its offload the host)."""
    return (persistent_mib + max(transient_mib.values(), default=0) <= space.budget_mib
            and host_mib <= space.host_budget_mib)


def pareto(space: Space, cands: list[Candidate]) -> list[Candidate]:
    """Drop candidates that cannot fit alone, and those another candidate beats or ties in every
    number (ties keep the first); the result is sorted by total stage time."""
    fits = [c for c in cands
            if fits_alone(space, c.persistent_mib, c.transient_mib, c.host_mib)]
    if not fits:
        return []
    keys = np.array([c.key() for c in fits], dtype=np.int64)
    order = np.lexsort(keys.T[::-1])  # lexicographic: a dominating key sorts first
    kept: list[int] = []
    for i in order:
        if not kept or not np.any(np.all(keys[kept] <= keys[i], axis=1)):
            kept.append(i)
    return sorted((fits[i] for i in kept), key=lambda c: (sum(c.time_ms.values()), c.key()))


def host_budget_mib(sc: Scenario) -> int:
    """CPU memory per GPU for offloaded state: the node's host memory shared by its GPUs; 0
    (no offload) when the profile gives no host memory or no host link to price it with."""
    gpu = sc.cluster.gpu
    if gpu.host_bytes_per_gpu is None or gpu.host_link_gbps is None:
        return 0
    return math.floor(gpu.host_bytes_per_gpu / MIB)


PriceCache = dict[tuple, tuple[list[Candidate], int]]
"""(task, size, variant) → (kept candidates, candidates priced): what a build already priced
for the same scenario. Generation varies with asynchrony (the shadow copy), the actor with a
shared critic head; nothing else depends on the inter-model options."""


def build_space(sc: Scenario, staleness: int = 0, fusion: bool = False, shared: bool = False,
                swap: bool = False, slots: int = MAX_SLOTS,
                cache: PriceCache | None = None) -> Space:
    """Enumerate and price every legal candidate of every task on every group size."""
    gpu, cluster = sc.cluster.gpu, sc.cluster
    heads = heads_for(sc, shared)
    tasks = tasks_for(sc, shared)
    cache = {} if cache is None else cache
    space = Space(
        scenario=sc, staleness=staleness, fusion=fusion, shared=shared, swap=swap,
        objective=sc.search.objective, tasks=tasks,
        sizes=slot_sizes(cluster.total_gpus, cluster.gpus_per_node),
        slots=min(slots, len(tasks)), total_gpus=cluster.total_gpus,
        budget_mib=math.floor((gpu.memory_bytes - gpu.runtime_reserve_gib * 2**30) / MIB),
        host_budget_mib=host_budget_mib(sc),
        sync_ms=_ms(weight_sync_time(sc.actor, heads["actor"])),
        swap_q=round(SWAP_SCALE * swap_time(MIB, gpu) / MS) if gpu.host_link_gbps else 0)
    for task in tasks:
        variant = (staleness >= 1 if task.kind == "generation" else None,
                   shared if task.role == "actor" else None)
        for g in space.sizes:
            key = (task.name, g, variant)
            if key not in cache:
                before = space.priced
                if task.kind == "generation":
                    cands = _generation(space, g, heads)
                elif task.kind == "training":
                    cands = _training(space, task.role, g, heads)
                else:
                    cands = _forward(space, task.role, g, heads)
                cache[key] = (pareto(space, cands),
                              space.priced - before)
            else:
                space.priced += cache[key][1]
            if cache[key][0]:
                space.candidates[(task.name, g)] = cache[key][0]
    return space


# --- the objective, in the solvers' integer units ----------------------------------------------


@dataclass(frozen=True)
class Choice:
    """A point of the space: each slot's size (0 = unused), each task's slot and candidate."""

    sizes: tuple[int, ...]
    slot: dict[str, int]
    candidate: dict[str, Candidate]


def valid(space: Space, ch: Choice) -> bool:
    """Structural rules both solvers share: slot 0 holds the actor's training; used slots come
    first with non-increasing sizes after slot 0; each used slot holds a task; the groups fit
    the cluster; under fusion no assessment shares the generation group; swapping state out
    during generation needs the generation co-located (slot 0)."""
    used = [s > 0 for s in ch.sizes]
    if not used[0] or ch.slot["actor.training"] != 0 or sum(ch.sizes) > space.total_gpus:
        return False
    if any(used[k + 1] and not used[k] for k in range(len(used) - 1)):
        return False
    if any(ch.sizes[k] < ch.sizes[k + 1] for k in range(1, len(ch.sizes) - 1)):
        return False
    if any(u and not any(ch.slot[t.name] == k for t in space.tasks) for k, u in enumerate(used)):
        return False
    gen = space.generation
    if space.swap and (gen is None or ch.slot[gen.name] != 0):
        return False
    if space.fusion and gen is not None:
        gk = ch.slot[gen.name]
        if any(ch.slot[t.name] == gk for t in space.tasks if "assessment" in t.stages):
            return False
    return True


def fits(space: Space, ch: Choice) -> bool:
    """Memory on every slot in every stage: resident state + what the stage needs. Resident:
    every non-generation task's persistent state, and a rollout group's weights (generation off
    slot 0); the generation stage needs the actor's inference weights either way. Offloaded
    state (and, when swapping, slot 0's resident state) fits the GPU's share of host memory."""
    gen = space.generation
    for k, size in enumerate(ch.sizes):
        if not size:
            continue
        on_k = [t for t in space.tasks if ch.slot[t.name] == k]
        resident = sum(ch.candidate[t.name].persistent_mib for t in on_k if t is not gen)
        rollout = (ch.candidate[gen.name].persistent_mib
                   if gen is not None and gen in on_k and k != 0 else 0)
        if resident + rollout > space.budget_mib:
            return False
        host = sum(ch.candidate[t.name].host_mib for t in on_k)
        swapped = space.swap and k == 0
        if host + (resident if swapped else 0) > space.host_budget_mib:
            return False
        for t in on_k:
            c = ch.candidate[t.name]
            for need in c.transient_mib.values():
                own = c.persistent_mib if t is gen else rollout
                held = 0 if (swapped and t is gen) else resident
                if held + own + need > space.budget_mib:
                    return False
    return True


def stage_loads(space: Space, ch: Choice) -> dict[int, dict[str, int]]:
    loads = {k: dict.fromkeys(STAGES, 0) for k, s in enumerate(ch.sizes) if s}
    for t in space.tasks:
        for stage, ms in ch.candidate[t.name].time_ms.items():
            loads[ch.slot[t.name]][stage] += ms
    return loads


def score(space: Space, ch: Choice) -> int:
    """The iteration time in ms (objective "time") or ms × GPUs (objective "cost")."""
    loads = stage_loads(space, ch)
    S = {s: max(load[s] for load in loads.values()) for s in STAGES}
    gen = space.generation
    sync = 0
    gen_slot = ch.slot[gen.name] if gen else None
    if gen:
        c = ch.candidate[gen.name]
        sync = c.reshard_ms if gen_slot == 0 else space.sync_ms
        if space.swap:
            held = sum(ch.candidate[t.name].persistent_mib for t in space.tasks
                       if t is not gen and ch.slot[t.name] == 0)
            sync += -(-space.swap_q * held // SWAP_SCALE)
    ga = S["generation"] + S["assessment"]
    if space.fusion and gen:
        c = ch.candidate[gen.name]
        steady = S["generation"] - c.tail_ms  # when the last wave's sequences are out
        ga = max(S["generation"],
                 -(-(FUSION_SCALE * steady + c.overlap * S["assessment"]) // FUSION_SCALE),
                 -(-(c.overlap * steady + FUSION_SCALE * S["assessment"]) // FUSION_SCALE))
    sequential = ga + sync + S["training"]
    if space.staleness >= 1:
        busy = [sum(load.values()) + (sync if k == 0 or k == gen_slot else 0)
                for k, load in loads.items()]
        time_ms = max(max(busy), -(-sequential // (space.staleness + 1)))
    else:
        time_ms = sequential
    return time_ms * sum(ch.sizes) if space.objective == "cost" else time_ms

"""The rules a plan must keep to be one the search could choose: `check_plan` is what
`rlplan evaluate` checks a plan with, and the search draws its layouts and placements through
the same predicates (`planner.search.layouts`, `planner.search.solve.to_plan_input`).

A plan's own shape (group sizes matching the degrees, expert layouts a framework runs, stages a
role has) is checked when it is read (`planner.plan.PlanInput`); what needs the models and the
algorithm is checked here. Each refusal names the field and the fix.
"""

from __future__ import annotations

from functools import cache

from planner.cost.pipeline_split import split_problem
from planner.cost.step import sequences
from planner.cost.time import interleave_problem
from planner.errors import InputError
from planner.plan import Layout, PlanInput
from planner.specs.model import ModelSpec
from planner.specs.scenario import Scenario


def tp_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why tensor parallelism `tp` cannot shard `spec`'s attention (None: it can): it must
    divide the attention heads, and the KV heads must divide it or be divided by it."""
    heads, kv = spec.num_attention_heads, spec.num_key_value_heads
    if heads % tp:
        return f"tp {tp} does not divide the {heads} attention heads of {spec.name}"
    if kv % tp and tp % kv:
        return (f"tp {tp} and the {kv} KV heads of {spec.name} do not divide one another "
                "(the KV heads are split or replicated whole)")
    return None


def ep_problem(spec: ModelSpec, ep: int, etp: int | None) -> str | None:
    """Why expert parallelism `ep` (and expert tensor parallelism `etp`) cannot shard
    `spec`'s experts (None: it can): a dense model has none; the experts must split evenly."""
    if spec.moe is None:
        if ep > 1 or etp is not None:
            return f"{spec.name} is dense: it has no experts to shard"
        return None
    if spec.moe.num_experts % ep:
        return f"ep {ep} does not divide the {spec.moe.num_experts} experts of {spec.name}"
    return None


def layout_problem(spec: ModelSpec, layout: Layout) -> str | None:
    """Why `layout` cannot run `spec` (None: it can): its tp, ep/etp and pipeline stages."""
    if (why := tp_problem(spec, layout.tp)) is not None:
        return why
    if (why := ep_problem(spec, layout.ep, layout.etp)) is not None:
        return why
    if layout.pp > spec.num_hidden_layers:
        return f"pp {layout.pp} is more stages than the {spec.num_hidden_layers} layers"
    return None


def zero_problem(pp: int, zero: int) -> str | None:
    """Why ZeRO stage `zero` cannot train with `pp` pipeline stages (None: it can): the pipeline
    engines rlplan plans for shard at most the optimizer state across data parallelism —
    Megatron-Core's distributed optimizer, DeepSpeed's pipeline engine (ZeRO-1)."""
    if pp > 1 and zero > 1:
        return (f"zero {zero} with pp {pp}: Megatron's and DeepSpeed's pipelines shard at most "
                "the optimizer state (ZeRO-1, Megatron's distributed optimizer)")
    return None


def rank_share(sc: Scenario, stage: str, dp: int) -> float:
    """Sequences each data-parallel rank runs per pass: of a mini-batch in training, of the
    step's whole batch in a forward (assessment)."""
    batches = sc.workload.mini_batches if stage == "training" else 1
    return sequences(sc) / (batches * dp)


@cache
def micro_batch_sizes(share: float) -> tuple[int, ...]:
    """The micro-batch sizes (sequences) that split a rank's `share` of sequences, in order:
    every size dividing it, none where it is not whole. The frameworks' trainers run whole
    micro-batches that divide it (verl asserts it, Megatron and DeepSpeed accumulate a whole
    number of them), and the search draws every one of them (`planner.search.layouts`)."""
    if share < 1 or share != int(share):
        return ()
    return tuple(b for b in range(1, int(share) + 1) if int(share) % b == 0)


def interleaved_micro_batch_sizes(share: float, pp: int, vp: int) -> tuple[int, ...]:
    """`micro_batch_sizes(share)` that `vp` interleaved chunks over `pp` stages can run: those
    leaving at least pp micro-batches (`time.interleave_problem`; all of them at vp 1)."""
    return tuple(b for b in micro_batch_sizes(share)
                 if interleave_problem(pp, vp, share // b) is None)


def micro_batch_at_most(share: float, micro_batch: int) -> int:
    """The largest micro-batch that splits `share` (`micro_batch_sizes`) and is at most
    `micro_batch`: how a framework's micro-batch that does not divide the share is priced
    (one larger than the share runs as the share; a token budget packs about as many).
    `micro_batch` itself where the share is not whole (`micro_batch_problem` says why)."""
    sizes = micro_batch_sizes(share)
    return max((b for b in sizes if b <= micro_batch), default=micro_batch)


def micro_batch_problem(share: float, micro_batch: int) -> str | None:
    """Why micro-batches of `micro_batch` sequences cannot split a rank's `share` (None: they
    can, `micro_batch_sizes`)."""
    sizes = micro_batch_sizes(share)
    if not sizes:
        return (f"each data-parallel rank would run {share:g} sequences, not a whole number; "
                "choose a dp that divides the batch")
    if micro_batch not in sizes:
        below = max(b for b in sizes if b < micro_batch)
        above = [b for b in sizes if b > micro_batch][:1]
        return (f"{micro_batch} does not divide the {int(share)} sequences each data-parallel "
                f"rank runs; use {below}" + (f" or {above[0]}" if above else "")
                + " (a size that divides it)")
    return None


def placement_of(groups: dict[str, set[str]]) -> str:
    """The placement a plan's groups make (group → the roles with a layout on it): one group
    is co-located, one role per group disaggregated, anything else partial."""
    if len(groups) == 1:
        return "colocated"
    return "disaggregated" if all(len(roles) == 1 for roles in groups.values()) else "partial"


def check_plan(sc: Scenario, plan: PlanInput) -> None:
    """Refuse (InputError, naming the field and the fix) a plan the search could not choose
    for `sc`: a layout its model cannot run (`layout_problem`; a rollout with context
    parallelism, which no engine runs; a training or assessment
    pipeline split Megatron cannot run, `pipeline_split.split_problem`), a micro-batch that
    does not divide its rank's share (`micro_batch_problem`) or leaves an interleaved pipeline
    fewer than pp micro-batches (`time.interleave_problem`), ZeRO past the optimizer state in
    a training pipeline (`zero_problem`), a group holding no layout or listing roles it does
    not hold, and a co-located label on several groups or the reverse (partial and
    disaggregated, both several groups, price the same)."""
    held: dict[str, set[str]] = {g.name: set() for g in plan.groups}
    for role, stages in plan.layouts.items():
        spec = sc.roles.get(role)  # a role the scenario lacks is refused with the tasks
        for stage, layout in stages.items():
            held[layout.group].add(role)
            if spec is not None and (why := layout_problem(spec, layout)) is not None:
                raise InputError(f"plan: layouts.{role}.{stage}: {why}; choose degrees the "
                                 "model divides into")
            if stage == "generation" and layout.cp > 1:
                raise InputError(f"plan: layouts.{role}.generation.cp: cp {layout.cp}: the "
                                 "rollout engines (vLLM, SGLang) split no sequence over GPUs; "
                                 f"set cp 1 and dp {layout.dp * layout.cp}")
            if spec is not None and stage != "generation" and (bad := split_problem(
                    spec.num_hidden_layers, layout.pp, layout.vp, layout.first_stage_layers,
                    layout.last_stage_layers)):  # a Megatron pipeline (the search's splits)
                raise InputError(f"plan: layouts.{role}.{stage}.{bad[0]}: {bad[1]}")
            if stage == "training" and (why := zero_problem(layout.pp, layout.zero)):
                raise InputError(f"plan: layouts.{role}.training.zero: {why}; set zero to 0 or "
                                 "1, or pp to 1")
            share = rank_share(sc, stage, layout.dp)
            if stage != "generation" and (why := micro_batch_problem(
                    share, layout.micro_batch)) is not None:
                raise InputError(f"plan: layouts.{role}.{stage}.micro_batch: {why}")
            if stage == "training" and (why := interleave_problem(
                    layout.pp, layout.vp, share // layout.micro_batch)):
                raise InputError(f"plan: layouts.{role}.training.vp: vp {layout.vp}: {why}")
    for g in plan.groups:
        if not held[g.name]:
            raise InputError(f"plan: groups: '{g.name}' holds no layout; remove it or place "
                             "a model on it")
        if g.roles and set(g.roles) != held[g.name]:
            raise InputError(
                f"plan: groups: '{g.name}' lists roles {', '.join(g.roles)} but holds "
                f"{', '.join(sorted(held[g.name]))}; list what its layouts place there, or "
                "leave roles out")
    label, made = plan.inter_model.placement, placement_of(held)
    if (label == "colocated") != (made == "colocated"):  # partial and disaggregated price alike
        raise InputError(f"plan: inter_model.placement: '{label}', but its "
                         f"{len(held)} group{'s' if len(held) > 1 else ''} make it {made}; set "
                         f"placement: {made}")

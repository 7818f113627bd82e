"""Which framework releases run a plan as it is, and what each would change: the plan JSON's
`frameworks` and the view's lines on them, for a plan made without a framework named."""

from __future__ import annotations

from typing import Any

from planner.frameworks.capabilities import Capabilities
from planner.frameworks.presets import all_presets
from planner.plan import PlanInput
from planner.specs.scenario import Scenario

KIND = {"generation": "generation", "training": "training", "assessment": "forward"}
"""A layout's stage → the kind of task the search prices it as (and rules name)."""


def task_of(role: str, stage: str) -> str | None:
    """The search's task a (role, stage) layout belongs to; None where it is part of another
    (the actor's old log-probs and the critic's values run with their training layouts)."""
    if stage == "assessment":
        return None if role in ("actor", "critic") else f"{role}.forward"
    return f"{role}.{stage}"


def differences(caps: Capabilities, sc: Scenario, plan: PlanInput) -> list[str]:
    """What release `caps` would change in (or refuse of) `plan`, in words; empty when it runs
    the plan as it is."""
    out = []
    if sc.algorithm not in caps.algorithms:
        out.append(f"no {sc.algorithm} trainer")
    if sc.reward_kind == "model" and not caps.reward_model:
        out.append("no reward model (rule-based rewards only)")
    groups: dict[str, set[str]] = {}
    for role, stages in plan.layouts.items():
        spec = sc.roles.get(role)
        for stage, layout in stages.items():
            task = task_of(role, stage)
            if task is None:
                continue
            groups.setdefault(layout.group, set()).add(task)
            out += caps.differences(KIND[stage], layout, spec, f"layouts.{role}.{stage}", role)
    for f in caps.follows:
        mine, theirs = layout_of(plan, f.task), layout_of(plan, f.trainer)
        if mine is not None and theirs is not None and not f.ok(mine, theirs):
            out.append(f"{where_of(f.task)}: {f.why}")
    tasks = frozenset(t for g in groups.values() for t in g)
    im = plan.inter_model
    if caps.groups is not None:
        for name, held in groups.items():
            if not caps.group_ok(frozenset(held), tasks, im.staleness):
                out.append(f"group {name} ({', '.join(sorted(held))}): not a placement it has")
    pools = {g.pool for g in plan.groups}
    if len(pools) > 1 and not caps.mixed_pools:
        out.append(f"groups on pools {', '.join(sorted(str(p) for p in pools))}: it runs on "
                   "one GPU type")
    per_node = {g.name: sc.pool(g.pool).cluster.gpus_per_node for g in plan.groups}
    out += [f"group {g.name}: {g.gpus} GPUs are not whole nodes of {per_node[g.name]}"
            for g in plan.groups if not caps.size_ok(g.gpus, per_node[g.name])]
    o = caps.options
    for on, allowed, what in ((im.inter_stage_fusion, o.fusion, "inter-stage fusion"),
                              (im.overlap_weight_sync, o.overlap_weight_sync,
                               "an overlapped weight sync"),
                              (im.shared_actor_critic, o.shared_actor_critic,
                               "a shared actor–critic")):
        if on and not allowed:
            out.append(f"no {what}")
    if not o.partial(im.staleness, im.partial_rollout):
        out.append(f"partial rollouts {'on' if im.partial_rollout else 'off'} at staleness "
                   f"{im.staleness}: not how it runs")
    return out


def converted(caps: Capabilities, sc: Scenario, plan: PlanInput) -> PlanInput | None:
    """`plan` with each layout the release would run differently set as it runs it (each
    broken rule's `fix`; the actor's and critic's assessment follow their training); None
    when a broken rule has no one fix, or nothing changes."""
    layouts: dict[str, dict[str, Any]] = {}
    changed = False
    for role, stages in plan.layouts.items():
        spec = sc.roles.get(role)
        for stage, layout in stages.items():
            kind = "training" if task_of(role, stage) is None else KIND[stage]
            fixes = [rule.fix for rule in caps.broken(kind, layout, spec, role)]
            if any(f is None for f in fixes):
                return None
            update = {k: v for f in fixes for k, v in (f or {}).items()}
            changed |= bool(update)
            layouts.setdefault(role, {})[stage] = layout.model_copy(update=update)
    ran = plan.model_copy(update={"layouts": layouts})
    for f in caps.follows:
        mine, theirs = layout_of(ran, f.task), layout_of(ran, f.trainer)
        if mine is None or theirs is None or f.ok(mine, theirs):
            continue
        run = f.run(mine, theirs)
        if run is None:
            return None
        role, stage = STAGE_OF[f.task]
        layouts[role][stage] = run
        changed = True
    return plan.model_copy(update={"layouts": layouts}) if changed else None


STAGE_OF = {"actor.generation": ("actor", "generation"), "actor.training": ("actor", "training"),
            "critic.training": ("critic", "training"),
            "reference.forward": ("reference", "assessment"),
            "reward.forward": ("reward", "assessment")}
"""A search task → the (role, stage) of its layout in a plan."""


def layout_of(plan: PlanInput, task: str) -> Any:
    role, stage = STAGE_OF[task]
    return plan.layouts.get(role, {}).get(stage)


def where_of(task: str) -> str:
    return "layouts.{}.{}".format(*STAGE_OF[task])


def as_it_runs(caps: Capabilities, sc: Scenario, plan: PlanInput, peak_gib: float,
               step_s: float, said: dict[str, str | None] | None = None) -> str | None:
    """What running `plan` as the release does changes in memory and time (its layouts
    converted, `converted`, and priced), in words; None when that cannot be said. `said`:
    the words already found for a converted plan (releases that convert alike price once)."""
    plan2 = converted(caps, sc, plan)
    if plan2 is None:
        return None
    said = {} if said is None else said
    key = plan2.model_dump_json()
    if key not in said:
        said[key] = _priced_words(sc, plan2, peak_gib, step_s)
    return said[key]


def _priced_words(sc: Scenario, plan2: PlanInput, peak_gib: float, step_s: float
                  ) -> str | None:
    from planner.cost.iteration import evaluate  # the cost model prices the converted plan
    from planner.errors import InfeasibleError, InputError

    try:
        ev = evaluate(sc, plan2)
    except InfeasibleError as exc:
        return f"as it runs it, the plan does not fit: {exc}"
    except InputError:  # the fix alone makes no plan (pp 1 under an interleaved pipeline)
        return None
    peak = max(float(m["peak_bytes"]) for m in ev.memory.values()) / 2**30
    return (f"as it runs it: {peak - peak_gib:+.1f} GiB per GPU at the peak, step "
            f"{ev.iteration_time_s / step_s - 1:+.1%}")


def frameworks_running(sc: Scenario, plan: PlanInput, peak_gib: float | None = None,
                       step_s: float | None = None) -> list[dict[str, Any]]:
    """Every shipped release (the scenario's alone when it names one): does it run `plan` as
    it is, and what would it change (`training_only`: its export configures the training
    alone, placement and generation are not in it); given the plan's peak and step, what its
    layouts as the release runs them change in both (`as_it_runs`, None when unknown)."""
    out: list[dict[str, Any]] = []
    said: dict[str, str | None] = {}
    for preset in all_presets():
        if sc.framework is not None and preset.name != sc.framework:
            continue
        caps = preset.caps()
        changes = differences(caps, sc, plan)
        cost = (as_it_runs(caps, sc, plan, peak_gib, step_s, said)
                if changes and peak_gib is not None and step_s is not None else None)
        out.append({"framework": preset.name, "label": preset.label,
                    "training_only": caps.groups is None,
                    "runs_as_is": not changes, "changes": changes, "as_it_runs": cost})
    return out

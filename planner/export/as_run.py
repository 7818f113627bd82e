"""What exporting a plan changes in its figures: the plan as the framework runs it — the
exporter's `Export.runs`, else each layout with the preset's rules' fixes
(`frameworks.runs.converted`: a frozen model sharded by FSDP, Megatron's ZeRO-1, ...) — priced
by the cost model `evaluate` uses, against the plan itself. `export` adds the change to its
notes, or refuses when the plan as run no longer fits (naming the group, the GiB and the
`--framework` that plans for the release, under which the search prices what it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.cost.constants import GIB
from planner.cost.iteration import evaluate
from planner.cost.report import plan_cost
from planner.errors import InfeasibleError
from planner.export.base import ExportError
from planner.frameworks import capabilities
from planner.frameworks.runs import converted
from planner.plan import PlanInput
from planner.specs.files import validate_as
from planner.specs.scenario import Scenario


@dataclass(frozen=True)
class Figures:
    """What a plan costs: step time, the highest peak per GPU, USD per step (None: no price)."""

    step_s: float
    peak_gib: float
    cost_usd: float | None


def figures(sc: Scenario, plan: PlanInput) -> Figures:
    """The plan priced (InfeasibleError when it does not fit)."""
    ev = evaluate(sc, plan)
    peak = max(float(m["peak_bytes"]) for m in ev.memory.values()) / GIB
    return Figures(ev.iteration_time_s, peak, plan_cost(sc, ev)[0])


def as_run(plan: dict[str, Any], sc: Scenario, release: str,
           runs: dict[str, Any] | None) -> tuple[PlanInput, PlanInput | None]:
    """(the plan, the plan as `release` runs it, or None when that is the plan itself)."""
    own = validate_as(PlanInput, plan, "plan")
    ran = (validate_as(PlanInput, runs, "plan as run") if runs is not None
           else converted(capabilities(release), sc, own))
    return own, (None if ran is None or ran == own else ran)


def running_notes(plan: dict[str, Any], sc: Scenario, release: str,
                  runs: dict[str, Any] | None) -> tuple[str, ...]:
    """The note on what running the plan as `release` changes in step time, peak memory and
    cost; none when it runs the plan as it is. Refuses (ExportError) when it no longer fits."""
    own, ran = as_run(plan, sc, release, runs)
    if ran is None:
        return ()
    label = capabilities(release).label
    try:
        after = figures(sc, ran)
    except InfeasibleError as exc:
        raise ExportError(f"as {label} runs it, the plan no longer fits: {exc}") from None
    before = figures(sc, own)
    if after == before:  # e.g. a setting the plan left to its default, written out
        return ()
    cost = ("" if before.cost_usd is None or after.cost_usd is None else
            f", cost per step ${after.cost_usd:.4g} ({after.cost_usd / before.cost_usd - 1:+.1%})")
    return (f"as {label} runs it ({'; '.join(changes(own, ran))}), the plan prices at "
            f"{after.step_s:.3g} s "
            f"per step ({after.step_s / before.step_s - 1:+.1%}), a peak of "
            f"{after.peak_gib:.1f} GiB per GPU ({after.peak_gib - before.peak_gib:+.1f} GiB)"
            f"{cost}",)


def changes(own: PlanInput, ran: PlanInput) -> list[str]:
    """What differs between the plan and the plan as run, field by field."""
    out = []
    for role, stages in own.layouts.items():
        for stage, layout in stages.items():
            other = ran.layouts.get(role, {}).get(stage)
            if other is None or other == layout:
                continue
            # an even split's first/last-stage fields are absent from the dump
            was, now = layout.model_dump(), other.model_dump()
            out.append(f"{role} {stage} " + ", ".join(
                f"{k} {was.get(k)} → {now.get(k)}" for k in {**was, **now}
                if was.get(k) != now.get(k)))
    was, now = own.inter_model.model_dump(), ran.inter_model.model_dump()
    out += [f"{k} {was[k]} → {now[k]}" for k in was if was[k] != now[k]]
    gone = sorted({g.name for g in own.groups} - {g.name for g in ran.groups})
    return out + ([f"group(s) {', '.join(gone)} unused"] if gone else [])

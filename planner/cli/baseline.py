"""`plan --baseline FILE`: the plan the user runs today (a plan JSON, or anything `rlplan
import` reads), priced by `evaluate`, and what the best plan gains over it and changes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.errors import InfeasibleError, InputError
from planner.frameworks import parse_name, release_of
from planner.plan import Plan, PlanInput
from planner.specs.files import parse_json, read_text, validate_as
from planner.specs.scenario import Scenario, load_scenario

LAYOUT_FIELDS = ("group", "dp", "tp", "pp", "cp", "ep", "zero", "offload", "checkpointing",
                 "micro_batch", "vp", "first_stage_layers", "last_stage_layers")


def load_baseline(path: Path, sc: Scenario, source: Path | Mapping[str, Any] | None = None,
                  flags: dict[str, Any] | None = None) -> tuple[Scenario, PlanInput]:
    """The baseline plan, and the scenario to search: the baseline's framework (an imported
    script's, or a plan JSON's `framework`) restricts the search unless the scenario names one
    itself (`source` — its file or fields — and `flags` rebuild it with the framework)."""
    try:
        text = read_text(path, "plan JSON or launch config")
    except InputError as err:
        raise InputError(f"--baseline: {err}") from None
    # a JSON document is a plan JSON (parsed within the limits on nesting and numbers);
    # anything else is a config `rlplan import` reads
    data = parse_json(text, f"--baseline {path}") if text.lstrip()[:1] in ("{", "[") else None
    framework: str | None = None
    if isinstance(data, dict):
        recorded = data.get("framework")
        if recorded is not None:
            framework = parse_name(str(recorded), f"--baseline {path}: field 'framework'")
    else:
        from planner.importers import import_config  # the script readers: only for a script
        imported = import_config(text, sc)
        data = imported.plan
        framework = (release_of(imported.fmt, imported.reading.release)
                     if imported.reading else None)
    base = validate_as(PlanInput, data, f"--baseline {path}")
    if framework is None or sc.framework is not None:
        return sc, base
    return load_scenario(source, {**(flags or {}), "framework": framework}), base


def changes(best: PlanInput, base: PlanInput) -> list[str]:
    """Per role and stage, the layout fields that differ; the groups and inter-model options."""
    out = []
    sizes = {g.name: g.gpus for g in base.groups}, {g.name: g.gpus for g in best.groups}
    if sorted(sizes[0].values()) != sorted(sizes[1].values()):
        out.append(f"groups: {sorted(sizes[0].values())} GPUs → {sorted(sizes[1].values())}")
    for role, stages in best.layouts.items():
        for stage, lay in stages.items():
            was = base.layouts.get(role, {}).get(stage)
            if was is None:
                continue
            diff = [f"{f} {getattr(was, f)} → {getattr(lay, f)}" for f in LAYOUT_FIELDS
                    if f != "group" and getattr(was, f) != getattr(lay, f)]
            if sizes[0][was.group] != sizes[1][lay.group]:
                diff.insert(0, f"on {sizes[0][was.group]} → {sizes[1][lay.group]} GPUs")
            if diff:
                out.append(f"{role} {stage}: {', '.join(diff)}")
    mine, theirs = best.inter_model.model_dump(), base.inter_model.model_dump()
    out += [f"inter_model.{k}: {theirs[k]} → {v}" for k, v in mine.items() if theirs[k] != v]
    return out


def with_baseline(found: Plan, base: PlanInput, sc: Scenario) -> Plan:
    """`found` with the baseline priced beside it: its figures, the gain, what changes (a
    baseline that does not fit is reported as such, with the reason)."""
    try:
        priced = to_plan(sc, base, evaluate(sc, base))
    except InfeasibleError as exc:
        return found.model_copy(update={"baseline": {
            "fits": False, "reason": str(exc), "changes": changes(found, base)}})
    gain: dict[str, Any] = {
        "iteration_time": priced.iteration_time_s / found.iteration_time_s - 1,
        "tokens_per_s": found.tokens_per_s / priced.tokens_per_s - 1}
    if found.cost_per_step_usd and priced.cost_per_step_usd:
        gain["cost_per_step"] = 1 - found.cost_per_step_usd / priced.cost_per_step_usd
    baseline = {"iteration_time_s": priced.iteration_time_s, "tokens_per_s": priced.tokens_per_s,
                "cost_per_step_usd": priced.cost_per_step_usd,
                "fits": priced.status != "infeasible", "gain": gain,
                "changes": changes(found, base)}
    return found.model_copy(update={"baseline": baseline})


def baseline_lines(plan: Plan) -> list[str]:
    """The plan view's lines on the baseline (`plan --baseline`): its step, the gain, what the
    best plan changes."""
    b = plan.baseline
    if not b:
        return []
    if not b["fits"]:
        out = [f"baseline: does not fit — {b['reason']}"]
    else:
        g = b["gain"]
        cost = (", cost per step " + _by(b["cost_per_step_usd"], plan.cost_per_step_usd,
                                         "lower", "higher") if "cost_per_step" in g else "")
        step = _by(b["iteration_time_s"], plan.iteration_time_s, "faster", "slower")
        out = [f"baseline: {b['iteration_time_s']:.2f} s per step → {plan.iteration_time_s:.2f}"
               f" s ({step}), tokens/s {g['tokens_per_s']:+.1%}{cost}"]
    out += [f"  change: {c}" for c in b["changes"]] or ["  no change: the baseline is this plan"]
    return out


def _by(before: float, after: float, less: str, more: str) -> str:
    """'41.7% faster' (after is the smaller) or '41.7% slower', each against the smaller: a
    word for the direction instead of a sign that reads the wrong way."""
    if after <= before:
        return f"{before / after - 1:.1%} {less}" if after else less
    return f"{after / before - 1:.1%} {more}"

"""The report page: one self-contained HTML file from a plan JSON, a sweep JSON, or both.

Everything the page shows is in the file: styles inline, pictures as inline SVG, no script, no
font, no link to fetch; its Content-Security-Policy forbids any load, so a page that tried
would be refused by the browser (and log it: the browser test fails on any console message).
The page renders from the JSON alone — `rlplan report PLAN.json` of a saved plan is the page
`plan --html` writes — and the same JSON gives the same bytes (no date, fixed SVG ids).
"""

from __future__ import annotations

from planner.errors import InputError
from planner.plan import Plan
from planner.report.documents import SweepDocument, same_point
from planner.report.html import esc
from planner.report.plan_sections import SECTIONS, plan_sections
from planner.report.style import CSS
from planner.specs.files import validate_as
from planner.specs.scenario import Scenario, scenario_from_plan
from planner.version import VERSION

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def render(plan: dict | None = None, sweep: dict | None = None, plan_source: str = "plan",
           sweep_source: str = "sweep") -> str:
    """The page for `plan` (a plan JSON as `plan`/`evaluate` write it) and/or `sweep` (a sweep
    JSON). With a sweep, the chosen point is the plan's (its GPU type and size) or, without a
    plan, the sweep's target answer, whose plan the page then shows. `*_source` name the files
    in errors. InputError for a file that is not a priced plan or a sweep."""
    if plan is None and sweep is None:
        raise InputError("report: give a plan JSON, a sweep JSON (--sweep) or both")
    doc = validate_as(SweepDocument, sweep, sweep_source) if sweep is not None else None
    if plan is not None:
        _refuse_unpriced(plan, plan_source)
        priced = validate_as(Plan, plan, plan_source)
    else:
        priced = None
    plan_given = plan
    sc, problem = _scenario(plan, plan_source) if plan is not None else (None, None)
    chosen, why = _choose(doc, sc, priced is not None) if doc is not None else (None, "")
    if priced is None and chosen is not None and doc.rows[chosen].plan is not None:
        priced = doc.rows[chosen].plan  # the target's point: its plan, as the sweep wrote it
        plan = priced.model_dump(mode="json")
        sc, problem = _scenario(plan, f"{sweep_source}: rows[{chosen}].plan")
    parts: list[tuple[str, str, str]] = []  # (id, heading, html) in page order
    if priced is not None:
        parts += zip(SECTIONS, SECTIONS.values(), plan_sections(priced, plan, sc, problem),
                     strict=True)
    if doc is not None:
        from planner.report.sweep_section import sweep_section  # a sweep's page only

        # a sweep's own page leads with the sweep; a plan's page with the plan
        at = 0 if plan_given is None else len(parts)
        parts.insert(at, ("sweep", "Sweep", sweep_section(doc, chosen, why)))
    title = _title(priced, sc, doc, sweep_page=plan_given is None)
    source = " and ".join(n for n, given in (("plan", plan_given), ("sweep", doc))
                          if given is not None)
    nav = "".join(f'<a href="#{key}">{esc(name)}</a>' for key, name, _ in parts)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="rlplan {esc(VERSION)}">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
            f"<body><header><h1>{esc(title)}</h1><nav>{nav}</nav></header>\n"
            f"<main>{''.join(html for _, _, html in parts)}</main>\n"
            f"<footer>Written by rlplan {esc(VERSION)} from the {source} JSON; the page "
            "needs no network.</footer></body></html>\n")


def _refuse_unpriced(plan: dict, source: str) -> None:
    """An infeasible answer (`{"status": "infeasible", "reason"}`) has nothing to show."""
    if isinstance(plan, dict) and plan.get("status") == "infeasible":
        why = plan.get("reason") or "no reason given"
        raise InputError(f"{source}: the plan is infeasible ({why}); there is no plan to "
                         "report — fix the scenario and plan again")


def _scenario(plan: dict, source: str) -> tuple[Scenario | None, str | None]:
    """The plan's scenario resolved (what the exports and the sweep's chosen point need), or
    why there is none."""
    try:
        return scenario_from_plan(plan, source), None
    except InputError as exc:
        return None, str(exc)


def _choose(doc: SweepDocument, sc: Scenario | None, with_plan: bool) -> tuple[int | None, str]:
    """The sweep's chosen row and a sentence saying which and why: with a plan (`with_plan`),
    the point of its scenario's cluster (`sc`); without, the target's answer."""
    from planner.sweep.grid import label  # the sweep's own words for a point

    if with_plan:
        if sc is None:
            return None, "No point is marked: the plan carries no scenario to place it."
        swept = doc.scenario
        actor = ((swept.get("models") or {}).get("actor") or {}).get("name")
        if (swept.get("algorithm"), actor) != (sc.algorithm, sc.actor.name):
            return None, (f"No point is marked: the sweep is of {swept.get('algorithm')} "
                          f"{actor}, the plan of {sc.algorithm} {sc.actor.name}.")
        if sc.multi_pool:
            where = {p.name: p.cluster.total_gpus for p in sc.pool_list}
            hit = [i for i, r in enumerate(doc.rows) if r.pools == where]
        else:
            hit = [i for i, r in enumerate(doc.rows)
                   if r.pools is None and r.gpus == sc.total_gpus
                   and r.gpu in (None, sc.cluster.gpu.name)]
        if not hit:
            return None, "No point is marked: the plan's cluster is not one of the swept points."
        return hit[0], f"Marked: {label(doc.rows[hit[0]])}, the plan's cluster (the plan above)."
    target = doc.target
    if target is None or target.gpus is None:
        return None, ("No point is chosen: give the sweep a target (--target-tokens-per-s or "
                      "--target-step-s), or report a plan with it (rlplan report PLAN.json "
                      "--sweep SWEEP.json).")
    hit = [i for i, r in enumerate(doc.rows) if same_point(r, target)]
    if not hit:
        return None, "No point is marked: the target names no swept point."
    return hit[0], f"Chosen: {label(doc.rows[hit[0]])}, the target's answer (its plan below)."


def _title(plan: Plan | None, sc: Scenario | None, doc: SweepDocument | None,
           sweep_page: bool) -> str:
    """The plan's, or on a sweep's own page (`sweep_page`) the sweep's."""
    if sc is not None and plan is not None and not sweep_page:
        used: dict[str | None, int] = {}
        for g in plan.groups:
            used[g.pool] = used.get(g.pool, 0) + g.gpus
        return f"Plan for {sc.algorithm} {sc.actor.name} on {sc.gpus_words(used)}"
    if plan is not None and not sweep_page:
        return f"Plan on {sum(g.gpus for g in plan.groups)} GPUs"
    assert doc is not None
    scenario = doc.scenario
    models = scenario.get("models") or {}
    actor = (models.get("actor") or {}).get("name", "") if isinstance(models, dict) else ""
    return f"Sweep for {scenario.get('algorithm', '')} {actor}".rstrip()


"""The plan's sections of the report page, each from the plan JSON alone (a `Plan` and the
dict it was read from): what the terminal view shows, as HTML, plus the pictures and the
framework configs. Sentences the terminal view also prints come from `planner.cli.views` (one
place for each wording)."""

from __future__ import annotations

import re

import yaml

from planner.cli.baseline import baseline_lines
from planner.cli.views import (
    PARTS,
    cost_words,
    memory_line,
    offload_lines,
    proof_lines,
    regime_sentence,
    search_line,
)
from planner.cost.iteration import BREAKDOWN_KEYS
from planner.errors import InputError
from planner.export import FORMATS, VERSIONS, parse_framework
from planner.export import export as make_export
from planner.plan import Layout, Plan, expert_tp
from planner.report import charts
from planner.report.html import bullets, facts, figure, num, para, pre, section, table
from planner.specs.scenario import Scenario

SECTIONS = {"summary": "Summary", "plan": "Plan", "timeline": "Timeline", "memory": "Memory",
            "rollout": "Rollout", "bounds": "Bounds", "alternatives": "Alternatives and what-ifs",
            "scenario": "Scenario", "exports": "Framework configs"}
"""The plan's sections in page order: id → heading (the ids are the page's anchors)."""


def plan_sections(plan: Plan, data: dict, sc: Scenario | None, scenario_problem: str | None
                  ) -> list[str]:
    """Every plan section, in `SECTIONS` order. `sc`: the plan's scenario resolved (None, and
    `scenario_problem` saying why, when the plan carries none that resolves)."""
    return [summary(plan), layouts(plan), timeline(plan), memory(plan), rollout(plan),
            bounds(plan), alternatives(plan), scenario(plan),
            exports(data, sc, scenario_problem)]


def rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:,.0f}" if tokens_per_s >= 10 else f"{tokens_per_s:.2g}"


def summary(plan: Plan) -> str:
    s = plan.search or {}
    im = plan.inter_model
    pairs = [("status", plan.status),
             ("step time", f"{plan.iteration_time_s:.2f} s"),
             ("throughput", f"{rate(plan.tokens_per_s)} tokens/s"),
             ("cost per step", cost_words(plan)),
             ("bottleneck stage", plan.explanation.get("bottleneck", "—")),
             ("GPUs in use", f"{sum(g.gpus for g in plan.groups)} in {len(plan.groups)} "
                             f"group{'s' if len(plan.groups) > 1 else ''}"),
             ("placement", ", ".join([im.placement, *im.choices()]))]
    if s.get("solver") not in (None, "none"):
        pairs.append(("search", f"{s['solver']} {s.get('status', '')} in "
                                f"{s.get('wall_s', 0):.1f} s, {s.get('candidates', 0):,} "
                                "candidates"))
    if plan.framework:
        pairs.append(("framework", plan.framework))
    pairs += [(f"{stage} precision", words) for stage, words in plan.precision.items()]
    cut = search_line(plan)
    proofs = proof_lines(plan)
    return section("summary", SECTIONS["summary"], facts(pairs),
                   para(cut, "warning") if cut else "", *map(para, proofs))


def layouts(plan: Plan) -> str:
    """The groups, each (role, stage) layout with its time, the inter-model choices, what
    offload costs and the gain over a baseline."""
    groups = table(["group", "GPUs", *(["pool"] if any(g.pool for g in plan.groups) else []),
                    "roles"],
                   [[g.name, g.gpus, *([g.pool or ""] if any(x.pool for x in plan.groups)
                                       else []), ", ".join(g.roles)] for g in plan.groups],
                   numeric=[False, True])
    tasks = plan.breakdown.get("tasks", [])
    layouts = [(t, Layout.model_validate(t["layout"])) for t in tasks]
    moe = any(lay.ep > 1 or lay.etp is not None for _, lay in layouts)
    head = ["role", "stage", "group", "dp", "tp", "pp", "cp", "ep", *(["etp"] if moe else []),
            "sp", "zero", "recompute", "micro-batch", "offload", "time s"]
    rows = [[t["role"], t["stage"], lay.group, lay.dp, lay.tp, lay.pp, lay.cp, lay.ep,
             *([expert_tp(lay, t["stage"])] if moe else []), "on" if lay.sp else "off",
             lay.zero, lay.checkpointing, lay.micro_batch, lay.offload, f"{t['time_s']:.2f}"]
            for t, lay in layouts]
    im = plan.inter_model
    return section("plan", SECTIONS["plan"], groups,
                   table(head, rows, numeric=[False] * 3 + [True] * (len(head) - 3)),
                   para(f"inter-model: {', '.join([im.placement, *im.choices()])}"),
                   bullets(line.strip() for line in offload_lines(plan.breakdown)),
                   bullets(baseline_lines(plan)))


def timeline(plan: Plan) -> str:
    """The timeline picture (with the rollout's running sequences above the lanes) and each
    group's time per stage."""
    from planner.pictures.timeline import render  # matplotlib only when drawing

    picture = inline_svg(render(plan, "svg").decode())
    pools = any(g.pool for g in plan.groups)
    groups = {g.name: g for g in plan.groups}
    rows = [[name, *([groups[name].pool or ""] if pools else []), groups[name].gpus,
             *(f"{parts.get(k, 0.0):.2f}" for k in BREAKDOWN_KEYS)]
            for name, parts in plan.breakdown.get("groups", {}).items()]
    head = ["group", *(["pool"] if pools else []), "GPUs", *(f"{k} s" for k in BREAKDOWN_KEYS)]
    stages = ", ".join(f"{name} {t.time_s:.2f} s" for name, t in plan.stages.items())
    return section("timeline", SECTIONS["timeline"],
                   figure(picture, f"One iteration, {plan.iteration_time_s:.2f} s: a lane per "
                                   "group; above, the slowest rollout replica's running "
                                   "sequences."),
                   table(head, rows, numeric=[False] * (2 if pools else 1) + [True] * 6,
                         caption="per group; each row sums to the iteration"),
                   para(f"stage times: {stages}"))


def inline_svg(document: str) -> str:
    """A matplotlib SVG file as an element of the page: no XML prolog, sized by the page."""
    start = document.index("<svg")
    root_end = document.index(">", start)
    root = re.sub(r'\s(width|height)="[^"]*"', "", document[start:root_end])
    return root + ' class="picture" role="img"' + document[root_end:]


def memory(plan: Plan) -> str:
    m = plan.memory
    headroom = m.get("headroom_gib")
    groups = m.get("groups", {})
    room = headroom is not None or any("headroom_gib" in g for g in groups.values())
    pools = any("pool" in g for g in groups.values())
    head = ["group", *(["pool"] if pools else []), "allocated GiB", "reserved GiB", "peak GiB",
            "capacity GiB", *(["headroom GiB"] if room else []), "stage", "what"]
    rows = [[name, *([g.get("pool", "")] if pools else []),
             num(g.get("allocated_gib_per_gpu"), ".1f"),
             num(g.get("reserved_gib_per_gpu"), ".1f"), num(g["peak_gib_per_gpu"], ".1f"),
             num(g.get("capacity_gib", m["capacity_gib"]), ".0f"),
             *([num(g.get("headroom_gib", headroom), ".1f")] if room else []),
             g.get("stage", ""), g.get("what", "")] for name, g in groups.items()]
    return section("memory", SECTIONS["memory"],
                   figure(charts.memory_chart(groups, m["capacity_gib"], headroom),
                          "Memory per GPU at each group's peak, against the GPU's capacity."),
                   table(head, rows, numeric=[False] * (2 if pools else 1)
                         + [True] * (5 if room else 4)),
                   para(memory_line(plan)))


def rollout(plan: Plan) -> str:
    r = plan.breakdown.get("rollout")
    if not r:
        return section("rollout", SECTIONS["rollout"],
                       para("No rollout: this plan generates nothing (a supervised or "
                            "offline-preference step).", "note"))
    parts = r["parts"]
    total = sum(parts.values())
    gen = next((t["layout"] for t in plan.breakdown.get("tasks", [])
                if t["stage"] == "generation"), None)
    where = (f"on {gen['group']}, the slowest of {gen['dp']} replicas" if gen
             else "the slowest replica")
    n = r["response_lengths"]
    pairs = [("regime", r["regime"]), ("time", f"{total:.2f} s ({where})"),
             ("KV cache per replica", f"{r['kv_cache_tokens']:,} tokens"),
             ("precision", r.get("precision", "")),
             ("running sequences", f"peak {r['peak_running']} of max_num_seqs "
                                   f"{r['max_num_seqs']}, mean {r['mean_running']:.1f}"),
             ("responses (tokens)", f"mean {n['mean']:,.0f}, p50 {n['p50']:,.0f}, "
                                    f"p90 {n['p90']:,.0f}, max {n['max']:,}"),
             ("last 10% of responses", f"{r['tail_s']:.2f} s")]
    if r["preemptions"] or r["recomputed_tokens"]:
        pairs.append(("preempted", f"{r['preemptions']:,} preemptions, "
                                   f"{r['recomputed_tokens']:,} tokens recomputed"))
    if r["carried_tokens_per_step"] > 0:
        pairs.append(("partial rollouts", f"{r['carried_tokens_per_step']:,.0f} tokens carried "
                                          f"per step over {r['steps_spanned']} steps"))
    bars = [(f"part-{key}", label, parts.get(key, 0.0)) for key, label in PARTS]
    return section("rollout", SECTIONS["rollout"],
                   figure(charts.parts_chart(bars, "where the rollout's time goes"),
                          "Where the slowest replica's generation time goes."),
                   facts(pairs), para(regime_sentence(r, plan.inter_model)))


def bounds(plan: Plan) -> str:
    b, it = plan.bounds, plan.iteration_time_s
    bars = [("iteration", it), ("compute bound", b["compute_s"])]
    words = [f"compute bound: every FLOP of the step at the cluster's peak, "
             f"{b['compute_s']:.2f} s ({it / b['compute_s']:.1f}× from it)"]
    if b.get("decode_s"):
        bars.append(("decode-chain bound", b["decode_s"]))
        words.append(f"decode-chain bound: the longest response decoded at full HBM "
                     f"bandwidth, {b['decode_s']:.2f} s ({it / b['decode_s']:.1f}× from it)")
    return section("bounds", SECTIONS["bounds"],
                   figure(charts.bounds_chart(bars), "The iteration against its lower "
                                                     "bounds, seconds."),
                   bullets(words))


def alternatives(plan: Plan) -> str:
    e = plan.explanation
    alts = [a["summary"] for a in e.get("alternatives", [])]
    what_if = list(e.get("what_if", []))
    parts = [f"<h3>Next-best options</h3>{bullets(alts)}" if alts else
             para("No alternative: the plan was evaluated as given, or no other inter-model "
                  "option has a plan.", "note"),
             f"<h3>What if</h3>{bullets(what_if)}" if what_if else ""]
    if e.get("idle_gpus"):
        parts.append(para(f"idle GPUs: {e['idle_gpus']}"))
    return section("alternatives", SECTIONS["alternatives"], *parts)


def scenario(plan: Plan) -> str:
    if plan.scenario is None:
        return section("scenario", SECTIONS["scenario"],
                       para("The plan carries no scenario (it was not written by rlplan "
                            "plan or evaluate).", "note"))
    text = yaml.safe_dump(plan.scenario, sort_keys=False, allow_unicode=True)
    return section("scenario", SECTIONS["scenario"],
                   para("As given (the file with its command-line overrides):"), pre(text))


def exports(data: dict, sc: Scenario | None, problem: str | None) -> str:
    """Each framework's config for the plan, or its refusal; the plan's own framework
    (`plan --framework`) first, at its release."""
    if sc is None:
        return section("exports", SECTIONS["exports"],
                       para(f"Not exported: {problem}", "refused"))
    order = list(FORMATS)
    own = parse_framework(data["framework"]) if data.get("framework") else None
    if own:
        order.remove(own[0])
        order.insert(0, own[0])
    blocks = []
    for fmt in order:
        version = own[1] if own and own[0] == fmt else VERSIONS[fmt][0]
        head = f'<h3>{fmt} {version}</h3>'
        try:
            done = make_export(data, sc, fmt, version)
        except InputError as exc:
            blocks.append(f'<div class="export">{head}'
                          f"{para(f'refused: {exc}', 'refused')}</div>")
            continue
        blocks.append(f'<div class="export">{head}{bullets(done.notes, "note")}'
                      f"{pre(done.text)}</div>")
    return section("exports", SECTIONS["exports"],
                   para("What rlplan export writes for each framework (notes: what the "
                        "framework cannot express or what was approximated)."), *blocks)

"""Rich views of a priced plan, and its output, shared by `evaluate` and `plan`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.table import Table

from planner.cli.export import save_export
from planner.cli.output import console, fail, print_json
from planner.cost.iteration import BREAKDOWN_KEYS
from planner.errors import InfeasibleError, InputError
from planner.export import Export
from planner.pictures import picture_format
from planner.plan import SCHEMA_VERSION, Plan


def emit_plan(make: Callable[[], Plan], as_json: bool, out: Path | None,
              title: Callable[[Plan], str], timeline: Path | None = None,
              exporter: Callable[[dict], Export] | None = None,
              export_out: Path | None = None) -> None:
    """Price or search (`make`), then print JSON or the rich view and write `out` (and the
    `timeline` picture, and what `exporter` makes of the plan JSON into `export_out`). Every
    file is rendered before any is written. An infeasible input prints `{"status":
    "infeasible", "reason"}` under --json, one line on stderr, and exits 3; nothing is
    written."""
    fmt = picture_format(timeline, "--timeline") if timeline is not None else None
    if exporter is not None and export_out is None:
        raise InputError("--export needs --export-out FILE (the plan itself goes to standard "
                         "output)")
    try:
        result = make()
    except InfeasibleError as exc:
        if as_json:
            print_json({"schema_version": SCHEMA_VERSION, "status": "infeasible",
                        "reason": str(exc)})
        raise fail(str(exc), exc.exit_code) from None
    data = result.model_dump(mode="json")
    picture = b""
    if timeline is not None:
        from planner.pictures.timeline import render  # matplotlib only when drawing

        picture = render(result, fmt)
    config = exporter(data) if exporter is not None else None
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n")
    if timeline is not None:
        timeline.write_bytes(picture)
    if config is not None:
        save_export(config, export_out)
    if as_json:
        print_json(data)
    else:
        show_plan(result, title(result))


def show_plan(plan: Plan, title: str) -> None:
    """The rich view of a priced plan: groups and layouts, time breakdown, memory, bounds."""
    table = Table(title=title)
    for col in ("role", "stage", "group", "dp", "tp", "pp", "cp", "ep", "zero", "ckpt",
                "micro", "offload", "time s"):
        table.add_column(col, justify="left" if col in ("role", "stage", "group") else "right")
    for t in plan.breakdown.get("tasks", []):
        lay = t["layout"]
        table.add_row(t["role"], t["stage"], lay["group"],
                      *(str(lay[k]) for k in ("dp", "tp", "pp", "cp", "ep", "zero",
                                              "recompute", "micro_batch", "offload")),
                      f"{t['time_s']:.2f}")
    console.print(table)
    im = plan.inter_model
    console.print(f"inter-model: {', '.join([im.placement, *im.choices()])}")

    groups = plan.breakdown.get("groups", {})
    table = Table(title=f"One iteration: {plan.iteration_time_s:.2f} s per step "
                        f"(per group; each row sums to the iteration)")
    table.add_column("group")
    table.add_column("GPUs", justify="right")
    for key in BREAKDOWN_KEYS:
        table.add_column(f"{key} s", justify="right")
    sizes = {g.name: g.gpus for g in plan.groups}
    for g, parts in groups.items():
        table.add_row(g, str(sizes[g]), *(f"{parts[k]:.2f}" for k in BREAKDOWN_KEYS))
    console.print(table)

    table = Table(title="Memory per GPU")
    for col in ("group", "peak GiB", "capacity GiB", "stage", "what"):
        table.add_column(col, justify="right" if "GiB" in col else "left")
    for g, mem in plan.memory["groups"].items():
        table.add_row(g, f"{mem['peak_gib_per_gpu']:.1f}", f"{plan.memory['capacity_gib']:.0f}",
                      mem["stage"], mem["what"])
    console.print(table)
    b, it = plan.bounds, plan.iteration_time_s
    cost = f"${plan.cost_per_step_usd:.2f}" if plan.cost_per_step_usd is not None else "unknown"
    console.print(f"throughput {plan.tokens_per_s:,.0f} tokens/s; cost per step {cost}; "
                  f"bottleneck stage: {plan.explanation['bottleneck']}")
    decode = (f"; decode chain at full HBM bandwidth {b['decode_s']:.2f} s "
              f"({it / b['decode_s']:.1f}×)" if b["decode_s"] else "")
    console.print(f"lower bounds: all FLOPs at peak {b['compute_s']:.2f} s "
                  f"({it / b['compute_s']:.1f}× from it){decode}")
    console.print(f"binding memory: {plan.explanation['binding_constraint']}")
    explanation = plan.explanation
    for alt in explanation.get("alternatives", []):
        console.print(f"alternative: {alt['summary']}")
    for note in explanation.get("what_if", []):
        console.print(f"what if: {note}")

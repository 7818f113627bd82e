"""`rlplan evaluate SCENARIO.yaml PLAN.json`: price a given plan without searching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from planner.cli import options as o
from planner.cli.output import console, fail, print_json, reports_errors
from planner.cost.iteration import BREAKDOWN_KEYS, to_plan
from planner.cost.iteration import evaluate as price
from planner.errors import InfeasibleError
from planner.plan import SCHEMA_VERSION, Plan, PlanInput
from planner.specs.files import read_mapping, validate_as
from planner.specs.scenario import load_scenario


def load_plan(path: Path) -> PlanInput:
    """A plan file: groups, layouts and inter_model (a full plan JSON is accepted too)."""
    return validate_as(PlanInput, read_mapping(path), str(path))


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
                                              "checkpointing", "micro_batch", "offload")),
                      f"{t['time_s']:.2f}")
    console.print(table)

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
    console.print(f"lower bounds: all FLOPs at peak {b['compute_s']:.2f} s "
                  f"({it / b['compute_s']:.1f}× from it); decode chain at full HBM bandwidth "
                  f"{b['decode_s']:.2f} s" + (f" ({it / b['decode_s']:.1f}×)" if b["decode_s"]
                                              else ""))
    console.print(f"binding memory: {plan.explanation['binding_constraint']}")


def evaluate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML.")],
    plan: Annotated[Path, typer.Argument(help="Plan JSON: groups, layouts, inter_model.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the JSON to this file.")] = None,
    nodes: o.Nodes = None, gpus_per_node: o.GpusPerNode = None, gpu: o.Gpu = None,
    prompts: o.Prompts = None, samples: o.Samples = None, prompt_len: o.PromptLen = None,
    response_len: o.ResponseLen = None, max_response_len: o.MaxResponseLen = None,
) -> None:
    """Price a plan (hand-written, or an earlier answer): time, memory, cost. Exit 3 if it
    does not fit in memory."""
    flags = o.overrides(nodes=nodes, gpus_per_node=gpus_per_node, gpu=gpu, prompts=prompts,
                        samples=samples, prompt_len=prompt_len, response_len=response_len,
                        max_response_len=max_response_len)
    _evaluate(scenario, plan, as_json, out, flags)


@reports_errors
def _evaluate(scenario: Path, plan_path: Path, as_json: bool, out: Path | None,
              flags: dict) -> None:
    sc = load_scenario(scenario, flags)
    plan_in = load_plan(plan_path)
    try:
        result = to_plan(sc, plan_in, price(sc, plan_in))
    except InfeasibleError as exc:
        if as_json:
            print_json({"schema_version": SCHEMA_VERSION, "status": "infeasible",
                        "reason": str(exc)})
        raise fail(str(exc), exc.exit_code) from None
    data = result.model_dump(mode="json")
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n")
    if as_json:
        print_json(data)
        return
    show_plan(result, f"Plan {plan_path} for {sc.algorithm} on {sc.cluster.total_gpus}× "
                      f"{sc.cluster.gpu.name} (evaluated)")


"""`rlplan evaluate SCENARIO.yaml PLAN.json`: price a given plan without searching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from planner.cli import options as o
from planner.cli.output import fail, print_json, reports_errors
from planner.cli.views import show_plan
from planner.cost.iteration import evaluate as price
from planner.cost.iteration import to_plan
from planner.errors import InfeasibleError
from planner.plan import SCHEMA_VERSION, PlanInput
from planner.specs.files import read_mapping, validate_as
from planner.specs.scenario import load_scenario


def load_plan(path: Path) -> PlanInput:
    """A plan file: groups, layouts and inter_model (a full plan JSON is accepted too)."""
    return validate_as(PlanInput, read_mapping(path), str(path))


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


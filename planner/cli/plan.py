"""`rlplan plan [SCENARIO.yaml] [flags]`: search the best plan and explain it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli import options as o
from planner.cli.output import reports_errors
from planner.cli.views import emit_plan
from planner.plan import Plan
from planner.search.solve import plan as search
from planner.specs.scenario import load_scenario


def plan(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (or give every field "
                                                    "as a flag).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the plan JSON to this file.")]
    = None,
    timeline: o.Timeline = None,
    workers: Annotated[int, typer.Option(min=1, help="CP-SAT workers: 1 is deterministic; more "
                                         "solve faster to the same objective, possibly another "
                                         "plan of equal cost.")] = 1,
    algo: o.Algo = None, actor: o.Actor = None, reference: o.Reference = None,
    reward: o.Reward = None, critic: o.Critic = None, prompts: o.Prompts = None,
    samples: o.Samples = None, prompt_len: o.PromptLen = None, response_len: o.ResponseLen = None,
    max_response_len: o.MaxResponseLen = None, ppo_epochs: o.PpoEpochs = None,
    mini_batches: o.MiniBatches = None, gpu: o.Gpu = None, nodes: o.Nodes = None,
    gpus_per_node: o.GpusPerNode = None, objective: o.Objective = None,
    max_staleness: o.MaxStaleness = None, time_limit: o.TimeLimit = None,
) -> None:
    """Find the fastest (or cheapest) plan under the cost model, prove it, and explain it.
    Exit 3 with the reason when nothing fits."""
    flags = o.overrides(locals())
    _plan(scenario, flags, as_json, out, timeline, workers)


@reports_errors
def _plan(path: Path | None, flags: dict, as_json: bool, out: Path | None,
          timeline: Path | None, workers: int) -> None:
    sc = load_scenario(path, flags)

    def title(result: Plan) -> str:
        s = result.search
        return (f"Plan for {sc.algorithm} on {sc.cluster.total_gpus}× {sc.cluster.gpu.name} — "
                f"{result.status} ({s['status']}, {s['wall_s']:.1f} s, "
                f"{s['candidates_after_pruning']} of {s['candidates']} candidates)")

    emit_plan(lambda: search(sc, workers=workers), as_json, out, title, timeline)

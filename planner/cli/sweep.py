"""`rlplan sweep [SCENARIO.yaml] --gpus 8..256`: capacity planning over cluster sizes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from planner.cli import options as o
from planner.cli.output import console, fail, print_json, reports_errors
from planner.errors import EXIT_INFEASIBLE, InputError
from planner.pictures import picture_format
from planner.search.deadline import Deadline
from planner.specs.scenario import Scenario, load_scenario
from planner.sweep import CSV_COLUMNS, Row, Sweep, gpu_count, parse_gpus, run_sweep


def sweep(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (or give every field "
                                                    "as a flag).")] = None,
    gpus_spec: Annotated[str | None, typer.Option(
        "--gpus", help="Cluster sizes: a list and/or ranges, e.g. 8,16,32 or 8..256 (a range "
                       "doubles from its start and ends at its end). Up to one node a size "
                       "divides the node; above, it is whole nodes.", show_default=False)]
    = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Worker processes solving sizes in "
                                             "parallel (default: one per CPU, at most one per "
                                             "size)", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Also write the table as CSV.")]
    = None,
    json_out: Annotated[Path | None, typer.Option("--json-out", help="Also write the JSON to "
                                                  "this file.")] = None,
    picture: Annotated[Path | None, typer.Option(help="Draw throughput and cost against GPUs "
                                                 "(.svg or .png).")] = None,
    target: Annotated[float | None, typer.Option(
        "--target-tokens-per-s",
        help="Answer the fewest swept GPUs reaching this throughput.")] = None,
    algo: o.Algo = None, actor: o.Actor = None, reference: o.Reference = None,
    reward: o.Reward = None, critic: o.Critic = None, prompts: o.Prompts = None,
    samples: o.Samples = None, prompt_len: o.PromptLen = None, response_len: o.ResponseLen = None,
    max_response_len: o.MaxResponseLen = None, engine: o.Engine = None,
    ppo_epochs: o.PpoEpochs = None, mini_batches: o.MiniBatches = None, gpu: o.Gpu = None,
    gpus_per_node: o.GpusPerNode = None, objective: o.Objective = None,
    max_staleness: o.MaxStaleness = None, time_limit: o.TimeLimit = None,
) -> None:
    """The best plan on each cluster size: time, tokens/s, scaling, cost, placement; the
    smallest feasible size and the knee. --time-limit bounds the whole sweep. The scenario's
    cluster.nodes is what the sweep varies (ignored); --gpus-per-node sets the node."""
    flags = o.overrides(locals())
    _sweep(scenario, flags, gpus_spec, jobs, as_json, csv_out, json_out, picture, target)


@reports_errors
def _sweep(path: Path | None, flags: dict, spec: str | None, jobs: int | None, as_json: bool,
           csv_out: Path | None, json_out: Path | None, picture: Path | None,
           target: float | None) -> None:
    started = Deadline.start()  # --time-limit counts from here: loading is part of the command
    if spec is None:
        raise InputError("--gpus is required: give cluster sizes such as 8,16,32 or 8..256")
    # the sweep sets the node count per size: the file's is ignored (and not checked)
    sc = load_scenario(path, {**flags, "cluster.nodes": 1})
    deadline = started.within(sc.search.time_limit_s)
    sizes = parse_gpus(spec, sc.cluster.gpus_per_node)
    if target is not None and not target > 0:
        raise InputError(f"--target-tokens-per-s: {target:g}; give a throughput above 0")
    fmt = picture_format(picture) if picture else None
    for flag, out in (("--csv", csv_out), ("--json-out", json_out), ("--picture", picture)):
        if out is not None and not out.parent.is_dir():
            raise InputError(f"{flag}: directory '{out.parent}' does not exist; create it or "
                             "write elsewhere")

    if as_json or not Console(stderr=True).is_terminal:  # progress on a terminal only
        result = run_sweep(sc, sizes, deadline, jobs=jobs, target_tokens_per_s=target)
    else:
        result = _with_progress(sc, sizes, deadline, jobs, target)

    scenario = sc.summary()
    scenario["cluster"] = {k: scenario["cluster"][k] for k in ("name", "gpu", "gpus_per_node")}
    document = {"scenario": scenario, **result.to_json()}
    files: dict[Path, bytes] = {}  # everything rendered before anything is written
    if csv_out:
        files[csv_out] = to_csv(result.rows).encode()
    if json_out:
        files[json_out] = (json.dumps(document, indent=2) + "\n").encode()
    if picture and fmt:
        from planner.pictures.sweep_chart import render  # matplotlib only when drawing

        files[picture] = render(result, fmt, title(sc))
    for out, data in files.items():
        out.write_bytes(data)

    if as_json:
        print_json(document)
    else:
        show(result, title(sc))
    if result.smallest_feasible is None:
        raise fail(f"none of the swept sizes ({', '.join(map(str, sizes))} GPUs) has a plan; "
                   "each row says why", EXIT_INFEASIBLE)


def _with_progress(sc: Scenario, sizes: list[int], deadline: Deadline, jobs: int | None,
                   target: float | None) -> Sweep:
    """Solve with a progress bar on stderr (it disappears when done)."""
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"searching {len(sizes)} cluster sizes", total=len(sizes))

        def done(gpus: int, n: int, total: int) -> None:
            bar.update(task, completed=n, description=f"searched {gpu_count(gpus)}")

        return run_sweep(sc, sizes, deadline, jobs=jobs, target_tokens_per_s=target,
                         on_done=done)


def title(sc: Scenario) -> str:
    return (f"{sc.algorithm} {sc.actor.name} on {sc.cluster.gpu.name}, "
            f"{sc.sequences_per_step} sequences per step")


def to_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow(["" if (v := getattr(r, c)) is None else v for c in CSV_COLUMNS])
    return buf.getvalue()


def _num(value: float | None, spec: str, prefix: str = "") -> str:
    return "—" if value is None else f"{prefix}{value:{spec}}"


def show(result: Sweep, heading: str) -> None:
    """The capacity table, then what it says: smallest feasible size, knee, target, notes."""
    table = Table(title=f"Sweep — {heading}")
    for col in ("GPUs", "status", "iteration s", "tokens/s", "tokens/s/GPU", "scaling",
                "$/step", "$/M tokens", "placement"):
        table.add_column(col, justify="left" if col in ("status", "placement") else "right")
    notes: list[str] = []
    for r in result.rows:
        mark = ""
        for text in (r.reason, r.note):
            if text:
                notes.append(f"{gpu_count(r.gpus)}: {text}")
                mark += f" [{len(notes)}]"
        table.add_row(
            str(r.gpus), escape(r.status + mark), _num(r.iteration_time_s, ".2f"),
            _num(r.tokens_per_s, ",.0f"), _num(r.tokens_per_s_per_gpu, ",.0f"),
            _num(r.scaling_efficiency, ".0%"), _num(r.cost_per_step_usd, ",.2f", "$"),
            _num(r.cost_per_million_tokens_usd, ",.2f", "$"),
            escape(r.placement or _short(r.reason)))
    console.print(table)
    console.print("scaling: tokens/s per GPU against the smallest feasible size; cost counts "
                  "every GPU of the size")
    if result.smallest_feasible is not None:
        console.print(f"smallest feasible: {gpu_count(result.smallest_feasible)}")
    console.print(f"knee: {gpu_count(result.knee)} (the next step gains less than half of the "
                  "ideal throughput increase)" if result.knee is not None else
                  "knee: none in range (every step gains at least half of the ideal increase)")
    if result.target_message:
        console.print(f"target: {result.target_message}")
    for k, note in enumerate(notes, 1):
        console.print(f"[{k}] {note}", markup=False)


def _short(reason: str | None, limit: int = 90) -> str:
    if not reason:
        return ""
    return reason if len(reason) <= limit else reason[:limit - 1] + "…"

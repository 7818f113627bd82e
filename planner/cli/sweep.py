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
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import console, fail, print_json, reports_errors
from planner.cli.views import price_origin
from planner.errors import EXIT_INFEASIBLE, InputError
from planner.pictures import picture_format
from planner.search.deadline import Deadline
from planner.specs.scenario import Scenario, load_scenario
from planner.sweep import CSV_COLUMNS, Row, Sweep, gpu_count, parse_gpus, run_sweep


@o.scenario_flags(exclude=("nodes", "target_tokens_per_s"))  # the sweep sets both its way
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
    flags: dict | None = None,
) -> None:
    """The best plan on each cluster size: time, tokens/s, scaling, cost, placement; the
    smallest feasible size and the knee. --time-limit bounds the whole sweep. The scenario's
    cluster.nodes is what the sweep varies (ignored); --gpus-per-node sets the node."""
    _sweep(scenario, flags or {}, gpus_spec, jobs, as_json, csv_out, json_out, picture, target)


@reports_errors
def _sweep(path: Path | None, flags: dict, spec: str | None, jobs: int | None, as_json: bool,
           csv_out: Path | None, json_out: Path | None, picture: Path | None,
           target: float | None) -> None:
    started = Deadline.start()  # --time-limit counts from here: loading is part of the command
    if spec is None:
        raise InputError("--gpus is required: give cluster sizes such as 8,16,32 or 8..256")
    check_outputs({"--csv": csv_out, "--json-out": json_out, "--picture": picture})
    fmt = picture_format(picture) if picture else None
    # the sweep sets the node count per size: the file's is ignored (and not checked)
    sc = load_scenario(path, {**flags, "cluster.nodes": 1})
    deadline = started.within(sc.search.time_limit_s)
    sizes = parse_gpus(spec, sc.cluster.gpus_per_node)
    if target is not None and not target > 0:
        raise InputError(f"--target-tokens-per-s: {target:g}; give a throughput above 0")

    if as_json or not Console(stderr=True).is_terminal:  # progress on a terminal only
        result = run_sweep(sc, sizes, deadline, jobs=jobs, target_tokens_per_s=target)
    else:
        result = _with_progress(sc, sizes, deadline, jobs, target)

    scenario = sc.summary()
    scenario["cluster"] = {k: scenario["cluster"][k] for k in ("name", "gpu", "gpus_per_node")}
    document = {"scenario": scenario, **result.to_json()}
    files: list[Output] = []  # everything rendered before anything is written, then all or none
    if csv_out:
        files.append(Output("--csv", csv_out, to_csv(result.rows)))
    if json_out:
        files.append(Output("--json-out", json_out, json.dumps(document, indent=2) + "\n"))
    if picture and fmt:
        from planner.pictures.sweep_chart import render  # matplotlib only when drawing

        files.append(Output("--picture", picture, render(result, fmt, title(sc))))
    write_outputs(files)

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
    price = (result.price or {}).get("price_usd_per_gpu_hour")
    at = (f" at ${price:g} per GPU-hour ({price_origin(result.price['price_source'])})"
          if price is not None else " (no price: pass --price)")
    console.print("scaling: tokens/s per GPU against the smallest feasible size; cost counts "
                  f"every GPU of the size{at}", markup=False)
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

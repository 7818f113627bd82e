"""`rlplan sweep [SCENARIO.yaml] --gpus 8..256 [--gpu a,b]` or `rlplan sweep SCENARIO.yaml
--pool NAME:SIZES ...`: capacity planning over cluster sizes, GPU types and pool sizes."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from planner.cli import options as o
from planner.cli.clock import command_started
from planner.cli.files import Output, check_outputs, write_outputs
from planner.cli.output import console, fail, print_json, reports_errors
from planner.cli.report import Html, page_output, page_path
from planner.cli.views import price_origin
from planner.errors import EXIT_INFEASIBLE, InputError
from planner.pictures import picture_format
from planner.search.deadline import Deadline
from planner.specs.hardware import load_profile
from planner.specs.scenario import Scenario, load_scenario, scenario_input, source_name
from planner.sweep import CSV_COLUMNS, gpu_count, parse_gpus
from planner.sweep.grid import Grid, label, parse_profiles, pools_label, run_grid, usd
from planner.sweep.pools import POOL_FLAG, parse_pools, prepare, run_pool_grid
from planner.sweep.run import import_ray


@o.scenario_flags(exclude=("nodes", "target_tokens_per_s"))  # the sweep sets both its way
def sweep(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (or give every field "
                                                    "as a flag).")] = None,
    gpus_spec: Annotated[str | None, typer.Option(
        "--gpus", help="Cluster sizes: a list and/or ranges, e.g. 8,16,32 or 8..256 (a range "
                       "doubles from its start and ends at its end). Up to one node a size "
                       "divides the node; above, it is whole nodes. With several --gpu "
                       "profiles, every size on every profile.", show_default=False)]
    = None,
    pool_specs: Annotated[list[str] | None, typer.Option(
        "--pool", help="A scenario with cluster.pools: NAME:SIZES, one per pool swept (sizes as "
                       "--gpus takes them, 0 = the pool left out; 0..64 is 0 then one node "
                       "doubling to 64). The grid is every combination; a pool not named "
                       "keeps its size.", show_default=False)] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="Worker processes solving points in "
                                             "parallel (default: one per CPU, at most one per "
                                             "point); with --ray local, the CPUs of the Ray "
                                             "instance", show_default=False)] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray", help="Run the points as Ray tasks: 'auto' (the Ray cluster this machine "
                      "runs), a head address, or 'local' (start one for this command). Needs "
                      "pip install 'rlplan[ray]'.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    csv_out: Annotated[Path | None, o.output("Also write the table as CSV.", "--csv")] = None,
    json_out: Annotated[Path | None, o.output("Also write the JSON to this file.",
                                              "--json-out")] = None,
    picture: Annotated[Path | None, o.output("Draw throughput against GPUs and step time "
                                             "against cost with the frontier (.svg or .png).")]
    = None,
    target: Annotated[float | None, typer.Option(
        "--target-tokens-per-s",
        help="Answer the cheapest swept point reaching this throughput (the fewest GPUs when a "
             "point reaching it has no price).")] = None,
    target_step: Annotated[float | None, typer.Option(
        "--target-step-s",
        help="Answer the cheapest swept point whose step takes at most this many seconds (the "
             "fewest GPUs when a point meeting it has no price).")] = None,
    html: Html = None,
    flags: dict | None = None,
) -> None:
    """The best plan on each cluster size (of each --gpu profile, comma-separated), or on each
    combination of pool sizes (--pool): time, tokens/s, scaling, cost, placement; the smallest
    feasible size, the knee, and the cost–time frontier. --time-limit bounds the whole sweep.
    The scenario's cluster.nodes is what the sweep varies (ignored); --gpus-per-node sets the
    node."""
    _sweep(scenario, flags or {}, gpus_spec, pool_specs or [], jobs, ray_address, as_json,
           csv_out, json_out, picture, target, target_step, html)


def check_sweep(spec: str | None, pool_specs: list[str], flags: dict) -> None:
    """What is swept: --pool (a scenario's pools) or --gpus (sizes of one or more GPU types),
    one of them."""
    if pool_specs:
        for flag, given in (("--gpus", spec is not None), ("--gpu", "cluster.gpu" in flags)):
            if given:
                raise InputError(f"{POOL_FLAG} with {flag}: --pool sizes the scenario's pools, "
                                 f"{flag} sweeps one GPU type; give one or the other")
    elif spec is None:
        raise InputError("--gpus is required: give cluster sizes such as 8,16,32 or 8..256 (or "
                         "--pool NAME:SIZES for a scenario with cluster.pools)")


def solve_sweep(path: Path | dict | None, flags: dict, spec: str | None, pool_specs: list[str],
                jobs: int | None, ray_address: str | None, target: float | None,
                target_step: float | None, started: Deadline, progress: bool = False
                ) -> tuple[list[Scenario], Grid, str]:
    """Search every point `check_sweep` accepted, by the scenario's time limit counted from
    `started`: the scenarios swept (one per profile), the grid, and the points in words.
    `progress`: a bar on stderr when it is a terminal."""
    for flag, value, what in (("--target-tokens-per-s", target, "a throughput"),
                              ("--target-step-s", target_step, "a step time")):
        if value is not None and not value > 0:
            raise InputError(f"{flag}: {value:g}; give {what} above 0")
    if ray_address is not None:
        if not ray_address.strip():
            raise InputError("--ray: empty; give 'auto', a head address or 'local'")
        import_ray()  # the install hint before any solving
    if pool_specs:
        sc = load_scenario(path, flags)
        scenarios = [sc]
        named = parse_pools(pool_specs, sc)
        points = prepare(sc, named)
        deadline = started.within(sc.search.time_limit_s)
        labels = [pools_label(sizes) for sizes, point in points if isinstance(point, Scenario)]
        swept = f"{len(points)} points"

        def run(on_done=None) -> Grid:
            return run_pool_grid(sc, named, points, deadline, jobs=jobs,
                                 ray_address=ray_address, tokens_per_s=target,
                                 step_s=target_step, on_done=on_done)
    else:
        scenarios = load_grid(path, flags)
        deadline = started.within(scenarios[0].search.time_limit_s)
        sizes = [parse_gpus(spec, sc.cluster.gpus_per_node) for sc in scenarios]
        labels = [f"{gpu_count(g)}" + (f" of {sc.cluster.gpu.name}" if len(scenarios) > 1
                                       else "")
                  for sc, its in zip(scenarios, sizes, strict=True) for g in its]
        swept = (f"{', '.join(map(str, sizes[0]))} GPUs" if len(sizes[0]) <= 8 else
                 f"{len(sizes[0])} sizes, {sizes[0][0]} to {sizes[0][-1]} GPUs")
        swept += " on each profile" if len(scenarios) > 1 else ""

        def run(on_done=None) -> Grid:
            return run_grid(scenarios, sizes, deadline, jobs=jobs, ray_address=ray_address,
                            tokens_per_s=target, step_s=target_step, on_done=on_done)

    if not progress or not Console(stderr=True).is_terminal or not labels:  # a terminal only
        result = run()
    else:
        result = _with_progress(run, labels, deadline)
    return scenarios, result, swept


@reports_errors
def _sweep(path: Path | None, flags: dict, spec: str | None, pool_specs: list[str],
           jobs: int | None, ray_address: str | None, as_json: bool, csv_out: Path | None,
           json_out: Path | None, picture: Path | None, target: float | None,
           target_step: float | None, html: Path | None = None) -> None:
    started = Deadline(command_started())  # --time-limit counts from the process's start
    check_sweep(spec, pool_specs, flags)
    check_outputs({"--csv": csv_out, "--json-out": json_out, "--picture": picture,
                   "--html": html})
    fmt = picture_format(picture) if picture else None
    if html is not None:
        page_path(html, "--html")
    scenarios, result, swept = solve_sweep(path, flags, spec, pool_specs, jobs, ray_address,
                                           target, target_step, started, progress=not as_json)

    document = sweep_document(scenarios, result)
    files: list[Output] = []  # everything rendered before anything is written, then all or none
    if csv_out:
        files.append(Output("--csv", csv_out, to_csv(result)))
    if json_out:
        files.append(Output("--json-out", json_out, json.dumps(document, indent=2) + "\n"))
    if picture and fmt:
        from planner.pictures.sweep_chart import render  # matplotlib only when drawing

        files.append(Output("--picture", picture, render(result, fmt, title(scenarios))))
    if html is not None:
        files.append(page_output("--html", html, sweep=document))
    write_outputs(files)

    if as_json:
        print_json(document)
    elif result.pools is not None:
        show_pools(result, title(scenarios))
    else:
        show(result, title(scenarios))
    if not any(r.feasible for r in result.rows):
        late = sum(r.status == "timeout" for r in result.rows)
        raise fail(f"none of the swept points ({swept}) has a plan"
                   + (f"; {late} ran out of time (raise --time-limit)" if late else "")
                   + "; each row says why", EXIT_INFEASIBLE)


def sweep_document(scenarios: list[Scenario], result: Grid) -> dict:
    """The sweep's JSON (--json, --json-out): the scenario as swept and the grid's answer."""
    return {"scenario": scenario_summary(scenarios), **result.to_json()}


def scenario_summary(scenarios: list[Scenario]) -> dict:
    """The scenario as the sweep's JSON shows it: the cluster as swept (its profile(s) and
    node; with pools each pool's), not the sizes the file gives."""
    scenario = scenarios[0].summary()
    cluster = scenario["cluster"]
    scenario["cluster"] = {k: cluster[k] for k in ("name", "gpu", "gpus_per_node")}
    if len(scenarios) > 1:
        scenario["cluster"]["gpu"] = [sc.cluster.gpu.name for sc in scenarios]
    if "pools" in cluster:
        scenario["cluster"]["pools"] = [{k: p[k] for k in ("name", "gpu", "gpus_per_node")}
                                        for p in cluster["pools"]]
    return scenario


PER_PROFILE = ", or each profile's as --gpu NAME:PRICE"


def load_grid(path: Path | dict | None, flags: dict) -> list[Scenario]:
    """The scenario once per --gpu profile (a comma list), in the order given, each at the
    price given after its ':' (`h100-sxm:3.99`; over --price, which prices the others). The
    sweep sets the node count per size: the file's is ignored (and not checked)."""
    if path is not None and scenario_input(path, flags).cluster.pools:
        raise InputError(f"{source_name(path)}: field 'cluster.pools': the scenario lists pools "
                         "and a --gpus sweep sizes one GPU type; size the pools with --pool "
                         "NAME:SIZES (e.g. --pool rollout:0..64)")
    flags = {**flags, "cluster.nodes": 1}
    spec = flags.get("cluster.gpu")
    if spec is None or ("," not in spec and ":" not in spec):
        return [load_scenario(path, flags)]
    profiles = parse_profiles(spec)
    for name, price in profiles:  # a bad name is the flag's fault: say so before reading
        try:
            load_profile(name)
        except InputError as exc:
            raise InputError(f"--gpu {name}: {exc}") from None
        if price is not None:
            o.warn_price(price, f"--gpu {name}:{price:g}")
    return [load_scenario(path, {**flags, "cluster.gpu": name,
                                 **({} if price is None else {o.PRICE: price})})
            for name, price in profiles]


def _with_progress(run, labels: list[str], deadline: Deadline) -> Grid:
    """Solve with a progress bar on stderr (it disappears when done): points solved of all
    (`labels`, one per point searched), the estimated time left, and the time limit's."""
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
               TimeRemainingColumn(), TextColumn("{task.fields[limit]}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        limit = f"(limit: {deadline.left():.0f} s)" if deadline.ends != math.inf else ""
        task = bar.add_task(f"searching {len(labels)} points", total=len(labels), limit=limit)

        def done(i: int, n: int, total: int) -> None:
            left = f"(limit: {deadline.left():.0f} s)" if deadline.ends != math.inf else ""
            bar.update(task, completed=n, description=f"searched {labels[i]}", limit=left)

        return run(done)


def title(scenarios: list[Scenario]) -> str:
    sc = scenarios[0]
    if sc.source_input is not None and sc.source_input.cluster.pools is not None:
        gpus = " + ".join(f"{p.cluster.gpu.name} ({p.name})" for p in sc.pool_list)
    else:
        gpus = ", ".join(s.cluster.gpu.name for s in scenarios)
    return f"{sc.algorithm} {sc.actor.name} on {gpus}, {sc.sequences_per_step} sequences per step"


# a pool grid's columns: each pool's GPUs first; no scaling (its points are not one line)
POOL_CSV_SKIP = ("scaling_efficiency", "marginal_scaling")


def to_csv(result: Grid) -> str:
    """The rows as CSV; a pool grid's start with one `<pool>_gpus` column per pool."""
    pools = [p.name for p in result.pools] if result.pools is not None else []
    columns = [c for c in CSV_COLUMNS if not pools or c not in POOL_CSV_SKIP]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([f"{name}_gpus" for name in pools] + columns)
    for r in result.rows:
        writer.writerow([(r.pools or {}).get(name, "") for name in pools]
                        + ["" if (v := getattr(r, c)) is None else v for c in columns])
    return buf.getvalue()


def _num(value: float | None, spec: str, prefix: str = "") -> str:
    return "—" if value is None else f"{prefix}{value:{spec}}"


def _usd(value: float | None) -> str:
    """Dollars as every line below the table writes them (`usd`: cents, or four figures below
    a dollar), so a point reads the same in the table and in the frontier."""
    return "—" if value is None else usd(value)


def show(result: Grid, heading: str) -> None:
    """The capacity table, then what it says: per profile its price, smallest feasible size
    and knee; the frontier; the target; the notes."""
    several = len(result.sweeps) > 1
    table = Table(title=f"Sweep — {heading}")
    for col in ("GPU type", "GPUs", "status", "iteration s", "tokens/s", "tokens/s/GPU",
                "scaling", "$/step", "$/M tokens", "placement")[0 if several else 1:]:
        table.add_column(col, justify="left" if col in ("GPU type", "status", "placement")
                         else "right")
    notes: list[str] = []
    for r in result.rows:
        mark = _footnotes(notes, label(r) if several else gpu_count(r.gpus), r.reason, r.note)
        table.add_row(*([escape(r.gpu or "")] if several else []),
                      str(r.gpus), escape(r.status + mark), _num(r.iteration_time_s, ".2f"),
                      _num(r.tokens_per_s, ",.0f"), _num(r.tokens_per_s_per_gpu, ",.0f"),
                      _num(r.scaling_efficiency, ".0%"), _usd(r.cost_per_step_usd),
                      _usd(r.cost_per_million_tokens_usd),
                      escape(r.placement or _short(r.reason)))
    console.print(table)
    console.print("scaling: tokens/s per GPU against the profile's smallest feasible size; cost "
                  "counts every GPU of the size", markup=False)
    for s in result.sweeps:
        head = f"{s.gpu}: " if several else ""
        price, source = ((s.price or {}).get(k) for k in ("price_usd_per_gpu_hour",
                                                          "price_source"))
        origin = ("from the command line" if source == "flag"  # --price or --gpu NAME:PRICE
                  else price_origin(source))
        console.print(f"{head}price " + (f"${price:g} per GPU-hour ({origin})"
                                         if price is not None else
                                         f"none (pass --price{PER_PROFILE if several else ''})"),
                      markup=False)
        if s.smallest_feasible is not None:
            console.print(f"{head}smallest feasible: {gpu_count(s.smallest_feasible)}",
                          markup=False)
        console.print(f"{head}knee: {gpu_count(s.knee)} (the next step gains less than half of "
                      "the ideal throughput increase)" if s.knee is not None else
                      f"{head}knee: none in range (every step gains at least half of the ideal "
                      "increase)", markup=False)
    _answers(result, notes, "pass --price" + (PER_PROFILE if several else ""),
             label if several else lambda r: gpu_count(r.gpus))


def _answers(result: Grid, notes: list[str], price_fix: str, name) -> None:
    """What a grid says below its table: the frontier, the unpriced points, the target and
    the numbered notes."""
    if result.frontier:
        console.print("cost–time frontier (no other point is both cheaper and faster): "
                      + "; ".join(f"{name(r)} {usd(r.cost_per_step_usd)}/step "
                                  f"{r.iteration_time_s:.2f} s" for r in result.frontier),
                      markup=False)
    if result.unpriced:
        console.print(f"not on the frontier for want of a price: "
                      f"{', '.join(label(r) for r in result.unpriced)} ({price_fix})",
                      markup=False)
    if result.target:
        console.print(f"target: {result.target.message}", markup=False)
    for k, note in enumerate(notes, 1):
        console.print(f"[{k}] {note}", markup=False)


def show_pools(result: Grid, heading: str) -> None:
    """A pool grid's table (each pool's GPUs per point), each pool's profile and price, then
    the frontier, the target and the notes."""
    pools = result.pools or []
    table = Table(title=f"Sweep over pools — {heading}")
    for col in (*(f"{p.name} GPUs" for p in pools), "total", "status", "iteration s",
                "tokens/s", "$/step", "$/M tokens", "placement"):
        table.add_column(escape(col), justify="left" if col in ("status", "placement")
                         else "right")
    notes: list[str] = []
    for r in result.rows:
        mark = _footnotes(notes, label(r), r.reason)
        table.add_row(*(str((r.pools or {})[p.name]) for p in pools), str(r.gpus),
                      escape(r.status + mark), _num(r.iteration_time_s, ".2f"),
                      _num(r.tokens_per_s, ",.0f"), _usd(r.cost_per_step_usd),
                      _usd(r.cost_per_million_tokens_usd),
                      escape(r.placement or _short(r.reason)))
    console.print(table)
    console.print("cost counts every GPU of each pool at the point, idle ones included, at "
                  "the pool's price", markup=False)
    for k, p in enumerate(pools):
        price = p.price["price_usd_per_gpu_hour"]
        field = f"cluster.pools[{k}].price_usd_per_gpu_hour"
        origin = ("from the scenario's " + field if p.price["price_source"] == "scenario" else
                  price_origin(p.price["price_source"]).replace("--price", field))
        console.print(f"{p.name}: {p.gpu}, nodes of {p.gpus_per_node}; "
                      + ("sizes " + ", ".join(map(str, p.sizes)) if p.swept
                         else f"{gpu_count(p.sizes[0])} at every point (not swept)")
                      + "; price " + (f"${price:g} per GPU-hour ({origin})"
                                      if price is not None else f"none (set {field})"),
                      markup=False)
    _answers(result, notes, "set each pool's price_usd_per_gpu_hour", label)


def _footnotes(notes: list[str], who: str, *texts: str | None) -> str:
    """Append each given text to `notes` as '<who>: text'; the table's marks for them."""
    mark = ""
    for text in texts:
        if text:
            notes.append(f"{who}: {text}")
            mark += f" [{len(notes)}]"
    return mark


def _short(reason: str | None, limit: int = 90) -> str:
    if not reason:
        return ""
    return reason if len(reason) <= limit else reason[:limit - 1] + "…"

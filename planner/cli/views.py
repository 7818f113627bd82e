"""Rich views of a priced plan, and its output, shared by `evaluate` and `plan`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table

from planner.cli.baseline import baseline_lines
from planner.cli.files import Output, write_outputs
from planner.cli.output import console, fail, print_json
from planner.cost.iteration import BREAKDOWN_KEYS
from planner.errors import InfeasibleError, InputError
from planner.pictures import picture_format
from planner.plan import SCHEMA_VERSION, InterModel, Layout, Plan, expert_tp
from planner.search.explain import BINDING_MARGIN, memory_binds, spans
from planner.search.scope import EVERY_CP, EVERY_PP

if TYPE_CHECKING:
    from planner.export import Export

PARTS = (("prefill", "prefill"), ("decode", "decode to 90% done"),
         ("decode_tail", "decode after 90% done"),
         ("recompute", "recompute"), ("overhead", "engine overhead"))
"""The rollout's time parts (keys of `breakdown.rollout.parts`) as the view names them."""


@contextmanager
def searching(quiet: bool = False) -> Iterator[Callable[[str], None] | None]:
    """A status line on stderr saying what the search is doing, when stderr is a terminal and
    not `quiet` (--json); otherwise nothing is shown (pipes and tests see no progress)."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        yield None
        return
    with err.status("searching…") as status:
        yield lambda what: status.update(f"searching: {what}")


def emit_plan(make: Callable[[], Plan], as_json: bool, out: Path | None,
              title: Callable[[Plan], str], timeline: Path | None = None,
              exporter: Callable[[dict], Export] | None = None,
              export_out: Path | None = None,
              page: Callable[[dict], Output] | None = None) -> None:
    """Price or search (`make`), then print JSON or the rich view and write `out` (and the
    `timeline` picture, what `exporter` makes of the plan JSON into `export_out`, and the
    report page `page` makes of it: `cli.report.page_output`). Every file is rendered before
    any is written.
    An infeasible input prints `{"status": "infeasible", "reason"}` under --json, one line on
    stderr, and exits 3; nothing is written."""
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
    files: list[Output] = []  # every file rendered before any is written, then all or none
    if out is not None:
        files.append(Output("--out", out, json.dumps(data, indent=2) + "\n"))
    if timeline is not None:
        from planner.pictures.timeline import render  # matplotlib only when drawing

        files.append(Output("--timeline", timeline, render(result, fmt)))
    if page is not None:
        files.append(page(data))
    config = exporter(data) if exporter is not None else None
    if config is not None and export_out is not None:
        from planner.cli.export import export_output  # the exporters: only for --export
        files.append(export_output(config, export_out, "--export-out"))
    write_outputs(files)
    if config is not None:
        from planner.cli.export import show_notes
        show_notes(config)
    if as_json:
        print_json(data)
    else:
        show_plan(result, title(result))


def _pp(lay: dict) -> str:
    """pp, with an uneven split's end-stage layers: `8 (11…11)`, `5 (…4)`."""
    first, last = lay.get("first_stage_layers"), lay.get("last_stage_layers")
    if first is None and last is None:
        return str(lay["pp"])
    return f"{lay['pp']} ({first or ''}…{last or ''})"


def show_plan(plan: Plan, title: str) -> None:
    """The rich view of a priced plan: groups and layouts, time breakdown, memory, bounds."""
    if (cut := search_line(plan)) is not None:
        console.print(cut)
    table = Table(title=title)
    tasks = plan.breakdown.get("tasks", [])
    experts = any(t["layout"].get("etp") is not None for t in tasks)  # MoE plans show etp
    degrees = ("dp", "tp", "pp", "cp", "ep", *(("etp",) if experts else ()))
    for col in ("role", "stage", "group", *degrees, "zero", "ckpt", "micro", "offload",
                "time s"):
        table.add_column(col, justify="left" if col in ("role", "stage", "group") else "right")
    for t in tasks:
        lay = t["layout"]
        etp = {"etp": expert_tp(Layout.model_validate(lay), t["stage"])} if experts else {}
        shown = {**lay, **etp, "pp": _pp(lay)}
        table.add_row(t["role"], t["stage"], lay["group"],
                      *(str(shown[k]) for k in (*degrees, "zero", "recompute", "micro_batch",
                                                "offload")),
                      f"{t['time_s']:.2f}")
    console.print(table)
    for line in offload_lines(plan.breakdown):
        console.print(line)
    if refit := (plan.breakdown.get("sync") or {}).get("refit"):
        console.print(refit_line(refit))
    im = plan.inter_model
    console.print(f"inter-model: {', '.join([im.placement, *im.choices()])}")

    groups = plan.breakdown.get("groups", {})
    table = Table(title=f"One iteration: {plan.iteration_time_s:.2f} s per step "
                        f"(per group; each row sums to the iteration)")
    pools = {g.name: g.pool for g in plan.groups if g.pool}  # several pools: name each group's
    table.add_column("group")
    if pools:
        table.add_column("pool")
    table.add_column("GPUs", justify="right")
    for key in BREAKDOWN_KEYS:
        table.add_column(f"{key} s", justify="right")
    sizes = {g.name: g.gpus for g in plan.groups}
    for g, parts in groups.items():
        table.add_row(g, *((pools[g],) if pools else ()), str(sizes[g]),
                      *(f"{parts[k]:.2f}" for k in BREAKDOWN_KEYS))
    console.print(table)
    rollout = plan.breakdown.get("rollout")
    if rollout:
        gen = next((t["layout"] for t in plan.breakdown.get("tasks", [])
                    if t["stage"] == "generation"), None)
        for part in rollout_section(rollout, gen, plan.inter_model):
            console.print(part)

    table = Table(title="Memory per GPU")
    # allocated (tensors) ≤ reserved (+ allocator slack) ≤ peak (+ CUDA context, NCCL): the
    # peak is what must fit the capacity (README "What the memory figure means")
    for col in ("group", "allocated GiB", "reserved GiB", "peak GiB", "capacity GiB", "stage",
                "what"):
        table.add_column(col, justify="right" if "GiB" in col else "left")
    for g, mem in plan.memory["groups"].items():
        table.add_row(g, *(f"{mem[k]:.1f}" if k in mem else "—" for k in (
            "allocated_gib_per_gpu", "reserved_gib_per_gpu", "peak_gib_per_gpu")),
            f"{mem.get('capacity_gib', plan.memory['capacity_gib']):.0f}", mem["stage"],
            mem["what"])
    console.print(table)
    b, it = plan.bounds, plan.iteration_time_s
    cost = cost_words(plan)
    rate = plan.tokens_per_s
    rate_text = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"  # never a bare "0 tokens/s"
    console.print(f"throughput {rate_text} tokens/s; cost per step {cost}; "
                  f"bottleneck stage: {plan.explanation['bottleneck']}")
    if controller := plan.stages.get("controller"):
        console.print(f"controller: {controller.time_s:.2f} s of host work per step "
                      "(runtime.controller_us_per_token), "
                      + ("in series: every group waits for it" if plan.inter_model.staleness == 0
                         else "beside the groups' work (staleness ≥ 1)"))
    decode = (f"; decode chain at full HBM bandwidth {b['decode_s']:.2f} s "
              f"({it / b['decode_s']:.1f}×)" if b["decode_s"] else "")
    console.print(f"lower bounds: all FLOPs at peak {b['compute_s']:.2f} s "
                  f"({it / b['compute_s']:.1f}× from it){decode}")
    console.print(memory_line(plan))
    for proof in proof_lines(plan):
        console.print(proof)
    for line in framework_lines(plan):
        console.print(line)
    explanation = plan.explanation
    if explanation.get("idle_gpus"):
        console.print(f"idle GPUs: {explanation['idle_gpus']}")
    for alt in explanation.get("alternatives", []):
        console.print(f"alternative: {alt['summary']}")
    for note in explanation.get("what_if", []):
        console.print(f"what if: {note}")
    for line in baseline_lines(plan):
        console.print(line)


def cost_words(plan: Plan) -> str:
    """The cost per step and the price it was computed with (each pool's, with pools)."""
    cost = f"${plan.cost_per_step_usd:.2f}" if plan.cost_per_step_usd is not None else "unknown"
    if plan.cost and plan.cost.get("pools"):
        pools = plan.cost["pools"]
        each = ", ".join(f"{p['gpus']}× {name} " + (
            f"at ${p['price_usd_per_gpu_hour']:g} per GPU-hour"
            if p["price_usd_per_gpu_hour"] is not None else "without a price")
            for name, p in pools.items())
        unpriced = [name for name, p in pools.items() if p["price_usd_per_gpu_hour"] is None]
        fix = (f"; set price_usd_per_gpu_hour on pool {_either(unpriced)} under cluster.pools"
               if unpriced else "")
        cost += f" ({each}{fix})"
    elif plan.cost and plan.cost.get("price_usd_per_gpu_hour") is not None:
        cost += (f" (at ${plan.cost['price_usd_per_gpu_hour']:g} per GPU-hour, "
                 f"{price_origin(plan.cost['price_source'])})")
    elif plan.cost_per_step_usd is None:
        cost += " (no price: pass --price)"
    return cost


def offload_lines(breakdown: dict) -> list[str]:
    """What CPU offload costs, named apart: per task its CPU Adam step and exposed host-link
    transfers (`parts.optimizer_cpu`, `parts.offload`), and the state swapped out for
    generation and back (`breakdown.sync`)."""
    out = []
    for t in breakdown.get("tasks", []):
        parts = t["parts"]
        named = [f"{label} {parts[k]:.2f} s" for k, label in
                 (("optimizer_cpu", "optimizer (CPU Adam)"), ("offload", "offload transfers"))
                 if parts.get(k, 0) > 0]
        if named:
            out.append(f"  {t['role']} {t['stage']}: {', '.join(named)} of {t['time_s']:.2f} s")
    sync = breakdown.get("sync") or {}
    if sync.get("offload_during_generation_s", 0) > 0:
        out.append(f"  sync {sync['time_s']:.2f} s: state offloaded during generation "
                   f"{sync['offload_during_generation_s']:.2f} s "
                   f"({sync['offload_during_generation_gib_per_gpu']:.1f} GiB per GPU out "
                   "and back over the host link)")
    return out


REFIT_NAMES = {"colocated": "co-located, through GPU memory",
               "sharded": "sharded, every training rank sends its share",
               "checkpoint_engine": "checkpoint engine, one rank broadcasts in buckets",
               "checkpoint_engine_relays": "checkpoint engine, one rank broadcasts in buckets "
                                           "relayed over its node's NICs",
               "one_rank_broadcast": "one rank broadcasts tensor by tensor"}


def refit_line(refit: dict) -> str:
    """The weight refit priced (`breakdown.sync.refit`): mechanism, time, parts."""
    how = REFIT_NAMES.get(refit["mechanism"], refit["mechanism"])
    if refit["mechanism"] != "colocated":
        how += ", runtime.refit"
    tensors = refit["assemble_s"] + refit["per_tensor_s"]
    return (f"weight refit {refit['time_s']:.2f} s ({how}): training side "
            f"{refit['send_s']:.2f} s and rollout side {refit['receive_s']:.2f} s overlapped, "
            f"per tensor {tensors:.2f} s")


def search_line(plan: Plan) -> str | None:
    """A plan the search did not prove optimal: its status and gap to the best bound."""
    s = plan.search or {}
    if plan.status != "feasible":
        return None
    gap = s.get("gap")
    far = (f"at most {gap:.1%} from the optimum (the best bound)" if gap is not None else
           "gap unknown (no bound was found for every option in time)")
    how = (" the greedy plan (CP-SAT found none in time)," if s.get("greedy") else "")
    return (f"status feasible, not proven optimal:{how} {far}; raise --time-limit "
            "(search.time_limit_s) to search longer")


def kv_proof_line(plan: Plan) -> str | None:
    """A proven optimum whose proof leaves out some KV cache sizes a plan may write in: for
    which options (`search.kv_sizes_unproven`)."""
    unsure = (plan.search or {}).get("kv_sizes_unproven")
    if plan.status != "optimal" or not unsure:
        return None
    by_why: dict[str, list[str]] = {}
    for entry in unsure:
        by_why.setdefault(entry["why"], []).append(entry["option"])
    parts = [f"{options[0]}: {why}" if len(options) == 1 else
             f"{len(options)} options ({options[0]}, …): {why}"
             for why, options in by_why.items()]
    return (f"proof: over every KV cache size left out or priced, not every size a plan may "
            f"write in — {'; '.join(parts)} (search.kv_sizes_unproven)")


def size_proof_line(plan: Plan) -> str | None:
    """A proven optimum over the group sizes searched, not every size a group may take (a
    cluster over `layouts.EVERY_GPU_COUNT` GPUs): which (`search.group_sizes_searched`); an
    evaluated plan outside the space the search proves its optimum over: what puts it there
    (`search.outside_search`)."""
    if outside := (plan.search or {}).get("outside_search"):
        return (f"outside the search: {'; '.join(outside)} — no proven optimum of `rlplan "
                "plan` covers this plan (search.outside_search)")
    searched = (plan.search or {}).get("group_sizes_searched")
    if plan.status != "optimal" or not searched:
        return None
    menu = (spans(searched) if isinstance(searched, list) else
            "; ".join(f"{pool}: {spans(sizes)}" for pool, sizes in searched.items()))
    return (f"proof: over the group sizes searched ({menu}), not every size a group may take "
            f"(search.group_sizes_searched)")


def degrees_proof_line(plan: Plan) -> str | None:
    """A proven optimum over pp in powers of two (`search.pp_proven`: a large cluster, or
    `search.every_pp` false) and cp in chunks of `search.min_cp_chunk` tokens or more
    (`search.cp_proven`), not every degree a layout may take: which, and the setting that
    widens each."""
    search = plan.search or {}
    pp, cp = search.get("pp_proven"), search.get("cp_proven")
    parts = ([f"pp in {pp} (search.every_pp: true, --every-pp, searches every divisor)"]
             if pp and pp != EVERY_PP else [])
    parts += ([f"cp in {cp} (search.min_cp_chunk: 1 searches every cp)"]
              if cp and cp != EVERY_CP else [])
    if plan.status != "optimal" or not parts:
        return None
    return f"proof: over {'; '.join(parts)}, not every degree a layout may take"


def proof_lines(plan: Plan) -> list[str]:
    """What a plan's proof leaves out, one line each (KV sizes, group sizes, degrees) — or, for an
    evaluated plan, what puts it outside the search (`size_proof_line`)."""
    return [line for line in (kv_proof_line(plan), size_proof_line(plan),
                               degrees_proof_line(plan)) if line is not None]


def memory_line(plan: Plan) -> str:
    """'binding memory: …' when the fullest GPU is within BINDING_MARGIN of its capacity; else
    the peak, saying memory does not bind."""
    peak, capacity = plan.memory["peak_gib_per_gpu"], plan.memory["capacity_gib"]
    where = plan.explanation["binding_constraint"]
    headroom = plan.memory.get("headroom_gib") or 0.0
    left = (f"; {headroom:.1f} GiB per GPU left free (search.memory_headroom, "
            "--memory-headroom)" if headroom else "")
    usable = capacity - headroom
    if memory_binds(peak, capacity, headroom):
        return f"binding memory: {where}{left}"
    what = "of capacity" if not headroom else "of the capacity less the headroom"
    return (f"memory does not bind ({peak / usable:.0%} {what} at the peak, below the "
            f"{1 - BINDING_MARGIN:.0%} that binds): {where}{left}")


FRAMEWORK_CHANGES_SHOWN = 2
"""What a framework would change, per release in the view (the JSON has them all)."""


def framework_lines(plan: Plan) -> list[str]:
    """The framework the plan was searched and priced for, or which releases run it as it is
    and what each of the others would change."""
    if not plan.frameworks:
        return []
    if plan.framework:
        (mine,) = plan.frameworks
        if mine["runs_as_is"]:
            return [f"framework: {plan.framework} runs it as is (priced with its preset)"]
        return [f"framework: {plan.framework} (priced with its preset) would change: "
                + "; ".join(mine["changes"])
                + (f"; {mine['as_it_runs']}" if mine.get("as_it_runs") else "")]
    runs = [f["label"] + (" (training only)" if f.get("training_only") else "")
            for f in plan.frameworks if f["runs_as_is"]]
    out = [f"frameworks that run it as is: {', '.join(runs) if runs else 'none'} "
           "(--framework NAME plans for one)"]
    for f in plan.frameworks:
        if f["runs_as_is"]:
            continue
        changes = f["changes"]
        more = len(changes) - FRAMEWORK_CHANGES_SHOWN
        out.append(f"  {f['label']}: {'; '.join(changes[:FRAMEWORK_CHANGES_SHOWN])}"
                   + (f" (+{more} more in the JSON)" if more > 0 else "")
                   + (f"; {f['as_it_runs']}" if f.get("as_it_runs") else ""))
    return out


def rollout_section(rollout: dict, layout: dict | None,
                    im: InterModel) -> list[RenderableType]:
    """The plan view's "Rollout" section: why generation takes what it takes — where the
    slowest replica's time goes, the KV cache and the concurrency it allows, the response
    lengths, and the regime with what would move it (`layout`: the generation task's, for its
    group and replica count). Lines stay within 100 columns; the regime sentence wraps."""
    parts = rollout["parts"]
    total = sum(parts.values())
    where = f" on {layout['group']}" if layout else ""
    of = f" (slowest of {layout['dp']} replicas)" if layout else " (slowest replica)"
    table = Table(title=f"Rollout{where}: {total:.2f} s{of}, {rollout['regime']}")
    for _, label in PARTS:
        table.add_column(label, justify="right")
    table.add_row(*(f"{parts[k]:.2f} s ({parts[k] / total:.0%})" if parts.get(k, 0) > 0
                    else "—" for k, _ in PARTS))
    out: list[RenderableType] = [
        table,
        f"  {rollout.get('precision', 'bf16 weights, bf16 KV cache')} of "
        f"{rollout['kv_cache_tokens']:,} tokens per replica",
        f"  running sequences: peak {rollout['peak_running']} of max_num_seqs "
        f"{rollout['max_num_seqs']}, mean {rollout['mean_running']:.1f}"]
    redo = ([f"{rollout['preemptions']:,} preemptions"] if rollout["preemptions"] > 0 else []) \
        + ([f"{rollout['recomputed_tokens']:,} tokens recomputed"]
           if rollout["recomputed_tokens"] > 0 else [])
    if redo:
        out.append(f"  {'; '.join(redo)}")
    if rollout["carried_tokens_per_step"] > 0:
        out.append(f"  partial rollouts: {rollout['carried_tokens_per_step']:,.0f} tokens "
                   f"carried per step; the longest response spans {rollout['steps_spanned']} "
                   f"steps")
    n = rollout["response_lengths"]
    tail = f"; the last 10% take {rollout['tail_s']:.2f} s" if rollout["tail_s"] > 0 else ""
    out.append(f"  responses (tokens): mean {n['mean']:,.0f}, p50 {n['p50']:,.0f}, "
               f"p90 {n['p90']:,.0f}, max {n['max']:,}{tail}")
    out.append(Padding(regime_sentence(rollout, im), (0, 0, 0, 2), expand=False))
    return out


def regime_sentence(rollout: dict, im: InterModel | None = None) -> str:
    """The rollout's regime (`breakdown.rollout`) in one sentence naming what would move it —
    the one place the wording lives. Remedies the plan already uses (`im`) are not offered."""
    im = im or InterModel()
    regime, parts = rollout["regime"], rollout["parts"]
    total = sum(parts.values())
    if regime == "tail-bound":
        cuts = [c for c, used in (("partial rollouts (allow --max-staleness 1)",
                                   im.partial_rollout),
                                  ("a lower max_response_len", False),
                                  ("inter-stage fusion", im.inter_stage_fusion)) if not used]
        return (f"tail-bound: the last 10% of responses take {rollout['tail_s']:.2f} s of "
                f"{total:.2f} s; {_either(cuts)} would cut it")
    if regime == "KV-bound":
        why = []
        cap = min(rollout["max_num_seqs"], rollout.get("share_per_replica",
                                                       rollout["max_num_seqs"]))
        if rollout["peak_running"] < cap:
            why.append(f"the KV cache ({rollout['kv_cache_tokens']:,} tokens per replica) caps "
                       f"the running batch at {rollout['peak_running']} of {cap}")
        if rollout["preemptions"] > 0:
            why.append(f"recomputing preempted sequences takes {parts['recompute']:.2f} s of "
                       f"{total:.2f} s")
        helps = [h for h, used in (("offload co-located state during generation",
                                    im.offload_during_generation),
                                   ("more tensor parallelism", False),
                                   ("fewer models resident on the group", False)) if not used]
        return f"KV-bound: {' and '.join(why)}; more KV memory would help: {_either(helps)}"
    if regime == "throughput-bound":
        return ("throughput-bound: the replicas run full batches; more GPUs for generation "
                f"would cut it{_smaller_tp(rollout, total)}")
    return regime


def _smaller_tp(rollout: dict, total: float) -> str:
    """What half the tensor parallelism (twice the replicas) was priced at, as the advice's
    tail: offered only when it is faster, said to be slower when it is not."""
    alt = rollout.get("smaller_tp")
    if not alt:
        return ""
    what = f"TP {alt['tp']} with {alt['dp']} replicas"
    if alt["time_s"] < total:
        return f", and so would {what} ({alt['time_s']:.2f} s)"
    return f" ({what} prices slower: {alt['time_s']:.2f} s)"


def _either(options: list[str]) -> str:
    """'a', 'a or b', 'a, b, or c'."""
    if len(options) < 3:
        return " or ".join(options)
    return f"{', '.join(options[:-1])}, or {options[-1]}"


def price_origin(source: str | None) -> str:
    """Where a plan's price came from, in words for the view (the JSON keeps the full
    source: the profile's citation)."""
    if source == "flag":
        return "from --price"
    if source == "scenario":
        return "from the scenario's cluster.price_usd_per_gpu_hour"
    profile = (source or "profile").split(" (", 1)[0]
    return f"the {profile} default; --price overrides it"

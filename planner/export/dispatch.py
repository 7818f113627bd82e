"""`export` and `parse_framework`: the package's API (`planner/export/__init__.py`), with
what dispatching to the exporters needs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner.errors import InputError
from planner.export.as_run import running_notes
from planner.export.base import Export, ExportError, training_software_notes
from planner.export.deepspeed import export_deepspeed
from planner.export.formats import FORMATS
from planner.export.keys import VERSIONS, check_version
from planner.export.megatron import export_megatron
from planner.export.nemo_rl import export_nemo_rl
from planner.export.openrlhf import export_openrlhf
from planner.export.verl import export_verl
from planner.frameworks import capabilities, releases
from planner.specs.scenario import Scenario

EXPORTERS = {"verl": export_verl, "openrlhf": export_openrlhf, "deepspeed": export_deepspeed,
             "megatron": export_megatron, "nemo-rl": export_nemo_rl}


def parse_framework(text: str, flag: str = "--framework") -> tuple[str, str]:
    """`verl`, `openrlhf@0.9.5`, … → (format, version: the newest unless given), for a format
    `export` writes."""
    fmt, _, version = text.partition("@")
    if fmt in releases() and fmt not in FORMATS:  # a preset without an exporter (none today)
        raise InputError(f"{flag}: {fmt} is planned and priced but has no exporter yet; "
                         f"choose --format {', '.join(FORMATS)}")
    if fmt not in FORMATS:
        raise InputError(f"{flag}: unknown format '{fmt}'; choose one of "
                         f"{', '.join(FORMATS)} (optionally @VERSION)")
    return fmt, check_version(fmt, version or None)


def export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str | None = None) -> Export:
    """The config for framework `fmt` at `version` (default: its newest release). A refusal
    names the formats that do accept the plan, found by exporting to each."""
    if fmt not in FORMATS:
        raise InputError(f"--format: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}")
    version = check_version(fmt, version)
    try:
        return _export(plan, sc, fmt, version)
    except ExportError as err:
        raise ExportError(f"{err}; {refusal_hint(plan, sc, fmt, version, err.replan)}",
                          err.replan) from None


def _export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str) -> Export:
    """The export with its notes: the pools, the exporter, what running the plan as the
    framework does changes (refused when it no longer fits), the training software."""
    sc, pool_notes = pools_for_export(plan, sc, fmt, version)
    done = EXPORTERS[fmt](plan, sc, version)
    priced = running_notes(plan, sc, f"{fmt}@{version}", done.runs)
    return replace(done, notes=(*done.notes, *pool_notes, *priced, *training_software_notes(sc)))


TRAINER_ONLY = ("deepspeed", "megatron")  # their exports configure training alone


def refusal_hint(plan: dict[str, Any], sc: Scenario, fmt: str, version: str,
                 replan: bool = True) -> str:
    """What fixes a refused export: the flag that re-plans for the format (unless the plan
    was already searched for it, or re-planning cannot help), and the formats that accept the
    plan as it is, a trainer-only one said so."""
    fix = ("" if not replan else
           f"re-plan with --framework {fmt}@{version} (the search then offers only what it "
           "runs)" if plan.get("framework") != f"{fmt}@{version}" else
           "the scenario has changed since the plan was made: re-plan it")
    others = [f"{o} (training only)" if o in TRAINER_ONLY else o
              for o in accepting(plan, sc, exclude=fmt)]
    accept = f"--format {' or '.join(others)} accepts it as it is" if others else ""
    return "; ".join(x for x in (fix, accept) if x) or "no format accepts the plan as it is"


def pools_for_export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str
                     ) -> tuple[Scenario, tuple[str, ...]]:
    """A plan on several pools: on one of them only, that pool's scenario (a plain cluster);
    across GPU types, verl's resource pools (one per group, so one per GPU type) with a note
    on what verl does not pin; a framework that launches one job on one GPU type (its
    preset's `mixed_pools`): refused."""
    if not sc.multi_pool:
        return sc, ()
    groups = plan.get("groups") or []
    used = list(dict.fromkeys(g.get("pool") for g in groups if isinstance(g, dict)))
    if len(used) == 1 and used[0] is not None:
        pool = sc.pool(used[0])
        return sc.on_pool(pool.name), (f"the plan runs on pool {pool.name} "
                                       f"({pool.cluster.gpu.name}) alone: exported for it",)
    named = ", ".join(f"{p.name} ({p.cluster.gpu.name})" for p in sc.pools if p.name in used)
    if not capabilities(f"{fmt}@{version}").mixed_pools:
        raise ExportError(f"groups: the plan runs on pools {named}; {fmt} launches its roles "
                          "as one job on one GPU type and cannot place them by GPU type")
    where = "; ".join(f"group {g['name']} on {g['pool']}" for g in groups)
    return sc, (f"pools {named}: verl gets a resource pool per group ({where}); its "
                "resource_pool_spec counts nodes × GPUs and names no GPU type, so Ray places "
                "each pool on whichever nodes have free GPUs — start each pool's nodes as "
                "planned and check the placement (`ray status`), verl does not enforce it",)


def accepting(plan: dict[str, Any], sc: Scenario, exclude: str) -> list[str]:
    """The formats (at their default versions) that export `plan` without refusing."""
    out = []
    for fmt in FORMATS:
        if fmt == exclude:
            continue
        try:
            _export(plan, sc, fmt, VERSIONS[fmt][0])
        except InputError:  # a refusal, or a plan the scenario does not allow
            continue
        out.append(fmt)
    return out

"""`rlplan validate FILE`: check any input file rlplan reads, and show what it resolves to."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli import options as o
from planner.cli.output import billions, console, print_json, reports_errors
from planner.errors import InputError
from planner.specs.files import path_kind, read_mapping, shorten
from planner.specs.hardware import load_preset_file, load_profile, load_profile_file
from planner.specs.model import load_model_path
from planner.specs.scenario import load_scenario


class Kind(StrEnum):
    auto = "auto"
    scenario = "scenario"
    model = "model"
    hardware = "hardware"
    cluster = "cluster"


_MODEL_KEYS = {"hidden_size", "n_embd", "num_hidden_layers", "architectures", "model_type"}
_SCENARIO_KEYS = {"algorithm", "models", "workload"}
_HARDWARE_KEYS = {"bf16_tflops", "memory_gib", "hbm_tbps"}


def detect_kind(path: Path) -> Kind:
    """What kind of input a file is, from its shape (a folder is a model folder)."""
    kind = path_kind(path)  # None too for a name the system cannot take
    if kind == "dir":
        return Kind.model
    if kind is None:
        raise InputError(f"{shorten(str(path))}: no such file or folder; check the path")
    keys = set(read_mapping(path))
    if path.suffix.lower() == ".json" and keys & _MODEL_KEYS:
        return Kind.model
    if keys & _SCENARIO_KEYS:
        return Kind.scenario
    if keys & _HARDWARE_KEYS:
        return Kind.hardware
    if "gpu" in keys and "gpus_per_node" in keys:
        return Kind.cluster
    if keys & _MODEL_KEYS:
        return Kind.model
    raise InputError(f"{path}: cannot tell what kind of file this is (no algorithm/models, "
                     "hidden_size, bf16_tflops or gpu field); pass --kind "
                     "scenario|model|hardware|cluster")


def lengths_line(d: dict[str, Any]) -> str:
    """'lognormal σ 1.0 — mean 4,096, p50 2,310, ..., 3.1% at the cap 16,384'."""
    shape = {"lognormal": f"lognormal σ {d.get('sigma')}",
             "file": f"file {d.get('file')}"}.get(d["shape"], d["shape"])
    return (f"{shape} — mean {d['mean']:,.0f}, p50 {d['p50']:,}, p90 {d['p90']:,}, "
            f"p99 {d['p99']:,}, {d['clipped_fraction']:.1%} at the cap {d['cap']:,}")


def _validate(path: Path, kind: Kind, flags: dict[str, Any]) -> tuple[Kind, dict[str, Any]]:
    if kind is Kind.auto:
        kind = detect_kind(path)
    if flags and kind is not Kind.scenario:
        raise InputError(f"{path} is a {kind.value} file; scenario override flags apply to "
                         "scenario files only")
    if kind is Kind.scenario:
        return kind, load_scenario(path, flags).summary()
    if kind is Kind.model:
        return kind, load_model_path(path).summary()
    if kind is Kind.hardware:
        return kind, load_profile_file(path).model_dump()
    preset = load_preset_file(path)
    load_profile(preset.gpu)
    return kind, preset.model_dump()


@o.scenario_flags()
@reports_errors
def validate(
    file: Annotated[Path, typer.Argument(help="A scenario, model config.json (or folder), "
                                         "hardware profile or cluster preset.")],
    kind: Annotated[Kind, typer.Option(help="What the file is; auto-detected by default.")]
    = Kind.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    flags: dict | None = None,
) -> None:
    """Check an input file and show what it resolves to (exit 2 with the reason if it is bad)."""
    kind, summary = _validate(file, kind, flags or {})
    if as_json:
        print_json({"file": str(file), "kind": kind.value, "valid": True, "resolved": summary})
        return
    console.print(f"[green]valid[/green] {kind.value}: {file}")
    if kind is Kind.scenario:
        models = ", ".join(f"{r} {m['name']} ({billions(m['params_total'])})"
                           for r, m in summary["models"].items())
        c, w = summary["cluster"], summary["workload"]
        pools = c.get("pools") or [c]
        shape = " + ".join(f"{p['nodes']}×{p['gpus_per_node']} {p['gpu']}"
                           + (f" ({p['name']})" if "pools" in c else "") for p in pools)
        console.print(f"  {summary['algorithm']} ({summary['family']} family); {models}; "
                      f"reward: {summary['reward_kind']}")
        console.print(f"  B={w['prompts_per_step']} K={w['samples_per_prompt']} "
                      f"S={w['prompt_len']} T={w['response_len']} (max "
                      f"{w['max_response_len']}); {shape} = {c['total_gpus']} GPUs; "
                      f"engine {summary['runtime']['engine']}"
                      + (f"; controller {us:g} µs per generated token"
                         if (us := summary["runtime"]["controller_us_per_token"]) else ""))
        if w["response_lengths"]:
            console.print(f"  response lengths: {lengths_line(w['response_lengths'])}")
        for note in summary["notes"]:
            console.print(f"  [yellow]note[/yellow]: {note}")
    elif kind is Kind.model:
        console.print(f"  {summary['model_type']}, {billions(summary['params_total'])} params "
                      f"({billions(summary['params_active'])} active), "
                      f"{summary['attention']} attention")
        if summary["moe_layers_described"]:
            console.print(f"  MoE layers: {summary['moe_layers_described']}")
        if summary["quantization_described"]:
            console.print(f"  quantization: {summary['quantization_described']} — read (FP8 "
                          "checkpoints roll out in FP8; training in bf16)")
        for note in summary["notes"]:
            console.print(f"  [yellow]note[/yellow]: {note}")
    else:
        console.print(f"  {summary['name']}: {summary.get('description', '')}")

"""Framework exporters: a plan JSON → a config for verl, OpenRLHF, DeepSpeed or Megatron-LM.

`export(plan, sc, fmt, version)` is the one entry point; each target lives in its own module
as a pure function. Every key an exporter writes is checked against the target's own key list
(`planner/export/keys/`) or the key set docs/exports.md names.
"""

from __future__ import annotations

from typing import Any

from planner.errors import InputError
from planner.export.base import Export, ExportError
from planner.export.deepspeed import export_deepspeed
from planner.export.keys import VERL_COMMIT
from planner.export.megatron import export_megatron
from planner.export.openrlhf import export_openrlhf
from planner.export.verl import export_verl
from planner.specs.scenario import Scenario

FORMATS = ("verl", "openrlhf", "deepspeed", "megatron")

__all__ = ["FORMATS", "Export", "ExportError", "export"]


def export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str | None = None) -> Export:
    """The config for framework `fmt` (at `version`, where the framework has several)."""
    if fmt not in FORMATS:
        raise InputError(f"--format: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}")
    if fmt == "openrlhf":
        return export_openrlhf(plan, sc, version)
    if version is not None and not (fmt == "verl" and version == VERL_COMMIT):
        known = f"only {VERL_COMMIT}" if fmt == "verl" else "none (it has one key set)"
        raise InputError(f"--framework-version: {fmt} has no version '{version}'; known: {known}")
    exporter = {"verl": export_verl, "deepspeed": export_deepspeed, "megatron": export_megatron}
    return exporter[fmt](plan, sc)

"""Framework exporters: a plan JSON → a config for verl, OpenRLHF, DeepSpeed or Megatron-LM.

`export(plan, sc, fmt, version)` is the one entry point; each target lives in its own module
as a pure function. Every key an exporter writes is checked against the target's own key list
(`planner/export/keys/`, generated from the releases by tools/refresh_keys.py), and the tests
run every export through the frameworks' own config code (tests/export/test_frameworks.py).
"""

from __future__ import annotations

from typing import Any

from planner.errors import InputError
from planner.export.base import Export, ExportError
from planner.export.deepspeed import export_deepspeed
from planner.export.keys import VERSIONS, check_version
from planner.export.megatron import export_megatron
from planner.export.openrlhf import export_openrlhf
from planner.export.verl import export_verl
from planner.specs.scenario import Scenario

FORMATS = ("verl", "openrlhf", "deepspeed", "megatron")
EXPORTERS = {"verl": export_verl, "openrlhf": export_openrlhf, "deepspeed": export_deepspeed,
             "megatron": export_megatron}

__all__ = ["FORMATS", "VERSIONS", "Export", "ExportError", "export"]


def export(plan: dict[str, Any], sc: Scenario, fmt: str, version: str | None = None) -> Export:
    """The config for framework `fmt` at `version` (default: its newest release). A refusal
    names the formats that do accept the plan, found by exporting to each."""
    if fmt not in FORMATS:
        raise InputError(f"--format: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}")
    version = check_version(fmt, version)
    try:
        return EXPORTERS[fmt](plan, sc, version)
    except ExportError as err:
        others = accepting(plan, sc, exclude=fmt)
        where = (f"--format {' or '.join(others)} accepts this plan" if others else
                 "no other format accepts this plan")
        raise ExportError(f"{err}; {where}") from None


def accepting(plan: dict[str, Any], sc: Scenario, exclude: str) -> list[str]:
    """The formats (at their default versions) that export `plan` without refusing."""
    out = []
    for fmt in FORMATS:
        if fmt == exclude:
            continue
        try:
            EXPORTERS[fmt](plan, sc, VERSIONS[fmt][0])
        except ExportError:
            continue
        out.append(fmt)
    return out

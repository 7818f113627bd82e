"""What a framework release runs, as the exporters use it: its preset's `Capabilities`
(`planner/frameworks/`), and the refusal of a layout outside them."""

from __future__ import annotations

from typing import Any

from planner.export.base import ExportError
from planner.frameworks import Capabilities, capabilities
from planner.specs.model import ModelSpec

__all__ = ["Capabilities", "capabilities", "check"]


def check(caps: Capabilities, kind: str, layout: Any, spec: ModelSpec | None, where: str) -> None:
    """Refuse (`ExportError`) a layout of `kind` the release cannot run."""
    if (why := caps.refusal(kind, layout, spec, where)) is not None:
        raise ExportError(why)

"""Framework exporters: a plan JSON → a config for verl, OpenRLHF, DeepSpeed, Megatron-LM or
NeMo-RL.

`export(plan, sc, fmt, version)` is the one entry point; each target lives in its own module
as a pure function. Every key an exporter writes is checked against the target's own key list
(`planner/export/keys/`, generated from the releases by tools/refresh_keys.py), and the tests
run every export through the frameworks' own config code (tests/export/test_frameworks.py).
"""

from __future__ import annotations

from typing import Any

from planner.export.formats import FORMATS

__all__ = ["FORMATS", "VERSIONS", "Export", "ExportError", "export", "parse_framework"]


def __getattr__(name: str) -> Any:
    """The rest of the API (`dispatch.py`), imported when first used: a command that only
    names the formats (`rlplan plan`'s help and flags) does not load the exporters."""
    if name in __all__:
        from planner.export import dispatch
        return getattr(dispatch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""OR-Tools' CP-SAT module (`cp_model`), imported without pandas.

`ortools.sat.python.cp_model` imports pandas at its top for its pandas-indexed helpers
(`new_int_var_series` and the like), which rlplan never calls. Importing pandas takes about a
third of a second, as long as the 8-GPU example's whole search (`bench/startup.py`). So while
cp_model loads, a stand-in `pandas` gives the two names its module body and annotations read
(`Index`, `Series`); then its `pd` becomes pandas imported on first use, so those helpers still
work for whoever calls them. Where pandas is already imported, cp_model simply uses it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _OnFirstUse(types.ModuleType):
    """pandas, imported when one of its names is first read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


def _load() -> types.ModuleType:
    if "pandas" in sys.modules or "ortools.sat.python.cp_model" in sys.modules:
        from ortools.sat.python import cp_model
        return cp_model
    stand_in = types.ModuleType("pandas")
    stand_in.Index = type("Index", (), {})  # what cp_model's module body reads, as types only
    stand_in.Series = type("Series", (), {})
    sys.modules["pandas"] = stand_in
    try:
        from ortools.sat.python import cp_model
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    cp_model.pd = _OnFirstUse("pandas")
    return cp_model


cp_model = _load()

"""OR-Tools' CP-SAT module (`cp_model`), imported without pandas where that is safe.

`ortools.sat.python.cp_model` imports pandas at its top for its pandas-indexed helpers
(`new_int_var_series` and the like), which rlplan never calls. Importing pandas takes 0.13–0.3 s
on the 2-core machine, as long as the 8-GPU example's search (`bench/startup.py`). So while
cp_model loads, a stand-in `pandas` gives the two names its module body reads (`Index`,
`Series`, in type aliases and annotations); then its `pd` becomes pandas imported on first use,
so those helpers still work for whoever calls them.

The stand-in is in `sys.modules` only while cp_model loads, and only in a process running one
thread (no other thread can import pandas meanwhile and get it). Where pandas is already
imported, where other threads run, or where a release's cp_model reads more of pandas at load
than the stand-in has, cp_model is imported as it is, pandas and all.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from typing import Any

_CP_MODEL = "ortools.sat.python.cp_model"


class _OnFirstUse(types.ModuleType):
    """pandas, imported when one of its names is first read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


def load(name: str = _CP_MODEL) -> types.ModuleType:
    """Module `name` (cp_model) imported against the stand-in where that is safe (above)."""
    if "pandas" in sys.modules or name in sys.modules or threading.active_count() > 1:
        return importlib.import_module(name)
    stand_in = types.ModuleType("pandas")
    stand_in.Index = type("Index", (), {})
    stand_in.Series = type("Series", (), {})
    sys.modules["pandas"] = stand_in
    try:
        module = importlib.import_module(name)
    except Exception:  # a release reading more of pandas at load: import it as it is
        sys.modules.pop(name, None)
        module = None
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    if module is None:
        return importlib.import_module(name)
    module.pd = _OnFirstUse("pandas")
    return module


cp_model = load()

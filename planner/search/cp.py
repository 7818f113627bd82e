"""OR-Tools' CP-SAT Python module, loaded without pandas.

`ortools.sat.python.cp_model` imports pandas at load (about a fifth of a second, a quarter of
`rlplan plan`'s imports) for its `*_series` helpers alone, which the search never calls.
When pandas is not loaded yet, the module is loaded against a placeholder (its load only names
`pandas.Index` and `pandas.Series` in a type alias), and its `pd` is then a proxy that imports
the real pandas on first use: OR-Tools' pandas API works as before for whoever calls it, and
`import pandas` elsewhere gets the real one.
"""

from __future__ import annotations

import importlib
import sys
import types


class _Pandas(types.ModuleType):
    """pandas, imported on first attribute access."""

    def __getattr__(self, name: str):
        return getattr(importlib.import_module("pandas"), name)


def _load() -> types.ModuleType:
    if "ortools.sat.python.cp_model" in sys.modules or "pandas" in sys.modules:
        return importlib.import_module("ortools.sat.python.cp_model")
    placeholder = types.ModuleType("pandas")
    placeholder.Index = type("Index", (), {})  # type: ignore[attr-defined]
    placeholder.Series = type("Series", (), {})  # type: ignore[attr-defined]
    sys.modules["pandas"] = placeholder
    try:
        module = importlib.import_module("ortools.sat.python.cp_model")
    finally:
        if sys.modules.get("pandas") is placeholder:
            del sys.modules["pandas"]
    module.pd = _Pandas("pandas")  # type: ignore[attr-defined]
    return module


cp_model = _load()

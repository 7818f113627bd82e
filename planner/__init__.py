"""rlplan: plan the parallel layout of RL post-training of LLMs on a GPU cluster.

Layers (DESIGN.md): specs → theory / cost model → search → plan → reports and exports.

The Python API (`planner.api`): `from planner import load_scenario, plan, evaluate, sweep`.
Importing the package is light; each function imports what it needs when called.
"""

import sys
import types

from planner.api import evaluate, load_scenario, plan, sweep
from planner.version import VERSION as __version__

__all__ = ["__version__", "evaluate", "load_scenario", "plan", "sweep"]


class _Package(types.ModuleType):
    """The package module, keeping the API's names: `plan` and `sweep` are also submodules
    (`planner.plan`, `planner.sweep`), and importing a submodule sets it as an attribute of
    its package, which would replace the function. The submodules stay importable by name
    (`from planner.plan import Plan`, `sys.modules`)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

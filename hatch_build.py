"""Build hook: compile the rollout simulation's C module (`planner/cost/_rollout_sim.c`) into
the wheel, with setuptools' `build_ext` and the machine's C compiler.

The module is optional: when it cannot be built (no compiler, no Python headers) the install
goes on with a warning and rlplan runs the same simulation in Python
(`planner.cost.rollout._simulate_python`), the same plans, only slower. An editable install
builds it next to its source, where the checkout's `planner` package is imported from.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NAME = "planner.cost._rollout_sim"
SOURCE = "planner/cost/_rollout_sim.c"


class NativeRollout(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                built = _compile(root, Path(tmp))
            except Exception as e:  # any failure: the pure-Python simulation runs instead
                self.app.display_warning(
                    f"rlplan: the rollout simulation's C module was not built ({e}); rlplan "
                    "runs it in Python instead: the same plans, slower searches")
                return
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            if version == "editable":  # imported from the source tree
                _replace(built, root / "planner" / "cost" / built.name)
            else:
                kept = root / "build" / "native" / built.name
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(built, kept)
                build_data["force_include"][str(kept)] = f"planner/cost/{built.name}"


def _replace(src: Path, dest: Path) -> None:
    """`src` copied to `dest` by a rename: a process that has loaded the old `dest` keeps its
    own file (writing over a loaded module in place crashes that process)."""
    part = dest.with_name(dest.name + ".part")
    shutil.copy2(src, part)
    os.replace(part, dest)


def _compile(root: Path, tmp: Path) -> Path:
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    dist = Distribution({"name": "rlplan-native", "ext_modules": [
        Extension(NAME, [str(root / SOURCE)], extra_compile_args=["-O2"])]})
    cmd = build_ext(dist)
    cmd.build_lib, cmd.build_temp = str(tmp / "lib"), str(tmp / "temp")
    cmd.ensure_finalized()
    cmd.run()
    return Path(cmd.get_ext_fullpath(NAME))

"""Run an export through the framework's own config code (installed --no-deps from
tests/frameworks.txt). Each checker raises the framework's own error on a config it refuses;
`pytest.skip` with the reason where the framework (or what its config code needs) is missing.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import math
import os
import sys
import types
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.export.plans import command_words


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed: pip install --no-deps -r tests/frameworks.txt")
    return Path(next(iter(spec.submodule_search_locations)))


# --- verl: Hydra composition against the release's own config files ---------------------------

def verl_compose(script: str) -> Any:
    """Compose the exported overrides with Hydra against the installed verl's config folder
    (what `verl.trainer.main_ppo`'s @hydra.main does before any GPU work). Returns the config."""
    pytest.importorskip("hydra", reason="hydra-core (the test extra) is not installed")
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = _package_dir("verl") / "trainer" / "config"
    words = command_words(script, "verl.trainer.main_ppo")
    name = next((w.split("=", 1)[1] for w in words if w.startswith("--config-name=")),
                "ppo_trainer.yaml").removesuffix(".yaml")
    overrides = [w for w in words if not w.startswith("--")]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=name, overrides=overrides)


# --- OpenRLHF: its own parser and post-parse checks --------------------------------------------

@cache
def _openrlhf_main(script: str) -> types.CodeType:
    """The `if __name__ == "__main__":` block of the installed openrlhf/cli/`script`.py — the
    parser and the checks after parsing — without the final `train(args)`, which needs GPUs.
    The module's own imports (ray, vLLM, DeepSpeed) are not run: the block only needs argparse
    and openrlhf.utils.config.hierarchize, given it below."""
    source = (_package_dir("openrlhf") / "cli" / f"{script}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    main = next(n for n in tree.body if isinstance(n, ast.If)
                and "__main__" in ast.unparse(n.test))
    body = []
    for node in main.body:
        text = ast.unparse(node)
        if text.startswith("train(args)"):
            break
        if isinstance(node, ast.ImportFrom) and node.module == "openrlhf.utils.config":
            continue  # given by the caller (importing openrlhf.utils pulls DeepSpeed and torch)
        body.append(node)
    module = ast.Module(body=body, type_ignores=[])
    return compile(ast.fix_missing_locations(module), f"openrlhf/cli/{script}.py", "exec")


def _hierarchize() -> Any:
    path = _package_dir("openrlhf") / "utils" / "config.py"
    spec = importlib.util.spec_from_file_location("_openrlhf_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.hierarchize


class _Parser(argparse.ArgumentParser):
    """OpenRLHF's parser, fed the exported words instead of sys.argv; a refused flag raises."""

    argv: ClassVar[list[str]] = []

    def parse_args(self, args=None, namespace=None):
        return super().parse_args(self.argv if args is None else args, namespace)

    def error(self, message):
        raise ValueError(f"OpenRLHF's parser: {message}")


def openrlhf_parse(script_text: str, script: str) -> Any:
    """Parse the exported command with OpenRLHF's own parser and run its post-parse checks;
    returns the parsed (hierarchized) args. An assertion of OpenRLHF's raises AssertionError."""
    module = f"openrlhf.cli.{script}"
    argv = command_words(script_text, module)
    parser_cls = type("Parser", (_Parser,), {"argv": argv})
    fake_argparse = types.SimpleNamespace(**{**vars(argparse), "ArgumentParser": parser_cls})
    scope = {"__name__": "__openrlhf_check__", "argparse": fake_argparse, "os": os,
             "math": math, "datetime": datetime,
             "hierarchize": _hierarchize(), "print": lambda *a, **k: None}
    exec(_openrlhf_main(script), scope)
    return scope["args"]


# --- DeepSpeed: its config class with the role's world size ------------------------------------

def deepspeed_config(config: dict[str, Any], world_size: int) -> Any:
    """DeepSpeedConfig(config) as a job of `world_size` ranks would build it (its batch
    arithmetic divides by the world size)."""
    pytest.importorskip("torch", reason="torch (CPU build, tests/frameworks.txt) is missing")
    try:
        from deepspeed.runtime import config as ds_config
    except ImportError as err:  # a dependency of DeepSpeed's config code
        pytest.skip(f"DeepSpeed's config module does not import here: {err}")

    class Dist:  # deepspeed.comm as a job of world_size ranks, rank 0, sees it
        @staticmethod
        def get_rank(*_: Any) -> int:
            return 0

        @staticmethod
        def get_world_size(*_: Any) -> int:
            return world_size

    saved, ds_config.dist = ds_config.dist, Dist
    try:
        return ds_config.DeepSpeedConfig(config)
    finally:
        ds_config.dist = saved


# --- Megatron-LM -------------------------------------------------------------------------------

MEGATRON_SKIP = ("Megatron-LM's parse_args/validate_args ship in megatron-core >= 0.17 "
                 "(megatron/training/arguments.py), which needs Python >= 3.12; this is Python "
                 f"{sys.version_info.major}.{sys.version_info.minor}, and megatron-core 0.16.1, "
                 "the newest release that installs, ships no megatron/training")


def megatron_validate(words: list[str], env: dict[str, str]) -> Any:
    """Megatron-LM's own parse_args + validate_args on one role's arguments, where installed."""
    if importlib.util.find_spec("megatron") is None or \
            importlib.util.find_spec("megatron.training") is None:
        pytest.skip(MEGATRON_SKIP)
    from megatron.training.arguments import parse_args, validate_args  # pragma: no cover

    old = sys.argv  # pragma: no cover
    sys.argv = ["pretrain", *words]
    try:
        os.environ.update(env)
        args = parse_args()
        validate_args(args)
        return args
    finally:
        sys.argv = old

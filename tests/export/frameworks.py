"""Run an export through the framework's own config code (installed --no-deps from
tests/frameworks.txt). Each checker raises the framework's own error on a config it refuses;
`pytest.skip` with the reason where the framework (or what its config code needs) is missing.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import types
import zipfile
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.export import torch_stub
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

class _ConfigPackages(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """DeepSpeed's packages without their `__init__`: `import deepspeed` loads the whole
    engine (ops, ZeRO, pipelines), where the config class needs only its own modules. A package
    is an empty module with its path, so `deepspeed.runtime.config` and the config modules it
    imports load as written; the two packages whose names they import are given those names
    from the module their `__init__` takes them from."""

    NAMES_FROM: ClassVar[dict[str, str]] = {"deepspeed.utils": "deepspeed.utils.logging",
        "deepspeed.runtime.tensor_parallel": "deepspeed.runtime.tensor_parallel.config"}

    def find_spec(self, name, path, target=None):
        if name != "deepspeed" and not name.startswith("deepspeed."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.submodule_search_locations is not None:
            spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        source = self.NAMES_FROM.get(module.__name__)
        if source:
            names = vars(importlib.import_module(source))
            vars(module).update({k: v for k, v in names.items() if not k.startswith("_")})


class _CpuAccelerator:  # what DeepSpeed's config modules ask the accelerator: its name
    @staticmethod
    def device_name(*_: Any) -> str:
        return "cpu"


def _runtime_only(name: str) -> Any:
    def refuse(*_: Any, **__: Any) -> None:
        raise RuntimeError(f"{name}: runtime code, not given to the config check")
    return refuse


_DEEPSPEED_MODULES: dict[str, types.ModuleType] = {}  # torch's stand-in and DeepSpeed's modules


@contextlib.contextmanager
def _deepspeed_config_module() -> Any:
    """deepspeed.runtime.config, loaded with torch's stand-in (tests/export/torch_stub.py) and
    DeepSpeed's packages without their `__init__`; two modules given: the accelerator (a CPU,
    as DeepSpeed picks on a machine without a GPU) and deepspeed.runtime.utils (tensor code,
    imported by the loss scaler's module and never called by the config class)."""
    _package_dir("deepspeed")
    with torch_stub.swapped(("torch", "deepspeed"), [torch_stub.FINDER, _ConfigPackages()],
                            _DEEPSPEED_MODULES):
        if "deepspeed.runtime.config" not in sys.modules:
            accelerator = types.ModuleType("deepspeed.accelerator")
            accelerator.get_accelerator = _CpuAccelerator
            utils = types.ModuleType("deepspeed.runtime.utils")
            utils.has_inf_or_nan = _runtime_only("deepspeed.runtime.utils.has_inf_or_nan")
            sys.modules.update({"deepspeed.accelerator": accelerator,
                                "deepspeed.runtime.utils": utils})
        try:
            module = importlib.import_module("deepspeed.runtime.config")
        except ImportError as err:  # a dependency of DeepSpeed's config code
            pytest.skip(f"DeepSpeed's config module does not import here: {err}")
        yield module


def deepspeed_config(config: dict[str, Any], world_size: int) -> Any:
    """DeepSpeedConfig(config) as a job of `world_size` ranks would build it (its batch
    arithmetic divides by the world size)."""

    class Dist:  # deepspeed.comm as a job of world_size ranks, rank 0, sees it
        @staticmethod
        def get_rank(*_: Any) -> int:
            return 0

        @staticmethod
        def get_world_size(*_: Any) -> int:
            return world_size

    with _deepspeed_config_module() as ds_config:
        saved, ds_config.dist = ds_config.dist, Dist
        try:
            return ds_config.DeepSpeedConfig(config)
        finally:
            ds_config.dist = saved


# --- Megatron-LM: its own parse_args/validate_args from megatron-core 0.19.2 -------------------

MEGATRON_CORE = "0.19.2"
_CHECK = Path(__file__).with_name("megatron_check.py")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rlplan-tests" / f"megatron-core-{MEGATRON_CORE}"


@cache
def megatron_core() -> Path:
    """A folder holding megatron-core 0.19.2's `megatron` package, unpacked from its wheel.
    The wheel is cp312 only (megatron/training needs Python ≥ 3.12 by its metadata); pip
    fetches it for 3.12 from the package index (`pip download --no-deps --only-binary=:all:
    --python-version 3.12`) and it is unpacked into a cache folder once. Skips, saying why,
    only when the download fails (no network, no index)."""
    target = _cache_dir()
    if (target / "megatron" / "training" / "arguments.py").is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.12", "--timeout", "30", "--retries", "1", "--dest", tmp,
             f"megatron-core=={MEGATRON_CORE}"], capture_output=True, text=True, timeout=600,
            check=False)
        wheels = list(Path(tmp).glob("megatron_core-*.whl"))
        if run.returncode != 0 or not wheels:
            last = (run.stderr.strip().splitlines() or ["no wheel"])[-1]
            pytest.skip(f"Megatron-LM's own argument checks did not run: megatron-core "
                        f"{MEGATRON_CORE} could not be downloaded from the package index "
                        f"({last})")
        staging = Path(tempfile.mkdtemp(dir=target.parent if target.parent.exists() else
                                        _mkdir(target.parent)))
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(staging)
    with contextlib.suppress(OSError):  # another run may have unpacked it meanwhile
        staging.rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    return target


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def megatron_validate(cases: list[tuple[list[str], int, dict[str, str]]],
                      torch: str = "stand-in") -> list[dict]:
    """Megatron-LM's own parse_args + validate_args on each (argv, world size, environment),
    in one process running megatron-core 0.19.2 (tests/export/megatron_check.py): per case
    {"ok": True, "args": {...derived...}} or {"ok": False, "error": "..."}. torch is
    tests/export/torch_stub.py's stand-in, or with torch="real" the installed one."""
    root = megatron_core()
    env = {**os.environ, "RLPLAN_CHECK_TORCH": torch, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    payload = [{"argv": argv, "world_size": world, "env": extra} for argv, world, extra in cases]
    run = subprocess.run([sys.executable, str(_CHECK)], input=json.dumps(payload), env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"megatron_check.py failed: {run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout)


def model_args(spec: Any, seq_len: int) -> list[str]:
    """The model-shape arguments a launcher gives beside an export's parallel arguments (the
    export names none: docs/exports.md has no flags for the shape), from the scenario's model,
    plus what parse_args needs to run: a learning rate and an iteration count."""
    args = ["--num-layers", str(spec.num_hidden_layers), "--hidden-size", str(spec.hidden_size),
            "--num-attention-heads", str(spec.num_attention_heads),
            "--ffn-hidden-size", str(spec.intermediate_size or 4 * spec.hidden_size),
            "--seq-length", str(seq_len), "--max-position-embeddings", str(seq_len),
            "--lr", "1e-5", "--train-iters", "10"]
    if spec.num_key_value_heads != spec.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(spec.num_key_value_heads)]
    if not (spec.mlp_bias or spec.o_bias):  # the model's biases (TransformerConfig checks MoE's)
        args.append("--disable-bias-linear")
    if spec.qkv_bias:
        args.append("--add-qkv-bias")
    if spec.moe is not None:
        args += ["--moe-router-topk", str(spec.moe.experts_per_token),
                 "--moe-ffn-hidden-size", str(spec.moe.expert_intermediate_size)]
    return args


# --- NeMo-RL: its own shipped configs and config loader, where a checkout is installed ---------

NEMO_RL_MISSING = (
    "NeMo-RL's own config code did not run: NeMo-RL is not on the package index (PyPI's "
    "`nemo-rl` is a 0.0.0 placeholder from NVIDIA with no code; checked 2026-12-01), so the "
    "README's test command cannot install it. To run this check, install a NeMo-RL checkout "
    "(`pip install --no-deps -e PATH`) or point NEMO_RL_REPO at one")


def nemo_rl_repo() -> Path:
    """A NeMo-RL checkout (its examples/configs/ beside the nemo_rl package); skips, saying
    why, when there is none."""
    root = os.environ.get("NEMO_RL_REPO")
    if root is None:
        spec = importlib.util.find_spec("nemo_rl")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip(NEMO_RL_MISSING)
        root = str(Path(next(iter(spec.submodule_search_locations))).parent)
    if not (Path(root) / "examples" / "configs").is_dir():
        pytest.skip(f"{NEMO_RL_MISSING} (found nemo_rl at {root}, without examples/configs/: "
                    "the placeholder package)")
    return Path(root)


def nemo_rl_check(text: str) -> dict[str, Any]:
    """An exported NeMo-RL config against NeMo-RL's own files: every key it sets must exist in
    the shipped config it builds on (`defaults:`, examples/configs/), and NeMo-RL's loader
    (`nemo_rl.utils.config.load_config`, which follows `defaults:`) must load it with the
    export's values. Returns the loaded config as a plain dict."""
    import yaml
    from omegaconf import OmegaConf

    from planner.importers.nemo_rl import flatten

    configs = nemo_rl_repo() / "examples" / "configs"
    exported = yaml.safe_load(text)
    base = flatten(yaml.safe_load((configs / exported["defaults"]).read_text()))
    keys = flatten({k: v for k, v in exported.items() if k != "defaults"})
    missing = [k for k in keys if k not in base]
    assert not missing, f"keys NeMo-RL's {exported['defaults']} does not have: {missing}"
    from nemo_rl.utils.config import load_config

    with tempfile.TemporaryDirectory(dir=configs) as tmp:
        path = Path(tmp) / "rlplan.yaml"
        path.write_text(text.replace(f"defaults: {exported['defaults']}",
                                     f"defaults: ../{exported['defaults']}"))
        loaded = flatten(OmegaConf.to_container(load_config(str(path)), resolve=True))
    wrong = {k: (v, loaded.get(k)) for k, v in keys.items() if loaded.get(k) != v}
    assert not wrong, f"NeMo-RL's loader changed: {wrong}"
    return loaded


# Megatron-Core's flag for each NeMo-RL megatron_cfg key rlplan writes (a switch: True/False)
_MEGATRON_OF_NEMO = {
    "tensor_model_parallel_size": "--tensor-model-parallel-size",
    "pipeline_model_parallel_size": "--pipeline-model-parallel-size",
    "context_parallel_size": "--context-parallel-size",
    "expert_model_parallel_size": "--expert-model-parallel-size",
    "expert_tensor_parallel_size": "--expert-tensor-parallel-size",
    "num_layers_in_first_pipeline_stage": "--decoder-first-pipeline-num-layers",
    "num_layers_in_last_pipeline_stage": "--decoder-last-pipeline-num-layers",
    "sequence_parallel": "--sequence-parallel",
    "recompute_granularity": "--recompute-granularity",
    "optimizer.use_distributed_optimizer": "--use-distributed-optimizer",
    "optimizer.optimizer_cpu_offload": "--optimizer-cpu-offload",
    "optimizer.optimizer_offload_fraction": "--optimizer-offload-fraction",
    "optimizer.use_precision_aware_optimizer": "--use-precision-aware-optimizer",
}


def nemo_rl_megatron_args(text: str) -> tuple[list[str], int] | None:
    """The Megatron-Core arguments NeMo-RL's `policy.megatron_cfg` stands for (NeMo-RL builds
    Megatron-Core's config from it) and the policy's world size; None for DTensor."""
    import yaml

    from planner.importers.nemo_rl import flatten

    c = flatten(yaml.safe_load(text))
    if not c.get("policy.megatron_cfg.enabled"):
        return None
    argv = []
    for key, flag in _MEGATRON_OF_NEMO.items():
        value = c.get(f"policy.megatron_cfg.{key}")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    if c.get("policy.megatron_cfg.recompute_granularity") == "full":
        argv += ["--recompute-method", "uniform", "--recompute-num-layers", "1"]
    argv += ["--micro-batch-size", str(c["policy.train_micro_batch_size"]),
             "--global-batch-size", str(c["policy.train_global_batch_size"]), "--bf16"]
    gpus = c["cluster.num_nodes"] * c["cluster.gpus_per_node"]
    p = "policy.generation.colocated"
    if c.get(f"{p}.enabled") is False:
        gpus -= c[f"{p}.resources.num_nodes"] * c[f"{p}.resources.gpus_per_node"]
    return argv, gpus

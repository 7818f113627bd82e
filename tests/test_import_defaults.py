"""The importer's framework defaults (planner/importers/defaults.py) against the releases' own
files: verl 0.9.1's generated trainer configs and OpenRLHF 0.11.2's parsers, as installed from
tests/frameworks.txt (the Megatron table: tests/export/test_frameworks.py, with Megatron's own
parse_args)."""

from __future__ import annotations

import re

import pytest
import yaml

from planner.export.openrlhf import DPO_FLAGS, PPO_FLAGS
from planner.importers.defaults import OPENRLHF, OPENRLHF_DPO, VERL, VERL_INHERITS
from tests.export import frameworks as fw


def _flat(node: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out |= _flat(value, path) if isinstance(value, dict) else {path: value}
    return out


@pytest.fixture(scope="module")
def verl_configs() -> dict:
    folder = fw._package_dir("verl") / "trainer" / "config"
    out = {}
    for name in ("_generated_ppo_trainer.yaml", "_generated_ppo_megatron_trainer.yaml"):
        out |= _flat(yaml.safe_load((folder / name).read_text(encoding="utf-8")))
    return out


def test_verl_defaults_are_091s(verl_configs):
    for key, value in VERL.items():
        assert key in verl_configs, key
        assert verl_configs[key] == value, (key, verl_configs[key], value)


def test_verl_inherited_defaults_are_091s(verl_configs):
    """A key VERL_INHERITS says follows another is `${oc.select:that_key,...}` in the file."""
    for key, parent in VERL_INHERITS.items():
        m = re.fullmatch(r"\$\{oc\.select:([\w.]+),.*\}", str(verl_configs.get(key)))
        assert m and m.group(1) == parent, (key, verl_configs.get(key))


def _parsed(script: str, words: str):
    text = f"python3 -m openrlhf.cli.{script} {words}\n"
    return fw.openrlhf_parse(text, script)


def _value(args, flag: str):
    node = args
    for part in flag[2:].split("."):
        node = getattr(node, part)
    return node


def test_openrlhf_defaults_are_0112s():
    """Each concept's default against 0.11.2's parser given only what its checks require."""
    args = _parsed("train_ppo_ray", "--actor.model_name_or_path a --reward.model_name_or_path r")
    for concept, value in OPENRLHF.items():
        flag = PPO_FLAGS.get(concept, (None, None))[1] or {
            "max_epochs": "--train.max_epochs", "async_queue": "--train.async_queue_size"}[concept]
        assert _value(args, flag) == value, (concept, flag)
    dpo = _parsed("train_dpo", "--model.model_name_or_path a")
    for concept, value in OPENRLHF_DPO.items():
        flag = DPO_FLAGS.get(concept, (None, None))[1] or "--train.max_epochs"
        assert _value(dpo, flag) == value, (concept, flag)

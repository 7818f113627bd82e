"""The shipped hardware catalog: every profile and preset loads, and every number names a source."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.specs.hardware import (
    list_presets,
    list_profiles,
    load_profile,
    presets_dir,
    profiles_dir,
    resolve_cluster,
)

PROFILE_NAMES = {
    "a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200-sxm", "h20", "b200",
    "gb200", "l40s", "mi250x-gcd", "mi300x", "mi325x", "mi355x", "gaudi3", "tpu-v4", "tpu-v5e",
    "tpu-v5p", "tpu-v6e",
}
PRESET_NAMES = {
    "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "mi300x-8x", "h20-8x", "dgx-a100-80gb",
}


def _yaml_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml"))


PROFILE_FILES = _yaml_files(profiles_dir())
PRESET_FILES = _yaml_files(presets_dir())


def _numeric_fields(raw: dict) -> list[str]:
    return [k for k, v in raw.items() if isinstance(v, int | float) and not isinstance(v, bool)]


def test_all_profiles_and_presets_are_shipped():
    assert {p.name for p in list_profiles()} >= PROFILE_NAMES
    assert {p.name for p in list_presets()} >= PRESET_NAMES


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_profile_numbers_name_their_source(path: Path):
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["name"] == path.stem
    sources = raw.get("sources") or {}
    numeric = _numeric_fields(raw)
    assert {"memory_gib", "bf16_tflops", "hbm_tbps", "gpus_per_node"} <= set(numeric)
    missing = [f for f in numeric if not str(sources.get(f, "")).strip()]
    assert not missing, f"{path.name}: numeric fields without a source: {missing}"
    stray = set(sources) - set(raw)
    assert not stray, f"{path.name}: sources for fields the file does not set: {sorted(stray)}"
    # efficiency factors and the runtime reserve, when a profile sets them, are sourced too
    for key in ("efficiency", "runtime_reserve_gib"):
        assert key not in raw or str(sources.get(key, "")).strip(), f"{path.name}: {key}"


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_preset_resolves_to_a_shipped_profile(path: Path):
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["name"] == path.stem
    assert raw["gpu"] in PROFILE_NAMES
    assert str((raw.get("sources") or {}).get("gpus_per_node", "")).strip()
    cluster = resolve_cluster(path.stem)
    assert cluster.gpu.name == raw["gpu"]
    assert cluster.gpus_per_node == raw["gpus_per_node"]
    assert cluster.nodes == raw.get("nodes", 1)


def test_hand_checked_conversions():
    h100 = load_profile("h100-sxm")
    assert h100.intra_node_gbps == 450  # NVLink4 900 GB/s bidirectional / 2
    assert h100.inter_node_gbps == 50  # 400 Gb/s ConnectX-7 / 8
    assert load_profile("b200").bf16_tflops == 2250  # 4,500 sparse / 2
    gb200 = load_profile("gb200")
    assert gb200.scale_up_gpus == 72
    assert gb200.gpus_per_node == 4
    assert gb200.memory_gib == pytest.approx(189471 / 1024, abs=0.01)
    assert load_profile("mi250x-gcd").memory_gib == 64  # 128 GB per OAM / 2 GCDs
    assert load_profile("l40s").intra_node_gbps == 32  # PCIe Gen4 64 GB/s bidirectional / 2


def test_nvl72_preset_is_one_rack():
    rack = resolve_cluster("gb200-nvl72")
    assert rack.total_gpus == 72 == rack.gpu.scale_up_gpus

"""The shipped catalogs load from a plain (non-editable) install, away from the source tree."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile

import pytest

from planner.export.keys import KEY_FILES, key_set
from planner.frameworks import all_presets
from tests.conftest import REPO

PROBE = """
import json, planner
from planner.specs.files import data_dir
from planner.specs.hardware import list_presets, list_profiles
from planner.specs.model import list_models
from planner.export.keys import KEY_FILES, key_set
from planner.frameworks import all_presets
print(json.dumps({"framework_presets": [p.name for p in all_presets()],
                  "package": planner.__file__, "models_dir": str(data_dir("model_specs")),
                  "models": len(list_models()), "gpus": len(list_profiles()),
                  "presets": len(list_presets()),
                  "key_lists": {f"{s} {v}": len(key_set(s, v)) for s, v in KEY_FILES}}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(REPO)], check=True, capture_output=True)
    (path,) = out.glob("rlplan-*.whl")
    return path


def test_wheel_carries_the_catalogs(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    shipped_models = {p.name for p in (REPO / "model_specs").glob("*.json")}
    in_wheel = {n.rsplit("/", 1)[1] for n in names if n.startswith("planner/_data/model_specs/")}
    assert shipped_models and shipped_models == in_wheel
    assert "planner/_data/hardware_profiles/h100-sxm.yaml" in names
    assert "planner/_data/hardware_profiles/clusters/dgx-h100.yaml" in names
    assert "planner/frameworks/presets/verl@0.9.1.yaml" in names


def test_installed_package_reads_its_own_data(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         check=True)
    found = json.loads(run.stdout)
    assert found["package"].startswith(str(site))  # not the source tree
    assert found["models_dir"].startswith(str(site))
    assert found["models"] == len(list((REPO / "model_specs").glob("*.json")))
    assert found["gpus"] == len(list((REPO / "hardware_profiles").glob("*.yaml")))
    assert found["presets"] == len(list((REPO / "hardware_profiles/clusters").glob("*.yaml")))
    assert found["key_lists"] == {f"{s} {v}": len(key_set(s, v)) for s, v in KEY_FILES}
    assert found["framework_presets"] == [p.name for p in all_presets()]


def test_the_editable_build_replaces_the_module_a_running_process_holds(tmp_path):
    # a reinstall renames the new module over the old one: a process that opened (loaded) the
    # old file keeps reading it whole, where writing over it in place changed it under the
    # process (a SIGSEGV mid-run)
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    dest, new = tmp_path / "_rollout_sim.so", tmp_path / "built.so"
    dest.write_bytes(b"old" * 1000)
    new.write_bytes(b"new" * 1000)
    with dest.open("rb") as loaded:
        hook._replace(new, dest)
        assert loaded.read() == b"old" * 1000
    assert dest.read_bytes() == b"new" * 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_rollout_sim.so", "built.so"]

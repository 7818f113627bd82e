"""The shipped hardware profiles: each validates, every number it sets names its source, the
figures taken from research notes say which row they use, and every profile plans (or says
in one line which figure it lacks)."""

from __future__ import annotations

import json

import pytest

from planner.specs.files import catalog_names
from planner.specs.hardware import HardwareProfile, load_profile_file, profiles_dir
from tests.test_cli import assert_bad_input

FILES = catalog_names(profiles_dir(), (".yaml", ".yml"))
DESCRIPTIVE = {"name", "description", "vendor", "sources"}
# filled from hardware_host_domain_prices.md: a [U] figure there is an assumption here
HOST_AND_PRICE = ("host_memory_gib", "host_link_gbps", "price_usd_per_gpu_hour")


def test_the_catalog_ships_profiles():
    assert len(FILES) >= 18  # the profiles below are parametrised over this catalog


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_shipped_profile_validates_and_sources_every_number(name):
    profile = load_profile_file(FILES[name])
    assert profile.name == name  # `--gpu NAME` finds the file of that name
    numeric = profile.model_fields_set - DESCRIPTIVE
    missing = sorted(f for f in numeric if f not in profile.sources)
    assert not missing, f"{name}: fields without a sources entry: {missing}"
    assert all(profile.sources[f].strip() for f in numeric)


@pytest.mark.parametrize("name", sorted(FILES))
def test_unverified_host_and_price_figures_are_marked_assumptions(name):
    profile = load_profile_file(FILES[name])
    for field in HOST_AND_PRICE:
        text = profile.sources.get(field, "")
        if "[U]" in text:
            assert text.startswith("[U] assumption:"), f"{name}.{field}: {text}"


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_header_states_which_row_and_what_is_unknown(name):
    text = FILES[name].read_text(encoding="utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Which row" in header and "cheapest on-demand" in header
    profile = load_profile_file(FILES[name])
    unknown = header[header.index("# Unknown"):] if "# Unknown" in header else ""
    for field in ("host_memory_gib", "host_link_gbps", "price_usd_per_gpu_hour",
                  "intra_node_gbps", "inter_node_gbps"):
        if getattr(profile, field) is None:  # every hole is listed as unknown
            assert field in unknown, f"{name}: {field} is unset but not listed as unknown"


def test_the_gb200_host_link_is_the_shared_c2c_split():
    """NVLink-C2C: 900 GB/s bidirectional per superchip of 2 GPUs → 450 per direction,
    225 per GPU when both offload at once — the conservative, marked figure."""
    gb200 = load_profile_file(FILES["gb200"])
    assert gb200.host_link_gbps == 900 / 2 / 2
    assert gb200.scale_up_domain_gpus == 72 and gb200.gpus_per_node == 4
    assert gb200.sources["host_link_gbps"].startswith("[U] assumption:")


def test_the_gb200_runs_at_the_b200_fitted_efficiencies():
    """GB200's GPU is the B200 die and no GB200 training row exists: its efficiencies are the
    b200 profile's fit (issue 11), so refitting b200 must carry over (or say why not)."""
    gb200 = load_profile_file(FILES["gb200"])
    b200 = load_profile_file(FILES["b200"])
    assert (gb200.efficiency.compute, gb200.efficiency.hbm) == (
        b200.efficiency.compute, b200.efficiency.hbm)
    assert "b200" in gb200.sources["efficiency"]


def _scenario(name: str) -> dict:
    profile: HardwareProfile = load_profile_file(FILES[name])
    return {"algorithm": "grpo",
            "models": {"actor": "qwen2.5-0.5b", "reference": "actor", "reward": "verifier"},
            "workload": {"prompts_per_step": 16, "samples_per_prompt": 4, "prompt_len": 128,
                         "response_len": 256, "max_response_len": 512},
            "cluster": {"gpu": name, "nodes": 1, "gpus_per_node": profile.gpus_per_node},
            "search": {"time_limit_s": 2}}


def _answered(result, profile: HardwareProfile) -> None:
    """Exit 0, or exit 2 with one error line naming the figure the profile lacks."""
    assert "Traceback" not in result.output + result.stderr
    if result.exit_code == 0:
        return
    missing = [f for f in ("intra_node_gbps", "inter_node_gbps")
               if getattr(profile, f) is None]
    assert missing, f"{profile.name} has its link figures but exit {result.exit_code}: " \
                    f"{result.stderr}"
    assert_bad_input(result, f"profile {profile.name}", missing[0], "--gpu")


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_shipped_profile_plans_or_names_what_it_lacks(cli, write, name):
    path = write(f"{name}.yaml", _scenario(name))
    result = cli("plan", str(path), "--json")
    _answered(result, load_profile_file(FILES[name]))
    if result.exit_code == 0:
        plan = json.loads(result.stdout)
        assert plan["status"] in ("optimal", "feasible")
        plan_file = write(f"{name}-plan.json", plan)  # and the answer evaluates
        again = cli("evaluate", str(path), str(plan_file), "--json")
        assert again.exit_code == 0, again.stderr
        assert json.loads(again.stdout)["iteration_time_s"] == pytest.approx(
            plan["iteration_time_s"])


def test_a_profile_without_a_scale_up_figure_plans_on_one_gpu(cli, write):
    """tpu-v4 has no ICI figure: 4 chips exit 2 (above), 1 chip plans."""
    sc = _scenario("tpu-v4")
    sc["cluster"]["gpus_per_node"] = 1
    result = cli("plan", str(write("one.yaml", sc)), "--json")
    assert result.exit_code == 0, result.stderr

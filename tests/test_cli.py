"""The CLI contract: --json shapes, exit codes, one-line errors on stderr with no traceback."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATA, REPO, grpo_scenario


def assert_bad_input(result, *fragments: str) -> None:
    """Exit 2, one line on stderr naming what is wrong, nothing on stdout, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rlplan: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_version(cli):
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("rlplan ")


def test_models_json(cli):
    result = cli("models", "--json")
    assert result.exit_code == 0
    models = json.loads(result.stdout)
    by_name = {m["name"]: m for m in models}
    assert len(models) == 35
    q = by_name["qwen3-30b-a3b"]
    assert q["params_total"] == 30532122624 and q["params_active"] == 3353032704
    assert q["moe"]["num_experts"] == 128 and q["num_key_value_heads"] == 4
    assert {"hidden_size", "num_hidden_layers", "head_dim", "tie_word_embeddings"} <= set(q)


def test_gpus_json(cli):
    result = cli("gpus", "--json")
    assert result.exit_code == 0
    profiles = {p["name"]: p for p in json.loads(result.stdout)}
    assert profiles["h100-sxm"]["memory_gib"] == 80 and profiles["h100-sxm"]["gpus_per_node"] == 8


def test_human_tables(cli):
    assert "qwen2.5-7b" in cli("models").stdout
    assert "h100-sxm" in cli("gpus").stdout
    assert "gb200-nvl72" in cli("clusters").stdout


def test_validate_example_scenarios(cli):
    for path in sorted((REPO / "examples").glob("*.yaml")):
        result = cli("validate", str(path))
        assert result.exit_code == 0, result.output
        assert "valid scenario" in result.stdout


def test_validate_json_and_overrides(cli):
    path = REPO / "examples" / "grpo-qwen2.5-7b.yaml"
    result = cli("validate", str(path), "--json", "--nodes", "2", "--samples", "16",
                 "--actor", "qwen3-8b")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["kind"] == "scenario" and out["valid"] is True
    resolved = out["resolved"]
    assert resolved["cluster"]["total_gpus"] == 16
    assert resolved["workload"]["samples_per_prompt"] == 16
    assert resolved["models"]["actor"]["name"] == "qwen3-8b"
    assert resolved["models"]["reference"]["name"] == "qwen3-8b"  # "actor" follows the override


def test_validate_other_kinds(cli):
    assert "valid model" in cli("validate", str(DATA / "hf_configs/gpt2")).stdout
    assert "valid hardware" in cli("validate", str(REPO / "hardware_profiles/b200.yaml")).stdout
    result = cli("validate", str(REPO / "hardware_profiles/clusters/dgx-h100.yaml"))
    assert "valid cluster" in result.stdout


def test_schema(cli):
    schema = json.loads(cli("schema", "scenario").stdout)
    assert {"algorithm", "models", "workload", "cluster"} <= set(schema["properties"])


# Bad input: each case exits 2 with one line naming the field and the fix.

def test_unknown_model_name_suggests(cli, write):
    path = write("s.yaml", grpo_scenario(models={"actor": "qwen2.5-7", "reward": "verifier"}))
    assert_bad_input(cli("validate", str(path)), "models.actor", "unknown model 'qwen2.5-7'",
                     "did you mean qwen2.5-7b")


def test_unknown_gpu_suggests(cli, write):
    path = write("s.yaml", grpo_scenario(cluster={"gpu": "h100", "nodes": 1}))
    assert_bad_input(cli("validate", str(path)), "unknown GPU profile 'h100'", "h100-sxm")


def test_unknown_algorithm(cli, write):
    path = write("s.yaml", grpo_scenario(algorithm="gpro"))
    assert_bad_input(cli("validate", str(path)), "algorithm", "did you mean grpo")


def test_missing_field(cli, write):
    scenario = grpo_scenario()
    del scenario["workload"]["prompt_len"]
    assert_bad_input(cli("validate", str(write("s.yaml", scenario))),
                     "workload.prompt_len' is missing", "add it")


def test_unknown_field_is_reported(cli, write):
    scenario = grpo_scenario()
    scenario["workload"]["prompt_length"] = 5
    assert_bad_input(cli("validate", str(write("s.yaml", scenario))),
                     "workload.prompt_length", "not known")


@pytest.mark.parametrize("value", [-4, 0])
def test_non_positive_size(cli, write, value):
    scenario = grpo_scenario()
    scenario["workload"]["prompts_per_step"] = value
    assert_bad_input(cli("validate", str(write("s.yaml", scenario))),
                     "workload.prompts_per_step", "greater than 0")


def test_negative_nodes_flag(cli):
    result = cli("validate", str(REPO / "examples/grpo-qwen2.5-7b.yaml"), "--nodes", "-1")
    assert_bad_input(result, "cluster.nodes", "greater than 0")


def test_heads_not_divisible_by_kv_heads(cli, write):
    cfg = json.loads((DATA / "hf_configs/qwen2.5-7b-instruct/config.json").read_text())
    path = write("bad/config.json", {**cfg, "num_key_value_heads": 5})
    assert_bad_input(cli("validate", str(path)), "num_key_value_heads", "not divisible",
                     "set it to a divisor")


def test_model_path_in_scenario_is_checked(cli, write):
    cfg = json.loads((DATA / "hf_configs/qwen2.5-7b-instruct/config.json").read_text())
    write("m/config.json", {**cfg, "num_key_value_heads": 3})
    path = write("s.yaml", grpo_scenario(models={"actor": "./m", "reward": "verifier"}))
    assert_bad_input(cli("validate", str(path)), "models.actor", "num_key_value_heads")


def test_malformed_yaml(cli, write):
    path = write("s.yaml", "algorithm: grpo\nmodels: {actor: [unclosed\n")
    assert_bad_input(cli("validate", str(path)), "malformed YAML at line", "fix the syntax")


def test_malformed_json(cli, write):
    path = write("config.json", '{"hidden_size": 8,, }')
    assert_bad_input(cli("validate", str(path)), "malformed JSON at line 1", "fix the syntax")


def test_folder_without_config_json(cli, tmp_path):
    assert_bad_input(cli("validate", str(tmp_path)), "no config.json")


def test_missing_file(cli, tmp_path):
    assert_bad_input(cli("validate", str(tmp_path / "nope.yaml")), "no such file")


def test_grpo_needs_two_samples(cli, write):
    scenario = grpo_scenario()
    scenario["workload"]["samples_per_prompt"] = 1
    assert_bad_input(cli("validate", str(write("s.yaml", scenario))),
                     "workload.samples_per_prompt", "at least 2")


def test_mini_batches_must_divide(cli, write):
    scenario = grpo_scenario()
    scenario["workload"]["mini_batches"] = 7
    assert_bad_input(cli("validate", str(write("s.yaml", scenario))),
                     "workload.mini_batches", "does not divide the 256 sequences")


def test_gpus_per_node_beyond_the_node(cli, write):
    path = write("s.yaml", grpo_scenario(cluster={"gpu": "h100-sxm", "gpus_per_node": 16}))
    assert_bad_input(cli("validate", str(path)), "gpus_per_node", "exceeds the 8 GPUs")


def test_override_flags_need_a_scenario(cli):
    result = cli("validate", str(DATA / "hf_configs/gpt2"), "--nodes", "2")
    assert_bad_input(result, "scenario override flags apply to scenario files only")


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "examples").glob("*.yaml")))
def test_every_shipped_example_plans_and_its_plan_evaluates(cli, tmp_path, name):
    """The README's examples end to end: `plan` answers a plan (exit 0, the JSON contract) and
    `evaluate` prices that plan as the search did. (A search answer that the plan's own checks
    refuse once crashed `plan` on the PPO example with a traceback.) Ten seconds each: the PPO
    example's search takes 20–26 s, so its answer here is a plan the limit cut short."""
    out = tmp_path / "plan.json"
    result = cli("plan", str(REPO / "examples" / name), "--time-limit", "10", "--out",
                 str(out))
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    assert plan["status"] in ("optimal", "feasible")
    again = cli("evaluate", str(REPO / "examples" / name), str(out), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["iteration_time_s"] == pytest.approx(
        plan["iteration_time_s"], rel=1e-9)

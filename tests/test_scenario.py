"""Scenario resolution: role defaults per algorithm, overrides, cross-checks, notes."""

from __future__ import annotations

import json

import pytest

from planner.cli.options import overrides
from planner.errors import InputError
from planner.specs.scenario import apply_overrides, load_scenario, scenario_from_plan
from planner.specs.workload import Family
from tests.conftest import DATA, REPO, grpo_scenario
from tests.test_cli import assert_bad_input


def load(write, **changes):
    return load_scenario(write("s.yaml", grpo_scenario(**changes)))


def test_grpo_defaults(write):
    s = load(write)
    assert s.family is Family.GRPO and s.reward_kind == "verifier"
    assert set(s.roles) == {"actor", "reference"}
    assert s.sequences_per_step == 64 * 4
    assert s.cluster.total_gpus == 8


def test_dapo_has_no_reference_by_default(write):
    s = load(write, algorithm="dapo", models={"actor": "qwen2.5-0.5b"})
    assert set(s.roles) == {"actor"}


def test_ppo_defaults_critic_to_the_actor_and_says_so(write):
    s = load(write, algorithm="ppo", models={"actor": "qwen2.5-0.5b", "reward": "qwen2.5-1.5b"})
    assert s.critic is s.actor and s.reward.name == "qwen2.5-1.5b" and s.reward_kind == "model"
    assert any("critic not given" in n for n in s.notes)


def test_grpo_ignores_a_critic_and_says_so(write):
    s = load(write, models={"actor": "qwen2.5-0.5b", "critic": "qwen2.5-0.5b"})
    assert s.critic is None and any("critic ignored" in n for n in s.notes)


def test_dpo_shape(write):
    s = load(write, algorithm="dpo", models={"actor": "qwen2.5-0.5b", "reward": "verifier"})
    assert s.family is Family.DPO and set(s.roles) == {"actor", "reference"}
    assert s.sequences_per_step == 64  # B pairs, K ignored
    assert any("samples_per_prompt ignored" in n for n in s.notes)
    assert any("reward ignored" in n for n in s.notes)


def test_reference_free_variants_refuse_a_reference(write):
    with pytest.raises(InputError, match="simpo is reference-free"):
        load(write, algorithm="simpo", models={"actor": "qwen2.5-0.5b", "reference": "actor"})


def test_overrides_win_over_the_file(write):
    path = write("s.yaml", grpo_scenario(cluster="dgx-h100"))  # a preset name
    s = load_scenario(path, {"cluster.nodes": 3, "algorithm": "rloo",
                             "workload.response_len": 600})
    assert s.cluster.name == "dgx-h100" and s.cluster.total_gpus == 24
    assert s.algorithm == "rloo" and s.workload.response_len == 600


def test_apply_overrides_does_not_touch_the_input():
    raw = {"cluster": "dgx-h100", "workload": {"prompt_len": 1}}
    out = apply_overrides(raw, {"cluster.nodes": 2, "workload.prompt_len": 5, "algorithm": None})
    assert out == {"cluster": {"preset": "dgx-h100", "nodes": 2}, "workload": {"prompt_len": 5}}
    assert raw == {"cluster": "dgx-h100", "workload": {"prompt_len": 1}}


def test_flags_alone_make_a_scenario():
    flags = {"algorithm": "grpo", "models.actor": "qwen3-8b", "workload.prompts_per_step": 32,
             "workload.samples_per_prompt": 4, "workload.prompt_len": 128,
             "workload.response_len": 256, "cluster.gpu": "h200-sxm", "cluster.nodes": 2}
    s = load_scenario(None, flags)
    assert s.cluster.total_gpus == 16 and s.actor.name == "qwen3-8b"


def test_flags_alone_name_the_missing_flag():
    with pytest.raises(InputError, match="'models' is missing; pass --actor") as err:
        load_scenario(None, {"algorithm": "grpo"})
    assert "'cluster' is missing; pass --gpu and --nodes" in str(err.value)
    with pytest.raises(InputError, match="'workload.prompt_len' is missing; pass --prompt-len"):
        load_scenario(None, {"algorithm": "grpo", "models.actor": "qwen3-8b",
                             "workload.prompts_per_step": 8, "workload.response_len": 8,
                             "cluster.gpu": "h100-sxm"})


def test_relative_model_path_is_read_from_the_scenario_folder(write, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text((DATA / "hf_configs/gpt2/config.json").read_text())
    s = load(write, models={"actor": "m/config.json", "reward": "verifier"})
    assert s.actor.model_type == "gpt2"


def test_sequence_beyond_model_context_is_noted(write):
    s = load(write, models={"actor": "olmo-2-1124-7b", "reward": "verifier"},
             workload={"prompts_per_step": 8, "samples_per_prompt": 2, "prompt_len": 4000,
                       "response_len": 100, "max_response_len": 200})
    assert any("exceeds its max_position_embeddings 4096" in n for n in s.notes)


def test_max_response_below_mean_is_rejected(write):
    with pytest.raises(InputError, match="max_response_len"):
        load(write, workload={"prompts_per_step": 8, "samples_per_prompt": 2, "prompt_len": 10,
                              "response_len": 100, "max_response_len": 50})


def test_multi_node_needs_an_inter_node_figure(write):
    with pytest.raises(InputError, match="inter_node_gbps"):
        load(write, cluster={"gpu": "l40s", "nodes": 2})


def test_cluster_profile_by_path(write):
    s = load(write, cluster={"gpu": str(REPO / "hardware_profiles/mi300x.yaml"), "nodes": 2})
    assert s.cluster.gpu.name == "mi300x" and s.cluster.total_gpus == 16


# the runtime fields besides the rollout engine's four
OTHER_RUNTIME_DEFAULTS = {"selective_recompute": "core_attn", "training_loss": "fp32_logits",
                          "fp8_training": "none", "training_states": "bf16_grads",
                          "attention_kernel": "fa3", "ep_dispatch": "alltoall",
                          "ep_comm_overlap": False, "controller_us_per_token": 0.0,
                          "refit": "checkpoint_engine"}


def test_engine_defaults_to_vllm_v1_and_a_flag_sets_it(write):
    path = write("s.yaml", grpo_scenario())
    assert load_scenario(path).runtime.engine == "vllm-v1"
    s = load_scenario(path, overrides({"engine": "sglang", "nodes": None}))
    assert s.runtime.engine == "sglang" and s.summary()["runtime"] == {
        "engine": "sglang", "rollout_weights": "auto", "kv_cache_dtype": "bf16",
        "old_log_probs": "recompute", **OTHER_RUNTIME_DEFAULTS}
    s = load(write, runtime={"engine": "eager"})
    assert s.runtime.engine == "eager" and s.source_input.runtime.engine == "eager"


def test_unknown_engine_names_the_field_and_the_choices(write):
    with pytest.raises(InputError, match="field 'runtime.engine': .*'vllm-v1', 'sglang', "
                                         "'vllm-v0' or 'eager'"):
        load(write, runtime={"engine": "trt-llm"})


def test_engine_survives_the_plan_json_round_trip(write):
    s = load(write, runtime={"engine": "vllm-v0"})
    plan = {"scenario": s.source_input.model_dump(mode="json", exclude_none=True)}
    assert scenario_from_plan(plan, "plan.json").runtime.engine == "vllm-v0"


def test_response_len_is_required_without_quantiles_or_a_file(write):
    with pytest.raises(InputError, match="field 'workload.response_len' is missing"):
        load(write, workload={"prompts_per_step": 8, "samples_per_prompt": 2, "prompt_len": 10,
                              "max_response_len": 50})


def test_lengths_file_path_is_read_from_the_scenario_folder(write, tmp_path):
    write("sub/lengths.txt", "10\n20\n30\n")
    s = load_scenario(write("sub/s.yaml", grpo_scenario(workload={
        "prompts_per_step": 8, "samples_per_prompt": 2, "prompt_len": 10,
        "response_lengths": {"file": "lengths.txt"}})))
    assert s.length_distribution.values == (10, 20, 30) and s.workload.response_len == 20
    assert s.source_input.workload.response_lengths.file == str(tmp_path / "sub/lengths.txt")
    absolute = load(write, workload={"prompts_per_step": 8, "samples_per_prompt": 2,
                                     "prompt_len": 10, "response_lengths": {
                                         "file": str(tmp_path / "sub/lengths.txt")}})
    assert absolute.length_distribution.values == (10, 20, 30)


def test_engine_flag_on_the_cli(cli):
    path = REPO / "examples" / "grpo-qwen2.5-7b.yaml"
    result = cli("validate", str(path), "--json", "--engine", "sglang")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["resolved"]["runtime"]["engine"] == "sglang"
    fp8 = cli("validate", str(path), "--json", "--rollout-weights", "fp8",
              "--kv-cache-dtype", "fp8")
    assert json.loads(fp8.stdout)["resolved"]["runtime"] == {
        "engine": "vllm-v1", "rollout_weights": "fp8", "kv_cache_dtype": "fp8",
        "old_log_probs": "recompute", **OTHER_RUNTIME_DEFAULTS}
    assert "engine sglang" in cli("validate", str(path), "--engine", "sglang").stdout
    assert_bad_input(cli("validate", str(path), "--engine", "tensorrt"),
                     "field 'runtime.engine'", "'sglang'")

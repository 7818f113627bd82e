"""The key lists generated from the releases load, and the key check refuses what a version
lacks."""

from __future__ import annotations

import pytest

from planner.export import ExportError
from planner.export.keys import (
    KEY_FILES,
    VERL_VERSION,
    VERSIONS,
    check_keys,
    check_version,
    has_key,
    key_set,
    unverified_keys,
    verl_key_ok,
)

NEW, OLD = VERSIONS["openrlhf"]


def test_every_key_list_loads_and_says_it_was_generated():
    assert len(KEY_FILES) == 2 + 2 * len(VERSIONS["openrlhf"]) + 1  # + NeMo-RL's
    for schema, version in KEY_FILES:
        keys = key_set(schema, version)
        assert len(keys) > 50 and not any(k.startswith("#") or not k for k in keys)


def test_nemo_rl_list_marks_what_its_source_does_not_show():
    """NeMo-RL's list is copied from docs/exports.md §5 (not generated: PyPI has no NeMo-RL);
    the keys the export needs beyond it are marked, not mixed in."""
    keys, marked = key_set("nemo-rl", "0.6"), unverified_keys("nemo-rl", "0.6")
    assert "policy.megatron_cfg.tensor_model_parallel_size" in keys - marked
    assert "policy.generation.colocated.resources.num_nodes" in keys - marked
    assert marked == {"defaults", "policy.model_name", "loss_fn.reference_policy_kl_penalty"}
    with pytest.raises(ExportError, match="policy.megatron_cfg.tensor_parallel_size"):
        check_keys("nemo-rl", "0.6", ["policy.megatron_cfg.tensor_parallel_size"])


def test_defaults_are_the_newest_releases():
    assert (VERL_VERSION, NEW, OLD) == ("0.9.1", "0.11.2", "0.9.5")
    assert check_version("openrlhf", None) == NEW
    with pytest.raises(Exception, match="openrlhf has no version 'head'.*0.11.2 or 0.9.5"):
        check_version("openrlhf", "head")


def test_flat_and_dotted_eras():
    assert has_key("openrlhf-train_ppo_ray", OLD, "--vllm_tensor_parallel_size")
    assert not has_key("openrlhf-train_ppo_ray", NEW, "--vllm_tensor_parallel_size")
    assert has_key("openrlhf-train_ppo_ray", NEW, "--vllm.tensor_parallel_size")
    assert has_key("openrlhf-train_dpo", OLD, "--ref_offload")
    assert has_key("verl-megatron", VERL_VERSION, "critic.megatron.tensor_model_parallel_size")
    assert not has_key("verl-fsdp", VERL_VERSION, "critic.megatron.tensor_model_parallel_size")


def test_verl_091_dropped_keys_the_old_exporter_wrote():
    # issue 14: these no longer exist in verl 0.9.1; the reward model moved under reward.
    for key in ("actor_rollout_ref.actor.megatron.grad_offload", "critic.megatron.grad_offload",
                "reward_model.use_reward_loop"):
        assert not verl_key_ok("verl-megatron", key)
    assert not verl_key_ok("verl-fsdp", "critic.model.fsdp_config.param_offload")
    assert verl_key_ok("verl-fsdp", "critic.fsdp.param_offload")
    assert verl_key_ok("verl-fsdp", "reward.reward_model.enable")


def test_check_refuses_a_flag_the_version_lacks():
    check_keys("openrlhf-train_ppo_ray", NEW, ["--vllm.tensor_parallel_size"])
    with pytest.raises(ExportError, match="--vllm_tensor_parallel_size"):
        check_keys("openrlhf-train_ppo_ray", NEW, ["--vllm.tensor_parallel_size",
                                                   "--vllm_tensor_parallel_size"])
    with pytest.raises(ExportError, match="critic.megatron"):
        check_keys("verl-fsdp", VERL_VERSION, ["critic.megatron.tensor_model_parallel_size"])


def test_verl_plus_prefix_only_for_new_keys_under_documented_dicts():
    new = "actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_last_" \
          "pipeline_stage"
    assert verl_key_ok("verl-megatron", "+" + new)
    assert not verl_key_ok("verl-megatron", new)  # not in the schema: needs the `+`
    assert not verl_key_ok("verl-megatron", "+actor_rollout_ref.actor.megatron."
                                            "tensor_model_parallel_size")  # exists: no `+`
    assert not verl_key_ok("verl-megatron", "+trainer.something_new")  # undocumented dict


def test_unknown_list_is_bad_input():
    with pytest.raises(Exception, match="no key list"):
        key_set("openrlhf-train_ppo_ray", "v0.8.9")


def test_partial_rollout_and_eager_flags_per_era():
    # exports.md lists --partial_rollout for ≤ v0.9.5; v0.9.5's own parser has none
    assert not any("partial" in k for k in key_set("openrlhf-train_ppo_ray", OLD))
    assert has_key("openrlhf-train_ppo_ray", NEW, "--train.partial_rollout_enable")
    assert has_key("openrlhf-train_ppo_ray", OLD, "--enforce_eager")
    assert has_key("openrlhf-train_ppo_ray", NEW, "--vllm.enforce_eager")
    for schema in ("verl-fsdp", "verl-megatron"):
        assert verl_key_ok(schema, "actor_rollout_ref.rollout.enforce_eager")

"""The frameworks' own defaults for what a launch script leaves out, one table per release,
each with its source. tests/test_import_defaults.py checks the verl and OpenRLHF 0.11.2 tables
against the installed releases' own config files and parser, and the Megatron table against
megatron-core 0.19.2's parse_args (tests/export/frameworks.py fetches it)."""

from __future__ import annotations

from typing import Any

from planner.frameworks import load_preset

# What the presets already hold (planner/frameworks/presets/, with their sources) is read from
# them: one place per fact.
_VERL, _OPENRLHF = load_preset("verl@0.9.1"), load_preset("openrlhf@0.11.2")

# verl 0.9.1: verl/trainer/config/_generated_ppo_trainer.yaml (FSDP) and
# _generated_ppo_megatron_trainer.yaml (Megatron), the flattened configs Hydra composes. A value
# `${oc.select:other,...}` there is written here as INHERIT: that key follows `other`.
VERL_SOURCE = "verl 0.9.1 trainer/config/_generated_ppo_(megatron_)trainer.yaml"
VERL: dict[str, Any] = {
    "trainer.nnodes": 1,
    "trainer.n_gpus_per_node": 8,
    "data.train_batch_size": 1024,
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "algorithm.adv_estimator": "gae",
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.use_dynamic_bsz": _VERL.training.dynamic_batch_size.value,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 16384,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.model.enable_gradient_checkpointing": True,
    "actor_rollout_ref.model.lora_rank": 0,
    "actor_rollout_ref.actor.fsdp_config.param_offload": False,
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
    "actor_rollout_ref.actor.fsdp_config.reshard_after_forward": True,
    "actor_rollout_ref.actor.fsdp_config.fsdp_size": -1,
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 1,
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": 1,
    "actor_rollout_ref.actor.megatron.context_parallel_size": 1,
    "actor_rollout_ref.actor.megatron.expert_model_parallel_size": 1,
    "actor_rollout_ref.actor.megatron.sequence_parallel": True,
    "actor_rollout_ref.actor.megatron.use_distributed_optimizer": True,
    "actor_rollout_ref.actor.megatron.param_offload": False,
    "actor_rollout_ref.actor.megatron.optimizer_offload": False,
    "actor_rollout_ref.ref.fsdp_config.param_offload": False,
    "actor_rollout_ref.ref.megatron.sequence_parallel": True,
    "actor_rollout_ref.rollout.tensor_model_parallel_size":
        _VERL.engine.tensor_parallel_size.value,
    "actor_rollout_ref.rollout.data_parallel_size": 1,
    "actor_rollout_ref.rollout.expert_parallel_size": 1,
    "actor_rollout_ref.rollout.pipeline_model_parallel_size": 1,
    "actor_rollout_ref.rollout.max_num_seqs": _VERL.engine.max_num_seqs.value,
    "actor_rollout_ref.rollout.gpu_memory_utilization":
        _VERL.engine.gpu_memory_utilization.value,
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.enforce_eager": not _VERL.engine.cuda_graphs.value,
    "actor_rollout_ref.rollout.nnodes": 0,
    "critic.ppo_max_token_len_per_gpu": 32768,
    "critic.ulysses_sequence_parallel_size": 1,
    "critic.model.enable_gradient_checkpointing": True,
    "critic.fsdp.param_offload": False,
    "critic.fsdp.optimizer_offload": False,
    "critic.fsdp.reshard_after_forward": True,
    "critic.megatron.tensor_model_parallel_size": 1,
    "critic.megatron.pipeline_model_parallel_size": 1,
    "critic.megatron.context_parallel_size": 1,
    "critic.megatron.expert_model_parallel_size": 1,
    "critic.megatron.sequence_parallel": True,
    "critic.megatron.use_distributed_optimizer": True,
    "critic.megatron.param_offload": False,
    "critic.megatron.optimizer_offload": False,
    "reward.reward_model.enable": False,
    "reward.reward_model.enable_resource_pool": False,
    "reward.reward_model.rollout.tensor_model_parallel_size": 2,
    "reward.reward_model.rollout.free_cache_engine": True,
    "reward.reward_model.n_gpus_per_node": 8,
    "reward.reward_model.nnodes": 0,
    "trainer.v1.trainer_mode": "sync",
    "trainer.v1.sampler.max_off_policy_threshold": 8,
}
# Keys whose default is another key's value (`${oc.select:...}` in the generated configs): the
# reference's Megatron degrees follow the actor's, the critic's batching follows the actor's.
VERL_INHERITS: dict[str, str] = {
    **{f"actor_rollout_ref.ref.megatron.{k}": f"actor_rollout_ref.actor.megatron.{k}"
       for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                 "virtual_pipeline_model_parallel_size", "context_parallel_size",
                 "expert_model_parallel_size", "expert_tensor_parallel_size", "param_offload")},
    "actor_rollout_ref.ref.ulysses_sequence_parallel_size":
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu":
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
    "critic.ppo_mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "critic.use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
}

# OpenRLHF 0.11.2 (dotted flags): openrlhf/cli/train_ppo_ray.py and train_dpo.py, the parsers'
# defaults. The flat-flag releases (v0.9.5, v0.8.9) share them except where OPENRLHF_FLAT says
# (docs/exports.md §2.2, §2.3: the legacy micro-batch defaults and the separate length caps).
OPENRLHF_SOURCE = "OpenRLHF 0.11.2 openrlhf/cli/train_ppo_ray.py, train_dpo.py (parser defaults)"
OPENRLHF: dict[str, Any] = {
    "actor_nodes": 1, "actor_gpus": 8, "critic_nodes": 1, "critic_gpus": 8,
    "reference_nodes": 1, "reference_gpus": 8, "reward_nodes": 1, "reward_gpus": 8,
    "vllm_tp": _OPENRLHF.engine.tensor_parallel_size.value, "zero": 2, "ds_tp": 1, "ring": 1,
    "vllm_memory": _OPENRLHF.engine.gpu_memory_utilization.value,
    "rollout_batch": 1024, "micro_rollout": 1,
    "train_batch": 128, "micro_train": 1, "samples": 1, "max_len": 2048, "max_epochs": 1,
    "init_kl": 0.01, "estimator": "gae", "async_queue": 1,
}
OPENRLHF_DPO: dict[str, Any] = {"train_batch": 128, "micro_train": 8, "max_len": 512,
                                "max_epochs": 1}
OPENRLHF_FLAT_SOURCE = "docs/exports.md §2.2–2.3 (OpenRLHF ≤ v0.9.5, flat flags)"
OPENRLHF_FLAT: dict[str, Any] = {"micro_rollout": 8, "micro_train": 4, "prompt_max_len": 1024,
                                 "max_new_tokens": 1024}
OPENRLHF_FLAT_DPO: dict[str, Any] = {}  # v0.9.5's train_dpo defaults are 0.11.2's (§2.3)

# Megatron-LM (megatron-core 0.19.2 megatron/training/arguments.py): parallel sizes 1, no
# sequence parallelism, no distributed optimizer, no recomputation; --micro-batch-size and
# --global-batch-size have no default (None: one micro-batch per data-parallel rank).
MEGATRON_SOURCE = "megatron-core 0.19.2 megatron/training/arguments.py"
MEGATRON: dict[str, Any] = {
    "--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 1,
    "--context-parallel-size": 1, "--expert-model-parallel-size": 1,
    "--sequence-parallel": False, "--use-distributed-optimizer": False,
    "--recompute-granularity": None, "--micro-batch-size": None, "--global-batch-size": None,
    "--ffn-hidden-size": None, "--num-query-groups": 1, "--seq-length": None,
}

# NeMo-RL 0.6: what a config leaves out. The values docs/exports.md §5 gives from its shipped
# configs (use_distributed_optimizer true, colocated generation, max_trajectory_age_steps 1,
# vLLM's gpu_memory_utilization 0.6 and TP 1, which the preset holds); grpo_math_1B.yaml trains
# with DTensor, grpo_math_1B_megatron.yaml switches Megatron on (§5's launch line); every
# parallel size 1, sequence parallelism, recomputation and offload off as Megatron-Core's own
# defaults (the MEGATRON table) and torch's FSDP2 have them; async GRPO off unless enabled.
_NEMO_RL = load_preset("nemo-rl@0.6")
NEMO_RL_SOURCE = ("NeMo-RL 0.6 examples/configs/grpo_math_1B(_megatron).yaml as docs/exports.md "
                  "§5 gives them, and Megatron-Core's defaults")
NEMO_RL: dict[str, Any] = {
    "policy.megatron_cfg.enabled": False,
    "policy.megatron_cfg.tensor_model_parallel_size": MEGATRON["--tensor-model-parallel-size"],
    "policy.megatron_cfg.pipeline_model_parallel_size":
        MEGATRON["--pipeline-model-parallel-size"],
    "policy.megatron_cfg.context_parallel_size": MEGATRON["--context-parallel-size"],
    "policy.megatron_cfg.expert_model_parallel_size": MEGATRON["--expert-model-parallel-size"],
    "policy.megatron_cfg.sequence_parallel": MEGATRON["--sequence-parallel"],
    "policy.megatron_cfg.activation_checkpointing": False,
    "policy.megatron_cfg.optimizer.use_distributed_optimizer": True,
    "policy.megatron_cfg.optimizer.optimizer_cpu_offload": False,
    "policy.dtensor_cfg.tensor_parallel_size": 1,
    "policy.dtensor_cfg.context_parallel_size": 1,
    "policy.dtensor_cfg.sequence_parallel": False,
    "policy.dtensor_cfg.activation_checkpointing": False,
    "policy.dtensor_cfg.cpu_offload": False,
    "policy.generation.vllm_cfg.tensor_parallel_size": _NEMO_RL.engine.tensor_parallel_size.value,
    "policy.generation.vllm_cfg.pipeline_parallel_size": 1,
    "policy.generation.vllm_cfg.expert_parallel_size": 1,
    "policy.generation.vllm_cfg.gpu_memory_utilization":
        _NEMO_RL.engine.gpu_memory_utilization.value,
    "policy.generation.vllm_cfg.enforce_eager": not _NEMO_RL.engine.cuda_graphs.value,
    "policy.generation.colocated.enabled": True,
    "grpo.async_grpo.enabled": False,
    "grpo.async_grpo.max_trajectory_age_steps": 1,
    "grpo.async_grpo.in_flight_weight_updates": False,
}

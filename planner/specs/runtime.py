"""The scenario's `runtime:` block: the software the run uses — the rollout engine and its
precisions, where the old log-probs come from, and the training software
(`planner/cost/software.py` prices those names; README "Training software")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.specs import bounds as lim

TRAINING_PRECISIONS = {
    "bf16_grads": "bf16 weights and gradients, fp32 master weights and Adam state",
    "fp32_grads": "bf16 weights, fp32 gradients, fp32 master weights and Adam state",
    "fp32_params": "fp32 sharded parameters and gradients (bf16 compute copies), fp32 Adam "
                   "state",
}
"""What the plan says training computes in, by runtime.training_states."""

REFIT_MECHANISMS = ("sharded", "checkpoint_engine", "checkpoint_engine_relays",
                    "one_rank_broadcast")
"""How a run moves the actor's weights to a rollout group of its own (`runtime.refit`;
`planner/cost/refit.py` prices each)."""

TRAINING_SOFTWARE = ("selective_recompute", "training_loss", "fp8_training", "training_states",
                     "attention_kernel", "ep_dispatch", "ep_comm_overlap")
"""The `RuntimeInput` fields naming the training software (README "Training software")."""


class RuntimeInput(BaseModel):
    """The software the run uses, where it changes the timings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["vllm-v1", "sglang", "vllm-v0", "eager"] = Field(
        "vllm-v1", description="inference engine the rollouts run on: vllm-v1 (vLLM V1 with "
        "CUDA graphs, default), sglang (SGLang ≥ 0.4, overlapped scheduler), vllm-v0 (vLLM "
        "V0-era engine, pre-2025), eager (no CUDA graphs, e.g. vLLM on ROCm multi-node as "
        "verl's AMD guide reports)")
    rollout_weights: Literal["auto", "bf16", "fp8"] = Field(
        "auto", description="precision of the actor's weights in the rollout engine: auto = "
        "fp8 when the actor's checkpoint is stored in FP8 (its config's quantization_config, "
        "e.g. DeepSeek-V3), else bf16; fp8 = FP8 weights with FP8 matmuls (vLLM --quantization "
        "fp8); training keeps BF16 weights and FP32 optimizer state either way")
    kv_cache_dtype: Literal["bf16", "fp8"] = Field(
        "bf16", description="KV-cache elements in the rollout engine: bf16 (vLLM's default, the "
        "model's dtype) or fp8 (vLLM kv_cache_dtype=fp8: twice the tokens in the same memory)")
    old_log_probs: Literal["recompute", "rollout"] = Field(
        "recompute", description="where the old policy's log-probs come from: recompute (a "
        "forward pass of the actor after generation, the frameworks' default) or rollout (the "
        "engine's own, as verl's bypass mode and its fully-async recipe take them: no actor "
        "assessment pass)")
    controller_us_per_token: float = Field(
        0.0, ge=0, le=lim.MAX_CONTROLLER_US_PER_TOKEN, description="host time a step spends "
        "per generated token off the GPUs — the single controller's processing of the "
        "responses, the rule-based reward — in series with a synchronous step, overlapped by "
        "an asynchronous one (staleness ≥ 1); 0 (default) prices none. NeMo-RL's preset "
        "(planner/frameworks/presets/nemo-rl@*.yaml) sets the rate its co-located rows imply, "
        "fitted in bench/calibration.py (`framework: nemo-rl`)")
    refit: Literal["sharded", "checkpoint_engine", "checkpoint_engine_relays",
                   "one_rank_broadcast"] = Field(
        "checkpoint_engine", description="how the trained weights reach a rollout group of its "
        "own: checkpoint_engine (default: one training rank gathers the model and broadcasts "
        "it in buckets, verl's checkpoint engine), checkpoint_engine_relays (the same, its "
        "node's training ranks relaying over their NICs: verl 0.9.1's NCCL engine), sharded "
        "(every training rank sends its share at once, NeMo-RL's NCCL refit) or "
        "one_rank_broadcast (one rank, tensor by tensor, each a synchronised round: OpenRLHF, "
        "verl's naive sync); a co-located rollout re-lays through GPU memory whatever this "
        "says (README \"Weight refit\")")
    # The training software (planner/cost/software.py prices these names; bench/training.py
    # checks them against training_h100.md): memory and time of the assessment and training.
    selective_recompute: Literal["core_attn", "every_other_mm"] = Field(
        "core_attn", description="what a layout's checkpointing: selective keeps: core_attn "
        "(Megatron's selective recompute, default: all but the attention core) or "
        "every_other_mm (torchtitan's per-op SAC, selective_ac_option = \"op\": the layer "
        "input, the attention output and every other matmul's output)")
    training_loss: Literal["fp32_logits", "eager_upcast", "compiled_upcast"] = Field(
        "fp32_logits", description="the loss over the vocabulary: fp32_logits (Megatron's "
        "vocab-parallel cross-entropy, 4 B per logit, default), eager_upcast (an unfused "
        "cross-entropy of the logits cast to fp32: torchtitan without compile, transformers; "
        "12 B per logit at its backward) or compiled_upcast (the same under torch.compile, as "
        "torchtitan compiles its loss from 2025 on: bf16 logits + bf16 gradient, 4 B)")
    fp8_training: Literal["none", "transformer_engine", "torchao", "torchao_rowwise"] = Field(
        "none", description="FP8 training: none (bf16, default), transformer_engine "
        "(Megatron/TE: linear layers at the FP8 peak, their inputs saved in FP8), torchao "
        "(torchtitan Float8Linear, tensorwise scales: FP8 matmuls, bf16 inputs saved) or "
        "torchao_rowwise (Float8Linear with rowwise scales: priced at the bf16 matmul rate, as "
        "torchtitan's own rowwise runs measure it)")
    training_states: Literal["bf16_grads", "fp32_grads", "fp32_params"] = Field(
        "bf16_grads", description="how training keeps model states, bytes per parameter of "
        "weights + gradients + optimizer: bf16_grads (2 + 2 + 12, default), fp32_grads "
        "(Megatron's fp32 main_grad: 2 + 4 + 12) or fp32_params (FSDP2 as torchtitan runs "
        "it: fp32 sharded parameters and gradients, bf16 compute copies: 4 + 4 + 8); the "
        "gradient dtype is also what the data-parallel reduction moves")
    attention_kernel: Literal["fa3", "fa2"] = Field(
        "fa3", description="the training's core attention kernel: fa3 (FlashAttention-3 or "
        "cuDNN fused attention, Transformer Engine's default: at the matmul rate, default) or "
        "fa2 (FlashAttention-2, e.g. PyTorch SDPA's flash backend as torchtitan runs it, or the "
        "flash-attn package: on Hopper GPUs at 0.35/0.75 of the matmul rate)")
    ep_dispatch: Literal["alltoall", "hierarchical"] = Field(
        "alltoall", description="how MoE training sends tokens to experts on other nodes: "
        "alltoall (Megatron's default dispatcher: a copy per remote expert over the network) or "
        "hierarchical (DeepEP / HybridEP: one copy per remote node, forwarded over NVLink)")
    ep_comm_overlap: bool = Field(
        False, description="MoE training overlaps its dispatch/combine all-to-alls with another "
        "micro-batch's compute (Megatron --overlap-moe-expert-parallel-comm, DeepEP overlap): a "
        "MoE layer costs max(compute, all-to-alls) instead of their sum")

    @field_validator("engine", "rollout_weights", "kv_cache_dtype", "old_log_probs", "refit",
                     "selective_recompute", "training_loss", "fp8_training",
                     "training_states", "attention_kernel", "ep_dispatch", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

"""The training software a scenario's `runtime:` names, as the cost model prices it: what the
kernels keep (`ActivationOptions`, memory), how they run (`Runtime`, time) and how the model
states are kept (`Precision`). One mapping, used by `evaluate`/`plan` (cost/iteration.py) and
by the training benches (bench/training.py, bench/training_throughput.py), so a scenario
reaches exactly what the benches check against measurements.

Options (scenario `runtime:` fields; README "Training software"):
- selective_recompute: what a layout's `checkpointing: selective` keeps — `core_attn`
  (Megatron's selective recompute) or `every_other_mm` (torchtitan's per-op SAC,
  `activation_checkpoint.selective_ac_option = "op"`).
- training_loss: the cross-entropy's peak buffer per vocabulary logit — `fp32_logits`
  (vocab-parallel fp32 logits, Megatron: 4 B), `eager_upcast` (an unfused fp32 cross-entropy:
  torchtitan without compile or before 2025, transformers' causal-LM loss: 12 B),
  `compiled_upcast` (the same loss under torch.compile, torchtitan 2025 with compile: 4 B).
- fp8_training: `none`, `transformer_engine` (Megatron/TE: FP8 linear matmuls, linear inputs
  saved in FP8), `torchao` (torchtitan Float8Linear: FP8 matmuls, bf16 inputs saved),
  `torchao_rowwise` (the same with rowwise scales: `Runtime.fp8_recipe` "rowwise").
- training_states: `bf16_grads` ([ZeRO]'s 2 + 2 + 12 B), `fp32_grads` (Megatron's fp32
  main_grad, 2 + 4 + 12), `fp32_params` (FSDP2 as torchtitan runs it: fp32 sharded parameters
  and gradients, bf16 compute copies, Adam m and v: 4 + 4 + 8). The gradient dtype is also
  what the DP reduction moves.
- attention_kernel: `fa3` (FlashAttention-3 / cuDNN fused attention: the matmul rate) or `fa2`
  (FlashAttention-2: on Hopper at `FLASH_ATTENTION_2_RATE_ON_HOPPER` of it; elsewhere no
  sourced ratio, the matmul rate).
- ep_dispatch, ep_comm_overlap: `Runtime`'s fields of those names (MoE training all-to-alls).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.cost.activations import SELECTIVE_POLICIES, ActivationOptions
from planner.cost.constants import (
    BYTES_FP32,
    COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT,
    FLASH_ATTENTION_2_RATE_ON_HOPPER,
    LOGITS_BYTES,
    UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT,
)
from planner.cost.states import FP32_GRAD_ACCUMULATION, MIXED_PRECISION_ADAM, Precision
from planner.cost.time import Runtime
from planner.specs.runtime import RuntimeInput
from planner.specs.scenario import Scenario

TRAINING_LOSSES: dict[str, float] = {
    "fp32_logits": LOGITS_BYTES,
    "eager_upcast": UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT,
    "compiled_upcast": COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT,
}
"""runtime.training_loss → peak loss bytes per logit (constants.py gives each derivation)."""

FP8_TRAINING = ("none", "transformer_engine", "torchao", "torchao_rowwise")
ATTENTION_KERNELS = ("fa3", "fa2")
EP_DISPATCH = ("alltoall", "hierarchical")
HOPPER_PROFILES = ("h100", "h200", "h20", "h800", "gh200")
"""Profile-name prefixes of Hopper GPUs (the shipped h100-*, h200-sxm, h20 profiles)."""


def hopper(profile_name: str) -> bool:
    return profile_name.startswith(HOPPER_PROFILES)

TRAINING_STATES: dict[str, Precision] = {
    "bf16_grads": MIXED_PRECISION_ADAM,
    "fp32_grads": FP32_GRAD_ACCUMULATION,
    "fp32_params": Precision(weight_bytes=BYTES_FP32, grad_bytes=BYTES_FP32,
                             optimizer_bytes=2 * BYTES_FP32),
}
"""runtime.training_states → bytes per parameter of weights, gradients, optimizer state."""


@dataclass(frozen=True)
class TrainingSoftware:
    """The scenario's training software, priced: kernels (memory), runtime (time), states."""

    kernels: ActivationOptions
    runtime: Runtime
    precision: Precision


@lru_cache(maxsize=64)  # one object per combination: the cost model's memos key on it
def training_software(selective_recompute: str = "core_attn",
                      training_loss: str = "fp32_logits", fp8_training: str = "none",
                      training_states: str = "bf16_grads", attention_kernel: str = "fa3",
                      ep_dispatch: str = "alltoall", ep_comm_overlap: bool = False,
                      on_hopper: bool = False) -> TrainingSoftware:
    """The cost model's view of the named training software (module docstring) on a GPU
    (`on_hopper`: a Hopper part, where FlashAttention-2 runs below the matmul rate). Raises
    ValueError naming the option on a value it does not know."""
    for name, value, known in (("selective_recompute", selective_recompute, SELECTIVE_POLICIES),
                               ("training_loss", training_loss, TRAINING_LOSSES),
                               ("fp8_training", fp8_training, FP8_TRAINING),
                               ("training_states", training_states, TRAINING_STATES),
                               ("attention_kernel", attention_kernel, ATTENTION_KERNELS),
                               ("ep_dispatch", ep_dispatch, EP_DISPATCH)):
        if value not in known:
            raise ValueError(f"runtime.{name} must be one of {', '.join(known)}, got {value!r}")
    kernels = ActivationOptions(selective_policy=selective_recompute,
                                loss_bytes_per_logit=TRAINING_LOSSES[training_loss],
                                fp8_saved_inputs=fp8_training == "transformer_engine")
    slow_attention = attention_kernel == "fa2" and on_hopper
    runtime = Runtime(kernels=kernels, fp8_matmuls=fp8_training != "none",
                      fp8_recipe="rowwise" if fp8_training == "torchao_rowwise" else "tensorwise",
                      attention_rate=FLASH_ATTENTION_2_RATE_ON_HOPPER if slow_attention else 1.0,
                      ep_dispatch=ep_dispatch, ep_comm_overlap=ep_comm_overlap)
    return TrainingSoftware(kernels=kernels, runtime=runtime,
                            precision=TRAINING_STATES[training_states])


def runtime_software(r: RuntimeInput, gpu_name: str) -> TrainingSoftware:
    """A scenario `runtime:` block's training software on the named GPU profile, priced (the
    benches call this)."""
    return training_software(r.selective_recompute, r.training_loss, r.fp8_training,
                             r.training_states, r.attention_kernel, r.ep_dispatch,
                             r.ep_comm_overlap, hopper(gpu_name))


def software(sc: Scenario) -> TrainingSoftware:
    """The scenario's training software as the cost model prices it (its `runtime:` fields,
    on its cluster's GPU)."""
    return runtime_software(sc.runtime, sc.cluster.gpu.name)

"""Every constant of the cost model's FLOPs and memory formulas, with its unit and source.

Formulas in `flops.py` and `memory.py` use these names, never bare literals (STYLE.md §7.4).
Hardware-dependent numbers (peaks, efficiencies, latencies, runtime reserve) live in the
hardware profile instead (`planner/specs/hardware.py`).

References:
- FORMULAS.md §1 (the paper's Table I conventions).
- [ZeRO] Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", SC'20, arXiv 1910.02054, §3 and Fig. 1 (memory.md B.1).
- [Korthikanti] Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models", MLSys'23, arXiv 2205.05198, §4 and Table 2 (memory.md B.2).
- [Megatron-DO] Megatron-LM docs, distributed optimizer: bytes per parameter table.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.hardware import GIB as GIB  # bytes per GiB (2**30), re-exported

# --- work ------------------------------------------------------------------------------------
FLOPS_PER_MAC = 2
"""FLOPs per multiply–accumulate: a multiply and an add count as 2 (FORMULAS.md conventions)."""

BACKWARD_FLOPS_PER_FORWARD = 2
"""C_b = 2·C_f (Table I): the backward pass computes gradients w.r.t. inputs and weights."""

FLASH_ATTENTION_BACKWARD_FLOPS_PER_FORWARD = 2.5
"""The core attention's backward under FlashAttention, in forward FLOPs: it stores no s×s
matrix, so the backward recomputes the scores S = QKᵀ before dV = PᵀdO, dP = dOVᵀ, dQ = dS·K
and dK = dSᵀQ — five s×s×d matmuls against the forward's two (Dao, FlashAttention-2, 2023,
§4.1: "the backward pass has 2.5× FLOPs of forward"). Hardware work the time model prices;
model-FLOP counts (`flops.py`, MFU conventions) keep `BACKWARD_FLOPS_PER_FORWARD`. The
unfused attention keeps its s×s probabilities and runs the four gradient matmuls: 2×."""

FLASH_ATTENTION_2_RATE_ON_HOPPER = 0.35 / 0.75
"""The core attention's FLOP rate under FlashAttention-2 on a Hopper GPU, as a fraction of the
rate of Hopper-tuned kernels (the profile's compute efficiency): FA2 reaches 35% of H100 peak,
FlashAttention-3 — wgmma/TMA, the class of cuDNN's fused attention that Transformer Engine
runs — 75% (Shah et al., "FlashAttention-3", 2024, abstract). PyTorch SDPA's flash backend
(torchtitan, FSDP trainers) is FA2. Fitted jointly with the 500 W H100's compute efficiency on
the torchtitan rows of training_h100.md (bench/training_throughput.py), 0.40–0.47 fit equally
(median 7.6–8.5%); the source's ratio is kept. `Runtime.attention_rate`."""

CAUSAL_KEY_VISIT_FRACTION = 0.5
"""A causal pass over n tokens visits n²/2 (query, key) pairs — the paper's convention behind
the `m·d` term of C_f^tok and the `S·d` term of C_prefill (exact count n(n+1)/2; the O(n)
difference is a lower-order term FORMULAS.md drops). Per token: n/2 keys on average."""

ADAM_FLOPS_PER_PARAM = 16
"""AdamW update, FLOPs per parameter: m ← β1·m + (1−β1)·g (3), v ← β2·v + (1−β2)·g² (4),
bias corrections m̂, v̂ (2), p ← p − lr·(m̂/(√v̂ + ε)) (5: sqrt, add, div, mul, sub), decoupled
weight decay p ← p − lr·λ·p (2). Our tally; Calculon uses 11 (no decay/bias correction)."""

# --- bytes per element -----------------------------------------------------------------------
BYTES_BF16 = 2
"""bf16 / fp16 element (weights, activations, KV cache in mixed precision)."""

BYTES_FP8 = 1
"""FP8 (e4m3/e5m2) weights or KV-cache elements; block scales are not counted (one fp32 scale per
128×128 block: 0.02%)."""

BYTES_FP32 = 4
"""fp32 element (master weights, Adam moments, accumulated gradients, loss logits)."""

ADAM_STATE_BYTES_PER_PARAM = 12
"""K of [ZeRO] §3.1 for mixed-precision Adam: fp32 master copy, momentum and variance, 4 + 4 + 4."""

DROPOUT_MASK_BYTES = 1
"""A dropout mask element, as [Korthikanti] §4.1 counts it (one byte per element)."""

LOGITS_BYTES = BYTES_FP32
"""Logits kept for the loss / log-probs are fp32: [Korthikanti] §4.1's output layer term 4sbV/t.
The default loss buffer per logit (`ActivationOptions.loss_bytes_per_logit`)."""

UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT = 3 * BYTES_FP32
"""Peak loss buffer per logit of an unfused cross-entropy over the full vocabulary that upcasts
bf16 logits to fp32 (torchtitan's `cross_entropy(pred.float(), labels)`): during its backward
the fp32 log-softmax output it saved, the fp32 gradient flowing into it and the fp32 gradient
it produces (before the bf16 cast) are live together, 4 + 4 + 4 B. From PyTorch's autograd
rules for log_softmax / nll_loss (not from a source row); checked against training_h100.md M4–M7
(full AC, 32k tokens per GPU, where the loss is ~half the peak): see bench/training.py."""

COMPILED_CROSS_ENTROPY_BYTES_PER_LOGIT = 2 * BYTES_BF16
"""Peak loss buffer per logit of the same upcasting cross-entropy compiled by torch.compile
(torchtitan compiles its loss with the model from its 2025 `components/loss.py`
`build_cross_entropy_loss` on; its Dec-2024 train.py kept that line commented out): Inductor
fuses the fp32 cast, log-softmax and NLL into one kernel, its min-cut partitioner saves the
bf16 logits (cheaper than the fp32 log-softmax) and the fused backward writes the bf16 gradient
directly, so the peak is the saved bf16 logits + their bf16 gradient, 2 + 2 B (per-token
log-sum-exp: negligible). From the compiled graph's dataflow (not from a source row); checked
against training_h100.md M19/M20/M24–M27 (torchtitan mid-2025, compile on) in bench/training.py."""

FP8_SAVED_INPUT_BYTES = BYTES_FP8
"""Bytes per element of a linear layer's input that Transformer Engine saves for the backward
under FP8 training: TE quantizes the input for the forward GEMM and saves that FP8 copy (for the
wgrad GEMM) instead of the bf16 tensor (TE `Linear`/`LayerNormLinear` forward: the quantized
`inputmat`/`ln_out` is what `save_for_backward` keeps). torchao's Float8Linear saves the
high-precision input instead (torchtitan's FP8 rows read as their bf16 twins: M2/M3, M21/M22)."""

ROUTER_PROBS_BYTES = BYTES_FP32
"""MoE router logits/probabilities are computed and stored in fp32 (Megatron-Core, HF MoE)."""

FLASH_LSE_BYTES = BYTES_FP32
"""FlashAttention stores one fp32 log-sum-exp per (head, query) for its backward (Dao 2022)."""

# --- schedules and buffers -------------------------------------------------------------------
ALLOCATOR_FRAGMENTATION = 0.09
"""The caching allocator's reserved-but-unallocated bytes at the peak, as a fraction of the
stage's transient tensors (activations, loss buffers, workspaces, gather buffers): reserved =
allocated + this × transient (memory.py). Fitted on ../shared/data/calibration/training_h100.md
only: the median over its torchtitan peak-reserved rows M1–M18 and M21–M23 of (measured
reserved − predicted allocated) / predicted transient (per row 0.02–0.39; eager runs ~0.10–0.13,
torch.compile ~0.02–0.04; least squares gives 0.117). M19/M20/M24–M27 (torchtitan mid-2025,
whose whole figure moved with the software date, data file Conventions; now priced with the
compiled loss) are left out of the fit. M32's
own reserved/allocated pair (~40 vs 36.6 GB, slack 9% of allocated) is of the same order."""

ZERO3_LAYERS_IN_FLIGHT = 2
"""Layers whose full (unsharded) weights a ZeRO-3 / FSDP / parameter-offload rank holds at once:
the one computing and the one being prefetched (FSDP forward_prefetch, DeepSpeed prefetch)."""

DEFAULT_PREFILL_CHUNK_TOKENS = 8192
"""Tokens an inference engine prefills in one forward (vLLM V1 chunked-prefill budget
`max_num_batched_tokens`, 8192 by default on large GPUs); sizes the generation workspace."""

# --- architecture facts ----------------------------------------------------------------------
GATED_FFN_MATRICES = 3
"""A gated FFN (SwiGLU/GeGLU) has gate, up and down projections: 3 matmuls of H×F."""

PLAIN_FFN_MATRICES = 2
"""A two-projection FFN (GPT-2, OPT, GPT-NeoX, the paper's canonical FFN): 2 matmuls of H×F."""

GATED_FFN_STORED_TENSORS = 3
"""F-wide tensors a gated FFN keeps for its backward: gate output, up output and the product
act(gate)·up (input of the down projection) — Megatron-Core's fc1 output [gate; up] plus the
SwiGLU output."""

PLAIN_FFN_STORED_TENSORS = 2
"""F-wide tensors a two-projection FFN keeps: the activation's input and its output
([Korthikanti] §4.1: GeLU input 8sbh and output 8sbh bytes at F = 4h)."""


MLA_LATENT_PATH_TENSORS = 2
"""Copies of each MLA latent (q_lora, kv_lora) a layer keeps for its backward: the latent before
its RMSNorm (the norm's input) and after it (the up-projection's input)."""

MOE_EXPERT_IO_TENSORS = 2
"""H-wide tensors per routed (token, expert) pair a MoE layer keeps: the permuted expert input
(the first expert matmul's input) and the expert output (needed for the gradient of the routing
weight in the weighted combine)."""

# --- framework behaviour ---------------------------------------------------------------------
# (The weight refit's constants are `RefitRates` in refit.py, fitted by bench/refit.py.)

# --- framework behaviour: the time model (`time.py`) -----------------------------------------
# How the frameworks run the kernels, not what the hardware can do. The fitted values come from
# `bench/calibration.py` (../shared/data/calibration/); the counted ones from the kernels named.

DP_COMM_OVERLAP = 0.5
"""Fraction of the data-parallel gradient (and ZeRO parameter) traffic hidden behind the
backward pass. Megatron overlaps the gradient reduce-scatter with backward by bucket; the
first buckets start late and the last finish after compute, so part stays exposed. A prior,
not a fit: `bench/calibration.py` finds the vTrain rows do not identify it (0 to 1 moves their
error by 0.2 percentage points), so it stays at 0.5."""

TP_ALLREDUCES_PER_LAYER_PASS = 2
"""Megatron TP: one all-reduce (or reduce-scatter + all-gather with SP, the same volume) after
attention and one after the MLP in the forward, and their two conjugates in the backward
(Shoeybi et al. 2019, §3: four all-reduces per layer per forward + backward)."""

EP_ALLTOALLS_PER_LAYER_PASS = 2
"""Token dispatch and combine all-to-alls of an expert-parallel MoE layer, per forward (and
mirrored in the backward)."""

NORM_IO_TENSORS = 2
"""H-wide tensors a norm kernel moves per token: reads its input, writes its output."""

RESIDUAL_IO_TENSORS = 3
"""H-wide tensors a (bias-dropout-)residual add moves per token: reads the branch output and
the residual, writes the sum (Megatron's fused bias-dropout-add); two per layer."""

ROPE_IO_TENSORS = 2
"""Rotary embedding: reads and writes q and k (unfused, as Megatron and HF apply it)."""

ACTIVATION_IO_TENSORS_PLAIN = 2
"""F-wide tensors of a two-projection FFN's activation (fused bias-GeLU): read 1, write 1."""

ACTIVATION_IO_TENSORS_GATED = 3
"""F-wide tensors of a gated FFN's activation (SwiGLU): read gate and up, write the product."""

UNFUSED_SCORE_IO_TENSORS = 4
"""Without FlashAttention, per attention-score element (per head, query, key), bf16 tensors
moved: the QKᵀ batched matmul writes it, the fused scale-mask-softmax reads it and writes the
probabilities, the PV matmul reads them (Megatron's unfused core attention)."""

UNFUSED_SCORE_DROPOUT_IO_TENSORS = 2
"""Attention dropout on the probabilities (when on): reads and writes them, plus a one-byte
mask (`DROPOUT_MASK_BYTES`)."""

ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD = 2
"""An element-wise kernel's backward reads its saved input and the incoming gradient and
writes the outgoing gradient: about twice its forward traffic (read + write)."""

LOSS_FWD_BYTES_PER_LOGIT = 38
"""HBM bytes per logit of a vocab-parallel cross-entropy / log-prob forward in fp32, as
Megatron's `VocabParallelCrossEntropy` runs it: cast bf16→fp32 (2 + 4), max (4), subtract
(4 + 4), exp (4 + 4), sum (4), normalise into the saved softmax (4 + 4)."""

LOSS_BWD_BYTES_PER_LOGIT = 22
"""Its backward: softmax − one-hot in place (4 + 4), × grad (4 + 4), cast to bf16 (4 + 2)."""

HOST_SECONDS_PER_LAYER_PASS = 9e-4
"""Host (CPU) time to issue one transformer layer's forward kernels in eager PyTorch: Python
module code, autograd bookkeeping and some 20–40 kernel launches of tens of µs each (PyTorch's
"Accelerating PyTorch with CUDA Graphs" note: launch overhead dominates small kernels). A
layer's pass lasts at least this long however little GPU work it has; it binds only for small
layers or small micro-batches. The backward issues `HOST_BACKWARD_PASSES_PER_FORWARD` times as
much. Fitted by `bench/calibration.py` on the 1,549 vTrain rows (Megatron-DeepSpeed, A100),
2026-11-29: their measured time per layer and micro-batch has a floor of ≈ 3 ms (forward,
backward, recompute) whatever the layer's size; 0.9 ms lowers their error by 13 points."""

HOST_BACKWARD_PASSES_PER_FORWARD = 2
"""Autograd issues about two kernels (input and weight gradients) per forward kernel."""

# --- host offload: CPU Adam and host transfers (`offload.py`) ---------------------------------
# The host figures a profile may state (`host_memory_bandwidth_gbps`, `host_cpu_cores`, per
# node) default to a DGX H100/H200-class host: 2 × Xeon Platinum 8480C
# (../shared/data/hardware_host_domain_prices.md Table 1, the DGX H200 row).

CPU_ADAM_DRAM_BYTES_PER_PARAM = 36
"""CPU DRAM bytes one CPU Adam step moves per offloaded parameter, fused in one pass as
DeepSpeed's `DeepSpeedCPUAdam` runs it (ZeRO-Offload): the fp32 master, momentum and variance
each read and written, 3 × (4 + 4) = 24; the fp32 gradient written as it lands from the GPU
and read by the step, 4 + 4 = 8; the bf16 weight copy written by the step and read by the copy
back to the GPU, 2 + 2 = 4. Total 24 + 8 + 4 = 36. A framework converting the gradient or the
weights in separate CPU passes moves more (read bf16 2 + write fp32 4 for the gradient, read
fp32 4 + write bf16 2 for the weights: 44), so 36 is the fused, least count."""

HOST_MEMORY_BANDWIDTH_GBPS = 614.4
"""Peak CPU DRAM bandwidth of a node, GB/s, when the profile gives none: 2 sockets × 8 DDR5-4800
channels × 38.4 GB/s = 614.4 (Xeon Platinum 8480C: 8 channels of DDR5-4800 per socket, Intel's
specification). [assumption] for nodes of other CPUs; a profile sets its own."""

HOST_MEMORY_EFFICIENCY = 0.6
"""Fraction of peak DRAM bandwidth CPU Adam and offload streams sustain. [assumption]: STREAM
triad on two-socket servers reaches roughly 70–80% of peak with every thread NUMA-local; CPU
Adam mixes seven streams of reads and writes and its ranks' threads are not always bound to
their socket (in the public point under `CPU_ADAM_PARAMS_PER_S_PER_CORE` binding cores to
ranks cut the step by 23%), so 0.6."""

HOST_CPU_CORES = 112
"""CPU cores of a node when the profile gives none: 2 × 56 (Xeon Platinum 8480C, Intel's
specification; the DGX H100/H200 host). [assumption] for nodes of other CPUs."""

CPU_ADAM_PARAMS_PER_S_PER_CORE = 2.5e8
"""Parameters one core updates per second in DeepSpeed's vectorised CPU Adam (AVX-512/AVX2,
one fused pass) when DRAM keeps up. [assumption]: a server core streams about 10 GB/s on its
own (its outstanding cache-line misses bound it), and one parameter moves
`CPU_ADAM_DRAM_BYTES_PER_PARAM` = 36 bytes: ≈ 2.8e8/s; the SIMD arithmetic (≈ 16 FLOPs,
`ADAM_FLOPS_PER_PARAM`, a square root and a division per parameter) is faster than that. The
kernel is memory-bound, which is why DeepSpeed's fused CPU Adam is 5–7× faster than PyTorch's
(ZeRO-Offload, Ren et al., USENIX ATC'21), which makes about ten separate element-wise passes
over the state. With 112 cores the node's DRAM binds; the cores bind below ≈ 40 cores.
Sanity point (issue 12): Qwen2.5-3B on 2× A100-40GB with a 128-core host, 3.08 s per step,
2.38 s with cores bound to ranks — `bench/offload.py` sets it beside the model."""

# --- inference engines: the rollout's decode step (`generation.py`) --------------------------


@dataclass(frozen=True)
class Engine:
    """What an inference engine adds to a decode step beyond its kernels (seconds).

    step_overhead_s: host time per decode step the GPUs wait for (scheduling, input
        preparation, sampling, detokenisation), whatever the batch.
    per_seq_s: host time per running sequence per step (the scheduler's bookkeeping).
    layer_floor_s: the least time a layer's decode kernels take however little work they
        have (launch and synchronisation; eager engines issue them one by one from Python):
        a step lasts at least this × the layers, whatever the tensor parallelism.
    custom_allreduce: the TP all-reduces inside a scale-up domain run on the engine's own
        one-shot kernel (`comm.time_allreduce_decode`), not NCCL's ring.
    """

    name: str
    step_overhead_s: float
    per_seq_s: float
    layer_floor_s: float = 0.0
    custom_allreduce: bool = True


VLLM_V1_PER_SEQ_S = 1.1e-6
"""vLLM V1's scheduler `update_from_output` costs 0.142 ms with 128 running requests and
0.287 ms with 256 (vllm PR 46112, ../shared/data/calibration/rollout.md §3): 1.1 µs each."""

ENGINES: dict[str, Engine] = {
    "vllm-v1": Engine("vllm-v1", step_overhead_s=0.0005, per_seq_s=VLLM_V1_PER_SEQ_S),
    "sglang": Engine("sglang", step_overhead_s=0.0, per_seq_s=0.0),
    "vllm-v0": Engine("vllm-v0", step_overhead_s=0.008, per_seq_s=VLLM_V1_PER_SEQ_S),
    "eager": Engine("eager", step_overhead_s=0.004, per_seq_s=VLLM_V1_PER_SEQ_S,
                    layer_floor_s=3e-4, custom_allreduce=False),
}
"""The engines a scenario's `runtime.engine` names (rollout.md §3):
- vllm-v1 (default): vLLM V1, persistent batch and CUDA graphs, "near-zero CPU overhead":
  0.5 ms per step, within the 0.3–2 ms current engines expose (TensorRT-LLM: ~0.58 ms of host
  time per iteration, row 12); bench/decode.py's fit, within that range, prefers 0.3 ms by 0.3
  points of error, moving row 12 alone: too little to move it.
- sglang: SGLang ≥ 0.4's overlapped scheduler leaves no GPU idle between decode batches
  (lm-sys blog 2024-12-04): no exposed host time.
- vllm-v0: the V0-era engine (before 2025): 5–13 ms of GPU idle per step waiting for the
  CPU (vllm issue 6854): 8 ms, which the rows of that era (10, 13) do not move.
- eager: no CUDA graphs (e.g. vLLM on ROCm multi-node, verl's AMD guide; the 2023 engines of
  rows 3–7): kernels issued one by one, 4 ms of host time per step and at least 0.3 ms per
  layer — fitted by bench/decode.py on rows 3, 4, 5 and 7 (Llama-2-70B: a step that stops
  shrinking past TP 4, 30–45 ms at batch 1), 2026-12-03 (fitted 0.5 ms and 0.4 ms per layer
  on 2026-11-30; the model's changes since moved the fit). Its TP all-reduces are NCCL's (the
  2023 engines predate the custom all-reduce vLLM added in 2024); the others run their own
  inside a node.

Per-step figures are from ../shared/data/calibration/rollout.md §2–3."""

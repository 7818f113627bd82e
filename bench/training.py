"""Training-stage calibration: the peak-memory rows of
../shared/data/calibration/training_h100.md (Table 1) priced with the planner's own memory model
(`planner.cost.memory.memory_training_per_gpu`), row by row.

    python bench/training.py              (throughput: bench/training_throughput.py)

Each row's layout is transcribed below with its ID; the measured figure is read from the
markdown by that ID (so a transcription slip in a number cannot creep in). A row is priced when
the planner has its model, else reported with what is missing.

Each row's framework is the `runtime:` block a scenario would write for it (RuntimeInput:
selective_recompute, training_loss, fp8_training, training_states; README "Training
software"), priced by `planner.cost.software.runtime_software`, the mapping `evaluate` uses.

What is compared — the rows report different kinds of figure (training_h100.md, Conventions):
- `alloc` (Megatron `allocated_bytes.all.peak`): allocated = the tensors (persistent +
  transient).
- `res` (torchtitan `reserved_bytes.all.peak`): reserved = allocated + the caching allocator's
  slack (`ALLOCATOR_FRAGMENTATION`).
- `n/s` (nvidia-smi-like): reserved + the profile's runtime reserve (CUDA context, NCCL).
A row's `kind` overrides its cell where its own notes say more (M40–M42, see their note).
GB rows are converted to GiB. Nothing is fitted here: the figures show where the model stands
(the allocator slack was fitted on M1–M18 and M21–M23, see constants.py).
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from planner.cost.constants import GIB
from planner.cost.memory import MemoryBreakdown, memory_training_per_gpu
from planner.cost.software import runtime_software
from planner.plan import Layout
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.runtime import RuntimeInput
from planner.theory.shape import Head

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "calibration"
GB_PER_GIB = GIB / 1e9

# Framework → its training software, as a scenario's `runtime:` names it (priced by
# planner.cost.software, the mapping `evaluate` uses), and the ZeRO stage of its state sharding:
# - torchtitan (FSDP2 = ZeRO-3): fp32 sharded params and grads (`fp32_params`), per-op SAC, an
#   eager fp32 cross-entropy (Dec 2024 – early 2025: its train.py kept the loss out of
#   torch.compile) or, from its 2025 `components/loss.py` on, the loss compiled with the model
#   when compile is on (`compiled_upcast`); torchao Float8Linear for its FP8 rows; attention
#   through PyTorch SDPA's flash backend, FlashAttention-2 (`fa2`).
# - Megatron-LM (ms-swift's Megatron backend): distributed optimizer (ZeRO-1), bf16 params with
#   fp32 main grads (Megatron turns accumulate_allreduce_grads_in_fp32 on under --bf16),
#   selective = core_attn, vocab-parallel fp32 logits; TE for FP8.
# - NeMo / Megatron-Bridge performance recipes: the same, but their perf helpers set
#   grad_reduce_in_fp32 = False (bf16 grads).
# - HF + DeepSpeed (ms-swift): gradient checkpointing = full; transformers' causal-LM loss
#   upcasts the logits to fp32 (read from transformers' source, not a row).
TORCHTITAN = RuntimeInput(selective_recompute="every_other_mm", training_loss="eager_upcast",
                          training_states="fp32_params", attention_kernel="fa2")
TORCHTITAN_2025 = TORCHTITAN.model_copy(update={"training_loss": "compiled_upcast"})
MEGATRON = RuntimeInput(training_states="fp32_grads")
MEGATRON_PERF = RuntimeInput(training_states="bf16_grads")
HF_DEEPSPEED = RuntimeInput(training_loss="eager_upcast")


def fp8(runtime: RuntimeInput, kind: str) -> RuntimeInput:
    """`runtime` training in FP8 (`runtime.fp8_training`: transformer_engine or torchao)."""
    return runtime.model_copy(update={"fp8_training": kind})


@dataclass(frozen=True)
class RowShape:
    """A row of training_h100.md as transcribed: the model standing in for the row's, the GPU
    profile, the layout and the training software (shared by this bench and
    bench/training_throughput.py)."""

    id: str
    model: str | None  # shipped spec standing in for the row's model; None = not shipped
    gpu: str
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None  # None: as Megatron-Core runs it (expert_tp: tp)
    sp: bool = False
    vp: int = 1
    mbs: int = 1
    seq: int = 8192
    recompute: str = "none"
    zero: int = 3
    runtime: RuntimeInput = TORCHTITAN
    note: str = ""

    def layout(self) -> Layout:
        return Layout(group="g", dp=self.dp, tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep,
                      etp=self.etp, sp=self.sp, vp=self.vp, zero=self.zero,
                      checkpointing=self.recompute, micro_batch=self.mbs)


def row_cells(text: str, row_id: str) -> list[str] | None:
    """The cells of the markdown table row whose ID cell is `row_id` (None when absent)."""
    line = next((ln for ln in text.splitlines() if ln.startswith(f"| {row_id} |")), None)
    return None if line is None else [c.strip() for c in line.split("|")]


@dataclass(frozen=True)
class Row(RowShape):
    """One memory row: its layout and training software."""

    micro_batches: int = 1  # micro-batches per optimizer step per DP rank (1F1B in flight)
    kind: str | None = None  # the figure's kind when the row's notes tell more than its cell


_8B, _70B, _405B = "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"
_TT8 = fp8(TORCHTITAN, "torchao")
_TT8_2025 = fp8(TORCHTITAN_2025, "torchao")
_BRIDGE_FP8 = dict(zero=1, runtime=fp8(MEGATRON_PERF, "transformer_engine"), kind="alloc")
_BRIDGE_NOTE = ("FP8 current scaling; figure read as allocated: M40's note has the run OOM "
                "from fragmentation at 58.8 GB on an 80 GB GPU, so it is below reserved")

# Recompute: torchtitan SAC-op and Megatron "selective core_attn" → `selective`; full AC (every
# block) → `full`. torchtitan's rows are priced on h100-sxm (memory does not depend on the GPU's
# speed, and the runtime reserve is the same as the 96 GB part's profile).
ROWS = [
    Row("M1", _8B, "h100-sxm", dp=8, mbs=2, recompute="selective"),
    Row("M2", _8B, "h100-sxm", dp=8, mbs=2, recompute="selective", note="compile (not the loss)"),
    Row("M3", _8B, "h100-sxm", dp=8, mbs=2, recompute="selective", runtime=_TT8),
    Row("M4", _8B, "h100-sxm", dp=8, mbs=1, seq=32768, recompute="full", runtime=_TT8),
    Row("M5", _8B, "h100-sxm", dp=4, cp=2, seq=65536, recompute="full", runtime=_TT8),
    Row("M6", _8B, "h100-sxm", dp=2, cp=4, seq=131072, recompute="full", runtime=_TT8),
    Row("M7", _8B, "h100-sxm", dp=1, cp=8, seq=262144, recompute="full", runtime=_TT8),
    Row("M8", _8B, "h100-sxm", dp=128, mbs=2, recompute="selective"),
    Row("M9", _8B, "h100-sxm", dp=128, mbs=2, recompute="selective"),
    Row("M10", _8B, "h100-sxm", dp=128, mbs=2, recompute="selective", runtime=_TT8),
    *(Row(i, _70B, "h100-sxm", dp=32, tp=8, sp=True, mbs=16, recompute="full", runtime=_TT8)
      for i in ("M11", "M12")),
    Row("M13", _405B, "h100-sxm", dp=8, tp=8, sp=True, pp=8, mbs=4, micro_batches=8,
        recompute="full", runtime=_TT8,
        note="MBS 4 = lbs 32 / 8 micro-batches (the row's reading)"),
    Row("M14", _405B, "h100-sxm", dp=8, tp=8, sp=True, pp=8, vp=2, mbs=4, micro_batches=8,
        recompute="full", runtime=_TT8, note="interleaved 1F1B, 2 chunks per rank assumed"),
    Row("M15", _405B, "h100-sxm", dp=8, tp=8, sp=True, pp=8, mbs=1, micro_batches=8,
        seq=32768, recompute="full", runtime=_TT8),
    Row("M16", _405B, "h100-sxm", dp=4, tp=8, sp=True, pp=8, cp=2, mbs=1, micro_batches=8,
        seq=65536, recompute="full", runtime=_TT8),
    Row("M17", _405B, "h100-sxm", dp=2, tp=8, sp=True, pp=8, cp=4, mbs=1, micro_batches=8,
        seq=131072, recompute="full", runtime=_TT8),
    Row("M18", _405B, "h100-sxm", dp=1, tp=8, sp=True, pp=8, cp=8, mbs=1, micro_batches=8,
        seq=262144, recompute="full", runtime=_TT8),
    *(Row(i, _8B, "h200-sxm", dp=n, mbs=2, recompute="selective", runtime=_TT8_2025,
          note="torchtitan Jun 2025: loss compiled") for i, n in (("M19", 32), ("M20", 64))),
    *(Row(i, _8B, "h100-sxm", dp=8, mbs=1, recompute="selective", runtime=r,
          note="Llama-3-8B: Llama-3.1-8B's shapes; torchtitan 0.0.2: loss eager")
      for i, r in (("M21", TORCHTITAN), ("M22", _TT8), ("M23", _TT8))),
    *(Row(i, _8B, "b200", dp=8, mbs=1, recompute="selective", runtime=r,
          note="Llama-3-8B; torchtitan Aug 2025: loss compiled")
      for i, r in (("M24", TORCHTITAN_2025), ("M25", _TT8_2025), ("M26", _TT8_2025),
                   ("M27", _TT8_2025))),
    *(Row(i, None, "h100-sxm", dp=4, tp=2, ep=8, seq=4096, zero=1, runtime=MEGATRON,
          note="Moonlight-16B-A3B is not a shipped model")
      for i in ("M32", "M33", "M34", "M35", "M36", "M37")),
    Row("M40", _70B, "h100-sxm", dp=2, tp=4, sp=True, pp=4, vp=5, seq=4096, micro_batches=16,
        recompute="selective", **_BRIDGE_FP8, note=f"Llama-3-70B; {_BRIDGE_NOTE}"),
    *(Row(i, _70B, "h100-sxm", dp=1, tp=t, sp=True, pp=p, vp=5, seq=4096, micro_batches=32,
          recompute="selective", **_BRIDGE_FP8, note="as M40 (same source and procedure)")
      for i, t, p in (("M41", 4, 8), ("M42", 8, 4))),
    Row("M45", "qwen3-14b", "h20", dp=2, tp=4, sp=True, micro_batches=8, recompute="selective",
        zero=1, runtime=fp8(MEGATRON, "transformer_engine"),
        note="FP8 blockwise + bf16 Adam moments priced as TE FP8 + fp32"),
    Row("M46", "qwen3-14b", "h20", dp=2, tp=4, sp=True, micro_batches=8, recompute="selective",
        zero=1, runtime=MEGATRON),
    Row("M47", "qwen2.5-14b", "a100-sxm-80gb", dp=2, tp=4, sp=True, micro_batches=8,
        recompute="selective", zero=1, runtime=MEGATRON, note="A800 as A100-80GB"),
    *(Row(i, "qwen2.5-14b", "a100-sxm-80gb", dp=8, micro_batches=2, recompute="full", zero=z,
          runtime=HF_DEEPSPEED, note=f"A800 as A100-80GB; DeepSpeed ZeRO-{z}")
      for i, z in (("M48", 2), ("M49", 3))),
    Row("M50", "qwen3-30b-a3b", "a100-sxm-80gb", dp=8, tp=2, sp=True, ep=8, etp=1,
        micro_batches=2, recompute="full", zero=1, runtime=MEGATRON,
        note="A800 as A100-80GB; etp 1: ms-swift's expert_tensor_parallel_size default"),
    Row("M51", None, "a100-sxm-80gb", dp=16, runtime=HF_DEEPSPEED,
        note="micro-batch and recompute not stated"),
]


def measured(text: str, row_id: str) -> tuple[float, str] | None:
    """(GiB, kind) read from the row's 'Peak mem / GPU (type)' cell."""
    cells = row_cells(text, row_id)
    if cells is None:
        return None
    cell = cells[10]
    # the first number and the unit right after it ("GB" = 1e9 bytes; torchtitan's quoted
    # "GB" and a bare number are its GiB)
    number = re.search(r'([\d.]+)\s*(GiB|GB)?', cell.replace(",", ""))
    if number is None:
        return None
    value = float(number.group(1))
    kind = "alloc" if "alloc" in cell else "res" if "res" in cell else "n/s"
    return (value / GB_PER_GIB if number.group(2) == "GB" else value), kind


def predict(row: Row) -> MemoryBreakdown:
    """The row's per-GPU memory breakdown (bytes) as the planner prices it: its runtime's
    training software through `runtime_software`, the mapping a scenario's goes through."""
    spec, gpu = load_model(row.model), load_profile(row.gpu)
    sw = runtime_software(row.runtime, gpu.name)
    return memory_training_per_gpu(spec, row.layout(), seq_len=row.seq,
                                   micro_batches=row.micro_batches, head=Head.POLICY,
                                   precision=sw.precision, options=sw.kernels,
                                   reserve_bytes=gpu.runtime_reserve_gib * GIB)


def compared(m: MemoryBreakdown, kind: str) -> float:
    """The predicted figure of the row's kind, GiB: alloc → allocated, res → reserved,
    n/s → reserved + runtime reserve (what nvidia-smi shows)."""
    bytes_ = {"alloc": m.allocated, "res": m.reserved}.get(kind, m.total)
    return float(bytes_) / GIB


def explain(text: str, row_id: str) -> None:
    row = next((r for r in ROWS if r.id == row_id), None)
    if row is None or row.model is None:
        print(f"{row_id}: not a priced row")
        return
    value, kind = measured(text, row_id) or (float("nan"), "?")
    kind = row.kind or kind
    m = predict(row)
    print(f"{row.id} {row.model} {row.gpu} dp{row.dp} tp{row.tp} pp{row.pp} cp{row.cp} "
          f"mbs{row.mbs} seq{row.seq} {row.recompute} (pipeline stage {int(m.pipeline_stage)})")
    for name, v in m.components().items():
        if float(v):
            print(f"  {name:42} {float(v) / GIB:7.2f} GiB")
    print(f"  {'allocated / reserved / on GPU':42} {float(m.allocated) / GIB:7.2f} / "
          f"{float(m.reserved) / GIB:.2f} / {float(m.total) / GIB:.2f} GiB; "
          f"measured {value:.2f} GiB ({kind})")


def main(argv: list[str]) -> int:
    path = DATA / "training_h100.md"
    if not path.is_file():
        print(f"needs {path} (the workplace's shared calibration data)")
        return 1
    text = path.read_text(encoding="utf-8")
    if argv[:1] == ["--explain"]:
        for row_id in argv[1:]:
            explain(text, row_id)
        return 0
    print("Peak memory per GPU, training_h100.md Table 1 (GiB; error = predicted/measured - 1;"
          " predicted = the figure of the row's kind)")
    print(f"{'row':5} {'model':16} {'kind':5} {'measured':>8} {'alloc':>7} {'reserv':>7} "
          f"{'on GPU':>7} {'error':>7}  note")
    errors: dict[str, list[float]] = {}
    for row in ROWS:
        got = measured(text, row.id)
        if got is None:
            print(f"{row.id:5} not found in {path.name}")
            continue
        value, kind = got
        kind = row.kind or kind
        if row.model is None:
            print(f"{row.id:5} {'—':16} {kind:5} {value:8.1f} {'':>7} {'':>7} {'':>7} {'':>7}  "
                  f"not priced: {row.note}")
            continue
        m = predict(row)
        error = compared(m, kind) / value - 1
        errors.setdefault(kind, []).append(error)
        print(f"{row.id:5} {row.model:16} {kind:5} {value:8.1f} {float(m.allocated) / GIB:7.1f} "
              f"{float(m.reserved) / GIB:7.1f} {float(m.total) / GIB:7.1f} {error:+7.1%}  "
              f"{row.note}")
    every = [e for es in errors.values() for e in es]
    for kind, es in [*sorted(errors.items()), ("all", every)]:
        absolute = [abs(e) for e in es]
        print(f"{kind:5} {len(es):2} rows: median |error| {statistics.median(absolute):.1%}, "
              f"worst {max(absolute):.1%}, median signed {statistics.median(es):+.1%}")
    print("(issue 16 targets: median ≤ 10%, none beyond 25%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

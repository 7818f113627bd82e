"""Training throughput: the rows of ../shared/data/calibration/training_h100.md (Table 1's
"Also measured" column, Table 2) priced with the planner's time model
(`planner.cost.time.time_train`), row by row, and the compute / HBM efficiency of each profile
fitted on them.

    python bench/training_throughput.py            # per-row table, medians, fit per profile
    python bench/training_throughput.py --no-fit   # the shipped efficiencies only

One row = one optimizer step over the global batch: tokens = GBS · seq, time =
`time_train(...).total` (mini_batches = 1), predicted tokens/s/GPU = tokens / time / GPUs.
Layouts are transcribed below with their row IDs; the measured figure is read from the markdown
by ID (`pick` = which number of the throughput cell: rows that print several variants).
Step-time rows (s/it) are converted with the same GBS · seq / GPUs.

What the rows cannot tell the model (kept as notes, not corrected for): AsyncTP and
torch.compile (the planner prices one kernel set per framework), CUDA graphs, DeepSeek-V3's
MTP layer, partial recompute of a few layers, MX FP8 (priced as tensorwise). Priced per row
from its own words, through the scenario `runtime:` fields: float8 rowwise (`fp8_training:
torchao_rowwise`), DeepEP / HybridEP (`ep_dispatch: hierarchical`), "A2A overlap"
(`ep_comm_overlap`), torchtitan's SDPA FlashAttention-2 (`attention_kernel: fa2`, slower on
Hopper). Routing as the rows ran it (`TRow.spec`): Megatron-Bridge's forced balance draws
random scores through the model's own router (DeepSeek-V3's group limit included); Automodel's
fake balanced gate sends each token to one aligned block of k experts, which the table prints
beside the model's own routing. Each layout is checked with evaluate's rules first.

Issue 22's targets close the table: every row whose expert-parallel group spans scale-up
domains (the cross-node EP rows) within 25%, and the H100-class median within 15%.

Fit (the procedure of bench/calibration.py `fit_profile`, imported from it): per profile,
`efficiency.compute` and `efficiency.hbm` over its grids, objective = median APE (+ 1e-3 × mean
APE to break ties), a value kept only inside its searched range and beating the shipped one
by `MIN_GAIN["rl"]`. The A800 rows are priced on a100-sxm-80gb for reference and not fitted:
the A100 efficiencies come from the 1,549 vTrain rows (bench/calibration.py).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fitting as cal
from training import (
    DATA,
    HF_DEEPSPEED,
    MEGATRON,
    MEGATRON_PERF,
    TORCHTITAN,
    RowShape,
    fp8,
    row_cells,
)

from planner.cost import time as time_model
from planner.cost.legality import layout_problem
from planner.cost.software import runtime_software
from planner.plan import check_experts, expert_tp
from planner.specs.hardware import HardwareProfile, load_profile
from planner.specs.model import ModelSpec, load_model
from planner.specs.runtime import RuntimeInput
from planner.theory.shape import Head

TARGET_MEDIAN = 0.15  # issues 16 and 22: median APE on the H100-class rows
TARGET_CROSS_NODE_EP = 0.25  # issue 22: each row whose expert group spans scale-up domains
TITAN_H100 = "h100-sxm-96gb-500w"  # torchtitan's power-capped 96 GB H100 (Conventions)
FITTED = ("h100-sxm", TITAN_H100, "h200-sxm", "b200", "h20")  # fitted here (A100: vTrain)


@dataclass(frozen=True)
class TRow(RowShape):
    """One throughput row: layout, global batch, kernels, precision; where its figure sits."""

    gbs: int = 1
    zero: int = 3
    runtime: RuntimeInput = MEGATRON_PERF  # NeMo/Bridge perf recipes: bf16 grads
    fp8: bool = False  # the row trains in FP8: `fp8_kind` added to its runtime
    fp8_kind: str = "transformer_engine"
    pick: int = 0  # which number of the throughput cell
    step_time: bool = False  # the figure is seconds per optimizer step, not tok/s/GPU
    ep_dispatch: str = "alltoall"  # "hierarchical": the row runs DeepEP / HybridEP
    ep_overlap: bool = False  # the row says "A2A overlap"
    routing: str = "model"  # "blocks": each token's k experts are one aligned block of k

    def spec(self, routing: str | None = None) -> ModelSpec:
        """The row's model as its run routed tokens: by the model's own router ("model": the
        Megatron-Bridge rows' forced balance draws random scores through it, group limits
        included), or Automodel's fake balanced gate ("blocks": token t takes experts
        t·k … t·k + k − 1 mod E, nemo-automodel 0.2.0-0.7.0 FakeBalancedGate with noise 0),
        which is E/k routing groups of which each token takes one."""
        spec = load_model(self.model)
        if (routing or self.routing) == "blocks" and spec.moe:
            k = spec.moe.experts_per_token
            spec = spec.model_copy(update={"moe": spec.moe.model_copy(update={
                "expert_groups": spec.moe.num_experts // k, "groups_per_token": 1})})
        return spec

    @property
    def software(self) -> RuntimeInput:
        """The row's `runtime:` as a scenario would write it (FP8 rows: `fp8_kind` on)."""
        runtime = self.runtime.model_copy(update={"ep_dispatch": self.ep_dispatch,
                                                  "ep_comm_overlap": self.ep_overlap})
        return fp8(runtime, self.fp8_kind) if self.fp8 else runtime

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp


def _titan(id_: str, model: str, **kw) -> TRow:
    """A torchtitan row (FSDP2 = ZeRO-3 with fp32 gradient reduction, its kernels)."""
    kw.setdefault("gpu", TITAN_H100)
    rowwise = "rowwise" in kw.get("note", "")  # the row's own words
    return TRow(id_, model, zero=3, runtime=TORCHTITAN,
                fp8_kind="torchao_rowwise" if rowwise else "torchao", **kw)


# torchtitan: lbs = sequences per DP rank per step; without PP one micro-batch of lbs, with PP
# lbs split into pp micro-batches (torchtitan's default). SAC-op → selective.
_8B, _70B, _405B = "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"
ROWS = [
    _titan("M1", _8B, dp=8, mbs=2, gbs=16, recompute="selective", note="eager"),
    _titan("M2", _8B, dp=8, mbs=2, gbs=16, recompute="selective", note="compile"),
    _titan("M3", _8B, dp=8, mbs=2, gbs=16, recompute="selective", fp8=True),
    _titan("M4", _8B, dp=8, mbs=1, gbs=8, seq=32768, recompute="full", fp8=True),
    _titan("M5", _8B, dp=4, cp=2, gbs=4, seq=65536, recompute="full", fp8=True),
    _titan("M6", _8B, dp=2, cp=4, gbs=2, seq=131072, recompute="full", fp8=True),
    _titan("M7", _8B, dp=1, cp=8, gbs=1, seq=262144, recompute="full", fp8=True),
    _titan("M8", _8B, dp=128, mbs=2, gbs=256, recompute="selective", note="eager"),
    _titan("M9", _8B, dp=128, mbs=2, gbs=256, recompute="selective"),
    _titan("M10", _8B, dp=128, mbs=2, gbs=256, recompute="selective", fp8=True),
    _titan("M11", _70B, dp=32, tp=8, sp=True, mbs=16, gbs=512, recompute="full", fp8=True),
    _titan("M12", _70B, dp=32, tp=8, sp=True, mbs=16, gbs=512, recompute="full", fp8=True,
           note="AsyncTP"),
    _titan("M13", _405B, dp=8, tp=8, sp=True, pp=8, mbs=4, gbs=256, recompute="full", fp8=True),
    _titan("M14", _405B, dp=8, tp=8, sp=True, pp=8, vp=2, mbs=4, gbs=256, recompute="full",
           fp8=True, note="interleaved, 2 chunks assumed"),
    *(_titan(i, _405B, dp=d, tp=8, sp=True, pp=8, cp=c, mbs=1, gbs=8 * d, seq=s,
             recompute="full", fp8=True)
      for i, d, c, s in (("M15", 8, 1, 32768), ("M16", 4, 2, 65536), ("M17", 2, 4, 131072),
                         ("M18", 1, 8, 262144))),
    _titan("M19", _8B, gpu="h200-sxm", dp=32, mbs=2, gbs=64, recompute="selective", fp8=True),
    _titan("M20", _8B, gpu="h200-sxm", dp=64, mbs=2, gbs=128, recompute="selective", fp8=True),
    *(_titan(i, _8B, dp=8, mbs=1, gbs=8, recompute="selective", fp8=f, gpu="h100-sxm",
             note="H100 variant not stated; Llama-3-8B" + n) for i, f, n in
      (("M21", False, ""), ("M22", True, ""), ("M23", True, "; float8 rowwise"))),
    *(_titan(i, _8B, gpu="b200", dp=8, mbs=1, gbs=8, recompute="selective", fp8=f,
             note="power-limited B200; Llama-3-8B")
      for i, f in (("M24", False), ("M25", True), ("M26", True), ("M27", True))),
    *(TRow(i, None, "h100-sxm", note="Moonlight-16B-A3B: no config")
      for i in ("M32", "M33", "M34", "M35", "M36", "M37")),
    *(TRow(i, None, "h100-sxm", note="figure is Bridge model TFLOP/s only (own FLOP formula)")
      for i in ("M40", "M41", "M42")),
    *(TRow(i, "qwen3-14b", "h20", dp=2, tp=4, sp=True, gbs=16, recompute="selective", zero=1,
           runtime=MEGATRON, fp8=f, step_time=True, note="ms-swift Megatron")
      for i, f in (("M45", True), ("M46", False))),
    TRow("M47", "qwen2.5-14b", "a100-sxm-80gb", dp=2, tp=4, sp=True, gbs=16,
         recompute="selective", zero=1, runtime=MEGATRON, step_time=True,
         note="A800 (NVLink 400 GB/s)"),
    TRow("M48", "qwen2.5-14b", "a100-sxm-80gb", dp=8, gbs=16, recompute="full", zero=2,
         runtime=HF_DEEPSPEED, step_time=True, note="A800; DeepSpeed ZeRO-2"),
    TRow("M49", "qwen2.5-14b", "a100-sxm-80gb", dp=8, gbs=16, recompute="full", zero=3,
         runtime=HF_DEEPSPEED, step_time=True, note="A800; DeepSpeed ZeRO-3"),
    TRow("M50", "qwen3-30b-a3b", "a100-sxm-80gb", dp=8, tp=2, sp=True, ep=8, etp=1, gbs=16,
         recompute="full", zero=1, runtime=MEGATRON, step_time=True,
         note="A800; etp 1 (ms-swift's default)"),
    TRow("M51", None, "a100-sxm-80gb", note="micro-batch and recompute not stated"),
    # torchtitan Table 2: vanilla TP (the first figure of the vanilla / AsyncTP pairs)
    *(_titan(i, _70B, dp=32, tp=8, sp=True, mbs=16, gbs=512, recompute="full", fp8=f, note=n)
      for i, f, n in (("T1", False, ""), ("T2", False, "AsyncTP"), ("T3", True, ""),
                      ("T4", True, "AsyncTP"), ("T5", True, "float8 rowwise"))),
    *(_titan(i, _8B, dp=8, tp=8, sp=True, mbs=12, gbs=96, recompute="selective", fp8=f, note=n)
      for i, f, n in (("T6", False, ""), ("T7", True, ""), ("T8", True, "float8 rowwise"))),
    *(_titan(i, _405B, dp=16, tp=8, sp=True, mbs=2, gbs=32, recompute="full", fp8=f, note=n)
      for i, f, n in (("T9", False, ""), ("T10", True, ""), ("T11", True, "AsyncTP"))),
    # NeMo / Megatron-Bridge on DGX-H100 / DGX-B200: DistOpt (ZeRO-1), FP8 where stated;
    # recompute "n/s" → none (the performance recipes run without it unless they say)
    TRow("T12", _8B, "h100-sxm", dp=4, cp=2, gbs=128, zero=1, fp8=True, note="Llama-3-8B"),
    TRow("T13", _70B, "h100-sxm", dp=2, tp=4, sp=True, pp=4, vp=5, cp=2, gbs=128, zero=1,
         fp8=True, note="Llama-3-70B"),
    *(TRow(i, None, "h100-sxm", note=n) for i, n in (
        ("T14", "Llama-2: no config"), ("T15", "Llama-2: no config"),
        ("T16", "Llama-2: no config"), ("T17", "GPT3-175B: no config"),
        ("T18", "GPT3-5B/20B: no config"), ("T19", "Nemotron-340B: no config"),
        ("T20", "Llama-2: no config"), ("T21", "Llama-2 LoRA: no config"))),
    TRow("T22", _8B, "h100-sxm", dp=8, gbs=128, recompute="full", zero=3, fp8=True,
         note="Megatron-FSDP; recompute 5 layers priced as full"),
    *(TRow(i, _70B, "h100-sxm", dp=2, tp=4, sp=True, pp=8, vp=5, gbs=g, zero=1, fp8=True,
           note="Llama-3-70B") for i, g in (("T23", 128), ("T25", 256))),
    *(TRow(i, _405B, "h100-sxm", dp=8, tp=8, sp=True, pp=8, vp=8, cp=2, gbs=g, zero=1,
           fp8=True) for i, g in (("T24", 512), ("T26", 1536))),
    TRow("T27", _70B, "h100-sxm", dp=2, tp=4, sp=True, pp=4, vp=5, gbs=32, seq=4096, zero=1,
         fp8=True, note="Llama-3-70B SFT"),
    TRow("T28", None, "h100-sxm", note="LoRA: the planner prices full fine-tuning only"),
    TRow("T29", _8B, "b200", dp=8, mbs=2, gbs=128, zero=1, fp8=True,
         note="Llama-3-8B; CUDA graph"),
    TRow("T30", _405B, "b200", dp=2, tp=4, sp=True, pp=8, vp=8, cp=2, gbs=64, zero=1, fp8=True),
    *(TRow(i, None, "h100-sxm", note=n) for i, n in (
        ("T31", "MPT-70B: no config"), ("T32", "MPT-70B: no config"),
        ("T33", "MPT-30B: no config"), ("T34", "MPT-30B: no config"),
        ("T35", "MPT-30B: no config"), ("T36", "MPT-30B: no config"),
        ("T37", "MPT-13B: no config"), ("T38", "MPT-13B: no config"),
        ("T39", "MPT-13B: no config"), ("T40", "MPT-13B: no config"),
        ("T41", "MPT-7B: no config"), ("T42", "MPT-7B: no config"),
        ("T43", "MPT-7B: no config"), ("T44", "MPT-7B: no config"),
        ("T45", "MPT-3B: no config"), ("T46", "MPT-1B: no config"))),
    # MoE (Megatron-Bridge: forced expert balance; layernorm / moe_act recompute is
    # element-wise only → none). GPUs = dp·tp·pp·cp; EP inside DP.
    TRow("T53", "gpt-oss-120b", "h100-sxm", dp=16, pp=4, ep=8, gbs=1280, seq=4096, zero=1),
    TRow("T54", "qwen3-30b-a3b", "h100-sxm", dp=16, ep=16, gbs=1024, seq=4096, zero=1,
         fp8=True, ep_dispatch="hierarchical", note="HybridEP"),
    # etp 1: Megatron-Bridge's Qwen3-MoE recipes set expert_tensor_parallel_size = 1
    # (megatron-bridge 0.3.1 recipes/qwen/qwen3_moe.py), and Megatron needs ep·etp to divide
    # dp·tp = 32, which etp = tp = 2 would not
    *(TRow(i, "qwen3-235b-a22b", "h100-sxm", dp=16, tp=2, sp=True, pp=8, vp=4, ep=32, etp=1,
           gbs=g, seq=4096, zero=1, fp8=True, ep_overlap=o,
           note="94 layers: uneven chunks" + n)
      for i, g, o, n in (("T55", 8192, True, "; A2A overlap"), ("T58", 2048, False, ""))),
    TRow("T56", None, "h100-sxm", note="Nemotron-3-Nano: no config"),
    TRow("T57", "qwen3-30b-a3b", "h100-sxm", dp=8, pp=2, vp=24, ep=8, mbs=2, gbs=512, seq=4096,
         zero=1, fp8=True),
    TRow("T59", "gpt-oss-120b", "h100-sxm", dp=16, pp=4, ep=8, mbs=4, gbs=512, seq=4096,
         zero=1),
    TRow("T60", "deepseek-v3", "b200", dp=16, pp=16, ep=8, gbs=2048, seq=4096,
         recompute="selective", zero=1, fp8=True, note="MTP not priced"),
    TRow("T61", "deepseek-v3", "b200", dp=32, pp=8, vp=2, ep=32, gbs=4096, seq=4096,
         recompute="selective", zero=1, fp8=True, ep_dispatch="hierarchical", ep_overlap=True,
         note="DeepEP, A2A overlap; CUDA graphs"),
    TRow("T62", "gpt-oss-120b", "b200", dp=64, ep=8, mbs=4, gbs=1280, seq=4096, zero=1),
    TRow("T63", "qwen3-30b-a3b", "b200", dp=8, ep=8, mbs=4, gbs=512, seq=4096, zero=1,
         fp8=True, ep_dispatch="hierarchical", note="HybridEP; CUDA graphs"),
    TRow("T64", "qwen3-235b-a22b", "b200", dp=32, pp=8, ep=8, gbs=8192, seq=4096, zero=1,
         fp8=True),
    TRow("T65", None, "b200", note="Nemotron-3: no config"),
    # NeMo Automodel (FSDP = ZeRO-3; recompute not stated → none); its benchmarks route with
    # the fake balanced gate (Conventions), priced as run: blocks of k experts
    TRow("T66", "deepseek-v3", "h100-sxm", dp=256, pp=4, vp=8, ep=64, gbs=8192, seq=4096,
         pick=2, ep_dispatch="hierarchical", routing="blocks",
         note="Automodel, DeepEP, fake balanced gate"),
    TRow("T67", "deepseek-v3", "h100-sxm", dp=64, pp=4, vp=8, ep=64, gbs=512, seq=4096, pick=2,
         ep_dispatch="hierarchical", routing="blocks",
         note="Automodel, DeepEP, fake balanced gate"),
    TRow("T68", None, "h100-sxm", note="Kimi-K2: no config"),
    TRow("T69", "qwen3-30b-a3b", "h100-sxm", dp=8, ep=8, mbs=4, gbs=512, seq=4096, pick=2,
         routing="blocks",
         note="Automodel"),
    TRow("T69b", "gpt-oss-20b", "h100-sxm", dp=8, mbs=2, gbs=256, seq=4096, pick=5,
         note="Automodel (T69's 2nd figure)"),
    TRow("T69c", "gpt-oss-120b", "h100-sxm", dp=64, mbs=2, gbs=512, seq=4096, pick=8,
         note="Automodel (T69's 3rd figure)"),
]

_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def measured(text: str, row: TRow) -> float | None:
    """Measured tokens/s/GPU: the row's `pick`-th number of its throughput cell (Table 1:
    "Also measured", Table 2: "Throughput"); step times converted by GBS · seq / GPUs."""
    base = re.match(r"[A-Z]\d+", row.id).group(0)
    cells = row_cells(text, base)
    if cells is None:
        return None
    cell = cells[11] if base.startswith("M") else cells[9]
    numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(cell)]
    if len(numbers) <= row.pick:
        return None
    value = numbers[row.pick]
    return row.gbs * row.seq / value / row.gpus if row.step_time else value


def illegal(row: TRow) -> str | None:
    """Why the row's layout is one its framework could not run (None: it can), by the rules
    `rlplan evaluate` checks plans with."""
    layout = row.layout()
    if (why := layout_problem(load_model(row.model), layout)) is not None:
        return why
    try:
        check_experts(layout, "training", row.id)
    except ValueError as e:
        return str(e)
    return None


def predict(row: TRow, gpu: HardwareProfile | None = None, routing: str | None = None) -> float:
    """Predicted tokens/s/GPU: one optimizer step over the global batch (`routing`: another
    than the row's, `TRow.spec`)."""
    spec = row.spec(routing)
    gpu = gpu or load_profile(row.gpu)
    layout = row.layout()
    sw = runtime_software(row.software, gpu.name)  # the mapping a scenario's runtime takes
    t = time_model.time_train(spec, Head.POLICY, layout, gpu, row.gbs, row.seq,
                              grad_bytes=sw.precision.grad_bytes, runtime=sw.runtime)
    return row.gbs * row.seq / float(t.total) / row.gpus


def _apes(rows: list[tuple[TRow, float]], gpu: HardwareProfile) -> list[float]:
    return [abs(predict(r, gpu) / m - 1) for r, m in rows]


def fit(rows: list[tuple[TRow, float]], base: HardwareProfile) -> tuple[float, float, list[str]]:
    """(compute, hbm) of one profile on its rows, as `calibration.fit_profile` does."""
    def objective(f: cal.VFit) -> float:
        errs = _apes(rows, cal.with_efficiency(base, f.compute, f.hbm))
        return float(np.median(errs) + 1e-3 * np.mean(errs))

    default = cal.VFit(base.efficiency.compute, base.efficiency.hbm, 0.0, 0.0)
    kept, notes, _ = cal.fit_with_rules(objective, default, ["compute", "hbm"],
                                        cal.MIN_GAIN["rl"])
    return kept.compute, kept.hbm, notes


def _summary(label: str, errors: list[float]) -> str:
    if not errors:
        return f"{label:34} no rows"
    absolute = [abs(e) for e in errors]
    return (f"{label:34} {len(errors):2} rows: median |error| {statistics.median(absolute):.1%}, "
            f"mean {statistics.mean(absolute):.1%}, median signed {statistics.median(errors):+.1%}")


def table(text: str) -> list[tuple[TRow, float]]:
    """Print the per-row table with the shipped profiles; return the priced (row, measured)."""
    print("Training throughput, training_h100.md (tokens/s/GPU; error = predicted/measured - 1)")
    print(f"{'row':5} {'model':16} {'gpu':18} {'prec':4} {'GPUs':>5} {'measured':>9} "
          f"{'predicted':>9} {'error':>7}  note")
    priced = []
    for row in ROWS:
        value = measured(text, row)
        if value is None:
            print(f"{row.id:5} not found in training_h100.md")
            continue
        if row.model is None:
            print(f"{row.id:5} {'—':16} {row.gpu:18} {'':4} {'':>5} {value:9.1f} {'':>9} "
                  f"{'':>7}  not priced: {row.note}")
            continue
        if (why := illegal(row)) is not None:  # a transcription slip, not a model miss
            print(f"{row.id:5} {row.model:16} not priced: illegal layout ({why})")
            continue
        pred = predict(row)
        print(f"{row.id:5} {row.model:16} {row.gpu:18} {'fp8' if row.fp8 else 'bf16':4} "
              f"{row.gpus:5} {value:9.1f} {pred:9.1f} {pred / value - 1:+7.1%}  {row.note}")
        priced.append((row, value))
    return priced


def medians(priced: list[tuple[TRow, float]], gpus: dict[str, HardwareProfile]) -> None:
    errs = {r.id: predict(r, gpus.get(r.gpu)) / m - 1 for r, m in priced}
    h100_class = [errs[r.id] for r, _ in priced if r.gpu in FITTED]
    print(_summary("H100-class (H100/H200/B200/H20)", h100_class))
    for name, keep in (("  bf16 rows", lambda r: not r.fp8), ("  fp8 rows", lambda r: r.fp8),
                       ("  H100 rows (both profiles)", lambda r: "h100" in r.gpu)):
        print(_summary(name, [errs[r.id] for r, _ in priced if r.gpu in FITTED and keep(r)]))
    for gpu in (*FITTED, "a100-sxm-80gb"):
        print(_summary(f"  {gpu}", [errs[r.id] for r, _ in priced if r.gpu == gpu]))
    print(f"(issue 16 target: H100-class median <= {TARGET_MEDIAN:.0%})")


def spans_domains(row: TRow) -> bool:
    """The row's expert-parallel group spans scale-up domains: its all-to-alls cross NICs."""
    layout, spec = row.layout(), load_model(row.model)
    return bool(spec.moe) and layout.ep * expert_tp(layout, "training") > load_profile(
        row.gpu).scale_up_gpus


def cross_node_ep(priced: list[tuple[TRow, float]]) -> None:
    """The issue-22 targets: every cross-node EP row within TARGET_CROSS_NODE_EP, and the
    H100-class median; rows priced with another routing than the model's show the model's."""
    rows = [(r, m) for r, m in priced if spans_domains(r)]
    print("\nCross-node expert parallelism (the EP group spans scale-up domains; shipped "
          "profiles)")
    print(f"{'row':5} {'model':16} {'gpu':9} {'EP':>3} {'domains':>7} {'dispatch':12} "
          f"{'overlap':7} {'measured':>9} {'predicted':>9} {'error':>7}")
    within = 0
    for r, m in rows:
        layout, gpu = r.layout(), load_profile(r.gpu)
        domains = layout.ep * expert_tp(layout, "training") // gpu.scale_up_gpus
        err = predict(r) / m - 1
        within += abs(err) <= TARGET_CROSS_NODE_EP
        other = (f"  (the model's own routing: {predict(r, routing='model') / m - 1:+.1%})"
                 if r.routing != "model" else "")
        print(f"{r.id:5} {r.model:16} {r.gpu:9} {layout.ep:3} {domains:7} {r.ep_dispatch:12} "
              f"{'yes' if r.ep_overlap else 'no':7} {m:9.1f} {predict(r):9.1f} {err:+7.1%}"
              f"{other}")
    median = statistics.median(abs(predict(r) / m - 1) for r, m in priced if r.gpu in FITTED)
    print(f"issue 22 targets: cross-node EP rows within {TARGET_CROSS_NODE_EP:.0%}: {within} of "
          f"{len(rows)}; H100-class median {median:.1%} (<= {TARGET_MEDIAN:.0%}: "
          f"{'met' if median <= TARGET_MEDIAN else 'NOT met'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-fit", action="store_true", help="price with shipped values only")
    args = parser.parse_args(argv)
    path = DATA / "training_h100.md"
    if not path.is_file():
        print(f"needs {path} (the workplace's shared calibration data)")
        return 1
    text = path.read_text(encoding="utf-8")
    priced = table(text)
    print("\nWith the shipped efficiencies:")
    medians(priced, {})
    cross_node_ep(priced)
    if args.no_fit:
        return 0
    print("\nFit per profile (compute, hbm; shipped values as the default):")
    fitted = {}
    groups = {g: [(r, m) for r, m in priced if r.gpu == g] for g in FITTED}
    groups["h100, both profiles' rows, one fit (does the split matter?)"] = [
        (r, m) for r, m in priced if "h100" in r.gpu]
    for name, rows in groups.items():
        if not rows:
            print(f"  {name}: no rows")
            continue
        base = load_profile(rows[0][0].gpu)
        c, h, notes = fit(rows, base)
        print(f"  {name}: compute {c:.2f} hbm {h:.2f} (shipped {base.efficiency.compute:.2f} / "
              f"{base.efficiency.hbm:.2f}) on {len(rows)} rows: "
              f"{', '.join(r.id for r, _ in rows)}")
        for n in notes:
            print(f"      {n}")
        if name in FITTED:
            fitted[name] = cal.with_efficiency(base, c, h)
    print("\nWith the fitted efficiencies:")
    medians(priced, fitted)
    return 0


if __name__ == "__main__":
    sys.exit(main())

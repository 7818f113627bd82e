"""Decode calibration: the measured decode figures of ../shared/data/calibration/rollout.md §2
reproduced through the planner's own rollout functions (`planner.cost.generation`), and the
engine overheads and decode bandwidth factor fitted on them.

Each row of rollout.md §2 is transcribed below with its row number; a row is priced when the
planner has its model and GPU, else reported with what is missing. Inter-token latency rows
are one decode step of the planner (`DecodeStep.seconds`) at the row's batch and context, plus
— where new requests keep arriving (a serving benchmark at fixed concurrency) — the prefill
the engine interleaves per step (concurrency / output length new prompts per step,
`PrefillCost`). Throughput rows run the planner's continuous-batching schedule
(`time_generation`). The NCCL rows price `comm.time_allreduce`; they are the rows the collective
latencies were fitted on, so they are reported, not counted.

Fitted here (grids of physically sensible values, least median APE over the counted points,
mean APE breaking ties): the profiles' shared `efficiency.decode_hbm` default, and the
per-step overhead of the current engines (`vllm-v1`: NIM, TensorRT-LLM and vLLM 0.20 rows) and
of the pre-2025 engines (`vllm-v0`: the 2023–2024 rows).
"""

from __future__ import annotations

import csv
import itertools
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from planner.cost import comm
from planner.cost.constants import ENGINES, Engine
from planner.cost.generation import decode_step, kv_tokens_that_fit, prefill_cost, time_generation
from planner.cost.rollout_stage import generation_rollout
from planner.cost.states import MIXED_PRECISION_ADAM, Precision
from planner.plan import Layout
from planner.specs.hardware import (
    DEFAULT_DECODE_HBM_EFFICIENCY,
    GIB,
    HardwareProfile,
    load_profile,
)
from planner.specs.model import load_model

sys.path.insert(0, str(Path(__file__).parent))
from rl_mapping import map_row

RUNS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "calibration" / "runs.csv"
LARGE_MOE_ROWS = ("0", "1", "2", "3", "4", "5", "27")

FP8 = Precision(weight_bytes=1)  # FP8 weights, bf16 KV cache (vLLM's default kv_cache_dtype)
FP8_KV = Precision(weight_bytes=1, kv_cache_bytes=1)
FP8_MATMULS = Precision(weight_bytes=1, fp8_matmuls=True)  # W8A8 on FP8 tensor cores
BF16 = MIXED_PRECISION_ADAM
DECODE_HBM_GRID = np.round(np.arange(0.50, 0.901, 0.05), 2)
# s per step, within what rollout.md §3 measures for each engine class (a fit outside it would
# stand in for another mechanism): current engines 0.3–2 ms, the V0 era 5–13 ms
V1_GRID = np.round(np.arange(0.3e-3, 2.01e-3, 1e-4), 6)
V0_GRID = np.round(np.arange(5e-3, 13.1e-3, 1e-3), 4)
EAGER_GRID = np.round(np.arange(0.0, 20.1e-3, 1e-3), 4)  # no measured range: the widest
SEQ_GRID = np.round(np.arange(0.0, 0.401e-3, 0.025e-3), 6)  # s per running sequence per step
FLOOR_GRID = np.round(np.arange(0.0, 0.401e-3, 0.025e-3), 6)  # s per layer per step
EAGER_FLOOR_GRID = np.round(np.arange(0.0, 1.01e-3, 0.05e-3), 6)  # eager: up to training's


@dataclass(frozen=True)
class Point:
    """One measured figure: `measured` seconds per step (or s per output token for
    throughput rows), predicted by `predict(engine overheads, decode_hbm)`."""

    row: str
    label: str
    measured: float
    predict: Callable[[dict[str, Engine], float], float]
    counted: bool = True
    note: str = ""


@dataclass(frozen=True)
class Skipped:
    row: str
    label: str
    why: str


def _gpu(name: str, decode_hbm: float, precision: Precision = BF16) -> HardwareProfile:
    """The profile with `decode_hbm`; FP8 weights run their matmuls at the FP8 peak (the
    planner prices bf16 matmuls only: a bench-local stand-in)."""
    gpu = load_profile(name)
    update: dict = {"efficiency": gpu.efficiency.model_copy(
        update={"decode_hbm": float(decode_hbm)})}
    if precision.weight_bytes == 1 and gpu.fp8_tflops:
        update["bf16_tflops"] = gpu.fp8_tflops
    return gpu.model_copy(update=update)


def itl(model: str, gpu: str, tp: int, batch: float, context: float, engine: str,
        precision: Precision = BF16, arrivals: tuple[int, int] | None = None, dp: int = 1,
        ep: int = 1) -> Callable[[dict[str, Engine], float], float]:
    """Inter-token latency: one decode step of `batch` sequences per replica at `context`
    tokens each (`dp` replicas; with `ep` > 1 the replicas share their experts, vLLM's
    EP = dp·tp); `arrivals` = (prompt, output) tokens of a fixed-concurrency benchmark, whose
    new prompts (batch/output per step) the engine prefills between decode steps."""
    spec = load_model(model)
    layout = Layout(group="g", dp=dp, tp=tp, ep=ep)

    def predict(engines: dict[str, Engine], decode_hbm: float) -> float:
        g = _gpu(gpu, decode_hbm, precision)
        step = decode_step(spec, layout, g, engines[engine], precision)
        t = float(step.seconds(batch, batch * context))
        if arrivals:
            prompt, output = arrivals
            new = batch / output
            t += float(prefill_cost(spec, layout, g, precision).seconds(
                np.array([new]), np.array([new * prompt]), np.array([new * prompt ** 2]))[0])
        return t

    return predict


def throughput(model: str, gpu: str, prompt: int, output: int, engine: str, max_seqs: int,
               precision: Precision, requests: int = 4096
               ) -> Callable[[dict[str, Engine], float], float]:
    """Seconds per output token of an offline throughput run on one GPU: `requests` requests
    of `prompt` + `output` tokens through the continuous-batching schedule, the KV cache what
    memory leaves after the weights (the profile's runtime reserve kept)."""
    spec = load_model(model)
    layout = Layout(group="g", dp=1, tp=1)

    def predict(engines: dict[str, Engine], decode_hbm: float) -> float:
        g = _gpu(gpu, decode_hbm, precision)
        kv = kv_tokens_that_fit(spec, layout, g.memory_gib * GIB, max_seqs,
                                reserve_bytes=g.runtime_reserve_gib * GIB, precision=precision)
        lengths = np.full(requests, output, dtype=np.int64)
        r = time_generation(spec, layout, g, engines[engine], lengths, prompt, kv, max_seqs,
                            precision=precision)
        return r.seconds / (requests * output)

    return predict


def allreduce(gpu: str, ranks: int, elements: int) -> Callable[[dict, float], float]:
    profile = load_profile(gpu)
    return lambda engines, decode_hbm: comm.time_allreduce(2.0 * elements, ranks,
                                                           comm.link_for(profile, ranks))


def engine_allreduce(gpu: str, ranks: int, rows: int, hidden: int = 8192
                     ) -> Callable[[dict, float], float]:
    """An inference engine's TP all-reduce of `rows` bf16 rows (`comm.time_allreduce_decode`)."""
    profile = load_profile(gpu)
    return lambda engines, decode_hbm: comm.time_allreduce_decode(2.0 * rows * hidden, ranks,
                                                                  profile)


def rows() -> tuple[list[Point], list[Skipped]]:
    """rollout.md §2, row by row (the measured figure in seconds)."""
    ms = 1e-3
    pts: list[Point] = []
    skipped: list[Skipped] = []
    # 1: Llama-3.3-70B FP8, NIM 1.8.0, 2× H100 TP 2, 5000 in / 500 out, ITL by concurrency
    for c, t in zip((1, 5, 25, 50, 100), (18.58, 21.83, 38.75, 59.73, 92.91), strict=True):
        pts.append(Point("1", f"Llama-3.3-70B FP8 H100 TP2 conc {c}", t * ms,
                         itl("llama-3.1-70b", "h100-sxm", 2, c, 5000 + 250, "vllm-v1", FP8_KV,
                             arrivals=(5000, 500)),
                         note="row 1 assumed FP8 KV cache: 100 × 5,250 tokens in bf16 (86 GB "
                              "per GPU) cannot sit beside 35 GB of weights on an 80 GB H100"))
    # 2: Llama-3.1-8B, NIM 1.8.0, GPU and TP not visible in the source excerpt
    pts.append(Point("2", "Llama-3.1-8B NIM conc 1 (H100? TP1? bf16?)", 4.63e-3,
                     itl("llama-3.1-8b", "h100-sxm", 1, 1, 1000, "vllm-v1"), counted=False,
                     note="config unverified (rollout.md): 16 GB of bf16 weights take 4.8 ms at "
                          "an H100's full bandwidth, more than the measured 4.63 ms, so the row "
                          "is FP8 or another GPU; not counted"))
    # 3, 4: Llama-2-70B FP16, batch 1, 512-token prompt, TP 2/4/8 (splitwise-sim profile, 2023:
    # an engine before CUDA-graph decode, priced as `eager`)
    llama2 = ("Llama-2-70B priced as llama-3.1-70b: the same layers; its 32,000-token "
              "vocabulary is 1.6B parameters (2% of the weights) smaller")
    for row, gpu, figures in (("3", "h100-sxm", (37.1, 29.4, 30.6)),
                              ("4", "a100-sxm-80gb", (59.9, 44.5, 45.0))):
        for tp, t in zip((2, 4, 8), figures, strict=True):
            pts.append(Point(row, f"Llama-2-70B {gpu} TP{tp} batch 1", t * ms,
                             itl("llama-3.1-70b", gpu, tp, 1, 512 + 64, "eager"), note=llama2))
    # 5: Llama-2-70B FP16 H100 TP 4, batch 1…64, 512-token prompt
    for b, t in zip((1, 8, 16, 32, 64), (29.4, 31.4, 32.8, 36.9, 52.4), strict=True):
        pts.append(Point("5", f"Llama-2-70B H100 TP4 batch {b}", t * ms,
                         itl("llama-3.1-70b", "h100-sxm", 4, b, 512 + 64, "eager"), note=llama2))
    skipped.append(Skipped("6", "BLOOM-176B H100 TP8", "no BLOOM config in ../shared/data"))
    # 7: Llama-2-70B H100 TP 2, batch 1, prompt 128 → 8192
    for ctx, t in ((128, 37.2), (8192, 37.8)):
        pts.append(Point("7", f"Llama-2-70B H100 TP2 batch 1 context {ctx}", t * ms,
                         itl("llama-3.1-70b", "h100-sxm", 2, 1, ctx, "eager"), note=llama2))
    skipped.append(Skipped("8", "OPT-13B A100 (DistServe fit)", "no OPT config in "
                           "../shared/data"))
    skipped.append(Skipped("9", "CodeLlama-34B H100 (TGI 1.2)", "no CodeLlama config in "
                           "../shared/data"))
    # 10: Llama-3-70B FP8, vLLM V0 (mid-2024), 4× H100 TP 4, 128 in, batch 1 / 32
    for b, t in ((1, 19.0), (32, 25.0)):
        pts.append(Point("10", f"Llama-3-70B FP8 H100 TP4 batch {b} (vLLM V0)", t * ms,
                         itl("llama-3.1-70b", "h100-sxm", 4, b, 128 + 128, "vllm-v0", FP8),
                         note="Llama-3-70B and Llama-3.3-70B priced as llama-3.1-70b (the same "
                              "architecture)"))
    # 11: Llama-3.1-8B FP8, TensorRT-LLM, saturated throughput per GPU (s per output token)
    for gpu, shape, tok_s in (("h100-sxm", (128, 2048), 22714), ("h200-sxm", (128, 2048), 26221),
                              ("h100-sxm", (1000, 1000), 15220), ("h200-sxm", (1000, 1000),
                                                                  17744)):
        pts.append(Point("11", f"Llama-3.1-8B FP8 TRT-LLM {gpu} {shape[0]}/{shape[1]} "
                         "saturated", 1 / tok_s,
                         throughput("llama-3.1-8b", gpu, *shape, "vllm-v1", 2048, FP8_KV),
                         note="row 11 assumed: 2,048 sequences at most (TensorRT-LLM's default "
                              "max_batch_size), FP8 KV cache (the FP8 checkpoints' default in "
                              "TensorRT-LLM), all memory past the weights"))
    # 12: Llama-3.1-8B FP8, vLLM 0.20.1, B200, concurrency 64, 1000/1000: 15,638 output tok/s
    pts.append(Point("12", "Llama-3.1-8B FP8 B200 conc 64 (vLLM 0.20.1)", 64 / 15638,
                     itl("llama-3.1-8b", "b200", 1, 64, 1000 + 500, "vllm-v1", FP8,
                         arrivals=(1000, 1000))))
    # 13: Llama-3-8B, vLLM ≤ 0.5, H100, light load (ShareGPT): one token per 13 ms
    pts.append(Point("13", "Llama-3-8B H100 light load (vLLM <= 0.5)", 13e-3,
                     itl("llama-3.1-8b", "h100-sxm", 1, 1, 512, "vllm-v0"),
                     note="row 13 assumed: batch 1, 512 tokens of context (ShareGPT, light "
                          "load); Llama-3-8B priced as llama-3.1-8b (the same architecture)"))
    skipped.append(Skipped("14", "Llama-8B vLLM V1 ~5 ms GPU time", "GPU time only, no batch or "
                           "context: not an inter-token latency"))
    # 17: DeepSeek-V3 FP8, SGLang 0.4.1 (CUDA graphs, DP attention), 8× H200, 128 in / 256 out
    for c, t in ((1, 33.0), (8, 39.0), (32, 42.0)):
        pts.append(Point("17", f"DeepSeek-V3 FP8 H200 DP-attention x8 conc {c} (SGLang)",
                         t * ms, itl("deepseek-v3", "h200-sxm", 1, c / 8, 128 + 128, "sglang",
                                     FP8_MATMULS, arrivals=(128, 256), dp=8, ep=8),
                         note="row 17 priced as attention data-parallel over the 8 GPUs with "
                              "the experts spread over them (vLLM's EP = DP x TP; SGLang 0.4.1 "
                              "split each expert over the 8 instead: the same bytes read per "
                              "GPU); the concurrency spread evenly over the 8 attention ranks "
                              "(c/8 per rank); FP8 W8A8 weights, bf16 KV cache"))
    skipped.append(Skipped("17", "DeepSeek-V3 ShareGPT 5,000 prompts: 2,673.55 tok/s",
                           "ShareGPT lengths and the concurrency are not given"))
    # 15, 16: NCCL all-reduce in CUDA graphs (the collective latencies were fitted on these)
    for gpu, ranks, figures in (("h100-sxm", 2, (0.007, 0.043, 0.046)),
                                ("h100-sxm", 8, (0.023, 0.034, 0.074)),
                                ("a100-sxm-80gb", 8, (0.025, 0.064, 0.155))):
        row = "15" if gpu == "h100-sxm" else "16"
        for elements, t in zip((10_000, 1_000_000, 8_000_000), figures, strict=True):
            pts.append(Point(row, f"NCCL all-reduce {gpu} {ranks} ranks {elements:,} fp16",
                             t * ms, allreduce(gpu, ranks, elements), counted=False,
                             note="the collective latencies were fitted on these rows"))
    # 18: the engines' all-reduce per call at decode sizes (vLLM 0.24 custom all-reduce in a
    # node, NCCL across two), aiconfigurator 0.12's database; hidden 8192 (its figures for
    # Llama-3.1-70B)
    us = 1e-6
    for ranks, rows_, t in ((2, 1, 4.4), (4, 1, 4.8), (8, 1, 5.2), (4, 256, 30.0),
                            (16, 1, 51.0), (16, 64, 144.0)):
        pts.append(Point("18", f"engine all-reduce h100-sxm TP{ranks} {rows_} rows x 8192 bf16",
                         t * us, engine_allreduce("h100-sxm", ranks, rows_), counted=False,
                         note="row 18: the decode collectives' constants were fitted on it "
                              "(ENGINE_ALLREDUCE_PEER_US, DECODE_ALLREDUCE_NIC_SHARE); hidden "
                              "8192 assumed (aiconfigurator gives these figures for "
                              "Llama-3.1-70B)"))
    return pts, skipped


def errors(points: list[Point], engines: dict[str, Engine], decode_hbm: float
           ) -> list[tuple[Point, float, float]]:
    """(point, predicted, signed relative error) per point."""
    out = []
    for p in points:
        pred = p.predict(engines, decode_hbm)
        out.append((p, pred, pred / p.measured - 1))
    return out


def objective(points: list[Point], engines: dict[str, Engine], decode_hbm: float) -> float:
    """Mean absolute percentage error of the counted points (every row weighs in, so no row
    is sacrificed to the median)."""
    errs = [abs(e) for p, _, e in errors(points, engines, decode_hbm) if p.counted]
    return float(np.mean(errs))


@dataclass(frozen=True)
class EngineFit:
    """The fitted decode constants: the shared HBM factor, and per engine class its step
    overhead, per-sequence cost and per-layer floor (current engines: no per-sequence fit,
    vLLM's measured 1.1 µs; V0: no floor, its CUDA graphs cover the layers)."""

    decode_hbm: float
    v1: float
    v1_floor: float
    v0: float
    v0_seq: float
    eager: float
    eager_seq: float
    eager_floor: float

    def engines(self) -> dict[str, Engine]:
        return {**ENGINES,
                "vllm-v1": replace(ENGINES["vllm-v1"], step_overhead_s=self.v1,
                                   layer_floor_s=self.v1_floor),
                "vllm-v0": replace(ENGINES["vllm-v0"], step_overhead_s=self.v0,
                                   per_seq_s=self.v0_seq),
                "eager": replace(ENGINES["eager"], step_overhead_s=self.eager,
                                 per_seq_s=self.eager_seq, layer_floor_s=self.eager_floor)}


def _shipped() -> EngineFit:
    v1, v0, eager = (ENGINES[e] for e in ("vllm-v1", "vllm-v0", "eager"))
    return EngineFit(DEFAULT_DECODE_HBM_EFFICIENCY, v1.step_overhead_s, v1.layer_floor_s,
                     v0.step_overhead_s, v0.per_seq_s, eager.step_overhead_s, eager.per_seq_s,
                     eager.layer_floor_s)


SHIPPED = _shipped()
GRIDS = {"decode_hbm": DECODE_HBM_GRID, "v1": V1_GRID, "v1_floor": FLOOR_GRID, "v0": V0_GRID,
         "v0_seq": SEQ_GRID, "eager": EAGER_GRID, "eager_seq": SEQ_GRID,
         "eager_floor": EAGER_FLOOR_GRID}


MIN_GAIN = 0.005  # half a point of the objective: what a fitted value must buy to be kept
MIN_ROWS = 2  # rows whose error it must move (by two points or more): nothing fits one row


def fit(points: list[Point], start: EngineFit = SHIPPED, rounds: int = 4
        ) -> tuple[EngineFit, list[str]]:
    """Coordinate descent over the grids from `start`, minimising `objective` on the counted
    points (each constant in turn to its best grid value, until nothing moves); then each
    constant goes back to its shipped value unless it lowers the objective by `MIN_GAIN` and
    moves the error of `MIN_ROWS` rows or more. Returns the fit and a line per constant."""
    counted = [p for p in points if p.counted]

    def score(f: EngineFit) -> float:
        return objective(counted, f.engines(), f.decode_hbm)

    best = start
    for _ in range(rounds):
        moved = False
        for name, grid in GRIDS.items():
            value = min(grid, key=lambda v, n=name: (score(replace(best, **{n: float(v)})),
                                                     abs(v - getattr(best, n))))
            if float(value) != getattr(best, name):
                best, moved = replace(best, **{name: float(value)}), True
        if not moved:
            break
    notes = []
    for name in GRIDS:
        shipped = replace(best, **{name: getattr(start, name)})
        gain = score(shipped) - score(best)
        mine = errors(counted, best.engines(), best.decode_hbm)
        theirs = errors(counted, shipped.engines(), shipped.decode_hbm)
        rows = sorted({p.row for (p, _, a), (_, _, b) in zip(mine, theirs, strict=True)
                       if abs(abs(a) - abs(b)) >= 0.02}, key=int)
        keep = gain >= MIN_GAIN and len(rows) >= MIN_ROWS
        notes.append(f"{name}: fitted {getattr(best, name):g}, shipped {getattr(start, name):g}"
                     f"; objective {100 * gain:+.2f} points; moves rows "
                     f"{', '.join(rows) or 'none'} -> "
                     + ("kept" if keep else "shipped value kept (not identified)"))
        if not keep:
            best = shipped
    return best, notes


def describe(f: EngineFit) -> str:
    return (f"decode_hbm {f.decode_hbm:.2f}; vllm-v1 {f.v1 * 1e3:.2f} ms per step, floor "
            f"{f.v1_floor * 1e6:.0f} µs per layer; vllm-v0 {f.v0 * 1e3:.1f} ms per step + "
            f"{f.v0_seq * 1e6:.0f} µs per sequence; eager {f.eager * 1e3:.1f} ms per step + "
            f"{f.eager_seq * 1e6:.0f} µs per sequence, floor {f.eager_floor * 1e6:.0f} µs per "
            "layer")


def report(points: list[Point], skipped: list[Skipped], f: EngineFit, title: str
           ) -> dict[str, float]:
    res = errors(points, f.engines(), f.decode_hbm)
    print(f"\n{title}: {describe(f)}")
    print(f"  {'row':>3} {'point':<55} {'measured':>10} {'predicted':>10} {'error':>7}")
    for p, pred, e in res:
        unit = "ms" if p.measured < 1 else "s"
        scale = 1e3 if unit == "ms" else 1
        mark = "" if p.counted else "  (not counted)"
        print(f"  {p.row:>3} {p.label:<55} {p.measured * scale:8.3f}{unit} "
              f"{pred * scale:8.3f}{unit} {100 * e:+6.1f}%{mark}")
    for s in skipped:
        print(f"  {s.row:>3} {s.label:<55} not priced: {s.why}")
    notes = {p.note for p in points if p.note}
    for n in sorted(notes):
        print(f"      note: {n}")
    counted = [abs(e) for p, _, e in res if p.counted]
    stats = {"median": float(np.median(counted)), "mean": float(np.mean(counted)),
             "max": float(np.max(counted)), "points": len(counted)}
    per_row = {}
    for row, group in itertools.groupby([(p.row, abs(e)) for p, _, e in res if p.counted],
                                        key=lambda x: x[0]):
        per_row[row] = float(np.median([e for _, e in group]))
    print(f"  counted points: {stats['points']}; median APE {100 * stats['median']:.1f}%, mean "
          f"{100 * stats['mean']:.1f}%, worst {100 * stats['max']:.1f}%; per row (median): "
          + ", ".join(f"{r} {100 * e:.0f}%" for r, e in per_row.items()))
    return stats


# --- the large-MoE RL rows' rollouts (runs.csv rows 0-5, 27) ----------------------------------


@dataclass(frozen=True)
class MoeRollout:
    row: str
    label: str
    measured_step_s: float
    rollout_s: float
    longest: int  # the longest response: the slowest replica's decode steps, at least
    regime: str
    kv_tokens: int
    utilization: float


def moe_rollouts(path: Path = RUNS) -> list[MoeRollout]:
    """The rollout alone of each large-MoE NeMo-RL row (runs.csv rows 0-5, 27), mapped as
    bench/rl_mapping.py maps the whole row (the calibration bench prices the whole step): its
    generation layout (vLLM TP across nodes, PP 1, no EP), its G-GBS responses of G-avg mean
    length up to T-max minus the prompt derived from the row's throughput, BF16 weights, and
    the KV cache vLLM allocates at NeMo-RL's gpu_memory_utilization (vLLM's 0.9 where 0.6
    leaves too little for one sequence beside the weights). The rollout must fit inside the
    measured step."""
    out = []
    with open(path, newline="") as f, tempfile.TemporaryDirectory() as tmp:
        for r in csv.DictReader(f):
            if r["id"] not in LARGE_MOE_ROWS:
                continue
            case = map_row(r, Path(tmp))
            sc, gen = case.scenario, case.plan.layouts["actor"]["generation"]
            roll = generation_rollout(sc, gen)
            out.append(MoeRollout(
                r["id"], f"{r['model']} {r['n_gpus']}g {case.label.split()[-1]} gen TP{gen.tp}"
                f" x{gen.dp} on {gen.gpus}", float(r["step_time_s"]), roll.seconds,
                int(sc.response_lengths.max()), roll.regime, int(gen.kv_cache_tokens),
                case.gpu_memory_utilization))
    return out


def report_moe_rollouts() -> None:
    print("\nLarge-MoE RL rows (runs.csv 0-5, 27): the rollout alone, against the whole measured "
          "step (training, log-probs and refit not priced here)")
    print("  ms/step: the rollout over its longest response (a mean over the slowest replica's "
          "decode steps, prefill included)")
    print(f"  {'row':>3} {'run':<48} {'step s':>7} {'rollout s':>9} {'share':>6} "
          f"{'ms/step':>7} {'KV tokens (util)':>16}  regime")
    for m in moe_rollouts():
        print(f"  {m.row:>3} {m.label:<48} {m.measured_step_s:7.1f} {m.rollout_s:9.1f} "
              f"{m.rollout_s / m.measured_step_s:6.0%} {1e3 * m.rollout_s / m.longest:7.1f} "
              f"{m.kv_tokens:>10,} ({m.utilization:g})  {m.regime}")


def main() -> None:
    points, skipped = rows()
    report(points, skipped, SHIPPED, "decode rows of rollout.md §2, shipped constants")
    report_moe_rollouts()


if __name__ == "__main__":
    main()

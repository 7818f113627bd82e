"""rlplan's decode and prefill step times beside NVIDIA aiconfigurator's, shape by shape.

aiconfigurator (PyPI `aiconfigurator`; ../shared/data/calibration/rollout.md §1) prices an
inference step from a database of per-operation times measured per GPU and engine (vLLM 0.24 on
H100/H200/B200 here). It is a peer, not ground truth: nothing in rlplan is fitted to it. This
bench prices the same shapes both ways — models × TP / expert parallelism × batch × context ×
GPU — and prints the table and the spread, so the two models' disagreements are visible.

    .venv/bin/python bench/aiconfigurator_peer.py            # every shape (about 10 minutes)
    .venv/bin/python bench/aiconfigurator_peer.py --quick    # H100 only, fewer shapes
    .venv/bin/python bench/aiconfigurator_peer.py --allreduce  # the TP all-reduce per call
    .venv/bin/python bench/aiconfigurator_peer.py --row17  # rollout.md §2 row 17, three ways

aiconfigurator is never a dependency of rlplan: install it into a virtualenv of your own
(`pip install aiconfigurator`); without it the bench says so and compares nothing. It is called
through `aiconfigurator.cli.api.cli_estimate`, the Python form of `aiconfigurator cli estimate
--backend vllm --estimate-mode static_gen` (decode) / `static_ctx` (prefill), so its database
loads once.

What is compared:
- decode: aiconfigurator's TPOT of `batch` sequences per replica (per attention rank under
  expert parallelism) generating 64 tokens after `isl` prompt tokens, against rlplan's
  `DecodeStep.seconds` at that batch and the mean context isl + 32 (the vllm-v1 engine, its
  0.5 ms of host time per step included);
- prefill: aiconfigurator's TTFT of `batch` prompts of `isl` tokens, against
  `PrefillCost.seconds` (rlplan adds no host time to it; aiconfigurator's vLLM backend adds
  its CPU dispatch per layer, rollout.md §1).
Shapes whose generation weights do not fit the GPU are skipped (rlplan's memory model).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import time
from dataclasses import dataclass

import decode  # bench/decode.py: row 17 as the decode bench prices it
import numpy as np

from planner.cost import comm
from planner.cost.constants import ENGINES
from planner.cost.generation import (
    decode_step,
    memory_generation_per_gpu,
    prefill_cost,
    rollout_precision,
)
from planner.plan import Layout
from planner.specs.hardware import load_profile
from planner.specs.model import load_model

SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200": "b200_sxm"}
MODELS = {  # rlplan name: (Hugging Face id, rollout weights, parallel shapes)
    "qwen3-8b": ("Qwen/Qwen3-8B", "bf16", ("tp1", "tp2", "tp4")),
    "qwen3-32b": ("Qwen/Qwen3-32B", "bf16", ("tp1", "tp2", "tp4", "tp8")),
    "llama-3.1-70b": ("meta-llama/Meta-Llama-3.1-70B", "bf16", ("tp2", "tp4", "tp8")),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", "bf16", ("tp1", "tp2", "tp4", "ep8")),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", "bf16", ("tp8", "tp16", "ep8")),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", "fp8", ("tp8", "tp16", "tp32")),
}
BATCHES = (8, 64, 256)
CONTEXTS = (1000, 4000)
OSL = 64  # decode tokens aiconfigurator integrates over (its stride 32: two points)
PREFILLS = ((1, 2000), (8, 1000))  # (prompts, tokens each)
ENGINE = ENGINES["vllm-v1"]


@dataclass(frozen=True)
class Shape:
    model: str
    gpu: str
    parallel: str  # "tpN" (TP, experts split over TP) or "epN" (attention DP N, experts EP N)
    batch: int
    isl: int
    phase: str  # "decode" | "prefill"

    @property
    def degree(self) -> int:
        return int(self.parallel[2:])

    def layout(self) -> Layout:
        n = self.degree
        if self.parallel.startswith("ep"):
            return Layout(group="g", dp=n, tp=1, ep=n)
        return Layout(group="g", dp=1, tp=n)

    def aiconfigurator_args(self) -> dict:
        n = self.degree
        moe = load_model(self.model).moe is not None
        if self.parallel.startswith("ep"):
            return {"tp_size": 1, "attention_dp_size": n, "moe_tp_size": 1, "moe_ep_size": n}
        return {"tp_size": n, **({"moe_tp_size": n, "moe_ep_size": 1} if moe else {})}


def shapes(quick: bool) -> list[Shape]:
    out = []
    gpus = ("h100-sxm",) if quick else tuple(SYSTEMS)
    for model, (_, _, parallels) in MODELS.items():
        for gpu in gpus:
            for par in parallels:
                contexts = CONTEXTS if gpu == "h100-sxm" and not quick else CONTEXTS[:1]
                for isl in contexts:
                    for b in (BATCHES[1:] if quick else BATCHES):
                        out.append(Shape(model, gpu, par, b, isl, "decode"))
                for b, isl in PREFILLS[:1] if quick else PREFILLS:
                    out.append(Shape(model, gpu, par, b, isl, "prefill"))
    return out


def fits(s: Shape) -> bool:
    """The generation weights, the shape's KV cache and workspace fit one GPU (rlplan)."""
    spec, gpu, layout = load_model(s.model), load_profile(s.gpu), s.layout()
    precision = rollout_precision(MODELS[s.model][1], "bf16")
    kv = s.batch * (s.isl + OSL)
    m = memory_generation_per_gpu(spec, layout, kv_tokens=kv, decode_batch=s.batch,
                                  precision=precision)
    return float(m.total) <= gpu.usable_memory_bytes


def rlplan_ms(s: Shape) -> float:
    spec, gpu, layout = load_model(s.model), load_profile(s.gpu), s.layout()
    precision = rollout_precision(MODELS[s.model][1], "bf16")
    if s.phase == "decode":
        step = decode_step(spec, layout, gpu, ENGINE, precision)
        ctx = s.isl + OSL / 2
        return 1e3 * float(step.seconds(s.batch, s.batch * ctx))
    pre = prefill_cost(spec, layout, gpu, precision)
    n = np.array([s.batch])
    return 1e3 * float(pre.seconds(n, n * s.isl, n * s.isl ** 2)[0])


def peer() -> object | None:
    """aiconfigurator's `cli_estimate`, or None when it is not installed."""
    try:
        from aiconfigurator.cli.api import cli_estimate
    except ImportError:
        return None
    return cli_estimate


def peer_ms(estimate, s: Shape) -> tuple[float | None, str]:
    """aiconfigurator's TPOT (decode) or TTFT (prefill) in ms, or None and why not."""
    hf = MODELS[s.model][0]
    mode = "static_gen" if s.phase == "decode" else "static_ctx"
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            r = estimate(hf, SYSTEMS[s.gpu], mode=mode, backend_name="vllm", isl=s.isl,
                         osl=OSL if s.phase == "decode" else 1, batch_size=s.batch,
                         **s.aiconfigurator_args())
    except Exception as exc:
        return None, " ".join(str(exc).split())[:90]
    return (r.tpot if s.phase == "decode" else r.ttft), ""


def spread(rows: list[tuple[Shape, float, float]], label: str) -> str:
    """rlplan / aiconfigurator − 1 over `rows`: median, |median|, 10th–90th percentile."""
    if not rows:
        return f"  {label:<44} no shapes"
    r = np.array([a / b - 1 for _, a, b in rows])
    p10, p90 = np.percentile(r, [10, 90])
    return (f"  {label:<44} {len(r):4d} shapes: median {100 * np.median(r):+6.1f}%, "
            f"median |diff| {100 * np.median(np.abs(r)):5.1f}%, 10-90% "
            f"[{100 * p10:+6.1f}%, {100 * p90:+6.1f}%]")


ALLREDUCE_MODEL = ("meta-llama/Meta-Llama-3.1-70B", 80, 8192)  # (id, layers, hidden)


def allreduce_table(estimate) -> None:
    """One TP all-reduce per call, µs: aiconfigurator's per-layer `ar_1` of a dense model's
    decode step (its vLLM custom all-reduce in a node, NCCL across nodes) against
    `comm.time_allreduce_decode` at the same buffer (batch rows of the hidden size, bf16)."""
    hf, layers, hidden = ALLREDUCE_MODEL
    profile = load_profile("h100-sxm")
    print(f"TP all-reduce per call on h100-sxm, {hf} (hidden {hidden}, bf16), µs")
    print(f"{'tp':>3} {'rows':>5} {'bytes':>9} {'rlplan':>8} {'aiconf':>8} {'diff':>7}")
    for tp in (8, 16, 32):
        for b in (1, 8, 64, 256):
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                r = estimate(hf, "h100_sxm", mode="static_gen", backend_name="vllm", isl=1000,
                             osl=OSL, batch_size=b, tp_size=tp)
            per_call = (r.summary.get_generation_latency_dict()["generation_ar_1"]
                        / (OSL - 1) / layers * 1e3)
            nbytes = 2 * b * hidden
            mine = comm.time_allreduce_decode(nbytes, tp, profile) * 1e6
            print(f"{tp:3d} {b:5d} {nbytes:9,d} {mine:8.1f} {per_call:8.1f} "
                  f"{100 * (mine / per_call - 1):+6.1f}%")


ROW17 = ((1, 33.0), (8, 39.0), (32, 42.0))  # rollout.md §2 row 17: (concurrency, ms per step)


def row17_table(estimate) -> None:
    """rollout.md §2 row 17 (DeepSeek-V3 FP8 on 8 H200s, SGLang 0.4.1, DP attention; measured
    in Dec 2024) beside aiconfigurator's SGLang database (a later SGLang) and rlplan, per
    decode step at 128 tokens in, 256 out: attention data-parallel over the 8 GPUs with the
    experts expert-parallel (how bench/decode.py prices the row: its rlplan figures are that
    bench's, `decode.itl`, shipped constants), and the experts split over TP 8 instead (SGLang
    0.4.1's MoE; attention then TP too in aiconfigurator)."""
    print("rollout.md row 17, DeepSeek-V3 FP8 on 8x H200, ms per decode step (128 in, 256 out): "
          "measured (SGLang 0.4.1), aiconfigurator (its SGLang database), rlplan (bench/decode.py)")
    print(f"{'layout':<22} {'conc':>4} {'per rank':>8} {'measured':>8} {'aiconf':>8} "
          f"{'rlplan':>8}")
    shapes = (("DP-attention 8, EP 8", {"tp": 1, "dp": 8, "ep": 8},
               {"tp_size": 1, "attention_dp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8}, 8),
              ("TP 8 (experts split)", {"tp": 8},
               {"tp_size": 8, "moe_tp_size": 8, "moe_ep_size": 1}, 1))
    shipped = decode.SHIPPED
    for label, layout, args, ranks in shapes:
        for conc, measured_ms in ROW17:
            per_rank = max(1, conc // ranks)
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                r = estimate("deepseek-ai/DeepSeek-V3", "h200_sxm", mode="static_gen",
                             backend_name="sglang", isl=128, osl=256, batch_size=per_rank,
                             **args)
            mine = decode.itl("deepseek-v3", "h200-sxm", batch=conc / ranks, context=128 + 128,
                              engine="sglang", precision=decode.FP8_MATMULS,
                              arrivals=(128, 256), **layout)
            print(f"{label:<22} {conc:4d} {per_rank:8d} {measured_ms:8.1f} {r.tpot:8.1f} "
                  f"{1e3 * mine(shipped.engines(), shipped.decode_hbm):8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="H100 only, fewer shapes")
    ap.add_argument("--allreduce", action="store_true",
                    help="only the TP all-reduce per call, in a node and across nodes")
    ap.add_argument("--row17", action="store_true",
                    help="only rollout.md's DeepSeek-V3 row 17: measured, aiconfigurator, rlplan")
    args = ap.parse_args()
    estimate = peer()
    if estimate is None:
        print("aiconfigurator is not installed: nothing compared. Install it into a virtualenv "
              "of your own (`pip install aiconfigurator`; it is never an rlplan dependency) "
              "and rerun.")
        return
    logging.disable(logging.WARNING)
    if args.allreduce:
        allreduce_table(estimate)
        return
    if args.row17:
        row17_table(estimate)
        return
    t0 = time.time()
    print("rlplan vs aiconfigurator (vLLM backend), ms per decode step (TPOT) or per prefill "
          "(TTFT); diff = rlplan / aiconfigurator - 1")
    print(f"{'phase':<7} {'model':<16} {'gpu':<9} {'par':<5} {'batch':>5} {'isl':>5} "
          f"{'rlplan':>9} {'aiconf':>9} {'diff':>7}")
    done: list[tuple[Shape, float, float]] = []
    for s in shapes(args.quick):
        head = (f"{s.phase:<7} {s.model:<16} {s.gpu:<9} {s.parallel:<5} {s.batch:5d} "
                f"{s.isl:5d}")
        if not fits(s):
            print(f"{head}  skipped: the weights and KV cache do not fit the GPU")
            continue
        mine = rlplan_ms(s)
        theirs, why = peer_ms(estimate, s)
        if theirs is None:
            print(f"{head} {mine:9.2f}  aiconfigurator: {why}")
            continue
        done.append((s, mine, theirs))
        print(f"{head} {mine:9.2f} {theirs:9.2f} {100 * (mine / theirs - 1):+6.1f}%")
    print("\nSpread (rlplan / aiconfigurator - 1):")
    groups = {
        "decode, all": lambda s: s.phase == "decode",
        "decode, dense": lambda s: s.phase == "decode" and load_model(s.model).moe is None,
        "decode, MoE (experts split over TP)": lambda s: s.phase == "decode"
        and load_model(s.model).moe is not None and s.parallel.startswith("tp"),
        "decode, MoE expert-parallel (attention DP)": lambda s: s.phase == "decode"
        and s.parallel.startswith("ep"),
        "decode, TP across nodes (TP16/TP32)": lambda s: s.phase == "decode"
        and s.parallel.startswith("tp") and s.degree > 8,
        **{f"decode, batch {b}": (lambda s, b=b: s.phase == "decode" and s.batch == b)
           for b in BATCHES},
        **{f"decode, {g}": (lambda s, g=g: s.phase == "decode" and s.gpu == g)
           for g in SYSTEMS},
        "prefill, all": lambda s: s.phase == "prefill",
    }
    for label, keep in groups.items():
        print(spread([d for d in done if keep(d[0])], label))
    print(f"\n(bench wall time {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()

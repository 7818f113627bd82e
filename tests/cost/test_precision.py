"""Rollout precision (issue 12 item 4): FP8 checkpoints roll out in FP8 unless the scenario says
otherwise, an FP8 KV cache halves its bytes, FP8 matmuls run at the FP8 peak where the GPU has
one, and the plan says what each stage computes in."""

from __future__ import annotations

import pytest

from planner.cost import generation as G
from planner.cost.constants import ENGINES
from planner.cost.flops import flops_decode_step, flops_fwd_per_token_head
from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.cost.time import compute_rate
from planner.errors import InputError
from planner.plan import Layout, PlanInput
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario
from planner.theory.shape import Head

H100 = load_profile("h100-sxm")
A100 = load_profile("a100-sxm-80gb")
QWEN7B = load_model("qwen2.5-7b")
SCENARIO = {"algorithm": "grpo", "models.actor": "qwen2.5-7b", "models.reference": "actor",
            "models.reward": "verifier", "workload.prompts_per_step": 64,
            "workload.samples_per_prompt": 4, "workload.prompt_len": 512,
            "workload.response_len": 1024, "workload.max_response_len": 2048,
            "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 8}
PLAN = PlanInput.model_validate({
    "groups": [{"name": "g0", "gpus": 8, "roles": ["actor", "reference"]}],
    "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                          "training": {"group": "g0", "dp": 8, "zero": 3}},
                "reference": {"assessment": {"group": "g0", "dp": 8, "zero": 3}}},
    "inter_model": {"placement": "colocated"}})


def test_rollout_precision_bytes_and_matmuls():
    fp8 = G.rollout_precision("fp8", "bf16")
    assert (fp8.weight_bytes, fp8.kv_cache_bytes, fp8.fp8_matmuls) == (1, 2, True)
    kv8 = G.rollout_precision("bf16", "fp8")
    assert (kv8.weight_bytes, kv8.kv_cache_bytes, kv8.fp8_matmuls) == (2, 1, False)


def test_fp8_matmuls_run_at_the_fp8_peak_only_where_the_gpu_has_one():
    assert compute_rate(H100, fp8=True) == pytest.approx(
        H100.fp8_tflops * 1e12 * H100.efficiency.compute)
    assert compute_rate(A100, fp8=True) == compute_rate(A100)  # Ampere: weight-only FP8


def test_the_decode_step_reads_fp8_weights_and_multiplies_at_the_fp8_rate():
    layout, engine = Layout(group="g"), ENGINES["vllm-v1"]
    bf16 = G.decode_step(QWEN7B, layout, H100, engine)
    fp8 = G.decode_step(QWEN7B, layout, H100, engine, G.rollout_precision("fp8", "bf16"))
    assert (bf16.weight_bytes, fp8.weight_bytes) == (2, 1)
    head = flops_fwd_per_token_head(QWEN7B, Head.POLICY)
    matmuls = flops_decode_step(QWEN7B, 0.0).total - head
    assert fp8.flop_seq == pytest.approx(matmuls / compute_rate(H100, fp8=True)
                                         + head / compute_rate(H100))
    assert bf16.flop_seq == pytest.approx((matmuls + head) / compute_rate(H100))
    assert fp8.byte_kv == bf16.byte_kv  # the KV cache stays bf16
    # at batch 1 the step reads the weights: FP8 reads half as many bytes
    assert fp8.seconds(1, 1024) < bf16.seconds(1, 1024)


def test_an_fp8_kv_cache_holds_each_token_in_half_the_bytes():
    layout = Layout(group="g", tp=2)
    kw = dict(kv_tokens=100_000, decode_batch=64)
    bf16 = G.memory_generation_per_gpu(QWEN7B, layout, **kw)
    fp8 = G.memory_generation_per_gpu(QWEN7B, layout, precision=G.rollout_precision("bf16", "fp8"),
                                      **kw)
    assert float(fp8.kv_cache) == pytest.approx(float(bf16.kv_cache) / 2)
    assert float(fp8.weights) == pytest.approx(float(bf16.weights))
    w8 = G.memory_generation_per_gpu(QWEN7B, layout, precision=G.rollout_precision("fp8", "bf16"),
                                     **kw)
    assert float(w8.weights) == pytest.approx(float(bf16.weights) / 2)


def test_fp8_checkpoints_roll_out_in_fp8_unless_the_scenario_says_bf16():
    def weights(actor: str, **runtime) -> str:
        return load_scenario(None, {**SCENARIO, "models.actor": actor,
                                    **{f"runtime.{k}": v for k, v in runtime.items()}}
                             ).rollout_weights

    assert weights("deepseek-v3") == "fp8"  # its config carries quantization_config fp8
    assert weights("deepseek-v3", rollout_weights="bf16") == "bf16"
    assert weights("qwen2.5-7b") == "bf16"
    assert weights("qwen2.5-7b", rollout_weights="fp8") == "fp8"
    assert weights("gpt-oss-20b") == "bf16"  # MXFP4 experts: priced in bf16 (noted)


def test_the_plan_says_what_each_stage_computes_in_and_fp8_rolls_out_faster():
    def priced(**runtime):
        sc = load_scenario(None, {**SCENARIO, **{f"runtime.{k}": v for k, v in runtime.items()}})
        ev = evaluate(sc, PLAN)
        return ev, to_plan(sc, PLAN, ev)

    ev16, plan16 = priced()
    ev8, plan8 = priced(rollout_weights="fp8", kv_cache_dtype="fp8")
    assert plan16.precision["generation"] == "bf16 weights, bf16 KV cache"
    assert plan8.precision["generation"] == "fp8 weights, fp8 KV cache"
    assert plan8.precision["training"].startswith("bf16")
    assert plan8.breakdown["rollout"]["precision"] == "fp8 weights, fp8 KV cache"
    assert ev8.stage_times["generation"] < ev16.stage_times["generation"]
    assert ev8.stage_times["training"] == pytest.approx(ev16.stage_times["training"])
    # a larger KV cache in tokens for the same memory
    gen = {t.stage: t for t in ev8.tasks}["generation"].layout.kv_cache_tokens
    gen16 = {t.stage: t for t in ev16.tasks}["generation"].layout.kv_cache_tokens
    assert gen >= gen16


def test_an_unknown_precision_is_refused_naming_the_field():
    with pytest.raises(InputError, match="kv_cache_dtype"):
        load_scenario(None, {**SCENARIO, "runtime.kv_cache_dtype": "int4"})

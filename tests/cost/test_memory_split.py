"""Peak memory as frameworks report it: allocated ≤ reserved ≤ on-GPU, and the components the
row-by-row check against training_h100.md changed (bench/training.py), each on a hand-computed
case."""

from __future__ import annotations

import pytest

from planner.cost import activations as A
from planner.cost import memory as M
from planner.cost import states as ST
from planner.cost.constants import (
    ALLOCATOR_FRAGMENTATION,
    GIB,
    UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT,
    ZERO3_LAYERS_IN_FLIGHT,
)
from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.plan import Layout
from planner.specs.model import spec_from_hf_config

# a small gated GQA model: H 256, 8 heads of 32, 2 KV heads, F 512, V 1000, 4 layers
TINY = spec_from_hf_config({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
                            "num_attention_heads": 8, "num_key_value_heads": 2,
                            "intermediate_size": 512, "vocab_size": 1000}, "tiny", "test")
FSDP2 = ST.Precision(weight_bytes=4, grad_bytes=4, optimizer_bytes=8)  # torchtitan's states


def layout(**kw) -> Layout:
    return Layout(group="g", **kw)


@pytest.mark.parametrize("kw", [dict(dp=2, zero=3, checkpointing="selective"),
                                dict(dp=2, pp=2, zero=1, checkpointing="full", micro_batch=2)])
def test_allocated_reserved_and_on_gpu_sum_as_documented(kw):
    m = M.memory_training_per_gpu(TINY, layout(**kw), seq_len=128, micro_batches=4,
                                  reserve_bytes=3 * GIB)
    tensors = m.persistent + m.transient - m.fragmentation
    assert m.allocated == pytest.approx(tensors)
    # reserved = allocated + the allocator's slack on the stage's transient tensors
    assert m.fragmentation == pytest.approx(
        ALLOCATOR_FRAGMENTATION * (m.transient - m.fragmentation)) and m.fragmentation > 0
    assert m.reserved == pytest.approx(m.allocated + m.fragmentation)
    # on the GPU = reserved + the CUDA context / NCCL reserve outside the allocator
    assert m.total == pytest.approx(m.reserved + 3 * GIB)
    assert sum(m.components().values()) == pytest.approx(m.total)


def test_forward_pass_slack_is_on_its_transients():
    m = M.memory_forward_per_gpu(TINY, layout(dp=2, micro_batch=4), seq_len=128)
    assert m.fragmentation == pytest.approx(
        ALLOCATOR_FRAGMENTATION * (m.inference_workspace + m.logits + m.gather_buffer))


def test_upcast_cross_entropy_loss_buffer():
    # 8192 tokens, vocabulary 128256 split over tp 8, 12 B per logit (fp32 log-softmax output,
    # its incoming and outgoing fp32 gradients)
    spec = TINY.model_copy(update={"vocab_size": 128256})
    assert A.bytes_logits(spec, 8192, tp=8, bytes_per_logit=12) == 12 * 8192 * 16032
    assert UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT == 12
    # in the training breakdown: the last stage's tokens s·b/cp
    opts = A.ActivationOptions(loss_bytes_per_logit=UPCAST_CROSS_ENTROPY_BYTES_PER_LOGIT)
    m = M.memory_training_per_gpu(TINY, layout(dp=2, cp=2, micro_batch=3), seq_len=256,
                                  options=opts)
    assert m.logits == 12 * (256 / 2 * 3) * 1000
    default = M.memory_training_per_gpu(TINY, layout(dp=2, cp=2, micro_batch=3), seq_len=256)
    assert default.logits == 4 * (256 / 2 * 3) * 1000


def test_every_other_mm_selective_policy_by_hand():
    # matmuls in order q (256), k (64), v (64), o (256), w1 (512), w3 (512), w2 (256):
    # the 1st, 3rd, 5th, 7th outputs are kept (q, v, w1, w2), plus the layer input, the
    # attention output (256) and FlashAttention's fp32 log-sum-exp (8 heads); bf16, 10 tokens
    opts = A.ActivationOptions(selective_policy="every_other_mm")
    got = A.bytes_activation_per_layer(TINY, 10, 1, checkpointing="selective", options=opts)
    by_hand = 2 * 10 * (256 + (256 + 64) + 256 + (512 + 256)) + 4 * 8 * 10
    assert got.total == by_hand
    # under TP 2 the tp-split widths halve (q 128, kv 1 head × 32, F 256); input and w2
    # output stay whole without SP
    tp2 = A.bytes_activation_per_layer(TINY, 10, 1, tp=2, checkpointing="selective",
                                       options=opts)
    assert tp2.total == 2 * 10 * (256 + (128 + 32) + 128 + (256 + 256)) + 4 * 4 * 10
    # "none" and "full" are unchanged by the policy
    for mode in ("none", "full"):
        assert (A.bytes_activation_per_layer(TINY, 10, 1, checkpointing=mode, options=opts)
                == A.bytes_activation_per_layer(TINY, 10, 1, checkpointing=mode))


def test_unknown_selective_policy_is_refused():
    with pytest.raises(ValueError, match="selective_policy"):
        A.ActivationOptions(selective_policy="ops")


def test_zero3_gathers_in_the_compute_dtype_with_one_gradient_unit():
    m = M.memory_training_per_gpu(TINY, layout(dp=4, zero=3), seq_len=64, precision=FSDP2)
    unit = ST.params_per_gpu_stage(TINY).largest_unit
    # fp32 shards, bf16 all-gathered units in flight + the unit's fp32 gradient
    assert m.gather_buffer == (ZERO3_LAYERS_IN_FLIGHT * 2 + 4) * unit
    assert m.weights == 4 * ST.params_per_gpu_stage(TINY).total / 4


def test_zero3_under_pipelining_holds_the_stage_unsharded():
    m = M.memory_training_per_gpu(TINY, layout(dp=4, pp=2, zero=3), seq_len=64,
                                  micro_batches=4, precision=FSDP2)
    stage = ST.params_per_gpu_stage(TINY, pp=2, stage=int(m.pipeline_stage))
    assert m.gather_buffer == (2 + 4) * stage.total
    # ZeRO-1 under pipelining gathers nothing
    z1 = M.memory_training_per_gpu(TINY, layout(dp=4, pp=2, zero=1), seq_len=64,
                                   micro_batches=4, precision=FSDP2)
    assert z1.gather_buffer == 0


def test_plan_json_reports_allocated_reserved_and_peak():
    from tests.cost.test_iteration import colocated, scenario
    sc = scenario()
    ev = evaluate(sc, colocated())
    mem = to_plan(sc, colocated(), ev).model_dump(mode="json")["memory"]
    for fig in mem["groups"].values():
        assert fig["allocated_gib_per_gpu"] <= fig["reserved_gib_per_gpu"] < fig["peak_gib_per_gpu"]
        # an inference engine preallocates its KV cache: no allocator slack priced there
        if fig["stage"] == "generation":
            assert fig["allocated_gib_per_gpu"] == fig["reserved_gib_per_gpu"]
        assert fig["peak_gib_per_gpu"] == pytest.approx(
            fig["reserved_gib_per_gpu"] + fig["runtime_reserve_gib_per_gpu"])
    assert mem["runtime_reserve_gib_per_gpu"] == sc.cluster.gpu.runtime_reserve_gib
    assert {k: mem[k] for k in ("peak_gib_per_gpu", "allocated_gib_per_gpu")} == {
        k: mem["groups"]["g0"][k] for k in ("peak_gib_per_gpu", "allocated_gib_per_gpu")}
    # the binding group's peak task: reserved − allocated is its fragmentation
    peak = max(ev.memory.values(), key=lambda g: g["peak_bytes"])
    assert (mem["reserved_gib_per_gpu"] - mem["allocated_gib_per_gpu"]) * GIB == pytest.approx(
        peak["fragmentation_bytes"])

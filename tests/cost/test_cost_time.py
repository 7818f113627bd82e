"""planner.cost.time: each time term on small hand-checked cases (behaviour, not timings):
breakdowns sum to their totals, terms vanish when their parallelism is off, the 1F1B bubble is
(pp − 1)/M of the balanced stage time, TP volumes, element-wise traffic counts, the host floor,
the DP overlap. Generation: tests/cost/test_generation.py."""

from __future__ import annotations

import math

import pytest

from planner.cost import comm
from planner.cost import time as T
from planner.cost.activations import KORTHIKANTI_GPT_ACTIVATIONS, MODERN_ACTIVATIONS
from planner.cost.flops import (
    Head,
    flops_train_seq,
    params_with_head,
)
from planner.plan import Layout
from planner.specs.hardware import load_profile
from planner.specs.model import load_model, spec_from_hf_config

# A small Megatron-GPT layer: MHA, 4h two-projection FFN, 2 LayerNorms, learned positions.
H, A, LAYERS, V, S = 1024, 16, 8, 1000, 1024
GPT = spec_from_hf_config({"model_type": "gpt2", "n_embd": H, "n_head": A, "n_layer": LAYERS,
                           "vocab_size": V, "n_positions": S}, "gpt", "test")
MOE = load_model("qwen3-30b-a3b")
NO_HOST = T.Runtime(host_s_per_layer_pass=0.0)


def gpu(name: str = "h100-sxm", **update):
    """A shipped profile, with α = 0 so α–β times are bandwidth terms only."""
    base = load_profile(name)
    return base.model_copy(update={"intra_node_latency_us": 0.0, "inter_node_latency_us": 0.0,
                                   "collective_launch_us": 0.0, **update})


def lay(**kw) -> Layout:
    return Layout(group="g", **kw)


def parts_sum(t: T.Seconds) -> float:
    return math.fsum(t.as_dict().values())


BALANCED = ("compute", "memory", "host", "tp_comm", "cp_comm", "ep_comm", "pp_comm")


# --- breakdowns ----------------------------------------------------------------------------------


LAYOUTS = [lay(dp=8), lay(dp=2, tp=4, sp=True, micro_batch=2, checkpointing="full"),
           lay(dp=2, tp=2, pp=2, micro_batch=4, checkpointing="selective"),
           lay(dp=4, cp=2, zero=3), lay(dp=8, zero=2, offload="optimizer")]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_breakdowns_sum_to_total(layout):
    g = gpu()
    t = T.time_train(GPT, Head.POLICY, layout, g, 64, S, mini_batches=2)
    assert t.total == pytest.approx(parts_sum(t), rel=1e-12) and t.total > 0
    f = T.time_forward(GPT, Head.POLICY, layout, g, 64, S)
    assert f.total == pytest.approx(parts_sum(f), rel=1e-12) and f.total > 0


def test_moe_breakdown_sums_and_has_ep_traffic():
    t = T.time_train(MOE, Head.POLICY, lay(dp=8, ep=8), gpu(), 64, 2048)
    assert t.total == pytest.approx(parts_sum(t), rel=1e-12)
    assert t.ep_comm > 0


# --- terms that vanish ---------------------------------------------------------------------------


def test_terms_vanish_without_their_parallelism():
    t = T.time_train(GPT, Head.POLICY, lay(dp=8), gpu(), 64, S)
    assert t.tp_comm == t.cp_comm == t.ep_comm == t.pp_comm == 0.0
    assert t.pp_bubble == t.pp_imbalance == 0.0
    assert t.offload == 0.0
    one = T.time_train(GPT, Head.POLICY, lay(), gpu(), 64, S)
    assert one.dp_comm == 0.0  # a single replica reduces nothing
    dense_ep = T.time_train(GPT, Head.POLICY, lay(dp=8, ep=8), gpu(), 64, S)
    assert dense_ep.ep_comm == 0.0  # EP on a dense model moves nothing


def test_tp_1_means_no_tp_comm_and_tp_gt_1_some():
    assert T.time_forward(GPT, Head.POLICY, lay(dp=4), gpu(), 16, S).tp_comm == 0.0
    assert T.time_forward(GPT, Head.POLICY, lay(dp=1, tp=4), gpu(), 16, S).tp_comm > 0.0


# --- compute and the FLOP count ------------------------------------------------------------------


@pytest.mark.parametrize("ckpt", ["none", "selective", "full"])
def test_compute_is_flops_over_achievable_peak(ckpt):
    """With FlashAttention the compute term is flops.py's count / (g · peak · eff), plus the
    score recomputation inside FlashAttention's backward: 2.5 forwards of the core attention
    where the model-FLOP count has 2."""
    g, layout = gpu(), lay(dp=2, tp=2, pp=2, checkpointing=ckpt)
    t = T.time_train(GPT, Head.POLICY, layout, g, 64, S, runtime=NO_HOST)
    train = flops_train_seq(GPT, S, Head.POLICY, ckpt)
    flops = 64 * (train.total + 0.5 * train.forward.attn_scores)
    assert t.compute == pytest.approx(flops / (layout.gpus * T.compute_rate(g)), rel=1e-12)


def test_unfused_attention_computes_the_full_score_square():
    g, layout = gpu(), lay(dp=8)
    flash = T.time_forward(GPT, Head.POLICY, layout, g, 64, S, runtime=NO_HOST)
    unfused = T.time_forward(GPT, Head.POLICY, layout, g, 64, S,
                             runtime=T.Runtime(kernels=KORTHIKANTI_GPT_ACTIVATIONS,
                                               host_s_per_layer_pass=0.0))
    attn_causal = 64 * S * (S / 2) * 4 * H * LAYERS  # 2 matmuls × 2 FLOPs × a·hd = 4H per visit
    assert unfused.compute - flash.compute == pytest.approx(
        attn_causal / (8 * T.compute_rate(g)), rel=1e-9)


def test_compute_and_memory_scale_with_their_efficiencies():
    base = gpu()
    slow_math = base.model_copy(update={"efficiency": base.efficiency.model_copy(
        update={"compute": base.efficiency.compute / 2})})
    slow_hbm = base.model_copy(update={"efficiency": base.efficiency.model_copy(
        update={"hbm": base.efficiency.hbm / 2})})
    a = T.time_train(GPT, Head.POLICY, lay(dp=8), base, 64, S, runtime=NO_HOST)
    b = T.time_train(GPT, Head.POLICY, lay(dp=8), slow_math, 64, S, runtime=NO_HOST)
    c = T.time_train(GPT, Head.POLICY, lay(dp=8), slow_hbm, 64, S, runtime=NO_HOST)
    assert b.compute == pytest.approx(2 * a.compute) and b.memory == pytest.approx(a.memory)
    assert c.memory == pytest.approx(2 * a.memory) and c.compute == pytest.approx(a.compute)


# --- element-wise traffic ------------------------------------------------------------------------


def test_elementwise_bytes_of_a_gpt_layer_by_hand():
    """Megatron GPT layer, unfused attention, dropout on, per token (bytes):
    2 LayerNorms 2·(2+2)H + 2 residual adds 2·(3·2H + 1·H) = 22H; bias-GeLU (2+2)·4H = 16H;
    scores a·s·(4·2 + 2·2 + 1) = 13·a·s (QKᵀ write, softmax read+write, dropout read+write+mask,
    PV read)."""
    got = T.bytes_elementwise_fwd_per_token(GPT, S, options=KORTHIKANTI_GPT_ACTIVATIONS)
    assert got == 22 * H + 16 * H + 13 * A * S
    flash = T.bytes_elementwise_fwd_per_token(GPT, S, options=MODERN_ACTIVATIONS)
    assert flash == 2 * 4 * H + 2 * 6 * H + 16 * H  # no dropout masks, no scores
    assert T.bytes_elementwise_fwd_per_token(GPT, S, options=KORTHIKANTI_GPT_ACTIVATIONS,
                                             attention_only=True) == 13 * A * S


def test_sequence_parallelism_splits_the_replicated_traffic():
    t = 4
    no_sp = T.bytes_elementwise_fwd_per_token(GPT, S, tp=t)
    sp = T.bytes_elementwise_fwd_per_token(GPT, S, tp=t, sp=True)
    replicated = 2 * 4 * H + 2 * 6 * H
    assert no_sp - sp == pytest.approx(replicated * (1 - 1 / t))
    assert T.bytes_elementwise_fwd_per_token(GPT, S, tp=1, sp=True) == \
        T.bytes_elementwise_fwd_per_token(GPT, S, tp=1)


# --- tensor parallelism --------------------------------------------------------------------------


@pytest.mark.parametrize("ckpt,passes", [("none", 2), ("full", 3)])
def test_tp_comm_is_four_allreduces_per_layer_forward_and_backward(ckpt, passes):
    """Shoeybi et al. §3: 2 all-reduces of b·s·H activations per layer forward, 2 backward;
    full recompute repeats the forward's."""
    g, t, mb, n = gpu(), 4, 2, 16
    layout = lay(dp=2, tp=t, micro_batch=mb, checkpointing=ckpt)
    got = T.time_train(GPT, Head.POLICY, layout, g, n, S).tp_comm
    micro = n / (layout.dp * mb)
    per = comm.time_allreduce(mb * S * H * 2, t, comm.link_intra_node(g))
    assert got == pytest.approx(micro * LAYERS * passes * 2 * per, rel=1e-12)


# --- pipeline ------------------------------------------------------------------------------------


@pytest.mark.parametrize("pp,n", [(2, 16), (4, 16), (4, 64)])
def test_pp_bubble_is_pp_minus_1_over_m_of_the_balanced_time(pp, n):
    layout = lay(dp=1, pp=pp, micro_batch=1)
    for t in (T.time_train(GPT, Head.POLICY, layout, gpu(), n, S),
              T.time_forward(GPT, Head.POLICY, layout, gpu(), n, S)):
        balanced = sum(getattr(t, k) for k in BALANCED)
        assert t.pp_bubble == pytest.approx((pp - 1) / n * balanced, rel=1e-12)


def test_equal_stages_give_m_plus_p_minus_1_stage_times():
    """A reward model (scalar head on the last token) on evenly split layers: the stages differ
    only by the last one's final norm and scalar head, e; the pipeline lasts
    Σ t_s + (M − 1)·max t_s = (M + p − 1)·mean + (M − 1)·e·(p − 1)/p."""
    pp, n = 4, 12
    g = gpu()
    t = T.time_forward(GPT, Head.SCALAR_LAST, lay(pp=pp), g, n, S, runtime=NO_HOST)
    mean = sum(getattr(t, k) for k in BALANCED) / n
    e = S * (2 * 2 * H) / T.hbm_rate(g) + S * (2 * H / S) / T.compute_rate(g)
    assert t.pp_imbalance == pytest.approx((n - 1) * e * (pp - 1) / pp, rel=1e-9)
    assert t.total == pytest.approx((n + pp - 1) * mean + t.pp_imbalance, rel=1e-12)


def test_the_vocabulary_head_makes_the_last_stage_the_slowest():
    layout = lay(pp=4)
    policy = T.time_train(GPT, Head.POLICY, layout, gpu(), 16, S)
    assert policy.pp_imbalance > 0
    one_micro = T.time_train(GPT, Head.POLICY, layout, gpu(), 1, S)
    assert one_micro.pp_imbalance == 0.0  # with M = 1 nothing waits on the slowest stage


def test_pp_sends_cross_the_network_between_nodes():
    g = gpu()
    inside = T.time_train(GPT, Head.POLICY, lay(dp=4, pp=2), g, 64, S).pp_comm
    across = T.time_train(GPT, Head.POLICY, lay(dp=8, pp=2), g, 64, S).pp_comm
    assert inside > 0
    # same bytes per micro-batch; half the micro-batches per rank, over a 9× slower link
    assert across / inside == pytest.approx(0.5 * g.intra_node_gbps / g.inter_node_gbps)


# --- host floor ----------------------------------------------------------------------------------


def test_host_floor_binds_small_layers_only():
    slow_host = T.Runtime(host_s_per_layer_pass=1.0)  # 1 s per layer forward: always binds
    t = T.time_train(GPT, Head.SCALAR_LAST, lay(), gpu(), 2, S, runtime=slow_host)
    head = t.compute + t.memory + t.host - 2 * LAYERS * (1 + 2) * 1.0
    assert t.host > 0 and 0 <= head < 1e-3  # 2 micro-batches × L layers × (fwd + 2 bwd)
    fast_host = T.Runtime(host_s_per_layer_pass=1e-9)
    assert T.time_train(GPT, Head.POLICY, lay(), gpu(), 2, S, runtime=fast_host).host == 0.0


# --- data parallelism ----------------------------------------------------------------------------


def test_dp_allreduce_and_its_overlap():
    g, dp = gpu(), 8
    exposed = T.time_train(GPT, Head.POLICY, lay(dp=dp), g, 64, S,
                           runtime=T.Runtime(dp_comm_overlap=0.0)).dp_comm
    grads = params_with_head(GPT, Head.POLICY) * 2
    assert exposed == pytest.approx(comm.time_allreduce(grads, dp, comm.link_intra_node(g)))
    hidden = T.time_train(GPT, Head.POLICY, lay(dp=dp), g, 64, S,
                          runtime=T.Runtime(dp_comm_overlap=1.0)).dp_comm
    assert hidden == 0.0


def test_zero3_gathers_parameters_every_micro_batch():
    g = gpu()
    few = T.time_train(GPT, Head.POLICY, lay(dp=8, zero=3, micro_batch=8), g, 64, S).dp_comm
    many = T.time_train(GPT, Head.POLICY, lay(dp=8, zero=3, micro_batch=1), g, 64, S).dp_comm
    assert many > few > 0
    fwd = T.time_forward(GPT, Head.POLICY, lay(dp=8, zero=3), g, 64, S)
    assert fwd.dp_comm > 0
    assert T.time_forward(GPT, Head.POLICY, lay(dp=8), g, 64, S).dp_comm == 0.0


def test_fp8_matmuls_run_the_linear_layers_at_the_fp8_peak_and_attention_in_bf16():
    spec, layout = load_model("llama-3.1-8b"), Layout(group="g", dp=8, micro_batch=1)
    h100 = load_profile("h100-sxm")  # fp8_tflops = 2 × bf16_tflops
    assert h100.fp8_tflops == pytest.approx(2 * h100.bf16_tflops, rel=1e-3)

    def compute(gpu, fp8):
        return T.time_train(spec, Head.POLICY, layout, gpu, 8, 8192,
                            runtime=T.Runtime(host_s_per_layer_pass=0.0, fp8_matmuls=fp8)).compute

    bf16, fp8 = compute(h100, False), compute(h100, True)
    # the linear layers' time halves; core attention and the vocabulary head stay bf16
    assert bf16 / 2 < fp8 < bf16
    no_fp8 = h100.model_copy(update={"fp8_tflops": None})  # no FP8 tensor cores: bf16 rate
    assert compute(no_fp8, True) == pytest.approx(compute(no_fp8, False), rel=1e-12)

"""Training time mechanisms checked against the H100-class throughput rows (issue 16 item 3,
issue 22 item 3), each against a hand count: FlashAttention's 2.5× backward, the attention
kernel's own rate, FP8 rowwise at the bf16 rate, routed experts reduced over their
expert-data-parallel ranks, all-to-alls split between the scale-up link and the NIC with one
network latency per call, the hierarchical (DeepEP / HybridEP) dispatch, group-limited
(node-limited) routing, and the EP overlap."""

from __future__ import annotations

import itertools
import math

import pytest

from planner.cost import comm
from planner.cost import time as T
from planner.cost.constants import (
    ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD,
    LOSS_BWD_BYTES_PER_LOGIT,
    LOSS_FWD_BYTES_PER_LOGIT,
    NORM_IO_TENSORS,
)
from planner.cost.flops import (
    Head,
    flops_fwd_per_key_attn_scores,
    flops_fwd_per_token_attn_proj,
    flops_fwd_per_token_dense_ffn,
    flops_fwd_per_token_head,
    params_with_head,
    remote_domains_per_token,
)
from planner.cost.layout_comm import time_dispatch
from planner.errors import InputError
from planner.plan import Layout
from planner.specs.hardware import load_profile
from planner.specs.model import count_params, load_model, spec_from_hf_config

DENSE = load_model("llama-3.1-8b")
MOE = load_model("qwen3-30b-a3b")  # 128 experts, top-8, every layer MoE


def gpu(name: str = "h100-sxm"):
    """A shipped profile with α = 0: collective times are bandwidth terms only."""
    return load_profile(name).model_copy(update={
        "intra_node_latency_us": 0.0, "inter_node_latency_us": 0.0, "collective_launch_us": 0.0})


def rt(**kw) -> T.Runtime:
    return T.Runtime(host_s_per_layer_pass=0.0, **kw)


def _compute(layout: Layout, seq: int, runtime: T.Runtime, g=None) -> float:
    g = g or gpu()
    return float(T.time_train(DENSE, Head.POLICY, layout, g, layout.dp, seq,
                              runtime=runtime).compute)


def test_flash_attention_backward_and_attention_rate_by_hand():
    """One micro-batch of s tokens per rank, no recompute: compute = s·[3·(proj + ffn + head)
    + (1 + 2.5)·attn/rate_attn] / rate, attn = s/2 key visits × the per-key score FLOPs."""
    g, s = gpu(), 4096
    layout = Layout(group="g", dp=1, micro_batch=1)
    linear = (flops_fwd_per_token_attn_proj(DENSE) + flops_fwd_per_token_dense_ffn(DENSE)
              + flops_fwd_per_token_head(DENSE, Head.POLICY, s))
    attn = s / 2 * flops_fwd_per_key_attn_scores(DENSE)
    rate = T.compute_rate(g)
    for attention_rate in (1.0, 0.35 / 0.75):
        want = s * (3 * linear + 3.5 * attn / attention_rate) / rate
        got = _compute(layout, s, rt(attention_rate=attention_rate), g)
        assert got == pytest.approx(want, rel=1e-12)


def test_fp8_rowwise_runs_the_linear_layers_at_the_bf16_rate():
    layout = Layout(group="g", dp=8, micro_batch=1)
    bf16 = _compute(layout, 8192, rt())
    tensorwise = _compute(layout, 8192, rt(fp8_matmuls=True))
    rowwise = _compute(layout, 8192, rt(fp8_matmuls=True, fp8_recipe="rowwise"))
    assert rowwise == pytest.approx(bf16, rel=1e-12)
    assert tensorwise < rowwise


def test_routed_experts_reduce_over_their_expert_data_parallel_ranks_only():
    """dp = ep = 8 on one node: every rank holds its own experts (edp = 8·1/8 = 1), so only the
    non-expert parameters are all-reduced, over the 8 DP ranks on NVLink (ZeRO-1)."""
    g = gpu()
    layout = Layout(group="g", dp=8, ep=8, zero=1, micro_batch=1)
    t = T.time_train(MOE, Head.POLICY, layout, g, 8, 4096, runtime=rt())
    dense = params_with_head(MOE, Head.POLICY) - count_params(MOE).routed_experts
    bw = comm.link_intra_node(g).bandwidth
    want = 2 * 7 / 8 * dense * 2 / bw * (1 - T.DP_COMM_OVERLAP)
    assert float(t.dp_comm) == pytest.approx(want, rel=1e-12)
    # dp = 16 over two nodes, ep = 8: experts reduce over edp = 2 ranks, 8 apart (one per
    # node: a single NIC); the dense part over 16 ranks, 8 per node (8 NICs, capped by NVLink)
    layout = Layout(group="g", dp=16, ep=8, zero=1, micro_batch=1)
    t = T.time_train(MOE, Head.POLICY, layout, g, 16, 4096, runtime=rt())
    nic = comm.link_inter_node(g).bandwidth
    experts = count_params(MOE).routed_experts / 8
    want = (2 * 15 / 16 * dense * 2 / min(8 * nic, bw) + 2 * 1 / 2 * experts * 2 / nic) * (
        1 - T.DP_COMM_OVERLAP)
    assert float(t.dp_comm) == pytest.approx(want, rel=1e-12)


def test_alltoall_across_domains_splits_nvlink_and_nic():
    g, n = gpu(), 1e9
    nv, nic = comm.link_intra_node(g).bandwidth, comm.link_inter_node(g).bandwidth
    # 16 ranks over two 8-GPU nodes: 7/16 of the buffer to node peers, 8/16 over the NIC
    assert comm.time_alltoall_domains(n, 16, g) == pytest.approx(
        max(7 / 16 * n / nv, 8 / 16 * n / nic), rel=1e-12)
    # inside one node: the plain all-to-all on NVLink
    assert comm.time_alltoall_domains(n, 8, g) == pytest.approx(7 / 8 * n / nv, rel=1e-12)
    # hierarchical: the NIC carries the given bytes, NVLink every remote copy once
    assert comm.time_alltoall_domains(n, 16, g, cross_bytes=n / 8) == pytest.approx(
        max(15 / 16 * n / nv, n / 8 / nic), rel=1e-12)


def test_remote_domains_per_token_closed_form():
    # 4 experts over 2 domains (2 each), top-2: the other domain is missed only when both
    # picks are the own domain's pair, 1 of C(4, 2) = 6 choices
    assert remote_domains_per_token(4, 2, 2) == pytest.approx(5 / 6, rel=1e-12)
    assert remote_domains_per_token(128, 8, 1) == 0.0
    E, k, D = 256, 8, 8
    assert remote_domains_per_token(E, k, D) == pytest.approx(
        (D - 1) * (1 - math.comb(E - E // D, k) / math.comb(E, k)), rel=1e-12)
    assert remote_domains_per_token(E, k, D) < k * (D - 1) / D  # fewer than the plain copies


def test_hierarchical_dispatch_sends_a_token_once_per_remote_node():
    """EP 16 over two nodes, one dispatch of a micro-batch of s tokens: the NIC carries
    s·H·2 bytes × (expected remote nodes) instead of 8 copies per token × 8/16."""
    g, s = gpu(), 4096
    layout = Layout(group="g", dp=16, ep=16, zero=1, micro_batch=1)

    def ep(dispatch):
        return float(T.time_train(MOE, Head.POLICY, layout, g, 16, s,
                                  runtime=rt(ep_dispatch=dispatch)).ep_comm)

    routed = s * 8 * MOE.hidden_size * 2  # a rank's routed copies per dispatch
    nv, nic = comm.link_intra_node(g).bandwidth, comm.link_inter_node(g).bandwidth
    per_pass = 2 * MOE.num_hidden_layers  # dispatch + combine per layer, forward
    plain = max(7 / 16 * routed / nv, 8 / 16 * routed / nic)
    cross = s * MOE.hidden_size * 2 * remote_domains_per_token(128, 8, 2)
    hier = max(15 / 16 * routed / nv, cross / nic)
    assert ep("alltoall") == pytest.approx(2 * per_pass * plain, rel=1e-12)  # fwd + bwd
    assert ep("hierarchical") == pytest.approx(2 * per_pass * hier, rel=1e-12)


def test_ep_overlap_hides_the_alltoalls_under_the_layer_compute():
    """A MoE layer pays max(its compute + element-wise time, its all-to-alls)."""
    g, s = gpu(), 4096

    def run(layout, overlap):
        return T.time_train(MOE, Head.POLICY, layout, g, layout.dp, s,
                            runtime=rt(ep_comm_overlap=overlap))

    # one node: NVLink all-to-alls are shorter than the layer's work, so nothing is exposed
    one_node = Layout(group="g", dp=8, ep=8, zero=1, micro_batch=1)
    assert float(run(one_node, False).ep_comm) > 0
    assert float(run(one_node, True).ep_comm) == 0.0
    # two nodes, plain all-to-all over the NIC: longer than the layer's work; exposed is the
    # excess, every layer alike: ep − (compute + memory − the head's, on the last stage)
    two_nodes = Layout(group="g", dp=16, ep=16, zero=1, micro_batch=1)
    plain, hidden = run(two_nodes, False), run(two_nodes, True)
    H, V = MOE.hidden_size, MOE.vocab_size
    head = s * (3 * flops_fwd_per_token_head(MOE, Head.POLICY, s) / T.compute_rate(g)
                + (NORM_IO_TENSORS * 2 * H * (1 + ELEMENTWISE_BACKWARD_TRAFFIC_PER_FORWARD)
                   + (LOSS_FWD_BYTES_PER_LOGIT + LOSS_BWD_BYTES_PER_LOGIT) * V) / T.hbm_rate(g))
    layers_work = float(plain.compute) + float(plain.memory) - head
    assert float(hidden.ep_comm) == pytest.approx(float(plain.ep_comm) - layers_work, rel=1e-9)
    assert float(hidden.compute) == float(plain.compute)


def test_an_expert_alltoall_pays_one_network_latency_not_one_per_peer():
    """Every peer's transfer is posted at once: an empty dispatch over 32 ranks on four H100
    nodes lasts the launch and one network latency; inside a node one NVLink latency."""
    g = load_profile("h100-sxm")
    launch, net, nv = 4.3e-6, 15e-6, 1.4e-6
    for dispatch in ("alltoall", "hierarchical"):
        assert time_dispatch(MOE, 0.0, 32, 1, g, dispatch) == pytest.approx(launch + net)
        assert time_dispatch(MOE, 0.0, 8, 1, g, dispatch) == pytest.approx(launch + nv)


def test_a_dispatch_across_nodes_over_the_nic_is_slower_than_inside_a_node():
    """The same routed bytes per rank: EP 8 inside a node moves 7/8 of them over NVLink; EP 16
    over two nodes sends 8/16 through the rank's NIC (7/16 over NVLink at the same time), and
    the NIC is 9× slower than NVLink here, so the call lasts 8/16 · n / NIC."""
    g, n = load_profile("h100-sxm"), 1e9
    nv, nic = comm.link_intra_node(g).bandwidth, comm.link_inter_node(g).bandwidth
    inside = time_dispatch(MOE, n, 8, 1, g, "alltoall")
    across = time_dispatch(MOE, n, 16, 1, g, "alltoall")
    assert inside == pytest.approx(4.3e-6 + 1.4e-6 + 7 / 8 * n / nv)
    assert across == pytest.approx(4.3e-6 + 15e-6 + max(7 / 16 * n / nv, 8 / 16 * n / nic))
    assert across > 4 * inside
    # expert tensor parallelism 2 puts EP 8 two ranks apart: 16 GPUs, two nodes, the NIC
    assert time_dispatch(MOE, n, 8, 2, g, "alltoall") == pytest.approx(
        4.3e-6 + 15e-6 + max(3 / 8 * n / nv, 4 / 8 * n / nic))


def _remote_domains_brute_force(E: int, k: int, D: int, G: int, m: int) -> float:
    """Every choice of m groups, then of k experts among theirs, every own domain: the mean
    number of other domains holding one of the token's experts (experts and domains in index
    order)."""
    group, domain = E // G, E // D
    total, count = 0, 0
    for S in itertools.combinations(range(G), m):
        pool = [e for g in S for e in range(g * group, (g + 1) * group)]
        for picks in itertools.combinations(pool, k):
            touched = {e // domain for e in picks}
            for own in range(D):
                total += len(touched - {own})
                count += 1
    return total / count


@pytest.mark.parametrize("E,k,D,G,m", [(8, 2, 4, 4, 2),    # groups finer than domains
                                       (8, 3, 2, 4, 2),    # two groups per domain
                                       (12, 3, 3, 4, 2),   # group and domain bounds misaligned
                                       (16, 4, 8, 2, 1)])  # a domain is a quarter of a group
def test_group_limited_routing_against_brute_force(E, k, D, G, m):
    want = _remote_domains_brute_force(E, k, D, G, m)
    assert remote_domains_per_token(E, k, D, G, m) == pytest.approx(want, rel=1e-12)
    assert remote_domains_per_token(E, k, D, G, G) == pytest.approx(
        remote_domains_per_token(E, k, D), rel=1e-12)  # every group allowed: no limit


def test_deepseek_v3_node_limited_routing_crosses_fewer_nodes_under_deepep():
    """DeepSeek-V3 draws a token's 8 experts from its 4 best of 8 groups (n_group, topk_group):
    with EP 64 over eight 8-GPU nodes each node holds one group, so a token reaches about 3.2
    other nodes instead of 4.6; the hierarchical dispatch sends that many copies over the NIC.
    The plain all-to-all sends one copy per remote expert either way."""
    spec = load_model("deepseek-v3")
    assert (spec.moe.expert_groups, spec.moe.groups_per_token) == (8, 4)
    ungrouped = spec.model_copy(update={"moe": spec.moe.model_copy(
        update={"expert_groups": 1, "groups_per_token": 1})})
    g, s = gpu(), 4096
    routed = s * 8 * spec.hidden_size * 2
    nv, nic = comm.link_intra_node(g).bandwidth, comm.link_inter_node(g).bandwidth
    limited = remote_domains_per_token(256, 8, 8, 8, 4)
    assert limited == pytest.approx(3.175, abs=1e-3)
    assert remote_domains_per_token(256, 8, 8) == pytest.approx(4.633, abs=1e-3)
    for model, remote in ((spec, limited), (ungrouped, remote_domains_per_token(256, 8, 8))):
        want = max(63 / 64 * routed / nv, s * spec.hidden_size * 2 * remote / nic)
        assert time_dispatch(model, routed, 64, 1, g, "hierarchical") == pytest.approx(want)
    assert time_dispatch(spec, routed, 64, 1, g, "alltoall") == time_dispatch(
        ungrouped, routed, 64, 1, g, "alltoall")


BASE_MOE = {"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
            "n_routed_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 32,
            "topk_method": "noaux_tc"}


def test_routing_groups_are_read_from_the_config_and_checked():
    def moe(**kw):
        return spec_from_hf_config({**BASE_MOE, **kw}, "m", "m.json").moe

    assert (moe().expert_groups, moe().groups_per_token) == (1, 1)
    assert (moe(n_group=4, topk_group=2).expert_groups,
            moe(n_group=4, topk_group=2).groups_per_token) == (4, 2)
    assert moe(n_group=4, topk_group=4).expert_groups == 1  # every group allowed: no limit
    assert moe(n_group=4, topk_group=2, topk_method="greedy").expert_groups == 1
    for bad, field in (({"n_group": 3, "topk_group": 1}, "n_group"),
                       ({"n_group": 4}, "topk_group"),
                       ({"n_group": 4, "topk_group": 5}, "topk_group"),
                       ({"n_group": 8, "topk_group": 1}, "topk_group")):  # 2 experts < top-4
        with pytest.raises(InputError, match=f"field '{field}'"):
            moe(**bad)

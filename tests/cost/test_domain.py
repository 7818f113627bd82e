"""The scale-up domain is the link: a group inside one NVLink domain talks over NVLink even
across OS nodes (GB200 NVL72: 72 GPUs, 4 per tray), a group across domains over the network
(8-GPU H100 nodes) — for collectives, expert all-to-alls, the rollouts' decode, resharding and
the weight sync alike; the Grace host's NVLink-C2C and LPDDR5X price a GB200's offload.
Hand-computed α–β figures from the profiles' numbers."""

from __future__ import annotations

import pytest

from planner.cost import comm
from planner.cost import generation as G
from planner.cost import offload as O
from planner.cost import time as T
from planner.cost.constants import Engine
from planner.cost.flops import Head
from planner.cost.iteration import evaluate
from planner.cost.layout_comm import dp_groups, time_dispatch
from planner.cost.refit import REFIT_RATES
from planner.plan import Layout, PlanInput
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario

GB = 1e9
SCENARIO = {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b", "models.reference": "actor",
            "workload.prompts_per_step": 64, "workload.samples_per_prompt": 8,
            "workload.prompt_len": 512, "workload.response_len": 1024,
            "workload.max_response_len": 2048, "workload.mini_batches": 2}


def cluster_scenario(gpu: str, nodes: int, per_node: int):
    return load_scenario(None, {**SCENARIO, "cluster.gpu": gpu, "cluster.nodes": nodes,
                                "cluster.gpus_per_node": per_node})


def ring_allreduce(nbytes: float, n: int, bandwidth: float, alpha: float, launch: float):
    return launch + 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth


def test_a_collective_across_four_nvl72_trays_runs_on_nvlink():
    sc = cluster_scenario("gb200", 4, 4)  # 16 GPUs = 4 trays of one rack
    gpu = sc.cluster.gpu
    eff = gpu.efficiency.intra_node
    expected = ring_allreduce(GB, 16, 900e9 * eff, 1.4e-6, 4.3e-6)
    assert comm.time_allreduce(GB, 16, comm.link_for(gpu, 16)) == pytest.approx(expected)


def test_the_same_collective_across_two_h100_nodes_runs_on_the_network():
    sc = cluster_scenario("h100-sxm", 2, 8)
    gpu = sc.cluster.gpu
    nic = 50e9 * gpu.efficiency.inter_node
    # 8 ranks per node drive 8 NICs (400 GB/s, under NVLink's 450 × 0.8), network latency
    expected = ring_allreduce(GB, 16, min(8 * nic, 450e9 * gpu.efficiency.intra_node),
                              15e-6, 4.3e-6)
    assert comm.time_allreduce(GB, 16, comm.link_for(gpu, 16)) == pytest.approx(expected)


def test_a_cluster_using_part_of_each_node_has_the_smaller_domain():
    """4 of an H100 node's 8 GPUs per node: an 8-rank group spans two nodes, so the network;
    GB200 with 2 GPUs per tray keeps 18 trays per rack: 36 GPUs per NVLink domain."""
    h100 = cluster_scenario("h100-sxm", 2, 4).cluster.gpu
    assert h100.scale_up_gpus == 4
    assert comm.link_for(h100, 8).latency == pytest.approx(15e-6)
    gb200 = cluster_scenario("gb200", 8, 2).cluster.gpu
    assert gb200.scale_up_gpus == 36
    assert comm.link_for(gb200, 16) == comm.link_intra_node(gb200)
    whole = cluster_scenario("h100-sxm", 2, 8).cluster.gpu
    assert whole == load_profile("h100-sxm")  # a full node keeps the shipped profile


def _disaggregated(gpus: int) -> PlanInput:
    half = gpus // 2
    return PlanInput.model_validate({
        "groups": [{"name": "gen", "gpus": half}, {"name": "train", "gpus": half}],
        "layouts": {"actor": {"generation": {"group": "gen", "dp": half},
                              "training": {"group": "train", "dp": half, "zero": 3,
                                           "checkpointing": "full", "micro_batch": 2}},
                    "reference": {"assessment": {"group": "train", "dp": half, "zero": 3}}},
        "inter_model": {"placement": "disaggregated"}})


QWEN_1_5B_TENSORS = 28 * (4 + 3 + 2 + 3) + 2
"""qwen2.5-1.5b's checkpoint tensors: per layer q, k, v, o, the q/k/v biases, two norms, gate,
up and down; the tied embedding and the final norm."""


def _refit_per_tensor(mechanism: str) -> float:
    """The per-tensor terms of a refit of qwen2.5-1.5b from a TP1·PP1 layout: the engine's
    load of every tensor, and under the checkpoint engine its per-tensor generator."""
    engine = REFIT_RATES.engine_tensor_s if mechanism == "checkpoint_engine" else 0.0
    return QWEN_1_5B_TENSORS * (REFIT_RATES.tensor_s + engine)


def test_a_weight_sync_across_nvl72_trays_runs_on_nvlink():
    """8 + 8 GB200s of one rack: the checkpoint engine's one rank sends the bf16 weights over
    NVLink; each rollout GPU takes them in over NVLink too."""
    sc = cluster_scenario("gb200", 4, 4)
    ev = evaluate(sc, _disaggregated(16))
    weights = sc.actor.params_total * 2  # bf16
    nvlink = 900e9 * sc.cluster.gpu.efficiency.intra_node * REFIT_RATES.link_share
    assert ev.refit.mechanism == "checkpoint_engine"
    assert ev.sync_s == ev.refit.seconds == pytest.approx(
        weights / nvlink + _refit_per_tensor("checkpoint_engine"))


def test_the_same_weight_sync_across_two_h100_nodes_runs_on_the_network():
    """8 + 8 H100s on two nodes: the one rank's NIC carries the weights (the rollout node takes
    them over its 8 NICs, faster)."""
    sc = cluster_scenario("h100-sxm", 2, 8)
    ev = evaluate(sc, _disaggregated(16))
    nic = 50e9 * sc.cluster.gpu.efficiency.inter_node * REFIT_RATES.link_share
    assert ev.sync_s == pytest.approx(sc.actor.params_total * 2 / nic
                                      + _refit_per_tensor("checkpoint_engine"))


def test_resharding_across_nvl72_trays_gathers_over_nvlink():
    """Co-located on 16 GB200s: each GPU takes the whole bf16 tensors over NVLink, and the
    rack holds every training shard, so no tray's NIC carries any."""
    sc = cluster_scenario("gb200", 4, 4)
    plan = PlanInput.model_validate({        "groups": [{"name": "g0", "gpus": 16}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 16},
                              "training": {"group": "g0", "dp": 16, "zero": 3,
                                           "checkpointing": "full", "micro_batch": 2}},
                    "reference": {"assessment": {"group": "g0", "dp": 16, "zero": 3}}},
        "inter_model": {"placement": "colocated"}})
    ev = evaluate(sc, plan)
    weights = sc.actor.params_total * 2
    nvlink = 900e9 * sc.cluster.gpu.efficiency.intra_node * REFIT_RATES.link_share
    assert ev.refit.mechanism == "colocated" and ev.refit.send_s == 0
    assert ev.sync_s == pytest.approx(weights / nvlink + _refit_per_tensor("colocated"))


# --- GB200 NVL72 as a rack -------------------------------------------------------------------

RACK = cluster_scenario("gb200", 18, 4).cluster.gpu  # one NVL72: 18 trays of 4
TRAYS = load_profile("gb200").model_copy(update={"scale_up_domain_gpus": 4})  # no rack fabric


def test_the_rack_keeps_a_32_gpu_tensor_parallel_group_on_nvlink_in_training():
    """TP 32 over 8 trays of one rack: each layer's four all-reduces (forward and backward) run
    on NVLink at its latency; the same group over four 8-GPU H100 nodes goes over the NICs."""
    spec, s = load_model("llama-3.1-70b"), 4096
    layout = Layout(group="g", dp=1, tp=32, micro_batch=1)
    nvlink = comm.link_intra_node(RACK)
    assert comm.link_for(RACK, 32) == nvlink
    t = T.time_train(spec, Head.POLICY, layout, RACK, 1, s)
    act = s * spec.hidden_size * 2
    want = 2 * 2 * spec.num_hidden_layers * ring_allreduce(act, 32, 900e9 * 0.8, 1.4e-6,
                                                            4.3e-6)
    assert float(t.tp_comm) == pytest.approx(want, rel=1e-12)
    assert comm.link_for(load_profile("h100-sxm"), 32).latency == pytest.approx(15e-6)
    assert float(T.time_train(spec, Head.POLICY, layout, TRAYS, 1, s).tp_comm) > 3 * want


def test_the_rollouts_tensor_parallel_decode_runs_on_the_rack_fabric():
    """A decode step of a TP-32 replica: its all-reduces cost less inside the rack than the same
    trays joined by their NICs (link choice through comm.link_for, as training's)."""
    spec, layout = load_model("llama-3.1-70b"), Layout(group="g", tp=32)
    engine = Engine("none", step_overhead_s=0.0, per_seq_s=0.0)
    rack, trays = (G.decode_step(spec, layout, g, engine) for g in (RACK, TRAYS))
    assert rack.comm < trays.comm and rack.comm_per_seq < trays.comm_per_seq


def test_expert_alltoalls_stay_on_nvlink_inside_the_rack_and_cross_nics_between_racks():
    """EP 64 inside one rack: one NVLink all-to-all (launch, one latency, 63/64 of the bytes).
    EP 144 over two racks: 72 ranks per rack, half the bytes leave through each rank's NIC."""
    spec, n = load_model("qwen3-235b-a22b"), 1e9
    nv, nic = 900e9 * 0.8, 50e9 * 0.8
    assert time_dispatch(spec, n, 64, 1, RACK, "alltoall") == pytest.approx(
        4.3e-6 + 1.4e-6 + 63 / 64 * n / nv)
    two_racks = cluster_scenario("gb200", 36, 4).cluster.gpu
    assert two_racks.scale_up_gpus == 72
    # 128 experts do not split over 144 ranks; the all-to-all itself does not care
    assert time_dispatch(spec, n, 144, 1, two_racks, "alltoall") == pytest.approx(
        4.3e-6 + 15e-6 + max(71 / 144 * n / nv, 72 / 144 * n / nic))


def test_the_grace_c2c_link_and_lpddr5x_price_offload():
    """A GB200 streams to its Grace host over NVLink-C2C (225 GB/s per GPU per direction when
    both GPUs of a superchip stream, × 0.8) or its share of the tray's 2 × 512 GB/s LPDDR5X
    (× 0.6, 4 GPUs), whichever is lower: 153.6 GB/s, 3.3× an H100's PCIe/DDR5 rate (46.08 GB/s:
    the DGX's 614.4 GB/s × 0.6 over 8 GPUs binds under its 51.2 GB/s PCIe). The optimizer's
    gradient and weight copies cross the link alone: 180 GB/s."""
    gb200, h100 = load_profile("gb200"), load_profile("h100-sxm")
    assert O.host_stream_rate(gb200, 4) == pytest.approx(min(225e9 * 0.8, 1024e9 * 0.6 / 4))
    assert O.host_stream_rate(gb200, 4) == pytest.approx(153.6e9)
    assert O.host_stream_rate(h100, 8) == pytest.approx(46.08e9)
    params = 1e9
    off = O.time_optimizer_offload(params, gb200, 4, grad_bytes=2, backward_overlap=0.5)
    assert off.gradients_down == pytest.approx(params * 2 / 180e9)
    # CPU Adam on the tray: 4 GPUs' 36 B per parameter through LPDDR5X, or 128 cores
    assert off.cpu_step == pytest.approx(max(4 * params * 36 / (1024e9 * 0.6),
                                             4 * params / (128 * 2.5e8)))
    # parameters streamed for every micro-batch's forward and backward, at the stream rate
    spec = load_model("qwen2.5-7b")
    layout = Layout(group="g", dp=4, zero=3, micro_batch=1, offload="params")
    t = T.time_train(spec, Head.POLICY, layout, gb200, 8, 1024)
    held = dp_groups(spec, Head.POLICY, layout, gb200)[0].params / 4  # the ZeRO-3 shard
    assert float(t.offload) == pytest.approx(2 * 2 * held * 2 / 153.6e9, rel=1e-12)

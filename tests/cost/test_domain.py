"""The scale-up domain is the link: a group inside one NVLink domain talks over NVLink even
across OS nodes (GB200 NVL72: 72 GPUs, 4 per tray), a group across domains over the network
(8-GPU H100 nodes) — for collectives, resharding and the weight sync alike. Hand-computed
α–β figures from the profiles' numbers."""

from __future__ import annotations

import pytest

from planner.cost import comm
from planner.cost.constants import WEIGHT_SYNC_BYTES_PER_S
from planner.cost.iteration import evaluate
from planner.plan import PlanInput
from planner.specs.hardware import load_profile
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


def test_a_weight_sync_across_nvl72_trays_runs_on_nvlink():
    sc = cluster_scenario("gb200", 4, 4)
    ev = evaluate(sc, _disaggregated(16))
    weights = sc.actor.params_total * 2  # bf16
    # the measured sync (8.25 GB/s over a 50 GB/s NIC at the default efficiency 0.8) keeps its
    # share of the link: 900 GB/s NVLink × 0.8 × 8.25 / 40
    nvlink = 900e9 * sc.cluster.gpu.efficiency.intra_node * WEIGHT_SYNC_BYTES_PER_S / 40e9
    assert ev.sync_s == pytest.approx(weights / nvlink)


def test_the_same_weight_sync_across_two_h100_nodes_is_the_measured_network_sync():
    sc = cluster_scenario("h100-sxm", 2, 8)
    ev = evaluate(sc, _disaggregated(16))
    assert ev.sync_s == pytest.approx(sc.actor.params_total * 2 / WEIGHT_SYNC_BYTES_PER_S)


def test_resharding_across_nvl72_trays_gathers_over_nvlink():
    """Co-located on 16 GB200s: generation dp 16 gathers the full bf16 weights from the 16
    training shards — an all-gather over NVLink, not the trays' NICs."""
    sc = cluster_scenario("gb200", 4, 4)
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 16}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 16},
                              "training": {"group": "g0", "dp": 16, "zero": 3,
                                           "checkpointing": "full", "micro_batch": 2}},
                    "reference": {"assessment": {"group": "g0", "dp": 16, "zero": 3}}},
        "inter_model": {"placement": "colocated"}})
    ev = evaluate(sc, plan)
    weights = sc.actor.params_total * 2
    bandwidth = 900e9 * sc.cluster.gpu.efficiency.intra_node
    assert ev.sync_s == pytest.approx(4.3e-6 + 15 * 1.4e-6 + 15 / 16 * weights / bandwidth)

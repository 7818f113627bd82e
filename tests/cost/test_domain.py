"""The scale-up domain is the link: a group inside one NVLink domain talks over NVLink even
across OS nodes (GB200 NVL72: 72 GPUs, 4 per tray), a group across domains over the network
(8-GPU H100 nodes) — for collectives, resharding and the weight sync alike. Hand-computed
α–β figures from the profiles' numbers."""

from __future__ import annotations

import pytest

from planner.cost import comm
from planner.cost.iteration import evaluate
from planner.cost.refit import REFIT_RATES
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

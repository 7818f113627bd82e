"""planner.cost.comm: α–β collectives on hand-checked cases, and which link a group runs on
(scale-up inside a domain; r NICs in parallel for a ring with r ranks per domain)."""

from __future__ import annotations

import math

import pytest

from planner.cost import comm
from planner.errors import InputError
from planner.specs.hardware import load_profile

LINK = comm.Link(bandwidth=100e9, latency=0.0)
SLOW_START = comm.Link(bandwidth=100e9, latency=1e-5)
MB = 1e6


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_ring_volumes(n):
    N = 800 * MB
    assert close(comm.time_allreduce(N, n, LINK), 2 * (n - 1) / n * N / 100e9)
    assert close(comm.time_allgather(N, n, LINK), (n - 1) / n * N / 100e9)
    assert close(comm.time_reducescatter(N, n, LINK), comm.time_allgather(N, n, LINK))
    assert close(comm.time_alltoall(N, n, LINK), (n - 1) / n * N / 100e9)
    # all-reduce = reduce-scatter + all-gather
    assert close(comm.time_allreduce(N, n, LINK),
                 comm.time_reducescatter(N, n, LINK) + comm.time_allgather(N, n, LINK))


@pytest.mark.parametrize("n", [2, 8])
def test_latency_steps(n):
    assert close(comm.time_allreduce(0, n, SLOW_START), 2 * (n - 1) * 1e-5)
    assert close(comm.time_allgather(0, n, SLOW_START), (n - 1) * 1e-5)
    assert close(comm.time_p2p(0, SLOW_START), 1e-5)


def test_every_call_pays_the_launch_once():
    launched = comm.Link(bandwidth=100e9, latency=1e-5, launch=4e-6)
    assert close(comm.time_allreduce(0, 8, launched), 4e-6 + 14 * 1e-5)
    assert close(comm.time_allgather(0, 8, launched), 4e-6 + 7 * 1e-5)
    assert close(comm.time_p2p(0, launched), 4e-6 + 1e-5)


def test_small_allreduces_match_the_measured_nccl_latencies():
    # rollout.md §2 row 15: NCCL all-reduce of 10k fp16 elements in CUDA graphs, H100 DGX
    gpu = load_profile("h100-sxm")
    for ranks, measured in ((2, 7e-6), (8, 23e-6)):
        t = comm.time_allreduce(20e3, ranks, comm.link_for(gpu, ranks))
        assert t == pytest.approx(measured, rel=0.1)


def test_one_rank_moves_nothing():
    for f in (comm.time_allreduce, comm.time_allgather, comm.time_reducescatter,
              comm.time_alltoall):
        assert f(1e9, 1, SLOW_START) == 0.0


def test_inside_a_node_uses_the_scale_up_link():
    gpu = load_profile("h100-sxm")
    intra = comm.link_intra_node(gpu)
    assert comm.link_for(gpu, 8) == intra
    assert comm.link_for(gpu, 4, stride=2) == intra  # 8 consecutive GPUs
    assert comm.link_p2p(gpu, 2, stride=4) == intra
    assert intra.bandwidth == pytest.approx(450e9 * gpu.efficiency.intra_node)


def test_a_ring_across_nodes_drives_one_nic_per_rank_in_the_node():
    gpu = load_profile("h100-sxm")  # 8 GPUs per node, 450 GB/s NVLink, 50 GB/s NIC per GPU
    nic = comm.link_inter_node(gpu)
    # TP = 8 inside nodes, DP across 4 nodes: one rank per node -> one NIC
    assert comm.link_for(gpu, 4, stride=8) == nic
    # 16 ranks over two nodes, 8 per node: 8 NICs = 400 GB/s (below NVLink's 450)
    assert comm.link_for(gpu, 16).bandwidth == pytest.approx(8 * nic.bandwidth)
    # stride 2 (TP = 2): 4 ranks per node
    assert comm.link_for(gpu, 16, stride=2).bandwidth == pytest.approx(4 * nic.bandwidth)
    assert comm.link_for(gpu, 16).latency == nic.latency
    # point-to-point traffic does not aggregate
    assert comm.link_p2p(gpu, 16) == nic


def test_aggregate_bandwidth_is_capped_by_the_scale_up_link():
    gpu = load_profile("h100-sxm").model_copy(update={"inter_node_gbps": 100.0})
    assert comm.link_for(gpu, 16).bandwidth == pytest.approx(
        comm.link_intra_node(gpu).bandwidth)


def test_ranks_per_domain():
    gpu = load_profile("h100-sxm")
    assert comm.ranks_per_domain(gpu, 4) == 4
    assert comm.ranks_per_domain(gpu, 64) == 8
    assert comm.ranks_per_domain(gpu, 64, stride=4) == 2
    assert comm.ranks_per_domain(gpu, 8, stride=16) == 1


def test_nvl72_domain_spans_nodes():
    gpu = load_profile("gb200")  # 4 GPUs per node, 72 per NVLink domain
    assert comm.link_for(gpu, 64) == comm.link_intra_node(gpu)
    assert comm.link_for(gpu, 128) != comm.link_intra_node(gpu)


def test_crossing_nodes_without_a_network_figure_is_an_error():
    gpu = load_profile("l40s")  # no inter_node_gbps in the profile (no source)
    with pytest.raises(InputError, match="inter_node_gbps"):
        comm.link_for(gpu, 16)

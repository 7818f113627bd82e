"""Communication time by the α–β model: t = steps·α + volume / β on the right link.

A collective among n ranks runs over the scale-up link (NVLink, xGMI) when all its ranks sit
in one scale-up domain, else over the scale-out network, whose per-GPU bandwidth is the
bottleneck of a ring that crosses nodes. Bandwidths are the profile's peak per GPU per
direction × its achievable-efficiency factor. Ring algorithms (NCCL's default for large
messages): all-reduce moves 2(n−1)/n of the buffer per rank, all-gather and reduce-scatter
(n−1)/n of the full buffer, all-to-all (n−1)/n; each takes n−1 (all-reduce 2(n−1)) steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.hardware import HardwareProfile


@dataclass(frozen=True)
class Link:
    """An effective link: bytes per second per GPU per direction, and seconds per step."""

    bandwidth: float
    latency: float


def link_intra_node(gpu: HardwareProfile) -> Link:
    if gpu.intra_node_gbps is None:
        raise ValueError(f"profile {gpu.name} has no intra_node_gbps")
    return Link(gpu.intra_node_gbps * 1e9 * gpu.efficiency.intra_node,
                gpu.intra_node_latency_us * 1e-6)


def link_inter_node(gpu: HardwareProfile) -> Link:
    if gpu.inter_node_gbps is None:
        raise ValueError(f"profile {gpu.name} has no inter_node_gbps")
    return Link(gpu.inter_node_gbps * 1e9 * gpu.efficiency.inter_node,
                gpu.inter_node_latency_us * 1e-6)


def link_host(gpu: HardwareProfile) -> Link:
    """GPU ↔ CPU memory (PCIe), for offload traffic."""
    if gpu.host_link_gbps is None:
        raise ValueError(f"profile {gpu.name} has no host_link_gbps")
    return Link(gpu.host_link_gbps * 1e9 * gpu.efficiency.host_link, 0.0)


def link_for(gpu: HardwareProfile, ranks: int, stride: int = 1) -> Link:
    """The link a collective of `ranks` ranks, `stride` apart in rank order, runs on.

    Rank order is the framework's (TP innermost, then CP, DP, PP): a group spans
    ranks·stride consecutive GPUs and stays on the scale-up link if those fit one domain.
    """
    if ranks * stride <= gpu.scale_up_gpus:
        return link_intra_node(gpu)
    return link_inter_node(gpu)


def time_allreduce(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce of an `nbytes` buffer: 2(n−1) steps, 2(n−1)/n · nbytes per rank."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * link.latency + 2 * (ranks - 1) / ranks * nbytes / link.bandwidth


def time_allgather(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-gather producing an `nbytes` buffer on every rank (each holds nbytes/n)."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * link.latency + (ranks - 1) / ranks * nbytes / link.bandwidth


def time_reducescatter(nbytes: float, ranks: int, link: Link) -> float:
    """Ring reduce-scatter of an `nbytes` buffer: the mirror of all-gather."""
    return time_allgather(nbytes, ranks, link)


def time_alltoall(nbytes: float, ranks: int, link: Link) -> float:
    """All-to-all where each rank holds `nbytes` and keeps 1/n of it."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * link.latency + (ranks - 1) / ranks * nbytes / link.bandwidth


def time_p2p(nbytes: float, link: Link) -> float:
    """One point-to-point send (pipeline stage boundary, CP ring step)."""
    return link.latency + nbytes / link.bandwidth

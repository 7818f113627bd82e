"""Communication time by the α–β model: t = steps·α + volume / β on the right link.

A collective among n ranks runs over the scale-up link (NVLink, xGMI) when all its ranks sit
in one scale-up domain, else over the scale-out network. Bandwidths are the profile's peak per
GPU per direction × its achievable-efficiency factor. Ring algorithms (NCCL's default for large
messages): all-reduce moves 2(n−1)/n of the buffer per rank, all-gather and reduce-scatter
(n−1)/n of the full buffer, all-to-all (n−1)/n; each takes n−1 (all-reduce 2(n−1)) steps.

Every collective and send also pays a fixed launch latency (the profile's
`collective_launch_us`), whatever its size and rank count: at decode sizes (a few rows of
activations) that and the per-step latency are all there is (rollout.md §2 rows 15–16: 7 µs
for a TP-2 and 23 µs for a TP-8 all-reduce of 20 KB on an H100 DGX).

Ring collectives that cross domains use every NIC their ranks own (`link_for`). NCCL runs a
collective as several rings (channels) and routes each ring's inter-node hop through a
different NIC, so a group with r ranks in each domain moves its volume over r NICs at once: each
domain sends the per-rank volume of the collective across its boundary, split over r links. The
hierarchical form gives the same bandwidth — reduce-scatter inside the domain, the ring over
domains on r NICs in parallel with 1/r of the data each, all-gather inside (the hierarchical
all-reduce of Jia et al. 2018, arXiv 1807.11205). The group's effective bandwidth is therefore
min(scale-up, r × NIC); r = 1 (one rank per node, e.g. DP across nodes under TP = 8) leaves the
single NIC. Before this, a 16-rank TP group across two 8-GPU nodes was priced on one NIC and
came out 3–4× slower than vTrain's measurements (bench/calibration.py). Point-to-point traffic
(pipeline stages, the CP ring, all-to-all) leaves each rank through its own NIC (`link_p2p`).

Inference engines run the collectives of a decode step otherwise (`time_allreduce_decode`,
`time_alltoall_decode`): a few rows per call, so latency sets their time in a node; across
nodes NCCL moves such buffers at a fraction of one NIC (`DECODE_ALLREDUCE_NIC_SHARE`), and a
batch's rows add to the latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import InputError
from planner.specs.hardware import HardwareProfile


@dataclass(frozen=True)
class Link:
    """An effective link: bytes per second per GPU per direction, and seconds per step."""

    bandwidth: float
    latency: float
    launch: float = 0.0  # per call


LOCAL = Link(math.inf, 0.0, 0.0)
"""A group of one rank: nothing crosses a link (a profile without link figures prices 1 GPU)."""


def link_intra_node(gpu: HardwareProfile, ranks: int | None = None) -> Link:
    """The scale-up link of a group of `ranks` GPUs in one domain (None: the whole domain). On a
    full mesh (`intra_node_peer_gbps`: xGMI, no switch) a GPU reaches its n − 1 peers over n − 1
    direct links, so a small group cannot use the whole fabric: a TP-2 pair of MI300Xs shares
    one 64 GB/s link, not the 448 GB/s of all seven."""
    if gpu.intra_node_gbps is None:
        raise InputError(f"profile {gpu.name} has no intra_node_gbps; set it in a copy of the "
                         "profile and pass its path with --gpu")
    gbps = gpu.intra_node_gbps
    if gpu.intra_node_peer_gbps is not None:
        peers = (ranks or gpu.scale_up_gpus) - 1
        gbps = min(gbps, max(1, peers) * gpu.intra_node_peer_gbps)
    return Link(gbps * 1e9 * gpu.efficiency.intra_node,
                gpu.intra_node_latency_us * 1e-6, gpu.collective_launch_us * 1e-6)


def link_inter_node(gpu: HardwareProfile) -> Link:
    if gpu.inter_node_gbps is None:
        raise InputError(f"profile {gpu.name} has no inter_node_gbps; set it in a copy of the "
                         "profile and pass its path with --gpu")
    return Link(gpu.inter_node_gbps * 1e9 * gpu.efficiency.inter_node,
                gpu.inter_node_latency_us * 1e-6, gpu.collective_launch_us * 1e-6)


def link_host(gpu: HardwareProfile) -> Link:
    """GPU ↔ CPU memory (PCIe), for offload traffic."""
    if gpu.host_link_gbps is None:
        raise InputError(f"profile {gpu.name} has no host_link_gbps; set it in a copy of the "
                         "profile and pass its path with --gpu")
    return Link(gpu.host_link_gbps * 1e9 * gpu.efficiency.host_link, 0.0)


def ranks_per_domain(gpu: HardwareProfile, ranks: int, stride: int = 1) -> int:
    """Ranks of a group (`ranks` ranks, `stride` apart in rank order) inside one scale-up
    domain: all of them if the group fits one domain, else domain size / stride (at least 1)."""
    return max(1, min(ranks, gpu.scale_up_gpus // max(1, stride)))


def link_for(gpu: HardwareProfile, ranks: int, stride: int = 1) -> Link:
    """The link a ring collective (all-reduce, all-gather, reduce-scatter) of `ranks` ranks,
    `stride` apart in rank order, runs on.

    Rank order is the framework's (TP innermost, then CP, DP, PP): a group spans ranks·stride
    consecutive GPUs and stays on the scale-up link if those fit one domain. Across domains its
    r ranks per domain drive r NICs in parallel (module docstring): bandwidth
    min(scale-up, r × NIC), latency the network's.
    """
    if ranks <= 1:
        return LOCAL
    if ranks * stride <= gpu.scale_up_gpus:
        return link_intra_node(gpu, ranks)
    inter = link_inter_node(gpu)
    r = ranks_per_domain(gpu, ranks, stride)
    bandwidth = r * inter.bandwidth
    if gpu.intra_node_gbps is not None and r > 1:
        bandwidth = min(bandwidth, link_intra_node(gpu, r).bandwidth)
    return Link(bandwidth, inter.latency, inter.launch)


def link_p2p(gpu: HardwareProfile, ranks: int, stride: int = 1) -> Link:
    """The link of point-to-point traffic within a group (pipeline neighbours, the CP ring,
    all-to-all): scale-up inside one domain, else each rank's own NIC."""
    if ranks <= 1:
        return LOCAL
    if ranks * stride <= gpu.scale_up_gpus:
        return link_intra_node(gpu, 2)  # a send goes to one peer
    return link_inter_node(gpu)


def time_allreduce(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce of an `nbytes` buffer: 2(n−1) steps, 2(n−1)/n · nbytes per rank."""
    if ranks <= 1:
        return 0.0
    return (link.launch + 2 * (ranks - 1) * link.latency
            + 2 * (ranks - 1) / ranks * nbytes / link.bandwidth)


def time_allgather(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-gather producing an `nbytes` buffer on every rank (each holds nbytes/n)."""
    if ranks <= 1:
        return 0.0
    return link.launch + (ranks - 1) * link.latency + (ranks - 1) / ranks * nbytes / link.bandwidth


def time_reducescatter(nbytes: float, ranks: int, link: Link) -> float:
    """Ring reduce-scatter of an `nbytes` buffer: the mirror of all-gather."""
    return time_allgather(nbytes, ranks, link)


def time_alltoall(nbytes: float, ranks: int, link: Link, steps: int | None = None) -> float:
    """All-to-all where each rank holds `nbytes` and keeps 1/n of it, in `steps` latencies
    (default n − 1: one peer after another)."""
    if ranks <= 1:
        return 0.0
    steps = ranks - 1 if steps is None else steps
    return link.launch + steps * link.latency + (ranks - 1) / ranks * nbytes / link.bandwidth


def time_alltoall_domains(nbytes: float, ranks: int, gpu: HardwareProfile, stride: int = 1,
                          cross_bytes: float | None = None, steps: int | None = None) -> float:
    """All-to-all where each rank holds `nbytes` and keeps 1/n of it, the n ranks `stride`
    apart possibly spanning scale-up domains. A rank's sends go to its r − 1 peers in its own
    domain over the scale-up link and to the n − r others over its own NIC, at the same time
    (NCCL posts every peer's send at once): time = max(intra, inter) + the network's per-step
    latency. `cross_bytes` replaces the (n − r)/n · nbytes that cross the domain boundary
    (a hierarchical dispatch, DeepEP / HybridEP, sends a token once per remote domain, then
    forwards it inside the domain: every remote copy also crosses the scale-up link once, so
    intra = (n − 1)/n · nbytes). Inside one domain this is `time_alltoall` on its link.
    `steps`: the network latencies paid (default n − 1, `time_alltoall`)."""
    if ranks <= 1:
        return 0.0
    steps = ranks - 1 if steps is None else steps
    if ranks * stride <= gpu.scale_up_gpus:
        return time_alltoall(nbytes, ranks, link_intra_node(gpu, ranks), steps)
    r = ranks_per_domain(gpu, ranks, stride)
    inter = link_inter_node(gpu)
    if cross_bytes is None:
        cross, local = (ranks - r) / ranks * nbytes, (r - 1) / ranks * nbytes
    else:
        cross, local = cross_bytes, (ranks - 1) / ranks * nbytes
    intra = local / link_intra_node(gpu, r).bandwidth if gpu.intra_node_gbps else 0.0
    # nbytes may be an array (layout variants of one shape)
    return inter.launch + steps * inter.latency + np.maximum(intra, cross / inter.bandwidth)


def time_p2p(nbytes: float, link: Link) -> float:
    """One point-to-point send (pipeline stage boundary, CP ring step)."""
    return link.launch + link.latency + nbytes / link.bandwidth


# --- collectives at decode sizes (inference engines) -------------------------------------------

ENGINE_ALLREDUCE_PEER_US = 0.13
"""Latency an inference engine's own all-reduce adds per peer inside one scale-up domain, µs.
vLLM, SGLang and TensorRT-LLM replace NCCL there by a custom all-reduce: each rank writes its
rows to a buffer its peers map, one barrier (a flag written to every peer at once), then each
reads the others' rows over the scale-up link (one-shot; two-shot — reduce-scatter then
all-gather, the ring's volume — for larger buffers). No ring of 2(n − 1) steps: its latency is
the launch plus a little per peer. Fitted on ../shared/data/calibration/rollout.md §2 row 18
(vLLM 0.24's all-reduce of one row on an H100: 4.4 / 4.8 / 5.2 µs at TP 2 / 4 / 8) with the
launch the profile's `collective_launch_us` (4.3 µs, fitted on rows 15–16): least squares of
(t − 4.3) against the n − 1 peers gives 0.134 µs; predicted 4.4 / 4.7 / 5.2 µs."""


DECODE_ALLREDUCE_NIC_SHARE = 0.29
"""The share of one NIC's bandwidth at which an all-reduce across scale-up domains moves a
decode-size buffer (tens of KB to a few MB): NCCL runs such calls on few channels and its
low-latency protocols, not on every NIC of the group at full rate, and the time grows with the
whole buffer, not 1/r of it. Fitted on ../shared/data/calibration/rollout.md §2 row 18's two
points for TP16 on two H100 nodes, 51 µs for one row and 144 µs for 64 (hidden 8192, bf16: the
database gives these figures for Llama-3.1-70B): the 93 µs between them, less the 5 µs the
NVLink reduce-scatter and all-gather add, is 1 MB at 11.7 GB/s, 0.29 of the profile's 40 GB/s
NIC. The form before this carried 1/8 of the buffer on each NIC at full rate, 62 µs at 64 rows.
Checked, not fitted, against aiconfigurator's per-call figures (bench/aiconfigurator_peer.py
--allreduce): TP16 within 13% from 128 KB to 1 MB; TP32 13–22% above them there (the two more
network hops of a 4-node tree, which aiconfigurator does not charge); past 2 MB both grow
faster than its (+35–45% at 2.5–4 MB, a 256-row batch of hidden 8192). Prefill
(`generation.prefill_cost`) pays it per prompt row too."""


def time_allreduce_decode(nbytes: float, ranks: int, gpu: HardwareProfile,
                          custom: bool = True) -> float:
    """One all-reduce of an inference engine's tensor-parallel group (`ranks` consecutive
    GPUs) over an `nbytes` buffer (a decode step's rows, or a prefill chunk's). Seconds.

    Inside one scale-up domain: the engine's custom all-reduce when `custom`
    (`ENGINE_ALLREDUCE_PEER_US`: the launch, a little per peer, the two-shot volume
    2(n − 1)/n · nbytes over the scale-up link), else NCCL's ring (`time_allreduce`, the
    engines of 2023). Across domains the engines call NCCL (their custom all-reduce is
    single-node), which runs small buffers hierarchically: reduce-scatter along the r ranks of
    each domain, all-reduce across the D domains, all-gather back; latency the launch,
    2(r − 1) scale-up hops and 2⌈log₂ D⌉ network hops (NCCL's tree across nodes, one hop per
    tree level up and down; a ring over domains would pay 2(D − 1)). A TP16 group on two 8-GPU
    H100 nodes pays ≈ 54 µs for one row (rollout.md §2 row 18: 51 µs), not a 30-step ring's
    450 µs. The buffer crosses the network at `DECODE_ALLREDUCE_NIC_SHARE` of one NIC: ≈ 149
    µs for 64 rows of hidden 8192 (row 18: 144 µs).
    """
    if ranks <= 1:
        return 0.0
    if ranks <= gpu.scale_up_gpus:
        link = link_intra_node(gpu, ranks)
        if not custom:
            return time_allreduce(nbytes, ranks, link)
        return (link.launch + (ranks - 1) * ENGINE_ALLREDUCE_PEER_US * 1e-6
                + 2 * (ranks - 1) / ranks * nbytes / link.bandwidth)
    inter = link_inter_node(gpu)
    r = ranks_per_domain(gpu, ranks)
    domains = math.ceil(ranks / r)
    intra = link_intra_node(gpu, r) if gpu.intra_node_gbps is not None and r > 1 else LOCAL
    return (inter.launch + 2 * (r - 1) * intra.latency
            + 2 * math.ceil(math.log2(domains)) * inter.latency
            + 2 * (r - 1) / r * nbytes / intra.bandwidth
            + nbytes / (DECODE_ALLREDUCE_NIC_SHARE * inter.bandwidth))


def time_alltoall_decode(nbytes: float, ranks: int, gpu: HardwareProfile) -> float:
    """One dispatch or combine of an expert-parallel decode step: each of `ranks` consecutive
    GPUs sends `nbytes` (its tokens' copies, one per routed expert) spread evenly over the
    ranks. Seconds. The engines' expert-parallel kernels (DeepEP's low-latency mode, pplx)
    post every peer's send at once and wait once: the launch, one hop's latency, then the
    busiest link — the scale-up link's share inside the domain or the NIC's share across it,
    at the same time (`time_alltoall_domains` with one latency step). More ranks spread the
    same tokens over more links; nothing in it grows with the rank count but the share that
    crosses the network."""
    return time_alltoall_domains(nbytes, ranks, gpu, steps=1)

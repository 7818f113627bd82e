"""Host work of CPU offload: the CPU Adam step and the transfers over the host link.

Pure functions of the bytes involved and the hardware; `time.py` (training) and
`iteration.py` (state offloaded during generation) call them.

- The CPU Adam step (optimizer offload, ZeRO-Offload) moves `CPU_ADAM_DRAM_BYTES_PER_PARAM`
  bytes of DRAM per offloaded parameter and updates `CPU_ADAM_PARAMS_PER_S_PER_CORE`
  parameters per core: it lasts the longer of the two. The node's DRAM bandwidth and cores are
  shared by the GPUs of the node that offload at once (`gpus_sharing_host`).
- The host link (PCIe, NVLink-C2C) is per GPU per direction in the profiles: not shared.
  A stream whose DRAM traffic no other term counts (parameters streamed for forward and
  backward, state swapped out and back) is no faster than the slower of the host link and the
  GPU's share of DRAM bandwidth (`host_stream_rate`). The optimizer's gradient and weight
  transfers cross the link alone: their DRAM side is in the CPU step's count.
- Overlap, as ZeRO-Offload runs it (Ren et al., USENIX ATC'21, §4): the gradients are copied
  down during the backward pass as their buckets are reduced — the same overlap as the
  DP gradient collective (`Runtime.dp_comm_overlap`); the CPU step itself starts after the
  backward and is on the critical path (DeepSpeed's "one-step delayed update" would hide it
  behind the next step, at the cost of staleness: not assumed); the updated bf16 weights are
  copied back as the step produces them, so step and upload together last the longer of the
  two (DeepSpeed updates and copies tile by tile).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.cost import comm
from planner.cost.constants import (
    BYTES_BF16,
    CPU_ADAM_DRAM_BYTES_PER_PARAM,
    CPU_ADAM_PARAMS_PER_S_PER_CORE,
    HOST_CPU_CORES,
    HOST_MEMORY_BANDWIDTH_GBPS,
    HOST_MEMORY_EFFICIENCY,
)
from planner.cost.flops import Num
from planner.specs.hardware import HardwareProfile

__all__ = [
    "OptimizerOffloadTime",
    "gpus_sharing_host",
    "host_cores",
    "host_memory_rate",
    "host_stream_rate",
    "swap_time",
    "time_cpu_adam",
    "time_host_stream",
    "time_optimizer_offload",
]


def host_memory_rate(gpu: HardwareProfile) -> float:
    """Sustained CPU DRAM bytes/s of one node (the profile's peak, else the default)."""
    peak = gpu.host_memory_bandwidth_gbps or HOST_MEMORY_BANDWIDTH_GBPS
    return peak * 1e9 * HOST_MEMORY_EFFICIENCY


def host_cores(gpu: HardwareProfile) -> int:
    """CPU cores of one node (the profile's, else the default)."""
    return gpu.host_cpu_cores or HOST_CPU_CORES


def gpus_sharing_host(gpu: HardwareProfile, group_gpus: int,
                      gpus_per_node: int | None = None) -> int:
    """GPUs of one node offloading at once: the group's GPUs on a node (groups fill nodes of
    `gpus_per_node` GPUs, the cluster's, else the profile's). Other groups on the same node
    offloading at the same time are not counted."""
    return max(1, min(group_gpus, gpus_per_node or gpu.gpus_per_node))


def host_stream_rate(gpu: HardwareProfile, sharing: int) -> float:
    """Bytes/s one GPU streams to or from CPU memory: its host link, or its share of the
    node's DRAM bandwidth if that is lower."""
    return min(comm.link_host(gpu).bandwidth, host_memory_rate(gpu) / sharing)


def time_host_stream(nbytes: Num, gpu: HardwareProfile, sharing: int) -> Num:
    """Seconds for each of `sharing` GPUs of a node to move `nbytes` to or from CPU memory."""
    return nbytes / host_stream_rate(gpu, sharing)


def time_cpu_adam(params: Num, gpu: HardwareProfile, sharing: int) -> Num:
    """Seconds of the CPU Adam step over `params` parameters per GPU, `sharing` GPUs of the
    node stepping at once: the node's DRAM traffic at its sustained bandwidth, or the
    parameters at the cores' rate, whichever is longer."""
    node_params = sharing * params
    dram = node_params * CPU_ADAM_DRAM_BYTES_PER_PARAM / host_memory_rate(gpu)
    cores = node_params / (host_cores(gpu) * CPU_ADAM_PARAMS_PER_S_PER_CORE)
    return np.maximum(dram, cores)


@dataclass(frozen=True)
class OptimizerOffloadTime:
    """One optimizer step with the optimizer on the CPU, exposed seconds by part.

    cpu_step: the CPU Adam step (critical path). transfers: the gradient copy the backward
    does not hide, and the weight upload the CPU step does not hide.
    gradients_down, weights_up: the whole copies (for the record).
    """

    cpu_step: Num
    transfers: Num
    gradients_down: Num
    weights_up: Num


def time_optimizer_offload(params: Num, gpu: HardwareProfile, sharing: int,
                           grad_bytes: float, backward_overlap: float) -> OptimizerOffloadTime:
    """One optimizer step of `params` offloaded parameters per GPU (module docstring): the
    gradients down (`grad_bytes` each), `backward_overlap` of it hidden by the backward; the
    CPU step; the bf16 weights up, overlapped with the step."""
    link = comm.link_host(gpu).bandwidth
    down = params * grad_bytes / link
    up = params * BYTES_BF16 / link
    cpu = time_cpu_adam(params, gpu, sharing)
    exposed = down * (1 - backward_overlap) + np.maximum(0.0, up - cpu)
    return OptimizerOffloadTime(cpu_step=cpu, transfers=exposed, gradients_down=down,
                                weights_up=up)


def swap_time(nbytes: float, gpu: HardwareProfile, gpus_per_node: int) -> float:
    """Move `nbytes` per GPU of resident state to CPU memory and back (state offloaded during
    generation): each way at `host_stream_rate`, every GPU of the node (`gpus_per_node`, the
    cluster's) swapping at once — a co-located group fills its nodes; the search prices the
    swap per MiB whatever the group's size, so the two agree."""
    return 2 * time_host_stream(nbytes, gpu, gpus_per_node)

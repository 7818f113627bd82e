"""Offload bench: the CPU Adam part of a step against the one public offload point.

Run from the repository root: `.venv/bin/python bench/offload.py` (well under a second).

The point (issue 12): Qwen2.5-3B trained with the optimizer offloaded (DeepSpeed ZeRO-Offload)
on 2× A100-40GB with a 128-core host: 3.08 s per step, 2.38 s with the CPU cores bound to the
ranks. The source gives neither the batch nor the sequence length nor the ZeRO stage, so the
GPU part of its step is unknown and the measurement cannot be split into GPU work, CPU Adam
and transfers: what it covers is the whole step, of which the CPU part is an unknown fraction.
What it does give:
- binding cores saved 0.70 s, so the CPU-side work of the unbound run was at least 0.70 s;
- the bound step (2.38 s) bounds the CPU Adam step from above, so DeepSpeed's CPU Adam ran at
  least 3.09e9 / 2.38 s ≈ 1.3e9 parameters/s on that host (≈ 1e7 per core over 128 cores).
The bench prints the model's CPU Adam step and host transfers for that run beside these
figures. It prints; it asserts nothing.

Host assumed for the point ([assumption], the source names only "128 cores"): a DGX A100-class
node, 2 × AMD EPYC 7742 (64 cores each), 8 channels of DDR4-3200 per socket: 2 × 8 × 25.6 =
409.6 GB/s peak; host link PCIe Gen4 x16, 32 GB/s per direction
(../shared/data/hardware_host_domain_prices.md Table 2; the shipped A100-40GB profile has no
host link figure).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from planner.cost.constants import (  # noqa: E402
    BYTES_BF16,
    CPU_ADAM_DRAM_BYTES_PER_PARAM,
    CPU_ADAM_PARAMS_PER_S_PER_CORE,
    HOST_MEMORY_EFFICIENCY,
)
from planner.cost.flops import Head, params_with_head  # noqa: E402
from planner.cost.offload import (  # noqa: E402
    host_memory_rate,
    time_optimizer_offload,
)
from planner.cost.time import DP_COMM_OVERLAP  # noqa: E402
from planner.specs.hardware import load_profile  # noqa: E402
from planner.specs.model import load_model  # noqa: E402

MEASURED_S = 3.08  # per step, cores not bound
MEASURED_BOUND_S = 2.38  # per step, cores bound to ranks
HOST_PEAK_GBPS = 409.6  # [assumption] 2 × EPYC 7742, 8 × DDR4-3200 per socket
HOST_CORES = 128
HOST_LINK_GBPS = 32.0  # PCIe Gen4 x16 per direction (hardware_host_domain_prices.md Table 2)
GPUS = 2


def main() -> None:
    gpu = load_profile("a100-sxm-40gb").model_copy(update={
        "host_memory_bandwidth_gbps": HOST_PEAK_GBPS, "host_cpu_cores": HOST_CORES,
        "host_link_gbps": HOST_LINK_GBPS})
    spec = load_model("qwen2.5-3b")
    params = params_with_head(spec, Head.POLICY)
    local = params / GPUS  # ZeRO ≥ 1: each rank steps its half (the stage does not change it)
    t = time_optimizer_offload(local, gpu, GPUS, BYTES_BF16, DP_COMM_OVERLAP)
    dram_s = GPUS * local * CPU_ADAM_DRAM_BYTES_PER_PARAM / host_memory_rate(gpu)
    cores_s = GPUS * local / (HOST_CORES * CPU_ADAM_PARAMS_PER_S_PER_CORE)
    print(f"Qwen2.5-3B ({params / 1e9:.3f}B parameters) on {GPUS}× A100-40GB, optimizer "
          f"offloaded; host {HOST_PEAK_GBPS:.1f} GB/s peak DRAM × {HOST_MEMORY_EFFICIENCY} "
          f"sustained, {HOST_CORES} cores, PCIe {HOST_LINK_GBPS:.0f} GB/s per direction")
    print(f"  CPU Adam, DRAM bound : {dram_s:6.3f} s  ({GPUS} × {local / 1e9:.2f}B params × "
          f"{CPU_ADAM_DRAM_BYTES_PER_PARAM} B)")
    print(f"  CPU Adam, cores bound: {cores_s:6.3f} s  ({CPU_ADAM_PARAMS_PER_S_PER_CORE:.2g} "
          f"params/s/core)")
    print(f"  CPU Adam step (model): {t.cpu_step:6.3f} s  on the critical path")
    print(f"  gradients down {t.gradients_down:.3f} s ({1 - DP_COMM_OVERLAP:.0%} exposed), "
          f"weights up {t.weights_up:.3f} s (under the CPU step); exposed transfers "
          f"{t.transfers:.3f} s")
    host_part = t.cpu_step + t.transfers
    print(f"  host part of a step (model): {host_part:.3f} s = {host_part / MEASURED_BOUND_S:.0%}"
          f" of the measured {MEASURED_BOUND_S} s (cores bound), "
          f"{host_part / MEASURED_S:.0%} of {MEASURED_S} s (unbound)")
    print(f"  measured: binding cores saved {MEASURED_S - MEASURED_BOUND_S:.2f} s, so the "
          f"unbound CPU-side work was ≥ {MEASURED_S - MEASURED_BOUND_S:.2f} s; the model's "
          f"host part {'fits under' if host_part <= MEASURED_BOUND_S else 'EXCEEDS'} the "
          f"bound step")
    saved = MEASURED_S - MEASURED_BOUND_S
    print(f"  the model's host part ({host_part:.2f} s, cores bound) is "
          f"{'below' if host_part < saved else 'above'} the {saved:.2f} s binding saved: "
          f"both hold only if unbound CPU work ran ≥ {(host_part + saved) / host_part:.1f}× "
          "slower than bound, or the model's CPU step is optimistic")
    print(f"  implied floor on CPU Adam speed: ≥ {params / MEASURED_BOUND_S:.3g} params/s "
          f"(≥ {params / MEASURED_BOUND_S / HOST_CORES:.3g} per core); the model runs "
          f"{params / t.cpu_step:.3g} params/s")
    print("  fraction of the measured step the CPU part covers: unknown (the source gives no "
          "batch, sequence length or ZeRO stage, so the GPU part cannot be priced)")


if __name__ == "__main__":
    main()

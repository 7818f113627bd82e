"""The measured peak-memory points of ../shared/data/calibration/memory.md §B.8: for each, what
pricing it lacks (bench/calibration.py prints this as its section 3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.errors import InputError
from planner.specs.hardware import load_profile
from planner.specs.model import load_model

TITLE = "3. Measured memory points (memory.md §B.8): what pricing each one lacks"

@dataclass(frozen=True)
class MemoryPoint:
    """A published peak-memory measurement and what pricing it needs that its source omits."""

    source: str
    model: str  # the shipped spec it needs (planner.specs.model.load_model name)
    gpu: str  # the hardware profile it needs
    measured_gb: float
    unstated: str  # settings the source does not give ("" = all given)


MEMORY_POINTS = (
    MemoryPoint("torchtune README, 4x RTX 4090 FSDP, bs 4, seq 2048", "llama-2-7b", "rtx-4090",
                24.1, ""),
    MemoryPoint("torchtune README, 1x RTX 4090, PagedAdamW, bs 4, seq 2048", "llama-2-7b",
                "rtx-4090", 24.1, "the paged optimizer's resident share"),
    MemoryPoint("torchtune README, 8x A100, PagedAdamW, bs 4, seq 4096", "llama-2-70b",
                "a100-sxm-80gb", 70.4, "the parallel layout; the paged optimizer's resident "
                "share"),
    MemoryPoint("torchtune README (2024-02), 2x A100-80G FSDP, SGD, fp32", "llama-2-7b",
                "a100-sxm-80gb", 62.0, "sequence length (alpaca); SGD state is not modelled; "
                "reserved, not allocated, bytes"),
    MemoryPoint("llama-recipes #100, 4x A100-40GB FSDP", "llama-2-7b", "a100-sxm-40gb", 29.0,
                "batch and sequence length; reserved, not allocated, bytes"),
    MemoryPoint("mbridge memory_estimator, 8 GPUs, 4 layers, seq 4096 (4 rows)",
                "mixtral-8x2b-style-4-layer", "", 6.6, "the model's dimensions; the GPU"),
    MemoryPoint("Megatron-LM PR #482, DP8 PP2 TP1, MBS 2", "llama-2-7b", "", 69.1,
                "sequence length; recompute and flash settings; the GPU"),
    MemoryPoint("Aceso artifact, 4 V100-class GPUs", "gpt-1.3b", "", 10.69,
                "the parallel layout, batch and sequence length; the GPU"),
)


def _shipped(load: Callable[[str], object], name: str) -> bool:
    if not name:
        return False
    try:
        load(name)
    except (InputError, ValueError, FileNotFoundError):
        return False
    return True


def run_memory_points() -> tuple[int, int]:
    """(points with every fact needed to price them, points), each printed with what it
    lacks. None is complete today, so none is priced."""
    complete = 0
    for p in MEMORY_POINTS:
        missing = ([] if _shipped(load_model, p.model) else
                   [f"no model spec '{p.model}' (its config is not in ../shared/data)"])
        if p.gpu and not _shipped(load_profile, p.gpu):
            missing.append(f"no hardware profile '{p.gpu}' (not in hardware.md)")
        if p.unstated:
            missing.append(f"not stated: {p.unstated}")
        complete += not missing
        print(f"  {p.source}: measured {p.measured_gb:g} GB\n    "
              + ("every fact given: price it here" if not missing else
                 "not priced: " + "; ".join(missing)))
    return complete, len(MEMORY_POINTS)

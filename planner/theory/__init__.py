"""The paper's work–depth–memory model, exactly as FORMULAS.md restates it.

Source: Besta et al., "Performance Foundations of Parallel & Distributed Reasoning Language
Models" (`../shared/paper/`), restated with fixed conventions in FORMULAS.md. Pure functions,
no global state; work in FLOPs, depth in log2 steps, memory in elements.

Modules, one per table:
- `shape`: `TheoryModel` (L, d, d_ff, h, V, E, E_a, d_e), `Head`, `WorkDepthMemory`.
- `blocks`: Table I building blocks (|M|, C_f^tok, C_prefill, C_decode, D_f, D_gen, M_KV, ...).
- `stages`: Table IV per-algorithm stage costs and §4's stage primitives, over a `Scenario`.
- `intra`: Tables VII/VIII intra-model rows, ZeRO 0–3 and activation checkpointing.
- `inter`: Table IX inter-model configurations (PPO, GRPO, DPO).
- `analyze`: the `analyze` JSON (DESIGN.md) and its plain-English readings.
"""

from planner.theory.analyze import analyze_intra, analyze_pipeline, readings
from planner.theory.shape import Head, TheoryInputError, TheoryModel, WorkDepthMemory
from planner.theory.stages import Scenario

__all__ = [
    "Head",
    "Scenario",
    "TheoryInputError",
    "TheoryModel",
    "WorkDepthMemory",
    "analyze_intra",
    "analyze_pipeline",
    "readings",
]

"""The sweep JSON (`rlplan sweep --json`, `--json-out`) as a pydantic model: what `rlplan report
--sweep` validates and the Python API's `sweep()` returns.

The model names the keys the report reads and types each row's plan as a `Plan`; every other
key the sweep writes is kept as it is (`extra="allow"`), so `model_dump(mode="json")` is the
JSON the CLI prints. A key the sweep adds later passes through unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.plan import Plan


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class SweepRow(_Open):
    """One point: a size of one profile, or a combination of pool sizes (`pools`)."""

    gpus: int
    status: str  # optimal | feasible | infeasible | timeout
    iteration_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    scaling_efficiency: float | None = None
    cost_per_step_usd: float | None = None
    cost_per_million_tokens_usd: float | None = None
    placement: str | None = None
    note: str | None = None
    reason: str | None = None
    plan: Plan | None = None
    gpu: str | None = None
    pools: dict[str, int] | None = None

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "feasible")


class SweepPoint(_Open):
    """A point named by the frontier, the unpriced list or the target (a pool grid's carry
    `pools` too, kept as an extra key: the sweep writes it only there)."""

    gpu: str | None
    gpus: int | None


class SweepTarget(SweepPoint):
    message: str


class SweepDocument(_Open):
    """A sweep's answer: the scenario as swept, every point, the cost–time frontier, the points
    without a price, the target's answer (with `profiles` or a pool grid's `pools`)."""

    schema_version: int
    scenario: dict
    rows: list[SweepRow]
    frontier: list[SweepPoint]
    unpriced: list[SweepPoint]
    target: SweepTarget | None


def same_point(a: SweepPoint | SweepRow, b: SweepPoint | SweepRow) -> bool:
    """Whether two entries name the same point of a grid."""
    pools_a, pools_b = getattr(a, "pools", None), getattr(b, "pools", None)
    if pools_a is not None or pools_b is not None:
        return pools_a == pools_b
    return (a.gpu, a.gpus) == (b.gpu, b.gpus)

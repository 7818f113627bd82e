"""The inter-model options the search enumerates around the solver, and how two differ.

An option fixes what the CP-SAT model does not choose: staleness, inter-stage fusion, a shared
actor–critic, co-located state offloaded during generation, an overlapped weight sync, partial
rollouts. Each is one solve (`solve._search`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from planner.cost.step import controller_seconds
from planner.plan import STAGES, InterModel
from planner.search.space import host_budget_mib
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.frameworks import Capabilities
    from planner.search.aside import Aside
    from planner.search.cpsat import Result
    from planner.search.space import Space

STALENESS_THAT_MATTERS = len(STAGES)
"""The largest staleness that can change a plan's price; larger ones are not searched.

With staleness s ≥ 1 the iteration is T = max(B, ⌈Q / (s + 1)⌉) (`choice.iteration_ms`; the
cost model's `evaluate` is the same in seconds), where B is the busiest group's load plus the
sync it waits for, and Q = GA + sync + S_training the sequential chain. Each stage maximum
S_st is some group's load in that stage, so S_st ≤ B; the sync is on slot 0's busy time (the
actor's training group), so sync ≤ B; and GA ≤ S_generation + S_assessment (fused or not).
Hence Q ≤ (|STAGES| + 1)·B, and for s + 1 ≥ |STAGES| + 1 the second term is at most B: every
staleness from |STAGES| on prices every choice the same, T = B. Pricing does not depend on the
staleness otherwise (candidates are cached across options), and equal objectives rank the
lower staleness first, so capping the enumeration at |STAGES| changes no answer — and keeps the
work the same for `--max-staleness 3` and `--max-staleness 10**9`. With the controller's host
time C (`runtime.controller_us_per_token`), T = max(B, C, ⌈Q / (s + 1)⌉) and Q ≤
(|STAGES| + 1)·B + C ≤ (|STAGES| + 2)·max(B, C): one staleness more matters
(`staleness_that_matters`)."""


def staleness_that_matters(sc: Scenario) -> int:
    """`STALENESS_THAT_MATTERS`, one more when the controller has host time to overlap."""
    return STALENESS_THAT_MATTERS + (1 if controller_seconds(sc) > 0 else 0)


@dataclass(frozen=True)
class Option:
    staleness: int
    fusion: bool
    shared: bool
    swap: bool = False
    overlap_sync: bool = False
    partial: bool = False

    def inter_model(self) -> InterModel:
        return InterModel(inter_stage_fusion=self.fusion, staleness=self.staleness,
                          shared_actor_critic=self.shared, offload_during_generation=self.swap,
                          overlap_weight_sync=self.overlap_sync, partial_rollout=self.partial)

    def describe(self) -> str:
        """The option in words, on its own (`InterModel.choices`)."""
        return ", ".join(self.inter_model().choices()) or "staleness 0"

    def versus(self, chosen: Option) -> str:
        """What this option changes from `chosen`, in words: 'staleness 1 (not 0)', 'with
        inter-stage fusion', 'without state offloaded during generation'."""
        words = dict(zip([f.name for f in fields(self)],
                         ["staleness", "inter-stage fusion", "shared actor–critic",
                          "state offloaded during generation",
                          "weight sync overlapped (shadow copy)", "partial rollouts"],
                         strict=True))
        out = []
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(chosen, f.name)
            if mine == theirs:
                continue
            if f.name == "staleness":
                out.append(f"staleness {mine} (not {theirs})")
            else:
                out.append(f"{'with' if mine else 'without'} {words[f.name]}")
        return ", ".join(out) or "the same options"


def options(sc: Scenario, max_staleness: int, allow_shared: bool,
            caps: Capabilities | None = None) -> list[Option]:
    """The inter-model options a scenario allows (fusion and swapping exclude each other: one
    needs generation apart from assessment, the other co-located; so do swapping and an
    overlapped weight sync, which needs a separate rollout group and staleness ≥ 1). Partial
    rollouts carry off-policy tokens: offered when `max_staleness` ≥ 1. Staleness stops at
    `staleness_that_matters`."""
    online = not sc.family.offline
    swaps = online and any(host_budget_mib(sc.on_pool(p.name)) > 0 for p in sc.pool_list)
    top = min(max_staleness, staleness_that_matters(sc)) if online else 0
    out = [Option(s, f, sh, sw, ov, pa)
            for s in range(top + 1)
            for f in ((False, True) if online else (False,))
            for sh in ((False, True) if allow_shared and sc.critic is not None else (False,))
            for sw in ((False, True) if swaps and not f else (False,))
            for ov in ((False, True) if s >= 1 and not sw else (False,))
            for pa in ((False, True) if online and max_staleness >= 1 else (False,))]
    if caps is None:
        return out
    allowed = caps.options
    return [o for o in out if (allowed.fusion or not o.fusion)
            and (allowed.overlap_weight_sync or not o.overlap_sync)
            and (allowed.shared_actor_critic or not o.shared)
            and allowed.partial(o.staleness, o.partial)]


@dataclass
class Outcome:
    """An option and what solving it gave (`solve._search`), as the explanation ranks them."""

    option: Option
    result: Result
    space: Space
    pinning: Aside | None = field(default=None, compare=False, repr=False)
    """A child pinning `result` beside the search (`pins.pin_beside`), if one was started."""

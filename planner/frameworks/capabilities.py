"""What a framework release can run, built from its preset (`planner/frameworks/*.yaml`).

The exporter refuses a plan outside its capabilities; a scenario's `framework` (or `plan
--framework`) searches only inside them (`planner.search.space` filters group sizes and
candidate layouts before CP-SAT, `cpsat.py`/`choice.py` restrict which tasks may share a
group, `option.py` the inter-model options), so the plan found is one the export expresses as
planned.

Layout rules are conditions over a layout's fields (`conditions.py`) that work element-wise on
numpy arrays, so the search applies them to a whole shape's variants (`LayoutVariants`) in one
pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.specs.model import ModelSpec


@dataclass(frozen=True)
class Rule:
    """One thing a framework cannot run as planned: `ok(layout, spec)` (element-wise on arrays)
    is False for the layouts of `kind` it cannot run, `why(where, layout)` says why and what to
    do. `refuse`: the exporter refuses such a plan; otherwise it approximates it with a note
    (e.g. more memory per GPU than priced), and only a named framework avoids it."""

    kind: str
    ok: Callable[[Any, ModelSpec | None], Any]
    why: Callable[[str, Any], str]
    refuse: bool = True
    fix: dict[str, Any] | None = None  # the layout fields that make it run (None: no one fix)


PARTIAL_ROLLOUTS = {
    "any": lambda staleness, partial: True,
    "never": lambda staleness, partial: not partial,
    "off_policy": lambda staleness, partial: not partial or staleness >= 1,
    "exactly_off_policy": lambda staleness, partial: partial == (staleness >= 1),
}
"""When a framework runs partial rollouts (a preset's `options.partial_rollout`): any, never,
only off-policy (staleness ≥ 1), or exactly when off-policy (its asynchronous trainer always
continues unfinished responses)."""


@dataclass(frozen=True)
class Options:
    """The inter-model choices a framework runs as priced (the rest it approximates)."""

    fusion: bool = True  # inter-stage fusion (generation overlapped with assessment)
    overlap_weight_sync: bool = True
    shared_actor_critic: bool = True
    partial_rollout: str = "any"  # a key of PARTIAL_ROLLOUTS

    def partial(self, staleness: int, partial: bool) -> bool:
        return PARTIAL_ROLLOUTS[self.partial_rollout](staleness, partial)


@dataclass(frozen=True)
class GroupPattern:
    """A task set one group may hold: `tasks` (None: every task of the scenario) less the
    tasks the scenario lacks; `staleness` 'on_policy' (0), 'off_policy' (≥ 1) or None (any);
    `online`: only when the scenario generates (not DPO/SFT)."""

    tasks: frozenset[str] | None
    staleness: str | None = None
    online: bool = False

    def matches(self, group: frozenset[str], tasks: frozenset[str], staleness: int) -> bool:
        if self.online and "actor.generation" not in tasks:
            return False
        if self.staleness is not None and (staleness >= 1) != (self.staleness == "off_policy"):
            return False
        return group == (tasks if self.tasks is None else self.tasks & tasks)


@dataclass(frozen=True)
class Capabilities:
    framework: str  # the release, e.g. "verl@0.9.1"
    algorithms: frozenset[str]  # scenario algorithms the framework trains
    label: str = ""  # the release in words, e.g. "verl 0.9.1"
    reward_model: bool = True  # runs a reward model (else rule-based rewards only)
    mixed_pools: bool = True  # places groups on pools of different GPU types
    rules: tuple[Rule, ...] = ()
    options: Options = field(default_factory=Options)
    groups: tuple[GroupPattern, ...] | None = None  # None: any placement
    whole_nodes: bool = False  # pools are sized nodes × GPUs per node

    def refusal(self, kind: str, layout: Any, spec: ModelSpec | None, where: str) -> str | None:
        """Why the framework cannot run `layout` for a task of `kind` (a rule it refuses),
        or None."""
        for rule in self.rules:
            if rule.kind == kind and rule.refuse and not bool(np.all(rule.ok(layout, spec))):
                return rule.why(where, layout)
        return None

    def differences(self, kind: str, layout: Any, spec: ModelSpec | None, where: str
                    ) -> list[str]:
        """Every rule `layout` breaks, refused or approximated, in words."""
        return [rule.why(where, layout) for rule in self.broken(kind, layout, spec)]

    def broken(self, kind: str, layout: Any, spec: ModelSpec | None) -> list[Rule]:
        return [rule for rule in self.rules
                if rule.kind == kind and not bool(np.all(rule.ok(layout, spec)))]

    def mask(self, kind: str, variants: Any, spec: ModelSpec) -> Any:
        """Which of a shape's variants the framework runs (True, or an array over them)."""
        ok: Any = True
        for rule in self.rules:
            if rule.kind == kind:
                ok = ok & np.asarray(rule.ok(variants, spec))
        return ok

    def size_ok(self, gpus: int, gpus_per_node: int) -> bool:
        return not self.whole_nodes or gpus <= gpus_per_node or gpus % gpus_per_node == 0

    def group_ok(self, group: frozenset[str], tasks: frozenset[str], staleness: int) -> bool:
        return self.groups is None or any(p.matches(group, tasks, staleness)
                                          for p in self.groups)

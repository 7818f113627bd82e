"""What a framework can run, declared once per exporter (`CAPS` in each exporter module).

The exporter refuses (`ExportError`) a plan outside its capabilities; `rlplan plan --framework`
searches only inside them (`planner.search.space` filters group sizes and candidate layouts
before CP-SAT, `cpsat.py`/`choice.py` restrict which tasks may share a group, `option.py` the
inter-model options), so the plan found is one the export expresses as planned.

Layout rules are predicates over a layout's fields that work element-wise on numpy arrays, so
the search applies them to a whole shape's variants (`LayoutVariants`) in one pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.export.base import ExportError
from planner.specs.model import ModelSpec


@dataclass(frozen=True)
class Rule:
    """One thing a framework cannot run as planned: `ok(layout, spec)` (element-wise on arrays)
    is False for the layouts of `kind` it cannot run, `why(where, layout)` says why and what to
    do. `refuse`: the exporter refuses such a plan; otherwise it approximates it with a note
    (e.g. more memory per GPU than priced), and only `--framework` avoids it."""

    kind: str
    ok: Callable[[Any, ModelSpec], Any]
    why: Callable[[str, Any], str]
    refuse: bool = True


@dataclass(frozen=True)
class Options:
    """The inter-model choices a framework runs as priced (the rest it approximates)."""

    fusion: bool = True  # inter-stage fusion (generation overlapped with assessment)
    overlap_weight_sync: bool = True
    shared_actor_critic: bool = True
    partial: Callable[[int, bool], bool] = lambda staleness, partial: True


GroupRule = Callable[[frozenset[str], frozenset[str], int], bool]
"""(task names on one group, every task of the scenario, staleness) → can the framework run
that group as planned. Task names are the search's: actor.generation, actor.training,
critic.training, reference.forward, reward.forward."""


@dataclass(frozen=True)
class Capabilities:
    framework: str
    algorithms: frozenset[str]  # scenario algorithms the framework trains
    rules: tuple[Rule, ...] = ()
    options: Options = field(default_factory=Options)
    groups: GroupRule | None = None  # None: any placement (the export covers training only)
    whole_nodes: bool = False  # pools are sized nodes × GPUs per node

    def refusal(self, kind: str, layout: Any, spec: ModelSpec, where: str) -> str | None:
        """Why the framework cannot run `layout` for a task of `kind`, or None."""
        for rule in self.rules:
            if rule.kind == kind and rule.refuse and not bool(np.all(rule.ok(layout, spec))):
                return rule.why(where, layout)
        return None

    def check(self, kind: str, layout: Any, spec: ModelSpec, where: str) -> None:
        if (why := self.refusal(kind, layout, spec, where)) is not None:
            raise ExportError(why)

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
        return self.groups is None or self.groups(group, tasks, staleness)


# --- rules several frameworks share ---------------------------------------------------------


def no_pp(kind: str, why: str) -> Rule:
    return Rule(kind, lambda x, _: np.asarray(x.pp) == 1,
                lambda where, x: f"{where}.pp {x.pp}: {why}; re-plan with pp 1")


def deepspeed_offload(where_from: str, refuse: bool = True) -> tuple[Rule, ...]:
    """DeepSpeed's ZeRO offload: parameters only at stage 3, optimizer state from stage 1."""
    def params(x: Any, _: ModelSpec) -> Any:
        off = np.isin(np.asarray(x.offload), ("params", "both"))
        return ~off | (np.asarray(x.zero) == 3)

    def optimizer(x: Any, _: ModelSpec) -> Any:
        off = np.isin(np.asarray(x.offload), ("optimizer", "both"))
        return ~off | (np.asarray(x.zero) >= 1)

    return (Rule("training", params, lambda where, x: (
                f"zero_optimization.offload_param is valid only with stage 3 ({where}: zero "
                f"{x.zero}, offload {x.offload}; {where_from}); set zero to 3 or offload only "
                "the optimizer"), refuse),
            Rule("training", optimizer, lambda where, x: (
                f"zero_optimization.offload_optimizer needs ZeRO stage 1, 2 or 3 ({where}: "
                f"zero 0; {where_from}); set zero to 1 or more"), refuse))


def megatron_zero(kind: str, when: Callable[[Any], Any], what: str) -> Rule:
    """Megatron's distributed optimizer shards optimizer state only (ZeRO-1): a plan with
    ZeRO-2/3 would hold more per GPU than priced."""
    return Rule(kind, lambda x, _: ~np.asarray(when(x)) | (np.asarray(x.zero) <= 1),
                lambda where, x: f"{where}.zero {x.zero}: {what} shards optimizer state only "
                                 "(ZeRO-1); re-plan with zero 0 or 1", refuse=False)

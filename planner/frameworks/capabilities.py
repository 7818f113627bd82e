"""What a framework release can run, built from its preset (`planner/frameworks/*.yaml`).

The exporter refuses a plan outside its capabilities; a scenario's `framework` (or `plan
--framework`) searches only inside them (`planner.search.space` filters group sizes and
candidate layouts before CP-SAT, `model.py`/`choice.py` restrict which tasks may share a
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
    role: str | None = None  # the rule is about this role's layouts only (None: every role's)

    def about(self, kind: str, role: str | None) -> bool:
        return self.kind == kind and (self.role is None or role is None or self.role == role)


def model_parallel(x: Any) -> bool:
    """TP, PP or EP above 1: a Megatron-Core layout (verl's and NeMo-RL's FSDP/DTensor
    backends have no PP or EP, verl's FSDP no TP)."""
    return x.tp > 1 or x.pp > 1 or x.ep > 1


RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    # a frozen model runs DeepSpeed's (OpenRLHF) or the policy's (NeMo-RL) sharding: ZeRO-3
    # exactly when its trainer's is
    "sharded_with_trainer": lambda x, t: (x.zero == 3) == (t.zero == 3),
    # verl: under a Megatron trainer a frozen model keeps whole weights per TP × PP group
    # (ZeRO-0); under FSDP it is an FSDP module over its pool (TP/PP/EP 1, ZeRO-3)
    "whole_under_megatron": lambda x, t: x.zero == 0 if model_parallel(t) else (
        not model_parallel(x) and x.zero == (3 if x.dp * x.cp > 1 else 0)),
    # verl: one backend for every trained model (Megatron when any has TP/PP/EP > 1)
    "same_backend": lambda x, t: model_parallel(x) == model_parallel(t),
}
"""How a follower's layout must relate to its trainer's beyond equal fields (`Follow`)."""


@dataclass(frozen=True)
class Follow:
    """A task the framework lays out after another's, its `trainer` (a frozen model scored
    with the policy's layout, a critic trained with the actor's DeepSpeed settings): `same`
    fields equal to the trainer's, and `relation` (a key of `RELATIONS`) between the two.
    `plan --framework` searches only pairs that satisfy it (`planner.search.follow`)."""

    task: str  # e.g. "reference.forward"
    trainer: str  # e.g. "actor.training"
    same: tuple[str, ...] = ()
    relation: str | None = None
    why: str = ""

    def ok(self, x: Any, trainer: Any) -> bool:
        return all(getattr(x, f) == getattr(trainer, f) for f in self.same) and (
            self.relation is None or RELATIONS[self.relation](x, trainer))

    def signature(self, trainer: Any) -> tuple:
        """What of the trainer's layout the follower depends on."""
        return (*(getattr(trainer, f) for f in self.same),
                *((trainer.zero == 3, model_parallel(trainer)) if self.relation else ()))

    def run(self, x: Any, trainer: Any) -> Any | None:
        """The follower's layout (a `Layout`) as the framework runs it beside `trainer`'s:
        the `same` fields the trainer's, ZeRO as the relation has it, data parallelism what
        its group leaves; None when the relation has no one answer (`same_backend`) or its
        group cannot hold the trainer's model parallelism (a 1-GPU reward beside a TP-2
        actor: the framework would not run the plan as it is, whatever it changes)."""
        if self.relation == "same_backend":
            return x if self.ok(x, trainer) else None
        update = {f: getattr(trainer, f) for f in self.same}
        fsdp = self.relation == "whole_under_megatron" and not model_parallel(trainer)
        if fsdp:
            update |= {"tp": 1, "pp": 1, "ep": 1, "etp": None}
        shaped = x.model_copy(update=update)
        dp, rest = divmod(x.gpus, shaped.tp * shaped.pp * shaped.cp)
        if dp < 1 or rest:
            return None
        zero = {"sharded_with_trainer": 3 if trainer.zero == 3 else 0,
                "whole_under_megatron": 3 if fsdp and dp * shaped.cp > 1 else 0
                }.get(self.relation or "", shaped.zero)
        return shaped.model_copy(update={"dp": dp, "zero": zero})

    def label(self, x: Any) -> tuple:
        """What of the follower's layout the relation reads: followers with different labels
        are not interchangeable (the search prunes each label's candidates apart)."""
        return (*(getattr(x, f) for f in self.same),
                *((x.zero, model_parallel(x)) if self.relation else ()))


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


def _in_nodes(gpus: int, gpus_per_node: int) -> bool:
    """Part of one node, or whole nodes."""
    return gpus <= gpus_per_node or gpus % gpus_per_node == 0


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
    whole_cluster: bool = False  # so are all groups together (the cluster they split)
    follows: tuple[Follow, ...] = ()  # tasks laid out after another task's layout
    sequence_parallel: bool = True  # trains TP with sequence parallelism (Megatron's)

    def refusal(self, kind: str, layout: Any, spec: ModelSpec | None, where: str,
                role: str | None = None) -> str | None:
        """Why the framework cannot run `layout` for a task of `kind` (a rule it refuses),
        or None."""
        for rule in self.rules:
            if rule.about(kind, role) and rule.refuse and not bool(np.all(rule.ok(layout,
                                                                                 spec))):
                return rule.why(where, layout)
        return None

    def differences(self, kind: str, layout: Any, spec: ModelSpec | None, where: str,
                    role: str | None = None) -> list[str]:
        """Every rule `layout` breaks, refused or approximated, in words."""
        return [rule.why(where, layout) for rule in self.broken(kind, layout, spec, role)]

    def broken(self, kind: str, layout: Any, spec: ModelSpec | None,
               role: str | None = None) -> list[Rule]:
        return [rule for rule in self.rules
                if rule.about(kind, role) and not bool(np.all(rule.ok(layout, spec)))]

    def mask(self, kind: str, variants: Any, spec: ModelSpec, role: str | None = None) -> Any:
        """Which of a shape's variants the framework runs (True, or an array over them)."""
        ok: Any = True
        for rule in self.rules:
            if rule.about(kind, role):
                ok = ok & np.asarray(rule.ok(variants, spec))
        return ok

    def follow_of(self, task: str) -> Follow | None:
        return next((f for f in self.follows if f.task == task), None)

    def size_ok(self, gpus: int, gpus_per_node: int) -> bool:
        """A group of `gpus` the framework sizes (`whole_nodes`)."""
        return not self.whole_nodes or _in_nodes(gpus, gpus_per_node)

    def total_ok(self, gpus: int, gpus_per_node: int) -> bool:
        """All groups of a pool adding up to `gpus`, a cluster the framework sizes
        (`whole_cluster`)."""
        return not self.whole_cluster or _in_nodes(gpus, gpus_per_node)

    def group_ok(self, group: frozenset[str], tasks: frozenset[str], staleness: int) -> bool:
        return self.groups is None or any(p.matches(group, tasks, staleness)
                                          for p in self.groups)

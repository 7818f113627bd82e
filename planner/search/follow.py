"""`plan --framework`: tasks the framework lays out after another task's layout (its preset's
`follows`: a frozen model scored with the policy's layout in NeMo-RL, with the trainers'
DeepSpeed settings in OpenRLHF, verl's reference and critic on the actor's backend).

Both solvers keep only choices where each follower's candidate agrees with its trainer's
(`Follow.ok`): brute force through `choice.valid` (`agree`), CP-SAT through one constraint per
trainer signature (`add_follows`). The candidates of a trainer and of its followers are pruned
per label (`label_of`), so a candidate one pairing needs is never dropped for one another
pairing cannot use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from planner.frameworks.capabilities import Capabilities
from planner.search.candidate import Candidate, front_of

if TYPE_CHECKING:  # OR-Tools loads only where a model is built (`rlplan evaluate` needs none)
    from planner.search.sat import cp_model


def agree(caps: Capabilities | None, candidate: Mapping[str, Candidate]) -> bool:
    """Every follower's candidate (task → candidate of a choice) agrees with its trainer's
    (True when the choice has no candidates yet, or the framework none to follow)."""
    if caps is None or not candidate:
        return True
    for f in caps.follows:
        if f.task in candidate and f.trainer in candidate and \
                not f.ok(candidate[f.task].layout, candidate[f.trainer].layout):
            return False
    return True


def add_follows(m: cp_model.CpModel, caps: Capabilities | None, tasks: set[str],
                chosen: list[tuple[str, Any, Any]]) -> None:
    """For each trainer signature σ of each follow: the trainer's candidates with σ and the
    follower's candidates σ rules out are, together, chosen at most once. `chosen`: each
    candidate's (task, Boolean variable, layout)."""
    if caps is None:
        return
    for f in caps.follows:
        if f.task not in tasks or f.trainer not in tasks:
            continue
        trainers = [(v, layout) for task, v, layout in chosen if task == f.trainer]
        followers = [(v, layout) for task, v, layout in chosen if task == f.task]
        by_signature: dict[tuple, list[tuple[Any, Any]]] = {}
        for v, layout in trainers:
            by_signature.setdefault(f.signature(layout), []).append((v, layout))
        for pairs in by_signature.values():
            trainer = pairs[0][1]
            ruled_out = [v for v, layout in followers if not f.ok(layout, trainer)]
            if ruled_out:
                m.Add(sum(v for v, _ in pairs) + sum(ruled_out) <= 1)


def label_of(caps: Capabilities | None, task: str) -> Callable[[Any], tuple] | None:
    """How `task`'s candidates are grouped for pruning: by what each follow reads of them
    (its label as a follower, its signature as a trainer); None when no follow names it."""
    if caps is None:
        return None
    parts = [f.label for f in caps.follows if f.task == task] + \
        [f.signature for f in caps.follows if f.trainer == task]
    if not parts:
        return None
    return lambda layout: tuple(part(layout) for part in parts)


def fronts(keys: np.ndarray, label: Callable[[Any], tuple] | None, shapes: list[Any],
           rows: list[tuple[int, int]]) -> list[int]:
    """The rows of `keys` no other beats (`candidate.front_of`); with a `label` (`label_of`),
    within each label apart. `rows` gives each row's (shape, variant)."""
    if label is None:
        return front_of(keys)
    groups: dict[tuple, list[int]] = {}
    for r, (k, i) in enumerate(rows):
        groups.setdefault(label(Variant(shapes[k], i)), []).append(r)
    return [idx[j] for idx in groups.values() for j in front_of(keys[idx])]


def grouped(cands: list[Any], label: Callable[[Any], tuple] | None) -> list[list[Any]]:
    """Candidates by label (one group without a label), for pruning each apart."""
    if label is None:
        return [cands]
    groups: dict[tuple, list[Any]] = {}
    for c in cands:
        groups.setdefault(label(c.layout), []).append(c)
    return list(groups.values())


class Variant:
    """The i-th of a shape's variants (`LayoutVariants`), read by field without building its
    `Layout`."""

    def __init__(self, variants: Any, i: int):
        self.variants, self.i = variants, i

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.variants, name)
        return value[self.i] if isinstance(value, np.ndarray) and value.ndim else value

"""The conditions a preset's layout rules are written in, evaluated element-wise on a layout or
on a shape's variants (numpy arrays of each field).

A condition is a mapping, every entry of which must hold:
- `FIELD: VALUE` — the layout's field equals VALUE (`pp: 1`, `checkpointing: selective`);
- `FIELD: {min: A, max: B, in: [...], not_in: [...]}` — bounds and sets, any of them;
- `PREDICATE: true|false` — a fact about the layout and the model (`PREDICATES`);
- `any: [CONDITION, ...]` — at least one of them holds.
An empty condition always holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from planner.specs.model import ModelSpec

FIELDS = ("dp", "tp", "pp", "cp", "ep", "etp", "vp", "first_stage_layers", "last_stage_layers",
          "zero", "checkpointing", "offload", "micro_batch")
"""Layout fields a condition may name (`planner.plan.Layout`, `LayoutVariants`)."""
BOUNDS = ("min", "max", "in", "not_in")


def tp_divides_heads(x: Any, spec: ModelSpec | None) -> Any:
    """Each TP rank holds heads / TP attention heads and query groups / TP query groups."""
    if spec is None:
        return True
    tp = np.asarray(x.tp)
    return (spec.num_attention_heads % tp == 0) & (spec.num_key_value_heads % tp == 0)


def engine_default_max_num_seqs(x: Any, spec: ModelSpec | None) -> bool:
    """The layout leaves the cap on running sequences to the engine (`max_num_seqs` unset)."""
    return x.max_num_seqs is None


PREDICATES: dict[str, Callable[[Any, ModelSpec | None], Any]] = {
    "tp_divides_heads": tp_divides_heads,
    "engine_default_max_num_seqs": engine_default_max_num_seqs,
}


def check_condition(cond: Any, where: str) -> None:
    """Raise ValueError naming `where` when `cond` is not a condition this module reads."""
    if not isinstance(cond, Mapping):
        raise ValueError(f"{where}: a condition is a mapping of layout fields, got {cond!r}")
    for key, want in cond.items():
        if key == "any":
            if not isinstance(want, list) or not want:
                raise ValueError(f"{where}.any: a non-empty list of conditions")
            for i, sub in enumerate(want):
                check_condition(sub, f"{where}.any[{i}]")
        elif key in PREDICATES:
            if not isinstance(want, bool):
                raise ValueError(f"{where}.{key}: true or false")
        elif key in FIELDS:
            if isinstance(want, Mapping):
                extra = set(want) - set(BOUNDS)
                if extra or not want:
                    raise ValueError(f"{where}.{key}: bounds are {', '.join(BOUNDS)}")
            elif isinstance(want, list):
                raise ValueError(f"{where}.{key}: a value, or {{in: [...]}} for several")
        else:
            raise ValueError(f"{where}: unknown field '{key}'; conditions name "
                             f"{', '.join(FIELDS + tuple(PREDICATES))} or any")


def holds(cond: Mapping[str, Any], x: Any, spec: ModelSpec | None) -> Any:
    """Whether `cond` holds for layout `x` (True/False, or an array over its variants)."""
    ok: Any = True
    for key, want in cond.items():
        if key == "any":
            either: Any = False
            for sub in want:
                either = either | np.asarray(holds(sub, x, spec))
            ok = ok & either
        elif key in PREDICATES:
            got = np.asarray(PREDICATES[key](x, spec))
            ok = ok & (got if want else ~got)
        else:
            value = np.asarray(getattr(x, key))
            if not isinstance(want, Mapping):
                ok = ok & (value == want)
                continue
            if "min" in want:
                ok = ok & (value >= want["min"])
            if "max" in want:
                ok = ok & (value <= want["max"])
            if "in" in want:
                ok = ok & np.isin(value, list(want["in"]))
            if "not_in" in want:
                ok = ok & ~np.isin(value, list(want["not_in"]))
    return ok

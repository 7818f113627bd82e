"""Many layouts priced in one numpy pass: the search's candidates of one parallel shape.

The search prices every interleaving, ZeRO stage, checkpointing mode, micro-batch size, offload
and generation KV cache size of each shape (dp, tp, pp, cp, ep, the pipeline's split): tens of
thousands of candidates.
The degrees decide the pipeline stages and the links, so they stay scalars; the per-candidate
options — interleaved chunks `vp` among them: they scale the bubble, the sends between stages
and the activations in flight, but change no stage's layers — are numpy arrays
(`LayoutVariants`), and the cost functions (`memory.py`, `time.py`)
take either a `Layout` or a `LayoutVariants` through the same formulas — `where` / `isin` in
place of if/else on an option. A `Layout` keeps Python scalars (what `rlplan evaluate` prices);
arrays give arrays, one element per candidate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from functools import cached_property, reduce
from typing import TypeVar

import numpy as np

from planner.cost.flops import Num
from planner.plan import Layout

T = TypeVar("T")

OPTIONS = ("vp", "zero", "checkpointing", "micro_batch", "offload", "max_num_seqs",
           "kv_cache_tokens")
"""The `Layout` fields a `LayoutVariants` may give as arrays."""


@dataclass(frozen=True)
class LayoutVariants:
    """Layouts of one shape (the degrees, scalars) that differ in the per-candidate `OPTIONS`:
    each an array with one element per layout, or a scalar they share. The cost functions read
    it as a `Layout` and return arrays; `variants[i]` is the i-th as a `Layout`. Unhashable
    (arrays): the memoised cost functions compute rather than cache it."""

    dp: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    vp: Num = 1  # interleaved pipeline chunks per rank (training)
    first_stage_layers: int | None = None  # uneven pipeline stages (`pipeline_split`)
    last_stage_layers: int | None = None
    sp: bool = False
    zero: Num = 0
    checkpointing: np.ndarray | str = "none"
    micro_batch: Num = 1
    offload: np.ndarray | str = "none"
    max_num_seqs: Num | None = None
    kv_cache_tokens: Num | None = None
    group: str = "g"

    def __len__(self) -> int:
        return max(np.size(getattr(self, name)) for name in OPTIONS)

    def __getitem__(self, i: int) -> Layout:
        options = {name: value[i] if isinstance(value, list) else value
                   for name, value in self._options.items()}
        # built, not validated: the search makes legal layouts of Python scalars (a test holds
        # them to validation), tens of thousands per command
        return Layout.model_construct(
            group=self.group, dp=self.dp, tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep,
            etp=self.etp, sp=self.sp, first_stage_layers=self.first_stage_layers,
            last_stage_layers=self.last_stage_layers, **options)

    def __iter__(self) -> Iterator[Layout]:
        return (self[i] for i in range(len(self)))

    @cached_property
    def _options(self) -> dict[str, object]:
        """The options as Python scalars, or lists of them (what a `Layout` is built from)."""
        return {name: value.tolist() if isinstance(value, np.ndarray) else value
                for name in OPTIONS for value in [getattr(self, name)]}


def where(cond: bool | np.ndarray, a, b):
    """`a if cond else b`, element-wise when `cond` is an array (scalars stay Python scalars)."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def isin(value: str | np.ndarray, options: tuple[str, ...]) -> bool | np.ndarray:
    """`value in options`, element-wise on an array."""
    if isinstance(value, np.ndarray):  # (faster than np.isin for a few options)
        return reduce(np.logical_or, [value == option for option in options])
    return value in options


def pick(cond: bool | np.ndarray, a: T, b: T) -> T:
    """`a if cond else b` for two breakdowns (dataclasses of numbers), field by field."""
    if not isinstance(cond, np.ndarray):
        return a if cond else b
    return type(a)(**{f.name: np.where(cond, getattr(a, f.name), getattr(b, f.name))
                      for f in fields(a)})

"""Which decoder layers of a model are mixture-of-experts, stored by pattern, not per layer.

Every MoE convention rlplan reads places its MoE layers on an arithmetic progression, with a
few explicit exceptions:

- DeepSeek (`first_k_dense_replace` k, `moe_layer_freq` f): layer i is MoE when i ≥ k and
  i mod f = 0 — the progression from the first multiple of f at or after k, step f;
- Qwen-MoE (`decoder_sparse_step` s, `mlp_only_layers`): layer i is MoE when (i + 1) mod s = 0
  and i is not listed — the progression s − 1, 2s − 1, ..., less the listed layers;
- Mixtral, gpt-oss (no such fields): every layer.

`MoELayers` keeps (first, step, stop) and the exceptions, so a count over any span of layers
(a pipeline stage) is O(1) in the layer count plus O(log) in the exceptions: nothing iterates
per layer, whatever `num_hidden_layers` says.
"""

from __future__ import annotations

from bisect import bisect_left

from pydantic import BaseModel, ConfigDict, Field, model_validator


class MoELayers(BaseModel):
    """The MoE layers: range(first, stop, step) without the indices in `dense`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    first: int = Field(ge=0, description="index of the first layer of the progression")
    step: int = Field(gt=0, description="every step-th layer from `first` is MoE")
    stop: int = Field(ge=0, description="the model's layer count (one past the last index)")
    dense: tuple[int, ...] = Field((), description="indices on the progression that stay dense "
                                   "(Qwen's mlp_only_layers), sorted")

    @model_validator(mode="after")
    def _check(self) -> MoELayers:
        on = range(self.first, self.stop, self.step)
        if list(self.dense) != sorted(set(self.dense)) or any(i not in on for i in self.dense):
            raise ValueError("dense: sorted unique indices on the progression")
        return self

    @classmethod
    def deepseek(cls, layers: int, first_dense: int, freq: int) -> MoELayers:
        """Layers i ≥ `first_dense` with i mod `freq` = 0."""
        return cls(first=-(-first_dense // freq) * freq, step=freq, stop=layers)

    @classmethod
    def qwen(cls, layers: int, sparse_step: int, mlp_only: list[int]) -> MoELayers:
        """Layers i with (i + 1) mod `sparse_step` = 0, not in `mlp_only`."""
        on = range(sparse_step - 1, layers, sparse_step)
        return cls(first=on.start, step=sparse_step, stop=layers,
                   dense=tuple(sorted({i for i in mlp_only if i in on})))

    def count(self, lo: int = 0, hi: int | None = None) -> int:
        """MoE layers among indices lo ≤ i < hi (default: all)."""
        hi = self.stop if hi is None else min(hi, self.stop)
        lo = max(lo, 0)
        if hi <= lo:
            return 0
        # progression indices n with lo ≤ first + n·step < hi
        n_lo = max(0, -(-(lo - self.first) // self.step))
        n_hi = max(0, -(-(hi - self.first) // self.step))
        on = max(0, n_hi - n_lo)
        return on - (bisect_left(self.dense, hi) - bisect_left(self.dense, lo))

    def __contains__(self, i: object) -> bool:
        return (isinstance(i, int) and i in range(self.first, self.stop, self.step)
                and i not in self.dense)

    def describe(self) -> str:
        """'58 of 61 (from layer 3)', '24 of 48 (every 2nd from layer 1, 2 kept dense)'."""
        parts = []
        if self.step > 1:
            parts.append(f"every {self.step}{_ordinal(self.step)}")
        if self.first:
            parts.append(f"from layer {self.first}")
        if self.dense:
            parts.append(f"{len(self.dense)} kept dense")
        where = f" ({', '.join(parts)})" if parts else ""
        return f"{self.count()} of {self.stop}{where}"


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")

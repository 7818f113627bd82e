"""The theory's view of a model and of a cost: the paper's symbols, nothing else.

`TheoryModel` carries exactly the shape the work–depth–memory formulas read (FORMULAS.md,
conventions): L layers, width d, FFN width d_ff, h heads, vocabulary V and, for a
mixture-of-experts model, E experts, E_a active per token and expert width d_e. A dense model
has E = E_a = 1 and d_e = d_ff, so every formula is written once, in the MoE symbols
(`2·E_a·d·d_e` in work, `2·E·d·d_e` in parameters, `log d_e` in depth), and reduces to the
paper's dense Table I on a dense model.

`Head` names the output head a role puts on the backbone (Table I rows): the vocabulary head of
the policy and the reference, the scalar head of the reward model (read on the last token), the
scalar head of the critic (read on every token), and both heads of the shared actor–critic.

`WorkDepthMemory` is the triple every table cell reports: work in FLOPs, depth in log2
reduction steps, memory in elements (parameter-sized units, no byte factors).
"""

from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass
from typing import Any

from planner.errors import InputError

__all__ = [
    "Head",
    "TheoryInputError",
    "TheoryModel",
    "WorkDepthMemory",
    "require_positive",
    "require_positive_int",
]


class TheoryInputError(InputError, ValueError):
    """A shape, workload or degree the formulas cannot take (non-positive, wrong type, ...).

    It is a `ValueError` for callers of the pure functions and an `InputError` (exit code 2)
    for the CLI.
    """


def require_positive(name: str, value: Any) -> float:
    """Return `value` as a float if it is a finite number > 0, else raise TheoryInputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TheoryInputError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise TheoryInputError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def require_positive_int(name: str, value: Any) -> int:
    """Return `value` if it is an int ≥ 1 (an integral float is accepted), else raise."""
    if isinstance(value, bool):
        raise TheoryInputError(f"{name} must be a positive integer, got {value!r}")
    if (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and math.isfinite(value)
        and float(value).is_integer()
    ):
        value = int(value)
    if not isinstance(value, numbers.Integral) or value < 1:
        raise TheoryInputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class Head(enum.Enum):
    """The output head a role puts on the backbone (Table I, Appendix B-A)."""

    POLICY = "policy"
    """Vocabulary projection V·d (actor π_θ, reference π_ref)."""
    SCALAR_LAST = "scalar_last_token"
    """Scalar head d, applied to the last token only (reward model R_φ)."""
    SCALAR_EVERY = "scalar_every_token"
    """Scalar head d, applied to every token (critic V_ψ)."""
    SHARED = "policy_and_scalar"
    """Both heads on one backbone (shared actor–critic π_SH); generation uses the policy head."""


@dataclass(frozen=True)
class TheoryModel:
    """The shape the theory reads (FORMULAS.md conventions). All fields are positive.

    L: layers (`num_hidden_layers`); d: width (`hidden_size`); d_ff: FFN width
    (`intermediate_size`); h: attention heads (`num_attention_heads`); V: vocabulary
    (`vocab_size`); E: experts per layer; E_a: active experts per token; d_e: expert width
    (defaults to d_ff, so a dense model is E = E_a = 1, d_e = d_ff).
    """

    L: int
    d: int
    d_ff: int
    h: int
    V: int
    E: int = 1
    E_a: int = 1
    d_e: int | None = None

    def __post_init__(self) -> None:
        for name in ("L", "d", "d_ff", "h", "V", "E", "E_a"):
            object.__setattr__(self, name, require_positive_int(name, getattr(self, name)))
        d_e = self.d_ff if self.d_e is None else require_positive_int("d_e", self.d_e)
        object.__setattr__(self, "d_e", d_e)
        if self.E_a > self.E:
            raise TheoryInputError(
                f"E_a (active experts per token, {self.E_a}) cannot exceed E (experts, {self.E})"
            )

    @property
    def is_moe(self) -> bool:
        """True when the FFN is a mixture of experts (E > 1)."""
        return self.E > 1

    @classmethod
    def from_spec(cls, spec: Any) -> TheoryModel:
        """Read L, d, d_ff, h, V (and E, E_a, d_e for MoE) from a model spec object.

        `spec` needs `num_hidden_layers`, `hidden_size`, `intermediate_size`,
        `num_attention_heads`, `vocab_size` and `moe` (None, or an object with `num_experts`,
        `experts_per_token`, `expert_intermediate_size`). Everything else in the spec (GQA,
        gating, shared experts, norms, biases) is the practical model's business.
        """

        def field(obj: Any, name: str, where: str) -> Any:
            if not hasattr(obj, name):
                raise TheoryInputError(f"{where} has no `{name}`; the theory needs it")
            return getattr(obj, name)

        moe = getattr(spec, "moe", None)
        d_ff = getattr(spec, "intermediate_size", None)
        kwargs: dict[str, Any] = {}
        if moe is not None:
            kwargs = {
                "E": field(moe, "num_experts", "the model spec's `moe`"),
                "E_a": field(moe, "experts_per_token", "the model spec's `moe`"),
                "d_e": field(moe, "expert_intermediate_size", "the model spec's `moe`"),
            }
            if d_ff is None:  # an all-MoE spec may leave the dense width out; the theory
                d_ff = kwargs["d_e"]  # replaces d_ff by d_e anyway
        elif d_ff is None:
            d_ff = field(spec, "intermediate_size", "the model spec")
        return cls(
            L=field(spec, "num_hidden_layers", "the model spec"),
            d=field(spec, "hidden_size", "the model spec"),
            d_ff=d_ff,
            h=field(spec, "num_attention_heads", "the model spec"),
            V=field(spec, "vocab_size", "the model spec"),
            **kwargs,
        )


@dataclass(frozen=True)
class WorkDepthMemory:
    """One table cell: work in FLOPs, depth in log2 steps, memory in elements."""

    work: float
    depth: float
    memory: float

    def as_dict(self) -> dict[str, float]:
        """The JSON form, `{"work", "depth", "memory"}` (DESIGN.md, analyze JSON)."""
        return {"work": self.work, "depth": self.depth, "memory": self.memory}

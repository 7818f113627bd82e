"""A checkpoint's `quantization_config`, read into the model spec.

rlplan prices training and assessment in bf16/fp32 (RL training updates full-precision
weights). The actor's rollouts follow the checkpoint where vLLM does: an FP8 checkpoint
(DeepSeek-V3's block-scaled e4m3, `FP8_METHODS`) is rolled out with FP8 weights unless the
scenario says `runtime.rollout_weights: bf16`. Other methods (gpt-oss's MXFP4 experts, AWQ,
GPTQ) are recorded and shown, and their rollouts priced in bf16.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InputError

# Bits per weight value of methods whose config does not state `bits` (the values alone; block
# scales come on top): FP8 formats (e4m3/e5m2) and the 4-bit microscaling formats.
_METHOD_BITS = {"fp8": 8, "fbgemm_fp8": 8, "mxfp4": 4, "nvfp4": 4}
# Methods whose checkpoints vLLM serves with FP8 weights (rlplan then rolls them out in FP8
# unless the scenario says otherwise: runtime.rollout_weights).
FP8_METHODS = frozenset({"fp8", "fbgemm_fp8"})


class QuantizationSpec(BaseModel):
    """What a config's quantization_config says about the stored weights."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str = Field(description="quant_method, e.g. fp8, mxfp4, awq, gptq")
    weight_bits: int | None = Field(None, gt=0, description="bits per weight value")
    weight_format: str | None = Field(None, description="element format, e.g. e4m3")
    block: tuple[int, ...] | None = Field(None, description="scale block (weight_block_size, "
                                          "or group_size for AWQ/GPTQ)")
    not_converted: tuple[str, ...] = Field((), description="modules kept unquantized")

    def describe(self) -> str:
        """'fp8 (e4m3, block 128×128)', 'mxfp4 (4-bit; 4 module patterns not converted)'."""
        parts = [self.weight_format or (f"{self.weight_bits}-bit" if self.weight_bits else "")]
        if self.block:
            parts.append(f"block {'×'.join(map(str, self.block))}")
        inner = ", ".join(p for p in parts if p)
        if self.not_converted:
            inner += f"; {len(self.not_converted)} module patterns not converted"
        return f"{self.method} ({inner})" if inner else self.method


def read_quantization(raw: Any, source: str) -> QuantizationSpec | None:
    """The `quantization_config` mapping of a config.json (None when absent)."""
    if raw is None:
        return None

    def bad(field: str, problem: str) -> InputError:
        return InputError(f"{source}: field 'quantization_config.{field}': {problem}")

    if not isinstance(raw, dict):
        raise InputError(f"{source}: field 'quantization_config': expects a mapping (got "
                         f"{type(raw).__name__}); give its fields or remove it")
    method = raw.get("quant_method")
    if not isinstance(method, str) or not method:
        raise bad("quant_method", "missing or not a string; name the method (e.g. fp8)")
    bits = raw.get("bits", _METHOD_BITS.get(method.lower()))
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits <= 0):
        raise bad("bits", f"expects a positive whole number (got {bits!r})")
    fmt = raw.get("fmt")
    if fmt is not None and not isinstance(fmt, str):
        raise bad("fmt", f"expects a string such as e4m3 (got {fmt!r})")
    block = raw.get("weight_block_size", raw.get("group_size"))
    field = "weight_block_size" if "weight_block_size" in raw else "group_size"
    if isinstance(block, int) and not isinstance(block, bool):
        block = [block]
    if block is not None and not (isinstance(block, list) and all(
            isinstance(b, int) and not isinstance(b, bool) for b in block)):
        raise bad(field, f"expects whole numbers (got {block!r})")
    # group_size −1 means one scale per column (AWQ/GPTQ): no block to state
    block = tuple(block) if block and all(b > 0 for b in block) else None
    skip = raw.get("modules_to_not_convert") or []
    if not (isinstance(skip, list) and all(isinstance(m, str) for m in skip)):
        raise bad("modules_to_not_convert", "expects a list of module names")
    return QuantizationSpec(method=method.lower(), weight_bits=bits, weight_format=fmt,
                            block=block, not_converted=tuple(skip))

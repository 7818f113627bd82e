"""A script's model (a Hugging Face id or a local path) → a model rlplan can load.

In order: a local config.json (or a folder holding one) that exists here; a shipped model whose
Hugging Face id (`_rlplan_hf_id` in model_specs/) or name is the script's, compared without
case; a shipped model the script's name extends with a suffix (`Qwen/Qwen2.5-7B-Instruct`,
`Qwen3-30B-A3B-Base`, a local folder `DeepSeek-V3-config-verl`): a variant is taken to have its
base model's architecture, and a note says so. Anything else is an error naming the model and
how to give its config.json (`--actor PATH`) — resolved only if no flag or scenario gives it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from planner.errors import InputError
from planner.importers.shell import Text
from planner.specs.model import shipped_models

ROLE_FLAGS = {"actor": "--actor", "critic": "--critic", "reward": "--reward",
              "reference": "--reference"}


@dataclass(frozen=True)
class ModelRef:
    """What the scenario's models.<role> gets from the script: a shipped name or a path, or
    the error to raise if nothing else gives that role."""

    value: str | None
    said: str  # as the script wrote it
    note: str | None = None
    error: str | None = None
    follows: str | None = None  # the role whose model the framework gives this one by default


@cache
def _catalog() -> dict[str, str]:
    """Lower-case Hugging Face id, its name part and the shipped name → shipped name."""
    out: dict[str, str] = {}
    for name, path in shipped_models().items():
        try:
            hf_id = json.loads(path.read_text(encoding="utf-8")).get("_rlplan_hf_id") or ""
        except (OSError, ValueError):
            hf_id = ""
        for key in (name, hf_id, hf_id.rsplit("/", 1)[-1]):
            if key:
                out.setdefault(key.lower(), name)
    return out


def model_ref(value: Text, key: str, role: str) -> ModelRef:
    said = value.text
    if not value.unset:
        path = Path(said).expanduser()
        if (path / "config.json").is_file() or (path.is_file() and path.suffix == ".json"):
            return ModelRef(str(path), said)
    catalog = _catalog()
    full = said.strip().rstrip("/").lower()
    base = full.rsplit("/", 1)[-1]
    for candidate in (full, base):
        if candidate in catalog:
            return ModelRef(catalog[candidate], said)
    variants = [k for k in catalog if "/" not in k and base.startswith(k + "-")
                and _variant_word(base[len(k) + 1:])]
    if variants:
        match = max(variants, key=len)
        name = catalog[match]
        return ModelRef(name, said, note=f"{key}={said}: read as the shipped {name} (a variant "
                        f"of it: same architecture assumed); give {ROLE_FLAGS[role]} PATH to "
                        "its own config.json otherwise")
    hub = "" if value.unset or said.startswith(("/", ".", "~")) or said.count("/") != 1 else \
        f" (https://huggingface.co/{said}/blob/main/config.json)"
    return ModelRef(None, said, error=(
        f"import: {key}={said}: {base or said} is not a shipped model (rlplan models); give "
        f"its config.json{hub} with {ROLE_FLAGS[role]} PATH (the file, or the model folder "
        f"holding it), or a shipped model of the same architecture with {ROLE_FLAGS[role]} "
        "NAME"))


# The first word after a shipped model's name that marks a variant of the same architecture:
# tuned (Instruct, Chat, SFT, RLHF...), base, thinking, a dated release, a framework's copy of
# the config ("-config-verl"). "Phi-4-mini" or "Qwen3-8B-Vision" are other models, not variants.
VARIANT_WORDS = frozenset({"instruct", "chat", "base", "it", "thinking", "hf", "config", "sft",
                           "rlhf", "dpo", "ppo", "grpo", "rl", "math", "reasoning", "distill"})


def _variant_word(suffix: str) -> bool:
    word = suffix.split("-", 1)[0]
    return word in VARIANT_WORDS or word.isdigit()


def shape_match(shape: dict[str, int]) -> str | None:
    """The shipped model with exactly this shape (config.json field → value), if any."""
    for name, path in shipped_models().items():
        cfg = json.loads(path.read_text(encoding="utf-8"))
        cfg.setdefault("num_key_value_heads", cfg.get("num_attention_heads"))
        if all(cfg.get(k) == v for k, v in shape.items()):
            return name
    return None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def missing_model(ref: ModelRef) -> InputError:
    return InputError(ref.error or f"import: no model for {ref.said}")

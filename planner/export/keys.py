"""The frameworks' own key lists (shipped in `planner/export/keys/`, see SOURCE.md there).

Every exporter checks each key it writes against the list of the version it targets, so a
config never names a key the framework lacks.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from planner.errors import InputError
from planner.export.base import ExportError

VERL_COMMIT = "b178a3cd"
OPENRLHF_VERSIONS = ("v0.9.5", "head-3c3be623-2026-08")

# (schema, version) → the shipped file. A verl backend is a schema: its two generated trainer
# configs have different keys at one commit.
KEY_FILES: dict[tuple[str, str], str] = {
    ("verl-fsdp", VERL_COMMIT): "verl_fsdp_keys.txt",
    ("verl-megatron", VERL_COMMIT): "verl_megatron_keys.txt",
    **{("openrlhf-train_ppo_ray", v): f"openrlhf_train_ppo_ray_{v}.txt" for v in OPENRLHF_VERSIONS},
    **{("openrlhf-train_dpo", v): f"openrlhf_train_dpo_{v}.txt" for v in OPENRLHF_VERSIONS},
}

# Dicts docs/exports.md (§1.1, §1.4, §1.5) shows being extended with Hydra's `+key=value`: keys
# under them that the generated config lacks are written with a `+` prefix.
VERL_PLUS_PARENTS = ("megatron.override_transformer_config", "optim.override_optimizer_config",
                     "rollout.engine_kwargs.vllm")


@cache
def key_set(schema: str, version: str) -> frozenset[str]:
    """Every key of `schema` at `version`, read from the shipped list."""
    name = KEY_FILES.get((schema, version))
    if name is None:
        known = ", ".join(f"{s} {v}" for s, v in KEY_FILES)
        raise InputError(f"no key list for {schema} {version}; known: {known}")
    text = files("planner.export").joinpath("keys", name).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))


def has_key(schema: str, version: str, key: str) -> bool:
    """Does `key` exist in version `version` of `schema`?"""
    return key in key_set(schema, version)


def verl_key_ok(schema: str, key: str) -> bool:
    """A verl override key is valid if the generated config has it, or, with a `+` prefix, if
    it is new (Hydra refuses `+` on an existing key) under a dict docs/exports.md extends that
    way."""
    keys = key_set(schema, VERL_COMMIT)
    if not key.startswith("+"):
        return key in keys
    bare = key[1:]
    if bare in keys:
        return False
    for parent in VERL_PLUS_PARENTS:  # e.g. critic.megatron.override_transformer_config.X
        owner, found, _ = bare.partition(f".{parent}.")
        if found and f"{owner}.{parent}" in keys:
            return True
    return False


def check_keys(schema: str, version: str, keys: list[str]) -> None:
    """Raise ExportError naming every key `version` of `schema` lacks."""
    valid = (lambda k: verl_key_ok(schema, k)) if schema.startswith("verl") else (
        lambda k: has_key(schema, version, k))
    missing = [k for k in keys if not valid(k)]
    if missing:
        raise ExportError(f"{schema} {version} has no key {', '.join(missing)}; this is a bug "
                          "in the exporter — please report it")

"""The frameworks' own key lists (shipped in `planner/export/keys/`, see SOURCE.md there).

The lists are generated from the installed releases by tools/refresh_keys.py. Every exporter
checks each key it writes against the list of the version it targets, so a config never names
a key the framework lacks.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from planner.errors import InputError
from planner.export.base import ExportError

# Releases each exporter targets, newest (the default) first. OpenRLHF 0.10.2–0.11.2 parse the
# dotted flags (0.11.2's list); v0.9.5 the flat ones, still in use. DeepSpeed's ds_config and
# Megatron-LM's flags have no shipped list: tests/export/test_frameworks.py checks them with
# DeepSpeed's own config class and megatron-core 0.19.2's parse_args/validate_args (its cp312
# wheel, fetched by the tests; README, Exports).
VERSIONS: dict[str, tuple[str, ...]] = {
    "verl": ("0.9.1",),
    "openrlhf": ("0.11.2", "0.9.5"),
    "deepspeed": ("0.19.8",),
    "megatron": ("0.19.2",),
    "nemo-rl": ("0.6",),  # its preset's release; keys copied from docs/exports.md §5
}
VERL_VERSION = VERSIONS["verl"][0]
OPENRLHF_VERSIONS = VERSIONS["openrlhf"]

# schema → the shipped file's suffix: `{framework}_{version}_{suffix}.txt`. A verl backend is a
# schema: its two generated trainer configs have different keys in one release.
SCHEMAS = {"verl-fsdp": ("verl", "fsdp"), "verl-megatron": ("verl", "megatron"),
           "openrlhf-train_ppo_ray": ("openrlhf", "train_ppo_ray"),
           "openrlhf-train_dpo": ("openrlhf", "train_dpo"),
           "nemo-rl": ("nemo-rl", "config")}
KEY_FILES: dict[tuple[str, str], str] = {
    (schema, version): f"{framework}_{version}_{suffix}.txt"
    for schema, (framework, suffix) in SCHEMAS.items() for version in VERSIONS[framework]}

# Dicts verl's docs show being extended with Hydra's `+key=value` (docs/exports.md §1.1, §1.4,
# §1.5): keys under them that the generated config lacks are written with a `+` prefix.
VERL_PLUS_PARENTS = ("megatron.override_transformer_config", "optim.override_optimizer_config",
                     "rollout.engine_kwargs.vllm", "rollout.engine_kwargs.sglang")


def check_version(fmt: str, version: str | None) -> str:
    """The version to export for (the newest by default); bad input names the known ones."""
    known = VERSIONS[fmt]
    if version is None:
        return known[0]
    if version not in known:
        raise InputError(f"--framework-version: {fmt} has no version '{version}' here; choose "
                         f"{' or '.join(known)} (default {known[0]})")
    return version


@cache
def key_set(schema: str, version: str) -> frozenset[str]:
    """Every key of `schema` at `version`, read from the shipped list."""
    name = KEY_FILES.get((schema, version))
    if name is None:
        known = ", ".join(f"{s} {v}" for s, v in KEY_FILES)
        raise InputError(f"no key list for {schema} {version}; known: {known}")
    return frozenset(key for key, _ in _entries(name))


def _entries(name: str) -> list[tuple[str, str]]:
    """(key, its mark) of each line of a shipped list: `key [unverified]` marks a key the
    list's source does not show (keys/SOURCE.md)."""
    text = files("planner.export").joinpath("keys", name).read_text(encoding="utf-8")
    return [(words[0], " ".join(words[1:])) for line in text.splitlines()
            if line.strip() and not line.startswith("#") for words in [line.split()]]


@cache
def unverified_keys(schema: str, version: str) -> frozenset[str]:
    """The keys of `schema` at `version` its list marks [unverified]."""
    return frozenset(key for key, mark in _entries(KEY_FILES[(schema, version)])
                     if mark == "[unverified]")


@cache
def _prefixes(schema: str, version: str) -> frozenset[str]:
    """Every key and every dict above a key."""
    out = set()
    for key in key_set(schema, version):
        parts = key.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return frozenset(out)


def has_key(schema: str, version: str, key: str) -> bool:
    """Does `key` exist in version `version` of `schema`?"""
    return key in key_set(schema, version)


def verl_key_ok(schema: str, key: str, version: str = VERL_VERSION) -> bool:
    """A verl override key is valid if the generated config has it, or, with a `+` prefix, if
    it is new (Hydra refuses `+` on an existing key) under a dict verl's docs extend that way;
    with `++` (Hydra's add-or-override), either."""
    keys = key_set(schema, version)
    if not key.startswith("+"):
        return key in keys
    forced, bare = key.startswith("++"), key.lstrip("+")
    if bare in _prefixes(schema, version):
        return forced and bare in keys
    for parent in VERL_PLUS_PARENTS:  # e.g. critic.megatron.override_transformer_config.X
        owner, found, _ = bare.partition(f".{parent}.")
        if found and f"{owner}.{parent}" in _prefixes(schema, version):
            return True
    return False


def check_keys(schema: str, version: str, keys: list[str]) -> None:
    """Raise ExportError naming every key `version` of `schema` lacks."""
    valid = (lambda k: verl_key_ok(schema, k, version)) if schema.startswith("verl") else (
        lambda k: has_key(schema, version, k))
    missing = [k for k in keys if not valid(k)]
    if missing:
        raise ExportError(f"{schema} {version} has no key {', '.join(missing)}; this is a bug "
                          "in the exporter — please report it")

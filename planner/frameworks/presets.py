"""Framework presets: one YAML file per release in `planner/frameworks/presets/`
(`<framework>@<version>.yaml`, shipped as package data), every value with its source.

A preset holds what a framework does that the planner prices or restricts: the runtime
settings the cost model prices (`runtime:`, `RuntimeInput` fields: the defaults of a scenario
that names the framework, under what the scenario sets itself), its rollout engine's defaults,
training micro-batching, how frozen models are sharded, and its capabilities (algorithms,
layout rules, placements, inter-model options). `load_preset` validates a file strictly and
`Preset.capabilities` turns it into the `Capabilities` the search and the exporters use.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import InputError
from planner.frameworks.capabilities import (
    PARTIAL_ROLLOUTS,
    RELATIONS,
    Capabilities,
    Follow,
    GroupPattern,
    Options,
    Rule,
)
from planner.frameworks.conditions import FIELDS, check_condition, holds
from planner.specs.files import parse_yaml, validate_as
from planner.specs.runtime import RuntimeInput
from planner.specs.workload import ALGORITHMS

TASKS = ("actor.generation", "actor.training", "critic.training", "reference.forward",
         "reward.forward")
"""The search's task names, which placement patterns list."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fact(_Strict):
    """A value and where it comes from (a config file and key, a docs page, a calibration)."""

    value: Any
    source: str = Field(min_length=1)


class Flag(Fact):
    value: bool


class Count(Fact):
    value: int = Field(gt=0)


class Fraction(Fact):
    value: float = Field(gt=0, le=1)


class Text(Fact):
    value: str = Field(min_length=1)


class EngineDefaults(_Strict):
    """The rollout engine as the framework starts it when the user sets nothing."""

    name: Text
    tensor_parallel_size: Count
    # None: the engine has no such setting, or the framework leaves the engine's own default
    gpu_memory_utilization: Fraction | None = None
    max_num_seqs: Count | None = None
    cuda_graphs: Flag
    chunked_prefill: Flag


class TrainingDefaults(_Strict):
    backend: Text
    dynamic_batch_size: Flag
    sequence_packing: Flag


class FrozenDefaults(_Strict):
    """How the framework shards the models it does not train."""

    reference: Text
    reward: Text


class RuleInput(_Strict):
    """A layout rule: for layouts of `kind` where `when` holds, `require` must hold, else
    `why` (formatted with `where` and the layout's fields) says what the framework does."""

    kind: Literal["generation", "training", "forward"]
    role: Literal["actor", "critic", "reference", "reward"] | None = None  # None: every role
    when: dict[str, Any] = {}
    require: dict[str, Any]
    why: str = Field(min_length=1)
    source: str = Field(min_length=1)
    refuse: bool = True

    @model_validator(mode="after")
    def _conditions(self) -> RuleInput:
        check_condition(self.when, "when")
        check_condition(self.require, "require")
        try:
            self.why.format(where="w", **{f: 1 for f in FIELDS})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"why: a placeholder other than {{where}} or a layout field "
                             f"({', '.join(FIELDS)}): {exc}") from None
        return self

    def rule(self) -> Rule:
        when, require, why = self.when, self.require, self.why

        def ok(x: Any, spec: Any) -> Any:
            return ~_array(holds(when, x, spec)) | _array(holds(require, x, spec))

        def say(where: str, x: Any) -> str:
            return why.format(where=where, **{f: getattr(x, f) for f in FIELDS})

        return Rule(self.kind, ok, say, self.refuse, self.fix(), self.role)

    def fix(self) -> dict[str, Any] | None:
        """The layout fields that satisfy `require` when it names fields alone, each at its
        value or bound (`zero: 3`, `zero: {max: 1}` → zero 1); None otherwise."""
        out: dict[str, Any] = {}
        for key, want in self.require.items():
            if key not in FIELDS:
                return None
            if not isinstance(want, dict):
                out[key] = want
            elif "max" in want or "min" in want:
                out[key] = want.get("max", want.get("min"))
            else:
                return None
        return out


def _array(value: Any) -> Any:
    import numpy as np

    return np.asarray(value, dtype=bool)


class PatternInput(_Strict):
    tasks: list[Literal[TASKS]] | Literal["all"]  # type: ignore[valid-type]
    staleness: Literal["on_policy", "off_policy"] | None = None
    online: bool = False

    def pattern(self) -> GroupPattern:
        return GroupPattern(None if self.tasks == "all" else frozenset(self.tasks),
                            self.staleness, self.online)


class FollowInput(_Strict):
    """A task laid out after another's (`Follow`): `same` fields equal, and `relation`."""

    task: Literal[TASKS]  # type: ignore[valid-type]
    trainer: Literal["actor.training"]
    same: list[Literal[FIELDS]] = []  # type: ignore[valid-type]
    relation: Literal[tuple(RELATIONS)] | None = None  # type: ignore[valid-type]
    why: str = Field(min_length=1)

    def follow(self) -> Follow:
        return Follow(self.task, self.trainer, tuple(self.same), self.relation, self.why)


class FollowsInput(_Strict):
    source: str = Field(min_length=1)
    rules: list[FollowInput] = Field(min_length=1)


class GroupsInput(_Strict):
    """The task sets one group may hold (`GroupPattern`); a group matching none is refused."""

    source: str = Field(min_length=1)
    patterns: list[PatternInput] = Field(min_length=1)


class PartialRollout(Fact):
    value: Literal[tuple(PARTIAL_ROLLOUTS)]  # type: ignore[valid-type]


class OptionsInput(_Strict):
    fusion: Flag
    overlap_weight_sync: Flag
    shared_actor_critic: Flag
    partial_rollout: PartialRollout


class Algorithms(Fact):
    value: list[str] = Field(min_length=1)

    @field_validator("value")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [a for a in value if a not in ALGORITHMS]
        if unknown:
            raise ValueError(f"unknown algorithm(s) {', '.join(unknown)}; the planner's are "
                             f"{', '.join(ALGORITHMS)}")
        return value


class CapabilitiesInput(_Strict):
    algorithms: Algorithms
    reward_model: Flag  # runs a reward model (else rewards come from rule-based verifiers)
    mixed_pools: Flag  # places groups on pools of different GPU types
    sequence_parallel: Flag | None = None  # training TP with sequence parallelism (None: yes)
    whole_nodes: Flag
    whole_cluster: Flag | None = None  # the groups together sized in whole nodes (None: no)
    options: OptionsInput
    rules: list[RuleInput] = []
    groups: GroupsInput | None = None  # None: any placement (a trainer-only export)
    follows: FollowsInput | None = None  # None: every task's layout is its own


class Preset(_Strict):
    """One framework release's preset file."""

    framework: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    version: str = Field(pattern=r"^\d+(\.\d+)*$")
    label: str = Field(min_length=1, description="the release in words, e.g. 'verl 0.9.1'")
    export_format: str | None = Field(description="`rlplan export --format` for it; None: "
                                      "no exporter yet")
    runtime: dict[str, Fact]
    engine: EngineDefaults | None = Field(description="None: the framework has no rollout "
                                          "engine (a trainer-only export)")
    training: TrainingDefaults
    frozen: FrozenDefaults
    capabilities: CapabilitiesInput

    @field_validator("runtime")
    @classmethod
    def _runtime_fields(cls, value: dict[str, Fact]) -> dict[str, Fact]:
        known = set(RuntimeInput.model_fields)
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown runtime field(s) {', '.join(unknown)}; a preset sets "
                             f"scenario runtime fields ({', '.join(sorted(known))})")
        RuntimeInput(**{k: f.value for k, f in value.items() if k in RuntimeInput.model_fields})
        return value

    @property
    def name(self) -> str:
        return f"{self.framework}@{self.version}"

    def runtime_defaults(self) -> dict[str, Any]:
        """The `runtime:` fields the framework sets, as scenario values."""
        return {k: f.value for k, f in self.runtime.items()}

    def caps(self) -> Capabilities:
        """The capabilities the search and the exporters use (`capabilities` caches them)."""
        c = self.capabilities
        o = c.options
        return Capabilities(
            framework=self.name, label=self.label, algorithms=frozenset(c.algorithms.value),
            reward_model=c.reward_model.value, mixed_pools=c.mixed_pools.value,
            rules=tuple(r.rule() for r in c.rules),
            options=Options(fusion=o.fusion.value, overlap_weight_sync=o.overlap_weight_sync.value,
                            shared_actor_critic=o.shared_actor_critic.value,
                            partial_rollout=o.partial_rollout.value),
            groups=None if c.groups is None else tuple(p.pattern() for p in c.groups.patterns),
            whole_nodes=c.whole_nodes.value,
            whole_cluster=c.whole_cluster is not None and c.whole_cluster.value,
            sequence_parallel=c.sequence_parallel is None or c.sequence_parallel.value,
            follows=() if c.follows is None else tuple(f.follow() for f in c.follows.rules))


PRESETS = files("planner.frameworks") / "presets"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@cache
def releases() -> dict[str, tuple[str, ...]]:
    """Framework → its releases with a preset, newest first."""
    out: dict[str, list[str]] = {}
    for entry in PRESETS.iterdir():
        if entry.name.endswith(".yaml") and "@" in entry.name:
            framework, version = entry.name.removesuffix(".yaml").split("@", 1)
            out.setdefault(framework, []).append(version)
    return {f: tuple(sorted(v, key=_version_key, reverse=True)) for f, v in sorted(out.items())}


def parse_name(text: str, where: str = "--framework") -> str:
    """'verl', 'openrlhf@0.9.5', … → 'framework@version' (the newest release unless given);
    bad input names the known frameworks and releases."""
    known = releases()
    framework, _, version = str(text).strip().lower().partition("@")
    if framework not in known:
        raise InputError(f"{where}: unknown framework '{framework}'; choose one of "
                         f"{', '.join(known)} (optionally @VERSION)")
    if not version:
        return f"{framework}@{known[framework][0]}"
    if version not in known[framework]:
        raise InputError(f"{where}: {framework} has no preset for version '{version}'; choose "
                         f"{' or '.join(known[framework])} (default {known[framework][0]})")
    return f"{framework}@{version}"


@cache
def load_preset(name: str) -> Preset:
    """The preset of release `name` ('verl@0.9.1'; 'verl' for the newest), validated."""
    name = parse_name(name, "framework")
    entry = PRESETS / f"{name}.yaml"
    text = entry.read_text(encoding="utf-8")
    preset = validate_as(Preset, parse_yaml(text, entry.name, shipped=True), f"preset {entry.name}")
    if preset.name != name:
        raise InputError(f"preset {entry.name}: it says framework {preset.name}; the file name "
                         "and its framework/version must agree")
    return preset


def release_of(fmt: str, release: str) -> str:
    """The preset of the release an imported script is written for (its reader's `fmt` and
    `Reading.release` words): OpenRLHF's flat flags are ≤ v0.9.5's, the others the newest
    preset's."""
    return parse_name("openrlhf@0.9.5" if fmt == "openrlhf" and "flat" in release else fmt)


def all_presets() -> list[Preset]:
    """Every shipped release's preset, by framework, newest first."""
    return [load_preset(f"{f}@{v}") for f, versions in releases().items() for v in versions]


@cache
def capabilities(name: str) -> Capabilities:
    """What release `name` runs as planned (its preset's `capabilities`)."""
    return load_preset(name).caps()


def framework_runtime(name: str, algorithm: str, reward_kind: str, runtime: RuntimeInput,
                      where: str) -> tuple[RuntimeInput, list[str]]:
    """The runtime a scenario naming release `name` is priced with — its preset's runtime
    defaults under the fields the scenario sets itself (`runtime.model_fields_set`) — and the
    note saying what the preset set; refuses (InputError, `where` first) an algorithm or a
    reward model the release does not run."""
    caps = capabilities(name)
    if algorithm not in caps.algorithms:
        raise InputError(f"{where}: {caps.label} has no {algorithm} trainer (it runs "
                         f"{', '.join(sorted(caps.algorithms))}); choose another framework "
                         "(--framework) or algorithm (--algo)")
    if reward_kind == "model" and not caps.reward_model:
        raise InputError(f"{where}: {caps.label} runs no reward model (its rewards come from "
                         "rule-based verifiers); set models.reward to verifier (--reward "
                         "verifier) or choose another framework (--framework)")
    taken = {k: v for k, v in load_preset(name).runtime_defaults().items()
             if k not in runtime.model_fields_set}
    changed = [f"{k} {v}" for k, v in taken.items()
               if v != RuntimeInput.model_fields[k].default]
    notes = ([f"runtime from the {name} preset: {', '.join(changed)} (a runtime field the "
              "scenario sets wins)"] if changed else [])
    return RuntimeInput(**(runtime.model_dump() | taken)), notes

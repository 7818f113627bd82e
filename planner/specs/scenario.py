"""The scenario file (DESIGN.md): algorithm, models, workload, runtime, cluster and search.

`load_scenario` reads the YAML, applies CLI overrides (flag > file > default), validates every
field, resolves model names and the cluster, and checks the pieces against each other (a PPO
run needs a critic; GRPO needs two samples per prompt; mini-batches divide the step). What it
decides on the user's behalf (a default critic, an ignored field) is listed in `notes`.
Resolution also turns `workload.response_lengths` into a `LengthDistribution` (reading a file of
observed lengths, relative to the scenario's folder) and fills in response_len from it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.errors import InputError
from planner.specs.files import (
    looks_like_path,
    path_kind,
    read_mapping,
    unknown_name,
    validate_as,
)
from planner.specs.hardware import ClusterInput, ClusterSpec
from planner.specs.lengths import LengthDistribution, resolve_lengths, sample_lengths
from planner.specs.model import ModelSpec, load_model
from planner.specs.pools import Pool, resolve_pools
from planner.specs.quantization import FP8_METHODS
from planner.specs.runtime import TRAINING_PRECISIONS, RuntimeInput
from planner.specs.search import SearchInput
from planner.specs.workload import ALGORITHMS, Family, Workload, WorkloadInput

ROLES = ("actor", "reference", "reward", "critic")
SAME_AS_ACTOR = "actor"
NONE = "none"
VERIFIER = "verifier"

# CLI flag → scenario field (DESIGN.md: every field is also a flag).
SCENARIO_FLAGS: dict[str, str] = {
    "algo": "algorithm",
    "actor": "models.actor",
    "reference": "models.reference",
    "reward": "models.reward",
    "critic": "models.critic",
    "prompts": "workload.prompts_per_step",
    "samples": "workload.samples_per_prompt",
    "prompt_len": "workload.prompt_len",
    "response_len": "workload.response_len",
    "max_response_len": "workload.max_response_len",
    "ppo_epochs": "workload.ppo_epochs",
    "mini_batches": "workload.mini_batches",
    "engine": "runtime.engine",
    "rollout_weights": "runtime.rollout_weights",
    "kv_cache_dtype": "runtime.kv_cache_dtype",
    "old_log_probs": "runtime.old_log_probs",
    "controller_us_per_token": "runtime.controller_us_per_token",
    "refit": "runtime.refit",
    "gpu": "cluster.gpu",
    "nodes": "cluster.nodes",
    "gpus_per_node": "cluster.gpus_per_node",
    "price": "cluster.price_usd_per_gpu_hour",
    "objective": "search.objective",
    "target_tokens_per_s": "search.target_tokens_per_s",
    "max_staleness": "search.max_staleness",
    "memory_headroom": "search.memory_headroom",
    "min_cp_chunk": "search.min_cp_chunk",
    "every_pp": "search.every_pp",
    "time_limit": "search.time_limit_s",
    "framework": "framework",
}
# What to pass when a scenario built from flags alone lacks a field (or a whole section).
_FLAGS_FOR_MISSING = {path: "--" + flag.replace("_", "-") for flag, path in SCENARIO_FLAGS.items()}
_FLAGS_FOR_MISSING |= {"models": "--actor", "cluster": "--gpu and --nodes",
                       "workload": "--prompts, --samples, --prompt-len and --response-len"}


class ModelsInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    actor: str = Field(min_length=1)
    reference: str | None = Field(None, description="'actor' (same architecture), 'none', or a "
                                  "model; default: what the algorithm uses")
    reward: str | None = Field(None, description="a model, 'verifier' (rule-based) or 'none'; "
                               "default 'verifier'")
    critic: str | None = Field(None, description="PPO only; default: the actor's architecture")


class ScenarioInput(BaseModel):
    """The scenario file as written (names, not yet resolved)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: str
    framework: str | None = Field(None, description="the framework release the plan is for "
                                  "('verl@0.9.1', or a name alone for its newest preset): the "
                                  "search offers only what it runs, priced with its preset's "
                                  "runtime defaults under the fields set here")
    models: ModelsInput
    workload: WorkloadInput
    runtime: RuntimeInput = RuntimeInput()
    cluster: ClusterInput
    search: SearchInput = SearchInput()

    def written(self) -> dict[str, Any]:
        """The scenario as a plan JSON carries it: the runtime fields it sets itself only, so
        a framework's preset fills the rest again when it is read back."""
        out = self.model_dump(mode="json", exclude_none=True)
        out["runtime"] = self.runtime.model_dump(mode="json", exclude_unset=True)
        if not out["runtime"]:
            del out["runtime"]
        return out

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from planner.frameworks import parse_name  # the presets load only when one is named

        try:
            return parse_name(value, "framework")
        except InputError as exc:
            raise ValueError(str(exc).removeprefix("framework: ")) from None

    @field_validator("cluster", mode="before")
    @classmethod
    def _preset_name(cls, value: Any) -> Any:
        return {"preset": value} if isinstance(value, str) else value

    @field_validator("algorithm")
    @classmethod
    def _known_algorithm(cls, value: str) -> str:
        value = value.lower()
        if value not in ALGORITHMS:
            raise ValueError(str(unknown_name("algorithm", value, list(ALGORITHMS),
                                              f"choose one of {', '.join(ALGORITHMS)}")))
        return value


class Scenario(BaseModel):
    """A resolved scenario: model specs loaded, cluster built, cross-checks passed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: str
    family: Family
    framework: str | None = Field(None, description="the framework release planned for "
                                  "(`ScenarioInput.framework`, resolved to name@version)")
    actor: ModelSpec
    reference: ModelSpec | None
    reward: ModelSpec | None
    reward_kind: Literal["model", "verifier", "none"]
    critic: ModelSpec | None
    workload: Workload
    length_distribution: LengthDistribution = Field(description="the resolved response-length "
                                                    "distribution (see planner.specs.lengths)")
    runtime: RuntimeInput = RuntimeInput()
    cluster: ClusterSpec = Field(description="the first pool's cluster (the only one of a "
                                 "single-pool scenario, or of an `on_pool` view)")
    pools: tuple[Pool, ...] = Field(default=(), description="two or more pools, the first's "
                                    "cluster being `cluster`; empty: `cluster` alone")
    inter_pool_gbps: float | None = Field(None, description="the link between pools, GB/s per "
                                          "GPU per direction (None with one pool)")
    search: SearchInput
    notes: tuple[str, ...] = ()
    source_input: ScenarioInput | None = Field(None, description="the scenario as written "
                                               "(with overrides), carried into the plan JSON")

    @property
    def pool_list(self) -> tuple[Pool, ...]:
        """The pools (one, named after the cluster, when the scenario lists none)."""
        return self.pools or (Pool(name=self.cluster.name or self.cluster.gpu.name,
                                   cluster=self.cluster),)

    @property
    def multi_pool(self) -> bool:
        """More than one pool: plan groups name theirs (`"pool"`)."""
        return len(self.pools) > 1

    @property
    def total_gpus(self) -> int:
        return sum(p.cluster.total_gpus for p in self.pool_list)

    def gpus_words(self, used: dict[str | None, int] | None = None) -> str:
        """'32× h100-sxm', or '16× h100-sxm (train) + 64× h20 (rollout)'; with `used` (GPUs
        per pool name, None for the only one) 'U of N×' where a pool is not used whole."""
        def one(p: Pool, key: str | None) -> str:
            n = p.cluster.total_gpus
            k = n if used is None else used.get(key, 0)
            return f"{k} of {n}× " if k < n else f"{n}× "

        if not self.multi_pool:
            return one(self.pool_list[0], None) + self.cluster.gpu.name
        return " + ".join(one(p, p.name) + f"{p.cluster.gpu.name} ({p.name})"
                          for p in self.pools)

    def pool(self, name: str | None) -> Pool:
        """The pool called `name` (None: the only one); InputError naming the pools if none
        is."""
        pools = self.pool_list
        if name is None and len(pools) == 1:
            return pools[0]
        found = next((p for p in pools if p.name == name), None)
        if found is None:
            names = ", ".join(p.name for p in pools)
            raise InputError(f"no pool named '{name}'; the cluster's pools are {names}"
                             if name is not None else f"the cluster has pools {names}; name "
                             "one in each group ('pool')")
        return found

    def on_pool(self, name: str | None) -> Scenario:
        """This scenario as if its cluster were pool `name` alone: what the cost model prices
        a task on that pool with."""
        pool = self.pool(name)
        if not self.multi_pool:
            return self
        return self.model_copy(update={"cluster": pool.cluster, "pools": (pool,),
                                       "inter_pool_gbps": None})

    @property
    def roles(self) -> dict[str, ModelSpec]:
        """The models this scenario runs, by role (absent roles are missing)."""
        return {r: m for r in ROLES if (m := getattr(self, r)) is not None}

    @property
    def rollout_weights(self) -> Literal["bf16", "fp8"]:
        """The actor's weight precision in the rollout engine, `auto` resolved: FP8 when its
        checkpoint is stored in FP8 (vLLM serves such a checkpoint as stored)."""
        if self.runtime.rollout_weights != "auto":
            return self.runtime.rollout_weights
        q = self.actor.quantization
        return "fp8" if q is not None and q.method.lower() in FP8_METHODS else "bf16"

    @property
    def precisions(self) -> dict[str, str]:
        """What each stage computes in (the plan says it): rollout weights and KV cache,
        assessment and training."""
        return {"generation": f"{self.rollout_weights} weights, "
                              f"{self.runtime.kv_cache_dtype} KV cache",
                "assessment": "bf16",
                "training": TRAINING_PRECISIONS[self.runtime.training_states]
                + ("" if self.runtime.fp8_training == "none"
                   else f"; FP8 linear layers ({self.runtime.fp8_training})")}

    @property
    def sequences_per_step(self) -> int:
        """B·K for PPO/GRPO, B preference pairs for DPO, B sequences for SFT."""
        w = self.workload
        return w.prompts_per_step * (1 if self.family.offline else w.samples_per_prompt)

    @property
    def response_lengths(self) -> np.ndarray:
        """The step's sequences_per_step response lengths (int64, read-only), deterministic
        and computed once per distribution and size (cached in `sample_lengths`)."""
        return sample_lengths(self.length_distribution, self.sequences_per_step)

    def summary(self) -> dict[str, Any]:
        """A compact JSON view: names instead of full specs."""
        w = self.workload
        lengths = (None if self.family.offline
                   else self.length_distribution.describe(self.sequences_per_step))
        return {
            "algorithm": self.algorithm, "family": self.family.value,
            "models": {r: {"name": m.name, "params_total": m.params_total,
                           "params_active": m.params_active} for r, m in self.roles.items()},
            "reward_kind": self.reward_kind,
            "workload": w.model_dump(exclude={"response_lengths"})
            | {"max_response_len": w.max_response, "response_lengths": lengths},
            "runtime": self.runtime.model_dump(),
            "cluster": self._cluster_summary(),
            "search": self.search.model_dump(),
            "notes": list(self.notes),
        }


    def _cluster_summary(self) -> dict[str, Any]:
        c = self.cluster
        if not self.multi_pool:
            return {"name": c.name, "gpu": c.gpu.name, "nodes": c.nodes,
                    "gpus_per_node": c.gpus_per_node, "total_gpus": c.total_gpus}
        pools = [{"name": p.name, "gpu": p.cluster.gpu.name, "nodes": p.cluster.nodes,
                  "gpus_per_node": p.cluster.gpus_per_node, "total_gpus": p.cluster.total_gpus}
                 for p in self.pools]
        return {"name": None, "gpu": " + ".join(p["gpu"] for p in pools),
                "nodes": sum(p["nodes"] for p in pools), "gpus_per_node": None,
                "total_gpus": self.total_gpus, "pools": pools,
                "inter_pool_gbps": self.inter_pool_gbps}


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `raw` with each dotted-path override set (None values are skipped)."""
    out = copy.deepcopy(raw)
    for path, value in overrides.items():
        if value is None:
            continue
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            child = node.get(key)
            if isinstance(child, str) and key == "cluster":  # a preset name, now with overrides
                child = {"preset": child}
            if not isinstance(child, dict):
                child = {}
            node[key] = child
            node = child
        node[leaf] = value
    return out


def _anchor_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """Relative model/profile/lengths paths in a file are read relative to that file's
    folder."""
    out = copy.deepcopy(raw)

    def anchor(value: Any) -> Any:
        if isinstance(value, str) and looks_like_path(value) and not Path(value).is_absolute():
            candidate = base / value
            return str(candidate) if path_kind(candidate) else value
        return value

    if isinstance(out.get("models"), dict):
        out["models"] = {k: anchor(v) for k, v in out["models"].items()}
    if isinstance(out.get("cluster"), dict):
        out["cluster"] = {k: anchor(v) if k in ("gpu", "preset") else v
                          for k, v in out["cluster"].items()}
    workload = out.get("workload")
    lengths = workload.get("response_lengths") if isinstance(workload, dict) else None
    if isinstance(lengths, dict) and isinstance(lengths.get("file"), str):
        # always anchored (a bare 'lengths.txt' does not look like a path), so that an error
        # names the file that was looked for
        file = Path(lengths["file"]).expanduser()
        lengths["file"] = str(file if file.is_absolute() else base / file)
    return out


def _load_role(ref: str, field: str, source: str) -> ModelSpec:
    try:
        return load_model(ref)
    except InputError as exc:
        raise InputError(f"{source}: field 'models.{field}': {exc}") from None


def _model_notes(roles: dict[str, ModelSpec | None], rollout_weights: str) -> list[str]:
    """What each model's config left to rlplan (its notes) and a quantized checkpoint, once
    per model (roles sharing a spec share the note); `rollout_weights` as written."""
    out: list[str] = []
    seen: set[int] = set()
    for role, spec in roles.items():
        if spec is None or id(spec) in seen:
            continue
        seen.add(id(spec))
        out += [f"{role} {spec.name}: {note}" for note in spec.notes]
        q = spec.quantization
        if q is None:
            continue
        rollout = ""
        if role == "actor" and rollout_weights == "auto" and q.method.lower() in FP8_METHODS:
            rollout = (" rolled out with FP8 weights as stored (runtime.rollout_weights: bf16, "
                       "or --rollout-weights bf16, prices BF16 rollouts);")
        out.append(f"{role} {spec.name}: checkpoint quantization {q.describe()} read:{rollout} "
                   "trained and scored in bf16")
    return out


def resolve(inp: ScenarioInput, source: str, price_flag: bool = False) -> Scenario:
    """Load models and cluster and check the scenario's pieces against each other
    (`price_flag`: the cluster's price came from --price, not the file)."""
    info = ALGORITHMS[inp.algorithm]
    family, m, w_in = info.family, inp.models, inp.workload
    notes: list[str] = []

    def bad(field: str, problem: str) -> InputError:
        return InputError(f"{source}: field '{field}': {problem}")

    if m.actor.lower() == SAME_AS_ACTOR:
        raise bad("models.actor", "'actor' names the actor itself; give a model name or path")
    actor = _load_role(m.actor, "actor", source)

    def role(ref: str, field: str) -> ModelSpec:
        return actor if ref.lower() == SAME_AS_ACTOR else _load_role(ref, field, source)

    ref_name = m.reference
    if family is Family.SFT and ref_name not in (None, NONE):
        notes.append("models.reference ignored: sft trains on its data alone (no KL term)")
        ref_name = NONE
    if ref_name is None:
        ref_name = SAME_AS_ACTOR if info.reference_default else NONE
    if ref_name.lower() != NONE and not info.reference_allowed:
        raise bad("models.reference", f"{inp.algorithm} is reference-free; set it to none or "
                  "use dpo")
    reference = None if ref_name.lower() == NONE else role(ref_name, "reference")

    reward, reward_kind = None, "none"
    if family.offline:
        if m.reward not in (None, NONE):
            learns = "preference pairs" if family is Family.DPO else "its labelled sequences"
            notes.append(f"models.reward ignored: {inp.algorithm} learns from {learns}")
    else:
        reward_name = m.reward or VERIFIER
        if reward_name.lower() == VERIFIER:
            reward_kind = "verifier"
        elif reward_name.lower() != NONE:
            reward, reward_kind = role(reward_name, "reward"), "model"

    critic = None
    if family is Family.PPO:
        if m.critic is not None and m.critic.lower() == NONE:
            raise bad("models.critic", "ppo needs a critic; name a model, or use grpo for a "
                      "critic-free algorithm")
        if m.critic is None:
            notes.append("models.critic not given: using the actor's architecture")
        critic = role(m.critic or SAME_AS_ACTOR, "critic")
    elif m.critic not in (None, NONE):
        notes.append(f"models.critic ignored: {inp.algorithm} has no critic")

    if family.offline:
        if w_in.samples_per_prompt != 1:
            notes.append(f"workload.samples_per_prompt ignored: {inp.algorithm} has no sampling")
    elif w_in.samples_per_prompt < info.min_samples:
        raise bad("workload.samples_per_prompt", f"{inp.algorithm} needs at least "
                  f"{info.min_samples} samples per prompt for its group baseline; set it to "
                  f"{info.min_samples} or more")
    if family is Family.SFT:  # DESIGN.md: prompts_per_step sequences per optimizer step
        for name in ("ppo_epochs", "mini_batches"):
            if getattr(w_in, name) != 1:
                notes.append(f"workload.{name} ignored: sft takes one optimizer step over "
                             "prompts_per_step sequences")
        w_in = w_in.model_copy(update={"ppo_epochs": 1, "mini_batches": 1,
                                       "samples_per_prompt": 1})
    sequences = w_in.prompts_per_step * (1 if family.offline else w_in.samples_per_prompt)
    if sequences % w_in.mini_batches:
        divisors = [d for d in range(1, min(sequences, 64) + 1) if sequences % d == 0]
        raise bad("workload.mini_batches", f"{w_in.mini_batches} does not divide the "
                  f"{sequences} sequences of a step; use a divisor such as "
                  f"{', '.join(map(str, divisors[-4:]))}")
    try:
        lengths, response_len, cap, length_notes = resolve_lengths(
            w_in.response_lengths, w_in.response_len, w_in.max_response_len, sequences)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    notes += length_notes
    if family.offline and w_in.response_lengths is not None:
        used = " beyond their mean" if w_in.response_len is None else ""
        notes.append(f"workload.response_lengths ignored{used}: {inp.algorithm} has no "
                     "generation stage")
    w = Workload(**{**dict(w_in), "response_len": response_len, "max_response_len": cap})
    if inp.search.objective == "gpus" and inp.search.target_tokens_per_s is None:
        raise bad("search.target_tokens_per_s", "the gpus objective (fewest GPUs reaching a "
                  "throughput) needs a target; set it, e.g. --target-tokens-per-s 50000")
    if inp.search.target_tokens_per_s is not None and inp.search.objective != "gpus":
        # Only the gpus objective has a target (search/space.py: target_ms); time and cost
        # would drop it. Refused rather than ignored: a user who gives a target expects it met.
        raise bad("search.target_tokens_per_s", f"the {inp.search.objective} objective takes no "
                  "throughput target (search.objective); use --objective gpus for the fewest "
                  "GPUs reaching it, or drop --target-tokens-per-s")
    if inp.search.allow_shared_actor_critic and family is not Family.PPO:
        notes.append(f"search.allow_shared_actor_critic ignored: {inp.algorithm} has no critic")

    runtime = inp.runtime
    if inp.framework is not None:
        from planner.frameworks import framework_runtime

        runtime, said = framework_runtime(inp.framework, inp.algorithm, reward_kind, inp.runtime,
                                          f"{source}: field 'framework' ({inp.framework})")
        notes += said
    roles = {"actor": actor, "reference": reference, "reward": reward, "critic": critic}
    notes += _model_notes(roles, inp.runtime.rollout_weights)
    for role, spec in roles.items():
        if spec and spec.max_position_embeddings and w.max_seq_len > spec.max_position_embeddings:
            notes.append(f"{role} {spec.name}: prompt_len + max_response_len = {w.max_seq_len} "
                         f"exceeds its max_position_embeddings {spec.max_position_embeddings} "
                         "(needs RoPE scaling)")
    try:
        pools, inter_pool = resolve_pools(inp.cluster, source,
                                          "flag" if price_flag else "scenario")
    except InputError as exc:
        msg = str(exc)
        raise InputError(msg if msg.startswith(source) else f"{source}: cluster: {msg}") from None
    if inp.search.objective == "cost":
        for i, p in enumerate(pools):
            if p.cluster.price is None:
                where = (f"cluster.pools[{i}].price_usd_per_gpu_hour" if inp.cluster.pools
                         else "cluster.price_usd_per_gpu_hour")
                raise bad("search.objective", f"the cost objective needs a price, and profile "
                          f"{p.cluster.gpu.name} has none; "
                          + (f"set {where}" if inp.cluster.pools else
                             f"pass --price USD_PER_GPU_HOUR (or set {where})"))
    return Scenario(algorithm=inp.algorithm, family=family, framework=inp.framework,
                    workload=w, length_distribution=lengths, runtime=runtime,
                    cluster=pools[0].cluster,
                    pools=pools if len(pools) > 1 else (), inter_pool_gbps=inter_pool,
                    search=inp.search, reward_kind=reward_kind, notes=tuple(notes),
                    source_input=inp, **roles)


def source_name(path: Path | Mapping[str, Any] | None) -> str:
    """How errors name a scenario: its file, or 'scenario' for one given as a mapping (the
    Python API)."""
    return "scenario" if isinstance(path, Mapping) else str(path)


def scenario_input(path: Path | Mapping[str, Any] | None,
                   overrides: dict[str, Any] | None = None) -> ScenarioInput:
    """Read (optionally) a scenario file — or take its fields as a mapping, relative paths
    read from the working folder —, apply overrides, validate the fields."""
    raw: dict[str, Any] = {}
    source = "scenario (from flags)"
    if isinstance(path, Mapping):
        raw, source = dict(path), source_name(path)
    elif path is not None:
        raw = _anchor_paths(read_mapping(path), path.parent)
        source = str(path)
    _refuse_cluster_flags_on_pools(raw, overrides or {}, source)
    raw = apply_overrides(raw, overrides or {})
    try:
        return validate_as(ScenarioInput, raw, source)
    except InputError as exc:
        msg = str(exc)
        if path is None:  # no file: say which flag provides a missing field
            for field_path, flag in _FLAGS_FOR_MISSING.items():
                msg = msg.replace(f"field '{field_path}' is missing; add it",
                                  f"field '{field_path}' is missing; pass {flag}")
        for field_path, flag in _FLAGS_FOR_MISSING.items():  # name the flag that set a field
            if field_path in (overrides or {}):
                msg = msg.replace(f"field '{field_path}':", f"field '{field_path}' ({flag}):")
        raise InputError(msg) from None


def _refuse_cluster_flags_on_pools(raw: dict[str, Any], overrides: dict[str, Any],
                                   source: str) -> None:
    """--gpu/--nodes/--gpus-per-node/--price describe one GPU kind; a file listing pools gives
    each pool its own, so such a flag has no single meaning there."""
    cluster = raw.get("cluster")
    if not (isinstance(cluster, dict) and "pools" in cluster):
        return
    for field_path, flag in _FLAGS_FOR_MISSING.items():
        if field_path.startswith("cluster.") and overrides.get(field_path) is not None:
            raise InputError(f"{source}: {flag} cannot be used with a scenario whose cluster "
                             "lists pools; set the pool's gpu, nodes, gpus_per_node or "
                             "price_usd_per_gpu_hour under cluster.pools in the file")


def load_scenario(path: Path | Mapping[str, Any] | None,
                  overrides: dict[str, Any] | None = None) -> Scenario:
    """The scenario at `path` (or given as a mapping, or from overrides alone), validated and
    resolved."""
    inp = scenario_input(path, overrides)
    price_flag = (overrides or {}).get(SCENARIO_FLAGS["price"]) is not None
    return resolve(inp, source_name(path) if path is not None else "scenario", price_flag)


def scenario_from_plan(plan: dict[str, Any], source: str) -> Scenario:
    """The scenario a plan JSON carries (its `scenario` key, written by `plan` and
    `evaluate`), validated and resolved."""
    raw = plan.get("scenario")
    if raw is None:
        raise InputError(f"{source}: field 'scenario' is missing; the plan was not written by "
                         "rlplan plan/evaluate — pass the scenario file too (--scenario)")
    if not isinstance(raw, dict):
        raise InputError(f"{source}: field 'scenario' is {type(raw).__name__}, not a mapping of "
                         "scenario fields; fix it or pass the scenario file (--scenario)")
    return resolve(validate_as(ScenarioInput, raw, f"{source}: scenario"), f"{source}: scenario")

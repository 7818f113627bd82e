"""NeMo-RL configs → what they run: its YAML (one `rlplan export --format nemo-rl` writes, or
your own) and launches `uv run examples/run_grpo_math.py --config FILE key=value ...` (the
config file read when it is here, its `defaults:` chain followed; the `key=value` overrides win).

Keys: planner/export/keys/nemo-rl_0.6_config.txt (docs/exports.md §5); every other key of a
NeMo-RL config (data, logger, optimizer settings, ...) is listed as ignored. What the config
leaves out takes NeMo-RL 0.6's default (defaults.NEMO_RL). NeMo-RL trains the policy with
Megatron-Core (`policy.megatron_cfg.enabled`) or DTensor/FSDP2, scores the reference in the
policy's workers with the policy's layout and `logprob_batch_size`, and generates with vLLM on
the policy's GPUs or on `colocated.resources`; its KV cache is what `gpu_memory_utilization`
leaves once weights and workspaces are placed (`rollout_stage.vllm_kv_tokens`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import yaml

from planner.cost.legality import placement_of
from planner.cost.pipeline_split import MegatronSplit
from planner.errors import InputError
from planner.export.keys import VERSIONS, key_set
from planner.export.nemo_rl import policy_worker_reference
from planner.importers.defaults import NEMO_RL, NEMO_RL_SOURCE
from planner.importers.launch import Launch
from planner.importers.models import model_ref
from planner.importers.reading import Reading, kv_tokens, mini_batches, uneven_stages, whole
from planner.importers.shell import Text
from planner.importers.values import Settings, as_bool, as_float, as_int
from planner.plan import Layout
from planner.specs.scenario import Scenario

VERSION = VERSIONS["nemo-rl"][0]
MEGATRON, DTENSOR = "policy.megatron_cfg", "policy.dtensor_cfg"
VLLM, PLACEMENT, ASYNC = "policy.generation.vllm_cfg", "policy.generation.colocated", \
    "grpo.async_grpo"
# the example runner → rlplan's algorithm (docs/exports.md §5; the preset's algorithms)
RUNNERS = {"run_grpo": "grpo", "run_dpo": "dpo", "run_sft": "sft"}
_MAX_DEFAULTS = 8  # `defaults:` files followed, at most


def is_config(text: str) -> bool:
    """A NeMo-RL config: a YAML mapping with a `policy` section."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and isinstance(data.get("policy"), dict)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        out |= flatten(value, f"{path}.") if isinstance(value, dict) and value else {path: value}
    return out


def _text(value: Any) -> Text:
    if isinstance(value, bool):
        return Text("true" if value else "false")
    return Text("null" if value is None else str(value))


def _config_file(path: str, notes: list[str], depth: int = 0) -> dict[str, Any]:
    """A config file here and the `defaults:` it builds on (relative to it), flattened; {} with
    a note when it is not here (NeMo-RL's own configs live in its checkout)."""
    file = Path(path).expanduser()
    if not file.is_file() or depth > _MAX_DEFAULTS:
        notes.append(f"{path}: not found here, so what it sets is not read (run rlplan from "
                     "your NeMo-RL checkout to read it); NeMo-RL's defaults stand in for it")
        return {}
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"import: {path}: not a YAML config ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"import: {path}: not a YAML mapping")
    base = data.pop("defaults", None)
    flat = _config_file(str(file.parent / base), notes, depth + 1) if isinstance(base, str) \
        else {}
    return flat | flatten(data)


def read_config(text: str) -> Reading:
    """A NeMo-RL YAML config (its `defaults:` file, where here, under it)."""
    data = yaml.safe_load(text)
    notes: list[str] = []
    base = data.pop("defaults", None)
    flat = _config_file(base, notes) if isinstance(base, str) else {}
    flat |= flatten(data)
    values = {k: [_text(v)] for k, v in flat.items()}
    return _read(Settings(values), "grpo", notes)


def read(launch: Launch) -> Reading:
    """`uv run examples/run_grpo_math.py --config FILE key=value ...`."""
    notes: list[str] = []
    values: dict[str, list[Text]] = {}
    shown: dict[str, str] = {}
    words = list(launch.args)
    for k, w in enumerate(words):
        if w.text == "--config" and k + 1 < len(words):
            values |= {key: [_text(v)] for key, v in
                       _config_file(words[k + 1].text, notes).items()}
        elif w.text.startswith("--config="):
            values |= {key: [_text(v)] for key, v in
                       _config_file(w.text.split("=", 1)[1], notes).items()}
    for w in words:
        flag, eq, rest = w.text.partition("=")
        if eq and not flag.startswith("-"):
            key = flag.lstrip("+")
            values[key], shown[key] = [Text(rest, w.unset)], flag
    runner = Path(launch.entry).stem
    algorithm = next((a for prefix, a in RUNNERS.items() if runner.startswith(prefix)), "grpo")
    return _read(Settings(values, shown), algorithm, notes)


class _NemoRL:
    """The config's settings with NeMo-RL 0.6's defaults behind them."""

    def __init__(self, s: Settings):
        self.s = s

    def value(self, key: str) -> Text | Any:
        return self.s.text(key) if self.s.has(key) else NEMO_RL.get(key)

    def int(self, key: str, minimum: int = 1) -> int:
        value = self.value(key)
        if value is None:
            raise InputError(f"import: {key} is not set and NeMo-RL has no default rlplan "
                             f"knows; give it ({key}=VALUE)")
        return as_int(self.s.name(key), value, minimum) if isinstance(value, Text) \
            else int(value)

    def optional_int(self, key: str) -> int | None:
        value = self.value(key)
        if isinstance(value, Text) and value.text.lower() in ("null", "none", "~"):
            return None
        return None if value is None else self.int(key)

    def bool(self, key: str) -> bool:
        value = self.value(key)
        return as_bool(self.s.name(key), value) if isinstance(value, Text) else bool(value)

    def float(self, key: str) -> float:
        value = self.value(key)
        return as_float(self.s.name(key), value) if isinstance(value, Text) else float(value)


def _read(s: Settings, algorithm: str, notes: list[str]) -> Reading:
    v = _NemoRL(s)
    keys = key_set("nemo-rl", VERSION)
    strange = [s.name(k) for k in s.shown if k not in keys]
    if strange:  # ignored with the rest, but named: a typo is refused by NeMo-RL itself
        notes.append(f"not in rlplan's NeMo-RL key list (docs/exports.md §5): "
                     f"{', '.join(strange)}")
    fields: dict[str, Any] = {"algorithm": algorithm}
    models = {}
    if s.has("policy.model_name"):
        models["actor"] = model_ref(s.text("policy.model_name"), "policy.model_name", "actor")
    if algorithm == "grpo":
        kl = v.float("loss_fn.reference_policy_kl_penalty") if s.has(
            "loss_fn.reference_policy_kl_penalty") else None
        fields["models.reference"] = "none" if kl == 0 else "actor"
        fields["models.reward"] = "verifier"
    elif algorithm == "dpo":
        fields["models.reference"] = "actor"
    if s.has("policy.max_total_sequence_length"):
        total = v.int("policy.max_total_sequence_length", 2)
        fields |= {"workload.prompt_len": total // 2, "workload.response_len": total - total // 2,
                   "workload.max_response_len": total - total // 2}
        notes.append(f"lengths: policy.max_total_sequence_length {total} caps prompt + "
                     f"response; priced as {total // 2} + {total - total // 2} tokens, every "
                     "sequence at its cap — give the means you observe with --prompt-len and "
                     "--response-len")
    per_step = None
    if algorithm == "grpo" and s.has("grpo.num_prompts_per_step"):
        prompts = v.int("grpo.num_prompts_per_step")
        samples = v.int("grpo.num_generations_per_prompt")
        fields |= {"workload.prompts_per_step": prompts, "workload.samples_per_prompt": samples}
        per_step = prompts * samples
    if per_step is not None and s.has("policy.train_global_batch_size"):
        fields["workload.mini_batches"] = mini_batches(
            per_step, v.int("policy.train_global_batch_size"),
            "grpo.num_prompts_per_step × num_generations_per_prompt ÷ "
            "policy.train_global_batch_size")
    if v.bool(f"{VLLM}.enforce_eager"):
        fields["runtime.engine"] = "eager"
    total = v.int("cluster.num_nodes") * v.int("cluster.gpus_per_node")
    fields |= {"cluster.gpus_per_node": v.int("cluster.gpus_per_node"),
               "cluster.nodes": v.int("cluster.num_nodes")}
    if v.bool(f"{ASYNC}.enabled"):
        fields["search.max_staleness"] = v.int(f"{ASYNC}.max_trajectory_age_steps")
    backend = "Megatron" if v.bool(f"{MEGATRON}.enabled") else "DTensor"
    if backend == "DTensor" and s.has(f"{DTENSOR}.enabled") and not v.bool(f"{DTENSOR}.enabled"):
        raise InputError(f"import: neither {MEGATRON}.enabled nor {DTENSOR}.enabled is true; "
                         "NeMo-RL trains the policy with one of them")
    engine = v.value("policy.generation.backend")
    if engine is not None and str(engine) != "vllm":
        notes.append(f"policy.generation.backend {engine}: priced as vLLM's generation")
    notes.append(f"defaults: what the config leaves out takes the value of {NEMO_RL_SOURCE}")
    layout = partial(_plan, v, total, notes)
    return Reading("nemo-rl", f"NeMo-RL {VERSION} ({backend} backend)", fields, models,
                   layout, s, notes)


def _plan(v: _NemoRL, total: int, notes: list[str], sc: Scenario) -> dict[str, Any]:
    colocated = v.bool(f"{PLACEMENT}.enabled") or sc.family.offline
    gen_gpus = 0 if colocated else (v.int(f"{PLACEMENT}.resources.num_nodes")
                                    * v.int(f"{PLACEMENT}.resources.gpus_per_node"))
    pool = total - gen_gpus
    if pool <= 0:
        raise InputError(f"import: {PLACEMENT}.resources asks for {gen_gpus} GPUs of the "
                         f"cluster's {total}; none are left to train on")
    groups = [{"name": "g0", "gpus": pool}]
    train = _training(v, pool, 2 if sc.family.value == "dpo" else 1,
                      sc.actor.num_hidden_layers)
    logprob = v.int("policy.logprob_batch_size") if v.s.has("policy.logprob_batch_size") \
        else train["micro_batch"]
    layouts: dict[str, dict[str, Any]] = {"actor": {"training": train}}
    if logprob != train["micro_batch"] and not sc.family.offline:
        layouts["actor"]["assessment"] = {**train, "micro_batch": logprob}
    if sc.reference is not None:  # in the policy's workers, with its layout
        layouts["reference"] = {"assessment": policy_worker_reference(
            Layout.model_validate(train), logprob).model_dump(mode="json", exclude_none=True)}
    staleness, partial_rollout = 0, False
    if not sc.family.offline:
        group = "g0"
        if not colocated:
            group = "g1"
            groups.append({"name": "g1", "gpus": gen_gpus})
            if v.bool(f"{ASYNC}.enabled"):
                staleness = v.int(f"{ASYNC}.max_trajectory_age_steps")
                partial_rollout = v.bool(f"{ASYNC}.in_flight_weight_updates")
        layouts["actor"]["generation"] = _generation(v, sc, group, gen_gpus or pool)
    held = {g["name"]: {role for role, stages in layouts.items() for lay in stages.values()
                        if lay["group"] == g["name"]} for g in groups}
    inter = {"placement": placement_of(held), "staleness": staleness,
             "partial_rollout": partial_rollout}
    return {"groups": groups, "layouts": layouts, "inter_model": inter}


def _training(v: _NemoRL, pool: int, per_item: int, layers: int) -> dict[str, Any]:
    """The policy's layout (its uneven pipeline stages from Megatron's first/last-stage counts);
    its micro-batch in sequences (DPO's counts pairs: `per_item` 2)."""
    micro = v.int("policy.train_micro_batch_size") * per_item
    if v.bool(f"{MEGATRON}.enabled"):
        d = {x: v.int(f"{MEGATRON}.{key}") for x, key in (
            ("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
            ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size"))}
        etp = v.optional_int(f"{MEGATRON}.expert_tensor_parallel_size")
        if etp is not None:
            d["etp"] = etp
        recompute = "none"
        if v.bool(f"{MEGATRON}.activation_checkpointing"):
            granularity = v.value(f"{MEGATRON}.recompute_granularity")
            recompute = "selective" if str(granularity) == "selective" else "full"
        offload = v.bool(f"{MEGATRON}.optimizer.optimizer_cpu_offload")
        first, last = (v.optional_int(f"{MEGATRON}.num_layers_in_{end}_pipeline_stage")
                       for end in ("first", "last"))
        d |= uneven_stages(MegatronSplit(first=first, last=last), layers, d["pp"],
                           f"{MEGATRON}.pipeline_model_parallel_size")
        d |= {"sp": v.bool(f"{MEGATRON}.sequence_parallel") and d["tp"] > 1,
              "zero": 1 if v.bool(f"{MEGATRON}.optimizer.use_distributed_optimizer") else 0,
              "checkpointing": recompute, "offload": "optimizer" if offload else "none"}
    else:
        tp, cp = v.int(f"{DTENSOR}.tensor_parallel_size"), v.int(f"{DTENSOR}.context_parallel_size")
        sharded = pool // tp > 1  # FSDP2 shards over the data-parallel ranks
        d = {"tp": tp, "cp": cp, "sp": v.bool(f"{DTENSOR}.sequence_parallel") and tp > 1,
             "zero": 3 if sharded else 0,
             "checkpointing": "full" if v.bool(f"{DTENSOR}.activation_checkpointing") else "none",
             "offload": "both" if v.bool(f"{DTENSOR}.cpu_offload") else "none"}
    d["dp"] = whole(pool, d["tp"] * d.get("pp", 1) * d["cp"], "the policy's TP×PP×CP")
    return {"group": "g0", **d, "micro_batch": micro}


def _generation(v: _NemoRL, sc: Scenario, group: str, gpus: int) -> dict[str, Any]:
    tp, pp = v.int(f"{VLLM}.tensor_parallel_size"), v.int(f"{VLLM}.pipeline_parallel_size")
    ep = v.int(f"{VLLM}.expert_parallel_size")
    gen = {"group": group, "tp": tp, "pp": pp,
           "dp": whole(gpus, tp * pp, f"{VLLM}.tensor_parallel_size × pipeline_parallel_size")}
    if ep > 1:
        gen["ep"] = ep
    return {**gen, "kv_cache_tokens": kv_tokens(sc, gen, v.float(f"{VLLM}.gpu_memory_utilization"),
                                                f"{VLLM}.gpu_memory_utilization")}

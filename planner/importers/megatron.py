"""Megatron-LM launch scripts (`torchrun ... pretrain_gpt.py ARGS`) and the argument arrays
`rlplan export --format megatron` writes (`ACTOR_ARGS=( ... )`, `CRITIC_ARGS=( ... )`) → a plan.

A launch script trains one model on fixed sequences: it is read as SFT (the actor's training
stage alone) of --global-batch-size sequences of --seq-length tokens on torchrun's
--nproc_per_node × --nnodes GPUs, the model found in the catalog by the shape its arguments
give. Defaults are Megatron's (defaults.MEGATRON); sequence parallelism is off at TP 1 (as
validate_args switches it off). The exported arrays hold training only: each role's group size
comes from the export's comment (`# actor on group g0: 8 GPUs = …`), else the scenario's
cluster; generation and the reference are assumed on the actor's group (a note says so).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from planner.cost.pipeline_split import MegatronSplit
from planner.errors import InputError
from planner.importers.defaults import MEGATRON, MEGATRON_SOURCE
from planner.importers.launch import Launch
from planner.importers.models import ModelRef, shape_match
from planner.importers.reading import Reading, uneven_stages, whole
from planner.importers.values import Settings, as_int, flag_settings
from planner.specs.scenario import Scenario
from planner.specs.workload import Family


class _Args:
    def __init__(self, s: Settings):
        self.s = s

    def int(self, flag: str, minimum: int = 1) -> int:
        return self.s.int(flag, MEGATRON.get(flag) or 1, minimum)

    def on(self, flag: str) -> bool:
        return self.s.bool(flag, bool(MEGATRON.get(flag)))

    def optional_int(self, flag: str) -> int | None:
        return self.s.int(flag, 0) if self.s.has(flag) else None


def read(launch: Launch) -> Reading:
    if launch.roles:
        return _arrays(launch)
    s = flag_settings(launch.args)
    a = _Args(s)
    notes: list[str] = []
    per_node = _wrapper_int(launch, "--nproc_per_node", "--nproc-per-node")
    nodes = _wrapper_int(launch, "--nnodes")
    if per_node is None:
        per_node = 8
        notes.append("cluster: the launcher gives no --nproc_per_node; 8 GPUs per node "
                     "assumed (--gpus-per-node to change)")
    world = per_node * (nodes or 1)
    fields: dict[str, Any] = {"algorithm": "sft", "cluster.gpus_per_node": per_node,
                              "cluster.nodes": nodes or 1}
    tp, pp, cp = (a.int(f) for f in ("--tensor-model-parallel-size",
                                     "--pipeline-model-parallel-size", "--context-parallel-size"))
    if world % (tp * pp * cp):
        held = [n for n, v in launch.variables.items() if "NODE" in n.upper() and v
                and v[0].text == str(nodes or 1)]
        how = f"--set {held[0]}=N" if held else "--set NAME=N for the variable the script " \
            "holds the node count in"
        raise InputError(f"import: TP {tp} × PP {pp} × CP {cp} = {tp * pp * cp} GPUs per model "
                         f"replica, but torchrun starts {world} (--nproc_per_node {per_node} × "
                         f"--nnodes {nodes or 1}); give the node count the job needs with {how}")
    dp = world // (tp * pp * cp)
    micro = a.int("--micro-batch-size")
    batch = a.int("--global-batch-size") if s.has("--global-batch-size") else micro * dp
    seq = a.int("--seq-length") if s.has("--seq-length") else None
    if seq is None:
        raise InputError("import: --seq-length is not given; rlplan prices training on "
                         "sequences of that many tokens — add it")
    fields |= {"workload.prompts_per_step": batch, "workload.samples_per_prompt": 1,
               "workload.prompt_len": seq // 2, "workload.response_len": seq - seq // 2,
               "workload.mini_batches": 1}
    notes.append(f"{launch.entry}: trains on fixed sequences — priced as SFT (the actor's "
                 f"training stage alone) on {batch} sequences of {seq} tokens per step "
                 f"(--global-batch-size, --seq-length; split {seq // 2} + {seq - seq // 2})")
    if s.has("--step-batch-size-schedule") or s.has("--rampup-batch-size"):
        notes.append(f"batch ramp-up: priced at the final --global-batch-size {batch}")
    if s.has("--fp8-format"):
        fields["runtime.fp8_training"] = "transformer_engine"
    # validate_args (0.19.2): under --bf16, gradients accumulate and all-reduce in fp32 ("main
    # grads") unless --grad-reduce-in-bf16
    fp32_grads = s.has("--accumulate-allreduce-grads-in-fp32") or (
        a.on("--bf16") and not a.on("--grad-reduce-in-bf16"))
    fields["runtime.training_states"] = "fp32_grads" if fp32_grads else "bf16_grads"
    models = {"actor": _model(s)}
    notes.append(f"defaults: what the script leaves out takes {MEGATRON_SOURCE}'s value")
    return Reading("megatron", "Megatron-LM (megatron-core 0.19.2 arguments)", fields, models,
                   partial(_plan, a, world, notes), s, notes)


def _wrapper_int(launch: Launch, *flags: str) -> int | None:
    for flag in flags:
        value = launch.wrapper.get(flag)
        if value is not None:
            return as_int(f"{flag}", value)
    return None


def _model(s: Settings) -> ModelRef:
    """The catalog model with the shape the arguments give."""
    a = _Args(s)
    if not s.has("--num-layers"):
        return ModelRef(None, "", error="import: the Megatron arguments give no --num-layers "
                        "(no model shape); name the model with --actor NAME or PATH")
    hidden, heads = a.int("--hidden-size"), a.int("--num-attention-heads")
    shape = {"num_hidden_layers": a.int("--num-layers"), "hidden_size": hidden,
             "num_attention_heads": heads,
             "num_key_value_heads": a.int("--num-query-groups") if s.has(
                 "--group-query-attention") else heads,
             "intermediate_size": a.int("--ffn-hidden-size") if s.has("--ffn-hidden-size")
             else 4 * hidden}
    if s.has("--vocab-size"):
        shape["vocab_size"] = a.int("--vocab-size")
    if s.has("--num-experts"):
        shape["num_experts"] = a.int("--num-experts")
    said = ", ".join(f"{k} {v}" for k, v in shape.items())
    name = shape_match(shape)
    if name is None:
        return ModelRef(None, said, error=(
            f"import: the model the Megatron arguments describe ({said}) is not a shipped "
            "model (rlplan models); write its config.json (Hugging Face fields: "
            "num_hidden_layers, hidden_size, ...) and give it with --actor PATH, or a shipped "
            "model with --actor NAME"))
    return ModelRef(name, said, note=f"model: the arguments' shape ({said}) is the shipped "
                    f"{name}")


def _training(a: _Args, gpus: int, group: str, sc: Scenario, role: str) -> dict[str, Any]:
    f = a.s
    tp, pp, cp = (a.int(x) for x in ("--tensor-model-parallel-size",
                                     "--pipeline-model-parallel-size", "--context-parallel-size"))
    recompute = f.text("--recompute-granularity")
    lay = {"group": group, "tp": tp, "pp": pp, "cp": cp,
           "dp": whole(gpus, tp * pp * cp, f"{role} TP×PP×CP"),
           "ep": a.int("--expert-model-parallel-size"),
           # validate_args: "Disabling sequence parallelism because tensor model parallelism
           # is disabled"
           "sp": a.on("--sequence-parallel") and tp > 1,
           "zero": 1 if a.on("--use-distributed-optimizer") else 0,
           "offload": "optimizer" if a.on("--optimizer-cpu-offload") else "none",
           "checkpointing": recompute.text if recompute is not None and recompute.text in (
               "full", "selective") else "none",
           "micro_batch": a.int("--micro-batch-size") * (2 if sc.family is Family.DPO else 1)}
    if f.has("--expert-tensor-parallel-size"):
        lay["etp"] = a.int("--expert-tensor-parallel-size")
    flags = ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
             "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split")
    split = MegatronSplit(first=a.optional_int(flags[0]), last=a.optional_int(flags[1]),
                          embedding_in_split=a.on(flags[2]), loss_in_split=a.on(flags[3]))
    layers = sc.roles[role].num_hidden_layers
    lay |= uneven_stages(split, layers, pp, f"{role} " + (
        ", ".join(x for x in flags if f.has(x)) or "--pipeline-model-parallel-size"))
    if f.has("--num-layers-per-virtual-pipeline-stage"):  # (layers + e + s) / (pp · vp),
        # the embedding / loss counted as layers when the account-for switches are on
        counted = layers + split.embedding_in_split + split.loss_in_split
        lay["vp"] = whole(counted, pp * a.int("--num-layers-per-virtual-pipeline-stage"),
                          f"{role} layers ÷ (pp × --num-layers-per-virtual-pipeline-stage)")
    elif f.has("--num-virtual-stages-per-pipeline-rank"):
        lay["vp"] = a.int("--num-virtual-stages-per-pipeline-rank")
    return lay


def _plan(a: _Args, world: int, notes: list[str], sc: Scenario) -> dict[str, Any]:
    return {"groups": [{"name": "g0", "gpus": world}],
            "layouts": {"actor": {"training": _training(a, world, "g0", sc, "actor")}},
            "inter_model": {"placement": "colocated"}}


def _arrays(launch: Launch) -> Reading:
    """rlplan's own export: one array per trainable role, group sizes in the comments."""
    sizes = {m.group(1).lower(): (int(m.group(3)), m.group(2)) for m in re.finditer(
        r"#\s*(\w+) on group (\w+): (\d+) GPUs", launch.comments)}
    roles = {role: _Args(flag_settings(words)) for role, words in launch.roles.items()}
    for role in roles:
        if role not in ("actor", "critic"):
            raise InputError(f"import: {role.upper()}_ARGS: Megatron exports train actor and "
                             "critic only")
    notes: list[str] = []
    merged = Settings({f"{r}:{k}": v for r, a in roles.items() for k, v in a.s.values.items()})

    def plan(sc: Scenario) -> dict[str, Any]:
        groups: dict[str, int] = {}
        layouts: dict[str, dict[str, Any]] = {}
        for role, args in roles.items():
            gpus, group = sizes.get(role, (sc.cluster.total_gpus, "g0"))
            groups[group] = gpus
            layouts[role] = {"training": _training(args, gpus, group, sc, role)}
            merged.read |= {f"{role}:{k}" for k in args.s.read}
        actor = layouts["actor"]["training"]
        if not sc.family.offline:
            layouts["actor"]["generation"] = {"group": actor["group"], "tp": actor["tp"],
                                              "dp": groups[actor["group"]] // actor["tp"]}
            notes.append("generation: Megatron arguments do not hold it; assumed on the actor's "
                         f"group with its tp {actor['tp']}")
        for role in ("reference", "reward"):
            if role in sc.roles:
                layouts[role] = {"assessment": {k: actor[k] for k in (
                    "group", "tp", "pp", "cp", "dp", "first_stage_layers", "last_stage_layers")
                    if k in actor}}
                notes.append(f"{role}: not in Megatron arguments; assumed with the actor's "
                             "layout")
        return {"groups": [{"name": n, "gpus": g} for n, g in groups.items()],
                "layouts": layouts, "inter_model": {"placement": "colocated" if len(groups) == 1
                                                    else "partial"}}

    return Reading("megatron", "Megatron-LM arguments (rlplan export)", {}, {}, plan, merged,
                   notes)

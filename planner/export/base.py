"""What every exporter shares: the result type, the error, and the plan facts they translate.

An exporter is a pure function (plan dict, resolved scenario) → `Export`: the config text, its
kind, and `notes` — what the framework cannot express or what was approximated. A plan the
framework would refuse at start-up raises `ExportError` naming the key and the fix.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.cost.constants import ENGINES
from planner.cost.iteration import evaluate, task_memory
from planner.cost.memory import ROLE_HEADS
from planner.cost.pipeline_split import MegatronSplit, megatron_split, stage_layer_counts
from planner.cost.report import to_plan
from planner.cost.rollout_stage import vllm_utilization
from planner.errors import InputError
from planner.plan import Layout, PlanInput
from planner.specs.files import validate_as
from planner.specs.hardware import GIB, ClusterSpec
from planner.specs.model import ModelSpec
from planner.specs.runtime import TRAINING_SOFTWARE
from planner.specs.scenario import Scenario
from planner.specs.workload import Family


class ExportError(InputError):
    """The plan breaks a constraint the target framework checks at start-up. Exit code 2.
    `replan`: planning for the framework (`--framework`) would give a plan it exports."""

    def __init__(self, message: str, replan: bool = True):
        super().__init__(message)
        self.replan = replan


@dataclass(frozen=True)
class Export:
    text: str
    kind: str  # "sh" (a bash script or argument block), "json" or "yaml"
    notes: tuple[str, ...] = ()
    # the plan as the framework runs it (groups, layouts, inter_model), where the exporter
    # changes it; None: the preset's rules say (`frameworks.runs.converted`)
    runs: dict[str, Any] | None = None


@dataclass(frozen=True)
class TrainBatch:
    """One optimizer step of a trainable role, in the unit its trainer counts."""

    micro: int  # per data-parallel rank
    per_step: int  # over all data-parallel ranks
    dp: int
    accumulation: int  # micro-batches per rank per optimizer step
    unit: str  # "sequences", or "pairs" for DPO trainers (chosen + rejected together)


def refuse_infeasible(plan: dict[str, Any]) -> None:
    if plan.get("status") == "infeasible":
        reason = str(plan.get("reason") or "no reason given").removeprefix("infeasible: ")
        raise ExportError(f"the plan is infeasible ({reason}); there is no layout to export")


class PlanView:
    """The typed plan plus the priced facts (breakdown) the exporters read."""

    def __init__(self, plan: dict[str, Any], sc: Scenario):
        refuse_infeasible(plan)
        self.sc = sc
        self.input = validate_as(PlanInput, plan, "plan")
        self.breakdown = plan.get("breakdown") or {}
        if not self.breakdown.get("tasks"):  # a hand-written plan: price it for the memory
            priced = to_plan(sc, self.input, evaluate(sc, self.input))
            self.breakdown = priced.model_dump(mode="json")["breakdown"]
        self.inter = self.input.inter_model
        # each group's scenario on its pool (`Scenario.on_pool`): its GPU, node and memory
        self.views = {g.name: sc.on_pool(g.pool) for g in self.input.groups}

    def cluster_of(self, group: str) -> ClusterSpec:
        """The cluster (pool) group `group` runs on."""
        return self.views[group].cluster

    def layout(self, role: str, stage: str) -> Layout | None:
        """The layout of (role, stage); assessment falls back to training (the cost model's
        rule: a forward with the training layout)."""
        stages = self.input.layouts.get(role, {})
        if stage == "assessment" and stage not in stages:
            return stages.get("training")
        return stages.get(stage)

    def need(self, role: str, stage: str) -> Layout:
        layout = self.layout(role, stage)
        if layout is None:
            raise ExportError(f"plan: layouts.{role}.{stage} is missing; the scenario runs "
                              f"{role} {stage} — add its layout")
        return layout

    def group_gpus(self, name: str) -> int:
        return next(g.gpus for g in self.input.groups if g.name == name)

    @property
    def gpus(self) -> int:
        """Every GPU the plan uses: what a launch script may ask its cluster for."""
        return sum(g.gpus for g in self.input.groups)

    def memory_gib(self, role: str, stage: str, layout: Layout) -> float:
        """GiB per GPU of `role` running `stage` in `layout`, priced as the plan prices its own
        layouts: an exporter checks that what the framework will run still fits the GPU."""
        return float(task_memory(self.views.get(layout.group, self.sc), role, stage, layout,
                                 ROLE_HEADS[role]).total) / GIB

    def refuse_unless_fits(self, role: str, stage: str, layout: Layout, what: str) -> float:
        """Refuse (exit 2) a framework layout that would run out of memory where the plan's
        fits; else its GiB per GPU."""
        gpu = self.cluster_of(layout.group).gpu if layout.group in self.views \
            else self.sc.cluster.gpu
        used, capacity = self.memory_gib(role, stage, layout), gpu.memory_gib
        if used > capacity:
            planned = sum(self.task_memory_gib(role, stage).values())
            raise ExportError(f"{what}: {used:.1f} GiB per GPU, over the {capacity:g} GiB of a "
                              f"{gpu.name} (the plan's {role} {stage} needs "
                              f"{planned:.1f} GiB) — the framework cannot shard it as planned")
        return used

    @property
    def trainable(self) -> list[str]:
        """Roles with their own optimizer: the actor, and a critic unless it is a head on it."""
        critic = self.sc.critic is not None and not self.inter.shared_actor_critic
        return ["actor", "critic"] if critic else ["actor"]

    def task_memory_gib(self, role: str, stage: str) -> dict[str, float]:
        task = next((t for t in self.breakdown.get("tasks", [])
                     if t["role"] == role and t["stage"] == stage), None)
        return task["memory_gib"] if task else {}

    def kv_cache_tokens(self, gen: Layout) -> int | None:
        """The KV cache of one replica in tokens: the layout's, else what the plan priced."""
        rollout = self.breakdown.get("rollout") or {}
        return gen.kv_cache_tokens or rollout.get("kv_cache_tokens")

    def vllm_memory_fraction(self, engine: str = "vLLM") -> tuple[float, str]:
        """gpu_memory_utilization giving the engine the plan's KV cache (`vllm_utilization`,
        rounded up to 1e-4: `import` reads it back as the plan's KV cache within 0.01% of the
        GPU's memory), and why (in GiB per GPU and in tokens per replica, which the engine logs
        at start-up and the user can compare)."""
        mem = self.task_memory_gib("actor", "generation")
        gen = self.need("actor", "generation")
        view = self.views.get(gen.group, self.sc)
        capacity = view.cluster.gpu.memory_gib
        tokens = self.kv_cache_tokens(gen)
        fraction = math.ceil(round(vllm_utilization(
            view, gen.model_copy(update={"kv_cache_tokens": tokens})) * 1e4, 6)) / 1e4
        log = "vLLM logs it as 'GPU KV cache size'" if engine == "vLLM" else \
            f"{engine} logs it at start-up"
        per_replica = f", {tokens:,} tokens per replica: {log}" if tokens else ""
        why = (f"gpu_memory_utilization {fraction}: {engine} weights + KV cache + workspace "
               f"+ CUDA context = "
               f"{fraction * capacity:.1f} GiB of the {capacity:g} GiB per GPU (the plan's KV "
               f"cache {mem.get('memory/transient/kv_cache', 0.0):.1f} GiB per GPU"
               f"{per_replica})")
        return fraction, why

    def max_num_seqs(self, gen: Layout) -> int:
        """Concurrent sequences per replica: the layout's, else the cap the plan priced with."""
        rollout = self.breakdown.get("rollout") or {}
        priced = gen.max_num_seqs or self.breakdown.get("generation_batch_per_replica") or \
            rollout.get("max_num_seqs")
        if not priced:
            raise ExportError("plan: layouts.actor.generation.max_num_seqs is missing and the "
                              "breakdown has no generation_batch_per_replica; set it, or "
                              "re-price the plan with `rlplan evaluate --out`")
        return int(priced)


def generation_notes(v: PlanView, gen: Layout, engine_gpus: int, framework: str) -> list[str]:
    """What the rollout engine runs that the framework's flags do not show: an engine spanning
    nodes (generation TP beyond one node), and an engine era the plan priced but current
    releases do not run (vLLM V0)."""
    notes, per_node = [], v.cluster_of(gen.group).gpus_per_node
    if engine_gpus > per_node:
        nodes = math.ceil(engine_gpus / per_node)
        traffic = [what for what, used in (("tensor-parallel all-reduces", gen.tp > 1),
                                           ("expert all-to-alls", gen.ep > 1)) if used]
        degrees = f"tp {gen.tp}" + (f", ep {gen.ep}" if gen.ep > 1 else "")
        notes.append(f"generation {degrees}: each engine's {engine_gpus} GPUs span {nodes} "
                     f"nodes of {per_node} ({framework} places its workers with Ray); its "
                     f"{' and '.join(traffic) or 'traffic'} cross the scale-out network, as "
                     "the plan priced")
    if v.sc.runtime.engine == "vllm-v0":
        overhead = ENGINES["vllm-v0"].step_overhead_s * 1e3
        notes.append(f"runtime.engine vllm-v0: the plan priced a V0-era engine's per-step "
                     f"overhead ({overhead:g} ms of host time per decode step); current vLLM "
                     "releases run the V1 engine, so generation should be quicker than priced")
    return notes


def training_software_notes(sc: Scenario) -> list[str]:
    """The training software the plan was priced with, where it is not the default: no
    exporter writes those switches (their keys are not in docs/exports.md), so the user
    sets them, or the run's memory and time differ from the plan's."""
    runtime, default = sc.runtime, type(sc.runtime)()
    changed = [f"{name} {getattr(runtime, name)}" for name in TRAINING_SOFTWARE
               if getattr(runtime, name) != getattr(default, name)]
    if not changed:
        return []
    return [f"runtime: the plan was priced with {', '.join(changed)}; this export does not set "
            "them — configure the same training software in the framework, or its memory and "
            "step time will differ from the plan's"]


def generation_pp_refusal(key: str, pp: int, why: str, sc: Scenario) -> ExportError:
    """The framework cannot pipeline generation: say which plans do and what to do instead."""
    gpu = sc.cluster.gpu
    return ExportError(f"{key} {pp}: {why}; plans pipeline generation when the model does not "
                       f"fit one scale-up domain ({sc.cluster.gpus_per_node} × {gpu.name}, "
                       f"{gpu.memory_gib:g} GiB each) — plan with more GPUs per node or a "
                       "larger-memory GPU (cluster.gpus_per_node, cluster.gpu), or run vLLM "
                       f"directly (--pipeline-parallel-size {pp})")


def nodes_for(gpus: int, gpus_per_node: int, what: str) -> tuple[int, int]:
    """(nodes, GPUs per node) for a pool of `gpus`: frameworks size pools in whole nodes."""
    if gpus <= gpus_per_node:
        return 1, gpus
    if gpus % gpus_per_node:
        raise ExportError(f"{what}: {gpus} GPUs span part of a node (nodes have "
                          f"{gpus_per_node}); the framework sizes pools as nodes × GPUs per "
                          f"node — make the group a multiple of {gpus_per_node}")
    return gpus // gpus_per_node, gpus_per_node


def model_path(spec: ModelSpec, role: str) -> str:
    """What the framework loads: the Hugging Face repo id, else the model's local folder."""
    if spec.hf_id:
        return spec.hf_id
    if spec.source:
        source = Path(spec.source)
        return str(source.parent if source.suffix == ".json" else source)
    raise ExportError(f"{role} model {spec.name}: no Hugging Face id or path to load it from; "
                      "add `_rlplan_hf_id` to its config.json")


def train_batch(sc: Scenario, layout: Layout, per_step_key: str, micro_key: str,
                notes: list[str]) -> TrainBatch:
    """The optimizer step of a trainable layout. Frameworks require the step to split into whole
    micro-batches on every data-parallel rank (DeepSpeed: train_batch_size = micro ×
    gradient_accumulation_steps × GPUs; Megatron: global batch a multiple of micro × DP)."""
    w = sc.workload
    if sc.family is Family.DPO:  # DPO trainers batch whole pairs; the plan counts sequences
        per_step, unit, per_item = w.prompts_per_step // w.mini_batches, "pairs", 2
        micro = max(1, layout.micro_batch // 2)
        if layout.micro_batch % 2:
            notes.append(f"{micro_key} {micro} pair(s) = {2 * micro} sequences; the plan's "
                         f"micro_batch is {layout.micro_batch} sequence(s) and DPO batches whole "
                         "pairs")
    else:
        per_step, unit, per_item = sc.sequences_per_step // w.mini_batches, "sequences", 1
        micro = layout.micro_batch
    per_round = micro * layout.dp
    if per_step % per_round:
        if per_step % layout.dp == 0:
            per_rank = per_step // layout.dp
            fits = [d * per_item for d in range(1, per_rank + 1) if per_rank % d == 0][-3:]
            fix = f"set the plan's micro_batch to a divisor such as {', '.join(map(str, fits))}"
        else:
            fix = (f"change workload.prompts_per_step or mini_batches so a step splits evenly "
                   f"over the {layout.dp} data-parallel ranks")
        raise ExportError(f"{per_step_key} {per_step} {unit} per optimizer step is not a "
                          f"multiple of {micro_key} {micro} × {layout.dp} data-parallel ranks = "
                          f"{per_round}; {fix}")
    return TrainBatch(micro, per_step, layout.dp, per_step // per_round, unit)


def megatron_pipeline(spec: ModelSpec, layout: Layout, where: str) -> MegatronSplit:
    """The Megatron settings that run the layout's pipeline split (`pipeline_split`: explicit
    first/last-stage counts, or the account-for switches); a split Megatron cannot run is
    refused naming the field."""
    try:
        return megatron_split(spec.num_hidden_layers, layout.pp, layout.vp,
                              layout.first_stage_layers, layout.last_stage_layers)
    except ValueError as err:
        raise ExportError(f"{where}.{err}") from None


def split_note(role: str, spec: ModelSpec, layout: Layout) -> str:
    """A note on an uneven split: the layers each stage holds."""
    counts = stage_layer_counts(spec.num_hidden_layers, layout.pp, layout.first_stage_layers,
                                layout.last_stage_layers)
    return (f"{role}: uneven pipeline stages over {spec.num_hidden_layers} layers: "
            f"{', '.join(map(str, counts))}")


def shell_value(value: Any) -> str:
    """A value as one shell word (booleans the way Hydra and Python spell them, None as
    Hydra's null)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "null"
    return shlex.quote(str(value))


def shell_script(header: list[str], notes: list[str], command: str, args: list[str]) -> str:
    """A bash script: comment header, `# NOTE:` lines, then the command, one argument a line."""
    lines = ["#!/usr/bin/env bash", "set -euo pipefail", *(f"# {h}" for h in header),
             *(f"# NOTE: {n}" for n in notes), f"{command} \\"]
    lines += [f"  {a} \\" for a in args[:-1]] + [f"  {args[-1]}"]
    return "\n".join(lines) + "\n"

"""The answer: a plan as a pydantic model. JSON is its only serialisation (DESIGN.md).

A plan names device groups, a layout per (role, stage) on one of them, and the inter-model
choices. `PlanInput` is the part a user writes by hand for `rlplan evaluate` (groups, layouts,
inter_model); `Plan` adds what rlplan computes (times, memory, bounds, search, explanation).
Layouts follow the framework convention: a layout on g GPUs has g = dp · tp · pp · cp, and
ep · etp divides dp · cp · tp (expert parallelism is carved out of those ranks, adding no GPUs;
each routed expert is split over etp of them, `expert_tp`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

SCHEMA_VERSION = 1
STAGES = ("generation", "assessment", "training")
# Which stages each role runs in (DESIGN.md: layout stages).
ROLE_STAGES: dict[str, tuple[str, ...]] = {
    "actor": ("generation", "assessment", "training"),  # assessment: old log-probs recompute
    "reference": ("assessment",),
    "reward": ("assessment",),
    "critic": ("assessment", "training"),
}
Checkpointing = Literal["none", "selective", "full"]
Offload = Literal["none", "optimizer", "params", "both", "sleep"]
"""Layout.offload: "optimizer" (the optimizer state and gradient partition in CPU memory, CPU
Adam), "params" (the parameter shard in CPU memory, streamed in for every micro-batch), "both";
"sleep", a frozen model only: its weights wait in CPU memory outside its stage and are loaded
back whole for it (vLLM's sleep mode, as verl 0.9.1 serves a reward model; verl's param_offload
of a Megatron reference)."""
FROZEN_ROLES = ("reference", "reward")
"""Roles that only run forward passes (their one stage is assessment)."""


class Layout(BaseModel):
    """How one role is laid out for one stage on its group."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str
    dp: int = Field(1, gt=0)
    tp: int = Field(1, gt=0)
    pp: int = Field(1, gt=0)
    cp: int = Field(1, gt=0)
    ep: int = Field(1, gt=0)
    etp: int | None = Field(None, gt=0, description="expert tensor parallelism: each routed "
                            "expert split over etp ranks; unset = as the framework runs it "
                            "(`expert_tp`: training and assessment etp = tp, as Megatron-Core; "
                            "generation etp = tp without EP, 1 with EP, as vLLM and SGLang)")
    vp: int = Field(1, gt=0, description="training: interleaved pipeline chunks per rank "
                    "(Megatron's virtual pipeline); needs pp > 1, and every stage's layers "
                    "must split into vp chunks")
    first_stage_layers: int | None = Field(None, gt=0, description="training and assessment: "
                                           "transformer layers on the first pipeline stage "
                                           "(Megatron's --decoder-first-pipeline-num-layers); "
                                           "absent = as many as the middle stages, which split "
                                           "the rest evenly")
    last_stage_layers: int | None = Field(None, gt=0, description="training and assessment: "
                                          "transformer layers on the last pipeline stage "
                                          "(--decoder-last-pipeline-num-layers); absent = as "
                                          "many as the middle stages")
    sp: bool = False
    zero: int = Field(0, ge=0, le=3)
    checkpointing: Checkpointing = "none"
    micro_batch: int = Field(1, gt=0, description="sequences per micro-batch per DP rank")
    offload: Offload = "none"
    max_num_seqs: int | None = Field(None, gt=0, description="generation: the most sequences "
                                     "a replica runs at once (vLLM max_num_seqs); default its "
                                     "share of the step, at most 1024")
    kv_cache_tokens: int | None = Field(None, gt=0, description="generation: the KV cache of "
                                        "one replica in tokens (what vLLM logs as 'GPU KV cache "
                                        "size'); default what memory leaves free")

    @model_validator(mode="before")
    @classmethod
    def _read_recompute(cls, data: Any) -> Any:
        """DESIGN.md's JSON writes `checkpointing` as true/false (true = full recomputation);
        `recompute` (none|selective|full), which rlplan also writes, says which. Both given,
        they must agree (true with selective or full, false with none, a mode with itself):
        an edit to one alone is refused, not silently overruled by the other."""
        if isinstance(data, dict) and "recompute" in data:
            mode, flag = data["recompute"], data.get("checkpointing")
            if "checkpointing" in data and not _agree(flag, mode):
                shown = str(flag).lower() if isinstance(flag, bool) else repr(flag)
                raise ValueError(
                    f"checkpointing {shown} contradicts recompute {mode!r}; give one of them "
                    "(recompute: none|selective|full) or make them agree")
            data = {**data, "checkpointing": mode}
            del data["recompute"]
        return data

    @field_validator("checkpointing", mode="before")
    @classmethod
    def _bool_checkpointing(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "full" if value else "none"
        return value

    @model_serializer(mode="wrap")
    def _write_recompute(self, handler: Any) -> dict[str, Any]:
        """Keep DESIGN.md's boolean `checkpointing` and add the mode as `recompute`."""
        data = handler(self)
        data["recompute"] = self.checkpointing
        data["checkpointing"] = self.checkpointing != "none"
        for end in ("first_stage_layers", "last_stage_layers"):  # absent = even split
            if data.get(end) is None:
                data.pop(end, None)
        return data

    @model_validator(mode="after")
    def _check(self) -> Layout:
        ranks = self.dp * self.cp * self.tp
        if ranks % (self.ep * (self.etp or 1)):
            raise ValueError(f"ep·etp ({self.ep}·{self.etp or 1}) must divide dp·cp·tp "
                             f"({ranks}); expert parallelism is carved out of those ranks")
        if self.sp and self.tp == 1:
            raise ValueError("sp (sequence parallelism) needs tp > 1")
        if self.vp > 1 and self.pp == 1:
            raise ValueError(f"vp (interleaved pipeline chunks) {self.vp} needs pp > 1; set vp "
                             "to 1 or use pipeline parallelism")
        if self.pp == 1 and self.uneven:
            raise ValueError("first_stage_layers/last_stage_layers (uneven pipeline stages) "
                             "need pp > 1; drop them or use pipeline parallelism")
        return self

    @property
    def uneven(self) -> bool:
        """Whether the layout gives its end stages' layer counts (`pipeline_split`)."""
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp


def _agree(flag: Any, mode: Any) -> bool:
    """Whether a `checkpointing` value says the same as a `recompute` mode."""
    if isinstance(flag, bool):
        return flag == (mode != "none")
    return flag == mode


def expert_tp(layout: Layout | Any, stage: str) -> int:
    """The expert tensor parallelism `layout` runs `stage` with: its `etp`, else the
    framework's default — generation engines (vLLM, SGLang) split every expert over the TP
    ranks unless expert parallelism is on (then experts stay whole, EP spanning DP × TP);
    Megatron-Core trains (and scores) with expert_tensor_parallel_size = tp."""
    if layout.etp is not None:
        return int(layout.etp)
    if stage == "generation":
        return layout.tp if layout.ep == 1 else 1
    return layout.tp


def check_experts(layout: Layout, stage: str, where: str) -> None:
    """The expert layout a framework can run: ep · etp within the dp·cp·tp ranks; generation
    as vLLM runs it (EP off: experts split over the TP ranks; EP on: EP = DP × TP, experts
    whole). Raises ValueError naming the field and the fix."""
    etp, ranks = expert_tp(layout, stage), layout.dp * layout.cp * layout.tp
    if ranks % (layout.ep * etp):
        raise ValueError(f"{where}.etp: ep·etp = {layout.ep}·{etp} must divide dp·cp·tp = "
                         f"{ranks}" + ("" if layout.etp is not None else
                                       f" (etp defaults to tp = {layout.tp} in {stage}; set "
                                       "etp: 1 to keep experts whole)"))
    if stage != "generation":
        return
    if layout.ep > 1 and layout.ep != layout.dp * layout.tp:
        raise ValueError(f"{where}.ep: vLLM's expert parallelism spans DP × TP, so ep must be 1 "
                         f"or dp·tp = {layout.dp * layout.tp} (got {layout.ep})")
    want = layout.tp if layout.ep == 1 else 1
    if etp != want:
        why = ("without EP vLLM splits every expert over the TP ranks" if layout.ep == 1
               else "with EP vLLM keeps every expert whole")
        raise ValueError(f"{where}.etp: {why}, so etp must be {want} (got {etp}); drop etp")


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    gpus: int = Field(gt=0)
    roles: list[str] = Field(default_factory=list)
    pool: str | None = Field(None, description="the pool the group runs on (a cluster of "
                             "several pools; absent with one)")

    @model_serializer(mode="wrap")
    def _drop_no_pool(self, handler: Any) -> dict[str, Any]:
        """A single-pool plan's groups carry no `pool` key (its JSON as before pools)."""
        data = handler(self)
        if data.get("pool") is None:
            data.pop("pool", None)
        return data


class InterModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    placement: Literal["colocated", "partial", "disaggregated"] = "colocated"
    inter_stage_fusion: bool = False
    intra_stage_fusion: bool = False
    staleness: int = Field(0, ge=0)
    shared_actor_critic: bool = False
    offload_during_generation: bool = Field(
        False, description="co-located: the group's resident model state moves to CPU memory "
                           "while the actor generates, and back after (NeMo-RL, verl offload)")
    partial_rollout: bool = Field(
        False, description="the step takes the responses that finish first; unfinished ones "
                           "continue in the next step with the newer weights (verl fully-async "
                           "partial_rollout, Kimi k1.5, APRIL): off-policy tokens")
    overlap_weight_sync: bool = Field(
        False, description="staleness ≥ 1 with a separate rollout group: the rollout group "
                           "keeps a shadow copy of the actor (M_sh) and receives the next "
                           "weights into it while it generates, so the sync leaves its busy "
                           "time; false: one copy, generation pauses for the sync")

    def choices(self) -> list[str]:
        """The choices beyond the placement, in words (plan view, sweep, timeline, search)."""
        return ([f"staleness {self.staleness}"] if self.staleness else []) \
            + (["inter-stage fusion"] if self.inter_stage_fusion else []) \
            + (["intra-stage fusion"] if self.intra_stage_fusion else []) \
            + (["shared actor–critic"] if self.shared_actor_critic else []) \
            + (["state offloaded during generation"] if self.offload_during_generation
               else []) \
            + (["weight sync overlapped (shadow copy)"] if self.overlap_weight_sync else []) \
            + (["partial rollouts"] if self.partial_rollout else [])


class PlanInput(BaseModel):
    """What a hand-written plan needs: groups, layouts per role and stage, inter-model choices."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # a full plan JSON is accepted too

    groups: list[Group] = Field(min_length=1)
    layouts: dict[str, dict[str, Layout]]
    inter_model: InterModel = Field(description="required (README): the placement and the "
                                    "choices between models, e.g. {placement: colocated, "
                                    "staleness: 0}")

    @model_validator(mode="after")
    def _check(self) -> PlanInput:
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"groups: names must be unique, got {names}")
        sizes = {g.name: g.gpus for g in self.groups}
        for role, stages in self.layouts.items():
            if role not in ROLE_STAGES:
                raise ValueError(f"layouts: unknown role '{role}'; roles are "
                                 f"{', '.join(ROLE_STAGES)}")
            for stage, layout in stages.items():
                where = f"layouts.{role}.{stage}"
                if stage not in ROLE_STAGES[role]:
                    raise ValueError(f"{where}: {role} has no {stage} stage; its stages are "
                                     f"{', '.join(ROLE_STAGES[role])}")
                if layout.group not in sizes:
                    raise ValueError(f"{where}.group: no group named '{layout.group}'; "
                                     f"groups are {', '.join(names)}")
                if layout.gpus != sizes[layout.group]:
                    raise ValueError(
                        f"{where}: dp·tp·pp·cp = {layout.gpus} but group '{layout.group}' has "
                        f"{sizes[layout.group]} GPUs; make the degrees multiply to the group size")
                check_experts(layout, stage, where)
                if layout.offload == "sleep" and role not in FROZEN_ROLES:
                    raise ValueError(f"{where}.offload: 'sleep' keeps a frozen model's weights "
                                     f"in CPU memory between its stages; {role} {stage} "
                                     "holds state it uses again: use none, optimizer, params "
                                     "or both")
                engine = [f for f in ("kv_cache_tokens", "max_num_seqs")
                          if getattr(layout, f) is not None]
                if engine and stage != "generation":
                    raise ValueError(f"{where}.{engine[0]}: a rollout engine's setting; the "
                                     f"{stage} layout has no engine (set it on "
                                     "layouts.actor.generation, or drop it)")
                if layout.vp > 1 and stage != "training":
                    raise ValueError(f"{where}.vp: interleaved pipeline chunks are a training "
                                     f"schedule; {stage} runs with vp 1 (drop vp)")
                if layout.uneven and stage == "generation":
                    raise ValueError(f"{where}: first_stage_layers/last_stage_layers set a "
                                     "Megatron pipeline (training, assessment); rollout engines "
                                     "split their pipeline stages themselves (drop them)")
        self._check_staleness()
        return self

    def with_kv_cache(self, tokens: int | None) -> PlanInput:
        """This plan with its rollout's KV cache at `tokens` per replica (None: left to
        `evaluate`, which gives the largest that fits where the rollout sits)."""
        return self.with_layout("actor", "generation", kv_cache_tokens=tokens)

    def with_layout(self, role: str, stage: str, **changes: Any) -> PlanInput:
        """This plan with the layout of `role` in `stage` changed by `changes` (fields of
        `Layout`), unchecked: `evaluate` checks it."""
        layout = self.layouts[role][stage].model_copy(update=changes)
        return self.model_copy(update={"layouts": {
            **self.layouts, role: {**self.layouts[role], stage: layout}}})

    def _check_staleness(self) -> None:
        """Staleness s ≥ 1 pipelines generation of step n+1 against training of step n: it needs
        the actor generating on a group of its own (a co-located group cannot do both at once;
        priced anyway, it would overlap work that shares the same GPUs)."""
        s = self.inter_model.staleness
        if s < 1:
            return
        actor = self.layouts.get("actor", {})
        gen = actor.get("generation")
        home = actor.get("training") or actor.get("assessment")
        if gen is None or home is None or gen.group == home.group:
            where = (f"on group '{gen.group}' with its training" if gen and home
                     else "nowhere" if gen is None else "with no training layout")
            raise ValueError(
                f"inter_model.staleness: {s} needs the actor generating on a group of its own, "
                f"separate from training (it generates {where}); set staleness to 0 or give "
                "layouts.actor.generation its own group")


class StageTime(BaseModel):
    time_s: float


class Plan(PlanInput):
    """A priced plan: DESIGN.md's plan JSON. `status` is optimal|feasible|infeasible|evaluated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    status: Literal["optimal", "feasible", "infeasible", "evaluated"]
    objective: Literal["time", "cost", "gpus"] = "time"
    iteration_time_s: float
    tokens_per_s: float
    cost_per_step_usd: float | None
    cost: dict[str, Any] | None = Field(None, description="the price the cost was computed "
                                        "with: price_usd_per_gpu_hour and price_source "
                                        "('flag', 'scenario' or 'profile NAME (source)')")
    stages: dict[str, StageTime]
    memory: dict[str, Any]
    bounds: dict[str, float]
    precision: dict[str, str] = Field(default_factory=dict, description="what each stage "
                                      "computes in: generation (rollout weights and KV "
                                      "cache), assessment, training")
    search: dict[str, Any] = Field(default_factory=dict)
    explanation: dict[str, Any] = Field(default_factory=dict)
    breakdown: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    framework: str | None = Field(None, description="the scenario's `framework` (`--framework`): "
                                  "the framework@version the search was restricted to and "
                                  "priced as (what `export` targets when no --format is given)")
    frameworks: list[dict[str, Any]] | None = Field(
        None, description="each shipped release (the scenario's alone when it names one: "
        "`framework`, `label`, `training_only`), whether it runs the plan as it is "
        "(`runs_as_is`), what it would change or refuse (`changes`), and what its layouts "
        "as it runs them change in peak memory and step time (`as_it_runs`)")
    baseline: dict[str, Any] | None = Field(None, description="`plan --baseline`: the given "
                                            "plan priced (iteration_time_s, tokens_per_s, "
                                            "cost_per_step_usd), the gain over it and what "
                                            "the plan changes")
    scenario: dict[str, Any] | None = Field(None, description="the scenario as written (with "
                                            "CLI overrides): what `export` and `evaluate` "
                                            "need besides the plan")

"""The RL rows of ../shared/data/calibration/runs.csv mapped to scenarios and plans as the
frameworks ran them (bench/rl_rows.py prices them): layouts, lengths, engine settings and what
each step timer covers, with every assumption printed by the bench beside the figures.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from planner.cost.iteration import evaluate
from planner.cost.legality import micro_batch_at_most, rank_share
from planner.cost.pipeline_split import offered_split
from planner.cost.rollout_stage import vllm_kv_tokens
from planner.errors import InfeasibleError
from planner.frameworks import load_preset
from planner.plan import Layout, PlanInput
from planner.specs.hardware import load_profile
from planner.specs.scenario import Scenario, load_scenario

MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "llama3.1-8b": "llama-3.1-8b",
          "qwen3-32b": "qwen3-32b", "qwen2.5-math-7b": "qwen2.5-7b",
          "deepseek-v3": "deepseek-v3", "qwen3-235b": "qwen3-235b-a22b"}
H20_INTER_NODE_GBPS = 50.0
NEMO_SAMPLES = 32
"""num_generations_per_prompt of NeMo-RL's GRPO recipes (the Qwen3-235B performance recipe's
16 x 32, exports.md §5); only G-GBS, the product, enters the model."""
VLLM_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's own default, where NeMo-RL's 0.6 leaves no room for one longest sequence beside the
weights (the performance recipes' value is not in the data)."""
# The frameworks' behaviour comes from their presets (planner/frameworks/presets/, each value
# with its source): the rows name the framework, whose runtime defaults (NeMo-RL's controller
# host time) price them; the engine settings below size the KV cache as the framework does.
NEMO, VERL, DEEPSPEED = load_preset("nemo-rl"), load_preset("verl"), load_preset("deepspeed")
NEMO_GPU_MEMORY_UTILIZATION = NEMO.engine.gpu_memory_utilization.value
"""NeMo-RL's `policy.generation.vllm_cfg.gpu_memory_utilization` default (its preset)."""
VERL_ROLLOUT_TP, VERL_GPU_MEMORY_UTILIZATION, VERL_MAX_NUM_SEQS = (
    VERL.engine.tensor_parallel_size.value, VERL.engine.gpu_memory_utilization.value,
    VERL.engine.max_num_seqs.value)
"""verl's `actor_rollout_ref.rollout.{tensor_model_parallel_size, gpu_memory_utilization,
max_num_seqs}` defaults (its preset): the fully-async document's runs do not give theirs."""
NEMO_RL_CONTROLLER_US_PER_TOKEN = NEMO.runtime["controller_us_per_token"].value
"""The host time NeMo-RL's preset prices per generated token (fitted by bench/calibration.py;
the preset says how)."""
PUBLISHED = {"search.memory_headroom": 0}
"""The published runs ran at their own memory: priced against the full capacity, no headroom."""
VERL_PROMPT_LEN = 128
VERL_RESPONSE_LEN = 1500
VERL_RESPONSE_SENSITIVITY = (1000, 2000, 3000)


ASYNC_SYNC_ASSUMPTION = (
    "{}: two groups, staleness 1; the weight refit priced by planner/cost/refit.py as "
    "runtime.refit {} (bench/refit.py checks it on the measured refits), blocking (generation "
    "pauses for it, one rollout copy): whether the recipe overlaps it (NeMo-RL "
    "grpo.async_grpo.in_flight_weight_updates, verl checkpoint_engine."
    "overlap_broadcast_and_consume) is not in the data; the overlapped mode (shadow copy) is "
    "printed as a sensitivity")
NEMO_RL_REFIT = NEMO.runtime["refit"].value
"""NeMo-RL's refit to its own generation GPUs (its preset: every training rank sends its share
over NCCL, rollout.md §6). Co-located rows re-lay through GPU memory whatever it says."""
VERL_REFIT = "checkpoint_engine"
"""verl's refit to a rollout group of its own as the measured fully-async rows ran it: the
recipe's `async_training.checkpoint_engine` (one rank broadcasts in buckets), the configuration
its document measures the speed-up with — not the preset's `checkpoint_engine_relays`, verl
0.9.1's NCCL engine whose node-local relays came after those runs (bench/README.md, refit.py)."""


H20_FILE = "h20-bench.yaml"
SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "data" / "models.jsonl"
"""The OPT architectures (OPT paper, Table 1) as calibration-only entries: the DeepSpeed-Chat
rows' actors, critic and reward model (not shipped: the planner's catalog does not carry them)."""


def write_local_files(local: Path) -> None:
    """The bench's own inputs, written into `local`: the H20 profile with a 400 Gb/s NIC per GPU
    (H20_INTER_NODE_GBPS) and the OPT configs of ../shared/data/models.jsonl as config.json
    files (`opt-1.3b.json`, ...)."""
    raw = load_profile("h20").model_dump(exclude_none=True)
    raw.update(name="h20-bench", inter_node_gbps=H20_INTER_NODE_GBPS)
    raw["sources"] = {**raw.get("sources", {}), "inter_node_gbps": "bench assumption"}
    (local / H20_FILE).write_text(yaml.safe_dump(raw), encoding="utf-8")
    for line in SHARED_MODELS.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get("model_type") == "opt":
            config = {k: v for k, v in entry.items() if not k.startswith("_")}
            config["architectures"] = [config["architectures"]]  # one name in the jsonl
            (local / f"{entry['name'].lower()}.json").write_text(json.dumps(config),
                                                                  encoding="utf-8")


@dataclass
class RLCase:
    """One runs.csv row mapped to a scenario and a plan (or the reason it is not)."""

    row: dict[str, str]
    source: str  # "NeMo-RL" | "verl" | "DeepSpeed-Chat"
    measured_s: float | None
    profile: str = ""
    overrides: dict = field(default_factory=dict)
    plan: PlanInput | None = None
    assumptions: list[str] = field(default_factory=list)
    skip: str | None = None
    scenario: Scenario | None = None
    gpu_memory_utilization: float | None = None  # vLLM's KV budget, where the framework sets it
    unknowns: list[str] = field(default_factory=list)  # settings the price rests on, not given

    @property
    def id(self) -> str:
        return self.row["id"]

    @property
    def label(self) -> str:
        r = self.row
        mode = "colocated" if r["placement"].startswith("colocated") else (
            "fully-async" if "fully async" in r["placement"] else "1-off")
        return f"{r['model']} {r['hardware'].split()[0]} {r['n_gpus']}g {mode}"


def _degrees(text: str) -> dict[str, int] | None:
    """'TP,CP,EP,PP=[1,1,8,1]' -> {'tp': 1, 'cp': 1, 'ep': 8, 'pp': 1}; None if not given."""
    m = re.match(r"\s*([A-Z,]+)\s*=\s*\[([\d,\s]+)\]", text)
    if not m:
        return None
    names = [n.lower() for n in m.group(1).split(",")]
    return dict(zip(names, (int(v) for v in m.group(2).split(",")), strict=True))


def _layout(group: str, gpus: int, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
            **kw) -> Layout:
    return Layout(group=group, dp=gpus // (tp * pp * cp), tp=tp, pp=pp, cp=cp, ep=ep, **kw)


def _plan(groups: dict[str, int], gen: Layout, train: Layout, reference: Layout | None,
          staleness: int, swap: bool = False, partial: bool = False) -> PlanInput:
    layouts: dict[str, dict[str, Layout]] = {"actor": {"generation": gen, "training": train}}
    if reference is not None:
        layouts["reference"] = {"assessment": reference}
    return PlanInput(groups=[{"name": n, "gpus": g} for n, g in groups.items()],
                     layouts=layouts,
                     inter_model={"placement": "colocated" if staleness == 0 else
                                  "disaggregated", "staleness": staleness,
                                  "offload_during_generation": swap,
                                  "partial_rollout": partial})


def _can_swap(case: RLCase, staleness: int) -> bool:
    """Co-located rows move the training state to CPU memory while vLLM generates (NeMo-RL and
    verl colocated mode); priced only where the profile gives host memory and a host link."""
    if staleness:
        return False
    profile = load_profile(case.profile)
    ok = profile.host_memory_gib is not None and profile.host_link_gbps is not None
    case.assumptions.append(
        "co-located: training state offloaded to CPU during generation" if ok else
        f"co-located: training state stays on the GPU during generation ({profile.name} has "
        "no host memory / host link figure to price the offload with)")
    return ok


def _hardware(row: dict[str, str], h20_path: Path) -> tuple[str, int, str | None]:
    hw = row["hardware"]
    if "H100" in hw:
        return "h100-sxm", 8, None
    if "GB200" in hw:
        return "gb200", 4, None
    if hw.startswith("H20"):
        return str(h20_path), 8, None
    if "A100-80G" in hw:
        return "a100-sxm-80gb", 8, None
    return "", 0, f"hardware '{hw}' has no mapping"


def map_row(row: dict[str, str], local: Path) -> RLCase:
    """The row as a scenario and a plan; `local` holds the bench's own files
    (`write_local_files`)."""
    h20_path = local / H20_FILE
    fw = row["framework"]
    source = "NeMo-RL" if fw.startswith("NeMo") else "verl" if fw.startswith("verl") else fw
    measured = float(row["step_time_s"]) if row["step_time_s"] else None
    case = RLCase(row=row, source=source, measured_s=measured)
    if source.startswith("DeepSpeed"):
        case.source = "DeepSpeed-Chat"
        case.profile, _, _ = _hardware(row, h20_path)
        _map_dschat(case, local)
        return case
    model = MODELS.get(row["model"].lower())
    if model is None:
        case.skip = f"model '{row['model']}' has no shipped spec"
        return case
    case.profile, per_node, why = _hardware(row, h20_path)
    if why:
        case.skip = why
        return case
    gpus = int(row["n_gpus"])
    if row["model"].lower() == "qwen2.5-math-7b":
        case.assumptions.append("Qwen2.5-Math-7B priced as qwen2.5-7b (same shape, models.md; "
                                "it differs in rope_theta and max_position_embeddings only)")
    if case.profile == str(h20_path) and gpus > per_node:
        case.assumptions.append(
            f"h20's inter_node_gbps is the lowest user-reported figure ([U] 100 Gb/s per GPU); "
            f"bench-local copy with inter_node_gbps = {H20_INTER_NODE_GBPS:g} (a 400 Gb/s NIC "
            f"per GPU, as DGX H100 and another H20 report), as before")
    if source == "NeMo-RL":
        _map_nemo(case, model, gpus, per_node)
    else:
        _map_verl(case, model, gpus, per_node)
    return case


def _nemo_groups(case: RLCase, gpus: int, per_node: int) -> tuple[dict[str, int], int]:
    """The row's GPU groups and staleness: one co-located group, or the 1-off recipe's train and
    generation nodes (half each where the row does not give them, as the README states)."""
    placement = case.row["placement"]
    if placement.startswith("colocated"):
        return {"g": gpus}, 0
    m = re.search(r"(\d+)T\+(\d+)G nodes|(\d+) train nodes \+ (\d+) gen nodes", placement)
    if m:
        t_nodes, g_nodes = (int(x) for x in m.groups() if x is not None)
    else:
        t_nodes = g_nodes = gpus // per_node // 2
        case.assumptions.append(
            f"1-off node split not given for this row: half the nodes train, half "
            f"generate ({t_nodes}+{g_nodes} nodes), as the README states for the H100 rows")
    case.assumptions.append(ASYNC_SYNC_ASSUMPTION.format("async 1-off", NEMO_RL_REFIT))
    case.unknowns.append("whether generation goes on during the refit "
                         "(grpo.async_grpo.in_flight_weight_updates)")
    return {"train": t_nodes * per_node, "rollout": g_nodes * per_node}, 1


def _nemo_generation(case: RLCase, group: str, gpus: int) -> Layout:
    """vLLM's layout and KV cache as NeMo-RL runs it: the row's TP and PP (TP across nodes
    where it exceeds one), experts split over the TP ranks (no EP), the KV cache vLLM allocates
    at NeMo-RL's gpu_memory_utilization (vLLM's own default where that leaves no room for one
    longest sequence)."""
    deg = _degrees(case.row["gen_parallel"]) or {"tp": 1, "pp": 1}
    gen = _layout(group, gpus, tp=deg.get("tp", 1), pp=deg.get("pp", 1))
    sc = load_scenario(None, case.overrides)
    util = NEMO_GPU_MEMORY_UTILIZATION
    longest = sc.workload.prompt_len + int(sc.response_lengths.max())
    if vllm_kv_tokens(sc, gen, util) < longest:
        util = VLLM_GPU_MEMORY_UTILIZATION
        case.assumptions.append(
            f"vLLM gpu_memory_utilization {util:g} (vLLM's default): NeMo-RL's "
            f"{NEMO_GPU_MEMORY_UTILIZATION:g} leaves no room for one {longest}-token sequence "
            f"beside TP {gen.tp}'s weights, so the recipe must set more (not in the data)")
    case.gpu_memory_utilization = util
    case.unknowns.append("the recipe's vLLM gpu_memory_utilization")
    gen = gen.model_copy(update={"kv_cache_tokens": vllm_kv_tokens(sc, gen, util)})
    case.assumptions.append(
        f"vLLM KV cache as NeMo-RL sizes it: gpu_memory_utilization {util:g} "
        + ("(the default of policy.generation.vllm_cfg, examples/configs/grpo_math_1B.yaml, "
           "exports.md §5; the performance recipes' value is not in the data)"
           if util == NEMO_GPU_MEMORY_UTILIZATION else "")
        + f": {gen.kv_cache_tokens:,} tokens per replica")
    if sc.actor.moe is not None:
        case.unknowns.append("vLLM's expert parallelism (the row gives TP, PP only)")
        case.assumptions.append(
            f"vLLM shards the experts over its TP ranks (no EP: the row gives TP,PP only): "
            f"generation etp = tp {gen.tp}" + (f", TP spanning {gen.tp // sc.cluster.gpus_per_node}"
                                             " nodes" if gen.tp > sc.cluster.gpus_per_node
                                             else ""))
    return gen


def _nemo_training(case: RLCase, deg: dict[str, int], group: str, gpus: int, micro: int,
                   ckpt: str) -> Layout:
    """Megatron's layout for the row's TP/CP/EP/PP: ETP 1 under EP (the README: the published
    EP layouts divide only with it), and where PP does not divide the layers the uneven split
    of the recipe (Megatron's first/last-stage layer counts)."""
    tp, pp, ep = deg.get("tp", 1), deg.get("pp", 1), deg.get("ep", 1)
    sc = load_scenario(None, case.overrides)
    first, last = offered_split(sc.actor.num_hidden_layers, pp) or (None, None)
    lay = _layout(group, gpus, tp=tp, pp=pp, cp=deg.get("cp", 1), ep=ep,
                  etp=1 if ep > 1 else None, first_stage_layers=first,
                  last_stage_layers=last, zero=1, sp=tp > 1, micro_batch=micro,
                  checkpointing=ckpt)
    # whole micro-batches dividing each rank's share, as Megatron accumulates them
    return lay.model_copy(update={"micro_batch": micro_batch_at_most(
        rank_share(sc, "training", lay.dp), micro)})


def _map_nemo(case: RLCase, model: str, gpus: int, per_node: int) -> None:
    r = case.row
    g_gbs, t_gbs = (int(x) for x in re.findall(r"\d+", r["batch"])[:2])
    gen_len = float(r["avg_gen_len"])
    t_max = int(r["max_len"])
    tokens_per_seq = float(r["tok_per_s_per_gpu"]) * float(r["step_time_s"]) * gpus / g_gbs
    prompt = max(1, round(tokens_per_seq - gen_len))
    algo = r["algo"].lower()
    reference = algo == "grpo"  # DAPO has no KL term (the README: row 27 "no reference")
    case.unknowns.append("the prompt length (derived from the row's throughput)")
    if algo == "dapo":
        case.unknowns.append("DAPO's dynamic sampling: how many generation rounds a step ran "
                             "to fill its batch (one priced)")
    case.assumptions += [
        f"prompt length {prompt}: not given; derived from the row's own throughput, "
        f"tok/s/GPU x step x GPUs / G-GBS = {tokens_per_seq:.0f} tokens per sequence, minus "
        f"G-avg {gen_len:.0f}",
        f"max response {t_max - prompt} = T-max {t_max} (max total sequence length) - prompt",
        f"G-GBS {g_gbs} split as {g_gbs // NEMO_SAMPLES} prompts x {NEMO_SAMPLES} generations "
        "(NeMo-RL GRPO recipes; only the product enters the model); mini_batches = "
        f"G-GBS/T-GBS = {g_gbs // t_gbs}",
        ("reference model on (GRPO KL penalty, NeMo-RL default), priced with the training "
         "layout" if reference else f"{r['algo']}: no reference model (the README)")
        + "; rule-based math reward (verifier)",
        "training: Megatron distributed optimizer (zero=1), sequence parallelism when tp>1, "
        "sequence packing up to T-max tokens -> micro_batch = max(1, T-max // mean length), "
        "or the largest size below it that divides each rank's share; "
        "no activation checkpointing unless the memory model needs it (then full)",
    ]
    case.overrides = {
        "algorithm": algo, "models.actor": model,
        "models.reference": "actor" if reference else "none",
        "models.reward": "verifier", "workload.prompts_per_step": g_gbs // NEMO_SAMPLES,
        "workload.samples_per_prompt": NEMO_SAMPLES, "workload.prompt_len": prompt,
        "workload.response_len": round(gen_len), "workload.max_response_len": t_max - prompt,
        "workload.mini_batches": g_gbs // t_gbs, "cluster.gpu": case.profile,
        "cluster.nodes": gpus // per_node, "cluster.gpus_per_node": per_node,
        "framework": NEMO.name, **PUBLISHED}
    if "BF16" in r["hardware"]:
        case.overrides["runtime.rollout_weights"] = "bf16"
        case.assumptions.append("BF16 rollouts (the row's hardware column), whatever the "
                                "checkpoint stores")
    case.assumptions.append(
        f"controller host time {NEMO_RL_CONTROLLER_US_PER_TOKEN:g} us per generated token "
        f"(the {NEMO.name} preset's runtime.controller_us_per_token, fitted on the co-located "
        "rows below; leave-one-out errors printed)")
    groups, staleness = _nemo_groups(case, gpus, per_node)
    train_group, gen_group = ("g", "g") if not staleness else ("train", "rollout")
    gen = _nemo_generation(case, gen_group, groups[gen_group])
    mean_len = prompt + gen_len
    micro = max(1, int(t_max // mean_len))
    swap = _can_swap(case, staleness)
    train_deg = _degrees(r["train_parallel"])
    ckpts = ("none", "full")
    if model in RECIPE_CHECKPOINTING:
        ckpts = ("full",)
        case.assumptions.append(RECIPE_CHECKPOINTING[model])
    if train_deg is None:
        case.unknowns.append("the training layout ('see src')")
        case.assumptions.append("training TP/CP/EP/PP not given ('see src'): the least tensor "
                                "parallelism the memory model fits, CP = EP = PP = 1")
        candidates = [({"tp": t}, c) for t in (1, 2, 4, 8) for c in ckpts]
    else:
        candidates = [(train_deg, c) for c in ckpts]
    last_error = ""
    for deg, ckpt in candidates:
        train = _nemo_training(case, deg, train_group, groups[train_group], micro, ckpt)
        plan = _plan(groups, gen, train, train if reference else None, staleness, swap)
        try:
            sc = load_scenario(None, case.overrides)
            evaluate(sc, plan)
        except InfeasibleError as exc:
            last_error = str(exc)
            continue
        case.plan, case.scenario = plan, sc
        _note_training(case, train, ckpt)
        if model not in RECIPE_CHECKPOINTING:
            case.unknowns.append("the recipe's activation recompute and optimizer offload")
        return
    # nothing fits: keep the recipe's layout so the failure is reported with its message
    train = _nemo_training(case, candidates[0][0], train_group, groups[train_group], micro,
                           "full")
    case.plan = _plan(groups, gen, train, train if reference else None, staleness, swap)
    case.scenario = load_scenario(None, case.overrides)
    case.assumptions.append(f"no candidate layout fits memory ({last_error[:60]}...)")


RECIPE_CHECKPOINTING = {
    "qwen3-235b-a22b": "activation checkpointing on (full): NeMo-RL's Qwen3-235B performance "
                       "recipe sets megatron_cfg.activation_checkpointing (exports.md §5)"}


def _note_training(case: RLCase, train: Layout, ckpt: str) -> None:
    split = ""
    if train.first_stage_layers is not None:
        layers = case.scenario.actor.num_hidden_layers  # type: ignore[union-attr]
        if not (layers == 94 and train.pp == 8):
            case.unknowns.append("Megatron's pipeline split")
        split = (f" first/last stage layers {train.first_stage_layers}/"
                 f"{train.last_stage_layers} ({layers} layers over PP {train.pp}: "
                 + ("NeMo-RL's Qwen3-235B recipe sets num_layers_in_first/last_pipeline_stage "
                    "11, exports.md §5)" if layers == 94 and train.pp == 8 else
                    "the recipe's split is not in the data: the split rlplan offers, the middle "
                    "stages full)"))
    etp = (f" etp=1 (Megatron's default etp = tp {train.tp} does not divide: the README)"
           if train.ep > 1 and train.tp > 1 else "")
    case.assumptions.append(f"chosen training layout: tp={train.tp} cp={train.cp} "
                            f"ep={train.ep} pp={train.pp} dp={train.dp}{etp}{split} "
                            f"micro_batch={train.micro_batch} checkpointing={ckpt}")


def _map_verl(case: RLCase, model: str, gpus: int, per_node: int,
              response_len: int = VERL_RESPONSE_LEN) -> None:
    r = case.row
    prompts, samples = (int(x) for x in re.search(r"(\d+) prompts x(\d+)", r["batch"]).groups())
    mini = int(re.search(r"mini (\d+)", r["batch"]).group(1))
    t_max = int(re.search(r"(\d+)K", r["max_len"]).group(1)) * 1024
    case.assumptions += [
        f"DAPO: no reference model, rule-based reward; {prompts} prompts x {samples} samples; "
        f"mini-batch {mini} prompts -> mini_batches = {prompts // mini}; max response "
        f"{t_max} (28K); dynamic sampling (over-generation) not modelled",
        f"prompt length {VERL_PROMPT_LEN}: not given; math prompts as derived for the NeMo-RL "
        "rows (~100-130 tokens)",
        f"mean response length {response_len}: not given. Qwen2.5-Math-7B has a 4K native "
        "context, so responses mostly sit far below the 28K cap; bound from the row's own "
        "components: the colocated 'update actor' 269.8 s on 32 H20s at <= 148 TFLOP/s allows "
        "<= ~2,500 tokens per sequence at 100% of peak, ~1,500 at 60%. Sensitivity printed",
        "training: FSDP2 = ZeRO-3 over the group, gradient checkpointing (full), "
        "micro_batch = 2 sequences (verl packs micro-batches by tokens; 2 maximum-length "
        "sequences is the token budget the memory model can express)",
        f"rollout: vLLM as verl configures it by default (the runs do not give theirs; "
        f"the {VERL.name} preset): TP {VERL_ROLLOUT_TP}, gpu_memory_utilization "
        f"{VERL_GPU_MEMORY_UTILIZATION:g}, max_num_seqs {VERL_MAX_NUM_SEQS}",
    ]
    case.unknowns += ["the mean response length (bench default, sensitivity printed)",
                      "the prompt length",
                      "the rollout's TP, max_num_seqs and gpu_memory_utilization (verl's "
                      "defaults priced)", "DAPO's dynamic sampling (generation rounds per step)"]
    case.overrides = {
        "algorithm": "dapo", "models.actor": model, "models.reference": "none",
        "models.reward": "verifier", "workload.prompts_per_step": prompts,
        "workload.samples_per_prompt": samples, "workload.prompt_len": VERL_PROMPT_LEN,
        "workload.response_len": response_len, "workload.max_response_len": t_max,
        "workload.mini_batches": prompts // mini, "cluster.gpu": case.profile,
        "cluster.nodes": gpus // per_node, "cluster.gpus_per_node": per_node,
        "framework": VERL.name, **PUBLISHED}
    if r["placement"].startswith("colocated"):
        groups, staleness = {"g": gpus}, 0
        gen_group = train_group = "g"
    else:
        roll, train_n = (int(x) for x in re.search(r"(\d+):(\d+)", r["placement"]).groups())
        groups, staleness = {"train": train_n, "rollout": roll}, 1
        gen_group, train_group = "rollout", "train"
        case.assumptions.append(
            ASYNC_SYNC_ASSUMPTION.format("fully async", VERL_REFIT) + "; partial rollouts on "
            "(verl's fully-async async_training.partial_rollout defaults to True, exports.md "
            "§1.10); old log-probs from the rollout engine (runtime.old_log_probs rollout: 'old "
            "log-prob' is '-' in the measured row, and the recipe's "
            "async_training.use_rollout_log_probs defaults to True, exports.md §1.10), so the "
            "trainer group runs no old-log-prob pass")
        case.overrides["runtime.old_log_probs"] = "rollout"
        case.overrides["runtime.refit"] = VERL_REFIT
        case.unknowns += ["what a fully-async step counts: the trainer's 'update' timer "
                          "exceeds the step less its wait for samples",
                          "async_training.require_batches, trigger_parameter_sync_step, "
                          "staleness_threshold"]
    gen = _layout(gen_group, groups[gen_group], tp=VERL_ROLLOUT_TP,
                  max_num_seqs=VERL_MAX_NUM_SEQS)
    case.gpu_memory_utilization = VERL_GPU_MEMORY_UTILIZATION
    gen = gen.model_copy(update={"kv_cache_tokens": vllm_kv_tokens(
        load_scenario(None, case.overrides), gen, VERL_GPU_MEMORY_UTILIZATION)})
    train = _layout(train_group, groups[train_group], zero=3, checkpointing="full",
                    micro_batch=2)
    case.plan = _plan(groups, gen, train, None, staleness, _can_swap(case, staleness),
                      partial=staleness > 0)
    case.scenario = load_scenario(None, case.overrides)


# --- DeepSpeed-Chat step 3 (rows 44-48) -------------------------------------------------------

DSCHAT_PAIRS_PER_STEP = 1024
"""Prompt-answer pairs per step: the calibration README's 'global batch up to 1024 pairs'."""
DSCHAT_PROMPT = DSCHAT_ANSWER = 256
"""Prompt and generated tokens (the README: 256 + 256): the hybrid engine generates every answer
to max_answer_seq_len, so every response is 256 tokens (a fixed length, no tail)."""
DSCHAT_PER_DEVICE_BATCHES = (16, 8, 4, 2, 1)
"""--per_device_generation_batch_size and --per_device_training_batch_size: DeepSpeed-Chat
step 3's main.py defaults (16) first, halved where the memory needs it (the README's runs do
not give theirs; the shared data lists the flags only, exports.md §6)."""
DSCHAT_CRITIC = "opt-350m"
INFERENCE_TPS = (1, 2, 4, 8)


def _map_dschat(case: RLCase, local: Path) -> None:
    """DeepSpeed-Chat step-3 PPO on one 8-GPU node: an OPT actor (generation through the
    hybrid engine, ZeRO-3 training), OPT-350M critic and reward model, the actor's frozen copy
    as reference; the measured step derived from the row's tokens/s/GPU."""
    r = case.row
    actor = re.match(r"(OPT-[\d.]+B)", r["model"]).group(1).lower()
    gpus, tok_s = int(r["n_gpus"]), float(r["tok_per_s_per_gpu"])
    pairs, seq = DSCHAT_PAIRS_PER_STEP, DSCHAT_PROMPT + DSCHAT_ANSWER
    case.measured_s = pairs * seq / (tok_s * gpus)
    case.assumptions += [
        f"measured step derived: {pairs} pairs x {seq} tokens / ({tok_s:g} tok/s/GPU x {gpus} "
        f"GPUs) = {case.measured_s:.1f} s (the README's tok/s/GPU = 135.3M tokens / (epoch "
        "hours x 8 GPUs), read back at the README's global batch of up to 1024 pairs)",
        f"PPO: actor {actor}, critic and reward {DSCHAT_CRITIC} (the README), reference = the "
        f"actor's frozen copy; {pairs} prompts x 1 answer, prompt {DSCHAT_PROMPT}, every answer "
        f"{DSCHAT_ANSWER} tokens (the hybrid engine generates to max_answer_seq_len); "
        "ppo_epochs 1 (main.py's default)",
        "ZeRO-3 for every model (runs.csv: 'ZeRO (3 in scripts)'); the training state stays "
        "on the GPUs while the hybrid engine generates",
        "generation: the hybrid engine (the deepspeed preset: kernels without CUDA graphs, "
        "priced as runtime.engine eager), a batch of per-device batch x inference TP sequences "
        "per replica (the TP group generates its ranks' prompts together)",
        "settings the README does not give, taken in this order until the memory model fits "
        f"(the same rule for every row): per-device generation and training batch "
        f"{DSCHAT_PER_DEVICE_BATCHES[0]} (main.py's default) halved down to "
        f"{DSCHAT_PER_DEVICE_BATCHES[-1]}, within each the least inference TP "
        f"(--inference_tp_size) and then gradient checkpointing; ZeRO-Offload of parameters "
        "and optimizer (--offload) only where nothing else fits",
    ]
    last_error = ""
    for offload in ("none", "both"):
        for batch in DSCHAT_PER_DEVICE_BATCHES:
            mini = pairs // (batch * gpus)
            case.overrides = {
                "algorithm": "ppo", "models.actor": str(local / f"{actor}.json"),
                "models.reference": "actor",
                "models.reward": str(local / f"{DSCHAT_CRITIC}.json"),
                "models.critic": str(local / f"{DSCHAT_CRITIC}.json"),
                "workload.prompts_per_step": pairs, "workload.samples_per_prompt": 1,
                "workload.prompt_len": DSCHAT_PROMPT, "workload.response_len": DSCHAT_ANSWER,
                "workload.max_response_len": DSCHAT_ANSWER, "workload.mini_batches": mini,
                "cluster.gpu": case.profile, "cluster.nodes": 1, "cluster.gpus_per_node": gpus,
                "framework": DEEPSPEED.name, **PUBLISHED}
            sc = load_scenario(None, case.overrides)
            for tp in INFERENCE_TPS:
                for ckpt in ("none", "full"):
                    train = _layout("g", gpus, zero=3, micro_batch=batch, checkpointing=ckpt,
                                    offload=offload)
                    gen = _layout("g", gpus, tp=tp, max_num_seqs=batch * tp)
                    plan = PlanInput(
                        groups=[{"name": "g", "gpus": gpus}],
                        layouts={"actor": {"generation": gen, "training": train},
                                 "critic": {"training": train},
                                 "reference": {"assessment": train},
                                 "reward": {"assessment": train}},
                        inter_model={"placement": "colocated", "staleness": 0})
                    try:
                        evaluate(sc, plan)
                    except InfeasibleError as exc:
                        last_error = str(exc)
                        continue
                    case.plan, case.scenario = plan, sc
                    case.unknowns += [
                        "the per-device batches, --inference_tp_size, gradient checkpointing "
                        "and offload (the first setting that fits priced)",
                        "the global batch per step (the README: 'up to 1024 pairs')"]
                    case.assumptions.append(
                        f"chosen: per-device batch {batch} (mini_batches = {pairs} / ({batch} x "
                        f"{gpus}) = {mini}), inference TP {tp}, gradient checkpointing {ckpt}, "
                        f"offload {offload}")
                    return
    case.skip = f"no setting fits memory ({last_error[:80]}...)"

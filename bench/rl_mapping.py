"""The RL rows of ../shared/data/calibration/runs.csv mapped to scenarios and plans as the
frameworks ran them (bench/rl_rows.py prices them): layouts, lengths, engine settings and what
each step timer covers, with every assumption printed by the bench beside the figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from planner.cost.iteration import evaluate, vllm_kv_tokens
from planner.errors import InfeasibleError
from planner.frameworks import load_preset
from planner.plan import Layout, PlanInput
from planner.specs.hardware import load_profile
from planner.specs.scenario import Scenario, load_scenario

MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "llama3.1-8b": "llama-3.1-8b",
          "qwen3-32b": "qwen3-32b", "qwen2.5-math-7b": "qwen2.5-7b"}
H20_INTER_NODE_GBPS = 50.0
NEMO_PROMPTS, NEMO_SAMPLES = 64, 32
# The frameworks' behaviour comes from their presets (planner/frameworks/presets/, each value
# with its source): the rows name the framework, whose runtime defaults (NeMo-RL's controller
# host time) price them; the engine settings below size the KV cache as the framework does.
NEMO, VERL = load_preset("nemo-rl"), load_preset("verl")
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
VERL_REFIT = VERL.runtime["refit"].value
"""verl's refit to a rollout group of its own (its preset: the checkpoint engine, as the
fully-async recipe's `async_training.checkpoint_engine` runs it, the configuration its document
measures the speed-up with)."""


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
    return "", 0, f"hardware '{hw}' has no mapping"


def map_row(row: dict[str, str], h20_path: Path) -> RLCase:
    fw = row["framework"]
    source = "NeMo-RL" if fw.startswith("NeMo") else "verl" if fw.startswith("verl") else fw
    measured = float(row["step_time_s"]) if row["step_time_s"] else None
    case = RLCase(row=row, source=source, measured_s=measured)
    if source.startswith("DeepSpeed"):
        case.source = "DeepSpeed-Chat"
        case.skip = ("OPT actor/critic/reward configs are not shipped and not in ../shared/data "
                     "(no config.json to build the specs from); no step time either, only "
                     "tokens/s/GPU derived from epoch hours")
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


def _map_nemo(case: RLCase, model: str, gpus: int, per_node: int) -> None:
    r = case.row
    g_gbs, t_gbs = (int(x) for x in re.findall(r"GBS (\d+)", r["batch"]))
    gen_len = float(r["avg_gen_len"])
    t_max = int(r["max_len"])
    tokens_per_seq = float(r["tok_per_s_per_gpu"]) * float(r["step_time_s"]) * gpus / g_gbs
    prompt = max(1, round(tokens_per_seq - gen_len))
    case.assumptions += [
        f"prompt length {prompt}: not given; derived from the row's own throughput, "
        f"tok/s/GPU x step x GPUs / G-GBS = {tokens_per_seq:.0f} tokens per sequence, minus "
        f"G-avg {gen_len:.0f}",
        f"max response {t_max - prompt} = T-max {t_max} (max total sequence length) - prompt",
        f"G-GBS {g_gbs} split as {NEMO_PROMPTS} prompts x {NEMO_SAMPLES} generations (NeMo-RL "
        "GRPO recipes; only the product enters the model); mini_batches = G-GBS/T-GBS = "
        f"{g_gbs // t_gbs}",
        "reference model on (GRPO KL penalty, NeMo-RL default), priced with the training "
        "layout; rule-based math reward (verifier)",
        "training: Megatron distributed optimizer (zero=1), sequence parallelism when tp>1, "
        "sequence packing up to T-max tokens -> micro_batch = max(1, T-max // mean length); "
        "no activation checkpointing unless the memory model needs it (then full)",
    ]
    case.overrides = {
        "algorithm": "grpo", "models.actor": model, "models.reference": "actor",
        "models.reward": "verifier", "workload.prompts_per_step": NEMO_PROMPTS,
        "workload.samples_per_prompt": NEMO_SAMPLES, "workload.prompt_len": prompt,
        "workload.response_len": round(gen_len), "workload.max_response_len": t_max - prompt,
        "workload.mini_batches": g_gbs // t_gbs, "cluster.gpu": case.profile,
        "cluster.nodes": gpus // per_node, "cluster.gpus_per_node": per_node,
        "framework": NEMO.name, **PUBLISHED}
    case.assumptions.append(
        f"controller host time {NEMO_RL_CONTROLLER_US_PER_TOKEN:g} us per generated token "
        f"(the {NEMO.name} preset's runtime.controller_us_per_token, fitted on the co-located "
        "rows below; leave-one-out errors printed)")
    train_deg = _degrees(r["train_parallel"])
    gen_deg = _degrees(r["gen_parallel"]) or {"tp": 1, "pp": 1}
    placement = r["placement"]
    if placement.startswith("colocated"):
        groups = {"g": gpus}
        train_group = gen_group = "g"
        staleness = 0
    else:
        m = re.search(r"(\d+)T\+(\d+)G nodes", placement)
        if m:
            t_nodes, g_nodes = int(m.group(1)), int(m.group(2))
        else:
            t_nodes = g_nodes = gpus // per_node // 2
            case.assumptions.append(
                f"1-off node split not given for this row: half the nodes train, half "
                f"generate ({t_nodes}+{g_nodes} nodes), as the README states for the H100 rows")
        groups = {"train": t_nodes * per_node, "rollout": g_nodes * per_node}
        train_group, gen_group, staleness = "train", "rollout", 1
        case.assumptions.append(ASYNC_SYNC_ASSUMPTION.format("async 1-off", NEMO_RL_REFIT))
    moe = model == "qwen3-30b-a3b"
    gen_tp = gen_deg.get("tp", 1)
    gen = _layout(gen_group, groups[gen_group], tp=gen_tp, pp=gen_deg.get("pp", 1))
    case.gpu_memory_utilization = NEMO_GPU_MEMORY_UTILIZATION
    gen = gen.model_copy(update={"kv_cache_tokens": vllm_kv_tokens(
        load_scenario(None, case.overrides), gen, NEMO_GPU_MEMORY_UTILIZATION)})
    case.assumptions.append(
        f"vLLM KV cache as NeMo-RL sizes it: gpu_memory_utilization "
        f"{NEMO_GPU_MEMORY_UTILIZATION:g}, the default of policy.generation.vllm_cfg "
        "(examples/configs/grpo_math_1B.yaml, exports.md §5; the performance recipes' value is "
        f"not in the data): {gen.kv_cache_tokens:,} tokens per replica")
    if moe:
        case.assumptions.append("vLLM shards the experts over its TP ranks (no EP): generation "
                                "etp = tp, the default")
    mean_len = prompt + gen_len
    micro = max(1, int(t_max // mean_len))
    swap = _can_swap(case, staleness)
    candidates: list[tuple[dict[str, int], str]] = []
    if train_deg is None:
        case.assumptions.append("training TP/CP/EP/PP not given ('see src'): the least tensor "
                                "parallelism the memory model fits, CP = EP = PP = 1")
        candidates = [({"tp": t}, c) for t in (1, 2, 4, 8) for c in ("none", "full")]
    else:
        candidates = [(train_deg, c) for c in ("none", "full")]
    last_error = ""
    for deg, ckpt in candidates:
        tp = deg.get("tp", 1)
        train = _layout(train_group, groups[train_group], tp=tp, pp=deg.get("pp", 1),
                        cp=deg.get("cp", 1), ep=deg.get("ep", 1), zero=1, sp=tp > 1,
                        micro_batch=micro, checkpointing=ckpt)
        plan = _plan(groups, gen, train, train, staleness, swap)
        try:
            sc = load_scenario(None, case.overrides)
            evaluate(sc, plan)
        except InfeasibleError as exc:
            last_error = str(exc)
            continue
        case.plan, case.scenario = plan, sc
        case.assumptions.append(f"chosen training layout: tp={train.tp} cp={train.cp} "
                                f"ep={train.ep} pp={train.pp} dp={train.dp} "
                                f"micro_batch={micro} checkpointing={ckpt}")
        return
    # nothing fits: keep the recipe's layout so the failure is reported with its message
    deg = candidates[0][0]
    tp = deg.get("tp", 1)
    train = _layout(train_group, groups[train_group], tp=tp, pp=deg.get("pp", 1),
                    cp=deg.get("cp", 1), ep=deg.get("ep", 1), zero=1, sp=tp > 1,
                    micro_batch=micro, checkpointing="full")
    case.plan = _plan(groups, gen, train, train, staleness, swap)
    case.scenario = load_scenario(None, case.overrides)
    case.assumptions.append(f"no candidate layout fits memory ({last_error[:60]}...)")


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

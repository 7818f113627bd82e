"""OpenRLHF launch scripts (`train_ppo_ray` for PPO/GRPO/REINFORCE, `train_dpo`; the dotted
flags of 0.10.2+ and the flat ones of ≤ v0.9.5) → models, algorithm, workload, cluster, plan.

Placement and sharding follow 0.11.2's `train()` (openrlhf/cli/train_ppo_ray.py): actor and
reference share GPUs under --train.colocate_actor_ref, critic and reward under
--train.colocate_critic_reward, all models and the vLLM engines under --train.colocate_all —
except with --train.async_enable, where the engines get their own GPUs ("Using
--colocate_all_models in async RLHF only colocates DeepSpeed models"); the reference is
loaded iff the KL coefficient is above 0, the reward model iff no remote reward is named, the
critic iff the estimator is gae. Frozen models run DeepSpeed's eval config at ZeRO-3 under
--zero_stage 3, else ZeRO-0 (openrlhf/utils/deepspeed/deepspeed.py `get_ds_eval_config`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from importlib.resources import files
from typing import Any

from planner.errors import InputError
from planner.export.keys import key_set
from planner.export.openrlhf import DPO_FLAGS, PPO_FLAGS
from planner.importers.defaults import (
    OPENRLHF,
    OPENRLHF_DPO,
    OPENRLHF_FLAT,
    OPENRLHF_FLAT_DPO,
    OPENRLHF_FLAT_SOURCE,
    OPENRLHF_SOURCE,
)
from planner.importers.launch import Launch
from planner.importers.models import model_ref
from planner.importers.reading import (
    Reading,
    algorithm_of,
    kv_tokens,
    lengths,
    mini_batches,
    refused,
    whole,
)
from planner.importers.shell import Text
from planner.importers.values import Settings, flag_settings
from planner.specs.scenario import Scenario

# Concepts the exporter does not write but a script may set: (≤ v0.9.5 flag, dotted flag).
EXTRA: dict[str, tuple[str | None, str | None]] = {
    "max_epochs": ("--max_epochs", "--train.max_epochs"),
    "remote_rm": ("--remote_rm_url", "--reward.remote_url"),
    "agent": ("--agent_func_path", "--train.agent_func_path"),
    "lora": ("--lora_rank", "--ds.lora.rank"),
    "dynamic_batch": ("--use_dynamic_batch", "--train.dynamic_batch_enable"),
    "train_max_tokens": ("--train_max_tokens_per_gpu", "--train.max_tokens_per_gpu"),
    "rollout_max_tokens": ("--rollout_max_tokens_per_gpu", "--rollout.max_tokens_per_gpu"),
    "flat_max_len": ("--max_len", None),  # v0.9.10's flat total length
}
# --advantage_estimator → rlplan's algorithm (docs/exports.md §2.2; GRPO is group_norm)
ALGORITHMS = {"gae": "ppo", "group_norm": "grpo", "dr_grpo": "grpo", "rloo": "rloo"}
TRAIN_MAX_TOKENS = 16192  # --train.max_tokens_per_gpu's default (0.11.2 parser)


class _Flags:
    """One OpenRLHF command's flags by concept, in the era it is written in, with the
    release's defaults behind them."""

    def __init__(self, s: Settings, table: dict[str, tuple[str | None, str | None]],
                 defaults: dict[str, Any], flat_defaults: dict[str, Any]):
        self.s = s
        dotted = any("." in f for f in s.values)
        self.era = 1 if dotted else 0
        self.table = {**table, **EXTRA}
        self.defaults = defaults if dotted else {**defaults, **flat_defaults}
        self.source = OPENRLHF_SOURCE if dotted else f"{OPENRLHF_SOURCE}; {OPENRLHF_FLAT_SOURCE}"

    def flag(self, concept: str) -> str | None:
        return self.table[concept][self.era]

    def given(self, concept: str) -> Text | None:
        flag = self.flag(concept)
        return None if flag is None else self.s.text(flag)

    def int(self, concept: str, minimum: int = 1, default: int = 0) -> int:
        flag, fallback = self.flag(concept), self.defaults.get(concept, default)
        return self.s.int(flag, fallback, minimum) if flag else fallback

    def float(self, concept: str) -> float:
        flag = self.flag(concept)
        return self.s.float(flag, self.defaults[concept]) if flag else self.defaults[concept]

    def on(self, concept: str) -> bool:
        flag = self.flag(concept)
        return bool(flag) and self.s.bool(flag, False)

    def text(self, concept: str) -> str | None:
        value = self.given(concept)
        return value.text if value is not None else self.defaults.get(concept)


def read(launch: Launch) -> Reading:
    script = launch.entry.rsplit(".", 1)[-1]
    s = flag_settings(launch.args)
    if script == "train_dpo":
        return _dpo(launch, s)
    if script != "train_ppo_ray":
        raise InputError(f"import: openrlhf.cli.{script}: rlplan reads train_ppo_ray (PPO, "
                         "GRPO, REINFORCE) and train_dpo scripts")
    f = _Flags(s, PPO_FLAGS, OPENRLHF, OPENRLHF_FLAT)
    notes: list[str] = []
    if f.int("lora", minimum=0) > 0:
        raise refused(f.flag("lora"), "LoRA training (rlplan plans full fine-tuning)")
    algorithm = algorithm_of(f.text("estimator"), ALGORITHMS, f.flag("estimator"), notes)
    remote = f.given("remote_rm") is not None or f.given("agent") is not None
    fields: dict[str, Any] = {"algorithm": algorithm,
                              "models.reference": "actor" if f.float("init_kl") > 0 else "none"}
    models = {}
    actor = f.given("actor_model")
    if actor is not None:
        models["actor"] = model_ref(actor, f.flag("actor_model"), "actor")
    reward = f.given("reward_model")
    if reward is not None and not remote:
        models["reward"] = model_ref(reward, f.flag("reward_model"), "reward")
    else:
        fields["models.reward"] = "verifier"
        if not remote:
            notes.append(f"reward: neither {f.flag('reward_model')} nor {f.flag('remote_rm')} "
                         "(an extra argument may give it): read as a rule-based verifier")
        remote = True
    if algorithm == "ppo":  # train_ppo_ray: the critic defaults to the reward model, else actor
        critic = f.given("critic_model")
        if critic is not None:
            models["critic"] = model_ref(critic, f.flag("critic_model"), "critic")
        elif (source := actor if remote else reward) is not None:
            role = "actor" if remote else "reward"
            ref = model_ref(source, f.flag(f"{role}_model"), "critic")
            models["critic"] = replace(ref, follows=role)

    prompts, samples = f.int("rollout_batch"), f.int("samples")
    sequences = prompts * samples
    fields |= {"workload.prompts_per_step": prompts, "workload.samples_per_prompt": samples,
               "workload.ppo_epochs": f.int("max_epochs"),
               "workload.mini_batches": mini_batches(
                   sequences, f.int("train_batch"),
                   f"{f.flag('rollout_batch')} × {f.flag('samples')} ÷ {f.flag('train_batch')}")}
    _lengths(f, fields, notes)
    if f.on("enforce_eager"):
        fields["runtime.engine"] = "eager"
    staleness = f.int("async_queue") if f.on("async") else 0
    if staleness:
        fields["search.max_staleness"] = staleness
    groups, place = _placement(f, algorithm, fields["models.reference"] == "actor", remote)
    total = sum(groups.values())
    fields |= _cluster(launch, f, total, notes)
    _check_flags(s, "train_ppo_ray", notes)
    notes.append(f"defaults: what the script leaves out takes the value of {f.source}")
    release = "OpenRLHF 0.11.2 (dotted flags)" if f.era else "OpenRLHF ≤ v0.9.5 (flat flags)"
    return Reading("openrlhf", release, fields, models,
                   partial(_plan, f, groups, place, staleness, notes), s, notes)


def _lengths(f: _Flags, fields: dict[str, Any], notes: list[str]) -> None:
    if f.era == 0 and f.given("flat_max_len") is None:  # ≤ v0.9.5: separate caps
        lengths(fields, f.int("prompt_max_len"), f.int("max_new_tokens"),
                f"{f.flag('prompt_max_len')}/{f.flag('max_new_tokens')}", notes)
        return
    key = f.flag("max_len") or f.flag("flat_max_len")
    total = f.s.int(key, f.defaults["max_len"])
    new = f.given("max_new_tokens")
    if new is not None:
        response = f.int("max_new_tokens")
        if response >= total:
            raise InputError(f"import: {f.flag('max_new_tokens')} {response} leaves no room "
                             f"for a prompt within {key} {total}; fix the lengths")
        lengths(fields, total - response, response, f"{key} − {f.flag('max_new_tokens')}", notes)
        return
    lengths(fields, total // 2, total - total // 2, f"{key} (prompt + response, split in "
            "halves: the script bounds only their sum)", notes)


def _placement(f: _Flags, algorithm: str, has_ref: bool, remote: bool
               ) -> tuple[dict[str, int], dict[str, str]]:
    """Group sizes and each role's group ("rollout" for the vLLM engines)."""
    roles = ["actor"] + (["reference"] if has_ref else []) + \
        (["critic"] if algorithm == "ppo" else []) + ([] if remote else ["reward"])
    size = {r: f.int(f"{r}_nodes") * f.int(f"{r}_gpus") for r in roles}
    engines = f.given("vllm_engines")
    if engines is None or f.int("vllm_engines", minimum=0) == 0:
        raise refused(f"{f.flag('vllm_engines')} unset or 0", "generation by the DeepSpeed "
                      "actor (no vLLM engines)")
    size["rollout"] = f.int("vllm_engines") * f.int("vllm_tp")
    if f.on("colocate_all"):
        place = dict.fromkeys(roles, "g0")
        groups = {"g0": size["actor"]}
        if f.on("async"):  # 0.11.2: async RLHF colocates the DeepSpeed models only
            place["rollout"], groups["g1"] = "g1", size["rollout"]
        else:
            place["rollout"] = "g0"
        return groups, place
    place, groups = {"actor": "g0"}, {"g0": size["actor"]}
    for role in [*roles[1:], "rollout"]:
        shared = {"reference": ("colocate_actor_ref", "actor"),
                  "reward": ("colocate_critic_reward", "critic")}.get(role)
        if shared and f.on(shared[0]) and shared[1] in place:
            place[role] = place[shared[1]]
        else:
            place[role] = f"g{len(groups)}"
            groups[place[role]] = size[role]
    return groups, place


def _cluster(launch: Launch, f: _Flags, total: int, notes: list[str]) -> dict[str, int]:
    """Nodes × GPUs per node: Slurm's node count where the script has one (#SBATCH -N), else
    nodes of the largest per-node GPU count the flags name (8 by default)."""
    sbatch = launch.sbatch_nodes
    per_node = max([8] + [f.int(c) for c in f.table if c.endswith("_gpus") and
                          f.given(c) is not None])
    if sbatch:
        per_node = -(-total // sbatch)
        notes.append(f"cluster: #SBATCH -N {sbatch} nodes for {total} GPUs: {per_node} per node")
    return {"cluster.gpus_per_node": per_node, "cluster.nodes": -(-total // per_node)}


def _training(f: _Flags, group: str, gpus: int, sc: Scenario, notes: list[str],
              role: str) -> dict[str, Any]:
    tp, cp = f.int("ds_tp"), f.int("ring")
    micro = f.int("micro_train")
    if f.on("dynamic_batch"):
        budget = f.int("train_max_tokens", default=TRAIN_MAX_TOKENS)
        micro = max(1, budget // sc.workload.max_seq_len)
        notes.append(f"{role} micro-batch: {f.flag('dynamic_batch')} packs up to {budget} tokens "
                     f"per GPU: {micro} sequence(s) of {sc.workload.max_seq_len} tokens")
    return {"group": group, "tp": tp, "cp": cp, "sp": False,
            "dp": whole(gpus, tp * cp, f"{role}: {f.flag('ds_tp')} × {f.flag('ring')}"),
            "zero": f.int("zero", minimum=0), "micro_batch": micro,
            "offload": "optimizer" if f.on("adam_offload") else "none",
            "checkpointing": "full" if f.on("gradient_checkpointing") else "none"}


def _forward_micro(f: _Flags, sc: Scenario) -> int:
    """Sequences per forward micro-batch of the frozen models: --rollout.micro_batch_size, or
    under dynamic batching the token budget (--rollout.max_tokens_per_gpu, which 0.11.2 sets
    to --train.max_tokens_per_gpu when not given) over the longest sequence."""
    if not f.on("dynamic_batch"):
        return f.int("micro_rollout")
    budget = f.int("rollout_max_tokens", default=0) or f.int("train_max_tokens",
                                                              default=TRAIN_MAX_TOKENS)
    return max(1, budget // sc.workload.max_seq_len)


def _frozen(f: _Flags, group: str, gpus: int, role: str, micro: int) -> dict[str, Any]:
    """A reference or reward model: DeepSpeed's eval config (ZeRO-3 under --zero_stage 3,
    else ZeRO-0), the same TP and ring attention as training, parameters offloaded on
    --ref.offload / --reward.offload."""
    tp, cp = f.int("ds_tp"), f.int("ring")
    return {"group": group, "tp": tp, "cp": cp,
            "dp": whole(gpus, tp * cp, f"{role}: {f.flag('ds_tp')} × {f.flag('ring')}"),
            "zero": 3 if f.int("zero", minimum=0) == 3 else 0,
            "micro_batch": micro, "offload": "params" if f.on(f"{role}_offload") else "none"}


def _plan(f: _Flags, groups: dict[str, int], place: dict[str, str], staleness: int,
          notes: list[str], sc: Scenario) -> dict[str, Any]:
    gen = {"group": place["rollout"], "dp": f.int("vllm_engines"), "tp": f.int("vllm_tp")}
    gen["kv_cache_tokens"] = kv_tokens(sc, gen, f.float("vllm_memory"), f.flag("vllm_memory"))
    micro = _forward_micro(f, sc)  # every forward's, the actor's old log-probs included
    layouts: dict[str, dict[str, Any]] = {
        "actor": {"training": _training(f, "g0", groups["g0"], sc, notes, "actor"),
                  "generation": gen}}
    if sc.critic is not None and "critic" in place:
        g = place["critic"]
        layouts["critic"] = {"training": _training(f, g, groups[g], sc, notes, "critic")}
    for role in ("actor", "critic"):
        train = layouts.get(role, {}).get("training")
        if train is not None and train["micro_batch"] != micro:
            layouts[role]["assessment"] = {**train, "micro_batch": micro}
    for role in ("reference", "reward"):
        if role in place and (role != "reward" or sc.reward_kind == "model"):
            g = place[role]
            layouts[role] = {"assessment": _frozen(f, g, groups[g], role, micro)}
    if sc.reference is not None and "reference" not in place:
        notes.append("the scenario has a reference model and the command none (its KL "
                     "coefficient is 0)")
    inter = {"placement": "colocated" if len(groups) == 1 else "partial",
             "staleness": staleness, "partial_rollout": f.on("partial"),
             # DeepSpeed's sleep: the co-located models' state off the GPUs while vLLM runs
             "offload_during_generation": f.on("ds_sleep") and len(groups) == 1}
    return {"groups": [{"name": n, "gpus": g} for n, g in groups.items()],
            "layouts": layouts, "inter_model": inter}


def _dpo(launch: Launch, s: Settings) -> Reading:
    f = _Flags(s, DPO_FLAGS, OPENRLHF_DPO | {k: OPENRLHF[k] for k in ("zero", "ds_tp", "ring")},
               OPENRLHF_FLAT_DPO)
    notes: list[str] = []
    fields: dict[str, Any] = {"algorithm": "dpo", "models.reference": "actor",
                              "workload.prompts_per_step": f.int("train_batch")}
    models = {}
    if (actor := f.given("actor_model")) is not None:
        models["actor"] = model_ref(actor, f.flag("actor_model"), "actor")
    total = f.int("max_len")
    lengths(fields, total // 2, total - total // 2, f"{f.flag('max_len')} (prompt + response "
            "of each sequence of a pair, split in halves)", notes)
    gpus = launch.wrapper.get("--num_gpus")
    per_node = int(gpus.text) if gpus is not None and gpus.text.isdigit() else 8
    nodes_given = launch.wrapper.get("--num_nodes")
    nodes = int(nodes_given.text) if nodes_given is not None and nodes_given.text.isdigit() \
        else 1
    if gpus is None:
        notes.append("cluster: the deepspeed launcher takes every GPU of the node; 8 assumed "
                     "(--gpus-per-node to change)")
    fields |= {"cluster.gpus_per_node": per_node, "cluster.nodes": nodes}
    _check_flags(s, "train_dpo", notes)
    notes.append(f"defaults: what the script leaves out takes the value of {f.source}")

    def plan(sc: Scenario) -> dict[str, Any]:
        n = sc.cluster.total_gpus
        train = _training(f, "g0", n, sc, notes, "actor")
        train["micro_batch"] *= 2  # DPO counts pairs; the plan sequences
        ref = _frozen(f, "g0", n, "reference", train["micro_batch"])
        return {"groups": [{"name": "g0", "gpus": n}],
                "layouts": {"actor": {"training": train}, "reference": {"assessment": ref}},
                "inter_model": {"placement": "colocated"}}

    release = "OpenRLHF 0.11.2 (dotted flags)" if f.era else "OpenRLHF ≤ v0.9.5 (flat flags)"
    return Reading("openrlhf", release, fields, models, plan, s, notes)


def _check_flags(s: Settings, script: str, notes: list[str]) -> None:
    """Flags in none of the parsers rlplan has lists of: 0.11.2, v0.9.5 and the August 2026
    head (a typo, or another release's)."""
    head = files("planner.importers").joinpath("keys", f"openrlhf_head-3c3be623_{script}.txt")
    known = key_set(f"openrlhf-{script}", "0.11.2") | key_set(f"openrlhf-{script}", "0.9.5") | {
        line.strip() for line in head.read_text(encoding="utf-8").splitlines()
        if line.startswith("--")}
    unknown = [flag for flag in s.values if flag not in known]
    if unknown:
        notes.append(f"not flags of OpenRLHF 0.11.2, v0.9.5 or the 2026-08 head's {script} (a "
                     f"typo, or another release's): {', '.join(unknown)}")

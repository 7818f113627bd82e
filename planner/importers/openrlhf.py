"""OpenRLHF commands (train_ppo_ray or train_dpo, either naming era) → a plan."""

from __future__ import annotations

from typing import Any

from planner.errors import InputError
from planner.export.openrlhf import DPO_FLAGS, PPO_FLAGS
from planner.importers import Imported, value, whole, words
from planner.specs.scenario import Scenario


def flags(text: str, table: dict[str, tuple[str | None, str | None]]) -> dict[str, Any]:
    """concept → value, from either era's flag names; unknown flags are refused by name."""
    by_flag = {f: c for c, pair in table.items() for f in pair if f}
    ws = words(text)
    start = next((i for i, w in enumerate(ws) if w.startswith("openrlhf.cli")), -1) + 1
    out: dict[str, Any] = {}
    for i, w in enumerate(ws[start:], start):
        if not w.startswith("--"):
            continue
        nxt = ws[i + 1] if i + 1 < len(ws) else None
        v = True if nxt is None or nxt.startswith("--") else value(nxt)
        if w not in by_flag:
            raise InputError(f"import: {w}: an OpenRLHF flag rlplan does not read; drop it "
                             "(datasets, paths and logging go in at run time)")
        out[by_flag[w]] = v
    return out


def _training(f: dict[str, Any], group: str, gpus: int) -> dict[str, Any]:
    tp, cp = int(f.get("ds_tp", 1)), int(f.get("ring", 1))
    return {"group": group, "tp": tp, "cp": cp, "sp": False,
            "dp": whole(gpus, tp * cp, "--ds.tensor_parallel_size × --ds.ring_attn_size"),
            "zero": int(f.get("zero", 2)), "micro_batch": int(f.get("micro_train", 1)),
            "offload": "optimizer" if f.get("adam_offload") else "none",
            "checkpointing": "full" if f.get("gradient_checkpointing") else "none"}


def read(text: str, sc: Scenario) -> Imported:
    if "train_dpo" in text:
        f = flags(text, DPO_FLAGS)
        gpus = sc.cluster.total_gpus
        train = _training(f, "g0", gpus)
        train["micro_batch"] *= 2  # DPO counts pairs; the plan sequences
        return Imported("openrlhf", {
            "groups": [{"name": "g0", "gpus": gpus}],
            "layouts": {"actor": {"training": train},
                        "reference": {"assessment": {"group": "g0", "dp": gpus}}},
            "inter_model": {"placement": "colocated"}},
            ["train_dpo: the deepspeed launcher holds no GPU count; the scenario's cluster "
             f"({gpus} GPUs) is assumed"])
    f = flags(text, PPO_FLAGS)
    roles = ["actor", *(r for r in ("critic", "reference", "reward") if f"{r}_gpus" in f)]
    size = {r: int(f.get(f"{r}_nodes", 1)) * int(f[f"{r}_gpus"]) for r in roles}
    engines, tp = int(f.get("vllm_engines", 1)), int(f.get("vllm_tp", 1))
    if f.get("colocate_all"):
        place = dict.fromkeys([*roles, "rollout"], "g0")
        groups = {"g0": size["actor"]}
    else:
        place = {"actor": "g0"}
        groups = {"g0": size["actor"]}
        for role in roles[1:]:
            shared = {"reference": ("colocate_actor_ref", "actor"),
                      "reward": ("colocate_critic_reward", "critic")}.get(role)
            if shared and f.get(shared[0]) and shared[1] in place:
                place[role] = place[shared[1]]
            else:
                place[role] = f"g{len(groups)}"
                groups[place[role]] = size[role]
        place["rollout"] = f"g{len(groups)}"
        groups[place["rollout"]] = engines * tp
    layouts: dict[str, dict[str, Any]] = {
        "actor": {"training": _training(f, "g0", groups["g0"]),
                  "generation": {"group": place["rollout"], "dp": engines, "tp": tp}}}
    if "critic" in place:
        layouts["critic"] = {"training": _training(f, place["critic"], groups[place["critic"]])}
    micro = int(f.get("micro_rollout", 1))
    for role in ("reference", "reward"):
        if role in place:
            layouts[role] = {"assessment": {"group": place[role], "dp": groups[place[role]],
                                            "micro_batch": micro}}
    queue = int(f.get("async_queue", 1)) if f.get("async") else 0
    inter = {"placement": "colocated" if len(groups) == 1 else "partial", "staleness": queue,
             "partial_rollout": bool(f.get("partial"))}
    notes = [] if sc.reference is None or "reference" in place else [
        "the scenario has a reference model and the command none (--ref.num_gpus_per_node)"]
    return Imported("openrlhf", {"groups": [{"name": n, "gpus": g} for n, g in groups.items()],
                                 "layouts": layouts, "inter_model": inter}, notes)

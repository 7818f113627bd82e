"""Megatron-LM argument arrays (as `rlplan export --format megatron` writes them) → a plan.

The arguments hold training only: each role's group size comes from the export's comment
(`# actor on group g0: 8 GPUs = …`), else the scenario's cluster; generation and the reference
are assumed on the actor's group (a note says so)."""

from __future__ import annotations

import re
from typing import Any

from planner.errors import InputError
from planner.export.megatron import MEGATRON_FLAGS
from planner.importers import Imported, value, whole, words
from planner.specs.scenario import Scenario
from planner.specs.workload import Family


def arrays(text: str) -> dict[str, tuple[dict[str, Any], int | None, str]]:
    """role → (flag → value, GPUs from the comment, group name)."""
    out = {}
    for m in re.finditer(r"(?:#\s*(\w+) on group (\w+): (\d+) GPUs[^\n]*\n(?:#[^\n]*\n)*)?"
                         r"(\w+)_ARGS=\((.*?)\)", text, re.S):
        role = m.group(4).lower()
        flags: dict[str, Any] = {}
        ws = words(m.group(5))
        for i, w in enumerate(ws):
            if w.startswith("--"):
                if w not in MEGATRON_FLAGS:
                    raise InputError(f"import: {w}: not a Megatron flag rlplan reads; drop it "
                                     "or pass the plan's layout another way")
                nxt = ws[i + 1] if i + 1 < len(ws) else None
                flags[w] = True if nxt is None or nxt.startswith("--") else value(nxt)
        out[role] = (flags, int(m.group(3)) if m.group(3) else None, m.group(2) or "g0")
    if not out:
        raise InputError("import: no ACTOR_ARGS=( … ) array found in the Megatron file")
    return out


def read(text: str, sc: Scenario) -> Imported:
    notes = []
    groups: dict[str, int] = {}
    layouts: dict[str, dict[str, Any]] = {}
    for role, (f, gpus, group) in arrays(text).items():
        if role not in ("actor", "critic"):
            raise InputError(f"import: {role.upper()}_ARGS: Megatron exports train actor and "
                             "critic only")
        gpus = gpus or sc.cluster.total_gpus
        tp, pp, cp = (int(f.get(k, 1)) for k in ("--tensor-model-parallel-size",
                                                  "--pipeline-model-parallel-size",
                                                  "--context-parallel-size"))
        lay = {"group": group, "tp": tp, "pp": pp, "cp": cp,
               "dp": whole(gpus, tp * pp * cp, f"{role} TP×PP×CP"),
               "ep": int(f.get("--expert-model-parallel-size", 1)),
               "sp": bool(f.get("--sequence-parallel")),
               "zero": 1 if f.get("--use-distributed-optimizer") else 0,
               "offload": "optimizer" if f.get("--optimizer-cpu-offload") else "none",
               "checkpointing": f.get("--recompute-granularity", "none"),
               "micro_batch": int(f.get("--micro-batch-size", 1))
               * (2 if sc.family is Family.DPO else 1)}
        if "--expert-tensor-parallel-size" in f:
            lay["etp"] = int(f["--expert-tensor-parallel-size"])
        if "--num-layers-per-virtual-pipeline-stage" in f:  # layers / (pp · vp)
            lay["vp"] = whole(sc.roles[role].num_hidden_layers,
                              pp * int(f["--num-layers-per-virtual-pipeline-stage"]),
                              f"{role} layers ÷ (pp × --num-layers-per-virtual-pipeline-stage)")
        groups[group] = gpus
        layouts[role] = {"training": lay}
    actor = layouts["actor"]["training"]
    if not sc.family.offline:
        layouts["actor"]["generation"] = {"group": actor["group"], "tp": actor["tp"],
                                          "dp": groups[actor["group"]] // actor["tp"]}
        notes.append("generation: Megatron arguments do not hold it; assumed on the actor's "
                     f"group with its tp {actor['tp']}")
    for role in ("reference", "reward"):
        if role in sc.roles:
            layouts[role] = {"assessment": {"group": actor["group"], "tp": actor["tp"],
                                            "pp": actor["pp"], "cp": actor["cp"],
                                            "dp": actor["dp"]}}
            notes.append(f"{role}: not in Megatron arguments; assumed with the actor's layout")
    return Imported("megatron", {"groups": [{"name": n, "gpus": g} for n, g in groups.items()],
                                 "layouts": layouts,
                                 "inter_model": {"placement": "colocated" if len(groups) == 1
                                                 else "partial"}}, notes)

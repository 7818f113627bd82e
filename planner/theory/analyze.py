"""The `analyze` view: the paper's W/D/M numbers as plain dicts, and their plain-English reading.

`analyze_pipeline` answers `rlplan analyze pipeline --json` (Tables I, IV, IX) and
`analyze_intra` answers `rlplan analyze intra --json` (Tables VII, VIII), shaped as DESIGN.md's
"analyze JSON" (keys may be added, never renamed). `readings` turns a pipeline result into one
line per stage and per configuration, computed from the numbers.

Numbers are Python floats: work in FLOPs, depth in log2 steps, memory in elements (FORMULAS.md).

Absent keys (DESIGN.md: what does not apply is absent, not zero):
- `building_blocks` has one entry per role the scenario has. The generation quantities
  (`c_prefill`, `c_decode`, `c_gen`, `m_kv`, `d_gen`, `d_gen_tp`, `d_decode_chain`,
  `d_decode_chain_tp`) appear on the actor only, and only for PPO/GRPO (DPO does not generate).
- `stages` has no `generation` entry for DPO (Table IV: "none (offline)"; FORMULAS.md §4's
  W_G = D_G = M_G = 0 is how the DPO rows are written, not a stage that runs). A GRPO
  assessment with neither reward model nor reference is present with zeros (it runs: the
  verifier, on CPU) — an empty sum is 0.
- `inter_model` has every Table IX row for PPO, no `shared_actor_critic` for GRPO, and only
  `baseline`, `disaggregated`, `hybrid` for DPO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.theory import blocks, inter, intra
from planner.theory.shape import (
    TheoryInputError,
    TheoryModel,
    require_positive,
    require_positive_int,
)
from planner.theory.stages import ROLE_HEAD, ROLES, Scenario, table_iv

__all__ = ["UNITS", "analyze_intra", "analyze_pipeline", "readings"]

UNITS = {"work": "FLOPs", "depth": "log2 steps", "memory": "elements"}


# --- analyze pipeline ------------------------------------------------------------------------


def _shape(M: TheoryModel) -> dict[str, int]:
    return {"L": M.L, "d": M.d, "d_ff": M.d_ff, "h": M.h, "V": M.V, "E": M.E, "E_a": M.E_a,
            "d_e": M.d_e}


def _building_block(sc: Scenario, role: str, P_t: int) -> dict[str, Any]:
    """Table I quantities of one role's model at the scenario's m (and S, T for the actor)."""
    M, head, m, S, T = sc.roles[role], ROLE_HEAD[role], sc.m, sc.S, sc.T
    block: dict[str, Any] = {
        "head": head.value,
        "shape": _shape(M),
        "params": blocks.params(M, head),
        "cf_tok": blocks.c_f_tok(M, head, m),
        "cb_tok": blocks.c_b_tok(M, head, m),
        "ctr_tok": blocks.c_tr_tok(M, head, m),
        "d_f": blocks.d_f(M, m),
        "d_f_tp": blocks.d_f_tp(M, m, P_t),
        "d_b": blocks.d_b(M, m, sc.n_seq),
        "d_tr": blocks.d_tr(M, m, sc.n_seq),
        "m_act": blocks.m_act(M),
        "m_inf": blocks.m_inf(M),
    }
    if role == "actor" and sc.generates:
        d_gen, d_gen_tp = blocks.d_gen(M, S, T), blocks.d_gen_tp(M, S, T, P_t)
        block.update(
            {
                "c_prefill": blocks.c_prefill(M, S),
                "c_decode": blocks.c_decode(M, S, T),
                "c_gen": blocks.c_gen(M, S, T),
                "m_kv": blocks.m_kv(M, m),
                "d_gen": d_gen,
                "d_gen_tp": d_gen_tp,
                # Σ_{t=1}^{T-1} D_f(π; S+t): the T − 1 chained decode steps inside D_gen.
                "d_decode_chain": d_gen - blocks.d_f(M, S),
                "d_decode_chain_tp": d_gen_tp - blocks.d_f_tp(M, S, P_t),
            }
        )
    return block


def analyze_pipeline(
    family: str,
    roles: Mapping[str, TheoryModel],
    B: int,
    K: int,
    S: float,
    T: int,
    ppo_epochs: int = 1,
    gpus_per_node: int = 8,
) -> dict[str, Any]:
    """The paper's W/D/M view of one iteration (Tables I, IV, IX), as DESIGN.md's analyze JSON.

    family: "ppo" | "grpo" | "dpo"; roles: role → TheoryModel ("actor", "reference",
    "reward", "critic"; a role the scenario lacks is missing — no reward model for a rule-based
    verifier, no reference without a KL term); B prompts (DPO: preference pairs); K samples per
    prompt (ignored by DPO); S prompt and T response length; ppo_epochs multiplies training
    work and depth; gpus_per_node is P_t of the hybrid and combined rows (and of `d_f_tp`).

    Returns `{"theory": {"inputs", "units", "building_blocks": {role: {...}}, "stages":
    {stage: {"work", "depth", "depth_disaggregated", "memory", "work_parts"}}, "inter_model":
    {config: {"work", "depth", "memory"}}}}`. Stage `depth` is the co-located (summed) depth,
    `depth_disaggregated` the maximum over concurrently running models.
    """
    sc = Scenario(family, roles, B, K, S, T, ppo_epochs)
    P_t = require_positive_int("gpus_per_node", gpus_per_node)
    inputs: dict[str, Any] = {"family": sc.family, "B": sc.B}
    if sc.generates:
        inputs["K"] = sc.K
    inputs.update(
        {"S": sc.S, "T": sc.T, "m": sc.m, "n_seq": sc.n_seq, "ppo_epochs": sc.epochs,
         "gpus_per_node": P_t, "roles": [r for r in ROLES if r in sc.roles]}
    )
    return {
        "theory": {
            "inputs": inputs,
            "units": dict(UNITS),
            "building_blocks": {
                r: _building_block(sc, r, P_t) for r in ROLES if r in sc.roles
            },
            "stages": {name: cost.as_dict() for name, cost in table_iv(sc).items()},
            "inter_model": {
                name: cell.as_dict() for name, cell in inter.configurations(sc, P_t).items()
            },
        }
    }


# --- analyze intra ---------------------------------------------------------------------------


def _strategy(P_d: int, P_p: int, P_t: int, P_c: int, P_e: int) -> str:
    """The Table VII row a combination of degrees is (all combinations are the 5D row)."""
    degrees = {"data": P_d, "pipeline": P_p, "tensor": P_t, "context": P_c, "expert": P_e}
    split = {name for name, p in degrees.items() if p > 1}
    if not split:
        return "none"
    if len(split) == 1 and split != {"expert"}:  # P_e alone is 5D, not the isolated row
        return split.pop()
    if split <= {"data", "pipeline", "tensor"}:
        return "3d"
    return "5d"


def analyze_intra(
    model: TheoryModel,
    B: int,
    S: float,
    T: float,
    P_d: int = 1,
    P_p: int = 1,
    P_t: int = 1,
    P_c: int = 1,
    P_e: int = 1,
    isolated_expert: bool = False,
    zero: int | None = None,
    kappa: float | None = None,
) -> dict[str, Any]:
    """Tables VII/VIII for one training iteration of `model` on B sequences of m = S + T.

    Degrees are the paper's (P_d·P_e is the framework's dp). Any combination is the 5D row;
    a single non-1 degree or a (P_d, P_p, P_t) combination is answered by its own row, which
    coincides with 5D there (P_e alone does not: 5D lets EP ranks own disjoint tokens).
    `isolated_expert` selects the isolated-expert row (only P_e may differ from 1). `zero`
    (0…3) shards the Adam state over the replicas of each state term; `kappa` ∈ (0, 1) turns
    on activation checkpointing (see `planner.theory.intra`).

    Returns `{"strategy", "per_rank": {"work", "depth", "memory"}, "global": {...}}`.
    """
    if not isinstance(model, TheoryModel):
        raise TheoryInputError(f"model must be a TheoryModel, got {model!r}")
    P_d, P_p, P_t, P_c, P_e = (
        require_positive_int(n, v)
        for n, v in (("P_d", P_d), ("P_p", P_p), ("P_t", P_t), ("P_c", P_c), ("P_e", P_e))
    )
    m = require_positive("S", S) + require_positive("T", T)
    opts: dict[str, Any] = {"zero": zero, "kappa": kappa}
    if isolated_expert:
        if (P_d, P_p, P_t, P_c) != (1, 1, 1, 1):
            raise TheoryInputError(
                "the isolated-expert row varies P_e only; drop isolated_expert to combine "
                "expert parallelism with other degrees (the 5D row)"
            )
        strategy, cost = "expert", intra.expert(model, B, m, P_e, **opts)
    else:
        strategy = _strategy(P_d, P_p, P_t, P_c, P_e)
        match strategy:
            case "none":
                cost = intra.none(model, B, m, **opts)
            case "data":
                cost = intra.data(model, B, m, P_d, **opts)
            case "pipeline":
                cost = intra.pipeline(model, B, m, P_p, **opts)
            case "tensor":
                cost = intra.tensor(model, B, m, P_t, **opts)
            case "context":
                cost = intra.context(model, B, m, P_c, **opts)
            case "3d":
                cost = intra.three_d(model, B, m, P_d, P_p, P_t, **opts)
            case _:
                cost = intra.five_d(model, B, m, P_d, P_p, P_t, P_c, P_e, **opts)
    return {"strategy": strategy, **cost.as_dict()}


# --- readings --------------------------------------------------------------------------------


def _g(x: float) -> str:
    """A number for a sentence: 3 significant digits."""
    return f"{x:.3g}"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.4g}%" if whole else "0%"


def _delta(new: float, old: float) -> str:
    """`−23.4%`, `+5.0%` or `unchanged` relative to `old`."""
    if old == 0 or abs(new - old) <= 1e-12 * max(abs(new), abs(old)):
        return "unchanged"
    change = 100 * (new - old) / old
    sign = "+" if change > 0 else "−"
    return f"{sign}<0.001%" if abs(change) < 1e-3 else f"{sign}{abs(change):.3g}%"


def _dominant(parts: Mapping[str, float]) -> tuple[str, float]:
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name]


def _others(parts: Mapping[str, float], skip: str, total: float) -> str:
    rest = [f"{k} {_pct(v, total)}" for k, v in parts.items() if k != skip]
    return f" ({', '.join(rest)})" if rest else ""


def _reading_generation(stage: Mapping[str, Any], actor: Mapping[str, Any], T: int) -> str:
    parts, work = stage["work_parts"], stage["work"]
    top, value = _dominant(parts)
    chain = actor["d_decode_chain"]
    return (
        f"Generation: {top} is {_pct(value, work)} of its {_g(work)} FLOPs"
        f"{_others(parts, top, work)}; the chain of {T - 1} decode steps is "
        f"{_pct(chain, stage['depth'])} of its depth ({_g(stage['depth'])} log2 steps)."
    )


def _reading_assessment(stage: Mapping[str, Any]) -> str:
    parts, work = stage["work_parts"], stage["work"]
    if not parts:
        return (
            "Assessment: no assessment model (rule-based verifier, no reference), so no "
            "GPU work, depth or memory in the theory."
        )
    top, value = _dominant(parts)
    gain = _delta(stage["depth_disaggregated"], stage["depth"])
    return (
        f"Assessment: the {top} forward is {_pct(value, work)} of its {_g(work)} FLOPs"
        f"{_others(parts, top, work)}; running the models concurrently changes its depth "
        f"{gain} ({_g(stage['depth'])} → {_g(stage['depth_disaggregated'])})."
    )


def _reading_training(stage: Mapping[str, Any], epochs: int) -> str:
    parts, work = stage["work_parts"], stage["work"]
    top, value = _dominant(parts)
    concurrent = (
        f"; training them concurrently changes its depth "
        f"{_delta(stage['depth_disaggregated'], stage['depth'])}"
        if len(parts) > 1
        else ""
    )
    return (
        f"Training: the {top} is {_pct(value, work)} of its {_g(work)} FLOPs"
        f"{_others(parts, top, work)} over {epochs} epoch{'s' if epochs != 1 else ''}; "
        f"peak memory {_g(stage['memory'])} elements{concurrent}."
    )


def _reading_config(name: str, cell: Mapping[str, float], base: Mapping[str, float]) -> str:
    if name == "baseline":
        return (
            f"baseline: {_g(cell['work'])} FLOPs, depth {_g(cell['depth'])} log2 steps, peak "
            f"{_g(cell['memory'])} elements per device group — the reference for the others."
        )
    work = _delta(cell["work"], base["work"])
    work_text = "same work as baseline" if work == "unchanged" else f"work {work}"
    return (
        f"{name}: {work_text}; depth {_delta(cell['depth'], base['depth'])} "
        f"({_g(cell['depth'])}); peak memory {_delta(cell['memory'], base['memory'])} "
        f"({_g(cell['memory'])})."
    )


def _reading_overall(
    configs: Mapping[str, Mapping[str, float]], actor: Mapping[str, Any], generates: bool
) -> str:
    base = configs["baseline"]
    others = {k: v for k, v in configs.items() if k != "baseline"}
    best_depth = min(others.values(), key=lambda c: c["depth"])["depth"]
    best = [k for k, c in others.items() if c["depth"] == best_depth]
    text = (
        f"{' and '.join(best)} cut{'s' if len(best) == 1 else ''} depth most "
        f"({_delta(best_depth, base['depth'])} vs baseline)"
    )
    cutters = [k for k, c in others.items() if c["work"] < base["work"] * (1 - 1e-12)]
    adders = [k for k, c in others.items() if c["work"] > base["work"] * (1 + 1e-12)]
    if cutters:
        text += "; only " if len(cutters) == 1 else "; "
        text += ", ".join(f"{k} also cuts work ({_delta(others[k]['work'], base['work'])})"
                          for k in cutters)
    else:
        text += "; no configuration changes the work"
    if adders:
        text += "; " + ", ".join(
            f"{k} adds work ({_delta(others[k]['work'], base['work'])})" for k in adders
        )
    if not generates:
        return text + "; DPO is offline, so there is no decode chain to shorten."
    floor = min(actor["d_decode_chain"], actor["d_decode_chain_tp"])
    keeps = all(c["depth"] >= floor for c in configs.values())
    if keeps:
        text += (
            f"; no configuration removes the decode chain: every depth is at least the "
            f"{_g(floor)} log2 steps of the actor's chained decode steps "
            f"({_pct(floor, best_depth)} of the smallest depth)."
        )
    else:  # cannot happen with FORMULAS.md's rows; say so rather than hide it
        text += "; a configuration's depth falls below the decode chain (check the inputs)."
    return text


def readings(result: Mapping[str, Any]) -> dict[str, str]:
    """One plain-English line per stage and per configuration of an `analyze_pipeline` result.

    Keys: `stages.<stage>` for each stage present, `inter_model.<config>` for each
    configuration present, and `inter_model.overall` (which configuration cuts depth most, which
    also cuts work, and that none removes the decode chain). Every figure is read from
    `result`.
    """
    try:
        theory = result["theory"]
        stages, configs = theory["stages"], theory["inter_model"]
        bb, inputs = theory["building_blocks"], theory["inputs"]
    except (KeyError, TypeError):
        raise TheoryInputError("readings() takes the dict analyze_pipeline returns") from None
    out: dict[str, str] = {}
    if "generation" in stages:
        out["stages.generation"] = _reading_generation(stages["generation"], bb["actor"],
                                                       inputs["T"])
    out["stages.assessment"] = _reading_assessment(stages["assessment"])
    out["stages.training"] = _reading_training(stages["training"], inputs["ppo_epochs"])
    base = configs["baseline"]
    for name, cell in configs.items():
        out[f"inter_model.{name}"] = _reading_config(name, cell, base)
    out["inter_model.overall"] = _reading_overall(configs, bb["actor"], "generation" in stages)
    return out

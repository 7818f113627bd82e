"""Section 2b of the calibration bench: the published RL runs of
../shared/data/calibration/runs.csv priced as whole steps with `evaluate()`.

Run through `bench/calibration.py` (it calls `run_rl`); split out of it by concern. Each row is
mapped to a scenario and a plan as the framework ran it (layout, lengths, engine settings, what
the step timer covers), with every assumption it had to make printed beside the figures. The
fitting helpers are calibration.py's (imported from it, as bench/training_throughput.py does).
"""

from __future__ import annotations

import csv
import math
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml
from fitting import (
    DATA,
    MIN_GAIN,
    PRE_FIT_FRAMEWORK,
    VFit,
    _framework,
    fit_with_rules,
    pct,
    section,
    with_efficiency,
)
from rl_mapping import (
    H20_INTER_NODE_GBPS,
    MODELS,
    NEMO_RL_CONTROLLER_US_PER_TOKEN,
    VERL_RESPONSE_SENSITIVITY,
    RLCase,
    _map_verl,
    map_row,
    vllm_kv_tokens,
)

from planner.cost.flops import params_with_head
from planner.cost.iteration import Evaluation, evaluate, generated_tokens_per_step
from planner.errors import InfeasibleError, InputError
from planner.specs.hardware import (
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_HBM_EFFICIENCY,
    HardwareProfile,
    load_profile,
)

# --- 2. RL rows of runs.csv -------------------------------------------------------------------


@dataclass
class RLResult:
    case: RLCase
    predicted: float | None = None
    error: str | None = None
    ev: Evaluation | None = None


def price(case: RLCase, gpu: HardwareProfile | None = None) -> RLResult:
    if case.skip or case.scenario is None or case.plan is None:
        return RLResult(case, error=case.skip)
    sc = case.scenario
    if gpu is not None:
        sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"gpu": gpu})})
    try:
        ev = evaluate(sc, case.plan)
    except (InfeasibleError, InputError) as exc:
        return RLResult(case, error=f"{type(exc).__name__}: {exc}")
    return RLResult(case, predicted=ev.iteration_time_s, ev=ev)


def with_controller(case: RLCase, us_per_token: float) -> RLCase:
    """The case with `runtime.controller_us_per_token` set to `us_per_token`."""
    sc = case.scenario
    assert sc is not None
    runtime = sc.runtime.model_copy(update={"controller_us_per_token": us_per_token})
    return replace(case, scenario=sc.model_copy(update={"runtime": runtime}))


def _generated_tokens(case: RLCase) -> float:
    assert case.scenario is not None
    return generated_tokens_per_step(case.scenario)


@dataclass
class ControllerFit:
    """NeMo-RL's controller rate (µs per generated token) from its co-located rows: each
    row's gap (measured − predicted, priced without one) per generated token; the fit is their
    median; each NeMo-RL row's leave-one-out rate is the median of the other co-located rows'."""

    gaps: dict[str, float]
    fitted: float
    loo: dict[str, float]


def controller_fit(cases: list[RLCase]) -> ControllerFit:
    gaps = {}
    nemo = [c for c in cases if c.source == "NeMo-RL" and c.plan is not None and c.measured_s]
    for c in nemo:
        if not c.plan.inter_model.staleness:  # type: ignore[union-attr]
            r = price(with_controller(c, 0.0))
            if r.predicted is not None:
                gaps[c.id] = (c.measured_s - r.predicted) / _generated_tokens(c) * 1e6
    loo = {c.id: float(np.median([g for i, g in gaps.items() if i != c.id])) for c in nemo}
    return ControllerFit(gaps, float(np.median(list(gaps.values()))), loo)


PAIRS = (("6", "7"), ("19", "20"), ("21", "22"), ("23", "24"), ("25", "26"), ("32", "33"),
         ("34", "35"))


def _with_overlapped_sync(case: RLCase) -> RLCase:
    """The case with its weight sync overlapped (a shadow copy on the rollout group); a KV
    cache set by the framework's gpu_memory_utilization is re-sized with the copy inside it."""
    plan, sc = case.plan, case.scenario
    assert plan is not None and sc is not None
    layouts = plan.layouts
    if case.gpu_memory_utilization is not None:
        gen = layouts["actor"]["generation"]
        kv = vllm_kv_tokens(sc, gen, case.gpu_memory_utilization, shadow=True)
        if kv < 1:
            return replace(case, skip=f"a shadow copy leaves no KV cache within "
                           f"gpu_memory_utilization {case.gpu_memory_utilization:g}")
        layouts = {**layouts, "actor": {**layouts["actor"], "generation":
                                        gen.model_copy(update={"kv_cache_tokens": kv})}}
    plan = plan.model_copy(update={"layouts": layouts, "inter_model": plan.inter_model.model_copy(
        update={"overlap_weight_sync": True})})
    return replace(case, plan=plan)


def rl_errors(results: dict[str, RLResult]) -> dict[str, tuple[float, float, int]]:
    """source -> (median APE, mean APE, rows priced)."""
    by: dict[str, list[float]] = {}
    for res in results.values():
        c = res.case
        if res.predicted is not None and c.measured_s:
            by.setdefault(c.source, []).append(abs(res.predicted - c.measured_s) / c.measured_s)
    every = [e for v in by.values() for e in v]
    out = {s: (float(np.median(v)), float(np.mean(v)), len(v)) for s, v in by.items()}
    if every:
        out["all"] = (float(np.median(every)), float(np.mean(every)), len(every))
    return out


def _rl_errors(cases: list[RLCase], gpu: HardwareProfile) -> list[float]:
    return [abs(r.predicted - c.measured_s) / c.measured_s for c in cases
            if (r := price(c, gpu)).predicted is not None and c.measured_s]


def _median_ape(cases: list[RLCase], gpu: HardwareProfile) -> float:
    errs = _rl_errors(cases, gpu)
    return float(np.median(errs)) if errs else math.inf


def fit_profile(cases: list[RLCase], base: HardwareProfile, default: tuple[float, float]
                ) -> tuple[float, float, list[str]]:
    """(compute, hbm) of one profile on its RL rows: median APE (robust to rows the planner
    mis-prices for reasons outside the time model; mean APE breaks ties), `fit_with_rules`."""
    def objective(f: VFit) -> float:
        errs = _rl_errors(cases, with_efficiency(base, f.compute, f.hbm))
        return float(np.median(errs) + 1e-3 * np.mean(errs)) if errs else math.inf

    kept, notes, _ = fit_with_rules(objective, VFit(*default, 0.0, 0.0), ["compute", "hbm"],
                                    MIN_GAIN["rl"])
    return kept.compute, kept.hbm, notes


def _rollout_variants(case: RLCase) -> list[tuple[str, RLCase]]:
    """The case priced with the vllm-v0 and eager engines, and with the KV cache the planner
    would size (all memory the generation leaves free) instead of NeMo-RL's
    gpu_memory_utilization."""
    sc, plan = case.scenario, case.plan
    assert sc is not None and plan is not None
    out = []
    for engine in ("vllm-v0", "eager"):
        alt = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"engine": engine})})
        out.append((engine, replace(case, scenario=alt)))
    gen = plan.layouts["actor"]["generation"]
    layouts = {**plan.layouts, "actor": {**plan.layouts["actor"], "generation":
                                         gen.model_copy(update={"kv_cache_tokens": None})}}
    out.append(("free-memory KV", replace(case, plan=plan.model_copy(
        update={"layouts": layouts}))))
    return out


def breakdown(ev: Evaluation) -> str:
    """The priced step by part (s): the slowest replica's rollout (prefill, recompute, decode
    to 90% done, tail, engine overhead), the assessment and training stages, the sync; and
    what bounds an asynchronous step (the rollout group or the trainer group)."""
    g = ev.rollout.time if ev.rollout is not None else None
    gen = (f"prefill {g.prefill:.1f} recompute {g.recompute:.1f} decode {g.decode:.1f} "
           f"tail {g.decode_tail:.1f} overhead {g.overhead:.1f}" if g is not None else "-")
    st = ev.stage_times
    busy = {name: sum(v for k, v in parts.items() if k != "idle")
            for name, parts in ev.groups.items()}
    bound = (f"; bound by group {max(busy, key=busy.get)}" if len(busy) > 1 else "")
    return (f"gen [{gen}] assess {st['assessment']:.1f} train {st['training']:.1f} "
            f"sync {ev.sync_s:.1f} (swap {ev.swap_s:.1f}){bound}")


def _rollout_cell(ev: Evaluation | None) -> str:
    r = ev.rollout if ev is not None else None
    return f"{r.peak_batch} {r.regime}" if r is not None else "-"


def _profile_of(case: RLCase) -> HardwareProfile:
    return case.scenario.cluster.gpu  # type: ignore[union-attr]


def run_rl(vfit: VFit, fit: bool, engines: dict
           ) -> tuple[dict, dict, dict[str, tuple[float, float]]]:
    section("2b. RL rows of runs.csv: whole steps priced with evaluate()")
    with tempfile.TemporaryDirectory() as tmp:
        h20 = load_profile("h20")
        raw = h20.model_dump(exclude_none=True)
        raw.update(name="h20-bench", inter_node_gbps=H20_INTER_NODE_GBPS)
        raw["sources"] = {**raw.get("sources", {}), "inter_node_gbps": "bench assumption"}
        h20_path = Path(tmp) / "h20-bench.yaml"
        h20_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        with (DATA / "runs.csv").open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        cases = [map_row(r, h20_path) for r in rows]
        # the verl sensitivity cases (mean response length)
        sens = {}
        for case in cases:
            if case.source == "verl" and not case.skip:
                for t in VERL_RESPONSE_SENSITIVITY:
                    alt = RLCase(row=case.row, source=case.source, measured_s=case.measured_s,
                                 profile=case.profile)
                    _map_verl(alt, MODELS["qwen2.5-math-7b"], int(case.row["n_gpus"]), 8, t)
                    sens[(case.id, t)] = alt
        return _rl_report(cases, sens, vfit, fit, engines)


def _rl_report(cases: list[RLCase], sens: dict, vfit: VFit, fit: bool, engines: dict):
    print("Mapping and assumptions per row (shared ones stated once per source):")
    seen: set[str] = set()
    for c in cases:
        print(f"\n  row {c.id} [{c.source}] {c.label}")
        if c.skip:
            print(f"    SKIPPED: {c.skip}")
            continue
        for a in c.assumptions:
            key = f"{c.source}:{a}"
            if key in seen and not a.startswith(("prompt length", "max response", "chosen",
                                                 "1-off node", "no candidate")):
                continue
            seen.add(key)
            print(f"    - {a}")

    profiles: dict[str, list[RLCase]] = {}
    for c in cases:
        if not c.skip and c.scenario is not None:
            profiles.setdefault(_profile_of(c).name, []).append(c)

    before_eff = (DEFAULT_COMPUTE_EFFICIENCY, DEFAULT_HBM_EFFICIENCY)
    fitted: dict[str, tuple[float, float]] = {}
    verdicts: dict[str, str] = {}
    results_before: dict[str, RLResult] = {}
    results_after: dict[str, RLResult] = {}
    with _framework(*PRE_FIT_FRAMEWORK):
        for group in profiles.values():
            gpu = with_efficiency(_profile_of(group[0]), *before_eff)
            for c in group:
                results_before[c.id] = price(with_controller(c, 0.0), gpu)  # unfitted
    with _framework(vfit.host, vfit.overlap, engines):
        for name, group in profiles.items():
            base = _profile_of(group[0])
            c_, h_ = base.efficiency.compute, base.efficiency.hbm
            if fit:  # a diagnostic: what the rows push the efficiencies to; never written
                fc, fh, notes = fit_profile(group, base, (c_, h_))
                med = _median_ape(group, with_efficiency(base, fc, fh))
                print(f"\nWhat rows {', '.join(c.id for c in group)} want of {name}: median "
                      f"APE {pct(med).strip()} at compute {fc:.2f}, hbm {fh:.2f} (shipped "
                      f"{c_:.2f} / {h_:.2f}, median APE "
                      f"{pct(_median_ape(group, base)).strip()}). Not written: efficiencies "
                      "are not fitted on whole RL steps (issue 11 item 8); the shipped ones "
                      "come from training rows or the schema defaults (the profile's sources)")
                for n in notes:
                    print(f"  {n}")
                verdicts[name] = "shipped: RL rows check it, they do not fit it"
            fitted[name] = (c_, h_)
            gpu = with_efficiency(base, c_, h_)
            for c in group:
                results_after[c.id] = price(c, gpu)
        sens_res = {}
        for (cid, t), alt in sens.items():
            base = _profile_of(alt)
            sens_res[(cid, t)] = price(alt, with_efficiency(base, *fitted[base.name]))
        overlapped = {c.id: price(_with_overlapped_sync(c), with_efficiency(
            _profile_of(c), *fitted[_profile_of(c).name]))
            for c in cases if c.plan is not None and c.plan.inter_model.staleness}
        control = controller_fit(cases)
        results_loo = {**results_after, **{
            cid: price(with_controller(next(c for c in cases if c.id == cid), rate))
            for cid, rate in control.loo.items()}}
        engine_sens = {c.id: {what: price(alt, with_efficiency(
            _profile_of(c), *fitted[_profile_of(c).name])) for what, alt in _rollout_variants(c)}
            for c in cases if c.source == "NeMo-RL" and not c.skip and c.plan is not None}

    print("\nPredicted vs measured step time (s). 'after' = shipped efficiencies, the run's "
          "framework and engine constants; rollout = the slowest replica's peak running batch "
          "and regime.")
    print(f"{'row':>4} {'source':8} {'case':42} {'meas':>7} {'before':>8} {'after':>8} "
          f"{'APE':>6} {'rollout':>18}  stages after (gen/assess/train/sync)")
    for c in cases:
        if c.skip:
            print(f"{c.id:>4} {c.source[:8]:8} {c.label[:42]:42} {'':>7} {'skipped':>8}")
            continue
        b, a = results_before[c.id], results_after[c.id]
        meas = c.measured_s or float("nan")
        if a.predicted is None:
            print(f"{c.id:>4} {c.source[:8]:8} {c.label[:42]:42} {meas:7.1f} "
                  f"{'failed':>8} -> {a.error}")
            continue
        bp = f"{b.predicted:8.1f}" if b.predicted is not None else f"{'failed':>8}"
        st = a.ev.stage_times  # type: ignore[union-attr]
        stages = (f"{st['generation']:.0f}/{st['assessment']:.0f}/{st['training']:.0f}/"
                  f"{a.ev.sync_s:.1f}")  # type: ignore[union-attr]
        print(f"{c.id:>4} {c.source[:8]:8} {c.label[:42]:42} {meas:7.1f} {bp} "
              f"{a.predicted:8.1f} {pct(abs(a.predicted - meas) / meas)} "
              f"{_rollout_cell(a.ev):>18}  {stages}")
        print(f"{'':>4} {'':8} {breakdown(a.ev)}")  # type: ignore[arg-type]
        if c.source == "verl":
            print(f"{'':>4} {'':8} measured components: {c.row['notes'].split(';')[0]}")
            parts = {t.stage: t.seconds for t in a.ev.tasks if t.role == "actor"}  # type: ignore
            print(f"{'':>4} {'':8} predicted components: gen {parts.get('generation', 0):.1f} "
                  f"old_lp {parts.get('assessment', 0):.1f} update {parts.get('training', 0):.1f}")

    print("\nNeMo-RL rows under other rollout assumptions (sensitivity, nothing fitted): the "
          "engine of the 2024 rows, an engine without CUDA graphs, and the KV cache the "
          "planner sizes (all free memory) instead of NeMo-RL's gpu_memory_utilization")
    for cid, alts in engine_sens.items():
        c = next(c for c in cases if c.id == cid)
        cells = [f"{what} {r.predicted:6.1f}" if r.predicted is not None else f"{what} failed"
                 for what, r in alts.items()]
        print(f"  row {cid:>2} (measured {c.measured_s:6.1f}, shipped "
              f"{results_after[cid].predicted:6.1f}): " + ", ".join(cells))
    if engine_sens:
        variants = list(next(iter(engine_sens.values())))
        cells = []
        for what in ["shipped", *variants]:
            errs = [abs(r.predicted - c.measured_s) / c.measured_s  # type: ignore[operator]
                    for c in cases if c.id in engine_sens
                    and (r := results_after[c.id] if what == "shipped"
                         else engine_sens[c.id][what]).predicted is not None]
            cells.append(f"{what} {pct(float(np.median(errs))).strip()}")
        print("  NeMo-RL median APE: " + ", ".join(cells))

    if sens:
        print("\nverl sensitivity to the assumed mean response length ('after' constants):")
        for c in cases:
            if c.source != "verl" or c.skip:
                continue
            cells = []
            for t in VERL_RESPONSE_SENSITIVITY:
                res = sens_res[(c.id, t)]
                cells.append(f"T={t}: {res.predicted:7.1f}" if res.predicted is not None
                             else f"T={t}: failed")
            print(f"  row {c.id} (measured {c.measured_s:.1f}): " + ", ".join(cells))

    print("\nAsynchronous rows with the weight sync overlapped instead (shadow copy on the "
          "rollout group; 'after' constants):")
    for cid, res in overlapped.items():
        c = next(c for c in cases if c.id == cid)
        got = (f"{res.predicted:7.1f} (blocking {results_after[cid].predicted:7.1f}, rollout "
               f"{_rollout_cell(res.ev)})" if res.predicted is not None
               else f"failed: {res.error}")
        print(f"  row {cid} (measured {c.measured_s:.1f}): {got}")

    _controller_report(cases, control, results_after, results_loo)
    print("\nPair orderings (co-located vs asynchronous), 'after':")
    ordered = pair_orders(cases, results_after, show=True)
    ordered_loo = pair_orders(cases, results_loo, show=False)

    _diagnostics(cases, results_after)
    before_e, after_e = rl_errors(results_before), rl_errors(results_after)
    print("\nErrors per source (median APE / mean APE / rows priced):")
    for s in sorted(set(before_e) | set(after_e), key=lambda x: (x == "all", x)):
        b = before_e.get(s)
        a = after_e.get(s)
        bs = f"{pct(b[0])} / {pct(b[1])} / {b[2]}" if b else "-"
        as_ = f"{pct(a[0])} / {pct(a[1])} / {a[2]}" if a else "-"
        print(f"  {s:10s} before {bs:26s} after {as_}")
    loo = {"loo_errors": rl_errors(results_loo), "loo_ordered": ordered_loo,
           "verl_worst": max((abs(r.predicted - r.case.measured_s) / r.case.measured_s
                              for r in results_after.values() if r.case.source == "verl"
                              and r.predicted is not None and r.case.measured_s),
                             default=math.inf),
           "controller": control.fitted}
    return {"before": before_e, "after": after_e, **loo}, ordered, {
        k: (*v, verdicts.get(k, "--no-fit: shipped values")) for k, v in fitted.items()}


def pair_orders(cases: list[RLCase], results: dict[str, RLResult], show: bool
                ) -> dict[tuple[str, str], bool | None]:
    """Whether each co-located vs asynchronous pair is priced in the measured order."""
    ordered: dict[tuple[str, str], bool | None] = {}
    for a_id, b_id in PAIRS:
        ra, rb = results.get(a_id), results.get(b_id)
        ca = next(c for c in cases if c.id == a_id)
        cb = next(c for c in cases if c.id == b_id)
        meas_order = ca.measured_s > cb.measured_s  # type: ignore[operator]
        if ra is None or rb is None or ra.predicted is None or rb.predicted is None:
            ordered[(a_id, b_id)] = None
            if show:
                print(f"  {a_id} vs {b_id}: cannot order (a row failed)")
            continue
        ordered[(a_id, b_id)] = (ra.predicted > rb.predicted) == meas_order
        if show:
            verdict = "ordered as measured" if ordered[(a_id, b_id)] else "WRONG ORDER"
            print(f"  {a_id} vs {b_id} ({ca.label} vs {cb.label.split()[-1]}): measured "
                  f"{ca.measured_s:.1f} vs {cb.measured_s:.1f}, predicted {ra.predicted:.1f} "
                  f"vs {rb.predicted:.1f} -> {verdict}")
    return ordered


def _controller_report(cases: list[RLCase], control: ControllerFit,
                       after: dict[str, RLResult], loo: dict[str, RLResult]) -> None:
    """NeMo-RL's controller rate: the co-located rows' gaps, the fit, and every NeMo-RL row
    priced with the rate fitted without it (leave-one-out)."""
    print("\nNeMo-RL controller host time (runtime.controller_us_per_token), fitted on the "
          "co-located rows: (measured - predicted without it) per generated token")
    print("  " + ", ".join(f"row {cid} {g:+.1f} us" for cid, g in control.gaps.items())
          + f"  -> median {control.fitted:.2f} us (shipped "
          f"in the nemo-rl preset {NEMO_RL_CONTROLLER_US_PER_TOKEN:g})")
    by_id = {c.id: c for c in cases}
    spread = {}  # the gaps in other units: the unit with the least spread is the mechanism's
    for unit, per in (("per generated token", _generated_tokens),
                      ("per response", lambda c: c.scenario.sequences_per_step),
                      ("per step", lambda c: 1.0),
                      ("per generated token per GPU", lambda c: _generated_tokens(c)
                       / c.scenario.total_gpus)):
        gaps = np.array([g * _generated_tokens(by_id[cid]) / per(by_id[cid])
                         for cid, g in control.gaps.items()])
        spread[unit] = float(np.std(gaps) / np.mean(gaps))
    print("  spread of the gaps (std / mean) by unit: " + ", ".join(
        f"{unit} {v:.2f}" for unit, v in spread.items()))
    print("  leave-one-out: each row priced with the median of the other co-located rows")
    for cid, rate in control.loo.items():
        c = by_id[cid]
        a, r = after[cid], loo[cid]
        if r.predicted is None or a.predicted is None:
            continue
        loo_e, shipped_e = (pct(abs(x.predicted - c.measured_s) / c.measured_s).strip()
                            for x in (r, a))
        print(f"    row {cid:>2} {c.label[:42]:42s} rate {rate:5.2f} us: {r.predicted:6.1f} s "
              f"vs measured {c.measured_s:6.1f} ({loo_e}; shipped rate {shipped_e})")
    verl = {c.id: c for c in cases if c.source == "verl" and c.measured_s}
    if {"32", "34"} <= set(verl):  # step = W / GPUs + H over the two co-located scales
        t32, t34 = verl["32"].measured_s, verl["34"].measured_s
        print(f"  verl, rows 32/34 (32 and 64 GPUs, the same batch): step = W/GPUs + H gives "
              f"H = {2 * t34 - t32:+.1f} s: no room for a GPU-independent host cost there, "
              "so the rate is NeMo-RL's, not a planner default")


def _measured_parts(row: dict[str, str]) -> dict[str, float]:
    """verl's measured per-step timers from the row's notes ('gen 21.26 old_lp  update ...')."""
    return {k: float(v) for k, v in re.findall(r"(gen|old_lp|update) ([\d.]+)",
                                               row["notes"].split(";")[0])}


def _trainer_busy_s(case: RLCase) -> float:
    """The most the row's trainer can have worked per step, by its own timers: the update,
    and for an asynchronous row no more than the step less the wait for samples."""
    parts = _measured_parts(case.row)
    if case.plan.inter_model.staleness:  # type: ignore[union-attr]
        return min(parts["update"], case.measured_s - parts["gen"])  # type: ignore[operator]
    return parts["update"]


def implied_length(case: RLCase) -> tuple[int, RLResult] | None:
    """verl: the mean response length at which the planner's trainer does what the row's own
    update timer measured (bisection over whole tokens), and the row priced at it — a
    diagnostic of what the data's lengths would have to be, never a counted figure."""
    def priced(length: int) -> RLResult:
        alt = RLCase(row=case.row, source=case.source, measured_s=case.measured_s,
                     profile=case.profile)
        _map_verl(alt, MODELS["qwen2.5-math-7b"], int(case.row["n_gpus"]), 8, length)
        return price(alt)

    def trainer_s(res: RLResult) -> float:
        return next(t.seconds for t in res.ev.tasks if t.stage == "training")  # type: ignore

    target, lo, hi = _trainer_busy_s(case), 16, 8192
    if (first := priced(lo)).ev is None or trainer_s(first) > target:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        res = priced(mid)
        if res.ev is not None and trainer_s(res) <= target:
            lo = mid
        else:
            hi = mid
    return lo, priced(lo)


def _diagnostics(cases: list[RLCase], results: dict[str, RLResult]) -> None:
    """What the off rows lack, in the rows' own units (measured − predicted with the shipped
    constants): per generated token for NeMo-RL, the trainer's measured bound for verl."""
    print("\nWhat the model lacks, per row (diagnostic: measured - predicted, shipped constants):")
    print("  NeMo-RL, per generated token of the step (B·K x mean response length):")
    for c in cases:
        r = results.get(c.id)
        if c.source != "NeMo-RL" or r is None or r.predicted is None or not c.measured_s:
            continue
        tokens = _generated_tokens(c)
        mode = "co-located" if not c.plan.inter_model.staleness else "1-off"  # type: ignore
        print(f"    row {c.id:>2} {mode:10s} {c.label[:40]:40s} "
              f"{(c.measured_s - r.predicted) / tokens * 1e6:+6.1f} us/token "
              f"({c.measured_s - r.predicted:+6.1f} s over {tokens / 1e6:.2f}M tokens)")
    print("  verl update_actor, GPU-seconds per step (the same 512 x 16 batch in every row):")
    for c in cases:
        r = results.get(c.id)
        if c.source != "verl" or r is None or r.ev is None:
            continue
        parts = _measured_parts(c.row)
        train = next(t for t in r.ev.tasks if t.stage == "training")
        gpus = train.layout.dp * train.layout.tp * train.layout.pp * train.layout.cp
        line = (f"    row {c.id:>2} {c.label[:40]:40s} measured {parts['update'] * gpus:7.0f}, "
                f"predicted {train.seconds * gpus:7.0f} on {gpus} GPUs")
        busy = _trainer_busy_s(c)
        if c.plan.inter_model.staleness:  # type: ignore[union-attr]
            line += (f"; the trainer waited {parts['gen']:.1f} s for samples, so it was busy "
                     f"<= {busy:.1f} s of the step (predicted {train.seconds:.1f} s)")
        # the least work a token can cost: 6 FLOPs per parameter (no recompute, no attention)
        sc = c.scenario
        peak = sc.cluster.gpu.bf16_tflops * 1e12  # type: ignore[union-attr]
        per_seq = busy * gpus * peak / (6 * params_with_head(sc.actor)  # type: ignore[union-attr]
                                         * sc.sequences_per_step)  # type: ignore[union-attr]
        print(line + f"\n      -> at 100% of peak, 6 FLOPs per parameter per token: <= "
              f"{per_seq:,.0f} tokens per sequence (the bench assumes "
              f"{sc.workload.seq_len:,.0f})")  # type: ignore[union-attr]
    print("  verl at the mean response length each row's own update timer implies (the "
          "planner's trainer doing the measured work; a diagnostic, not counted):")
    for c in cases:
        if c.source != "verl" or c.skip or not c.measured_s:
            continue
        found = implied_length(c)
        if found is None or found[1].predicted is None:
            print(f"    row {c.id:>2}: no length fits the timer")
            continue
        length, res = found
        print(f"    row {c.id:>2} {c.label[:40]:40s} mean response {length:5,} tokens: step "
              f"{res.predicted:6.1f} s vs measured {c.measured_s:6.1f} "
              f"({pct(abs(res.predicted - c.measured_s) / c.measured_s).strip()})")

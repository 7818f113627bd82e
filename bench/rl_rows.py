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
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import rl_misses  # bench/rl_misses.py
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
from rl_controller import ControllerFit, controller_fit
from rl_controller import report as report_controller
from rl_mapping import (
    MODELS,
    NEMO_RL_CONTROLLER_US_PER_TOKEN,
    VERL_RESPONSE_SENSITIVITY,
    RLCase,
    _map_verl,
    map_row,
    vllm_kv_tokens,
    write_local_files,
)
from rl_price import (
    RLResult,
    pair_orders,
    price,
    print_table,
    rl_errors,
    with_controller,
)

from planner.cost.iteration import Evaluation
from planner.specs.hardware import (
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_HBM_EFFICIENCY,
    HardwareProfile,
)

# --- 2. RL rows of runs.csv -------------------------------------------------------------------


def _with_overlapped_sync(case: RLCase) -> RLCase:
    """The case with its weight sync overlapped (a shadow copy on the rollout group); a KV
    cache set by the framework's gpu_memory_utilization is re-sized with the copy inside it."""
    plan, sc = case.plan, case.scenario
    assert plan is not None and sc is not None
    if case.gpu_memory_utilization is not None:
        kv = vllm_kv_tokens(sc, plan.layouts["actor"]["generation"],
                            case.gpu_memory_utilization, shadow=True)
        if kv < 1:
            return replace(case, skip=f"a shadow copy leaves no KV cache within "
                           f"gpu_memory_utilization {case.gpu_memory_utilization:g}")
        plan = plan.with_kv_cache(kv)
    plan = plan.model_copy(update={"inter_model": plan.inter_model.model_copy(
        update={"overlap_weight_sync": True})})
    return replace(case, plan=plan)


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
    out.append(("free-memory KV", replace(case, plan=plan.with_kv_cache(None))))
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


def run_rl(framework: VFit, fit: bool, engines: dict) -> tuple[dict, dict[str, tuple]]:
    """Every row of runs.csv mapped, priced and reported; returns the figures section 4 prints
    (errors, pairs, the controller fit) and each profile's efficiencies with a verdict.
    `framework` and `engines`: the framework and decode constants the rows are priced with
    (calibration.py passes the shipped ones)."""
    section("2b. RL rows of runs.csv: whole steps priced with evaluate()")
    with tempfile.TemporaryDirectory() as tmp:
        write_local_files(Path(tmp))
        with (DATA / "runs.csv").open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        cases = [map_row(r, Path(tmp)) for r in rows]
        # the verl sensitivity cases (mean response length)
        sens = {}
        for case in cases:
            if case.source == "verl" and not case.skip:
                for t in VERL_RESPONSE_SENSITIVITY:
                    alt = RLCase(row=case.row, source=case.source, measured_s=case.measured_s,
                                 profile=case.profile)
                    _map_verl(alt, MODELS["qwen2.5-math-7b"], int(case.row["n_gpus"]), 8, t)
                    sens[(case.id, t)] = alt
        return _rl_report(cases, sens, framework, fit, engines)


def _print_assumptions(cases: list[RLCase]) -> None:
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
                                                 "1-off node", "no candidate", "measured step")):
                continue
            seen.add(key)
            print(f"    - {a}")


def _controller_prices(cases: list[RLCase], after: dict[str, RLResult]
                       ) -> tuple[ControllerFit, dict[str, dict[str, RLResult]]]:
    """The controller rate fitted, and the rows priced with each of its fits: 'fitted' (NeMo-RL's
    rows at the rate its co-located rows give), 'loo' (each NeMo-RL row at the rate fitted
    without it), 'nemo->verl' and 'verl->nemo' (one source's rows at the rate the other's
    give), 'loso' (every row at the rate the other sources give). Rows a pricing does not
    change keep their shipped result."""
    control = controller_fit(cases)
    by_id = {c.id: c for c in cases}

    def at(rates: dict[str, float]) -> dict[str, RLResult]:
        return {**after, **{cid: price(with_controller(by_id[cid], rate))
                            for cid, rate in rates.items() if by_id[cid].plan is not None}}

    def source_rate(source: str, rate: float) -> dict[str, float]:
        return {c.id: rate for c in cases if c.source == source}

    return control, {
        "shipped": after,
        "fitted": at(source_rate("NeMo-RL", control.fitted)),
        "loo": at(control.loo),
        "nemo->verl": at(source_rate("verl", control.alone.get("NeMo-RL", 0.0))),
        "verl->nemo": at(source_rate("NeMo-RL", control.alone.get("verl", 0.0))),
        "loso": at({c.id: control.loso[c.source] for c in cases if c.source in control.loso}),
    }


def controller_verdict(errors: dict[str, dict[str, tuple]]) -> str:
    """Whether the fitted controller rate should replace the preset's: it must lower NeMo-RL's
    median APE by MIN_GAIN["rl"] in sample (the bench's rule for every fitted value) and
    predict no worse out of sample (leave-one-out) than the shipped rate does in sample."""
    shipped, fitted, loo = (errors[k].get("NeMo-RL") for k in ("shipped", "fitted", "loo"))
    if not (shipped and fitted and loo):
        return "not fitted: no NeMo-RL row priced"
    gain = shipped[0] - fitted[0]
    numbers = (f"NeMo-RL median APE {fitted[0]:.1%} fitted, {shipped[0]:.1%} shipped, "
               f"{loo[0]:.1%} leave-one-out")
    if gain < MIN_GAIN["rl"]:
        return f"kept: {numbers} (gains {100 * gain:.1f} pp, under {100 * MIN_GAIN['rl']:g})"
    if loo[0] > shipped[0]:
        return (f"kept: {numbers} (in sample it gains {100 * gain:.1f} pp, out of sample it "
                "predicts worse than the shipped rate: the rows do not agree on one rate)")
    return f"update it: {numbers}"


def _print_errors(before: dict, after: dict) -> None:
    print("\nErrors per source (median / mean / worst APE, rows priced), before and after:")
    for s in sorted(set(before) | set(after), key=lambda x: (x == "all", x)):
        cells = [f"{pct(v[0])} / {pct(v[1])} / {pct(v[2])}, {v[3]:2d}" if v else "-"
                 for v in (before.get(s), after.get(s))]
        print(f"  {s:15s} before {cells[0]:30s} after {cells[1]}")


def _rl_report(cases: list[RLCase], sens: dict, framework: VFit, fit: bool, engines: dict):
    _print_assumptions(cases)
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
    with _framework(framework.host, framework.overlap, engines):
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
            for c in group:
                results_after[c.id] = price(c)
        sens_res = {key: price(alt) for key, alt in sens.items()}
        overlapped = {c.id: price(_with_overlapped_sync(c))
                      for c in cases if c.plan is not None and c.plan.inter_model.staleness}
        control, by_rate = _controller_prices(cases, results_after)
        engine_sens = {c.id: {what: price(alt) for what, alt in _rollout_variants(c)}
                       for c in cases if c.source == "NeMo-RL" and not c.skip
                       and c.plan is not None}

    print("\nThe RL rows of runs.csv (issue 22's table): shipped constants and presets; error = "
          "predicted / measured - 1")
    print_table(cases, results_after)
    before_e, after_e = rl_errors(results_before), rl_errors(results_after)
    _print_errors(before_e, after_e)
    print("\nPair orderings (co-located vs asynchronous), shipped:")
    ordered = pair_orders(cases, results_after, show=True)
    errors = {k: rl_errors(v) for k, v in by_rate.items()}
    report_controller(control, NEMO_RL_CONTROLLER_US_PER_TOKEN, errors)
    rl_misses.report(cases, results_after)

    print("\nEvery row in detail (s). before = the schema's efficiencies and the pre-fit "
          "framework constants, no controller; rollout = the slowest replica's peak running "
          "batch and regime.")
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
            errs = [r.ape for c in cases if c.id in engine_sens
                    and (r := results_after[c.id] if what == "shipped"
                         else engine_sens[c.id][what]).ape is not None]
            cells.append(f"{what} {pct(float(np.median(errs))).strip()}")
        print("  NeMo-RL median APE: " + ", ".join(cells))

    if sens:
        print("\nverl sensitivity to the assumed mean response length (shipped constants):")
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
          "rollout group; shipped constants):")
    for cid, res in overlapped.items():
        c = next(c for c in cases if c.id == cid)
        got = (f"{res.predicted:7.1f} (blocking {results_after[cid].predicted:7.1f}, rollout "
               f"{_rollout_cell(res.ev)})" if res.predicted is not None
               else f"failed: {res.error}")
        print(f"  row {cid} (measured {c.measured_s:.1f}): {got}")

    rl_misses.verl_diagnostics(cases, results_after)
    stats = {"after": after_e, "loso": errors["loso"], "ordered": ordered, "rows": len(cases),
             "loso_ordered": pair_orders(cases, by_rate["loso"], show=False),
             "controller": (control.fitted, controller_verdict(errors))}
    return stats, {k: (*v, verdicts.get(k, "--no-fit: shipped values"))
                   for k, v in fitted.items()}

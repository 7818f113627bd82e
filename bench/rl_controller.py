"""The one RL-level constant fitted on the RL rows of ../shared/data/calibration/runs.csv:
NeMo-RL's controller host time (`runtime.controller_us_per_token`, its preset), fitted,
left out row by row, and left out source by source (issue 22 item 6: fit on NeMo-RL rows and
check the verl rows, and the reverse). bench/rl_rows.py prices and prints with it.

The fit: the rate (µs per generated token, a grid of 0.05 µs up to 40 µs) with the least
median APE over the fit rows' co-located steps (mean APE breaks ties) — robust, as the
profiles' diagnostic fit is, to rows the model misprices for reasons that are not a host
cost. Only co-located rows identify it: a synchronous step waits for the controller in series
(`planner.cost.iteration.evaluate`: step = priced step without it + rate × generated tokens),
an asynchronous one hides it beside the groups' work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rl_mapping import RLCase
from rl_price import price, with_controller

from planner.cost.step import generated_tokens_per_step

RATE_GRID = np.round(np.arange(0.0, 40.0001, 0.05), 2)
"""µs per generated token searched: 0 (no host cost) to four times NeMo-RL's fitted rate."""


@dataclass(frozen=True)
class Colocated:
    """A co-located row priced without a controller: its step at a rate is
    `base_s + rate × tokens`."""

    id: str
    source: str
    measured_s: float
    base_s: float
    tokens: float  # generated per step
    sequences: int
    gpus: int

    @property
    def gap_us(self) -> float:
        """(measured − priced without it) per generated token: the rate this row alone wants."""
        return (self.measured_s - self.base_s) / self.tokens * 1e6


def colocated_rows(cases: list[RLCase]) -> list[Colocated]:
    out = []
    for c in cases:
        if c.plan is None or c.plan.inter_model.staleness or not c.measured_s:
            continue
        r = price(with_controller(c, 0.0))
        if r.predicted is not None:
            sc = c.scenario
            out.append(Colocated(c.id, c.source, c.measured_s, r.predicted,
                                 generated_tokens_per_step(sc), sc.sequences_per_step,  # type: ignore
                                 sc.total_gpus))  # type: ignore[union-attr]
    return out


def fit_rate(rows: list[Colocated]) -> float:
    """The grid rate with the least median APE over `rows` (0 without rows)."""
    if not rows:
        return 0.0
    meas = np.array([r.measured_s for r in rows])
    steps = (np.array([r.base_s for r in rows])[None, :]
             + RATE_GRID[:, None] * 1e-6 * np.array([r.tokens for r in rows])[None, :])
    ape = np.abs(steps - meas) / meas
    return float(RATE_GRID[np.argmin(np.median(ape, axis=1) + 1e-3 * ape.mean(axis=1))])


@dataclass
class ControllerFit:
    rows: list[Colocated]
    fitted: float  # on NeMo-RL's co-located rows
    loo: dict[str, float]  # every NeMo-RL row -> the rate fitted without it
    alone: dict[str, float]  # source -> the rate its own co-located rows give
    loso: dict[str, float]  # source -> the rate the other sources' co-located rows give


def controller_fit(cases: list[RLCase]) -> ControllerFit:
    rows = colocated_rows(cases)
    sources = sorted({c.source for c in cases if c.plan is not None})
    nemo = [r for r in rows if r.source == "NeMo-RL"]
    loo = {c.id: fit_rate([r for r in nemo if r.id != c.id]) for c in cases
           if c.source == "NeMo-RL" and c.plan is not None}
    return ControllerFit(
        rows, fit_rate(nemo), loo,
        {s: fit_rate([r for r in rows if r.source == s]) for s in sources},
        {s: fit_rate([r for r in rows if r.source != s]) for s in sources})


def report(fit: ControllerFit, shipped: float, errors: dict[str, dict[str, tuple]]) -> None:
    """The fit and its checks; `errors` maps a pricing ('shipped', 'fitted', 'loo',
    'nemo->verl', 'verl->nemo', 'loso') to rl_price.rl_errors of it."""
    print("\nNeMo-RL controller host time (runtime.controller_us_per_token): the rate with the "
          "least median APE over NeMo-RL's co-located rows (grid 0-40 us)")
    print("  what each co-located row alone wants ((measured - priced without it) per generated "
          "token): " + ", ".join(f"{r.source[:4]} {r.id} {r.gap_us:+.1f}" for r in fit.rows))
    nemo = [r for r in fit.rows if r.source == "NeMo-RL"]
    spread = {}  # the gaps in other units: the unit with the least spread is the mechanism's
    for unit, per in (("per generated token", lambda r: 1.0),
                      ("per response", lambda r: r.sequences / r.tokens),
                      ("per step", lambda r: 1 / r.tokens),
                      ("per generated token per GPU", lambda r: 1 / r.gpus)):
        gaps = np.array([r.gap_us / per(r) for r in nemo])
        spread[unit] = float(np.std(gaps) / np.mean(gaps)) if len(gaps) else float("nan")
    print("  NeMo-RL's gaps, spread (std / mean) by unit: " + ", ".join(
        f"{unit} {v:.2f}" for unit, v in spread.items()))
    sh, ft = errors["shipped"].get("NeMo-RL"), errors["fitted"].get("NeMo-RL")
    if sh and ft:
        print(f"  fitted {fit.fitted:.2f} us (shipped {shipped:g} us): NeMo-RL median APE "
              f"{ft[0]:.1%} fitted, {sh[0]:.1%} shipped; worst {ft[2]:.1%} / {sh[2]:.1%}")
    lo = errors["loo"].get("NeMo-RL")
    if lo:
        print("  leave-one-out (each NeMo-RL row priced with the rate fitted without it: "
              + ", ".join(f"{cid} {rate:.2f}" for cid, rate in fit.loo.items())
              + f" us): NeMo-RL median APE {lo[0]:.1%}, worst {lo[2]:.1%}")
    print("  leave-one-source-out (the rate as one constant for every framework, fitted on one "
          "source's co-located rows and checked on another's; shipped: only NeMo-RL's preset "
          "prices one):")
    for fit_on, check, key in (("NeMo-RL", "verl", "nemo->verl"),
                               ("verl", "NeMo-RL", "verl->nemo")):
        got, base = errors[key].get(check), errors["shipped"].get(check)
        if got and base:
            print(f"    fit on {fit_on} ({fit.alone.get(fit_on, 0.0):.2f} us) -> {check} rows: "
                  f"median {got[0]:.1%}, worst {got[2]:.1%} (shipped {base[0]:.1%} / "
                  f"{base[2]:.1%})")
    cells = ", ".join(f"{s} {rate:.2f} us" for s, rate in fit.loso.items())
    pooled = errors["loso"].get("all")
    if pooled:
        print(f"    each source with the rate fitted on the others' rows ({cells}): pooled median "
              f"{pooled[0]:.1%}, worst {pooled[2]:.1%}; by source: " + ", ".join(
                  f"{s} {v[0]:.1%}" for s, v in errors["loso"].items() if s != "all"))

"""Response lengths as a distribution: how long each of a step's B·K responses is.

A step's generation runs as long as its longest responses, and KV cache and activations grow
with each sequence, so the mean alone (`workload.response_len`) misprices a long-tailed batch.
`workload.response_lengths` describes the spread in one of four forms; every form resolves to a
quantile function Q(u) on u ∈ (0, 1) giving lengths in tokens, clipped to [1, cap] where the cap
is the effective `max_response_len`:

- lognormal (the default when max_response_len > response_len): X = exp(mu + sigma·Z),
  truncated at the cap with the mass beyond it sitting AT the cap (the clipped responses). mu is
  solved by bisection so that E[min(X, c)] = response_len, where
  E[min(X, c)] = e^{mu+σ²/2}·Φ((ln c − mu − σ²)/σ) + c·(1 − Φ((ln c − mu)/σ)).
  If response_len equals the cap every response is at the cap. sigma defaults to 1.0: RollPacker's
  Qwen2.5-14B GRPO response lengths fit a lognormal with sigma ≈ 1.0–1.1 (reference:
  ../shared/data/calibration/rollout.md §5; not read at run time).
- fixed (the default when there is no cap above the mean): Q(u) = response_len.
- quantiles read off a dashboard (any of p10 p25 p50 p75 p90 p95 p99, plus `clipped`, the
  fraction hitting the cap): piecewise linear in (z = Φ⁻¹(u), ln L) through the points, extended
  beyond the outermost points with the slope of the nearest segment (a single point: slope 1.0,
  i.e. sigma 1.0); then Q(u) = cap for u ≥ 1 − clipped.
- file of observed lengths (text, one per line; CSV with a header; or JSON): the empirical
  quantile function of the values, Q(u) = sorted[floor(u·N)], values above the cap clipped to it.

For lognormal and fixed the mean is response_len by construction; for quantiles and a file the
mean is the sample's (scenario resolution fills or checks response_len against it).

Sampling is deterministic: u_i = (i + 0.5)/n, L_i = clip(round(Q(u_i)), 1, cap), then permuted
with a fixed seed. The permutation makes any contiguous chunk a fair sample: sequence i belongs
to prompt i // K and replicas receive contiguous chunks of prompts.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from planner.errors import InputError
from planner.specs import bounds as lim
from planner.specs.files import read_json, read_text

DEFAULT_SIGMA = 1.0  # rollout.md §5: RollPacker's Qwen2.5-14B GRPO lengths, sigma ≈ 1.0–1.1
MAX_SIGMA = 4.0
MEAN_TOLERANCE = 0.10  # a stated response_len may differ from the lengths' mean by this much
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p10", 0.10), ("p25", 0.25), ("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95),
    ("p99", 0.99))
FIELD = "workload.response_lengths"
Shape = Literal["fixed", "lognormal", "quantiles", "file"]


# --- the normal distribution, numpy only ------------------------------------------------------

_STANDARD = NormalDist()


def norm_cdf(x: float) -> float:
    """Φ(x)."""
    return _STANDARD.cdf(x)


def norm_ppf(p: np.ndarray | float) -> np.ndarray:
    """Φ⁻¹(p) for p in (0, 1), element-wise (the standard library's Wichura AS241)."""
    p = np.asarray(p, dtype=np.float64)
    return np.array([_STANDARD.inv_cdf(x) for x in p.ravel().tolist()]).reshape(p.shape)


def truncated_lognormal_mean(mu: float, sigma: float, cap: float) -> float:
    """E[min(X, cap)] for X = exp(mu + sigma·Z)."""
    lc = math.log(cap)
    return (math.exp(mu + sigma * sigma / 2) * norm_cdf((lc - mu - sigma * sigma) / sigma)
            + cap * (1 - norm_cdf((lc - mu) / sigma)))


def solve_mu(mean: float, sigma: float, cap: float) -> float:
    """The mu whose lognormal, truncated at `cap`, has mean `mean` (< cap): bisection, since
    the truncated mean rises monotonically from 0 to cap with mu."""
    lo = math.log(mean) - sigma * sigma / 2  # the untruncated mean is `mean`: truncated ≤ mean
    hi = math.log(cap)
    while truncated_lognormal_mean(hi, sigma, cap) < mean:
        hi += sigma
    for _ in range(200):
        mid = (lo + hi) / 2
        if truncated_lognormal_mean(mid, sigma, cap) < mean:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


# --- the input: one small model, four forms ----------------------------------------------------

class ResponseLengthsInput(BaseModel):
    """`workload.response_lengths` as written. Give one form: `distribution` (+ `sigma`),
    quantiles (`p10`…`p99`, `clipped`), or `file` (+ `column`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distribution: Literal["lognormal", "fixed"] | None = Field(
        None, description="lognormal: truncated at max_response_len, the mass beyond it at the "
        "cap; fixed: every response at response_len")
    sigma: float | None = Field(
        None, gt=0, le=MAX_SIGMA, description="lognormal spread (log-space standard deviation), "
        "default 1.0: RollPacker's Qwen2.5-14B GRPO lengths fit sigma ≈ 1.0–1.1")
    p10: float | None = Field(None, ge=1, description="10th percentile, tokens")
    p25: float | None = Field(None, ge=1, description="25th percentile, tokens")
    p50: float | None = Field(None, ge=1, description="median, tokens")
    p75: float | None = Field(None, ge=1, description="75th percentile, tokens")
    p90: float | None = Field(None, ge=1, description="90th percentile, tokens")
    p95: float | None = Field(None, ge=1, description="95th percentile, tokens")
    p99: float | None = Field(None, ge=1, description="99th percentile, tokens")
    clipped: float | None = Field(
        None, ge=0, lt=1, description="with quantiles: fraction of responses that hit "
        "max_response_len (default 0)")
    file: str | None = Field(
        None, min_length=1, description="observed lengths: a text file (one integer per line, "
        "'#' comments), a CSV with a header row, or JSON (a list of numbers, a list of objects "
        "with `column`, or an object whose `column` key holds a list); relative to the "
        "scenario's folder")
    column: str | None = Field(None, min_length=1, description="the CSV column or JSON key "
                               "holding the lengths (needed when there is more than one)")

    @field_validator("p25", "p50", "p75", "p90", "p95", "p99")
    @classmethod
    def _increasing(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:
            return value
        for name, _ in reversed(PERCENTILES[:[n for n, _ in PERCENTILES].index(info.field_name)]):
            below = info.data.get(name)
            if below is not None:
                if value < below:
                    raise ValueError(f"{value:g} is below {name} {below:g}; quantiles must "
                                     "increase with the percentile")
                break
        return value

    @model_validator(mode="after")
    def _one_form(self) -> ResponseLengthsInput:
        given = {k for k, v in self if v is not None}
        quantiles = {n for n, _ in PERCENTILES} | {"clipped"}
        forms = [name for name, keys in (("file", {"file", "column"}),
                                         ("quantiles", quantiles),
                                         ("distribution", {"distribution", "sigma"}))
                 if given & keys]
        if len(forms) > 1:
            raise ValueError(f"mixes the {' and '.join(forms)} forms; give one: "
                             "{distribution, sigma}, quantiles {p50, p90, ..., clipped} or "
                             "{file, column}")
        if "column" in given and "file" not in given:
            raise ValueError("column names a column of a file; add file or remove column")
        if given & quantiles and not given & {n for n, _ in PERCENTILES}:
            raise ValueError("clipped needs at least one quantile (p10, p25, p50, p75, p90, "
                             "p95 or p99)")
        if self.distribution == "fixed" and self.sigma is not None:
            raise ValueError("sigma applies to the lognormal distribution; remove it or set "
                             "distribution: lognormal")
        return self

    @property
    def form(self) -> Literal["default", "lognormal", "fixed", "quantiles", "file"]:
        if self.file is not None:
            return "file"
        if any(getattr(self, n) is not None for n, _ in PERCENTILES):
            return "quantiles"
        if self.distribution is not None:
            return self.distribution
        return "lognormal" if self.sigma is not None else "default"


# --- the resolved distribution -----------------------------------------------------------------

class LengthDistribution(BaseModel):
    """A resolved response-length distribution: immutable and hashable (tuples only, no file
    handles), so samples can be cached on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: Shape
    cap: int = Field(gt=0, description="max_response_len: every length is clipped to it")
    mean: float | None = Field(None, description="fixed and lognormal: the mean they are built "
                               "to (response_len)")
    sigma: float | None = Field(None, description="lognormal spread")
    mu: float | None = Field(None, description="lognormal location solved for the truncated "
                             "mean; None when every response is at the cap")
    points: tuple[tuple[float, float], ...] = Field((), description="quantiles: (Φ⁻¹(p), ln L)")
    clipped: float = Field(0.0, description="quantiles: the fraction at the cap")
    values: tuple[int, ...] = Field((), description="file: the sorted observed lengths, clipped")
    file: str | None = Field(None, description="file: where the values came from")

    def __hash__(self) -> int:
        # cheap for a long file (a stride of the sorted values): the samples are cached on it
        stride = self.values[:: max(1, len(self.values) // 64)]
        return hash((self.shape, self.cap, self.mean, self.sigma, self.mu, self.points,
                     self.clipped, self.file, len(self.values), stride))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """Q(u) in tokens (float), clipped to [1, cap]."""
        u = np.asarray(u, dtype=np.float64)
        if self.shape == "fixed":
            q = np.full_like(u, float(self.mean or 1))
        elif self.shape == "lognormal":
            q = (np.full_like(u, float(self.cap)) if self.mu is None
                 else np.exp(self.mu + (self.sigma or DEFAULT_SIGMA) * norm_ppf(u)))
        elif self.shape == "quantiles":
            q = np.exp(_extrapolated_interp(norm_ppf(u), self.points))
            if self.clipped > 0:
                q = np.where(u >= 1 - self.clipped, float(self.cap), q)
        else:
            idx = np.minimum((u * len(self.values)).astype(np.int64), len(self.values) - 1)
            q = np.asarray(self.values, dtype=np.float64)[idx]
        return np.clip(q, 1.0, float(self.cap))

    def describe(self, n: int = 4096) -> dict[str, Any]:
        """Shape and statistics of the sample of `n` lengths the cost model sees (its order
        does not matter here: no shuffle, so `rlplan validate` loads no numpy.random)."""
        s = np.sort(quantile_lengths(self, n))

        def at(q: float) -> int:
            return int(s[min(len(s) - 1, int(q * len(s)))])

        out: dict[str, Any] = {"shape": self.shape}
        if self.shape == "lognormal":
            out["sigma"] = self.sigma
        if self.shape == "file":
            out["file"] = self.file
        return out | {"mean": round(float(s.mean()), 1), "p50": at(0.5), "p90": at(0.9),
                      "p99": at(0.99), "max": int(s[-1]), "cap": self.cap,
                      "clipped_fraction": round(float(np.mean(s >= self.cap)), 6)}


def _extrapolated_interp(z: np.ndarray, points: tuple[tuple[float, float], ...]) -> np.ndarray:
    """Piecewise linear through `points`, continued with the outermost segments' slopes."""
    zs = np.array([p[0] for p in points])
    ys = np.array([p[1] for p in points])
    if len(points) == 1:
        return ys[0] + DEFAULT_SIGMA * (z - zs[0])
    y = np.interp(z, zs, ys)
    lo_slope = (ys[1] - ys[0]) / (zs[1] - zs[0])
    hi_slope = (ys[-1] - ys[-2]) / (zs[-1] - zs[-2])
    y = np.where(z < zs[0], ys[0] + lo_slope * (z - zs[0]), y)
    return np.where(z > zs[-1], ys[-1] + hi_slope * (z - zs[-1]), y)


@functools.lru_cache(maxsize=64)
def quantile_lengths(dist: LengthDistribution, n: int) -> np.ndarray:
    """The n response lengths L_i = clip(round(Q((i + 0.5)/n)), 1, cap) in the order of i
    (int64, read-only): `sample_lengths` before its shuffle, enough for statistics. Cached: copy
    before modifying."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    u = (np.arange(n, dtype=np.float64) + 0.5) / n
    lengths = np.clip(np.rint(dist.quantile(u)), 1, dist.cap).astype(np.int64)
    lengths.setflags(write=False)
    return lengths


@functools.lru_cache(maxsize=64)
def sample_lengths(dist: LengthDistribution, n: int) -> np.ndarray:
    """n response lengths (int64, read-only), the same for the same input: `quantile_lengths`
    in a fixed-seed permutation, so a contiguous chunk (a replica's prompts) is a fair sample.
    Cached: copy before modifying."""
    out = quantile_lengths(dist, n)[np.random.default_rng(0).permutation(n)]
    out.setflags(write=False)
    return out


# --- reading observed lengths ------------------------------------------------------------------

def _bad(field: str, problem: str) -> InputError:
    return InputError(f"field '{FIELD}.{field}': {problem}")


def _length(raw: Any, where: str) -> int:
    """A positive integer-valued number (12 or 12.0; text as read from a text or CSV file), or
    an error naming where it is."""
    value = raw
    if isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    ok = (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
          and value >= 1 and float(value).is_integer())
    if not ok:
        raise _bad("file", f"{where}: {raw!r} is not a positive whole number of tokens; "
                   "every value must be a response length such as 512")
    return int(value)


def _csv_values(text: str, path: Path, column: str | None) -> list[int]:
    rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if not rows:
        raise _bad("file", f"{path} holds no rows; expected a header row and one row per "
                   "response")
    header = [c.strip() for c in rows[0]]
    if column is None:
        if len(header) != 1:
            raise _bad("column", f"{path} has {len(header)} columns ({', '.join(header)}); "
                       "name the one holding the lengths")
        column = header[0]
    if column not in header:
        raise _bad("column", f"'{column}' is not a column of {path} (columns: "
                   f"{', '.join(header)}); name one of them")
    i = header.index(column)
    return [_length(r[i], f"{path} row {k + 1}") for k, r in enumerate(rows[1:], start=1)
            if i < len(r) and r[i].strip()]


def _json_values(path: Path, column: str | None) -> list[int]:
    data = read_json(path)
    if isinstance(data, dict):
        if column is None:
            raise _bad("column", f"{path} is a JSON object; name the key holding the list of "
                       f"lengths (keys: {', '.join(map(str, list(data)[:8]))})")
        if column not in data:
            raise _bad("column", f"'{column}' is not a key of {path} (keys: "
                       f"{', '.join(map(str, list(data)[:8]))}); name one of them")
        data = data[column]
        column = None
    if not isinstance(data, list):
        raise _bad("file", f"{path}: expected a list of lengths, got a {type(data).__name__}")
    if data and all(isinstance(x, dict) for x in data):
        if column is None:
            raise _bad("column", f"{path} holds objects; name the key holding the length")
        missing = next((k for k, x in enumerate(data) if column not in x), None)
        if missing is not None:
            raise _bad("column", f"'{column}' is missing from item {missing} of {path}; name "
                       "a key every item has")
        data = [x[column] for x in data]
    elif column is not None:
        raise _bad("column", f"{path} is a plain list of lengths; remove column")
    return [_length(x, f"{path} item {k}") for k, x in enumerate(data)]


def read_lengths(file: str, column: str | None) -> list[int]:
    """The observed lengths in a text, CSV (by suffix) or JSON file."""
    path = Path(file)
    try:
        if path.suffix.lower() == ".json":
            values = _json_values(path, column)
        else:
            text = read_text(path, "lengths")
            if path.suffix.lower() == ".csv":
                values = _csv_values(text, path, column)
            else:
                if column is not None:
                    raise _bad("column", f"{path} is a text file of lengths, one per line; "
                               "remove column (it applies to CSV and JSON)")
                values = [_length(line.strip(), f"{path} line {k}")
                          for k, line in enumerate(text.splitlines(), start=1)
                          if line.strip() and not line.lstrip().startswith("#")]
    except InputError as exc:
        msg = str(exc)
        raise (exc if msg.startswith("field '") else _bad("file", msg)) from None
    if not values:
        raise _bad("file", f"{path} holds no lengths; give at least one response length")
    return values


# --- resolution --------------------------------------------------------------------------------

def resolve_lengths(spec: ResponseLengthsInput | None, response_len: int | None,
                    max_response_len: int | None, n: int
                    ) -> tuple[LengthDistribution, int, int, list[str]]:
    """The distribution, the mean response length, the cap, and notes on what was decided.

    `n` is the step's sequence count: a quantile or file distribution's mean is computed on the
    sample of that size, so the lengths the cost model sees average to response_len.
    """
    if n > lim.MAX_SEQUENCES_PER_STEP:  # one length per sequence is kept: bound the array
        raise InputError(f"field 'workload.prompts_per_step': {n:,} sequences per step "
                         f"(prompts × samples per prompt) is above the limit of "
                         f"{lim.MAX_SEQUENCES_PER_STEP:,}; use fewer prompts or samples")
    form = spec.form if spec is not None else "default"
    notes: list[str] = []
    if form in ("default", "lognormal", "fixed"):
        if response_len is None:
            raise InputError("field 'workload.response_len' is missing; add it (--response-len)"
                             ", or describe response_lengths by quantiles or a file")
        cap = max_response_len or response_len
        if form == "fixed" or (form == "default" and cap == response_len):
            return (LengthDistribution(shape="fixed", cap=cap, mean=response_len),
                    response_len, cap, notes)
        sigma = (spec.sigma if spec is not None else None) or DEFAULT_SIGMA
        mu = None if cap == response_len else solve_mu(response_len, sigma, cap)
        return (LengthDistribution(shape="lognormal", cap=cap, mean=response_len, sigma=sigma,
                                   mu=mu), response_len, cap, notes)

    assert spec is not None
    if form == "quantiles":
        if max_response_len is None:
            raise InputError("field 'workload.max_response_len' is missing; quantiles need the "
                             "cap, the longest response the rollout allows (--max-response-len)")
        cap = max_response_len
        given = [(name, p, v) for name, p in PERCENTILES if (v := getattr(spec, name)) is not None]
        clipped = spec.clipped or 0.0
        for name, p, v in given:
            if v > cap:
                raise _bad(name, f"{v:g} is above max_response_len {cap}; lengths are clipped "
                           "at the cap: lower it or raise max_response_len")
            if clipped and p >= 1 - clipped and v < cap:
                notes.append(f"{FIELD}.{name} {v:g} falls in the clipped {clipped:.1%} (at the "
                             f"cap {cap}); the cap is used there")
        z = norm_ppf(np.array([p for _, p, _ in given]))
        points = tuple((float(zi), math.log(v)) for zi, (_, _, v) in zip(z, given, strict=True))
        dist = LengthDistribution(shape="quantiles", cap=cap, points=points, clipped=clipped)
    else:
        values = read_lengths(spec.file or "", spec.column)
        cap = max_response_len or max(values)
        if max_response_len is None:
            notes.append(f"workload.max_response_len not given: the longest length in "
                         f"{spec.file}, {cap:,}")
        above = sum(v > cap for v in values)
        if above:
            notes.append(f"{FIELD}.file: {above / len(values):.1%} of the {len(values):,} "
                         f"lengths exceed max_response_len {cap:,}; clipped to it")
        dist = LengthDistribution(shape="file", cap=cap, file=spec.file,
                                  values=tuple(sorted(min(v, cap) for v in values)))

    mean = float(quantile_lengths(dist, n).mean())
    if response_len is None:
        response_len = max(1, round(mean))
        notes.append(f"workload.response_len not given: the lengths' mean, {response_len:,}")
    elif abs(response_len - mean) > MEAN_TOLERANCE * mean:
        raise InputError(f"field 'workload.response_len': {response_len:,} differs from the mean "
                         f"of response_lengths ({mean:,.0f}) by more than "
                         f"{MEAN_TOLERANCE:.0%}; drop response_len or make them agree")
    if response_len > cap:
        raise InputError(f"field 'workload.max_response_len': {cap:,} is below response_len "
                         f"{response_len:,}; the tail cannot be shorter than the mean")
    return dist, response_len, cap, notes

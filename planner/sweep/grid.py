"""Capacity grids: sizes over several GPU types, the cost–time frontier, the target's answer.

A grid is every (profile, size) point: `--gpu h100-sxm,b200 --gpus 8..64` searches each size on
each profile, each profile priced at its own figure (a `--price`, or a price in the scenario,
applies to every profile alike). Each profile keeps its own table (`planner.sweep`: scaling,
knee, notes); the grid adds two answers over all points:

- The cost–time frontier: the feasible points that no other point beats on both cost per step
  and step time (a point is beaten when another is no worse on both and better on one). It
  needs prices: feasible points without one are listed apart.
- The target (`--target-tokens-per-s`, `--target-step-s`, or both): the cheapest point meeting
  it by cost per step when every point meeting it has a price, else the fewest GPUs (ties:
  the faster, then the earlier profile). Every point of one scenario processes the same tokens
  per step, so the cheapest per step is also the cheapest per token.

A pool grid (`planner.sweep.pools`) is one table of the pools' size combinations instead of one
per profile; the frontier and the target are the same functions over its rows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from planner.errors import InputError
from planner.plan import SCHEMA_VERSION
from planner.search.deadline import Deadline
from planner.specs import bounds as lim
from planner.specs.hardware import gpu_count
from planner.specs.scenario import Scenario
from planner.sweep import Row, Sweep, summarize
from planner.sweep.run import OnDone, solve_points

GPU_FLAG = "--gpu"
POINT_KEYS = ("gpu", "gpus", "status", "iteration_time_s", "tokens_per_s", "cost_per_step_usd",
              "cost_per_million_tokens_usd")


def parse_profiles(spec: str) -> list[tuple[str, float | None]]:
    """The profiles a `--gpu a,b:PRICE,c` spec names, in the order given, each with the price
    given after its ':' (USD per GPU-hour; None: the scenario's or the profile's)."""
    out: list[tuple[str, float | None]] = []
    for part in spec.split(","):
        name, colon, price = (s.strip() for s in part.partition(":"))
        if not name:
            raise InputError(f"{GPU_FLAG}: '{spec}' has an empty profile name; give profiles "
                             "separated by commas, e.g. h100-sxm,h200-sxm,b200 (rlplan gpus "
                             "lists them), each optionally with its price: h100-sxm:3.99")
        out.append((name, _price(name, price) if colon else None))
    names = [name for name, _ in out]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"{GPU_FLAG}: {', '.join(twice)} given twice; name each profile once")
    return out


def _price(name: str, text: str) -> float:
    try:
        price = float(text)
    except ValueError:
        price = math.nan
    if not 0 < price <= lim.MAX_PRICE_USD_PER_GPU_HOUR:
        raise InputError(f"{GPU_FLAG} {name}:{text}: the price after ':' is USD per GPU-hour, "
                         f"a number above 0 (at most {lim.MAX_PRICE_USD_PER_GPU_HOUR:g}), e.g. "
                         f"{name}:3.99")
    return price


def usd(amount: float) -> str:
    """'$12.34', or four significant figures below a dollar (a small scenario's step)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4g}"


def label(r: Row) -> str:
    """'16 GPUs of h100-sxm', or a pool grid's point 'train 16 + rollout 32'."""
    if r.pools is not None:
        return pools_label(r.pools)
    return gpu_count(r.gpus) + (f" of {r.gpu}" if r.gpu else "")


def pools_label(sizes: dict[str, int]) -> str:
    """'train 16 + rollout 0': each pool's GPUs at a point."""
    return " + ".join(f"{name} {gpus}" for name, gpus in sizes.items())


# --- the frontier -------------------------------------------------------------------------------


def beats(a: Row, b: Row) -> bool:
    """`a` is no worse than `b` on cost per step and step time, and better on one."""
    ca, cb = a.cost_per_step_usd, b.cost_per_step_usd
    ta, tb = a.iteration_time_s, b.iteration_time_s
    return ca <= cb and ta <= tb and (ca < cb or ta < tb)


def frontier(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """The priced feasible points no other point beats, cheapest first; and the feasible points
    without a price, which cannot be placed."""
    ok = [r for r in rows if r.feasible]
    priced = [r for r in ok if r.cost_per_step_usd is not None]
    best = [r for r in priced if not any(beats(q, r) for q in priced)]
    return (sorted(best, key=lambda r: (r.cost_per_step_usd, r.iteration_time_s)),
            [r for r in ok if r.cost_per_step_usd is None])


# --- the target ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    tokens_per_s: float | None
    step_s: float | None
    by: str  # "cost": the cheapest meeting it; "gpus": the fewest GPUs (a price is missing)
    row: Row | None
    message: str

    def to_json(self) -> dict:
        doc = {"tokens_per_s": self.tokens_per_s, "step_s": self.step_s, "by": self.by,
               "gpu": self.row.gpu if self.row else None,
               "gpus": self.row.gpus if self.row else None, "message": self.message}
        if self.row is not None and self.row.pools is not None:
            doc["pools"] = self.row.pools
        return doc


def meets(r: Row, tokens_per_s: float | None, step_s: float | None) -> bool:
    return r.feasible and (tokens_per_s is None or r.tokens_per_s >= tokens_per_s) and (
        step_s is None or r.iteration_time_s <= step_s)


def pick_target(rows: list[Row], tokens_per_s: float | None, step_s: float | None) -> Target:
    """The point answering the target, and a sentence saying so (module docstring)."""
    want = " and ".join(
        ([f"{tokens_per_s:,.0f} tokens/s"] if tokens_per_s is not None else [])
        + ([f"a step of at most {step_s:g} s"] if step_s is not None else []))
    order = {r.gpu: k for k, r in reversed(list(enumerate(rows)))}  # first index of a profile
    ok = [r for r in rows if r.feasible]
    hits = [r for r in ok if meets(r, tokens_per_s, step_s)]
    if not hits:
        if not ok:
            return Target(tokens_per_s, step_s, "gpus", None,
                          f"no swept size has a plan, so none reaches {want}")
        best = min(ok, key=lambda r: r.iteration_time_s)
        return Target(tokens_per_s, step_s, "gpus", None,
                      f"no swept size reaches {want}; the fastest is "
                      f"{best.iteration_time_s:.2f} s ({best.tokens_per_s:,.0f} tokens/s) on "
                      f"{label(best)} — sweep larger sizes")
    unpriced = [r for r in hits if r.cost_per_step_usd is None]
    if not unpriced:
        r = min(hits, key=lambda r: (r.cost_per_step_usd, r.gpus, r.iteration_time_s))
        return Target(tokens_per_s, step_s, "cost", r,
                      f"{label(r)} is the cheapest swept point reaching {want}: "
                      f"{usd(r.cost_per_step_usd)} per step, {r.iteration_time_s:.2f} s, "
                      f"{r.tokens_per_s:,.0f} tokens/s")
    r = min(hits, key=lambda r: (r.gpus, r.iteration_time_s, order[r.gpu]))
    return Target(tokens_per_s, step_s, "gpus", r,
                  f"{label(r)} are the fewest swept that reach {want} ({r.tokens_per_s:,.0f} "
                  f"tokens/s, {r.iteration_time_s:.2f} s); "
                  f"{without_price(len(unpriced), len(hits))}, so not the cheapest: pass --price")


def without_price(unpriced: int, reaching: int) -> str:
    """'the point reaching it has no price', 'none of the 3 points reaching it has a price',
    '1 of the 3 points reaching it has no price', '2 of the 3 ... have no price'."""
    if unpriced == reaching:
        return ("the point reaching it has no price" if reaching == 1 else
                f"none of the {reaching} points reaching it has a price")
    return (f"{unpriced} of the {reaching} points reaching it "
            f"{'has' if unpriced == 1 else 'have'} no price")


# --- the grid -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolAxis:
    """One pool of a pool grid: its profile, node, price and the sizes swept (a pool no
    `--pool` names keeps its scenario size, `swept` False)."""

    name: str
    gpu: str
    gpus_per_node: int
    sizes: list[int]
    swept: bool
    price: dict  # price_usd_per_gpu_hour and price_source, as a plan's `cost`


@dataclass(frozen=True)
class Grid:
    sweeps: list[Sweep]  # one per profile, in the order given (none in a pool grid)
    frontier: list[Row]
    unpriced: list[Row]  # feasible points without a price: not on the frontier
    target: Target | None = None
    pools: list[PoolAxis] | None = None  # a pool grid's pools, in the scenario's order
    points: list[Row] | None = None  # a pool grid's rows, in the order of its points

    @property
    def rows(self) -> list[Row]:
        if self.points is not None:
            return self.points
        return [r for s in self.sweeps for r in s.rows]

    def to_json(self) -> dict:
        answers = {
            "frontier": "feasible points no other point beats on both cost_per_step_usd "
                        "and iteration_time_s, cheapest first; unpriced points apart",
            "target": "cheapest meeting it by cost per step when every point meeting it "
                      "has a price (by: cost), else the fewest GPUs (by: gpus)"}
        doc: dict = {"schema_version": SCHEMA_VERSION, "rows": [asdict(r) for r in self.rows]}
        if self.pools is not None:
            doc["pools"] = [asdict(p) for p in self.pools]
            answers = {"cost": "every GPU of each pool at the point's size, at that pool's "
                               "price, idle ones included; none when a pool present has no "
                               "price", "pools": "each pool's GPUs at the point (0: absent)",
                       **answers}
        else:
            doc["profiles"] = [{k: v for k, v in s.to_json().items()
                                if k not in ("schema_version", "rows", "definitions")}
                               for s in self.sweeps]
            answers = {**self.sweeps[0].to_json()["definitions"], **answers}
        doc.update({
            "frontier": [point(r) for r in self.frontier],
            "unpriced": [point(r) for r in self.unpriced],
            "target": self.target.to_json() if self.target else None,
            "definitions": answers,
        })
        if len(self.sweeps) == 1:  # one profile: its answers at the top level too, as before
            one = doc["profiles"][0]
            doc.update({k: one[k] for k in ("gpus_per_node", "smallest_feasible_gpus",
                                            "knee_gpus", "cost")})
        return doc


def point(r: Row) -> dict:
    return {k: getattr(r, k) for k in POINT_KEYS} | ({"pools": r.pools} if r.pools else {})


def answers(rows: list[Row], tokens_per_s: float | None = None, step_s: float | None = None
            ) -> tuple[list[Row], list[Row], Target | None]:
    """The frontier, the unpriced feasible points and the target's answer over `rows`."""
    best, unpriced = frontier(rows)
    target = (pick_target(rows, tokens_per_s, step_s)
              if tokens_per_s is not None or step_s is not None else None)
    return best, unpriced, target


def grid_of(sweeps: list[Sweep], tokens_per_s: float | None = None,
            step_s: float | None = None) -> Grid:
    """The grid's answers from each profile's table."""
    return Grid(sweeps, *answers([r for s in sweeps for r in s.rows], tokens_per_s, step_s))


def run_grid(scenarios: list[Scenario], sizes: list[list[int]], deadline: Deadline,
             jobs: int | None = None, ray_address: str | None = None,
             tokens_per_s: float | None = None, step_s: float | None = None,
             on_done: OnDone | None = None) -> Grid:
    """Search every (profile, size) point — `scenarios[k]` is profile k's scenario, `sizes[k]`
    its sizes — by `deadline`, and tabulate the answers."""
    points = [(sc, gpus) for sc, its in zip(scenarios, sizes, strict=True) for gpus in its]
    answers = iter(solve_points(points, deadline, jobs, ray_address, on_done))
    sweeps = []
    for sc, its in zip(scenarios, sizes, strict=True):
        c = sc.cluster
        swept = summarize([(gpus, next(answers)) for gpus in its], c.gpus_per_node, c.price,
                          c.gpu.name)
        sweeps.append(replace(swept, price={"price_usd_per_gpu_hour": c.price,
                                            "price_source": c.price_source}))
    return grid_of(sweeps, tokens_per_s, step_s)

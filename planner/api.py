"""The Python API: `from planner import load_scenario, plan, evaluate, sweep`.

Each function takes the scenario as a path (a `str` or `os.PathLike`), a dict of the fields a
scenario file holds, or a `Scenario` from `load_scenario`, and the CLI's flags as keyword
arguments named as the CLI names its parameters (`--max-staleness 1` is `max_staleness=1`,
`--time-limit 60` is `time_limit=60`). Each returns the pydantic model the CLI prints as JSON
(`model_dump(mode="json")` is that JSON) and raises the one domain error, `RlplanError`
(`planner.errors`), with the CLI's message: `InputError` for bad input, `InfeasibleError` when
nothing fits, `OutOfTime` when nothing was found within the time limit.

Importing `planner` stays light: what a function needs (the cost model, the search, OR-Tools)
is imported when it is first called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from planner.errors import InputError

if TYPE_CHECKING:
    from planner.plan import Plan, PlanInput
    from planner.report.documents import SweepDocument
    from planner.specs.scenario import Scenario

    ScenarioSource: TypeAlias = str | os.PathLike | Mapping[str, Any] | Scenario
    PlanSource: TypeAlias = str | os.PathLike | Mapping[str, Any] | PlanInput

# the sweep sets these its own way (DESIGN.md: --gpus/--pool size the cluster; the target is
# the sweep's own option)
_SWEEP_SETS = ("nodes", "target_tokens_per_s")


def load_scenario(scenario: ScenarioSource, **flags: Any) -> Scenario:
    """The scenario validated and resolved (models, cluster, cross-checks), with `flags`
    (scenario overrides, e.g. `gpu="b200"`, `nodes=2`) applied over it: what `rlplan validate`
    checks. A `Scenario` given without flags is returned as it is."""
    return _scenario(scenario, flags, "load_scenario")


def plan(scenario: ScenarioSource, *, workers: int | None = None, framework: str | None = None,
         baseline: str | os.PathLike | None = None, **flags: Any) -> Plan:
    """The best plan under the cost model, proven where the time limit allows, with its
    explanation: `rlplan plan --json`. `workers`: CP-SAT workers (default: the cores, up to
    8); `framework`: search only what it runs ("verl", "openrlhf@0.9.5", …); `baseline`: a
    plan JSON or launch config to report the gain over. The time limit (`time_limit=`, else
    the scenario's) counts from the call."""
    from planner.cli.baseline import load_baseline, with_baseline
    from planner.search.deadline import Deadline
    from planner.search.solve import plan as search

    started = Deadline.start()
    if framework is not None:  # the scenario's `framework` field, as `--framework` sets it
        flags = {**flags, "framework": framework}
    sc = _scenario(scenario, flags, "plan")
    base = None
    if baseline is not None:  # its framework restricts the search unless the scenario names one
        sc, base = load_baseline(Path(baseline), sc, _source(scenario),
                                 _overrides(flags, "plan"))
    found = search(sc, workers=workers, deadline=started.within(sc.search.time_limit_s))
    return found if base is None else with_baseline(found, base, sc)


def evaluate(scenario: ScenarioSource, plan: PlanSource, **flags: Any) -> Plan:
    """A given plan priced without searching: `rlplan evaluate --json`. `plan`: a plan JSON's
    path, its dict (groups, layouts, inter_model; a full plan is accepted), or a `PlanInput` /
    `Plan`. Raises InfeasibleError when it does not fit in memory."""
    from planner.cli.evaluate import load_plan
    from planner.plan import PlanInput
    from planner.search.scope import evaluated_plan
    from planner.specs.files import validate_as

    sc = _scenario(scenario, flags, "evaluate")
    if isinstance(plan, PlanInput):
        given = plan
    elif isinstance(plan, Mapping):
        given = validate_as(PlanInput, dict(plan), "plan")
    elif isinstance(plan, str | os.PathLike):
        given = load_plan(Path(plan))
    else:
        raise InputError(f"plan: give a plan JSON's path, its dict or a PlanInput, not "
                         f"{type(plan).__name__}")
    return evaluated_plan(sc, given)


def sweep(scenario: ScenarioSource, gpus: str | int | Sequence[int] | None = None, *,
          pool: Sequence[str] | Mapping[str, str | Sequence[int]] | None = None,
          jobs: int | None = None, ray: str | None = None,
          target_tokens_per_s: float | None = None, target_step_s: float | None = None,
          **flags: Any) -> SweepDocument:
    """The best plan at every point: `rlplan sweep --json`. `gpus`: cluster sizes ("8..64",
    "8,16,32" or a list of ints), with `gpu="h100-sxm,b200"` to sweep several GPU types; or
    `pool`: a scenario with pools sized per point ({"rollout": "0..64"} or ["rollout:0..64"]).
    `jobs`: worker processes (spawned: a script calling this needs Python's `if __name__ ==
    "__main__":` guard, or `jobs=1`); `ray`: run the points on Ray ("auto", an address,
    "local"). The time limit bounds the whole sweep. Points without a plan are rows saying
    why (the CLI exits 3 when none has one; this returns them)."""
    from planner.cli.sweep import check_sweep, solve_sweep, sweep_document
    from planner.report.documents import SweepDocument
    from planner.search.deadline import Deadline

    started = Deadline.start()
    for name in _SWEEP_SETS:
        if flags.get(name) is not None:
            raise InputError(f"sweep(): {name} is not a flag of the sweep; the sweep sets the "
                             "cluster's size from gpus (or pool) and its target from "
                             "target_tokens_per_s / target_step_s")
    overrides = _overrides(flags, "sweep")
    spec = _sizes(gpus)
    pool_specs = _pool_specs(pool)
    check_sweep(spec, pool_specs, overrides)
    scenarios, grid, _ = solve_sweep(_source(scenario), overrides, spec, pool_specs, jobs, ray,
                                     target_tokens_per_s, target_step_s, started)
    return SweepDocument.model_validate(sweep_document(scenarios, grid))


def _scenario(scenario: ScenarioSource, flags: dict[str, Any], function: str) -> Scenario:
    """`load_scenario` for `function` (which errors name)."""
    from planner.specs.scenario import Scenario
    from planner.specs.scenario import load_scenario as load

    overrides = _overrides(flags, function)
    if isinstance(scenario, Scenario) and not overrides:
        return scenario
    return load(_source(scenario), overrides)


def _overrides(flags: dict[str, Any], function: str) -> dict[str, Any]:
    """Keyword flags → scenario field overrides (None: not given); an unknown name is an
    InputError listing the flags."""
    from planner.specs.scenario import SCENARIO_FLAGS

    unknown = sorted(set(flags) - set(SCENARIO_FLAGS))
    if unknown:
        raise InputError(f"{function}(): unknown flag {', '.join(map(repr, unknown))}; the "
                         f"scenario flags are {', '.join(SCENARIO_FLAGS)}")
    return {SCENARIO_FLAGS[name]: value for name, value in flags.items() if value is not None}


def _source(scenario: ScenarioSource) -> Path | Mapping[str, Any]:
    """What the scenario loader reads: a file, or a mapping of scenario fields (a `Scenario`
    gives the fields it was written with)."""
    from planner.specs.scenario import Scenario

    if isinstance(scenario, Scenario):
        if scenario.source_input is None:
            raise InputError("scenario: this Scenario keeps no fields as written; load it with "
                             "load_scenario() to apply flags or sweep it")
        return scenario.source_input.written()
    if isinstance(scenario, Mapping):
        return scenario
    if isinstance(scenario, str | os.PathLike):
        return Path(scenario)
    raise InputError(f"scenario: give a scenario file's path, a dict of its fields or a "
                     f"Scenario, not {type(scenario).__name__}")


def _sizes(gpus: str | int | Sequence[int] | None) -> str | None:
    """`gpus` as --gpus takes it."""
    if gpus is None or isinstance(gpus, str):
        return gpus
    if isinstance(gpus, int):
        return str(gpus)
    return ",".join(str(g) for g in gpus)


def _pool_specs(pool: Sequence[str] | Mapping[str, str | Sequence[int]] | None) -> list[str]:
    """`pool` as --pool takes it: NAME:SIZES, one per pool swept."""
    if pool is None:
        return []
    if isinstance(pool, Mapping):
        return [f"{name}:{_sizes(sizes)}" for name, sizes in pool.items()]
    if isinstance(pool, str):
        return [pool]
    return list(pool)

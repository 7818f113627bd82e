"""Export → import → evaluate gives the plan's own step time, peak memory and cost (issue 23):

- for the hand-made plans of test_frameworks.py's cases, each format that accepts them: the
  figures of the plan as the framework runs it (`Export.runs`, else the preset's rules' fixes),
  which the export states in its note when they differ from the plan's;
- for plans the search finds with `--framework X`: the plan's own figures, and the export
  has nothing to convert.

Exact, with one rounding: vLLM's `gpu_memory_utilization` is written rounded up to 1e-4 of the
GPU, and import reads it back as the KV cache vLLM allocates (`rollout_stage.vllm_kv_tokens`), so
the imported KV cache may be larger than the plan's by up to 1e-4 of the GPU's memory (8 MiB
on 80 GiB). Where the KV cache sets the peak, the peak may differ by as much; the step and
cost are exact in every case here (the extra tokens change no schedule).

verl, OpenRLHF and NeMo-RL exports hold the whole plan; Megatron-LM's hold the training
layouts only, so theirs are compared task by task; DeepSpeed's ds_config holds no model,
placement or workload, and rlplan has no importer for it (its config class checks it:
test_frameworks.py).
"""

from __future__ import annotations

import pytest

from planner.cost.iteration import task_memory, task_time
from planner.cost.memory import ROLE_HEADS
from planner.export import export
from planner.export.as_run import as_run, figures
from planner.export.keys import VERSIONS
from planner.importers import import_config
from planner.plan import PlanInput
from planner.search.solve import plan
from tests.export.plans import priced, scenario
from tests.export.test_frameworks import CASES

WHOLE = ("verl", "openrlhf", "nemo-rl")  # exports holding the whole plan
KV_ROUNDING = 1e-4  # of the GPU's memory: gpu_memory_utilization's last written digit


def _same(sc, back: PlanInput, want: PlanInput, where: str) -> None:
    got, expected = figures(sc, back), figures(sc, want)
    assert got.step_s == expected.step_s, where
    assert got.cost_usd == expected.cost_usd, where
    capacity = sc.cluster.gpu.memory_gib if not sc.multi_pool else max(
        p.cluster.gpu.memory_gib for p in sc.pools)
    assert 0 <= got.peak_gib - expected.peak_gib <= KV_ROUNDING * capacity + 1e-9, where


def _same_training(sc, back: PlanInput, want: PlanInput, where: str) -> None:
    """Megatron-LM's arguments hold the trained roles' layouts: each one's training priced
    alike (time and memory per GPU)."""
    for role, stages in want.layouts.items():
        if "training" not in stages:
            continue
        a, b = stages["training"], back.layouts[role]["training"]
        assert task_time(sc, role, "training", a, ROLE_HEADS[role])[0] == \
            task_time(sc, role, "training", b, ROLE_HEADS[role])[0], (where, role)
        assert float(task_memory(sc, role, "training", a, ROLE_HEADS[role]).total) == \
            float(task_memory(sc, role, "training", b, ROLE_HEADS[role]).total), (where, role)


def _round_trip(sc, data: dict, fmt: str, where: str) -> PlanInput | None:
    """Export, import, compare; the plan as the framework runs it (None: as planned)."""
    result = export(data, sc, fmt)
    own, ran = as_run(data, sc, f"{fmt}@{VERSIONS[fmt][0]}", result.runs)
    back = PlanInput.model_validate(import_config(result.text, sc).plan)
    (_same if fmt in WHOLE else _same_training)(sc, back, ran or own, where)
    said = [n for n in result.notes if n.startswith("as ")]
    if ran is not None and figures(sc, ran) != figures(sc, own):
        assert len(said) == 1, where  # the export says what running it as the framework costs
    else:
        assert not said, where
    return ran


EXPORTED = [(case, fmt) for case, make in CASES.items() for fmt in sorted(make()[2])
            if fmt != "deepspeed"]


@pytest.mark.parametrize("case, fmt", EXPORTED)
def test_every_exported_case_round_trips_as_the_framework_runs_it(case, fmt):
    sc, plan_, _ = CASES[case]()
    _round_trip(sc, priced(sc, plan_), fmt, f"{case} {fmt}")


SEARCHED = {
    "grpo": lambda **named: scenario(**named),
    "grpo-one-step-off": lambda **named: scenario(**{"search.max_staleness": 1,
                                                     "cluster.nodes": 2}, **named),
    "ppo": lambda **named: scenario("ppo", **{"models.critic": "qwen2.5-0.5b",
                                              "models.reward": "qwen2.5-0.5b",
                                              "cluster.nodes": 2}, **named),
    "dpo": lambda **named: scenario("dpo", **named),
}


# every framework with an importer × each scenario it runs (NeMo-RL runs no reward model,
# verl no DPO: their scenarios are refused, test_frameworks.py)
FOUND = [(case, fmt) for case in SEARCHED for fmt in ("verl", "openrlhf", "nemo-rl", "megatron")
         if (case, fmt) not in {("ppo", "nemo-rl"), ("dpo", "verl")}]


@pytest.mark.parametrize("case, fmt", FOUND)
def test_a_plan_found_for_a_framework_round_trips_to_its_own_figures(case, fmt):
    sc = SEARCHED[case](framework=fmt)
    found = plan(sc, time_limit_s=60, workers=1, explain=False).model_dump(mode="json")
    ran = _round_trip(sc, found, fmt, f"{case} {fmt}")
    if ran is not None:  # only settings the plan left to their defaults, written out
        assert figures(sc, ran) == figures(sc, PlanInput.model_validate(found))

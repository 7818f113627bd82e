"""`plan --framework X`: where the unrestricted optimum is a plan X's exporter refuses, the
restricted search finds one it accepts, and the framework's own code accepts the export."""

from __future__ import annotations

import json

import pytest

from planner.export import VERSIONS, ExportError, export
from planner.plan import PlanInput
from planner.search.solve import plan
from tests.export import frameworks as fw
from tests.export.plans import scenario


def _ppo_off_policy(**named):  # unrestricted: fusion, overlapped sync, critic off the actor's
    # group; `named`: framework=NAME, as --framework NAME gives it
    return scenario("ppo", **{"models.reward": "qwen2.5-0.5b", "models.critic": "qwen2.5-0.5b",
                              "cluster.nodes": 3, "search.max_staleness": 1}, **named)


def _grpo_72b(**named):  # unrestricted: training pipeline-parallel (pp 2)
    return scenario(**{"models.actor": "qwen2.5-72b", "cluster.nodes": 2}, **named)


def _check_with_framework_code(fmt: str, text: str, data: dict) -> None:
    if fmt == "verl":
        cfg = fw.verl_compose(text)
        gpus = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
        if cfg.trainer.v1.trainer_mode == "separate_async":
            rollout = cfg.actor_rollout_ref.rollout
            gpus += rollout.nnodes * rollout.n_gpus_per_node
        rm = cfg.reward.reward_model
        if rm.enable and rm.enable_resource_pool:
            gpus += rm.nnodes * rm.n_gpus_per_node
        assert gpus == sum(g["gpus"] for g in data["groups"])
    elif fmt == "openrlhf":
        fw.openrlhf_parse(text, "train_ppo_ray")
    elif fmt == "deepspeed":
        layouts = PlanInput.model_validate(data).layouts
        for role, config in json.loads(text).items():
            fw.deepspeed_config(config, layouts[role]["training"].gpus)


@pytest.mark.parametrize(("make", "fmt"), [(_ppo_off_policy, "verl"),
                                           (_ppo_off_policy, "openrlhf"),
                                           (_grpo_72b, "deepspeed"),
                                           (_grpo_72b, "openrlhf")])
def test_framework_search_finds_a_plan_the_exporter_accepts(make, fmt):
    sc = make()
    free = plan(sc, time_limit_s=120, workers=1, explain=False).model_dump(mode="json")
    with pytest.raises(ExportError):
        export(free, sc, fmt)
    bound = plan(make(framework=fmt), time_limit_s=120, workers=1, explain=False)
    data = bound.model_dump(mode="json")
    assert data["framework"] == f"{fmt}@{VERSIONS[fmt][0]}"
    assert bound.iteration_time_s >= free["iteration_time_s"]  # a restriction cannot gain
    result = export(data, sc, fmt)
    _check_with_framework_code(fmt, result.text, data)


def test_megatron_search_keeps_the_distributed_optimizer_exact():
    sc = _grpo_72b()
    bound = plan(_grpo_72b(framework="megatron"), time_limit_s=120, workers=1, explain=False)
    train = bound.layouts["actor"]["training"]
    assert train.zero <= 1  # Megatron's distributed optimizer is ZeRO-1: no note, no refusal
    assert not any("zero" in n for n in export(bound.model_dump(mode="json"), sc,
                                               "megatron").notes)


def test_framework_without_the_algorithm_is_refused():
    from planner.errors import InputError
    with pytest.raises(InputError, match=r"field 'framework' \(verl@0.9.1\): verl 0.9.1 has no "
                                         r"dpo trainer .*choose another framework \(--framework\)"):
        scenario("dpo", framework="verl")

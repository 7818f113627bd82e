"""The search prunes candidates without counting host memory, and proves its optimum over
every candidate priced all the same (`planner/search/host.py`): where host memory may bind,
the option is priced again counting it."""

from __future__ import annotations

import pytest

from planner.search import cpsat
from planner.search import settle as settle_module
from planner.search.deadline import Deadline
from planner.search.host import host_may_bind
from planner.search.settle import settle
from planner.search.solve import plan
from planner.search.space import build_space
from planner.specs.scenario import load_scenario

# GRPO Qwen2.5-7B on 2 A100-40GB: the actor's optimizer and the reference must go to CPU memory
GRPO_7B_2GPU = {"algorithm": "grpo", "models.actor": "qwen2.5-7b", "models.reference": "actor",
                "workload.prompts_per_step": 64, "workload.samples_per_prompt": 8,
                "workload.prompt_len": 512, "workload.response_len": 1024,
                "workload.max_response_len": 2048, "cluster.gpu": "a100-sxm-40gb",
                "cluster.nodes": 1, "cluster.gpus_per_node": 2}


def with_host_memory(gib: float):
    """The scenario on a profile whose nodes have `gib` GiB of host memory (60 GiB per GPU at
    480: the profile's node has 8 GPUs)."""
    sc = load_scenario(None, GRPO_7B_2GPU)
    gpu = sc.cluster.gpu.model_copy(update={"host_memory_gib": gib})
    return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"gpu": gpu})})


def optimum(sc, host_front: bool) -> int:
    result = cpsat.solve(build_space(sc, host_front=host_front), Deadline.after(60), pin=False)
    assert result.status == "OPTIMAL"
    return result.objective


def test_the_optimum_is_over_every_candidate_where_host_memory_binds():
    # pruned without host memory, the space's optimum misses a plan that offloads less of the
    # actor's state and puts the reference to sleep: 0.9% faster
    sc = with_host_memory(480)
    blind, exact = optimum(sc, False), optimum(sc, True)
    assert exact < blind
    assert plan(sc, explain=False).search["objective_ms"] == exact


@pytest.mark.parametrize("gib", [400, 560, 960])
def test_plan_is_the_optimum_counting_host_memory(gib):
    sc = with_host_memory(gib)
    assert plan(sc, explain=False).search["objective_ms"] == optimum(sc, True)


def test_host_may_bind_only_where_a_plan_within_the_proof_holds_more_than_the_host():
    sc = with_host_memory(480)
    space = build_space(sc)
    result = cpsat.solve(space, Deadline.after(60), pin=False)
    assert host_may_bind(space, result)
    # the same space counting host memory is exact as it stands
    counted = build_space(sc, host_front=True)
    assert not host_may_bind(counted, cpsat.solve(counted, Deadline.after(60), pin=False))
    # a plan found short of its proof proves nothing to check
    assert not host_may_bind(space, cpsat.Result("FEASIBLE", result.choice, result.objective,
                                                 None, 0.0, 0))
    # with ample host memory the candidates within the optimum fit it together
    roomy = with_host_memory(4096)
    space = build_space(roomy)
    assert not host_may_bind(space, cpsat.solve(space, Deadline.after(60), pin=False))


def test_a_settled_partial_rollout_optimum_is_checked_again(monkeypatch):
    # the KV sizes settling prices make plans the search's check did not see: where host
    # memory may bind among them, the option is priced again counting it and settled again
    sc = load_scenario(None, {**GRPO_7B_2GPU, "models.actor": "qwen2.5-1.5b",
                              "cluster.gpus_per_node": 4, "search.max_staleness": 1})
    space = build_space(sc, staleness=1, partial=True)
    found = cpsat.solve(space, Deadline.after(60), pin=False)
    assert found.status == "OPTIMAL"
    checked = []
    monkeypatch.setattr(settle_module, "host_may_bind",
                        lambda sp, result: checked.append(sp.host_front) or not sp.host_front)
    settled, result = settle(space, found, Deadline.after(60), 1)
    assert checked == [False, True]
    assert settled.host_front and result.status == "OPTIMAL"

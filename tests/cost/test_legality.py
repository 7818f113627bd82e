"""One legality: `evaluate` refuses what the search would never choose, naming the field and
the fix — and the search's own plans pass the same check (`plan` re-prices through it)."""

from __future__ import annotations

import pytest

from planner.cost.iteration import evaluate
from planner.cost.legality import ep_problem, placement_of, tp_problem
from planner.errors import InputError
from planner.plan import PlanInput
from planner.search.solve import plan
from planner.specs.scenario import load_scenario

SMALL = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.samples_per_prompt": 2, "workload.prompt_len": 128,
         "workload.response_len": 256, "workload.max_response_len": 512,
         "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 4}
COLOCATED = {"groups": [{"name": "g0", "gpus": 4}],
             "layouts": {"actor": {"generation": {"group": "g0", "dp": 4},
                                   "training": {"group": "g0", "dp": 4, "zero": 3}},
                         "reference": {"assessment": {"group": "g0", "dp": 4}}},
             "inter_model": {"placement": "colocated"}}


def refused(sc, raw: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        evaluate(sc, PlanInput.model_validate(raw))


def with_(base: dict, **changes) -> dict:
    import copy

    out = copy.deepcopy(base)
    for path, value in changes.items():
        *keys, last = path.split(".")
        node = out
        for key in keys:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return out


def test_the_base_plan_is_legal():
    assert evaluate(load_scenario(None, SMALL), PlanInput.model_validate(COLOCATED))


def test_generation_tp_must_divide_the_heads():
    sc = load_scenario(None, SMALL)  # qwen2.5-0.5b: 14 heads, 2 KV heads
    refused(sc, with_(COLOCATED, **{"layouts.actor.generation": {"group": "g0", "dp": 1,
                                                                 "tp": 4}}),
            r"layouts\.actor\.generation: tp 4 does not divide the 14 attention heads")


def test_zero_past_the_optimizer_state_is_refused_in_a_training_pipeline():
    """Megatron's and DeepSpeed's pipelines shard at most the optimizer state (ZeRO-1): the
    search never offers ZeRO 2-3 with pp > 1, and `evaluate` refuses it, naming the fix."""
    sc = load_scenario(None, SMALL)  # qwen2.5-0.5b: 24 layers
    for zero in (2, 3):
        refused(sc, with_(COLOCATED, **{"layouts.actor.training": {
            "group": "g0", "dp": 2, "pp": 2, "zero": zero}}),
            rf"layouts\.actor\.training\.zero: zero {zero} with pp 2: .*; set zero to 0 or 1, "
            r"or pp to 1")
    assert evaluate(sc, PlanInput.model_validate(with_(COLOCATED, **{
        "layouts.actor.training": {"group": "g0", "dp": 2, "pp": 2, "zero": 1}})))


def test_a_rollout_with_context_parallelism_is_refused():
    """No rollout engine (vLLM, SGLang) splits a sequence over GPUs, nor any framework's
    rollout config: `evaluate` refuses cp > 1 in generation as the search never draws it."""
    sc = load_scenario(None, SMALL)
    refused(sc, with_(COLOCATED, **{"layouts.actor.generation": {"group": "g0", "dp": 2,
                                                                 "cp": 2}}),
            r"layouts\.actor\.generation\.cp: cp 2: .*; set cp 1 and dp 4$")


def test_experts_on_a_dense_model_are_refused():
    sc = load_scenario(None, SMALL)
    refused(sc, with_(COLOCATED, **{"layouts.actor.training": {
        "group": "g0", "dp": 4, "zero": 3, "ep": 2}}), r"training: .* is dense")
    refused(sc, with_(COLOCATED, **{"layouts.actor.training": {
        "group": "g0", "dp": 4, "zero": 3, "etp": 1}}), r"is dense: it has no experts")


def test_the_placement_label_must_match_the_groups():
    sc = load_scenario(None, SMALL)
    refused(sc, with_(COLOCATED, **{"inter_model.placement": "disaggregated"}),
            r"inter_model\.placement: 'disaggregated', but its 1 group make it colocated")
    two = with_(COLOCATED, groups=[{"name": "g0", "gpus": 2}, {"name": "g1", "gpus": 2}],
                **{"layouts.actor.generation": {"group": "g1", "dp": 2},
                   "layouts.actor.training": {"group": "g0", "dp": 2, "zero": 3},
                   "layouts.reference.assessment": {"group": "g0", "dp": 2}})
    refused(sc, two, r"'colocated', but its 2 groups make it partial; set placement: partial")
    assert evaluate(sc, PlanInput.model_validate(with_(two, **{"inter_model.placement":
                                                               "partial"})))


def test_a_group_lists_only_what_it_holds():
    sc = load_scenario(None, SMALL)
    refused(sc, with_(COLOCATED, groups=[{"name": "g0", "gpus": 4,
                                          "roles": ["actor", "reference", "critic"]}]),
            r"'g0' lists roles actor, reference, critic but holds actor, reference")
    refused(load_scenario(None, {**SMALL, "cluster.gpus_per_node": 8}),
            with_(COLOCATED, groups=[{"name": "g0", "gpus": 4}, {"name": "g1", "gpus": 4}]),
            r"'g1' holds no layout; remove it")


def test_the_predicates_the_search_draws_layouts_with():
    sc = load_scenario(None, {**SMALL, "models.actor": "qwen3-30b-a3b"})
    assert tp_problem(sc.actor, 4) is None and "does not divide" in tp_problem(sc.actor, 3)
    assert ep_problem(sc.actor, 8, None) is None and ep_problem(sc.actor, 3, None)
    assert placement_of({"g0": {"actor"}, "g1": {"reference"}}) == "disaggregated"
    assert placement_of({"g0": {"actor", "reference"}, "g1": {"actor"}}) == "partial"


def test_the_search_plans_pass_the_check():
    """`plan` re-prices its answer through `evaluate`, so its own plan passes `check_plan`."""
    sc = load_scenario(None, {**SMALL, "search.max_staleness": 1})
    found = plan(sc, explain=False)
    assert evaluate(sc, PlanInput.model_validate(found.model_dump(mode="json")))

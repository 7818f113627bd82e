"""`evaluate` says what puts a plan outside the space `rlplan plan` proves its optimum over
(`search.outside_search`, `planner.search.scope`): every plan it accepts either lies in that
space — a layout the search enumerates, or one no better in any number the search prices — or
is named, with why (issue 25: a proof over a subset of what `evaluate` accepts is no proof of
the plan)."""

from __future__ import annotations

from itertools import product

import pytest

from planner.errors import InfeasibleError, InputError
from planner.plan import PlanInput
from planner.search.scope import evaluated_plan
from planner.search.solve import plan
from planner.specs.scenario import load_scenario
from tests.plan_mutations import SCENARIOS, SLACK_S

GRPO = "grpo 1.5b 4×a100-40gb"


@pytest.fixture(scope="module")
def grpo():
    sc = load_scenario(None, SCENARIOS[GRPO])
    best = plan(sc, explain=False)
    return sc, best, PlanInput.model_validate(best.model_dump())


def outside(sc, given: PlanInput) -> list[str]:
    return evaluated_plan(sc, PlanInput.model_validate(given.model_dump())).search[
        "outside_search"]


def test_the_proven_optimum_lies_in_the_search(grpo):
    sc, best, given = grpo
    assert best.search["status"] == "OPTIMAL"
    assert outside(sc, given) == []


def test_every_memory_option_at_the_optimums_degrees_lies_in_the_search(grpo):
    """Each ZeRO stage, recomputation, micro-batch and offload `evaluate` accepts for the
    optimum's training and reference layouts is one the search prices or no better than one.
    Before the search offered the parameters' offload in training and a sharded reference
    asleep, 22 of 340 were not (`bench/search_scope.py`)."""
    sc, best, given = grpo
    accepted = 0
    for (role, stage), zero, ckpt, mb, off in product(
            [("actor", "training"), ("reference", "assessment")], range(4),
            ("none", "full"), (1, 4), ("none", "optimizer", "params", "both", "sleep")):
        changed = given.with_layout(role, stage, zero=zero, checkpointing=ckpt,
                                    micro_batch=mb, offload=off)
        try:
            priced = evaluated_plan(sc, PlanInput.model_validate(changed.model_dump()))
        except (InputError, InfeasibleError, ValueError):
            continue
        accepted += 1
        assert priced.search["outside_search"] == [], (role, stage, zero, ckpt, mb, off)
        assert priced.iteration_time_s >= best.iteration_time_s - SLACK_S
    assert accepted >= 40


def test_degrees_off_the_menus_that_a_shape_on_them_matches_lie_in_the_search(grpo):
    """cp 2 in chunks under `search.min_cp_chunk` is off the menus, but with micro-batches
    of 2 it is no better in time or memory than a shape the search prices: inside (named
    before the search compared a layout with every shape on its group, not those of its own
    degrees alone)."""
    sc, _, given = grpo
    train = given.layouts["actor"]["training"]
    assert (train.dp, train.cp, train.micro_batch) == (2, 1, 1)
    cp2 = given.with_layout("actor", "training", dp=1, cp=2, micro_batch=2, zero=1)
    assert outside(sc, cp2) == []
    # with cp 2 on the menus (its chunks allowed), its even micro-batches are not: the shape
    # with dp 2 and micro-batches of 1 does as well (`layouts._odd`)
    assert outside(load_scenario(None, {**SCENARIOS[GRPO], "search.min_cp_chunk": 1}),
                   cp2) == []


def test_degrees_caps_and_kv_sizes_off_the_menus_are_named(grpo):
    sc, _, given = grpo
    train = given.layouts["actor"]["training"]
    assert train.cp == 1 and train.dp % 2 == 0
    # cp 2 splits these 4,352-token sequences into chunks under `search.min_cp_chunk`; with
    # it lowered to the chunk, the search prices the layout
    cp2 = given.with_layout("actor", "training", dp=train.dp // 2, cp=2)
    assert outside(sc, cp2) == [
        "layouts.actor.training: cp 2 splits the 4,352-token sequences into chunks of 2,176 "
        "tokens, under search.min_cp_chunk (4,096); set it to 2,176 or less for the search to "
        "price such layouts"]
    assert outside(load_scenario(None, {**SCENARIOS[GRPO], "search.min_cp_chunk": 2176}),
                   cp2) == []
    gen = given.layouts["actor"]["generation"]
    assert given.inter_model.partial_rollout and gen.kv_cache_tokens is not None
    (line,) = outside(sc, given.with_kv_cache(gen.kv_cache_tokens - 1))
    assert line.startswith(f"layouts.actor.generation: partial rollouts with a KV cache of "
                           f"{gen.kv_cache_tokens - 1:,} tokens: the search prices ")
    (line,) = outside(sc, given.with_layout("actor", "generation", max_num_seqs=3))
    assert line.startswith("layouts.actor.generation: max_num_seqs 3 is not a cap the search "
                           "prices with these degrees")


def test_a_cap_no_replica_fills_is_the_default_without_partial_rollouts():
    sc = load_scenario(None, {**SCENARIOS[GRPO], "search.max_staleness": 0})
    given = PlanInput.model_validate(plan(sc, explain=False).model_dump())
    gen = given.layouts["actor"]["generation"]
    share = 16 * 4 // gen.dp  # sequences per replica
    assert outside(sc, given.with_layout("actor", "generation", max_num_seqs=share)) == []
    assert outside(sc, given.with_layout("actor", "generation", max_num_seqs=4 * share)) == []
    (line,) = outside(sc, given.with_layout("actor", "generation", max_num_seqs=share - 1))
    assert f"max_num_seqs {share - 1} is not a cap" in line


def test_more_groups_than_the_search_places_and_a_trained_models_own_forward_are_named():
    sc = load_scenario(None, {**SCENARIOS["ppo 1.5b+0.5b 4×a100-40gb"],
                              "search.max_staleness": 0})

    def lay(group):
        return {"group": group, "dp": 1, "checkpointing": "full"}

    given = PlanInput.model_validate({
        "groups": [{"name": f"g{k}", "gpus": 1} for k in range(4)],
        "layouts": {"actor": {"generation": lay("g0"), "training": lay("g1"),
                              "assessment": lay("g3")},
                    "critic": {"training": lay("g2")}, "reference": {"assessment": lay("g3")},
                    "reward": {"assessment": lay("g2")}},
        "inter_model": {"placement": "partial"}})
    assert outside(sc, given) == [
        "4 groups: the search places its 5 tasks on at most 3",
        "layouts.actor.assessment: the search runs a trained model's forward with its "
        "training layout"]



def test_an_inter_model_option_the_scenario_leaves_out_is_named(grpo):
    sc, _, given = grpo
    assert given.inter_model.staleness == 1 and given.inter_model.partial_rollout
    # a staleness past the one that changes any price (3 here) is priced as that one
    later = given.model_copy(update={"inter_model": given.inter_model.model_copy(
        update={"staleness": 9})})
    assert outside(load_scenario(None, {**SCENARIOS[GRPO], "search.max_staleness": 3}),
                   later) == []
    assert outside(sc, later) == [
        "inter_model: staleness 9, partial rollouts is not an option the search solves here "
        "(search.max_staleness 1, allow_shared_actor_critic false)"]
    on_policy = load_scenario(None, {**SCENARIOS[GRPO], "search.max_staleness": 0})
    whole = given.model_copy(update={"inter_model": given.inter_model.model_copy(
        update={"partial_rollout": False})})
    assert outside(on_policy, whole) == [
        "inter_model: staleness 1 is not an option the search solves here "
        "(search.max_staleness 0, allow_shared_actor_critic false)"]


def test_an_expert_tp_left_to_the_frameworks_default_is_the_layout_it_means():
    """`etp` left out is the default the framework runs (`plan.expert_tp`: vLLM splits each
    expert over TP without EP, Megatron trains at etp = tp): the same layout, inside."""
    sc = load_scenario(None, SCENARIOS["grpo qwen3-30b-a3b 8×h100"])
    given = PlanInput.model_validate(plan(sc, explain=False).model_dump())
    gen = given.layouts["actor"]["generation"]
    assert gen.ep == 1 and gen.etp == gen.tp > 1  # vLLM's default, written out
    assert outside(sc, given.with_layout("actor", "generation", etp=None)) == []
    train = given.layouts["actor"]["training"]
    assert train.etp == train.tp  # Megatron's default, written out
    assert outside(sc, given.with_layout("actor", "training", etp=None)) == []


def test_a_partial_rollouts_kv_cache_left_to_fit_where_it_sits_is_named_with_when_it_is_covered():
    """The size `evaluate` gives a partial rollout whose `kv_cache_tokens` is left out lies
    between the ladder's sizes here: the search prices it for the options it proves optimal
    only (`settle.py`), which the line says rather than calling the plan uncovered."""
    sc = load_scenario(None, {**SCENARIOS[GRPO], "models.actor": "qwen2.5-7b",
                              "workload.prompts_per_step": 128})
    given = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 4}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 2, "tp": 2},
                              "training": {"group": "g0", "dp": 4, "zero": 3,
                                           "checkpointing": "full", "offload": "optimizer"}},
                    "reference": {"assessment": {"group": "g0", "dp": 4, "zero": 3}}},
        "inter_model": {"placement": "colocated", "partial_rollout": True}})
    priced = evaluated_plan(sc, given)
    kv = priced.layouts["actor"]["generation"].kv_cache_tokens
    assert priced.search["outside_search"] == [
        f"layouts.actor.generation: partial rollouts with the KV cache that fits where the "
        f"rollout sits ({kv:,} tokens): covered where `rlplan plan` chose this plan's option "
        "(it prices that size for the options it proves optimal); otherwise it prices "
        "278,528, 557,056, 984,566 tokens for this layout"]


def test_a_pipeline_degree_not_a_power_of_two_is_named_with_its_fix():
    """Two nodes of 6 H100s: the optimum trains at pp 3, which powers of two alone
    (`search.every_pp` false) leave out: named there with the setting that searches it; with
    the default the same plan lies inside."""
    flags = {"algorithm": "grpo", "models.actor": "llama-3.1-70b", "models.reference": "actor",
             "workload.prompts_per_step": 24, "workload.samples_per_prompt": 4,
             "workload.prompt_len": 256, "workload.response_len": 1024,
             "workload.max_response_len": 4096, "cluster.gpu": "h100-sxm", "cluster.nodes": 2,
             "cluster.gpus_per_node": 6}
    every = load_scenario(None, flags)
    best = PlanInput.model_validate(plan(every, explain=False).model_dump())
    train = best.layouts["actor"]["training"]
    assert train.pp == 3
    assert outside(load_scenario(None, {**flags, "search.every_pp": False}), best) == [
        "layouts.actor.training: pp 3 is not a power of two, and search.every_pp is false: "
        "set search.every_pp true (--every-pp) to search every pp dividing a group's GPUs"]
    assert outside(every, best) == []

"""`plan --framework`: tasks a framework lays out after the actor's training (its preset's
`follows`: NeMo-RL's reference in the policy's workers, OpenRLHF's frozen models and critic on
the actor's DeepSpeed settings, verl's reference and critic on the trainers' backend) — CP-SAT
and brute force agree on the best plan that keeps them, and every plan found keeps them."""

from __future__ import annotations

import pytest

from planner.api import evaluate
from planner.frameworks import capabilities, parse_name
from planner.frameworks.capabilities import Follow
from planner.plan import Layout
from planner.search import brute, cpsat
from planner.search.choice import valid
from planner.search.space import build_space
from planner.specs.scenario import load_scenario

SMALL = {"models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.samples_per_prompt": 2, "workload.prompt_len": 128,
         "workload.response_len": 256, "workload.max_response_len": 512,
         "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 2}


def _space(framework: str, algorithm: str = "grpo", slots: int = 2, **flags):
    sc = load_scenario(None, {**SMALL, "algorithm": algorithm, "framework": framework,
                              **flags})
    return build_space(sc, slots=slots, caps=capabilities(sc.framework))


@pytest.mark.parametrize("framework, algorithm, flags", [
    ("nemo-rl", "grpo", {}),
    ("openrlhf", "grpo", {}),
    ("verl", "grpo", {}),
    # PPO: critic and reward model too, on one group (two make minutes of brute force)
    ("openrlhf", "ppo", {"models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b",
                         "workload.prompts_per_step": 4}),
])
def test_cpsat_equals_brute_force_and_followers_agree(framework, algorithm, flags):
    space = _space(framework, algorithm, 1 if algorithm == "ppo" else 2, **flags)
    assert space.caps.follows
    best, choice, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 0 and result.status == "OPTIMAL" and result.objective == best
    for ch in (choice, result.choice):
        assert valid(space, ch) and _agree(space, ch)


def test_verl_ppo_keeps_one_backend_and_the_reference_on_it():
    space = _space("verl", "ppo", 2, **{"models.critic": "qwen2.5-0.5b"})
    result = cpsat.solve(space, time_limit_s=30)
    assert result.status == "OPTIMAL" and _agree(space, result.choice)


def _agree(space, ch) -> bool:
    return all(f.ok(ch.candidate[f.task].layout, ch.candidate[f.trainer].layout)
               for f in space.caps.follows if f.task in ch.candidate)


def test_a_follower_that_disagrees_is_not_valid():
    space = _space("nemo-rl")
    best, choice, _ = brute.solve(space)
    assert best is not None
    others = [c for c in space.candidates[("reference.forward", 0, choice.sizes[0])]
              if not space.caps.follows[0].ok(c.layout,
                                              choice.candidate["actor.training"].layout)]
    assert others  # the space holds disagreeing candidates; a choice taking one is refused
    wrong = type(choice)(choice.sizes, choice.slot,
                         {**choice.candidate, "reference.forward": others[0]}, choice.pools)
    assert not valid(space, wrong)


def test_relations_and_how_a_follower_is_run():
    train = Layout(group="g0", dp=4, tp=2, zero=1, micro_batch=2)
    ref = Layout(group="g0", dp=8, zero=3, micro_batch=4)
    openrlhf = Follow("reference.forward", "actor.training", ("tp", "cp", "micro_batch"),
                      "sharded_with_trainer")
    assert not openrlhf.ok(ref, train)
    run = openrlhf.run(ref, train)  # DeepSpeed's eval config at the trainer's TP: ZeRO-0
    assert (run.dp, run.tp, run.zero, run.micro_batch) == (4, 2, 0, 2)
    assert openrlhf.ok(run, train)
    verl = Follow("reference.forward", "actor.training", (), "whole_under_megatron")
    assert verl.run(ref, train).zero == 0  # beside a Megatron trainer: whole weights
    fsdp = train.model_copy(update={"tp": 1, "dp": 8, "zero": 3})
    assert verl.ok(ref, fsdp) and verl.run(ref.model_copy(update={"zero": 0}), fsdp).zero == 3
    backend = Follow("critic.training", "actor.training", (), "same_backend")
    assert backend.run(fsdp, train) is None  # no one answer: the search keeps them agreeing
    # a group too small (or not a multiple) for the trainer's TP: no layout to run it as
    for gpus in (1, 3):
        small = Layout(group="g1", dp=gpus, zero=0, micro_batch=1)
        assert openrlhf.run(small, train) is None


def test_a_plan_whose_follower_cannot_follow_is_priced_not_crashed():
    # PPO keeping the reward model on two GPUs at PP 2 beside a TP-2 actor (the best plan of
    # this scenario once): OpenRLHF would lay the reward model out at the actor's TP, TP 2 ×
    # PP 2 on two GPUs (the plan's `frameworks` line once divided by that zero-GPU data
    # parallelism)
    sc = load_scenario(None, {
        "algorithm": "ppo", "models.actor": "qwen2.5-7b", "models.reference": "actor",
        "models.critic": "qwen2.5-1.5b", "models.reward": "qwen2.5-1.5b",
        "workload.prompts_per_step": 128, "workload.samples_per_prompt": 4,
        "workload.prompt_len": 512, "workload.response_len": 2048,
        "workload.max_response_len": 8192, "workload.mini_batches": 2,
        "cluster.gpu": "a100-sxm-40gb", "cluster.nodes": 1, "cluster.gpus_per_node": 4,
        "search.max_staleness": 1})
    given = {
        "groups": [{"name": "g0", "gpus": 2}, {"name": "g1", "gpus": 2}],
        "layouts": {
            "actor": {"generation": {"group": "g1", "tp": 2, "kv_cache_tokens": 546541},
                      "training": {"group": "g0", "tp": 2, "sp": True, "offload": "optimizer",
                                   "checkpointing": "selective"}},
            "critic": {"training": {"group": "g1", "cp": 2, "offload": "optimizer"}},
            "reference": {"assessment": {"group": "g1", "dp": 2, "zero": 3, "micro_batch": 2}},
            "reward": {"assessment": {"group": "g1", "pp": 2}}},
        "inter_model": {"placement": "partial", "staleness": 1}}
    result = evaluate(sc, given)
    reward = result.layouts["reward"]["assessment"]
    train = result.layouts["actor"]["training"]
    follow = next(f for f in capabilities(parse_name("openrlhf")).follows
                  if f.task == "reward.forward")
    assert not follow.ok(reward, train) and follow.run(reward, train) is None  # the case
    assert result.frameworks  # every release is said to run it or not

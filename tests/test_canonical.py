"""Ties off the critical path broken toward the layouts people run (`cpsat.Model.canonical`):
among the plans at a proven optimum, least model parallelism, then lowest ZeRO stage, and no
frozen model offloading where its resident layout does as well — the step time unchanged."""

from __future__ import annotations

from planner.search import cpsat, model
from planner.search.solve import plan
from planner.search.space import build_space
from tests.export.plans import scenario

USUAL = model.usual  # the preference, kept before a test replaces it


def test_a_reference_off_the_critical_path_gets_no_model_parallelism(monkeypatch):
    # PPO with four 7B models on 16 GPUs, one step off-policy: the reference, reward and
    # critic share a group with time to spare, where tp 2 or tp 1 cost the same step.
    sc = scenario("ppo", **{"models.actor": "qwen2.5-7b", "models.critic": "qwen2.5-7b",
                            "models.reward": "qwen2.5-7b", "cluster.nodes": 2,
                            "search.max_staleness": 1, "workload.prompts_per_step": 32})
    found = plan(sc, time_limit_s=300, workers=1, explain=False)
    assert found.search["status"] == "OPTIMAL"
    for role in ("reference", "reward"):
        lay = found.layouts[role]["assessment"]
        assert (lay.tp, lay.pp, lay.cp) == (1, 1, 1), (role, lay)
    im = found.inter_model
    space = build_space(sc, staleness=im.staleness, fusion=im.inter_stage_fusion,
                        swap=im.offload_during_generation, overlap_sync=im.overlap_weight_sync,
                        partial=im.partial_rollout)
    usual = cpsat.solve(space, 120)
    monkeypatch.setattr(model, "usual", lambda layout: 0)  # any plan at the optimum
    anyhow = cpsat.solve(space, 120)
    assert usual.status == anyhow.status == "OPTIMAL"
    assert usual.objective == anyhow.objective == found.search["objective_ms"]
    # the canonical plan is at least as usual as any other at the optimum
    chosen = sum(USUAL(c.layout) for c in usual.choice.candidate.values())
    other = sum(USUAL(c.layout) for c in anyhow.choice.candidate.values())
    assert chosen <= other




def test_a_frozen_model_that_need_not_offload_does_not():
    # PPO on one node: the reward model's asleep twin of the optimum's layout fits but scores
    # worse; the canonical plan's rule gives it back its resident layout
    import dataclasses

    from planner.search.choice import fits, resident_twins, score, valid
    from planner.search.space import price_layout

    sc = scenario("ppo", **{"models.actor": "qwen2.5-7b", "models.critic": "qwen2.5-7b",
                            "models.reward": "qwen2.5-7b", "search.max_staleness": 1})
    space = build_space(sc, staleness=1)
    found = cpsat.solve(space, 120)
    ch, name = found.choice, "reward.forward"
    assert resident_twins(space, ch) == ch  # nothing offloads: nothing to give back
    k, c = ch.slot[name], ch.candidate[name]
    # priced as the search prices it (pruned from the space: another layout beats it)
    task = next(t for t in space.tasks if t.name == name)
    asleep = price_layout(space, task, ch.pool(k), c.layout.model_copy(update={"offload": "sleep"}))
    trial = dataclasses.replace(ch, candidate={**ch.candidate, name: asleep})
    assert valid(space, trial) and fits(space, trial) and score(space, trial) > found.objective
    back = resident_twins(space, trial)
    assert back.candidate[name] is c and score(space, back) == found.objective

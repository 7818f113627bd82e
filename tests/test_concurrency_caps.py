"""Caps on running sequences (`max_num_seqs`): `evaluate` accepts any, and under partial rollouts
— the next step's prompts always queued — a cap above the replica's share fills too. The
search prices such caps (`kv.concurrency_caps`), only where the framework can set one, and a
framework that sizes its cluster in whole nodes gets groups that add up to whole nodes."""

from __future__ import annotations

import pytest

from planner.cost.iteration import evaluate
from planner.cost.rollout_stage import useful_kv_tokens
from planner.errors import InfeasibleError
from planner.frameworks.presets import capabilities
from planner.plan import Layout, PlanInput
from planner.search.choice import sizes_valid
from planner.search.solve import plan
from planner.search.space import build_space
from planner.specs.scenario import load_scenario

# the counter-example: GRPO Qwen2.5-1.5B, 16 prompts × 4, on 4 A100-40GB, one step off-policy.
# Before caps were searched, `plan` proved a partial-rollout optimum at 5.18 s running each
# replica's share of 64 sequences at once; the same plan at max_num_seqs 96 evaluated 4.45 s
SMALL = {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b", "models.reference": "actor",
         "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
         "workload.prompt_len": 256, "workload.response_len": 1024,
         "workload.max_response_len": 4096, "cluster.gpu": "a100-sxm-40gb", "cluster.nodes": 1,
         "cluster.gpus_per_node": 4, "search.max_staleness": 1}
ROUNDING_S = 5e-3  # each task priced in whole ms, rounded up (`tests/test_proof.py`)


def test_no_cap_evaluate_accepts_beats_a_partial_rollout_optimum():
    sc = load_scenario(None, SMALL)
    best = plan(sc, explain=False)
    assert best.inter_model.partial_rollout
    given = PlanInput.model_validate(best.model_dump(mode="json"))
    gen = given.layouts["actor"]["generation"]
    share = -(-len(sc.response_lengths) // gen.dp)
    checked = 0
    for cap in (share // 2, share, share * 3 // 2, share * 2, share * 3, share * 6):
        for kv in (gen.kv_cache_tokens, None):
            try:
                t = evaluate(sc, given.with_layout("actor", "generation", max_num_seqs=cap,
                                                   kv_cache_tokens=kv))
            except InfeasibleError:
                continue
            checked += 1
            assert t.iteration_time_s >= best.iteration_time_s - ROUNDING_S, (cap, kv)
    assert checked >= 6


def test_caps_are_searched_under_partial_rollouts_only():
    sc = load_scenario(None, SMALL)
    for partial in (False, True):
        space = build_space(sc, staleness=1, partial=partial)
        caps = {c.layout.max_num_seqs for (name, _, _), cands in space.candidates.items()
                if name == "actor.generation" for c in cands}
        assert (caps - {None} != set()) is partial


def test_a_cap_above_the_share_uses_more_kv_only_under_partial_rollouts():
    sc = load_scenario(None, SMALL)
    longest = 256 + int(sc.response_lengths.max())
    capped = Layout(group="g0", dp=1, tp=1, max_num_seqs=96)
    assert useful_kv_tokens(sc, capped) == 64 * longest  # every sequence of the share
    assert useful_kv_tokens(sc, capped, partial=True) == 96 * longest


@pytest.mark.parametrize("framework, sets_cap", [("nemo-rl", False), ("openrlhf", False),
                                                 ("verl", True)])
def test_the_search_sets_a_cap_only_where_the_framework_has_the_key(framework, sets_cap):
    sc = load_scenario(None, {**SMALL, "framework": framework})
    space = build_space(sc, staleness=1, partial=True, caps=capabilities(sc.framework))
    caps = {c.layout.max_num_seqs for (name, _, _), cands in space.candidates.items()
            if name == "actor.generation" for c in cands}
    assert (caps != {None}) is sets_cap


def test_a_whole_cluster_framework_gets_groups_adding_up_to_whole_nodes():
    """NeMo-RL trains the policy on the cluster's GPUs that dedicated generation leaves: an
    8-GPU trainer beside a 4-GPU generation on two nodes of 8 is a 12-GPU cluster it cannot
    size (`plan --framework nemo-rl` proposed one once caps were searched, and the export
    refused it). Both solvers apply the rule (`Space.total_ok`: `choice.sizes_valid` and
    `cpsat.add_slots`)."""
    nemo = capabilities("nemo-rl")
    assert [g for g in range(17) if nemo.total_ok(g, 8)] == [*range(9), 16]
    assert capabilities("verl").total_ok(12, 8)  # a resource pool per group
    sc = load_scenario(None, {**SMALL, "cluster.gpus_per_node": 8, "cluster.nodes": 2,
                              "framework": "nemo-rl"})
    space = build_space(sc, staleness=1, caps=capabilities(sc.framework))
    assert sizes_valid(space, (8, 8), (0, 0)) and sizes_valid(space, (4, 2), (0, 0))
    assert not sizes_valid(space, (8, 4), (0, 0))

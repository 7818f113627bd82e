"""Plans with a KV size written in (`planner/search/certify.py`): the optimum is proven over
them where the rollout model's bound reaches (a size below a priced one that preempts is at most
that size's recomputation faster), and the plan says where it does not (partial rollouts); and
the group sizes it is proven over."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from planner import api
from planner.cli.views import degrees_proof_line, kv_proof_line, size_proof_line
from planner.search import cpsat
from planner.search.certify import certify, kv_proof
from planner.search.deadline import Deadline
from planner.search.kv import kv_ladder, kv_levels, rollout_of
from planner.search.layouts import pp_offered, slot_sizes
from planner.search.option import Outcome, options
from planner.search.scope import size_proof
from planner.search.solve import plan
from planner.search.space import build_space
from planner.specs.scenario import load_scenario

# memory-tight enough that some priced KV sizes preempt: GRPO Qwen2.5-7B on one node of 8 H100s
FLAGS = {"algorithm": "grpo", "models.actor": "qwen2.5-7b", "models.reference": "actor",
         "workload.prompts_per_step": 128, "workload.samples_per_prompt": 4,
         "workload.prompt_len": 512, "workload.response_len": 1024,
         "workload.max_response_len": 2048, "workload.mini_batches": 2,
         "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 8}


def flagged(space):
    """The bound candidates below a priced size that preempts, with their pool index."""
    return [(p, c) for (_, p, _), cands in space.candidates.items() for c in cands
            if c.preempting_ms]


def test_without_partial_rollouts_the_optimum_holds_for_every_size_written_in():
    sc = load_scenario(None, {**FLAGS, "search.max_staleness": 0})
    best = plan(sc, explain=False)
    assert best.search["kv_sizes_proven"] == "every size"
    assert best.search["kv_sizes_unproven"] == []
    assert kv_proof_line(best) is None
    assert flagged(build_space(sc)), "no priced size preempts: the bound was not needed here"


def test_the_certificate_is_a_solve_under_the_optimum():
    space = build_space(load_scenario(None, {**FLAGS, "search.max_staleness": 0}))
    found = cpsat.solve(space, 60)
    assert certify(space, found.objective, found.objective, Deadline.after(60)) == "proven"
    # far enough above the optimum, plans with those bounds get under it
    assert certify(space, 2 * found.objective, found.objective, Deadline.after(60)) == "bound"


def test_a_size_written_into_a_gap_is_no_faster_than_its_bound():
    space = build_space(load_scenario(None, {**FLAGS, "search.max_staleness": 0}))
    checked = 0
    for p, c in flagged(space):
        ps = space.pools[p]
        low = int(c.layout.kv_cache_tokens)
        # the gap ends at the next size of the ladder: before it when priced, at it when not
        end = min(kv for kv in kv_ladder(space, ps, c.layout) if kv >= low)
        top = end - 1 if end in kv_levels(space, ps, c.layout) else end
        for kv in np.linspace(low, top, 4).astype(int).tolist():
            r = rollout_of(space, ps, c.layout.model_copy(update={"kv_cache_tokens": kv}))
            assert r.seconds * 1e3 >= c.time_ms["generation"] - 1
            checked += 1
    assert checked


def test_below_a_priced_size_that_keeps_every_sequence_running_no_size_is_faster():
    """What leaves a gap's bound unflagged (`Candidate.preempting_ms` 0): the priced size
    above it does not preempt, so no size written in below it is faster."""
    space = build_space(load_scenario(None, {**FLAGS, "search.max_staleness": 0}))
    checked = 0
    for (_, p, _), cands in space.candidates.items():
        ps = space.pools[p]
        for c in (c for c in cands if c.bound and not c.preempting_ms):
            low = int(c.layout.kv_cache_tokens)
            above = min(kv for kv in kv_levels(space, ps, c.layout) if kv > low)
            priced = rollout_of(space, ps, c.layout.model_copy(update={"kv_cache_tokens": above}))
            assert priced.preemptions == 0
            for kv in np.linspace(low, above - 1, 3).astype(int).tolist():
                r = rollout_of(space, ps, c.layout.model_copy(update={"kv_cache_tokens": kv}))
                assert r.seconds >= priced.seconds * (1 - 1e-12)
                checked += 1
    assert checked


def test_partial_rollout_options_are_said_to_be_unproven():
    best = plan(load_scenario(None, {**FLAGS, "search.max_staleness": 1}), explain=False)
    assert best.status == "optimal"
    assert best.search["kv_sizes_proven"] == "left out or priced"
    unsure = best.search["kv_sizes_unproven"]
    why = "no bound between the KV sizes and caps on running sequences priced"
    assert unsure and all("partial rollouts" in u["option"] and u["why"] == why
                          for u in unsure)
    line = kv_proof_line(best)
    assert "not every size a plan may write in" in line
    assert f"{len(unsure)} options (" in line and line.count("no bound between") == 1


def test_without_a_proof_or_the_time_to_check_it_the_plan_says_so():
    sc = load_scenario(None, {**FLAGS, "search.max_staleness": 0})
    opt = options(sc, 0, False)[0]
    space = build_space(sc, staleness=opt.staleness, fusion=opt.fusion, swap=opt.swap,
                        overlap_sync=opt.overlap_sync, partial=opt.partial)
    found = cpsat.solve(space, 60)
    outcomes = [Outcome(opt, found, space)]
    assert kv_proof(outcomes, found.objective, Deadline.after(60), proven=False) == {
        "kv_sizes_proven": None, "kv_sizes_unproven": []}
    late = kv_proof(outcomes, found.objective, Deadline.after(0), proven=True)
    assert late["kv_sizes_proven"] == "left out or priced"
    assert late["kv_sizes_unproven"] == [{"option": opt.describe(),
                                          "why": "not checked within the time limit"}]


def test_the_shortcut_over_an_options_optimum_answers_as_the_solve_does():
    """`certify` settles a bound by its option's optimum less the time it saves, without a
    model; with no optimum to go by (a least far below) every bound is solved. Both answer the
    same, here where a bound does get under the option's own optimum (GRPO Qwen2.5-14B,
    responses 512 / 4,096 tokens, on 4 A100-40GB, on-policy)."""
    sc = load_scenario(None, {**FLAGS, "models.actor": "qwen2.5-14b",
                              "workload.response_len": 512, "workload.max_response_len": 4096,
                              "cluster.gpu": "a100-sxm-40gb", "cluster.gpus_per_node": 4,
                              "search.max_staleness": 0})
    space = build_space(sc, staleness=0)
    own = cpsat.solve(space, 60).objective
    answers = {objective: (certify(space, objective, own, Deadline.after(60)),
                           certify(space, objective, -10**9, Deadline.after(60)))
               for objective in np.linspace(0.9 * own, own, 5).astype(int).tolist()}
    assert all(fast == slow for fast, slow in answers.values()), answers
    assert {fast for fast, _ in answers.values()} == {"proven", "bound"}, answers


def test_the_proof_names_the_group_sizes_it_covers():
    """Every size on up to 64 GPUs; past that the sizes searched (`layouts.slot_sizes`), which
    the plan lists and the view names."""
    base = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
            "workload.prompts_per_step": 64, "workload.samples_per_prompt": 4,
            "workload.prompt_len": 256, "workload.response_len": 512,
            "workload.max_response_len": 1024, "cluster.gpu": "h100-sxm",
            "cluster.gpus_per_node": 8}
    small = plan(load_scenario(None, {**base, "cluster.nodes": 8}), explain=False)
    assert small.search["group_sizes_proven"] == "every size"
    assert small.search["group_sizes_searched"] == [] and size_proof_line(small) is None
    large = plan(load_scenario(None, {**base, "cluster.nodes": 9}), explain=False)
    assert large.search["group_sizes_proven"] == "the sizes searched"
    assert large.search["group_sizes_searched"] == slot_sizes(72, 8)
    assert "(1–8, 16, 24, 32, 40, 48, 56, 64, 72), not every size" in size_proof_line(large)


def test_the_proof_names_the_degrees_it_covers():
    """pp in every divisor (up to 16; powers of two alone with `search.every_pp` false) and
    cp in chunks of `search.min_cp_chunk` tokens or more, which the plan says and the view
    names; "every cp" where no cp the GPUs allow splits the sequences finer."""
    flags = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
             "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
             "workload.prompt_len": 256, "workload.response_len": 512,
             "workload.max_response_len": 1024, "cluster.gpu": "h100-sxm",
             "cluster.nodes": 1, "cluster.gpus_per_node": 8}
    default = plan(load_scenario(None, flags), explain=False)
    assert default.search["cp_proven"] == "chunks of 4096 tokens or more"
    assert default.search["pp_proven"] == "divisors up to 16"
    assert degrees_proof_line(default) == (
        "proof: over cp in chunks of 4096 tokens or more (search.min_cp_chunk: 1 searches every "
        "cp), not every degree a layout may take")
    pow2 = plan(load_scenario(None, {**flags, "search.every_pp": False}), explain=False)
    assert pow2.search["pp_proven"] == "powers of two up to 16"
    assert degrees_proof_line(pow2) == (
        "proof: over pp in powers of two up to 16 (search.every_pp: true, --every-pp, searches "
        "every divisor); cp in chunks of 4096 tokens or more (search.min_cp_chunk: 1 searches "
        "every cp), not every degree a layout may take")
    every = plan(load_scenario(None, {**flags, "search.min_cp_chunk": 1280 // 8}),
                 explain=False)  # cp 8 in chunks of 160 tokens
    assert every.search["cp_proven"] == "every cp"
    assert every.search["pp_proven"] == "divisors up to 16" and degrees_proof_line(every) is None
    assert every.iteration_time_s <= default.iteration_time_s <= pow2.iteration_time_s


def test_every_pp_is_searched_on_up_to_128_gpus_unless_the_scenario_says():
    """Unset, `search.every_pp` means every pp on clusters of up to 128 GPUs (the shipped PPO
    example's 16 nodes) and powers of two on larger ones; either value holds everywhere."""
    flags = {"algorithm": "grpo", "models.actor": "qwen2.5-7b", "models.reference": "actor",
             "workload.prompts_per_step": 64, "workload.samples_per_prompt": 4,
             "workload.prompt_len": 256, "workload.response_len": 512,
             "cluster.gpu": "h100-sxm", "cluster.gpus_per_node": 8}
    for nodes, every in ((16, True), (17, False)):
        sc = load_scenario(None, {**flags, "cluster.nodes": nodes})
        assert (pp_offered(sc, 3), pp_offered(sc, 4)) == (every, True)
        for chosen in (True, False):
            sc = load_scenario(None, {**flags, "cluster.nodes": nodes,
                                      "search.every_pp": chosen})
            assert pp_offered(sc, 3) is chosen


def test_the_degree_settings_are_flags_and_bad_values_one_error_line(cli, write):
    sc = write("s.yaml", {
        "algorithm": "grpo", "models": {"actor": "qwen2.5-0.5b", "reference": "actor"},
        "workload": {"prompts_per_step": 16, "samples_per_prompt": 4, "prompt_len": 256,
                     "response_len": 512, "max_response_len": 1024},
        "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8}})
    done = cli("plan", str(sc), "--every-pp", "--min-cp-chunk", "1", "--json")
    assert done.exit_code == 0, done.stderr
    search = json.loads(done.stdout)["search"]
    assert (search["pp_proven"], search["cp_proven"]) == ("divisors up to 16", "every cp")
    pow2 = cli("plan", str(sc), "--pow2-pp", "--json")
    assert json.loads(pow2.stdout)["search"]["pp_proven"] == "powers of two up to 16"
    bad = cli("plan", str(sc), "--min-cp-chunk", "0")
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "search.min_cp_chunk" in bad.stderr and "--min-cp-chunk" in bad.stderr


def test_every_pp_finds_a_pipeline_of_three_stages_the_powers_of_two_leave_out():
    """GRPO with Llama-3.1-70B on two nodes of 6 H100s: the actor trains at pp 3 (tp 2, dp 2)
    0.9% faster than the optimum over powers of two (`search.every_pp` false: 91.63 s, tp 4
    dp 3)."""
    flags = {"algorithm": "grpo", "models.actor": "llama-3.1-70b", "models.reference": "actor",
             "workload.prompts_per_step": 24, "workload.samples_per_prompt": 4,
             "workload.prompt_len": 256, "workload.response_len": 1024,
             "workload.max_response_len": 4096, "cluster.gpu": "h100-sxm", "cluster.nodes": 2,
             "cluster.gpus_per_node": 6}
    pow2 = plan(load_scenario(None, {**flags, "search.every_pp": False}), explain=False)
    every = plan(load_scenario(None, flags), explain=False)
    assert every.layouts["actor"]["training"].pp == 3
    assert every.iteration_time_s < pow2.iteration_time_s
    assert all(lay.pp & (lay.pp - 1) == 0 for stages in pow2.layouts.values()
               for lay in stages.values())


def test_with_several_pools_the_sizes_searched_are_named_by_pool():
    sc = load_scenario(None, {
        "algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
        "workload.prompts_per_step": 64, "workload.samples_per_prompt": 4,
        "workload.prompt_len": 256, "workload.response_len": 512,
        "workload.max_response_len": 1024, "cluster.inter_pool_gbps": 100,
        "cluster.pools": [{"name": "train", "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
                          {"name": "rollout", "gpu": "h20", "nodes": 9, "gpus_per_node": 8}]})
    fields = size_proof(build_space(sc), proven=True)
    assert fields == {"group_sizes_proven": "the sizes searched", "group_sizes_searched": {
        "train": list(range(1, 9)), "rollout": slot_sizes(72, 8)},
        "cp_proven": "chunks of 4096 tokens or more", "pp_proven": "divisors up to 16"}
    assert size_proof(build_space(sc), proven=False)["group_sizes_proven"] is None
    line = size_proof_line(SimpleNamespace(status="optimal", search=fields))
    assert "(train: 1–8; rollout: 1–8, 16, 24, 32, 40, 48, 56, 64, 72), not every" in line


def test_an_evaluated_plan_says_which_groups_lie_outside_the_search():
    """`evaluate` prices a group of any size; one `rlplan plan` does not search (past 64 GPUs,
    a group spanning part of a node past the first) is named, as no proven optimum covers
    the plan."""
    scenario = {"algorithm": "grpo", "models": {"actor": "qwen2.5-0.5b", "reference": "actor"},
                "workload": {"prompts_per_step": 64, "samples_per_prompt": 4, "prompt_len": 256,
                             "response_len": 512, "max_response_len": 1024},
                "cluster": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 9}}

    def evaluated(rollout_gpus: int):
        def lay(group, dp):
            return {"group": group, "dp": dp, "tp": 1, "pp": 1}
        return api.evaluate(scenario, {
            "groups": [{"name": "g0", "gpus": 32, "roles": ["actor", "reference"]},
                       {"name": "g1", "gpus": rollout_gpus, "roles": ["actor"]}],
            "layouts": {"actor": {"generation": lay("g1", rollout_gpus),
                                  "training": lay("g0", 32)},
                        "reference": {"assessment": lay("g0", 32)}},
            "inter_model": {"placement": "disaggregated"}})

    outside = evaluated(12)
    assert outside.search["outside_search"] == [
        "group g1: 12 GPUs, not a size the search offers (1–8, 16, 24, 32, 40, 48, 56, 64, 72)"]
    assert size_proof_line(outside).startswith("outside the search: group g1: 12 GPUs")
    inside = evaluated(16)
    assert inside.search["outside_search"] == [] and size_proof_line(inside) is None

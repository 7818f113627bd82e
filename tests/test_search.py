"""The search: CP-SAT's optimum equals brute force over the same space; plans are legal,
deterministic, and re-price to what the solver scored; `rlplan plan` exit codes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cost.iteration import evaluate
from planner.errors import InfeasibleError
from planner.search import aside, brute, cpsat, solve
from planner.search.choice import fits, score, valid
from planner.search.layouts import slot_sizes
from planner.search.solve import plan, to_plan_input
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_cli import assert_bad_input

SMALL = {"models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.prompt_len": 128, "workload.response_len": 256,
         "workload.max_response_len": 512, "cluster.gpu": "h100-sxm", "cluster.nodes": 1}


def small(**flags):
    return load_scenario(None, {**SMALL, **flags})


scenarios = st.fixed_dictionaries({
    "algorithm": st.sampled_from(["grpo", "dapo", "ppo", "dpo", "sft"]),
    "workload.samples_per_prompt": st.sampled_from([2, 4]),
    "cluster.gpus_per_node": st.sampled_from([1, 2, 4]),
    "cluster.gpu": st.sampled_from(["h100-sxm", "a100-sxm-40gb", "l40s"]),
    "workload.mini_batches": st.sampled_from([1, 2]),
    "runtime.refit": st.sampled_from(["checkpoint_engine", "checkpoint_engine_relays",
                                      "sharded", "one_rank_broadcast"]),
})
# time, cost, or the fewest GPUs reaching a throughput (small scenarios give 1–2k tokens/s)
objectives = st.one_of(
    st.sampled_from([{"search.objective": "time"}, {"search.objective": "cost"}]),
    st.builds(lambda t: {"search.objective": "gpus", "search.target_tokens_per_s": t},
              st.sampled_from([300.0, 1000.0, 3000.0])))
inter = st.sampled_from([(0, False, False, False, False), (1, False, False, False, False),
                         (0, True, False, False, False), (0, False, True, False, False),
                         (1, False, True, False, False), (1, False, False, True, False),
                         (1, True, False, True, False), (0, True, False, False, True),
                         (1, False, False, True, True)])
# (staleness, fusion, swap, overlap sync, partial rollouts)


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=scenarios, option=inter, objective=objectives)
def test_cpsat_optimum_equals_brute_force(flags, option, objective):
    sc = small(**flags, **objective)
    staleness, fusion, swap, overlap_sync, partial = option
    space = build_space(sc, staleness=staleness, fusion=fusion, swap=swap,
                        overlap_sync=overlap_sync, partial=partial, slots=2)
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    if best is None:  # nothing valid fits (e.g. fusion needs two groups on a 1-GPU cluster)
        assert result.status == "INFEASIBLE" and result.choice is None
        return
    assert count > 0
    assert result.status == "OPTIMAL"
    assert result.objective == best
    assert valid(space, result.choice) and fits(space, result.choice)
    assert score(space, result.choice) == best


def test_slot_sizes_respect_nodes():
    assert slot_sizes(8, 8) == list(range(1, 9))  # every size on up to 64 GPUs
    assert slot_sizes(24, 8) == list(range(1, 25))
    assert slot_sizes(64, 8) == list(range(1, 65))
    assert slot_sizes(72, 8) == [*range(1, 9), *range(16, 73, 8)]  # every node count
    assert slot_sizes(256, 8) == [*range(1, 9), 16, 32, 64, 128, 192, 224, 240, 248, 256]


def test_a_group_of_six_on_a_node_of_eight_is_searched():
    """`evaluate` prices a group of any size. With powers of two only, the search proved
    2.66 s optimal here, where training on 6 GPUs (three divides the batch) and generating on
    2, one step off-policy, evaluates 2.40 s (bench/group_sizes.py)."""
    sc = load_scenario(None, {
        "algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
        "workload.prompts_per_step": 48, "workload.samples_per_prompt": 8,
        "workload.prompt_len": 512, "workload.response_len": 1024,
        "workload.max_response_len": 2048, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
        "cluster.gpus_per_node": 8, "search.max_staleness": 1})
    best = plan(sc, explain=False)
    assert sorted(g.gpus for g in best.groups) == [2, 6]
    assert best.iteration_time_s < 2.5


def test_a_group_spanning_part_of_a_node_is_searched():
    """On three nodes of 8, the former menu (every count within a node, whole nodes) proved
    4.51 s optimal with 16 + 8; training on 12 GPUs (a node and a half: three divides the
    batch) and two groups of 6 evaluates 4.23 s (bench/group_sizes.py --nodes 3). pp in powers
    of two: every pp finds the same plan in twice the time (14.9 against 7.1 s, one run)."""
    sc = load_scenario(None, {
        "algorithm": "ppo", "models.actor": "qwen2.5-1.5b", "models.reference": "actor",
        "models.critic": "qwen2.5-0.5b", "models.reward": "qwen2.5-0.5b",
        "workload.prompts_per_step": 96, "workload.samples_per_prompt": 8,
        "workload.prompt_len": 512, "workload.response_len": 1024,
        "workload.max_response_len": 2048, "cluster.gpu": "h100-sxm", "cluster.nodes": 3,
        "cluster.gpus_per_node": 8, "search.max_staleness": 1, "search.every_pp": False})
    best = plan(sc, explain=False)
    assert any(g.gpus % 8 for g in best.groups if g.gpus > 8)
    assert best.iteration_time_s < 4.4


def test_plan_reprices_to_the_solver_objective():
    sc = small(algorithm="grpo", **{"workload.samples_per_prompt": 4})
    space = build_space(sc)
    result = cpsat.solve(space, 30)
    ev = evaluate(sc, to_plan_input(space, result.choice, _option(0)))
    # candidates are priced in whole milliseconds, rounded up, one per task
    assert ev.iteration_time_s * 1000 == pytest.approx(result.objective, abs=len(space.tasks) + 2)


def _option(staleness):
    from planner.search.solve import Option

    return Option(staleness, False, False)


def test_overlapped_sync_plan_reprices_to_the_solver_objective():
    """The overlapped weight sync: generation on its own group, a shadow copy there, and the
    solver's score is what evaluate prices."""
    from planner.search.solve import Option

    sc = small(algorithm="grpo", **{"workload.samples_per_prompt": 4,
                                    "cluster.gpus_per_node": 4})
    space = build_space(sc, staleness=1, overlap_sync=True)
    result = cpsat.solve(space, 30)
    plan_in = to_plan_input(space, result.choice, Option(1, False, False, overlap_sync=True))
    assert plan_in.inter_model.overlap_weight_sync
    ev = evaluate(sc, plan_in)
    gen = next(t for t in ev.tasks if t.stage == "generation")
    assert gen.layout.group != plan_in.layouts["actor"]["training"].group
    assert gen.memory.shadow_weights == gen.memory.weights > 0
    assert ev.groups[gen.layout.group]["sync"] == 0
    assert ev.iteration_time_s * 1000 == pytest.approx(result.objective, abs=len(space.tasks) + 2)


ONE_PRICE = {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b",
             "workload.prompts_per_step": 32, "workload.samples_per_prompt": 8,
             "workload.prompt_len": 256, "workload.response_len": 1024,
             "workload.max_response_len": 4096, "cluster.gpu": "a100-sxm-40gb",
             "cluster.nodes": 1, "cluster.gpus_per_node": 4}


@pytest.fixture(scope="module", params=["bf16", "fp8"])
def one_price(request):
    """A memory-tight GRPO space (1.5B on 40 GB GPUs, 4K-token tail) and its optimum, with
    BF16 rollouts and with FP8 weights and KV cache."""
    from planner.search.solve import Option

    fp8 = {"runtime.rollout_weights": "fp8", "runtime.kv_cache_dtype": "fp8"}
    sc = load_scenario(None, {**ONE_PRICE, **(fp8 if request.param == "fp8" else {})})
    option = Option(0, True, False)  # with fusion, whose completion times the search uses
    space = build_space(sc, fusion=True, slots=2)
    return sc, space, option, cpsat.solve(space, 30).choice


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 10**6))
def test_the_search_prices_a_candidate_as_evaluate_does(one_price, pick):
    """Swap any generation candidate the search priced into its optimum: where the search says
    it fits, evaluate accepts the plan, and prices its generation as the search did (to the
    millisecond the search rounds up to) with the same memory (to the MiB)."""
    from dataclasses import replace

    sc, space, option, best = one_price
    gen = space.generation
    k = best.slot[gen.name]
    pool = [c for c in space.candidates[(gen.name, best.pool(k), best.sizes[k])]
            if not c.bound]  # a bound candidate stands for KV sizes, it is no layout
    cand = pool[pick % len(pool)]
    choice = replace(best, candidate={**best.candidate, gen.name: cand})
    if not fits(space, choice):
        return
    ev = evaluate(sc, to_plan_input(space, choice, option))
    task = next(t for t in ev.tasks if t.stage == "generation")
    assert task.layout.kv_cache_tokens == cand.layout.kv_cache_tokens
    assert math.ceil(round(task.seconds * 1000, 6)) == cand.time_ms["generation"]
    mib = (math.ceil(task.memory.persistent / 2**20), math.ceil(task.memory.transient / 2**20))
    assert mib == (cand.persistent_mib, cand.transient_mib["generation"])
    completions = tuple(math.ceil(round(t * 1000, 6)) for t, _ in ev.rollout.completions)
    assert completions == cand.done_ms


def test_a_dense_405b_policy_plans_on_80gb_gpus():
    """Engines run a model too large for one node's TP with PP or TP across nodes (vLLM does):
    a 405B policy's rollouts fit 80 GB GPUs instead of exiting 3."""
    sc = load_scenario(None, {"algorithm": "grpo", "models.actor": "llama-3.1-405b",
                              "models.reference": "none", "workload.prompts_per_step": 32,
                              "workload.samples_per_prompt": 4, "workload.prompt_len": 512,
                              "workload.response_len": 1024, "workload.max_response_len": 2048,
                              "cluster.gpu": "h100-sxm", "cluster.nodes": 4,
                              "search.time_limit_s": 60})
    result = plan(sc, explain=False)
    gen = result.layouts["actor"]["generation"]
    assert gen.tp * gen.pp > 8  # one node's TP cannot hold it
    assert result.stages["generation"].time_s > 0


def test_plan_is_deterministic_and_legal():
    sc = small(algorithm="ppo", **{"workload.samples_per_prompt": 2, "search.time_limit_s": 20})
    first, second = plan(sc), plan(sc, workers=2)  # the same plan whatever the worker count
    assert first.model_dump(exclude={"search"}) == second.model_dump(exclude={"search"})
    assert first.status == "optimal"
    for stages in first.layouts.values():
        for lay in stages.values():
            size = next(g.gpus for g in first.groups if g.name == lay.group)
            assert lay.dp * lay.tp * lay.pp * lay.cp == size
    assert {"bottleneck", "binding_constraint", "alternatives", "what_if"} <= set(
        first.explanation)
    what_if = " | ".join(first.explanation["what_if"])  # PPO, staleness 0, no shared critic
    assert "max_staleness 1" in what_if and "shared actor–critic" in what_if


def test_plan_cli_json(cli):
    result = cli("plan", "--algo", "grpo", "--actor", "qwen2.5-0.5b", "--prompts", "8",
                 "--samples", "4", "--prompt-len", "128", "--response-len", "256",
                 "--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "optimal" and out["search"]["solver"] == "cp-sat"
    assert out["iteration_time_s"] > 0 and out["groups"]
    search = out["search"]  # priced ≥ undominated ≥ left in the model by the bounds
    assert search["candidates"] >= search["candidates_after_pruning"] >= search[
        "candidates_in_model"] > 0


def test_plan_cli_infeasible_exits_3(cli):
    result = cli("plan", "--algo", "ppo", "--actor", "llama-3.1-405b", "--critic",
                 "llama-3.1-405b", "--prompts", "64", "--samples", "1", "--prompt-len", "512",
                 "--response-len", "512", "--gpu", "l40s", "--nodes", "1", "--gpus-per-node",
                 "2", "--json")
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    assert out["status"] == "infeasible" and "fits" in out["reason"]
    assert "Traceback" not in result.stderr


def test_plan_cli_bad_input(cli):
    assert_bad_input(cli("plan", "--algo", "grpo", "--actor", "nope-7b"),
                     "'workload' is missing; pass --prompts")
    assert_bad_input(cli("plan", "--algo", "grpo", "--actor", "nope-7b", "--prompts", "8",
                         "--samples", "2", "--prompt-len", "8", "--response-len", "8", "--gpu",
                         "h100-sxm", "--nodes", "1"), "models.actor", "unknown model")


@pytest.mark.usefixtures("fewer_group_sizes")
def test_ppo_with_swap_matches_brute_force():
    """A four-task PPO space (actor, critic, reference, generation) with state offloaded during
    co-located generation: CP-SAT's optimum is brute force's over ~5·10^5 choices."""
    sc = small(algorithm="ppo", **{"workload.samples_per_prompt": 2,
                                   "cluster.gpus_per_node": 2})
    space = build_space(sc, swap=True, slots=2)
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 100_000 and best is not None
    assert result.status == "OPTIMAL" and result.objective == best


def test_a_part_of_a_node_gets_its_gpus_share_of_host_memory():
    def space(per_node):
        return build_space(small(**{"algorithm": "grpo", "workload.samples_per_prompt": 2,
                                    "cluster.gpus_per_node": per_node}))

    # per GPU, not per node
    assert space(2).pools[0].host_budget_mib == space(8).pools[0].host_budget_mib > 0


def test_a_search_cut_short_without_a_plan_says_so(monkeypatch):
    def timed_out(space, time_limit_s, workers=1, seed=0, **_):
        return cpsat.Result("UNKNOWN", None, None, None, time_limit_s, 0)

    monkeypatch.setattr(solve.cpsat, "solve", timed_out)
    with pytest.raises(InfeasibleError, match="within the time limit.*raise --time-limit"):
        solve.plan(small(algorithm="grpo", **{"workload.samples_per_prompt": 2}))


TINY_PLAN = ("plan", "--algo", "grpo", "--actor", "qwen2.5-0.5b", "--prompts", "8", "--samples",
             "4", "--prompt-len", "128", "--response-len", "256", "--max-response-len", "512",
             "--gpu", "l40s", "--nodes", "1", "--gpus-per-node", "4", "--json")


def test_fewest_gpus_objective(cli):
    fastest = json.loads(cli(*TINY_PLAN).stdout)
    target = fastest["tokens_per_s"] * 0.95  # one GPU falls short of this
    result = cli(*TINY_PLAN, "--objective", "gpus", "--target-tokens-per-s", str(target))
    assert result.exit_code == 0, result.output
    fewest = json.loads(result.stdout)
    assert fewest["objective"] == "gpus" and fewest["tokens_per_s"] >= target
    used = sum(g["gpus"] for g in fewest["groups"])
    assert used <= sum(g["gpus"] for g in fastest["groups"])
    assert used > 1  # the next smaller size the search offers does not reach the target:
    smaller = json.loads(cli(*TINY_PLAN, "--gpus-per-node", str(used // 2)).stdout)
    assert smaller["tokens_per_s"] < target


def test_fewest_gpus_objective_needs_a_reachable_target(cli):
    assert_bad_input(cli(*TINY_PLAN, "--objective", "gpus"), "target_tokens_per_s")
    result = cli(*TINY_PLAN, "--objective", "gpus", "--target-tokens-per-s", "1e9")
    assert result.exit_code == 3
    reason = json.loads(result.stdout)["reason"]
    assert "reaches 1,000,000,000 tokens/s" in reason and "the fastest plan reaches" in reason


def test_the_what_ifs_search_within_a_node_or_whole_nodes(monkeypatch):
    """What an option would buy is said from a plan, not proven: past 16 GPUs the what-ifs
    search group sizes within a node or of whole nodes (`layouts.WHAT_IF_EVERY_GPU_COUNT`)
    while the plan searches every size, and a cut found over those is said to be at least
    that much."""
    searched: dict[bool, set[int]] = {}
    real = solve.build_space

    def recording(sc, **kw):
        space = real(sc, **kw)
        what_if = kw.get("staleness", 0) == 1 or kw.get("partial", False)
        searched.setdefault(what_if, set()).update(space.pools[0].sizes)
        return space

    monkeypatch.setattr(solve, "build_space", recording)
    monkeypatch.setattr(aside, "start", lambda *a, **k: None)  # every search in this process
    best = plan(small(algorithm="grpo", **{"workload.prompts_per_step": 48,
                                           "workload.samples_per_prompt": 4,
                                           "cluster.nodes": 3}))
    assert searched == {False: set(range(1, 25)), True: {*range(1, 9), 16, 24}}
    assert any(note.startswith("max_staleness 1 (one step off-policy) would cut the "
                               "iteration time by at least ")
               for note in best.explanation["what_if"]), best.explanation["what_if"]

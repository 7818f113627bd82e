"""Composition of one iteration (Table IX structure): breakdowns sum to the total, placement
and asynchrony compose as documented, memory feasibility is enforced with a clear reason."""

from __future__ import annotations

import itertools

import pytest

from planner.cost.iteration import BREAKDOWN_KEYS, evaluate
from planner.cost.report import to_plan
from planner.errors import InfeasibleError, InputError
from planner.plan import PlanInput
from planner.specs.scenario import load_scenario

SCENARIO = {"algorithm": "grpo", "models.actor": "qwen2.5-1.5b", "models.reference": "actor",
            "workload.prompts_per_step": 64, "workload.samples_per_prompt": 8,
            "workload.prompt_len": 512, "workload.response_len": 1024,
            "workload.max_response_len": 2048, "workload.mini_batches": 2,
            "cluster.gpu": "h100-sxm", "cluster.nodes": 2}


def scenario(**changes):
    return load_scenario(None, {**SCENARIO, **changes})


def colocated(gpus=16, gen_tp=1):
    return PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": gpus}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": gpus // gen_tp, "tp": gen_tp},
                              "training": {"group": "g0", "dp": gpus, "zero": 3,
                                           "checkpointing": "full", "micro_batch": 2}},
                    "reference": {"assessment": {"group": "g0", "dp": gpus, "zero": 3}}},
        "inter_model": {"placement": "colocated"}})


def disaggregated(staleness=0, fusion=False, overlap_sync=False):
    return PlanInput.model_validate({
        "groups": [{"name": "gen", "gpus": 8}, {"name": "train", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "gen", "dp": 8},
                              "training": {"group": "train", "dp": 8, "zero": 3,
                                           "checkpointing": "full", "micro_batch": 2}},
                    "reference": {"assessment": {"group": "train", "dp": 8, "zero": 3}}},
        "inter_model": {"placement": "disaggregated", "staleness": staleness,
                        "inter_stage_fusion": fusion, "overlap_weight_sync": overlap_sync}})


def test_every_group_breakdown_sums_to_the_iteration():
    for plan in (colocated(), disaggregated(), disaggregated(staleness=1)):
        ev = evaluate(scenario(), plan)
        for parts in ev.groups.values():
            assert set(parts) == set(BREAKDOWN_KEYS)
            assert sum(parts.values()) == pytest.approx(ev.iteration_time_s, rel=1e-12)
            assert min(parts.values()) >= 0


def test_colocated_is_the_sum_of_its_stages():
    ev = evaluate(scenario(), colocated())
    st = ev.stage_times
    assert ev.iteration_time_s == pytest.approx(
        st["generation"] + st["assessment"] + st["training"] + ev.sync_s)
    assert ev.groups["g0"]["idle"] == pytest.approx(0.0, abs=1e-9)
    # assessment holds the reference forward and the actor's old log-probs, one after another
    assess = [t.seconds for t in ev.tasks if t.stage == "assessment"]
    assert len(assess) == 2 and st["assessment"] == pytest.approx(sum(assess))


def test_asynchrony_overlaps_the_groups():
    sync = evaluate(scenario(), disaggregated(staleness=0))
    stale = evaluate(scenario(), disaggregated(staleness=1))
    busiest = max(sum(v for k, v in g.items() if k != "idle") for g in stale.groups.values())
    assert stale.iteration_time_s < sync.iteration_time_s
    assert stale.iteration_time_s >= busiest - 1e-9
    # a blocking sync: one rollout copy, both groups spend the sync
    gen = next(t for t in stale.tasks if t.stage == "generation")
    assert gen.memory.shadow_weights == 0
    assert stale.groups["gen"]["sync"] == stale.groups["train"]["sync"] == stale.sync_s > 0


def test_overlapped_weight_sync_holds_a_shadow_copy_and_leaves_the_rollout_busy_time():
    blocking = evaluate(scenario(), disaggregated(staleness=1))
    overlapped = evaluate(scenario(), disaggregated(staleness=1, overlap_sync=True))
    gen_b, gen_o = (next(t for t in ev.tasks if t.stage == "generation")
                    for ev in (blocking, overlapped))
    assert gen_o.memory.shadow_weights == gen_o.memory.weights > 0  # M_sh = |π|
    assert gen_b.memory.shadow_weights == 0
    assert overlapped.groups["gen"]["sync"] == 0
    assert overlapped.groups["train"]["sync"] == blocking.groups["train"]["sync"] > 0
    assert overlapped.memory["gen"]["peak_bytes"] > blocking.memory["gen"]["peak_bytes"]
    busy_b, busy_o = (sum(v for k, v in ev.groups["gen"].items() if k != "idle")
                      for ev in (blocking, overlapped))
    assert busy_o == pytest.approx(busy_b - blocking.sync_s)


@pytest.mark.parametrize("plan", [
    disaggregated(staleness=0, overlap_sync=True),
    PlanInput.model_validate({**colocated().model_dump(), "inter_model": {
        "overlap_weight_sync": True}})])  # co-located with staleness ≥ 1: PlanInput refuses
def test_overlapped_weight_sync_needs_staleness_and_a_rollout_group(plan):
    with pytest.raises(InputError, match="inter_model.overlap_weight_sync"):
        evaluate(scenario(), plan)


def test_stage_fusion_never_slows_and_helps_on_separate_groups():
    plain = evaluate(scenario(), disaggregated())
    fused = evaluate(scenario(), disaggregated(fusion=True))
    assert fused.iteration_time_s < plain.iteration_time_s


def test_disaggregated_pays_a_weight_sync_on_both_groups():
    ev = evaluate(scenario(), disaggregated())
    assert ev.sync_s > 0
    assert ev.groups["gen"]["sync"] == ev.groups["train"]["sync"] == ev.sync_s


def test_memory_counts_every_resident_model():
    ev = evaluate(scenario(), colocated())
    plan = colocated().model_dump()
    del plan["layouts"]["reference"]
    alone = evaluate(scenario(**{"models.reference": "none"}), PlanInput.model_validate(plan))
    assert ev.memory["g0"]["peak_bytes"] > alone.memory["g0"]["peak_bytes"]
    assert "reference" in ev.memory["g0"]["what"]


def test_more_samples_take_longer():
    small = evaluate(scenario(), colocated()).iteration_time_s
    big = evaluate(scenario(**{"workload.samples_per_prompt": 16}), colocated()).iteration_time_s
    assert big > small


def test_out_of_memory_names_group_stage_and_bytes():
    sc = load_scenario(None, {**SCENARIO, "models.actor": "qwen2.5-72b", "cluster.nodes": 1})
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 1, "tp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 0}},
                    "reference": {"assessment": {"group": "g0", "dp": 1, "tp": 8}}},
        "inter_model": {"placement": "colocated"}})
    with pytest.raises(InfeasibleError, match=r"group g0, stage \w+: .* GiB over"):
        evaluate(sc, plan)


def test_plan_must_cover_every_task():
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 16}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 16},
                              "training": {"group": "g0", "dp": 16, "zero": 3}}},
        "inter_model": {"placement": "colocated"}})
    with pytest.raises(InputError, match=r"layouts\.reference\.assessment is missing"):
        evaluate(scenario(), plan)


def test_plan_cannot_use_more_gpus_than_the_cluster():
    with pytest.raises(InputError, match="cluster has 16"):
        evaluate(scenario(), colocated(gpus=32))


def test_plan_json_has_the_design_fields():
    sc = scenario()
    plan = to_plan(sc, colocated(), evaluate(sc, colocated())).model_dump(mode="json")
    for key in ("schema_version", "status", "objective", "iteration_time_s", "tokens_per_s",
                "cost_per_step_usd", "stages", "groups", "layouts", "inter_model", "memory",
                "bounds", "search", "explanation"):
        assert key in plan
    assert plan["status"] == "evaluated"
    assert {"peak_gib_per_gpu", "capacity_gib"} <= set(plan["memory"])
    assert {"compute_s", "decode_s"} <= set(plan["bounds"])
    assert {"bottleneck", "binding_constraint", "alternatives"} <= set(plan["explanation"])
    # the bounds are lower bounds
    assert plan["bounds"]["compute_s"] < plan["iteration_time_s"]
    assert plan["bounds"]["decode_s"] < plan["stages"]["generation"]["time_s"]
    assert plan["tokens_per_s"] == pytest.approx(
        64 * 8 * (512 + 1024) / plan["iteration_time_s"])


def test_offload_during_generation_frees_the_kv_cache_and_costs_host_traffic():
    sc = scenario(**{"models.actor": "qwen2.5-7b", "workload.samples_per_prompt": 64,
                     "workload.response_len": 2048, "workload.max_response_len": 4096})
    plan = colocated().model_dump()
    plan["layouts"]["actor"]["training"]["zero"] = 1  # keep a lot of state resident
    plan["layouts"]["reference"]["assessment"]["zero"] = 0
    kept = evaluate(sc, PlanInput.model_validate(plan))
    plan["inter_model"] = {"offload_during_generation": True}
    swapped = evaluate(sc, PlanInput.model_validate(plan))
    assert swapped.rollout.kv_tokens > kept.rollout.kv_tokens
    assert kept.rollout.preemptions > 0 == swapped.rollout.preemptions
    assert swapped.sync_s > kept.sync_s  # the state crosses the host link twice
    gen = lambda ev: next(t for t in ev.tasks if t.stage == "generation").seconds  # noqa: E731
    assert gen(swapped) < gen(kept)


def test_offload_during_generation_needs_a_colocated_actor():
    plan = disaggregated().model_dump()
    plan["inter_model"]["offload_during_generation"] = True
    with pytest.raises(InputError, match="no co-located state"):
        evaluate(scenario(), PlanInput.model_validate(plan))


def test_the_kv_cache_gets_what_the_group_leaves_free():
    """Without kv_cache_tokens the pool is what memory leaves (up to what the replica can use);
    the plan carries it, so evaluating that plan again prices the same rollout."""
    sc = scenario(**{"models.actor": "qwen2.5-7b", "workload.samples_per_prompt": 64})
    first = evaluate(sc, colocated())
    gen = next(t for t in first.tasks if t.stage == "generation")
    assert gen.layout.kv_cache_tokens == first.rollout.kv_tokens > 0
    written = to_plan(sc, colocated(), first)
    assert written.layouts["actor"]["generation"].kv_cache_tokens == first.rollout.kv_tokens
    again = evaluate(sc, PlanInput.model_validate(written.model_dump()))
    assert again.iteration_time_s == first.iteration_time_s


def test_a_kv_cache_too_large_for_the_group_is_infeasible():
    plan = colocated().model_dump()
    plan["layouts"]["actor"]["generation"]["kv_cache_tokens"] = 10**9
    with pytest.raises(InfeasibleError, match="KV cache of 1,000,000,000 tokens"):
        evaluate(scenario(), PlanInput.model_validate(plan))


def test_max_num_seqs_caps_generation_concurrency():
    plan = colocated().model_dump()
    free = evaluate(scenario(), PlanInput.model_validate(plan))
    plan["layouts"]["actor"]["generation"]["max_num_seqs"] = 8
    capped = evaluate(scenario(), PlanInput.model_validate(plan))
    assert capped.rollout.peak_batch == 8 < free.rollout.peak_batch
    gen = lambda ev: next(t for t in ev.tasks if t.stage == "generation").seconds  # noqa: E731
    assert gen(capped) > gen(free)


def test_compute_bound_counts_only_the_work_the_plan_runs():
    sc = scenario(algorithm="ppo", **{"workload.samples_per_prompt": 1})
    plan = colocated().model_dump()
    plan["layouts"]["critic"] = {"training": plan["layouts"]["actor"]["training"]}
    separate = evaluate(sc, PlanInput.model_validate(plan))
    del plan["layouts"]["critic"]
    plan["inter_model"] = {"shared_actor_critic": True}
    shared = evaluate(sc, PlanInput.model_validate(plan))
    # the shared actor–critic drops the critic's forward and training: less work to bound
    assert shared.bounds["compute_s"] < separate.bounds["compute_s"]
    for ev in (separate, shared):
        assert ev.bounds["compute_s"] < ev.iteration_time_s


def test_fused_assessment_starts_after_the_first_wave_and_takes_its_time():
    ev = evaluate(scenario(), disaggregated(fusion=True))
    st = ev.stage_times
    assert ev.iteration_time_s >= st["assessment"] + ev.sync_s + st["training"] - 1e-9
    assert ev.iteration_time_s >= st["generation"] + ev.sync_s + st["training"] - 1e-9


@pytest.mark.parametrize("plan", [colocated(), disaggregated(), disaggregated(fusion=True),
                                  disaggregated(staleness=1)])
def test_timeline_matches_the_breakdown(plan):
    ev = evaluate(scenario(), plan)
    for g, parts in ev.groups.items():
        segs = sorted((s for s in ev.timeline if s["group"] == g), key=lambda s: s["start_s"])
        for kind in BREAKDOWN_KEYS:  # each kind's bars add up to the group's breakdown
            drawn = sum(s["end_s"] - s["start_s"] for s in segs if s["kind"] == kind)
            assert drawn == pytest.approx(parts[kind], abs=1e-6)
        for a, b in itertools.pairwise(segs):  # a group does one thing at a time
            assert a["end_s"] <= b["start_s"] + 1e-9
        assert segs[-1]["end_s"] == pytest.approx(ev.iteration_time_s)


def test_timeline_shows_overlap_under_asynchrony_and_fusion():
    def starts(ev, kind):
        return [s["start_s"] for s in ev.timeline if s["kind"] == kind]

    stale = evaluate(scenario(), disaggregated(staleness=1))
    assert min(starts(stale, "training")) < max(s["end_s"] for s in stale.timeline
                                                  if s["kind"] == "generation")
    fused = evaluate(scenario(), disaggregated(fusion=True))
    gen_end = max(s["end_s"] for s in fused.timeline if s["kind"] == "generation")
    assert min(starts(fused, "assessment")) < gen_end
    plain = evaluate(scenario(), disaggregated())
    gen_end = max(s["end_s"] for s in plain.timeline if s["kind"] == "generation")
    assert min(starts(plain, "assessment")) >= gen_end - 1e-9


def test_the_scenario_engine_prices_the_rollout():
    def generation(engine):
        ev = evaluate(scenario(**{"runtime.engine": engine}), colocated())
        return ev.stage_times["generation"]

    assert generation("sglang") < generation("vllm-v1") < generation("vllm-v0")

"""planner.cost.offload and the offload terms of time_train / evaluate: CPU Adam priced from
its DRAM bytes and cores (hand-computed from the constants), the node's DRAM shared by the GPUs
that offload, the overlaps ZeRO-Offload has, the generation-time swap at the host rate, and an
offload that does not pay for itself losing in the search."""

from __future__ import annotations

import math

import pytest

from planner.cost import offload as O
from planner.cost import time as T
from planner.cost.constants import (
    CPU_ADAM_DRAM_BYTES_PER_PARAM,
    CPU_ADAM_PARAMS_PER_S_PER_CORE,
    HOST_CPU_CORES,
    HOST_MEMORY_BANDWIDTH_GBPS,
    HOST_MEMORY_EFFICIENCY,
)
from planner.cost.flops import Head, params_with_head
from planner.cost.iteration import evaluate
from planner.cost.report import to_plan
from planner.errors import InfeasibleError
from planner.plan import Layout, PlanInput
from planner.search.solve import plan as search_plan
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario

H100 = load_profile("h100-sxm")  # host_link_gbps 64, 8 GPUs per node, no host DRAM/cores figure
LINK = 64e9 * H100.efficiency.host_link  # bytes/s per GPU per direction
DRAM = HOST_MEMORY_BANDWIDTH_GBPS * 1e9 * HOST_MEMORY_EFFICIENCY  # sustained, per node


def test_cpu_adam_dram_bytes_are_counted_exactly():
    # fp32 master, m, v read + written; fp32 gradient landed + read; bf16 copy written + read
    assert CPU_ADAM_DRAM_BYTES_PER_PARAM == 3 * (4 + 4) + (4 + 4) + (2 + 2) == 36


def test_cpu_adam_is_the_nodes_dram_traffic_at_its_sustained_bandwidth():
    n = 1e9  # parameters per GPU
    one = O.time_cpu_adam(n, H100, 1)
    assert one == pytest.approx(n * 36 / DRAM, rel=1e-12)
    # eight GPUs of a node stepping at once share its DRAM: eight times as long
    assert O.time_cpu_adam(n, H100, 8) == pytest.approx(8 * one, rel=1e-12)
    # the default host (112 cores) is DRAM-bound: the cores would take less
    assert n / (HOST_CPU_CORES * CPU_ADAM_PARAMS_PER_S_PER_CORE) < one


def test_few_cores_bind_and_a_profiles_host_figures_replace_the_defaults():
    n = 1e9
    small = H100.model_copy(update={"host_cpu_cores": 4})
    assert O.time_cpu_adam(n, small, 2) == pytest.approx(
        2 * n / (4 * CPU_ADAM_PARAMS_PER_S_PER_CORE), rel=1e-12)
    fast = H100.model_copy(update={"host_memory_bandwidth_gbps": 2 * HOST_MEMORY_BANDWIDTH_GBPS})
    assert O.time_cpu_adam(n, fast, 1) == pytest.approx(n * 36 / (2 * DRAM), rel=1e-12)


def test_gpus_sharing_a_host_are_the_groups_gpus_on_a_node():
    assert O.gpus_sharing_host(H100, 2) == 2
    assert O.gpus_sharing_host(H100, 32) == 8
    assert O.gpus_sharing_host(H100, 32, gpus_per_node=4) == 4


def test_a_stream_is_no_faster_than_the_gpus_share_of_dram():
    # alone, the host link binds (51.2 GB/s < 368.6 GB/s); eight at once, DRAM does (46.1)
    assert O.host_stream_rate(H100, 1) == pytest.approx(LINK, rel=1e-12)
    assert O.host_stream_rate(H100, 8) == pytest.approx(DRAM / 8, rel=1e-12)
    assert O.swap_time(1e9, H100, 8) == pytest.approx(2 * 1e9 / (DRAM / 8), rel=1e-12)


def test_time_train_prices_cpu_adam_and_the_exposed_transfers():
    """ZeRO-2 optimizer offload on 8 GPUs of a node: the GPU step is gone; CPU Adam over each
    rank's 1/8 of the parameters, the node's 8 ranks sharing DRAM, on the critical path; the
    gradient copy half hidden by the backward (DP overlap), the bf16 upload under the step."""
    spec = load_model("qwen2.5-7b")
    steps, dp = 2, 8
    layout = Layout(group="g", dp=dp, zero=2, offload="optimizer")
    t = T.time_train(spec, Head.POLICY, layout, H100, 64, 1024, mini_batches=steps)
    local = params_with_head(spec, Head.POLICY) / dp
    cpu = dp * local * 36 / DRAM
    down, up = local * 2 / LINK, local * 2 / LINK
    assert t.optimizer == 0.0
    assert t.optimizer_cpu == pytest.approx(steps * cpu, rel=1e-12)
    assert t.offload == pytest.approx(
        steps * (down * (1 - T.DP_COMM_OVERLAP) + max(0.0, up - cpu)), rel=1e-12)
    assert t.total == pytest.approx(math.fsum(t.as_dict().values()), rel=1e-12)
    kept = T.time_train(spec, Head.POLICY, layout.model_copy(update={"offload": "none"}),
                        H100, 64, 1024, mini_batches=steps)
    assert kept.optimizer > 0 and kept.optimizer_cpu == kept.offload == 0.0
    assert t.total > kept.total  # nothing here for the offload to buy


def test_parameter_offload_streams_the_held_weights_every_pass():
    spec = load_model("qwen2.5-7b")
    layout = Layout(group="g", dp=8, zero=3, micro_batch=2, offload="params")
    t = T.time_train(spec, Head.POLICY, layout, H100, 64, 1024)
    f = T.time_forward(spec, Head.POLICY, layout, H100, 64, 1024)
    held = params_with_head(spec, Head.POLICY) / 8  # the rank's ZeRO-3 shard
    micro = 64 / (8 * 2)
    rate = DRAM / 8  # 8 GPUs of the node stream at once: their DRAM share binds
    assert t.offload == pytest.approx(micro * 2 * held * 2 / rate, rel=1e-12)  # fwd + bwd
    assert f.offload == pytest.approx(micro * held * 2 / rate, rel=1e-12)  # the forward
    assert t.optimizer_cpu == 0.0 and t.optimizer > 0


def test_a_sleeping_frozen_model_loads_its_weights_once_and_holds_them_for_its_stage_only():
    from planner.cost.memory import memory_forward_per_gpu

    spec = load_model("qwen2.5-7b")
    awake = Layout(group="g", dp=8, micro_batch=2)
    asleep = awake.model_copy(update={"offload": "sleep"})
    f = T.time_forward(spec, Head.POLICY, asleep, H100, 64, 1024)
    held = params_with_head(spec, Head.POLICY)  # whole weights per GPU (ZeRO-0, TP 1)
    rate = DRAM / 8
    assert f.offload == pytest.approx(2 * held * 2 / rate, rel=1e-12)  # in once, out once
    streamed = T.time_forward(spec, Head.POLICY, awake.model_copy(update={"offload": "params"}),
                              H100, 64, 1024)
    assert streamed.offload == pytest.approx(64 / (8 * 2) * held * 2 / rate, rel=1e-12)
    kept = T.time_forward(spec, Head.POLICY, awake, H100, 64, 1024)
    assert f.total - f.offload == pytest.approx(kept.total, rel=1e-12)
    on, off = (memory_forward_per_gpu(spec, lay, seq_len=1024) for lay in (awake, asleep))
    # the same bytes on the GPU during its pass, none of them between passes
    assert off.persistent == 0 and off.stage_weights == on.weights == off.host_offload
    assert off.total == pytest.approx(on.total, rel=1e-12)
    assert off.transient == pytest.approx(on.transient + on.weights, rel=1e-12)


def test_sleep_is_for_frozen_models_only():
    with pytest.raises(ValueError, match="layouts.actor.training.offload: 'sleep'.*frozen"):
        _plan("sleep")


def test_a_sleeping_reference_frees_the_memory_a_resident_one_holds_in_other_stages():
    sc = load_scenario(None, {**SMALL, "models.reference": "actor"})
    plans = {o: PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 2}},
                    "reference": {"assessment": {"group": "g0", "dp": 8, "offload": o}}},
        "inter_model": {"placement": "colocated"}}) for o in ("none", "sleep")}
    kept, slept = (to_plan(sc, plans[o], evaluate(sc, plans[o])) for o in ("none", "sleep"))
    ref_gib = params_with_head(sc.reference, Head.POLICY) * 2 / 2**30
    peak = {o: p.memory["groups"]["g0"] for o, p in (("none", kept), ("sleep", slept))}
    # the rollout peaks the group; the sleeping reference holds nothing there
    assert peak["none"]["what"] == "actor generation with resident: actor, reference"
    assert peak["sleep"]["what"] == "actor generation with resident: actor"
    assert peak["none"]["peak_gib_per_gpu"] - peak["sleep"]["peak_gib_per_gpu"] == \
        pytest.approx(ref_gib, abs=0.01)
    ref = {o: next(t for t in p.breakdown["tasks"] if t["role"] == "reference")
           for o, p in (("none", kept), ("sleep", slept))}
    assert ref["none"]["parts"]["offload"] == 0 and ref["sleep"]["parts"]["offload"] > 0
    assert ref["sleep"]["memory_gib"]["memory/transient/stage_weights"] == \
        pytest.approx(ref_gib, abs=0.01)


SMALL = {"models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.prompt_len": 128, "workload.response_len": 256,
         "workload.max_response_len": 512, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
         "algorithm": "grpo", "workload.samples_per_prompt": 4}


def _plan(offload: str) -> PlanInput:
    return PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8, "roles": ["actor", "reference"]}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 2,
                                           "offload": offload}},
                    "reference": {"assessment": {"group": "g0", "dp": 8}}},
        "inter_model": {"placement": "colocated"}})


def test_evaluate_shows_the_cpu_adam_time_of_an_offloaded_plan():
    sc = load_scenario(None, SMALL)
    ev = evaluate(sc, _plan("optimizer"))
    train = next(t for t in ev.tasks if t.role == "actor" and t.stage == "training")
    local = params_with_head(sc.actor, Head.POLICY) / 8
    steps = sc.workload.mini_batches * sc.workload.ppo_epochs
    # 8 ranks on one node, each Adam-stepping 1/8 of the parameters: the node's DRAM moves
    # 36 bytes per parameter at 614.4 GB/s × 0.6
    expected = steps * 8 * local * 36 / (614.4e9 * 0.6)
    assert train.parts["optimizer_cpu"] == pytest.approx(expected, rel=1e-12)
    assert train.parts["optimizer"] == 0.0 and train.parts["offload"] > 0
    plan = to_plan(sc, _plan("optimizer"), ev).model_dump(mode="json")
    parts = next(t for t in plan["breakdown"]["tasks"] if t["stage"] == "training")["parts"]
    assert parts["optimizer_cpu"] == pytest.approx(expected, rel=1e-12)
    # the offload costs time and buys nothing on a model that fits
    assert ev.iteration_time_s > evaluate(sc, _plan("none")).iteration_time_s


def test_the_search_does_not_offload_a_model_that_fits():
    sc = load_scenario(None, SMALL)
    result = search_plan(sc, explain=False)
    offloads = {(role, stage): lay.offload for role, stages in result.layouts.items()
                for stage, lay in stages.items()}
    assert set(offloads.values()) == {"none"}, offloads


def test_state_offloaded_during_generation_moves_the_resident_bytes_at_the_host_rate():
    sc = load_scenario(None, SMALL)
    data = _plan("none").model_dump()
    data["inter_model"]["offload_during_generation"] = True
    plan_in = PlanInput.model_validate(data)
    ev = evaluate(sc, plan_in)
    # what is resident on g0 between stages: the actor's training state and the reference
    resident = sum(float(t.memory.persistent) for t in ev.tasks
                   if t.stage == "training" or t.role == "reference")
    assert ev.swap_bytes == pytest.approx(resident, rel=1e-12) and resident > 0
    # all 8 GPUs of the node swap at once: their DRAM share (46.1 GB/s) binds, not the link
    assert ev.swap_s == pytest.approx(2 * resident / (DRAM / 8), rel=1e-12)
    assert ev.sync_s == pytest.approx(evaluate(sc, _plan("none")).sync_s + ev.swap_s,
                                      rel=1e-12)
    sync = to_plan(sc, plan_in, ev).model_dump(mode="json")["breakdown"]["sync"]
    assert sync["offload_during_generation_s"] == pytest.approx(ev.swap_s, rel=1e-12)


def test_the_view_names_the_cpu_step_and_the_host_transfers_apart():
    from planner.cli.views import offload_lines

    sc = load_scenario(None, SMALL)
    ev = evaluate(sc, _plan("optimizer"))
    breakdown = to_plan(sc, _plan("optimizer"), ev).model_dump(mode="json")["breakdown"]
    train = next(t for t in breakdown["tasks"] if t["stage"] == "training")
    assert offload_lines(breakdown) == [
        f"  actor training: optimizer (CPU Adam) {train['parts']['optimizer_cpu']:.2f} s, "
        f"offload transfers {train['parts']['offload']:.2f} s of {train['time_s']:.2f} s"]
    assert offload_lines(to_plan(sc, _plan("none"), evaluate(sc, _plan("none"))).model_dump(
        mode="json")["breakdown"]) == []


def test_offload_on_a_profile_without_host_memory_names_the_missing_figure():
    sc = load_scenario(None, {**SMALL, "models.reference": "actor", "cluster.gpu": "h20"})
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"generation": {"group": "g0", "dp": 8},
                              "training": {"group": "g0", "dp": 8, "zero": 2}},
                    "reference": {"assessment": {"group": "g0", "dp": 8, "offload": "sleep"}}},
        "inter_model": {"placement": "colocated"}})
    with pytest.raises(InfeasibleError, match="the h20 profile gives no host_memory_gib"):
        evaluate(sc, plan)

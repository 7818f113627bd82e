"""Interleaved pipeline schedules (`vp` in a training layout): the 1F1B bubble against the
closed form (p − 1)/(vp·M), vp× the pipeline sends, activation memory × 1 + (p−1)/(p·vp) from
the layout, the schedule's preconditions, and the search's price equal to evaluate's."""

from __future__ import annotations

import math

import pytest

from planner.cost import time as T
from planner.cost.activations import bytes_activation_per_layer
from planner.cost.iteration import evaluate
from planner.cost.memory import memory_training_per_gpu
from planner.errors import InputError
from planner.plan import Layout, PlanInput
from planner.search.candidate import MIB, Task
from planner.search.space import _price, build_space, heads_for
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario
from planner.theory.shape import Head


@pytest.mark.parametrize(("pp", "vp", "micro", "seconds", "bubble"), [
    (4, 1, 8, 1.0, 3.0),  # plain 1F1B: (p − 1)·t
    (4, 2, 8, 1.0, 1.5),  # (p − 1)·t/vp: 3/(2·8) of the balanced 8 s
    (2, 4, 16, 0.5, 0.125),  # 1·0.5/4
    (8, 3, 24, 2.0, 14 / 3),  # 7·2/3
])
def test_interleaved_bubble_closed_form_on_equal_stages(pp, vp, micro, seconds, bubble):
    pipe = T._pipeline(tuple(T._Stage(compute=seconds) for _ in range(pp)), micro, vp)
    balanced = sum(pipe.parts.values())
    assert balanced == pytest.approx(micro * seconds)
    assert pipe.bubble == pytest.approx(bubble)
    assert pipe.bubble / balanced == pytest.approx((pp - 1) / (vp * micro))
    assert pipe.imbalance == 0


def _train(vp: int, **layout):
    spec, gpu = load_model("qwen2.5-0.5b"), load_profile("h100-sxm")  # 24 layers
    lay = Layout(group="g", dp=2, tp=2, pp=4, sp=True, vp=vp, **layout)
    return T.time_train(spec, Head.POLICY, lay, gpu, 64, 2048)


@pytest.mark.parametrize("vp", [2, 3, 6])
def test_time_train_bubble_and_sends(vp):
    """M = 64/(dp 2 · micro 1) = 32 micro-batches: the bubble is (p − 1)/(vp·M) of the
    balanced stage work, which includes vp× the pipeline sends of plain 1F1B."""
    plain, inter = _train(1), _train(vp)
    assert inter.pp_comm == pytest.approx(vp * plain.pp_comm) and plain.pp_comm > 0
    for t, v in ((plain, 1), (inter, vp)):
        balanced = t.compute + t.memory + t.host + t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm
        assert t.pp_bubble == pytest.approx(balanced * 3 / (v * 32))
    assert inter.compute == plain.compute
    assert inter.pp_imbalance == pytest.approx(plain.pp_imbalance)  # same stages, re-summed


def test_activation_memory_from_the_layout_vp():
    """First stage (the peak): min(pp, M) micro-batches of its L/pp layers in flight, × 1 +
    (p−1)/(p·vp) (Korthikanti §4.2.3), the dense per-layer bytes computed by hand here."""
    spec = load_model("qwen2.5-0.5b")
    s, b, pp = 1024, 1, 4
    per_layer = bytes_activation_per_layer(spec, s, b, tp=2, sp=True).total
    for vp, factor in ((1, 1.0), (2, 1 + 3 / 8), (3, 1 + 3 / 12)):
        lay = Layout(group="g", dp=2, tp=2, pp=pp, sp=True, vp=vp, micro_batch=b)
        mem = memory_training_per_gpu(spec, lay, seq_len=s, micro_batches=16)
        assert mem.pipeline_stage == 0
        assert mem.activations == pytest.approx(24 / pp * min(pp, 16) * per_layer * factor)


SFT = {"algorithm": "sft", "models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 64,
       "workload.prompt_len": 512, "workload.response_len": 1536, "cluster.gpu": "h100-sxm",
       "cluster.nodes": 1}


def _plan(**training):
    return PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 8}],
        "layouts": {"actor": {"training": {"group": "g0", **training}}},
        "inter_model": {"placement": "colocated"}})


def test_evaluate_prices_a_vp_layout_as_the_search_does():
    sc = load_scenario(None, SFT)
    space = build_space(sc)
    task, heads = Task("actor", "training"), heads_for(sc, False)
    kept = [c for c in space.candidates[(task.name, 0, 8)] if c.layout.vp > 1]
    assert kept, "an interleaved layout should survive pruning (shorter bubble)"
    for cand in kept[:5]:
        ev = evaluate(sc, _plan(**cand.layout.model_dump(exclude={"group", "recompute"})))
        t = next(x for x in ev.tasks if x.stage == "training")
        assert math.ceil(t.seconds / 1e-3) == cand.time_ms["training"]
        assert math.ceil(float(t.memory.persistent) / MIB) == cand.persistent_mib
        assert math.ceil(float(t.memory.transient) / MIB) == cand.transient_mib["training"]
        again = _price(space, space.pools[0], task, cand.layout, heads["actor"])
        assert again.time_ms == cand.time_ms
    offered = {c.layout.vp for key, cs in space.candidates.items() for c in cs}
    assert offered <= {1, 2, 4}  # 24 layers: pp 2 → vp 2, 4; pp 4 → vp 2; pp 8 → vp 1


@pytest.mark.parametrize(("training", "fragment"), [
    ({"dp": 2, "tp": 2, "pp": 2, "vp": 5}, "must divide the model's 24 layers"),
    ({"dp": 1, "tp": 2, "pp": 4, "vp": 2, "micro_batch": 32}, "at least pp = 4 micro-batches"),
])
def test_schedules_megatron_cannot_run_are_refused(training, fragment):
    sc = load_scenario(None, SFT)
    with pytest.raises(InputError, match="layouts.actor.training.vp") as err:
        evaluate(sc, _plan(**training))
    assert fragment in str(err.value)


def test_vp_needs_pp_and_a_training_layout():
    with pytest.raises(ValueError, match="needs pp > 1"):
        Layout(group="g", dp=8, vp=2)
    with pytest.raises(ValueError, match="training schedule"):
        PlanInput.model_validate({
            "groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"generation": {"group": "g0", "dp": 4, "pp": 2, "vp": 2}}},
            "inter_model": {"placement": "colocated"}})

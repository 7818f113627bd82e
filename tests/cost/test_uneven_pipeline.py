"""Uneven pipeline stages (`first_stage_layers` / `last_stage_layers`): Megatron's split rules
(`pipeline_split`), the stages priced in time and memory, plans checked, the split the search
offers where pp does not divide the layers, and the search pricing it as evaluate does."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner.cost import time as T
from planner.cost.flops import params_with_head
from planner.cost.iteration import evaluate
from planner.cost.memory import memory_training_per_gpu
from planner.cost.pipeline_split import (
    MegatronSplit,
    megatron_split,
    offered_split,
    pipeline_stage_layers,
    split_from_megatron,
    split_problem,
    stage_layer_counts,
)
from planner.cost.states import params_per_gpu_stage
from planner.errors import InputError
from planner.plan import Layout, PlanInput
from planner.search import brute, cpsat
from planner.search.candidate import MIB, Task
from planner.search.layouts import SHAPES
from planner.search.space import _price, build_space, heads_for
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario
from planner.theory.shape import Head
from tests.test_cli import assert_bad_input

H100 = load_profile("h100-sxm")
QWEN = load_model("qwen2.5-0.5b")  # 24 layers, a large vocabulary head on the last stage


# --- the split and Megatron's rules ----------------------------------------------------------


def test_stages_hold_the_given_ends_and_split_the_rest_evenly():
    assert stage_layer_counts(94, 8, 11, 11) == [11, 12, 12, 12, 12, 12, 12, 11]
    assert stage_layer_counts(24, 5, None, 4) == [5, 5, 5, 5, 4]  # the first a middle stage
    assert stage_layer_counts(61, 12, None, 6) == [5] * 11 + [6]  # verl's DeepSeek-V3 script
    assert stage_layer_counts(10, 4) == [3, 3, 2, 2]  # no ends: rollout engines' even-ish split
    ranges = pipeline_stage_layers(94, 8, 11, 11)
    assert [r.start for r in ranges] == [0, 11, 23, 35, 47, 59, 71, 83] and ranges[-1].stop == 94
    assert [len(r) for r in pipeline_stage_layers(94, 8, None, 10)] == [12] * 7 + [10]
    with pytest.raises(ValueError, match="last_stage_layers: the other 7 stage"):
        pipeline_stage_layers(94, 8, None, 11)  # 83 over 7 stages


@pytest.mark.parametrize(("split", "field", "fragment"), [
    ((94, 8, 1, None, None), "pp", "e.g. first_stage_layers: 11, last_stage_layers: 11"),
    ((94, 8, 1, 10, 11), "first_stage_layers/last_stage_layers",
     "the other 6 stage(s) must split the remaining 73"),
    ((94, 8, 1, 94, None), "first_stage_layers", "remaining 0"),
    ((61, 2, 1, 30, 30), "first_stage_layers/last_stage_layers", "not 30 + 30"),
    ((94, 8, 4, 10, 12), "vp", "the stages hold 10, 12, 12, 12, 12, 12, 12, 12"),
    ((61, 8, 4, None, None), "pp", "use a pp that divides 61"),
    ((24, 4, 5, None, None), "vp", "pp·vp = 4·5 must divide the model's 24 layers"),
    ((24, 1, 1, 3, None), "first_stage_layers", "need pp > 1"),
])
def test_splits_megatron_refuses_are_refused_naming_the_field(split, field, fragment):
    bad = split_problem(*split)
    assert bad is not None and bad[0] == field and fragment in bad[1], bad


@pytest.mark.parametrize(("split", "settings"), [
    ((94, 8, 1, 11, 11), MegatronSplit(first=11, last=11)),
    # Qwen3-235B PP8 × VP4 (training_h100.md T55): 11 does not split into 4 chunks; Megatron
    # counts the embedding and the loss as layers instead: 96/8 = 12 per rank, 3 per chunk
    ((94, 8, 4, 11, 11), MegatronSplit(embedding_in_split=True, loss_in_split=True)),
    ((94, 4, 2, 23, 23), MegatronSplit(embedding_in_split=True, loss_in_split=True)),
    ((24, 4, 2, 4, 4), MegatronSplit(first=4, last=4)),  # 4, 8, 8, 4: all split into 2
    ((61, 2, 1, None, 30), MegatronSplit(last=30)),  # 31, 30
    ((59, 2, 2, None, 29), MegatronSplit(loss_in_split=True)),  # 30, 29: 2 chunks of 15
    ((24, 4, 1, None, None), MegatronSplit()),
])
def test_megatron_runs_a_split_by_counts_or_by_accounting(split, settings):
    assert split_problem(*split) is None
    got = megatron_split(*split)
    assert got == settings
    L, pp, _, first, last = split
    # and read back (import) it is the same stages
    assert stage_layer_counts(L, pp, *split_from_megatron(L, pp, got)) == \
        stage_layer_counts(L, pp, first, last)


def test_megatron_settings_it_refuses_are_refused_on_import():
    with pytest.raises(ValueError, match="cannot be combined"):
        split_from_megatron(94, 8, MegatronSplit(first=11, embedding_in_split=True))
    with pytest.raises(ValueError, match="do not divide over pp 8"):
        split_from_megatron(94, 8, MegatronSplit(embedding_in_split=True))  # 95 / 8


@pytest.mark.parametrize(("L", "pp", "vp", "split"), [
    (94, 8, 1, (11, 11)),  # NeMo-RL's Qwen3-235B recipe: 11, 12 × 6, 11
    (94, 8, 4, (11, 11)),  # the same, run by accounting for the embedding and the loss
    (94, 16, 1, (5, 5)),
    (61, 16, 1, (3, 2)),  # DeepSeek-V3: 3, 4 × 14, 2 — the last lighter (head and loss)
    (61, 8, 1, (7, 6)),
    (61, 2, 1, (None, 30)),  # 31, 30
    (28, 8, 1, (2, 2)),
    (61, 8, 4, None),  # no split Megatron interleaves into 4 chunks
    (24, 16, 1, None),  # 16 stages of 24 layers: not ⌈24/16⌉ = 2 in the middle
    (24, 4, 1, None),  # pp divides the layers: the even split
])
def test_the_offered_split(L, pp, vp, split):
    assert offered_split(L, pp, vp) == split


def test_every_offered_split_runs_paced_by_the_least_possible_stage():
    for L in range(2, 130):
        for pp in (2, 3, 4, 5, 8, 16):
            for vp in (1, 2, 4):
                split = offered_split(L, pp, vp)
                if split is None:
                    continue
                assert split_problem(L, pp, vp, *split) is None, (L, pp, vp, split)
                counts = stage_layer_counts(L, pp, *split)
                assert max(counts) == math.ceil(L / pp), (L, pp, vp, counts)
                assert set(counts[1:-1]) <= {max(counts)}  # the middle stages full
                assert counts[-1] <= counts[0]  # the last stage (head, loss) no heavier


# --- priced per stage ------------------------------------------------------------------------


def _train(**layout):
    lay = Layout(group="g", dp=1, micro_batch=1, **layout)
    return T.time_train(QWEN, Head.POLICY, lay, H100, 64, 2048)


def test_ends_equal_to_the_even_split_price_as_the_even_split():
    even, said = _train(pp=4), _train(pp=4, first_stage_layers=6, last_stage_layers=6)
    assert said == even
    lay = dict(group="g", dp=1, pp=4, micro_batch=1)
    assert memory_training_per_gpu(QWEN, Layout(**lay, first_stage_layers=6), seq_len=2048,
                                   micro_batches=64) == \
        memory_training_per_gpu(QWEN, Layout(**lay), seq_len=2048, micro_batches=64)


def test_the_slowest_stage_sets_the_pace():
    """Same layers, same balanced work and fill/drain; the split only moves the pace: 24
    layers over 5 stages with the last lighter (it also runs the 151k-vocabulary head and the
    loss, more than a layer's time here) beat the first lighter, and a heavy first stage
    (12, 3 × 4) is slowest."""
    last_light = _train(pp=5, last_stage_layers=4)  # 5, 5, 5, 5, 4
    first_light = _train(pp=5, first_stage_layers=4)  # 4, 5, 5, 5, 5
    heavy = _train(pp=5, first_stage_layers=12)  # 12, 3, 3, 3, 3
    for t in (first_light, heavy):
        assert t.compute == pytest.approx(last_light.compute)
        assert t.pp_bubble == pytest.approx(last_light.pp_bubble)
    assert last_light.total < first_light.total < heavy.total
    assert last_light.pp_imbalance < first_light.pp_imbalance < heavy.pp_imbalance


def test_interleaving_an_uneven_split_shortens_its_bubble():
    """4, 8, 8, 4 in 2 chunks per rank: the fill and drain pass chunks half as long."""
    plain = _train(pp=4, first_stage_layers=4, last_stage_layers=4)
    inter = _train(pp=4, vp=2, first_stage_layers=4, last_stage_layers=4)
    assert inter.pp_bubble < plain.pp_bubble
    assert inter.compute == plain.compute and inter.pp_comm == pytest.approx(2 * plain.pp_comm)


def test_memory_peaks_on_the_stage_the_split_loads_most():
    """1F1B: stage k holds min(pp − k, M) micro-batches of its layers. Llama-3.1-8B's 32 layers
    even (8 each): the first stage peaks (4 × 8 in flight, and the embedding); 5, 9, 9, 9
    moves the peak to the second (3 × 9 = 27 < 32) and lowers it (model states sharded over
    dp 8, long sequences: activations dominate)."""
    spec, kw = load_model("llama-3.1-8b"), dict(seq_len=8192, micro_batches=64)
    lay = dict(group="g", dp=8, pp=4, zero=1)
    even = memory_training_per_gpu(spec, Layout(**lay), **kw)
    light = memory_training_per_gpu(spec, Layout(**lay, first_stage_layers=5), **kw)
    assert (even.pipeline_stage, light.pipeline_stage) == (0, 1)
    assert light.activations == pytest.approx(even.activations * 27 / 32)
    assert light.total < even.total


@pytest.mark.parametrize("ends", [(11, 11), (None, 10), (10, None), (20, 20)])
def test_stage_parameters_add_up_to_the_model(ends):
    spec = load_model("qwen3-235b-a22b")  # 94 layers, MoE
    stages = [params_per_gpu_stage(spec, pp=8, stage=k, first=ends[0], last=ends[1])
              for k in range(8)]
    assert [s.layers for s in stages] == stage_layer_counts(94, 8, *ends)
    assert sum(s.total for s in stages) == pytest.approx(params_with_head(spec, Head.POLICY))


# --- plans -----------------------------------------------------------------------------------


def test_layout_fields_absent_mean_even_and_are_not_written():
    lay = Layout(group="g", dp=1, pp=8)
    assert "first_stage_layers" not in lay.model_dump() and not lay.uneven
    uneven = Layout(group="g", dp=1, pp=8, first_stage_layers=11, last_stage_layers=11)
    assert Layout.model_validate(uneven.model_dump()) == uneven
    with pytest.raises(ValueError, match="need pp > 1"):
        Layout(group="g", dp=8, last_stage_layers=3)
    with pytest.raises(ValueError, match="rollout engines split their pipeline"):
        PlanInput.model_validate({
            "groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"generation": {"group": "g0", "dp": 4, "pp": 2,
                                                 "last_stage_layers": 11}}},
            "inter_model": {"placement": "colocated"}})


SFT = {"algorithm": "sft", "models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 64,
       "workload.prompt_len": 512, "workload.response_len": 1536, "cluster.gpu": "h100-sxm",
       "cluster.nodes": 1}


def _sft_plan(gpus: int = 8, **training) -> PlanInput:
    return PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": gpus}],
        "layouts": {"actor": {"training": {"group": "g0", **training}}},
        "inter_model": {"placement": "colocated"}})


def test_evaluate_refuses_a_split_megatron_cannot_run():
    sc = load_scenario(None, SFT)
    with pytest.raises(InputError, match=r"layouts\.actor\.training\.pp: pp 5 does not divide "
                       r".* e\.g\. last_stage_layers: 4"):
        evaluate(sc, _sft_plan(gpus=5, dp=1, pp=5))
    with pytest.raises(InputError, match=r"layouts\.actor\.training\.last_stage_layers: the "
                       r"other 3 stage\(s\) must split the remaining 19"):
        evaluate(sc, _sft_plan(dp=2, pp=4, last_stage_layers=5))
    ev = evaluate(sc, _sft_plan(gpus=5, dp=1, pp=5, last_stage_layers=4))
    assert ev.tasks[0].layout.last_stage_layers == 4


def test_the_cli_says_it_in_one_line(cli, write):
    scenario = write("s.yaml", json.dumps({
        "algorithm": "sft", "models": {"actor": "qwen2.5-0.5b"},
        "workload": {"prompts_per_step": 64, "prompt_len": 512, "response_len": 1536},
        "cluster": {"gpu": "h100-sxm", "nodes": 1}}))
    plan = _sft_plan(dp=2, pp=4, vp=2, first_stage_layers=3).model_dump(mode="json")
    result = cli("evaluate", str(scenario), str(write("p.json", json.dumps(plan))))
    assert_bad_input(result, "layouts.actor.training.vp: vp 2: Megatron interleaves uneven "
                     "stages only when", "the stages hold 3, 7, 7, 7")


# --- the search ------------------------------------------------------------------------------


TINY = {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000}


@pytest.fixture
def tiny(tmp_path):
    """A 7-layer model: no pp > 1 divides its layers."""
    folder = tmp_path / "tiny-7"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    return load_scenario(None, {"algorithm": "grpo", "models.actor": str(folder),
                                "models.reference": "none", "workload.prompts_per_step": 8,
                                "workload.samples_per_prompt": 2, "workload.prompt_len": 128,
                                "workload.response_len": 256, "workload.max_response_len": 512,
                                "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
                                "cluster.gpus_per_node": 4})


def test_the_search_offers_uneven_stages_where_pp_does_not_divide(tiny):
    space = build_space(tiny, slots=2)
    ps = space.pools[0]
    train = {(s.pp, vp, s.first_stage_layers, s.last_stage_layers)
             for s in SHAPES["training"](space, ps, "actor", 4)
             for vp in np.unique(s.vp).tolist()}  # the interleavings are variants
    # pp 2: 4, 3 (interleaved by accounting for the loss, 4 per rank: vp 4 the most chunks);
    # pp 4: 2, 2, 2, 1 (2 chunks the most)
    assert {(pp, vp, first, last) for pp, vp, first, last in train if pp > 1} == {
        (2, 1, None, 3), (2, 4, None, 3), (4, 1, None, 1), (4, 2, None, 1)}
    forward = {(s.pp, s.first_stage_layers, s.last_stage_layers)
               for s in SHAPES["forward"](space, ps, "actor", 4)}
    assert {(2, None, 3), (4, None, 1)} <= forward


def test_the_search_prices_uneven_stages_as_evaluate_does_and_equals_brute_force(tiny):
    space = build_space(tiny, slots=2)
    task, heads = Task("actor", "training"), heads_for(tiny, False)
    kept = [c for (name, _, g), cs in space.candidates.items() if name == task.name
            for c in cs if c.layout.uneven]
    assert kept
    for cand in kept[:6]:
        again = _price(space, space.pools[0], task, cand.layout, heads["actor"])
        assert (again.time_ms, again.persistent_mib) == (cand.time_ms, cand.persistent_mib)
    best, _, count = brute.solve(space)
    result = cpsat.solve(space, time_limit_s=30)
    assert count > 0 and result.status == "OPTIMAL" and result.objective == best


def test_a_searched_uneven_layout_evaluates_to_its_price(tiny):
    space = build_space(tiny, slots=2)
    task = Task("actor", "training")
    cand = next(c for (name, _, g), cs in space.candidates.items() if name == task.name
                and g == 4 for c in cs if c.layout.uneven)
    gen = {"group": "g0", "dp": 4}
    plan = PlanInput.model_validate({
        "groups": [{"name": "g0", "gpus": 4}],
        "layouts": {"actor": {"generation": gen, "training": cand.layout.model_dump(
            exclude={"recompute"}) | {"group": "g0"}}},
        "inter_model": {"placement": "colocated"}})
    t = next(x for x in evaluate(tiny, plan).tasks if x.stage == "training")
    assert math.ceil(t.seconds / 1e-3) == cand.time_ms["training"]
    assert math.ceil(float(t.memory.persistent) / MIB) == cand.persistent_mib


def test_a_baseline_comparison_names_a_changed_split():
    from planner.cli.baseline import changes

    base = _sft_plan(gpus=5, dp=1, pp=5, last_stage_layers=4)
    best = _sft_plan(gpus=5, dp=1, pp=5, first_stage_layers=4)
    assert changes(best, base) == ["actor training: first_stage_layers None → 4, "
                                   "last_stage_layers 4 → None"]

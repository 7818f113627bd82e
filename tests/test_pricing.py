"""Pricing the search's candidates in numpy passes: the vectorised cost functions equal the
scalar ones element by element, and the search's candidate lists equal those of pricing each
layout one at a time through the scalar cost model (`rlplan evaluate`'s path)."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cost import time as T
from planner.cost.generation import memory_generation_per_gpu
from planner.cost.memory import memory_forward_per_gpu, memory_training_per_gpu
from planner.cost.variants import LayoutVariants
from planner.plan import Layout
from planner.search.candidate import FRONT_BLOCK, front_of
from planner.search.space import _candidates, build_space, heads_for, hide_refit
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario
from planner.theory.shape import Head

# --- pruning: the front of candidate keys ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.lists(
    st.lists(st.integers(0, 4), min_size=k, max_size=k), min_size=1,
    max_size=3 * FRONT_BLOCK)))
def test_front_is_the_rows_no_other_beats(rows):
    """`front_of` (checked a block at a time) keeps exactly the rows no other row beats or ties
    in every number, the first of equal rows, in lexicographic order."""
    keys = np.array(rows, dtype=np.int64)
    expected = sorted(
        (j for j in range(len(rows)) if not any(
            all(a <= b for a, b in zip(rows[i], rows[j], strict=True))
            and (rows[i] != rows[j] or i < j) for i in range(len(rows)) if i != j)),
        key=lambda j: (rows[j], j))
    assert front_of(keys) == expected


# --- the search: numpy pass against one layout at a time ----------------------------------------

BASE = {"models.reference": "actor", "workload.prompts_per_step": 64,
        "workload.samples_per_prompt": 4, "workload.prompt_len": 1024,
        "workload.response_len": 2048, "workload.max_response_len": 4096,
        "workload.mini_batches": 2}
SCENARIOS = {  # name: (flags, staleness, shared critic, group sizes to check (None: all))
    "ppo-dense-gqa-offload": ({"algorithm": "ppo", "models.actor": "qwen2.5-7b",
                               "models.critic": "qwen2.5-7b", "models.reward": "qwen2.5-7b",
                               "cluster.gpu": "h100-sxm", "cluster.nodes": 2,
                               "cluster.gpus_per_node": 4}, 0, False, None),
    "ppo-70b-shared-critic-stale": ({"algorithm": "ppo", "models.actor": "llama-3.1-70b",
                                     "models.critic": "llama-3.1-70b",
                                     "cluster.gpu": "h100-sxm", "cluster.nodes": 1}, 1, True, None),
    "grpo-moe-no-host-link": ({"algorithm": "grpo", "models.actor": "qwen3-30b-a3b",
                               "cluster.gpu": "b200", "cluster.nodes": 1}, 1, False, None),
    "grpo-mla-offload": ({"algorithm": "grpo", "models.actor": "deepseek-v3",  # fits on 64
                          "cluster.gpu": "h100-sxm", "cluster.nodes": 8}, 0, False, (64,)),
    "dpo-dense-no-offload": ({"algorithm": "dpo", "models.actor": "llama-3.1-8b",
                              "cluster.gpu": "l40s", "cluster.nodes": 1,
                              "cluster.gpus_per_node": 4}, 0, False, None),
    "sft-interleaved": ({"algorithm": "sft", "models.actor": "qwen2.5-7b",  # pp 2: vp 1, 2
                         "cluster.gpu": "h100-sxm", "cluster.nodes": 1}, 0, False, None),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_numpy_pricing_equals_one_layout_at_a_time(name):
    flags, staleness, shared, sizes = SCENARIOS[name]
    sc = load_scenario(None, {**BASE, **flags})
    space = build_space(sc, staleness=staleness, shared=shared)
    heads = heads_for(sc, shared)
    reference = replace(space, candidates={}, priced=0)  # priced again, one layout at a time
    kept = 0
    for task in space.tasks:
        for g in sizes or space.pools[0].sizes:
            scalar = _candidates(reference, space.pools[0], task, g, heads, one_at_a_time=True)
            if task.name == "actor.training" and space.generation is not None:
                scalar = hide_refit(space, 0, scalar)  # as build_space leaves them
            assert space.candidates.get((task.name, 0, g), []) == scalar, (task.name, g)
            kept += len(scalar)
    assert kept > 0
    if sizes is None:
        assert space.priced == reference.priced
    else:
        vectorised = replace(space, candidates={}, priced=0)
        for task in space.tasks:
            for g in sizes:
                _candidates(vectorised, space.pools[0], task, g, heads)
        assert vectorised.priced == reference.priced > 0
    assert all(type(n) is int for cands in space.candidates.values() for c in cands
               for n in (*c.time_ms.values(), *c.transient_mib.values(), c.persistent_mib,
                         c.host_mib, *c.refit_ms, *c.refit_fixed_ms, *c.done_ms))
    # the layouts are built without validation (`LayoutVariants.__getitem__`): they pass it
    for cands in space.candidates.values():
        for c in cands:
            assert c.layout == Layout.model_validate(c.layout.model_dump()), c.layout
            assert all(type(v) in (int, str, bool, type(None)) for v in dict(c.layout).values())


# --- the cost functions: arrays of options against each layout ----------------------------------

SPECS = {name: load_model(name) for name in ("qwen2.5-7b", "qwen3-30b-a3b", "deepseek-v3")}
H100 = load_profile("h100-sxm")
SEQ = 4096.0

variants = st.lists(st.tuples(st.sampled_from([0, 1, 2, 3]),
                              st.sampled_from(["none", "selective", "full"]),
                              st.sampled_from([1, 2, 4]),
                              st.sampled_from(["none", "optimizer", "params", "both"]),
                              st.sampled_from([1, 2, 4])),  # vp (1 where pp is)
                    min_size=1, max_size=8)
shapes = st.fixed_dictionaries({"dp": st.sampled_from([1, 2, 4]), "tp": st.sampled_from([1, 2, 4]),
                                "pp": st.sampled_from([1, 2, 3, 4]),
                                "cp": st.sampled_from([1, 2])})


def _each(value, n: int) -> list:
    return np.broadcast_to(value, n).tolist()


def _assert_elementwise(vectorised, scalars: list) -> None:
    """Every field of the array breakdown equals the scalar breakdowns' (exactly)."""
    for f in fields(vectorised):
        assert _each(getattr(vectorised, f.name), len(scalars)) == [
            getattr(s, f.name) for s in scalars], f.name


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(SPECS)), shape=shapes, options=variants,
       ep=st.sampled_from([1, 2]), head=st.sampled_from(list(Head)))
def test_array_options_equal_scalar_layouts(model, shape, options, ep, head):
    spec = SPECS[model]
    ep = ep if spec.moe and shape["dp"] * shape["cp"] * shape["tp"] % ep == 0 else 1
    zero, ckpt, mb, offload, vp = (np.array(column) for column in zip(*options, strict=True))
    vp = vp if shape["pp"] > 1 else np.ones_like(vp)  # interleaving needs a pipeline
    lays = LayoutVariants(**shape, ep=ep, sp=shape["tp"] > 1, zero=zero, checkpointing=ckpt,
                          micro_batch=mb, offload=offload, vp=vp)
    one = list(lays)
    micro = np.maximum(1, 32 / (lays.dp * mb))  # 1F1B micro-batches per rank
    _assert_elementwise(
        memory_training_per_gpu(spec, lays, seq_len=SEQ, micro_batches=micro, head=head),
        [memory_training_per_gpu(spec, lay, seq_len=SEQ, micro_batches=m, head=head)
         for lay, m in zip(one, micro.tolist(), strict=True)])
    _assert_elementwise(memory_forward_per_gpu(spec, lays, seq_len=SEQ, head=head),
                        [memory_forward_per_gpu(spec, lay, seq_len=SEQ, head=head) for lay in one])
    _assert_elementwise(T.time_train(spec, head, lays, H100, 64, SEQ, 2),
                        [T.time_train(spec, head, lay, H100, 64, SEQ, 2) for lay in one])
    _assert_elementwise(T.time_forward(spec, head, lays, H100, 64, SEQ),
                        [T.time_forward(spec, head, lay, H100, 64, SEQ) for lay in one])
    kv = np.array([o[2] for o in options]) * 3 * int(SEQ)  # KV cache sizes
    lay = one[0]
    _assert_elementwise(
        memory_generation_per_gpu(spec, lay, kv_tokens=kv, decode_batch=16, resharding=True),
        [memory_generation_per_gpu(spec, lay, kv_tokens=k, decode_batch=16, resharding=True)
         for k in kv.tolist()])


def test_each_variant_peaks_on_its_own_pipeline_stage():
    """The peak stage is chosen per variant: without checkpointing the first stage's in-flight
    activations dominate, with full recompute the last stage's vocabulary logits do."""
    spec = SPECS["qwen2.5-7b"]
    lays = LayoutVariants(dp=1, pp=4, micro_batch=np.array([1, 1]),
                          checkpointing=np.array(["none", "full"]))
    peak = memory_training_per_gpu(spec, lays, seq_len=SEQ, micro_batches=8)
    assert peak.pipeline_stage.tolist() == [
        memory_training_per_gpu(spec, lay, seq_len=SEQ, micro_batches=8).pipeline_stage
        for lay in lays] == [0, 3]

"""`states.stages_that_can_peak`: pricing only the pipeline stages whose memory can be the
largest gives the same peak breakdown — every component, and the stage it is on — as pricing
every stage, for dense models, MoE models with dense layers among the MoE ones, uneven splits
and arrays of layout variants."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest

from planner.cost import generation, memory, states
from planner.cost.memory import MemoryBreakdown
from planner.cost.variants import LayoutVariants
from planner.specs.model import load_model, spec_from_hf_config
from tests.conftest import REPO


def _irregular_moe():
    """Qwen3-235B-A22B with dense layers scattered among its MoE ones: middle stages of the
    same layer count differ in their MoE layers."""
    cfg = json.loads((REPO / "model_specs" / "qwen3-235b-a22b.json").read_text())
    cfg["mlp_only_layers"] = [0, 5, 6, 7, 20, 47, 48, 90]
    return spec_from_hf_config(cfg, "irregular", "test")


MODELS = {"dense": lambda: load_model("llama-3.1-70b"),
          "first-dense": lambda: load_model("deepseek-v3"),
          "irregular": _irregular_moe}
SPLITS = [(pp, end) for pp in (2, 4, 8, 16) for end in (None, "first", "last")]


def _uneven(layers: int, pp: int, end: str | None) -> dict:
    """`end` holds what is left once every other stage has one layer fewer than an even
    split gives it (Megatron's rule: the rest split evenly)."""
    if end is None:
        return {}
    middle = layers // pp - 1
    return {f"{end}_stage_layers": layers - (pp - 1) * middle}


def _every_stage(spec, pp, first=None, last=None):
    return tuple(range(pp))


def _same(a: MemoryBreakdown, b: MemoryBreakdown) -> None:
    for f in fields(MemoryBreakdown):
        assert np.array_equal(getattr(a, f.name), getattr(b, f.name)), f.name


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("pp", "end"), SPLITS)
def test_training_and_forward_peaks_match_every_stage(model, pp, end, monkeypatch):
    spec = MODELS[model]()
    variants = LayoutVariants(
        dp=4, tp=2, pp=pp, **_uneven(spec.num_hidden_layers, pp, end),
        zero=np.array([0, 1, 3, 3, 3]), micro_batch=np.array([1, 1, 2, 4, 1]),
        checkpointing=np.array(["none", "full", "selective", "none", "full"]),
        offload=np.array(["none", "none", "optimizer", "params", "both"]))
    priced = []
    for stages in (states.stages_that_can_peak, _every_stage):
        monkeypatch.setattr(memory, "stages_that_can_peak", stages)
        priced.append((
            memory.memory_training_per_gpu(spec, variants, seq_len=4096, micro_batches=6),
            memory.memory_training_per_gpu(spec, variants[2], seq_len=4096, micro_batches=3),
            memory.memory_forward_per_gpu(spec, variants, seq_len=4096)))
    for ours, every in zip(*priced, strict=True):
        _same(ours, every)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("pp", [2, 4, 8, 16])
def test_generation_peak_and_kv_fit_match_every_stage(model, pp, monkeypatch):
    spec = MODELS[model]()
    variants = LayoutVariants(dp=2, tp=4, pp=pp, kv_cache_tokens=np.array([4096, 65536, 10**6]))
    priced = []
    for stages in (states.stages_that_can_peak, _every_stage):
        monkeypatch.setattr(generation, "stages_that_can_peak", stages)
        priced.append((generation.memory_generation_per_gpu(spec, variants, kv_tokens=variants
                                                            .kv_cache_tokens, decode_batch=256),
                       generation.kv_tokens_that_fit(spec, variants[0], 70e9, 256)))
    _same(priced[0][0], priced[1][0])
    assert priced[0][1] == priced[1][1]


def test_the_first_last_and_one_middle_stage_of_each_kind_are_kept():
    dense = load_model("llama-3.1-70b")  # 80 layers: 16 stages of 5
    assert states.stages_that_can_peak(dense, 16) == (0, 1, 15)
    assert states.stages_that_can_peak(dense, 2) == (0, 1)
    assert states.stages_that_can_peak(dense, 1) == (0,)
    # 94 layers in 8: 12 each, the last two 11 (as evenly as possible)
    irregular = _irregular_moe()
    kept = states.stages_that_can_peak(irregular, 8)
    assert kept[0] == 0 and kept[-1] == 7 and len(kept) < 8

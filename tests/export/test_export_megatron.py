"""Megatron-LM: one argument array per trainable role, flags from exports.md, start-up checks."""

from __future__ import annotations

import re
import shlex

import pytest

from planner.errors import InputError
from planner.export import ExportError, export
from planner.export.megatron import MEGATRON_FLAGS
from tests.export.plans import (
    FIVE_RANKS,
    colocated,
    edited,
    ppo_disaggregated,
    ppo_scenario,
    priced,
    scenario,
)


def arrays(text: str) -> dict[str, list[str]]:
    """NAME=( words ) blocks → the shell words inside."""
    return {name: shlex.split(body, comments=True)
            for name, body in re.findall(r"^(\w+)_ARGS=\((.*?)^\)", text, re.M | re.S)}


def values(words: list[str]) -> dict[str, str | None]:
    return {w: (words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--")
                else None) for i, w in enumerate(words) if w.startswith("--")}


def test_ppo_roles():
    sc = ppo_scenario()
    result = export(priced(sc, ppo_disaggregated()), sc, "megatron")
    blocks = arrays(result.text)
    assert set(blocks) == {"ACTOR", "CRITIC"}
    for words in blocks.values():
        args = values(words)
        assert set(args) <= MEGATRON_FLAGS
        assert args["--tensor-model-parallel-size"] == "2"
        assert "--sequence-parallel" in args and "--bf16" in args
        assert "--use-distributed-optimizer" in args
        micro, global_batch = int(args["--micro-batch-size"]), int(args["--global-batch-size"])
        assert global_batch % (micro * 4) == 0  # DP 4
    assert values(blocks["ACTOR"])["--recompute-granularity"] == "full"


def test_uneven_pipeline():
    sc = scenario(**FIVE_RANKS)  # 24 layers over 5 stages: 5, 5, 5, 5, 4
    result = export(priced(sc, colocated(gpus=5, gen={"dp": 5}, ref={"dp": 5},
                                         train={"dp": 1, "pp": 5, "micro_batch": 2,
                                                "last_stage_layers": 4})),
                    sc, "megatron")
    args = values(arrays(result.text)["ACTOR"])
    assert args["--pipeline-model-parallel-size"] == "5"
    assert args["--decoder-last-pipeline-num-layers"] == "4"
    assert "--decoder-first-pipeline-num-layers" not in args  # the first is a middle stage
    assert "actor: uneven pipeline stages over 24 layers: 5, 5, 5, 5, 4" in result.notes


def _uneven_actor(gpus: int = 8, **train):
    sc = scenario(**(FIVE_RANKS if gpus == 5 else {}))  # qwen2.5-0.5b: 24 layers
    return export(priced(sc, colocated(gpus=gpus, gen={"dp": gpus}, ref={"dp": gpus}, train={
        "dp": 1, "micro_batch": 1, **train})), sc, "megatron")


def test_uneven_first_and_last_stages_are_flags():
    result = _uneven_actor(pp=8, first_stage_layers=2, last_stage_layers=4)  # 2, 3 × 6, 4
    args = values(arrays(result.text)["ACTOR"])
    assert (args["--decoder-first-pipeline-num-layers"],
            args["--decoder-last-pipeline-num-layers"]) == ("2", "4")
    assert "--account-for-embedding-in-pipeline-split" not in args
    assert "actor: uneven pipeline stages over 24 layers: 2, 3, 3, 3, 3, 3, 3, 4" in result.notes


def test_uneven_interleaved_stages_take_the_chunk_count():
    """Megatron's validate_args wants --num-virtual-stages-per-pipeline-rank with uneven
    stages, not layers per chunk: stages of 4, 8, 8, 4 in 2 chunks each."""
    result = _uneven_actor(pp=4, vp=2, first_stage_layers=4, last_stage_layers=4, dp=2)
    args = values(arrays(result.text)["ACTOR"])
    assert args["--num-virtual-stages-per-pipeline-rank"] == "2"
    assert "--num-layers-per-virtual-pipeline-stage" not in args
    assert args["--decoder-first-pipeline-num-layers"] == "4"


def test_a_split_interleaved_by_accounting_for_the_embedding():
    """Stages of 4, 5, 5, 5, 5 in 5 chunks: 4 does not split into 5 chunks, so not as counts;
    Megatron runs it as --account-for-embedding-in-pipeline-split (the embedding a layer: 25
    over 5 ranks, 5 chunks of 1, the first chunk the embedding alone)."""
    result = _uneven_actor(gpus=5, pp=5, vp=5, first_stage_layers=4)
    args = values(arrays(result.text)["ACTOR"])
    assert "--account-for-embedding-in-pipeline-split" in args
    assert "--account-for-loss-in-pipeline-split" not in args
    assert "--decoder-first-pipeline-num-layers" not in args
    assert args["--num-virtual-stages-per-pipeline-rank"] == "5"


def test_an_edited_plan_with_a_split_megatron_cannot_run_is_refused():
    """A plan JSON edited after pricing is checked again at export: the field and the fix."""
    sc = scenario()
    plan = priced(sc, colocated(train={"dp": 2, "pp": 4, "micro_batch": 1}))
    plan["layouts"]["actor"]["training"]["last_stage_layers"] = 5  # 19 over 3: uneven
    with pytest.raises(ExportError, match=r"layouts\.actor\.training\.last_stage_layers: the "
                       r"other 3 stage\(s\) must split the remaining 19"):
        export(plan, sc, "megatron")


def test_tensor_parallel_must_divide_the_heads():
    """Refused before any export: `evaluate` checks the plan as the search would."""
    sc = scenario()  # qwen2.5-0.5b: 14 heads
    with pytest.raises(InputError, match="tp 4 does not divide the 14 attention heads"):
        priced(sc, colocated(train={"dp": 2, "tp": 4, "micro_batch": 2}))


def test_global_batch_must_tile():
    sc = scenario()
    plan = edited(priced(sc, colocated(train={"dp": 8, "zero": 1, "micro_batch": 2})),
                  "actor", "training", micro_batch=3)  # evaluate refuses 3: 16 per rank
    with pytest.raises(ExportError, match="--global-batch-size 128"):
        export(plan, sc, "megatron")


@pytest.mark.parametrize("fmt", ["megatron", "verl", "deepspeed", "openrlhf"])
def test_training_software_the_export_does_not_set_is_a_note(fmt):
    """A plan priced with non-default training software says so on export: no exporter writes
    those switches, so the user must."""
    plain = scenario()
    fp8 = scenario(**{"runtime.fp8_training": "transformer_engine",
                      "runtime.attention_kernel": "fa2"})
    plan = priced(fp8, colocated())
    note = [n for n in export(plan, fp8, fmt).notes if n.startswith("runtime:")]
    assert len(note) == 1
    assert "fp8_training transformer_engine" in note[0] and "attention_kernel fa2" in note[0]
    assert not any(n.startswith("runtime:") for n in export(plan, plain, fmt).notes)

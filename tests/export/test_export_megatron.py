"""Megatron-LM: one argument array per trainable role, flags from exports.md, start-up checks."""

from __future__ import annotations

import re
import shlex

import pytest

from planner.errors import InputError
from planner.export import ExportError, export
from planner.export.megatron import MEGATRON_FLAGS
from tests.export.plans import colocated, ppo_disaggregated, ppo_scenario, priced, scenario


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
    sc = scenario()  # 24 layers over 5 stages: 5, 5, 5, 5, 4
    result = export(priced(sc, colocated(gpus=5, gen={"dp": 5}, ref={"dp": 5},
                                         train={"dp": 1, "pp": 5, "micro_batch": 2})),
                    sc, "megatron")
    args = values(arrays(result.text)["ACTOR"])
    assert args["--pipeline-model-parallel-size"] == "5"
    assert args["--decoder-last-pipeline-num-layers"] == "4"


def test_tensor_parallel_must_divide_the_heads():
    """Refused before any export: `evaluate` checks the plan as the search would."""
    sc = scenario()  # qwen2.5-0.5b: 14 heads
    with pytest.raises(InputError, match="tp 4 does not divide the 14 attention heads"):
        priced(sc, colocated(train={"dp": 2, "tp": 4, "micro_batch": 2}))


def test_global_batch_must_tile():
    sc = scenario()
    plan = priced(sc, colocated(train={"dp": 8, "zero": 1, "micro_batch": 3}))
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

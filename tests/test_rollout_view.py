"""The rollout explained: the plan view's Rollout section, its regime sentence, and the
timeline's running-sequences axes."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from planner.cli.views import regime_sentence, rollout_section
from planner.cost.report import percentile
from planner.pictures.timeline import RUNNING_LABEL, draw, render
from planner.plan import InterModel, Plan
from tests.conftest import REPO
from tests.test_evaluate_cli import PLAN, SCENARIO

DPO_SCENARIO = str(REPO / "examples/dpo-qwen3-8b.yaml")
DPO_PLAN = {"groups": [{"name": "g0", "gpus": 8}],
            "layouts": {"actor": {"training": {"group": "g0", "dp": 8, "zero": 2}},
                        "reference": {"assessment": {"group": "g0", "dp": 8}}},
            "inter_model": {"placement": "colocated"}}


def rollout(**changes) -> dict:
    """A hand-made `breakdown.rollout`: 100 s of generation, throughput-bound by default."""
    base = {"kv_cache_tokens": 2_000_000, "max_num_seqs": 256, "peak_running": 256,
            "mean_running": 140.0, "regime": "throughput-bound",
            "parts": {"prefill": 4.0, "recompute": 0.0, "decode": 80.0, "decode_tail": 10.0,
                      "overhead": 6.0},
            "tail_s": 12.0, "preemptions": 0, "recomputed_tokens": 0,
            "carried_tokens_per_step": 0.0, "steps_spanned": 1,
            "response_lengths": {"mean": 4096.0, "p50": 3412.0, "p90": 8192.0, "max": 8192},
            "running": [[0.0, 256.0], [50.0, 128.0]]}
    return {**base, **changes}


def words(text: str) -> str:
    """Whitespace-normalised, so a sentence rich wrapped still matches."""
    return " ".join(text.split())


def shown(parts: list) -> str:
    """What the view prints for `parts`, at 100 columns."""
    console = Console(width=100, record=True, file=StringIO())
    for part in parts:
        console.print(part)
    return words(console.export_text())


@pytest.fixture(scope="module")
def priced(tmp_path_factory) -> dict:
    """The shipped example, priced once: its plan JSON."""
    from typer.testing import CliRunner

    from planner.cli.main import app

    out = tmp_path_factory.mktemp("priced") / "plan.json"
    result = CliRunner().invoke(app, ["evaluate", SCENARIO, PLAN, "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_evaluate_view_explains_the_rollout(cli, priced):
    result = cli("evaluate", SCENARIO, PLAN)
    assert result.exit_code == 0, result.output
    out, r = result.stdout, priced["breakdown"]["rollout"]
    # after the per-group iteration table, before memory
    assert out.index("One iteration") < out.index("Rollout on g0") < out.index("Memory per GPU")
    assert "(slowest of 16 replicas)" in out
    assert f"bf16 weights, bf16 KV cache of {r['kv_cache_tokens']:,} tokens per replica" in out
    assert f"peak {r['peak_running']} of max_num_seqs {r['max_num_seqs']}" in out
    for label in ("prefill", "decode to 90% done", "decode after 90% done", "engine overhead",
                  "responses (tokens): mean 4,096"):
        assert label in out
    assert words(regime_sentence(r, InterModel())) in words(out)


def test_dpo_view_has_no_rollout(cli, write):
    result = cli("evaluate", DPO_SCENARIO, str(write("dpo.json", DPO_PLAN)))
    assert result.exit_code == 0, result.output
    assert "One iteration" in result.stdout and "Rollout" not in result.stdout


def test_each_regime_has_its_sentence():
    tail = regime_sentence(rollout(regime="tail-bound", tail_s=45.0))
    assert tail.startswith("tail-bound: the last 10% of responses take 45.00 s of 100.00 s;")
    for cut in ("partial rollouts (allow --max-staleness 1)", "a lower max_response_len",
                "inter-stage fusion"):
        assert cut in tail
    kv = regime_sentence(rollout(regime="KV-bound", kv_cache_tokens=200_000, peak_running=195))
    assert kv.startswith("KV-bound: the KV cache (200,000 tokens per replica) caps the running "
                         "batch at 195 of 256;")
    for help_ in ("more KV memory would help", "offload co-located state during generation",
                  "more tensor parallelism", "fewer models resident on the group"):
        assert help_ in kv
    assert regime_sentence(rollout()) == (
        "throughput-bound: the replicas run full batches; more GPUs for generation would cut it")
    assert len({tail, kv, regime_sentence(rollout())}) == 3


def test_kv_bound_by_recomputation():
    parts = {**rollout()["parts"], "recompute": 15.0, "decode": 65.0}
    preempted = regime_sentence(rollout(regime="KV-bound", parts=parts, preemptions=700,
                                        recomputed_tokens=9_000_000))
    assert "recomputing preempted sequences takes 15.00 s of 100.00 s" in preempted
    assert "more KV memory would help" in preempted
    # the cap is the replica's share when that is below max_num_seqs
    small_share = regime_sentence(rollout(regime="KV-bound", peak_running=40,
                                          share_per_replica=64))
    assert "caps the running batch at 40 of 64" in small_share


def test_remedies_already_in_the_plan_are_not_offered():
    fused = regime_sentence(rollout(regime="tail-bound", tail_s=45.0),
                            InterModel(inter_stage_fusion=True))
    assert "inter-stage fusion" not in fused and "a lower max_response_len" in fused
    offloaded = regime_sentence(rollout(regime="KV-bound", peak_running=100),
                                InterModel(offload_during_generation=True))
    assert "offload co-located state" not in offloaded and "more tensor parallelism" in offloaded


def test_section_shows_preemptions_and_carried_tokens_only_when_there_are_some():
    layout = {"group": "g1", "dp": 4}
    plain = shown(rollout_section(rollout(), layout, InterModel()))
    assert "Rollout on g1: 100.00 s (slowest of 4 replicas), throughput-bound" in plain
    assert "decode to 90% done" in plain and "80.00 s (80%)" in plain
    assert "the last 10% take 12.00 s" in plain
    assert "preemptions" not in plain and "carried" not in plain
    busy = shown(rollout_section(rollout(preemptions=700, recomputed_tokens=9_000_000,
                                         carried_tokens_per_step=1_234_567.0, steps_spanned=3,
                                         tail_s=0.0), layout, InterModel()))
    assert "700 preemptions; 9,000,000 tokens recomputed" in busy
    assert "1,234,567 tokens carried per step; the longest response spans 3 steps" in busy
    assert "the last 10% take" not in busy


def test_timeline_draws_the_running_sequences(cli, tmp_path):
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for path in (first, second):
        assert cli("evaluate", SCENARIO, PLAN, "--timeline", str(path)).exit_code == 0
    svg = first.read_bytes()
    assert RUNNING_LABEL.encode() in svg and b"90% done at" in svg
    assert b"max_num_seqs" in svg and b"g0 (32 GPUs)" in svg  # the lanes are still there
    assert svg == second.read_bytes()  # same plan, same bytes


def test_timeline_without_a_rollout_draws_the_lanes_alone(cli, write, tmp_path, priced):
    dpo = tmp_path / "dpo.svg"
    result = cli("evaluate", DPO_SCENARIO, str(write("dpo.json", DPO_PLAN)), "--timeline",
                 str(dpo))
    assert result.exit_code == 0, result.output
    text = dpo.read_text()
    assert "One iteration" in text and "g0 (8 GPUs)" in text
    assert RUNNING_LABEL not in text and "90% done" not in text
    # an older plan JSON, written before rollouts were explained
    breakdown = {k: v for k, v in priced["breakdown"].items() if k != "rollout"}
    old = Plan.model_validate({**priced, "breakdown": breakdown})
    assert len(draw(old).axes) == 1
    assert len(draw(Plan.model_validate(priced)).axes) == 2
    assert RUNNING_LABEL.encode() not in render(old, "svg")


def test_smaller_tp_is_advised_only_when_it_priced_faster():
    faster = regime_sentence(rollout(smaller_tp={"tp": 1, "dp": 8, "time_s": 80.0}))
    assert faster.endswith("more GPUs for generation would cut it, and so would TP 1 with 8 "
                           "replicas (80.00 s)")
    slower = regime_sentence(rollout(smaller_tp={"tp": 2, "dp": 4, "time_s": 120.0}))
    assert slower.endswith("would cut it (TP 2 with 4 replicas prices slower: 120.00 s)")
    assert "and so would" not in slower


def test_the_advice_follows_what_was_priced(cli, write):
    """issue 22: GRPO on a 7B over 8 MI300Xs, whose xGMI gives a TP-2 pair one 64 GB/s link.
    With 2,048 rollouts TP 1 prices fastest: a TP 1 plan is told nothing about smaller TP, a
    TP 2 plan is told TP 1 would be faster, with the time it was priced at. With 256 short
    ones the replicas' batches are small and TP 2 wins: its plan says TP 1 prices slower."""
    from tests.conftest import grpo_scenario

    def rollouts(prompts: int, response: int) -> dict[int, dict]:
        sc = write("sc.yaml", grpo_scenario(
            models={"actor": "qwen2.5-7b", "reference": "none", "reward": "verifier"},
            workload={"prompts_per_step": prompts, "samples_per_prompt": 8, "prompt_len": 256,
                      "response_len": response, "max_response_len": 2 * response},
            cluster={"gpu": "mi300x", "nodes": 1, "gpus_per_node": 8}))
        out = {}
        for tp in (1, 2):
            plan = {"groups": [{"name": "g0", "gpus": 8}],
                    "layouts": {"actor": {"generation": {"group": "g0", "dp": 8 // tp, "tp": tp},
                                          "training": {"group": "g0", "dp": 8, "zero": 3}}},
                    "inter_model": {"placement": "colocated"}}
            result = cli("evaluate", str(sc), str(write(f"tp{tp}.json", plan)), "--json")
            assert result.exit_code == 0, result.output
            out[tp] = json.loads(result.stdout)["breakdown"]["rollout"]
        return out

    many, few = rollouts(256, 1024), rollouts(32, 512)
    for out in (many, few):
        assert out[1]["smaller_tp"] is None
        assert "TP 1" not in regime_sentence(out[1]) and "smaller TP" not in regime_sentence(out[1])
        alt = out[2]["smaller_tp"]
        assert (alt["tp"], alt["dp"]) == (1, 8)
        assert alt["time_s"] == pytest.approx(sum(out[1]["parts"].values()))
    assert sum(many[1]["parts"].values()) < sum(many[2]["parts"].values())
    assert "and so would TP 1 with 8 replicas" in regime_sentence(many[2])
    assert sum(few[1]["parts"].values()) > sum(few[2]["parts"].values())
    assert "(TP 1 with 8 replicas prices slower" in regime_sentence(few[2])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 1 << 20), min_size=1, max_size=60),
       st.sampled_from([0, 10, 25, 50, 75, 90, 95, 99, 100]))
def test_response_length_percentiles_are_numpys(lengths, q):
    """The plan's response-length percentiles are np.percentile's, to the last bit (computed
    without it: `report.percentile`)."""
    values = np.array(lengths, dtype=np.int64)
    assert percentile(values, q) == float(np.percentile(values, q))

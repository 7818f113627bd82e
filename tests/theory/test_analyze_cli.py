"""`rlplan analyze` end to end: a paper-canonical model (MHA, two-projection FFN) read from a
config.json reproduces FORMULAS.md through the CLI's JSON to relative error < 1e-9, and the
JSON has DESIGN.md's shape."""

from __future__ import annotations

import json

import pytest
from theory_literal import (
    MKV,
    Cf_pi,
    Cgen,
    Cprefill,
    Df,
    P_pi,
    dpo_table_ix,
    intra_rows,
    ppo_table_ix,
)
from typer.testing import CliRunner

from planner.cli.main import app
from planner.theory.shape import TheoryModel

REL = 1e-9
# OPT-6.7B's shape as a canonical Transformer: MHA, two-projection FFN.
CANONICAL = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 16384,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
             "vocab_size": 50272, "rlplan": {"gated_ffn": False}}
SHAPE = TheoryModel(L=32, d=4096, d_ff=16384, h=32, V=50272)
B, K, S, T = 64, 8, 512, 1024


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b))


def run(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def scenario(tmp_path):
    (tmp_path / "canonical").mkdir()
    (tmp_path / "canonical" / "config.json").write_text(json.dumps(CANONICAL))

    def write(algorithm: str, models: dict) -> str:
        path = tmp_path / f"{algorithm}.yaml"
        path.write_text(json.dumps({
            "algorithm": algorithm, "models": models,
            "workload": {"prompts_per_step": B, "samples_per_prompt": K, "prompt_len": S,
                         "response_len": T},
            "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8}}))
        return str(path)

    return write


def test_ppo_pipeline_reproduces_formulas(scenario):
    path = scenario("ppo", {"actor": "./canonical", "reference": "actor",
                            "reward": "./canonical", "critic": "./canonical"})
    theory = run("analyze", "pipeline", path)["theory"]
    assert set(theory["building_blocks"]) == {"actor", "reference", "reward", "critic"}
    actor = theory["building_blocks"]["actor"]
    m = S + T
    assert close(actor["params"], P_pi(SHAPE))
    assert close(actor["cf_tok"], Cf_pi(SHAPE, m))
    assert close(actor["c_prefill"], Cprefill(SHAPE, S))
    assert close(actor["c_gen"], Cgen(SHAPE, S, T))
    assert close(actor["m_kv"], MKV(SHAPE, m))
    assert close(actor["d_f"], Df(SHAPE, m))
    expected = ppo_table_ix(SHAPE, SHAPE, SHAPE, SHAPE, B, K, S, T, P_t=8)
    assert set(theory["inter_model"]) == set(expected)
    for config, (work, depth, memory) in expected.items():
        cell = theory["inter_model"][config]
        assert close(cell["work"], work) and close(cell["depth"], depth), config
        assert close(cell["memory"], memory), config
    assert set(theory["stages"]) == {"generation", "assessment", "training"}


def test_grpo_with_verifier_drops_reward_and_shared_critic(scenario):
    path = scenario("grpo", {"actor": "./canonical", "reward": "verifier"})
    theory = run("analyze", "pipeline", path)["theory"]
    assert set(theory["building_blocks"]) == {"actor", "reference"}
    assert "shared_actor_critic" not in theory["inter_model"]
    expected = ppo_table_ix(SHAPE, SHAPE, None, None, B, K, S, T, P_t=8)
    for config, (work, depth, memory) in expected.items():
        cell = theory["inter_model"][config]
        assert close(cell["work"], work) and close(cell["depth"], depth)
        assert close(cell["memory"], memory)


def test_dpo_pipeline(scenario):
    theory = run("analyze", "pipeline", scenario("dpo", {"actor": "./canonical"}))["theory"]
    assert "generation" not in theory["stages"]
    expected = dpo_table_ix(SHAPE, SHAPE, B, S, T, P_t=8)
    assert set(theory["inter_model"]) == set(expected)
    for config, (work, depth, memory) in expected.items():
        cell = theory["inter_model"][config]
        assert close(cell["work"], work) and close(cell["depth"], depth)
        assert close(cell["memory"], memory)


def test_intra_reproduces_tables_vii_viii(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CANONICAL))
    out = run("analyze", "intra", "--model", str(tmp_path), "--batch", "16", "--prompt-len",
              str(S), "--response-len", str(T), "--dp", "4", "--pp", "2", "--tp", "8")
    assert set(out) >= {"per_rank", "global"}
    (per_rank, global_) = intra_rows(SHAPE, 16, S + T, P_d=4, P_p=2, P_t=8)["3d"]
    for got, want in ((out["per_rank"], per_rank), (out["global"], global_)):
        assert all(close(got[k], w) for k, w in zip(("work", "depth", "memory"), want,
                                                    strict=True))


def test_human_view_reads_like_the_tables(scenario):
    path = scenario("ppo", {"actor": "./canonical", "critic": "./canonical"})
    result = CliRunner().invoke(app, ["analyze", "pipeline", path], catch_exceptions=False)
    assert result.exit_code == 0
    for text in ("Table I", "Table IV", "Table IX", "baseline", "cuts depth most",
                 "decode chain"):
        assert text in result.stdout


def test_bad_degree_is_bad_input(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CANONICAL))
    result = CliRunner().invoke(app, ["analyze", "intra", "--model", str(tmp_path), "--batch",
                                      "4", "--prompt-len", "8", "--response-len", "8",
                                      "--isolated-expert", "--dp", "2"])
    assert result.exit_code == 2 and "isolated-expert row varies P_e only" in result.stderr
    assert "Traceback" not in result.stderr

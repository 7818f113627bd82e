"""Nothing read silently (issue 15, item 3): duplicate keys, booleans where numbers go,
conflicting plan fields, model configs read exactly (experts, quantization, ids, sizes, names),
the MoE layer pattern, and objective options that would be ignored.

Every bad input is one `rlplan: error:` line naming the field (and the fix), exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner.errors import InputError
from planner.specs.files import read_json, read_yaml
from planner.specs.layers import MoELayers
from planner.specs.model import (
    MAX_LAYERS,
    list_models,
    load_model,
    models_dir,
    spec_from_hf_config,
)
from tests.conftest import DATA, REPO
from tests.test_cli import assert_bad_input

SCENARIO = REPO / "examples/grpo-qwen2.5-7b.yaml"
PLAN = REPO / "examples/plans/grpo-qwen2.5-7b-colocated.json"
QWEN_CONFIG = DATA / "hf_configs/qwen2.5-7b-instruct/config.json"


def scenario_dict() -> dict:
    return yaml.safe_load(SCENARIO.read_text())


def plan_dict() -> dict:
    return json.loads(PLAN.read_text())


def qwen_config(**changes) -> dict:
    return {**json.loads(QWEN_CONFIG.read_text()), **changes}


def moe_config(**changes) -> dict:
    """A small Qwen3-MoE-style config (every layer MoE unless changed)."""
    return {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 128, **changes}


# --- duplicate keys -------------------------------------------------------------------------

def test_duplicate_key_in_a_scenario_names_key_and_line(cli, write):
    text = SCENARIO.read_text().replace("workload:\n", "workload:\n  ppo_epochs: 2\n")
    assert text.count("ppo_epochs") == 2
    path = write("dup.yaml", text)
    line = next(n for n, ln in enumerate(text.splitlines(), 1)  # the second one
                if ln.startswith("  ppo_epochs: 1"))
    assert_bad_input(cli("validate", str(path)), "key 'ppo_epochs'", f"line {line}",
                     "appears twice")


def test_duplicate_key_in_a_plan_json_names_key_and_line(cli, write):
    text = '{"groups": [{"name": "g0", "gpus": 32}],\n "layouts": {},\n "groups": []}\n'
    path = write("plan.json", text)
    assert_bad_input(cli("evaluate", str(SCENARIO), str(path)), "key 'groups'", "line 3")


def test_duplicate_key_in_a_profile_and_a_model_config(cli, write, tmp_path):
    profile = (REPO / "hardware_profiles/h100-sxm.yaml").read_text()
    first = next(ln for ln in profile.splitlines() if ln.startswith("memory_gib:"))
    path = write("gpu.yaml", profile + f"\n{first}\n")
    assert_bad_input(cli("validate", str(path)), "key 'memory_gib'")
    text = QWEN_CONFIG.read_text().rstrip().removesuffix("}") + ',\n  "hidden_size": 1\n}\n'
    model = write("model/config.json", text)
    assert_bad_input(cli("validate", str(model)), "key 'hidden_size'",
                     f"line {len(text.splitlines()) - 1}")


def test_loader_allows_same_key_in_different_mappings_and_yaml_merges(tmp_path):
    j = tmp_path / "ok.json"
    j.write_text('{"a": {"x": 1, "s": "}{\\"x\\":"}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]}')
    assert read_json(j)["b"] == {"x": 2}
    y = tmp_path / "ok.yaml"
    y.write_text("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 5\n")
    assert read_yaml(y)["m"] == {"x": 5, "y": 2}  # a merge may be overridden: not a duplicate


def test_loader_finds_a_nested_duplicate_past_strings_that_look_like_keys(tmp_path):
    j = tmp_path / "nested.json"
    j.write_text('{"a": 1,\n "b": {"x": "\\"x\\": {",\n  "y": [1, {"x": 2}],\n  "x": 3}}')
    with pytest.raises(InputError, match=r"key 'x' appears twice .* line 4"):
        read_json(j)
    y = tmp_path / "nested.yaml"
    y.write_text("a:\n  - b: 1\n    c: 2\n    b: 3\n")
    with pytest.raises(InputError, match=r"key 'b' appears twice .* line 4"):
        read_yaml(y)


def test_yaml_exponent_without_a_dot_is_a_number(tmp_path):
    y = tmp_path / "n.yaml"
    y.write_text("a: 5e4\nb: 5\nc: 1.5E-3\nd: x5e4\n")
    assert read_yaml(y) == {"a": 50000.0, "b": 5, "c": 0.0015, "d": "x5e4"}


# --- strict numbers -------------------------------------------------------------------------

@pytest.mark.parametrize(("section", "field", "value", "fragment"), [
    ("workload", "prompts_per_step", True, "got true (a boolean)"),
    ("workload", "samples_per_prompt", 8.0, "write 8"),
    ("workload", "prompt_len", "1024", "(a string)"),
    ("search", "time_limit_s", True, "expects a number, got true"),
    ("search", "allow_shared_actor_critic", 1, "write true or false"),
    ("cluster", "nodes", False, "got false (a boolean)"),
])
def test_scenario_numbers_are_read_strictly(cli, write, section, field, value, fragment):
    raw = scenario_dict()
    raw[section][field] = value
    path = write("s.yaml", raw)
    assert_bad_input(cli("validate", str(path)), f"field '{section}.{field}'", fragment)


def test_a_float_field_still_takes_an_integer(cli, write):
    raw = scenario_dict()
    raw["search"]["time_limit_s"] = 10
    assert cli("validate", str(write("s.yaml", raw))).exit_code == 0


def test_profile_and_plan_numbers_refuse_booleans(cli, write):
    profile = yaml.safe_load((REPO / "hardware_profiles/h100-sxm.yaml").read_text())
    profile["bf16_tflops"] = True
    assert_bad_input(cli("validate", str(write("gpu.yaml", profile))), "field 'bf16_tflops'",
                     "(a boolean)")
    plan = plan_dict()
    plan["layouts"]["actor"]["generation"]["tp"] = True
    assert_bad_input(cli("evaluate", str(SCENARIO), str(write("p.json", plan))),
                     "layouts.actor.generation.tp", "(a boolean)")


def test_model_config_counts_refuse_booleans(cli, write):
    path = write("m/config.json", qwen_config(num_hidden_layers=True))
    assert_bad_input(cli("validate", str(path)), "field 'num_hidden_layers'", "(a boolean)")


# --- conflicting plan fields ----------------------------------------------------------------

def test_checkpointing_contradicting_recompute_is_refused(cli, write):
    plan = plan_dict()
    plan["layouts"]["actor"]["training"].update(checkpointing=True, recompute="none")
    assert_bad_input(cli("evaluate", str(SCENARIO), str(write("p.json", plan))),
                     "layouts.actor.training", "checkpointing true contradicts recompute 'none'")


@pytest.mark.parametrize(("flag", "mode"), [(True, "selective"), (True, "full"),
                                            (False, "none"), ("selective", "selective")])
def test_checkpointing_agreeing_with_recompute_is_read(flag, mode):
    from planner.plan import Layout

    assert Layout(group="g", checkpointing=flag, recompute=mode).checkpointing == mode


def test_staleness_on_a_colocated_plan_is_refused(cli, write):
    plan = plan_dict()
    plan["inter_model"]["staleness"] = 5
    assert_bad_input(cli("evaluate", str(SCENARIO), str(write("p.json", plan))),
                     "inter_model.staleness: 5", "its own group")


def test_plan_without_inter_model_is_refused(cli, write):
    plan = plan_dict()
    del plan["inter_model"]
    assert_bad_input(cli("evaluate", str(SCENARIO), str(write("p.json", plan))),
                     "field 'inter_model' is missing")


def test_cross_field_errors_do_not_say_top_level(cli, write):
    plan = plan_dict()
    plan["groups"].append(dict(plan["groups"][0]))
    result = cli("evaluate", str(SCENARIO), str(write("p.json", plan)))
    assert_bad_input(result, "names must be unique")
    assert "(top level)" not in result.stderr


# --- objective options ----------------------------------------------------------------------

@pytest.mark.parametrize("objective", ["cost", "time"])
def test_a_target_with_an_objective_that_ignores_it_is_refused(cli, objective):
    assert_bad_input(cli("validate", str(SCENARIO), "--objective", objective,
                         "--target-tokens-per-s", "50000"),
                     "search.target_tokens_per_s", f"the {objective} objective",
                     "--objective gpus")


def test_a_target_with_the_gpus_objective_is_read(cli):
    result = cli("validate", str(SCENARIO), "--objective", "gpus", "--target-tokens-per-s",
                 "50000")
    assert result.exit_code == 0, result.output


# --- model configs --------------------------------------------------------------------------

def test_num_experts_zero_is_dense_with_a_note(cli, write):
    cfg = moe_config(num_experts=0)
    spec = spec_from_hf_config(cfg, "m", "m")
    dense = spec_from_hf_config({k: v for k, v in cfg.items() if k != "num_experts"}, "m", "m")
    assert spec.moe is None and spec.params_total == dense.params_total
    assert any("num_experts 0" in n for n in spec.notes)
    result = cli("validate", str(write("m/config.json", cfg)))
    assert result.exit_code == 0 and "num_experts 0: a dense model" in result.stdout


@pytest.mark.parametrize("field", ["num_local_experts", "n_routed_experts"])
def test_zero_experts_under_other_spellings_is_refused(cli, write, field):
    cfg = moe_config(**{field: 0})
    del cfg["num_experts"]
    assert_bad_input(cli("validate", str(write("m/config.json", cfg))), f"field '{field}'",
                     "0 experts", f"remove {field}")


def test_quantization_config_is_read_and_shown(cli):
    spec = load_model("deepseek-v3")
    q = spec.quantization
    assert (q.method, q.weight_format, q.weight_bits, q.block) == ("fp8", "e4m3", 8, (128, 128))
    result = cli("validate", str(models_dir() / "deepseek-v3.json"))
    assert "quantization: fp8 (e4m3, block 128×128) — read (FP8 checkpoints roll out in FP8" \
        in result.stdout
    assert load_model("gpt-oss-20b").quantization.weight_bits == 4
    assert load_model("qwen3-8b").quantization is None


def test_quantization_is_a_scenario_note(cli):
    result = cli("validate", str(SCENARIO), "--actor", "gpt-oss-20b", "--json")
    notes = json.loads(result.stdout)["resolved"]["notes"]
    assert any(n.startswith("actor gpt-oss-20b: checkpoint quantization mxfp4")
               and n.endswith("trained and scored in bf16") for n in notes)
    fp8 = cli("validate", str(SCENARIO), "--actor", "deepseek-v3", "--json")
    assert any("rolled out with FP8 weights as stored" in n
               for n in json.loads(fp8.stdout)["resolved"]["notes"])


@pytest.mark.parametrize(("quant", "fragment"), [
    ("fp8", "field 'quantization_config': expects a mapping"),
    ({"fmt": "e4m3"}, "quantization_config.quant_method"),
    ({"quant_method": "awq", "bits": True}, "quantization_config.bits"),
])
def test_bad_quantization_config_is_one_line(cli, write, quant, fragment):
    path = write("m/config.json", qwen_config(quantization_config=quant))
    assert_bad_input(cli("validate", str(path)), fragment)


def test_hf_id_must_be_a_string(cli, write):
    path = write("m/config.json", qwen_config(_rlplan_hf_id=4096))
    assert_bad_input(cli("validate", str(path)), "field '_rlplan_hf_id'")
    spec = spec_from_hf_config(qwen_config(_rlplan_hf_id="org/name"), "m", "m")
    assert spec.hf_id == "org/name"


@pytest.mark.parametrize("flag", ["--actor", "--gpu"])
def test_a_name_too_long_for_a_path_is_a_name(cli, flag):
    result = cli("validate", str(SCENARIO), flag, "ü" * 5000)
    assert_bad_input(result, "unknown", "(5,000 characters)")
    assert len(result.stderr) < 600


@pytest.mark.parametrize(("field", "value"), [
    ("num_hidden_layers", 10**7), ("hidden_size", 10**9), ("vocab_size", 10**12),
    ("num_attention_heads", 10**6), ("max_position_embeddings", 10**16),
])
def test_sizes_are_bounded(cli, write, field, value):
    path = write("m/config.json", qwen_config(**{field: value}))
    assert_bad_input(cli("validate", str(path)), f"field '{field}': {value:,} is above the limit")


def test_mlp_only_layers_outside_the_model_are_refused(cli, write):
    path = write("m/config.json", moe_config(mlp_only_layers=[1, 8]))
    assert_bad_input(cli("validate", str(path)), "field 'mlp_only_layers'", "8 is not a layer")


# --- the MoE layer pattern ------------------------------------------------------------------

def _brute(cfg: dict) -> set[int]:
    """MoE layer indices by the configs' rules, one layer at a time (the modeling code's test)."""
    L = cfg["num_hidden_layers"]
    if "first_k_dense_replace" in cfg:
        k, f = cfg["first_k_dense_replace"], cfg.get("moe_layer_freq", 1)
        return {i for i in range(L) if i >= k and i % f == 0}
    s, skip = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers", [])
    return {i for i in range(L) if i not in skip and (i + 1) % s == 0}


PATTERNS = [
    {"num_hidden_layers": 8},
    {"num_hidden_layers": 9, "decoder_sparse_step": 2},
    {"num_hidden_layers": 10, "decoder_sparse_step": 3, "mlp_only_layers": [0, 2, 5, 7]},
    {"num_hidden_layers": 7, "decoder_sparse_step": 8},
    {"num_hidden_layers": 11, "first_k_dense_replace": 3},
    {"num_hidden_layers": 12, "first_k_dense_replace": 3, "moe_layer_freq": 2},
    {"num_hidden_layers": 12, "first_k_dense_replace": 0, "moe_layer_freq": 5},
    {"num_hidden_layers": 5, "first_k_dense_replace": 5},
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_moe_layer_pattern_counts_every_span_like_the_per_layer_rule(pattern):
    spec = spec_from_hf_config(moe_config(**pattern), "m", "m")
    want = _brute(moe_config(**pattern))
    if not want:  # no MoE layer: the modeling code builds a dense model, and so does rlplan
        assert spec.moe is None and any("no layer is MoE" in n for n in spec.notes)
        return
    layers = spec.moe.moe_layers
    L = pattern["num_hidden_layers"]
    for lo in range(-1, L + 2):
        for hi in range(lo, L + 3):
            assert layers.count(lo, hi) == len({i for i in want if lo <= i < hi}), (lo, hi)
    assert [i for i in range(L) if i in layers] == sorted(want)


def test_shipped_moe_models_count_per_stage_like_the_per_layer_rule():
    from planner.cost.states import params_per_gpu_stage, pipeline_stage_layers

    moe = [s for s in list_models() if s.moe]
    assert len(moe) >= 6  # Mixtral ×2, Qwen3-MoE ×2, DeepSeek ×2, gpt-oss ×2
    for spec in moe:
        cfg = json.loads((models_dir() / f"{spec.name}.json").read_text())
        want = _brute(cfg)
        assert spec.moe.moe_layers.count() == len(want), spec.name
        for pp in (1, 2, 3, 4, 8):
            for stage, span in enumerate(pipeline_stage_layers(spec.num_hidden_layers, pp)):
                got = params_per_gpu_stage(spec, pp=pp, stage=stage).moe_layers
                assert got == len(want & set(span)), (spec.name, pp, stage)


def test_a_deep_moe_config_is_stored_as_a_pattern():
    spec = spec_from_hf_config(moe_config(num_hidden_layers=MAX_LAYERS, decoder_sparse_step=2,
                                          mlp_only_layers=[1, 9_999]), "m", "m")
    layers = spec.moe.moe_layers
    assert layers.count() == MAX_LAYERS // 2 - 2
    assert len(json.dumps(layers.model_dump())) < 200  # no per-layer list anywhere


def test_moe_layers_refuse_exceptions_off_the_progression():
    with pytest.raises(ValueError, match="dense"):
        MoELayers(first=1, step=2, stop=10, dense=(2,))


def test_validate_describes_the_moe_layers(cli):
    result = cli("validate", str(models_dir() / "deepseek-v3.json"))
    assert "MoE layers: 58 of 61 (from layer 3)" in result.stdout


def test_shipped_models_load_strictly():
    # every shipped config passes the strict reader with its bounds (a regression guard for
    # the catalog: 8.0-style counts or out-of-range sizes would fail here)
    for path in sorted(Path(models_dir()).glob("*.json")):
        assert load_model(path.stem).name == path.stem

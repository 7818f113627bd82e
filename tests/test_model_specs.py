"""Model specs: the shipped catalog's parameter counts, HF config reading, architecture facts."""

from __future__ import annotations

import json
import shutil

import pytest

from planner.errors import InputError
from planner.specs.model import (
    count_params,
    list_models,
    load_model,
    load_model_path,
    models_dir,
    spec_from_hf_config,
)
from tests.conftest import DATA

EXPECTED = json.loads((DATA / "expected_params.json").read_text())["models"]
# DeepSeek-V3/R1 keep one routing-bias vector of E=256 per MoE layer (e_score_correction_bias,
# models.md's formula adds it); the reference `_computed_params` leave it out: 58 × 256.
KNOWN_EXTRA = {"deepseek-v3": 58 * 256, "deepseek-r1": 58 * 256}


def test_catalog_holds_every_reference_model():
    assert {s.name for s in list_models()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_counts_match_reference(name):
    spec, want = load_model(name), EXPECTED[name]
    counts = count_params(spec)
    extra = KNOWN_EXTRA.get(name, 0)
    assert counts.total == want["total"] + extra
    assert counts.active == want["active"] + extra
    assert counts.non_embedding == want["non_embedding"] + extra
    assert abs(counts.total / want["total"] - 1) < 0.005  # the 0.5 % bound, a fortiori


def test_names_are_case_insensitive():
    assert load_model("Qwen2.5-7B").name == "qwen2.5-7b"


def test_real_world_config_with_unknown_fields():
    spec = load_model_path(DATA / "hf_configs" / "qwen2.5-7b-instruct")  # a folder
    assert spec.name == "qwen2.5-7b-instruct"
    assert spec.params_total == EXPECTED["qwen2.5-7b"]["total"]  # same weights as the base
    assert spec.max_position_embeddings == 32768
    assert spec.qkv_bias and not spec.o_bias  # Qwen2 family, from modeling code
    assert spec.attention_kind == "gqa" and spec.head_dim == 128


def test_gpt2_field_names_and_two_projection_ffn():
    spec = load_model_path(DATA / "hf_configs" / "gpt2" / "config.json")
    H, L, V, P = 768, 12, 50257, 1024
    per_layer = (4 * H * H + 4 * H            # q, k, v, o with biases
                 + 2 * H * 4 * H + 4 * H + H   # fc (n_inner null → 4H) and proj with biases
                 + 2 * 2 * H)                  # two LayerNorms, weight and bias
    assert not spec.gated_ffn and spec.tie_word_embeddings
    assert spec.params_total == L * per_layer + V * H + P * H + 2 * H  # + wte, wpe, ln_f


def test_moe_spellings_and_layouts():
    mixtral, qwen_moe, deepseek = (load_model(n) for n in
                                   ("mixtral-8x7b-v0.1", "qwen3-30b-a3b", "deepseek-v3"))
    assert (mixtral.moe.num_experts, mixtral.moe.experts_per_token) == (8, 2)  # local_experts
    assert mixtral.moe.expert_intermediate_size == 14336  # intermediate_size is per expert
    assert (qwen_moe.moe.num_experts, qwen_moe.moe.expert_intermediate_size) == (128, 768)
    assert qwen_moe.moe.moe_layers.count() == 48  # every layer
    assert deepseek.moe.num_experts == 256  # n_routed_experts
    assert deepseek.moe.moe_layers.first == 3 and deepseek.moe.moe_layers.count() == 58
    assert deepseek.moe.num_shared_experts == 1


def test_mla_kv_cache_is_the_latent():
    spec = load_model("deepseek-v3")
    assert spec.attention_kind == "mla"
    assert spec.kv_cache_elements_per_token == 61 * (512 + 64)
    llama = load_model("llama-3.1-8b")
    assert llama.kv_cache_elements_per_token == 32 * 2 * 8 * 128


def test_explicit_head_dim_and_tied_embeddings():
    spec = load_model("qwen3-0.6b")
    assert spec.head_dim == 128 and spec.head_dim * spec.num_attention_heads != spec.hidden_size
    assert spec.tie_word_embeddings and count_params(spec).lm_head == 0


def test_traits_can_be_stated_in_the_config():
    base = json.loads((DATA / "hf_configs/qwen2.5-7b-instruct/config.json").read_text())
    plain = spec_from_hf_config({**base, "model_type": "llama"}, "x", "x")
    biased = spec_from_hf_config({**base, "model_type": "llama", "rlplan": {"qkv_bias": True}},
                                 "x", "x")
    assert biased.params_total - plain.params_total == 28 * (28 * 128 + 2 * 4 * 128)


def test_gemma2_defaults_to_tied_when_the_field_is_absent():
    cfg = json.loads((models_dir() / "gemma-2-9b.json").read_text())
    cfg.pop("tie_word_embeddings")
    assert spec_from_hf_config(cfg, "g", "g").tie_word_embeddings


@pytest.mark.parametrize(("change", "field", "fix"), [
    ({"num_key_value_heads": 5}, "num_key_value_heads", "divisor"),
    ({"hidden_size": -1}, "hidden_size", "greater than 0"),
    ({"num_attention_heads": 0}, "num_attention_heads", "greater than 0"),
    ({"vocab_size": None}, "vocab_size", "integer"),
    ({"num_experts": 8}, "num_experts_per_tok", "add"),
    ({"num_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok", "at most"),
    ({"head_dim": None, "hidden_size": 3583}, "head_dim", "add head_dim"),
    ({"rlplan": {"qk_norm": "everywhere"}}, "qk_norm", "head"),
])
def test_bad_configs_name_the_field(change, field, fix):
    base = json.loads((DATA / "hf_configs/qwen2.5-7b-instruct/config.json").read_text())
    with pytest.raises(InputError) as err:
        spec_from_hf_config({**base, **change}, "bad", "bad.json")
    assert field in str(err.value) and fix in str(err.value)


def test_missing_required_field(tmp_path):
    base = json.loads((DATA / "hf_configs/qwen2.5-7b-instruct/config.json").read_text())
    del base["num_hidden_layers"]
    with pytest.raises(InputError, match="num_hidden_layers' is missing; add it"):
        spec_from_hf_config(base, "bad", "bad.json")


def test_unknown_name_suggests_close_matches():
    with pytest.raises(InputError, match=r"did you mean llama-3\.1-8b"):
        load_model("llama-3.1-8")


def test_folder_without_config(tmp_path):
    shutil.copy(DATA / "hf_configs/gpt2/config.json", tmp_path / "other.json")
    with pytest.raises(InputError, match=r"no config\.json"):
        load_model(str(tmp_path))

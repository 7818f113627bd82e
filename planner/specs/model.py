"""Model specs read from Hugging Face `config.json` files (or a shipped name).

A `ModelSpec` is the architecture exactly as the cost model needs it: GQA, explicit head_dim,
gated or two-projection FFN, tied embeddings, biases, QK-norm, MoE (routed and shared experts,
dense first layers, router), DeepSeek MLA. Facts that live in a family's modeling code rather
than in its config (Qwen2's q/k/v bias, Qwen3's per-head QK-norm, Gemma-2's four norms per
layer, ...) come from `ARCHITECTURE_TRAITS`; a config may state them itself under an `rlplan`
key, e.g. `"rlplan": {"qkv_bias": true}`.

Read strictly: sizes are bounded (`MAX_*` below), the MoE layers are kept as a pattern
(`planner.specs.layers`, never a per-layer list), `quantization_config` is read into the spec
as information, and what rlplan decides on the reader's behalf is listed in `ModelSpec.notes`.

Parameter counts, exact by component (`count_params`), are at the end: the spec's own
`params_total` and `params_active` read them, so they live with the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from planner.errors import InputError
from planner.specs.files import (
    catalog_names,
    data_dir,
    looks_like_path,
    path_kind,
    read_json,
    shorten,
    unknown_name,
    validate_as,
)
from planner.specs.layers import MoELayers
from planner.specs.quantization import QuantizationSpec, read_quantization

QKNorm = Literal["none", "head", "full"]
NormKind = Literal["rmsnorm", "layernorm"]

# Sane maxima of a config's sizes: far beyond any published model, small enough that a typo or a
# fuzzed 10^16 is refused at load (naming the field) instead of running the search for hours.
# Published extremes: 126 layers (Llama 3.1 405B); FFN width 73,728 (PaLM 540B); 128 query heads
# (DeepSeek-V3); vocabulary 262,144 (Gemma 3); contexts of 10M tokens (Llama 4 Scout); 384
# routed experts (Kimi K2).
MAX_LAYERS = 10_000
MAX_WIDTH = 1 << 20  # hidden_size, FFN widths, head_dim, LoRA ranks: 14× PaLM's FFN
MAX_HEADS = 1 << 14
MAX_VOCAB = 1 << 24
MAX_POSITIONS = 1 << 30
MAX_EXPERTS = 1 << 16


class Traits(BaseModel):
    """Architecture facts not spelled out in config.json (defaults: a Llama-style block)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gated_ffn: bool = True  # SwiGLU/GeGLU: gate, up and down projections
    qkv_bias: bool = False  # bias on q/k/v only (Qwen2); `attention_bias` in config means q/k/v/o
    qk_norm: QKNorm = "none"  # "head": one norm of head_dim for q and for k; "full": over q and k
    norms_per_layer: int = Field(2, ge=0, le=16)
    norm: NormKind = "rmsnorm"  # layernorm carries a bias as well as a weight
    final_norm: bool = True
    attention_sinks: bool = False  # one learned scalar per head (gpt-oss)
    expert_bias: bool = False  # biases inside each expert's FFN (gpt-oss)
    router_bias: bool = False
    shared_expert_gate: bool = False  # Qwen2-MoE: sigmoid gate (hidden → 1) on the shared expert
    all_linear_bias: bool = False  # every projection has a bias (GPT-2, OPT, GPT-NeoX)
    learned_positions: bool = False  # a position-embedding table instead of RoPE
    # OPT's table has max_position_embeddings + 2 rows
    position_offset: int = Field(0, ge=0, le=MAX_POSITIONS)
    tie_default: bool = False  # tie_word_embeddings when the config omits it


# model_type → traits. Sources: ../shared/data/models.md "Variant notes" and the families'
# modeling code as summarised there (Qwen2 q/k/v bias; Qwen3 QK-RMSNorm per head; OLMo-2 QK-norm
# over the full projection; Gemma-2 four RMSNorms per layer, tied by default; gpt-oss sinks and
# biased experts/router). GPT-2, OPT and GPT-NeoX are the classic two-projection FFN models with
# LayerNorm and biased projections.
ARCHITECTURE_TRAITS: dict[str, dict[str, Any]] = {
    "qwen2": {"qkv_bias": True},
    "qwen2_moe": {"qkv_bias": True, "shared_expert_gate": True},
    "qwen3": {"qk_norm": "head"},
    "qwen3_moe": {"qk_norm": "head"},
    "olmo2": {"qk_norm": "full"},
    "gemma": {"tie_default": True},
    "gemma2": {"norms_per_layer": 4, "tie_default": True},
    "gpt_oss": {"attention_sinks": True, "expert_bias": True, "router_bias": True},
    "gpt2": {"gated_ffn": False, "norm": "layernorm", "all_linear_bias": True,
             "learned_positions": True, "tie_default": True},
    "opt": {"gated_ffn": False, "norm": "layernorm", "all_linear_bias": True,
            "learned_positions": True, "position_offset": 2, "tie_default": True},
    "gpt_neox": {"gated_ffn": False, "norm": "layernorm", "all_linear_bias": True},
}

# architectures[0] → model_type, for configs that name only the class.
_ARCHITECTURE_MODEL_TYPE = {
    "LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe",
    "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV2ForCausalLM": "deepseek_v2",
    "Gemma2ForCausalLM": "gemma2", "GemmaForCausalLM": "gemma", "Phi3ForCausalLM": "phi3",
    "Olmo2ForCausalLM": "olmo2", "GptOssForCausalLM": "gpt_oss", "GPT2LMHeadModel": "gpt2",
    "OPTForCausalLM": "opt", "GPTNeoXForCausalLM": "gpt_neox",
}


class HFConfig(BaseModel):
    """The fields of a Hugging Face config.json that rlplan reads; others are ignored."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    model_type: str | None = None
    architectures: list[str] | None = None
    rlplan_hf_id: str | None = Field(None, validation_alias="_rlplan_hf_id")
    name_or_path: str | None = Field(None, validation_alias="_name_or_path")
    hidden_size: int = Field(gt=0, le=MAX_WIDTH,
                             validation_alias=AliasChoices("hidden_size", "n_embd"))
    num_hidden_layers: int = Field(gt=0, le=MAX_LAYERS, validation_alias=AliasChoices(
        "num_hidden_layers", "n_layer"))
    num_attention_heads: int = Field(gt=0, le=MAX_HEADS, validation_alias=AliasChoices(
        "num_attention_heads", "n_head"))
    num_key_value_heads: int | None = Field(None, gt=0, le=MAX_HEADS)
    head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    intermediate_size: int | None = Field(
        None, gt=0, le=MAX_WIDTH,
        validation_alias=AliasChoices("intermediate_size", "ffn_dim", "n_inner"))
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    max_position_embeddings: int | None = Field(
        None, gt=0, le=MAX_POSITIONS,
        validation_alias=AliasChoices("max_position_embeddings", "n_positions"))
    tie_word_embeddings: bool | None = None
    attention_bias: bool = False
    mlp_bias: bool = False
    # MoE, under its three spellings
    num_experts: int | None = Field(None, ge=0, le=MAX_EXPERTS)
    num_local_experts: int | None = Field(None, ge=0, le=MAX_EXPERTS)
    n_routed_experts: int | None = Field(None, ge=0, le=MAX_EXPERTS)
    num_experts_per_tok: int | None = Field(None, gt=0, le=MAX_EXPERTS)
    moe_intermediate_size: int | None = Field(None, gt=0, le=MAX_WIDTH)
    n_shared_experts: int | None = Field(None, ge=0, le=MAX_EXPERTS)
    shared_expert_intermediate_size: int | None = Field(None, ge=0, le=MAX_WIDTH)
    first_k_dense_replace: int | None = Field(None, ge=0, le=MAX_LAYERS)
    moe_layer_freq: int = Field(1, gt=0, le=MAX_LAYERS)
    decoder_sparse_step: int = Field(1, gt=0, le=MAX_LAYERS)
    mlp_only_layers: list[int] = Field(default_factory=list, max_length=MAX_LAYERS)
    topk_method: str | None = None
    n_group: int | None = Field(None, gt=0, le=MAX_EXPERTS)  # DeepSeek group-limited routing
    topk_group: int | None = Field(None, gt=0, le=MAX_EXPERTS)
    # DeepSeek multi-head latent attention
    q_lora_rank: int | None = Field(None, gt=0, le=MAX_WIDTH)
    kv_lora_rank: int | None = Field(None, gt=0, le=MAX_WIDTH)
    qk_nope_head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    qk_rope_head_dim: int | None = Field(None, ge=0, le=MAX_WIDTH)
    v_head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    # OPT
    word_embed_proj_dim: int | None = Field(None, gt=0, le=MAX_WIDTH)
    do_layer_norm_before: bool = True
    quantization_config: Any = None  # read by `read_quantization`
    # explicit traits, overriding ARCHITECTURE_TRAITS
    rlplan: dict[str, Any] = Field(default_factory=dict)

    @property
    def resolved_model_type(self) -> str:
        if self.model_type:
            return self.model_type
        arch = (self.architectures or [""])[0]
        return _ARCHITECTURE_MODEL_TYPE.get(arch, arch.lower() or "unknown")


class MoESpec(BaseModel):
    """Mixture-of-experts feed-forward: which layers, how many experts, how wide."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_experts: int = Field(gt=0, description="routed experts per MoE layer")
    experts_per_token: int = Field(gt=0)
    expert_intermediate_size: int = Field(gt=0)
    num_shared_experts: int = Field(0, ge=0)
    shared_expert_intermediate_size: int = Field(0, ge=0, description="width of each shared expert")
    moe_layers: MoELayers = Field(description="which layers are MoE (a pattern, see "
                                  "planner.specs.layers); the rest are dense")
    score_correction_bias: bool = False  # DeepSeek-V3 noaux_tc routing: E biases per layer
    expert_groups: int = Field(1, gt=0, description="routing groups the experts are split "
                               "into, in index order (DeepSeek's n_group); 1: no groups")
    groups_per_token: int = Field(1, gt=0, description="groups a token's experts are drawn "
                                  "from (DeepSeek's topk_group: node-limited routing)")


class MLASpec(BaseModel):
    """DeepSeek multi-head latent attention projections."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q_lora_rank: int | None = Field(None, gt=0)  # None: q is projected directly from hidden
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    v_head_dim: int = Field(gt=0)


class ModelSpec(BaseModel):
    """One model's architecture, normalised from its config.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model_type: str
    source: str = ""
    hf_id: str | None = Field(None, description="Hugging Face repo id (`_rlplan_hf_id` or "
                              "`_name_or_path`), what framework exports load")
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0, description="dense FFN width")
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    word_embed_proj_dim: int | None = None
    traits: Traits
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    quantization: QuantizationSpec | None = Field(None, description="the checkpoint's "
                                                  "quantization_config: FP8 checkpoints are rolled "
                                                  "out in FP8 (runtime.rollout_weights)")
    notes: tuple[str, ...] = Field((), description="what was decided on the config's behalf")

    @property
    def gated_ffn(self) -> bool:
        return self.traits.gated_ffn

    @property
    def attention_kind(self) -> str:
        if self.mla:
            return "mla"
        if self.num_key_value_heads == self.num_attention_heads:
            return "mha"
        return "mqa" if self.num_key_value_heads == 1 else "gqa"

    @property
    def kv_cache_elements_per_token(self) -> int:
        """KV-cache values per token over all layers (MLA caches the latent + RoPE key)."""
        if self.mla:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            per_layer = 2 * self.num_key_value_heads * self.head_dim
        return per_layer * self.num_hidden_layers

    @property
    def params_total(self) -> int:
        return count_params(self).total

    @property
    def params_active(self) -> int:
        return count_params(self).active

    def summary(self) -> dict[str, Any]:
        """The fields `rlplan models --json` reports: counts plus the architecture."""
        return {"name": self.name, "params_total": self.params_total,
                "params_active": self.params_active, "attention": self.attention_kind,
                "kv_cache_elements_per_token": self.kv_cache_elements_per_token,
                "moe_layers_described": self.moe.moe_layers.describe() if self.moe else None,
                "quantization_described": (self.quantization.describe() if self.quantization
                                           else None),
                **self.model_dump(exclude={"name"})}


def _fail(source: str, field: str, problem: str) -> InputError:
    return InputError(f"{source}: field '{field}': {problem}")


def _moe_spec(cfg: HFConfig, source: str, notes: list[str]) -> MoESpec | None:
    spelled = [(f, n) for f in ("num_experts", "num_local_experts", "n_routed_experts")
               if (n := getattr(cfg, f)) is not None]
    if not spelled:
        return None
    field, experts = spelled[0]
    if experts == 0:
        if field != "num_experts":  # Mixtral/DeepSeek code builds a router over 0 experts
            raise _fail(source, field, "0 experts; an MoE model needs at least 1 routed expert "
                        f"— remove {field} for a dense model")
        # Qwen2/Qwen3-MoE modeling code builds the dense MLP in every layer when num_experts is
        # 0 (its MoE test is `num_experts > 0 and ...`): the config is a dense model
        notes.append("num_experts 0: a dense model (Qwen-MoE's convention: no layer gets "
                     "experts)")
        return None
    L = cfg.num_hidden_layers
    if cfg.num_experts_per_tok is None:
        raise _fail(source, "num_experts_per_tok", f"missing for an MoE model ({field}="
                    f"{experts}); add how many experts each token is routed to")
    if cfg.num_experts_per_tok > experts:
        raise _fail(source, "num_experts_per_tok", f"{cfg.num_experts_per_tok} exceeds {field} "
                    f"({experts}); it must be at most the number of experts")
    width = cfg.moe_intermediate_size or cfg.intermediate_size
    if width is None:
        raise _fail(source, "moe_intermediate_size", "missing; add the expert FFN width")
    if cfg.first_k_dense_replace is not None:  # DeepSeek: dense first layers, then every freq-th
        if cfg.first_k_dense_replace > L:
            raise _fail(source, "first_k_dense_replace", f"{cfg.first_k_dense_replace} exceeds "
                        f"num_hidden_layers ({L})")
        layers = MoELayers.deepseek(L, cfg.first_k_dense_replace, cfg.moe_layer_freq)
    else:  # Qwen-MoE convention; Mixtral and gpt-oss (no such fields) are MoE in every layer
        outside = [i for i in cfg.mlp_only_layers if not 0 <= i < L]
        if outside:
            raise _fail(source, "mlp_only_layers", f"{outside[0]} is not a layer index (0 to "
                        f"{L - 1}); list layers of the model")
        layers = MoELayers.qwen(L, cfg.decoder_sparse_step, cfg.mlp_only_layers)
    if layers.count() == 0:
        # the modeling code builds the dense MLP (intermediate_size) in every layer and no
        # expert anywhere: a dense model in effect, priced as one
        why = ("first_k_dense_replace, moe_layer_freq" if cfg.first_k_dense_replace is not None
               else "decoder_sparse_step, mlp_only_layers")
        notes.append(f"no layer is MoE ({why} leave all {L} dense): a dense model, priced as "
                     f"one; {field} is ignored")
        return None
    if cfg.shared_expert_intermediate_size:  # Qwen2-MoE: one shared expert of its own width
        shared, shared_width = 1, cfg.shared_expert_intermediate_size
    else:  # DeepSeek: n_shared_experts of the routed width
        shared, shared_width = cfg.n_shared_experts or 0, width
    groups, per_token = _routing_groups(cfg, experts, source)
    return MoESpec(num_experts=experts, experts_per_token=cfg.num_experts_per_tok,
                   expert_intermediate_size=width, num_shared_experts=shared,
                   shared_expert_intermediate_size=shared_width if shared else 0,
                   moe_layers=layers, score_correction_bias=cfg.topk_method == "noaux_tc",
                   expert_groups=groups, groups_per_token=per_token)


def _routing_groups(cfg: HFConfig, experts: int, source: str) -> tuple[int, int]:
    """DeepSeek's group-limited routing (n_group, topk_group): the experts split into n_group
    groups in index order, each token's experts drawn from its topk_group best groups — which
    caps the nodes a token is sent to when groups are laid out by node (DeepSeek-V3 report
    §2.1.2). (1, 1) when the config has none, or routes greedily over all experts
    (DeepSeek-V2's topk_method "greedy" ignores the groups)."""
    groups, top = cfg.n_group or 1, cfg.topk_group
    if groups == 1 or cfg.topk_method == "greedy":
        return 1, 1
    if experts % groups:
        raise _fail(source, "n_group", f"{groups} does not divide the {experts} routed experts; "
                    "the groups split the experts evenly")
    if top is None or top > groups:
        raise _fail(source, "topk_group", f"{top} with n_group {groups}: give how many of the "
                    f"{groups} groups a token's experts are drawn from (1 to {groups})")
    if cfg.num_experts_per_tok > top * experts // groups:
        raise _fail(source, "topk_group", f"{top} groups of {experts // groups} experts cannot "
                    f"hold the {cfg.num_experts_per_tok} experts a token is routed to; raise it")
    return (1, 1) if top == groups else (groups, top)


def _mla_spec(cfg: HFConfig, source: str) -> MLASpec | None:
    if cfg.kv_lora_rank is None:
        return None
    for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if getattr(cfg, f) is None:
            raise _fail(source, f, "missing; multi-head latent attention (kv_lora_rank set) "
                        "needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim")
    return MLASpec(q_lora_rank=cfg.q_lora_rank, kv_lora_rank=cfg.kv_lora_rank,
                   qk_nope_head_dim=cfg.qk_nope_head_dim, qk_rope_head_dim=cfg.qk_rope_head_dim,
                   v_head_dim=cfg.v_head_dim)


def spec_from_hf_config(data: Any, name: str, source: str) -> ModelSpec:
    """Validate a parsed config.json and normalise it into a ModelSpec."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a JSON object of config fields")
    cfg = validate_as(HFConfig, data, source)
    model_type = cfg.resolved_model_type
    traits = validate_as(Traits, {**ARCHITECTURE_TRAITS.get(model_type, {}), **cfg.rlplan},
                         f"{source}: rlplan")
    h = cfg.num_attention_heads
    kv = cfg.num_key_value_heads or h
    if h % kv:
        divisors = [x for x in range(1, h + 1) if h % x == 0 and x != h]
        raise _fail(source, "num_key_value_heads", f"{h} attention heads are not divisible by "
                    f"{kv} KV heads; set it to a divisor of num_attention_heads "
                    f"(e.g. {', '.join(map(str, [*divisors[-3:], h]))})")
    if cfg.head_dim is None and cfg.hidden_size % h:
        raise _fail(source, "head_dim", f"missing and hidden_size {cfg.hidden_size} is not "
                    f"divisible by {h} heads; add head_dim")
    notes: list[str] = []
    mla = _mla_spec(cfg, source)
    moe = _moe_spec(cfg, source, notes)
    quantization = read_quantization(cfg.quantization_config, source)
    d_ff = cfg.intermediate_size
    if d_ff is None:
        if model_type != "gpt2":  # GPT-2's n_inner null means 4·hidden
            raise _fail(source, "intermediate_size", "missing; add the FFN width")
        d_ff = 4 * cfg.hidden_size
    if not cfg.do_layer_norm_before:  # OPT-350m: post-norm blocks, no final norm
        traits = traits.model_copy(update={"final_norm": False})
    bias_all = traits.all_linear_bias
    return ModelSpec(
        name=name, model_type=model_type, source=source,
        hf_id=cfg.rlplan_hf_id or cfg.name_or_path or None,
        hidden_size=cfg.hidden_size,
        intermediate_size=d_ff, num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=h, num_key_value_heads=kv,
        head_dim=cfg.head_dim or cfg.hidden_size // h, vocab_size=cfg.vocab_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=(traits.tie_default if cfg.tie_word_embeddings is None
                             else cfg.tie_word_embeddings),
        qkv_bias=cfg.attention_bias or traits.qkv_bias or bias_all,
        o_bias=cfg.attention_bias or bias_all, mlp_bias=cfg.mlp_bias or bias_all,
        word_embed_proj_dim=(cfg.word_embed_proj_dim
                             if cfg.word_embed_proj_dim != cfg.hidden_size else None),
        traits=traits, moe=moe, mla=mla, quantization=quantization, notes=tuple(notes))


def models_dir() -> Path:
    return data_dir("model_specs")


def load_model_path(path: Path) -> ModelSpec:
    """A config.json file, or a model folder holding one."""
    if path_kind(path) == "dir":
        config = path / "config.json"
        if path_kind(config) != "file":
            raise InputError(f"{path}: folder has no config.json; point to a Hugging Face "
                             "model folder or to its config.json file")
        return spec_from_hf_config(read_json(config), path.name, str(config))
    data = read_json(path)
    name = path.parent.name if path.name == "config.json" else path.stem
    return spec_from_hf_config(data, name, str(path))


def shipped_models() -> dict[str, Path]:
    return catalog_names(models_dir(), (".json",))


def load_model(ref: str) -> ModelSpec:
    """A model by shipped name (case-insensitive, `rlplan models`), or by file/folder path."""
    path = Path(ref).expanduser()
    kind = path_kind(path)  # None too for a name that cannot be a path (5,000 characters)
    if looks_like_path(ref) or kind:
        if not kind:
            raise InputError(f"{shorten(ref)}: no such file or folder; give a shipped model "
                             "name (`rlplan models`) or a path to a config.json")
        return load_model_path(path)
    known = shipped_models()
    if ref.lower() not in known:
        raise unknown_name("model", ref, list(known), "`rlplan models` lists them; or give "
                           "a path to a config.json")
    file = known[ref.lower()]
    return spec_from_hf_config(read_json(file), file.stem, str(file))


def list_models() -> list[ModelSpec]:
    return [load_model(name) for name in shipped_models()]


# --- exact parameter counts, by component ------------------------------------------------------
# Exact parameter counts of a ModelSpec, by component.
#
# The formula is the one in ../shared/data/models.md ("Parameter-count formula"), which reproduces
# the official counts of the catalog's models; it is generalised here with LayerNorm biases,
# learned position tables and all-biased projections so GPT-2/OPT-style models count exactly too.


@dataclass(frozen=True)
class ParamCounts:
    """Parameters per component, summed over layers. `active` counts k routed experts of E."""

    embedding: int
    position_embedding: int
    lm_head: int
    attention: int
    dense_ffn: int
    routed_experts: int
    routed_experts_active: int
    shared_experts: int
    router: int
    norms: int

    @property
    def total(self) -> int:
        return (self.embedding + self.position_embedding + self.lm_head + self.attention
                + self.dense_ffn + self.routed_experts + self.shared_experts + self.router
                + self.norms)

    @property
    def active(self) -> int:
        return self.total - self.routed_experts + self.routed_experts_active

    @property
    def non_embedding(self) -> int:
        """Total less the input embedding and an untied output head (the Qwen cards' figure)."""
        return self.total - self.embedding - self.lm_head


def attention_params_per_layer(spec: ModelSpec) -> int:
    """q, k, v, o projections with their biases, QK-norm and attention sinks of one layer."""
    H, nh, nkv, hd = (spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads,
                      spec.head_dim)
    if spec.mla:
        m = spec.mla
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (H * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nh * qk_dim  # + q_a_layernorm
             if m.q_lora_rank else H * nh * qk_dim)
        kv = (H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # + kv_a_layernorm
              + m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim))
        return q + kv + nh * m.v_head_dim * H
    n = H * nh * hd + 2 * H * nkv * hd + nh * hd * H
    if spec.qkv_bias:
        n += nh * hd + 2 * nkv * hd
    if spec.o_bias:
        n += H
    if spec.traits.qk_norm == "head":
        n += 2 * hd
    elif spec.traits.qk_norm == "full":
        n += nh * hd + nkv * hd
    if spec.traits.attention_sinks:
        n += nh
    return n


def ffn_params(spec: ModelSpec, width: int, bias: bool) -> int:
    """One FFN of inner width `width`: 3 projections if gated, else 2; biases if `bias`."""
    H = spec.hidden_size
    if spec.gated_ffn:
        return 3 * H * width + ((2 * width + H) if bias else 0)
    return 2 * H * width + ((width + H) if bias else 0)


def norm_params(spec: ModelSpec, dim: int) -> int:
    return dim * (2 if spec.traits.norm == "layernorm" else 1)


@lru_cache(maxsize=256)  # specs are frozen (hashable); the search asks thousands of times
def count_params(spec: ModelSpec) -> ParamCounts:
    """Every parameter of the model, by component."""
    H, L, V = spec.hidden_size, spec.num_hidden_layers, spec.vocab_size
    emb_dim = spec.word_embed_proj_dim or H
    moe = spec.moe
    moe_layers = moe.moe_layers.count() if moe else 0
    routed = expert = shared = router = 0
    if moe:
        expert = ffn_params(spec, moe.expert_intermediate_size, spec.traits.expert_bias)
        routed = moe_layers * moe.num_experts * expert
        shared = moe_layers * moe.num_shared_experts * ffn_params(
            spec, moe.shared_expert_intermediate_size, False)
        per_layer_router = H * moe.num_experts + (moe.num_experts if spec.traits.router_bias
                                                  else 0)
        per_layer_router += moe.num_experts if moe.score_correction_bias else 0
        per_layer_router += H if spec.traits.shared_expert_gate else 0
        router = moe_layers * per_layer_router
    positions = 0
    if spec.traits.learned_positions and spec.max_position_embeddings:
        positions = (spec.max_position_embeddings + spec.traits.position_offset) * H
    projection = 2 * H * emb_dim if spec.word_embed_proj_dim else 0  # OPT project_in/out
    norms = L * spec.traits.norms_per_layer * norm_params(spec, H)
    norms += norm_params(spec, H) if spec.traits.final_norm else 0
    return ParamCounts(
        embedding=V * emb_dim + projection,
        position_embedding=positions,
        lm_head=0 if spec.tie_word_embeddings else V * emb_dim,
        attention=L * attention_params_per_layer(spec),
        dense_ffn=(L - moe_layers) * ffn_params(spec, spec.intermediate_size, spec.mlp_bias),
        routed_experts=routed,
        routed_experts_active=moe_layers * moe.experts_per_token * expert if moe else 0,
        shared_experts=shared,
        router=router,
        norms=norms,
    )

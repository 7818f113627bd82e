"""planner.cost.memory: ZeRO (memory.md B.1), Korthikanti activations (B.2, Tables 2 and 3 and
the analytical profile), sharding rules, KV cache, offload and the breakdown's sums."""

from __future__ import annotations

import math

import pytest

from planner.cost import activations as A_
from planner.cost import generation as G
from planner.cost import memory as M
from planner.cost import states as ST
from planner.cost.constants import GIB, ZERO3_LAYERS_IN_FLIGHT
from planner.cost.flops import params_with_head
from planner.plan import Layout
from planner.specs.hardware import HardwareProfile
from planner.specs.model import count_params, spec_from_hf_config
from planner.theory.shape import Head

GB = 1e9  # the ZeRO paper's tables are in decimal GB


def spec(config: dict):
    return spec_from_hf_config(config, "test", "test")


def gpt(a: int, h: int, L: int, V: int = 51200, norms: int = 2):
    """Korthikanti's GPT layer: MHA, F = 4h, two-projection FFN, no biases, `norms` norms."""
    return spec({"model_type": "llama", "hidden_size": h, "num_hidden_layers": L,
                 "num_attention_heads": a, "intermediate_size": 4 * h, "vocab_size": V,
                 "rlplan": {"gated_ffn": False, "norms_per_layer": norms, "final_norm": False}})


def layout(**kw) -> Layout:
    return Layout(group="g", **kw)


# --- B.1 ZeRO ------------------------------------------------------------------------------------

def test_zero_figure_1():
    """Ψ = 7.5B, K = 12, N_d = 64 → 120 / 31.4 / 16.6 / 1.88 GB (arithmetic 31.41, 16.64, 1.875)."""
    totals = [ST.bytes_model_states(7.5e9, zero=z, nd=64).total / GB for z in range(4)]
    assert totals == pytest.approx([120, 31.40625, 16.640625, 1.875], rel=1e-12)


@pytest.mark.parametrize("nd,p_os,p_os_g,p_os_g_p", [
    ("1", "120", "120", "120"), ("4", "52.5", "41.25", "30"), ("16", "35.6", "21.6", "7.5"),
    ("64", "31.4", "16.6", "1.88"), ("256", "30.4", "15.4", "0.47"),
    ("1024", "30.1", "15.1", "0.12")])
def test_zero_table_1_rows_for_7_5B(nd, p_os, p_os_g, p_os_g_p):
    for zero, printed in ((1, p_os), (2, p_os_g), (3, p_os_g_p)):
        value = ST.bytes_model_states(7.5e9, zero=zero, nd=int(nd)).total / GB
        decimals = len(printed.partition(".")[2])
        assert abs(value - float(printed)) <= 0.5 * 10**-decimals + 1e-9, (nd, zero, value)


def test_zero_table_1_other_models():
    assert ST.bytes_model_states(128e9, zero=3, nd=64).total / GB == pytest.approx(32)
    assert round(ST.bytes_model_states(1e12, zero=3, nd=1024).total / GB, 1) == 15.6


def test_precision_presets():
    assert ST.MIXED_PRECISION_ADAM.model_state_bytes == 16
    assert ST.FP32_GRAD_ACCUMULATION.model_state_bytes == 18
    for nd in (1, 8, 64):  # Megatron distributed optimizer: 6 + 12/N_d
        assert ST.bytes_per_param_model_states(
            ST.MEGATRON_DISTRIBUTED_OPTIMIZER, ST.MEGATRON_DISTRIBUTED_OPTIMIZER_ZERO, nd
        ) == pytest.approx(6 + 12 / nd)


def test_zero_stages_divide_the_right_state():
    p = ST.Precision(weight_bytes=2, grad_bytes=4, optimizer_bytes=12)
    base = ST.bytes_model_states(1000, zero=0, nd=10, precision=p)
    assert (base.weights, base.gradients, base.optimizer_states) == (2000, 4000, 12000)
    z1 = ST.bytes_model_states(1000, zero=1, nd=10, precision=p)
    assert (z1.weights, z1.gradients, z1.optimizer_states) == (2000, 4000, 1200)
    z2 = ST.bytes_model_states(1000, zero=2, nd=10, precision=p)
    assert (z2.weights, z2.gradients, z2.optimizer_states) == (2000, 400, 1200)
    z3 = ST.bytes_model_states(1000, zero=3, nd=10, precision=p)
    assert (z3.weights, z3.gradients, z3.optimizer_states) == (200, 400, 1200)
    experts = ST.bytes_model_states(0, zero=3, nd=10, psi_expert=1000, nd_expert=5, precision=p)
    assert experts.total == 18000 / 5


# --- B.2 Korthikanti Table 2 ---------------------------------------------------------------------

@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_korthikanti_table_2_rows(t):
    s, b, h, a = 512, 3, 256, 8
    g = gpt(a, h, 2)
    sbh = s * b * h
    kw = dict(options=A_.KORTHIKANTI_GPT_ACTIVATIONS)

    def act(**more):
        return A_.bytes_activation_per_layer(g, s, b, **kw, **more).total

    assert act() == pytest.approx(sbh * (34 + 5 * a * s / h), rel=1e-12)
    assert act(tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-12)
    assert act(tp=t, checkpointing="selective") == pytest.approx(sbh * (10 + 24 / t), rel=1e-12)
    assert act(tp=t, checkpointing="full") == pytest.approx(2 * sbh, rel=1e-12)
    if t > 1:
        assert act(tp=t, sp=True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)),
                                                   rel=1e-12)
        assert act(tp=t, sp=True, checkpointing="selective") == pytest.approx(sbh * 34 / t,
                                                                              rel=1e-12)


# Table 3 (s = 2048, V = 51200) and the settings that reproduce memory.md's analytical profile:
# micro-batch b, 1F1B with enough micro-batches to fill the pipeline, interleaving v.
TABLE_3 = {  # name: heads, h, L, t, p, b, v, (no SP/recompute GiB, SP+selective GiB), states GiB
    "22B": (64, 6144, 48, 8, 1, 4, 1, (59.25, 9.56), 45.56),
    "175B": (96, 12288, 96, 8, 8, 1, 3, (66.84, 12.35), 45.56),
    "530B": (128, 20480, 105, 8, 35, 1, 3, (114.02, 23.08), 31.64),
    "1T": (160, 25600, 128, 8, 64, 1, 1, (131.25, 26.56), 32.96),
}


@pytest.mark.parametrize("name", TABLE_3)
def test_korthikanti_analytical_profile(name):
    a, h, L, t, p, b, v, (plain, sp_sel), states = TABLE_3[name]
    g = gpt(a, h, L)
    kw = dict(tp=t, pp=p, stage=0, micro_batches=10 * p, interleave=v,
              options=A_.KORTHIKANTI_GPT_ACTIVATIONS)
    no_sp = A_.bytes_activation_training_stage(g, 2048, b, **kw).layers
    sp_selective = A_.bytes_activation_training_stage(g, 2048, b, sp=True,
                                                     checkpointing="selective", **kw).layers
    assert round(no_sp / GIB, 2) == plain
    assert round(sp_selective / GIB, 2) == sp_sel
    # "params & optimizer": 12·L·h²/(t·p) parameters per GPU × 18 B, embeddings excluded
    # (Korthikanti's 12h² per layer has no norm parameters)
    stage = ST.params_per_gpu_stage(gpt(a, h, L, norms=0), tp=t, pp=p, stage=0)
    assert stage.layers_dense == 12 * L * h**2 / (t * p)
    b18 = ST.bytes_model_states(stage.layers_dense, zero=0, nd=1,
                               precision=ST.FP32_GRAD_ACCUMULATION).total
    assert round(b18 / GIB, 2) == states


def test_korthikanti_exact_values():
    """The round numbers reproduce to the byte: 59.25, 131.25, 9.5625 and 26.5625 GiB."""
    g22, g1t = gpt(64, 6144, 48), gpt(160, 25600, 128)
    kw = dict(tp=8, options=A_.KORTHIKANTI_GPT_ACTIVATIONS, micro_batches=1000)
    assert A_.bytes_activation_training_stage(g22, 2048, 4, **kw).layers == 59.25 * GIB
    assert A_.bytes_activation_training_stage(g1t, 2048, 1, pp=64, **kw).layers == 131.25 * GIB
    assert A_.bytes_activation_training_stage(
        g22, 2048, 4, sp=True, checkpointing="selective", **kw).layers == 9.5625 * GIB


def test_korthikanti_extra_terms_at_p_1():
    """Embedding dropout sbhp/t and output layer + loss 4sbh/t·(1 + V/h) (with SP)."""
    s, b, h, a, t, V = 256, 2, 128, 4, 4, 1000
    g = gpt(a, h, 3, V=V)
    act = A_.bytes_activation_training_stage(g, s, b, tp=t, sp=True,
                                            options=A_.KORTHIKANTI_GPT_ACTIVATIONS)
    assert act.embedding == pytest.approx(s * b * h * 1 / t)
    logits = A_.bytes_logits(g, s * b, tp=t)
    assert act.head_input + logits == pytest.approx(4 * s * b * h / t * (1 + V / h))


def test_pipeline_in_flight_and_interleaving():
    g = gpt(8, 256, 8)
    per_layer = A_.bytes_activation_per_layer(g, 128, 1).total
    first = A_.bytes_activation_training_stage(g, 128, 1, pp=4, stage=0, micro_batches=16)
    assert first.layers == pytest.approx(4 * 2 * per_layer)  # min(pp, n) × L/pp layers
    few = A_.bytes_activation_training_stage(g, 128, 1, pp=4, stage=0, micro_batches=3)
    assert few.layers == pytest.approx(3 * 2 * per_layer)
    last = A_.bytes_activation_training_stage(g, 128, 1, pp=4, stage=3, micro_batches=16)
    assert last.layers == pytest.approx(1 * 2 * per_layer)
    inter = A_.bytes_activation_training_stage(g, 128, 1, pp=4, stage=0, micro_batches=16,
                                              interleave=2)
    assert inter.layers == pytest.approx(first.layers * (1 + 3 / 8))


# --- generalised activation coefficients ---------------------------------------------------

def test_activation_components_generalise():
    s, b = 100, 2
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 8, "intermediate_size": 200, "vocab_size": 50}
    plain = spec({**cfg, "rlplan": {"gated_ffn": False}})
    gated = spec(cfg)
    gqa = spec({**cfg, "num_key_value_heads": 2})
    A = A_.bytes_activation_per_layer
    # gated FFN keeps a third F-wide tensor; d_ff ≠ 4h is priced by its width
    assert A(plain, s, b).ffn_inner == 2 * 2 * s * b * 200
    assert A(gated, s, b).ffn_inner == 3 * 2 * s * b * 200
    # GQA stores 2 of 8 K/V heads: Q + K + V = (8 + 2 + 2) heads of 8 instead of 24
    assert A(gqa, s, b).qkv == 2 * s * b * (64 + 16 + 16)
    assert A(gated, s, b).qkv == 2 * s * b * 3 * 64
    # GQA K/V heads are replicated once tp exceeds them
    assert A(gqa, s, b, tp=4).qkv == 2 * s * b * (64 / 4 + 8 + 8)
    # FlashAttention: no s² term, an fp32 log-sum-exp per head and query
    assert A(gated, s, b).scores == 4 * 8 * s * b
    no_flash = A_.ActivationOptions(flash_attention=False)
    assert A(gated, s, b, options=no_flash).scores == 2 * 8 * s * s * b
    # norms: one p·sbH input per norm
    assert A(gated, s, b).norms == 2 * 2 * s * b * 64
    # context parallelism splits the sequence
    assert A(gated, s, b, cp=2).total == pytest.approx(A(gated, s / 2, b).total)


def test_moe_layer_activations():
    moe = spec({"model_type": "custom_moe", "hidden_size": 64, "num_hidden_layers": 3,
                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                "n_shared_experts": 1, "first_k_dense_replace": 1})
    s, b = 50, 2
    layer = A_.bytes_activation_per_layer(moe, s, b, moe=True)
    assert layer.ffn_inner == 3 * 2 * s * b * (2 * 32 + 1 * 32)
    assert layer.router == 4 * s * b * 8
    assert layer.expert_io == 2 * 2 * 2 * s * b * 64
    dense = A_.bytes_activation_per_layer(moe, s, b)
    stage = A_.bytes_activation_training_stage(moe, s, b)
    assert stage.layers == pytest.approx(dense.total + 2 * layer.total)


# --- parameters per stage: TP / PP / EP ----------------------------------------------------------

MOE = spec({"model_type": "custom_moe", "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
            "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "n_shared_experts": 1, "first_k_dense_replace": 1})


@pytest.mark.parametrize("head", [Head.POLICY, Head.SCALAR_EVERY, Head.SHARED])
@pytest.mark.parametrize("pp", [1, 2, 3, 4])
def test_pipeline_stages_sum_to_the_model(pp, head):
    stages = [ST.params_per_gpu_stage(MOE, pp=pp, stage=k, head=head) for k in range(pp)]
    tied_copy = 0  # untied here: no extra copy of the embedding on the last stage
    assert sum(st.total for st in stages) == params_with_head(MOE, head) + tied_copy
    assert sum(st.layers for st in stages) == 4
    assert stages[0].embedding > 0 and all(st.embedding == 0 for st in stages[1:])


def test_tensor_and_expert_parallel_divide_only_their_part():
    c = count_params(MOE)
    one = ST.params_per_gpu_stage(MOE)
    tp2 = ST.params_per_gpu_stage(MOE, tp=2)
    ep4 = ST.params_per_gpu_stage(MOE, ep=4)
    norms = c.norms - 64  # layer norms (the final norm sits in the head part)
    replicated = norms + c.router
    assert one.layers_dense - tp2.layers_dense == pytest.approx(
        (one.layers_dense - replicated) / 2)
    assert tp2.routed_experts == one.routed_experts  # expert tensor parallelism 1
    assert ep4.routed_experts == one.routed_experts / 4
    assert ep4.layers_dense == one.layers_dense
    assert tp2.embedding == one.embedding / 2


def test_tied_head_copy_on_the_last_stage():
    tied = spec({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 1000,
                 "tie_word_embeddings": True})
    assert ST.params_per_gpu_stage(tied).head == 64  # pp = 1: the final norm only
    assert ST.params_per_gpu_stage(tied, pp=2, stage=1).head == 1000 * 64 + 64


# --- the breakdown --------------------------------------------------------------------------------

QWENISH = spec({"model_type": "qwen2", "hidden_size": 512, "num_hidden_layers": 8,
                "num_attention_heads": 8, "num_key_value_heads": 2,
                "intermediate_size": 1376, "vocab_size": 32000})
H100ISH = HardwareProfile(name="t", memory_gib=80, bf16_tflops=989, hbm_tbps=3.35,
                          gpus_per_node=8, runtime_reserve_gib=4)


def assert_sums(bd: M.MemoryBreakdown):
    assert math.fsum(bd.components().values()) == pytest.approx(bd.total, rel=1e-12)
    assert bd.persistent + bd.transient + bd.runtime_reserve == pytest.approx(bd.total)


@pytest.mark.parametrize("role,stage", [("actor", "assessment"),
                                        ("actor", "training"), ("reference", "assessment"),
                                        ("reward", "assessment"), ("critic", "training")])
def test_breakdowns_sum_to_total(role, stage):
    lay = layout(dp=2, tp=2, pp=2, sp=True, zero=1, checkpointing="selective", micro_batch=2)
    work = M.MemoryWorkload(seq_len=1024, micro_batches=4)
    bd = M.memory_per_gpu(QWENISH, role, stage, lay, H100ISH, work)
    assert_sums(bd)
    assert bd.runtime_reserve == 4 * GIB
    assert bd.total > bd.runtime_reserve


def test_generation_breakdown_sums_to_total():
    lay = layout(dp=2, tp=2, pp=2)
    bd = G.memory_generation_per_gpu(QWENISH, lay, kv_tokens=16 * 1024, decode_batch=16,
                                     shadow_weights=True, resharding=True,
                                     reserve_bytes=4 * GIB)
    assert_sums(bd)
    with pytest.raises(ValueError, match="actor has no generation"):
        M.memory_per_gpu(QWENISH, "actor", "generation", lay, H100ISH,
                         M.MemoryWorkload(seq_len=8))


def test_unknown_role_or_stage():
    with pytest.raises(ValueError, match="reference has no training"):
        M.memory_per_gpu(QWENISH, "reference", "training", layout(), H100ISH,
                         M.MemoryWorkload(seq_len=8))
    with pytest.raises(ValueError, match="unknown role"):
        M.memory_per_gpu(QWENISH, "judge", "assessment", layout(), H100ISH,
                         M.MemoryWorkload(seq_len=8))


def test_training_sharding_by_zero_and_dp():
    kw = dict(seq_len=512, precision=ST.MIXED_PRECISION_ADAM)
    z0 = M.memory_training_per_gpu(QWENISH, layout(dp=4, zero=0), **kw)
    z1 = M.memory_training_per_gpu(QWENISH, layout(dp=4, zero=1), **kw)
    z3 = M.memory_training_per_gpu(QWENISH, layout(dp=4, zero=3), **kw)
    psi = count_params(QWENISH).total
    assert z0.weights + z0.gradients + z0.optimizer_states == pytest.approx(16 * psi)
    assert z1.optimizer_states == pytest.approx(12 * psi / 4)
    assert z1.weights == z0.weights and z1.gradients == z0.gradients
    assert z3.weights + z3.gradients + z3.optimizer_states == pytest.approx(16 * psi / 4)
    assert z3.gather_buffer > 0 and z0.gather_buffer == 0
    # data parallelism does not touch activations or logits; context parallelism splits them
    assert z0.activations == z3.activations and z0.logits == z3.logits
    cp2 = M.memory_training_per_gpu(QWENISH, layout(dp=2, cp=2, zero=3), **kw)
    assert cp2.activations == pytest.approx(z3.activations / 2)
    assert cp2.optimizer_states == pytest.approx(z3.optimizer_states)  # ZeRO over dp·cp


def test_training_peak_stage_and_logits():
    lay = layout(pp=2, micro_batch=1)
    bd = M.memory_training_per_gpu(QWENISH, lay, seq_len=256, micro_batches=8)
    stages = [ST.params_per_gpu_stage(QWENISH, pp=2, stage=k) for k in range(2)]
    assert bd.weights == pytest.approx(2 * stages[bd.pipeline_stage].total)
    last = M.memory_training_per_gpu(QWENISH, layout(pp=1), seq_len=256)
    assert last.logits == 4 * 256 * 32000  # fp32 logits of one micro-batch
    critic = M.memory_training_per_gpu(QWENISH, layout(), seq_len=256, head=Head.SCALAR_EVERY)
    assert critic.logits == 4 * 256


def test_offload_moves_state_to_host():
    kw = dict(seq_len=256)
    base = M.memory_training_per_gpu(QWENISH, layout(dp=2, zero=2), **kw)
    opt = M.memory_training_per_gpu(QWENISH, layout(dp=2, zero=2, offload="optimizer"), **kw)
    assert opt.optimizer_states == 0 and opt.gradients == 0
    assert opt.host_offload == pytest.approx(base.optimizer_states + base.gradients)
    assert opt.weights == base.weights
    both = M.memory_training_per_gpu(QWENISH, layout(dp=2, zero=2, offload="both"), **kw)
    assert both.weights == 0 and both.host_offload == pytest.approx(
        base.weights + base.gradients + base.optimizer_states)
    unit = ST.params_per_gpu_stage(QWENISH).largest_unit
    # two bf16 units gathered + one unit's bf16 gradient before it streams out
    assert both.gather_buffer == (ZERO3_LAYERS_IN_FLIGHT * 2 + 2) * unit
    assert both.activations == base.activations


def test_recompute_workspace():
    none = M.memory_training_per_gpu(QWENISH, layout(), seq_len=512)
    full = M.memory_training_per_gpu(QWENISH, layout(checkpointing="full"), seq_len=512)
    one_layer = A_.bytes_activation_per_layer(QWENISH, 512, 1)
    assert none.recompute_workspace == 0
    assert full.recompute_workspace == pytest.approx(
        one_layer.total - A_.bytes_activation_per_layer(QWENISH, 512, 1,
                                                       checkpointing="full").total)
    assert full.activations < none.activations


def test_kv_cache_per_gpu():
    # GQA: 2 (K, V) · 2 kv heads · 64 head_dim · 8 layers · 2 bytes per token
    per_token = 2 * 2 * 64 * 8 * 2
    assert G.bytes_kv_cache_per_gpu(QWENISH, 10, 1000) == 10 * 1000 * per_token
    assert G.bytes_kv_cache_per_gpu(QWENISH, 10, 1000, tp=2) == 10 * 1000 * per_token / 2
    assert G.bytes_kv_cache_per_gpu(QWENISH, 10, 1000, tp=4) == 10 * 1000 * per_token / 2
    assert G.bytes_kv_cache_per_gpu(QWENISH, 10, 1000, pp=2) == 10 * 1000 * per_token / 2
    mla = spec({"model_type": "deepseek_v3", "hidden_size": 128, "num_hidden_layers": 3,
                "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100,
                "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
                "v_head_dim": 32})
    latent = (64 + 16) * 3 * 2
    assert G.bytes_kv_cache_per_gpu(mla, 1, 100, tp=4) == 100 * latent  # replicated over TP


def test_generation_shadow_and_resharding():
    lay = layout(dp=2, tp=2)
    kw = dict(kv_tokens=32 * 2048, decode_batch=32)
    plain = G.memory_generation_per_gpu(QWENISH, lay, **kw)
    stage = ST.params_per_gpu_stage(QWENISH, tp=2)
    assert plain.weights == 2 * stage.total  # no dp sharding in an inference engine
    assert plain.kv_cache == G.bytes_kv_cache_per_gpu(QWENISH, 32, 2048, tp=2)
    assert plain.logits == 4 * 32 * 32000 / 2
    sync = G.memory_generation_per_gpu(QWENISH, lay, shadow_weights=True, resharding=True, **kw)
    assert sync.shadow_weights == plain.weights
    assert sync.resharding_buffer == 2 * stage.largest_unit
    assert sync.persistent - plain.persistent == plain.weights
    assert sync.transient - plain.transient == sync.resharding_buffer


def test_kv_tokens_that_fit_fills_the_free_memory():
    lay = layout(dp=1, tp=2, pp=2)
    free = 20 * GIB
    kv = G.kv_tokens_that_fit(QWENISH, lay, free, 8)
    assert G.memory_generation_per_gpu(QWENISH, lay, kv_tokens=kv, decode_batch=8).total <= free
    assert G.memory_generation_per_gpu(QWENISH, lay, kv_tokens=kv + 1,
                                       decode_batch=8).total > free
    assert G.kv_tokens_that_fit(QWENISH, lay, 1.0, 8) == 0  # not even the weights


def test_forward_only_memory():
    lay = layout(dp=4, micro_batch=2)
    fwd = M.memory_forward_per_gpu(QWENISH, lay, seq_len=1000)
    assert fwd.gradients == fwd.optimizer_states == fwd.activations == 0
    assert fwd.weights == 2 * count_params(QWENISH).total
    assert fwd.logits == 4 * 2000 * 32000
    fsdp = M.memory_forward_per_gpu(QWENISH, layout(dp=4, zero=3, micro_batch=2), seq_len=1000)
    assert fsdp.weights == pytest.approx(fwd.weights / 4)
    reward = M.memory_forward_per_gpu(QWENISH, lay, seq_len=1000, head=Head.SCALAR_LAST)
    assert reward.logits == 4 * 2
    assert reward.weights == 2 * params_with_head(QWENISH, Head.SCALAR_LAST)
    # forward-only workspace is per token, far below stored training activations
    train = M.memory_training_per_gpu(QWENISH, lay, seq_len=1000)
    assert fwd.inference_workspace < train.activations / 4


def test_persistent_and_transient_count_every_listed_component():
    names = M.MemoryBreakdown.PERSISTENT + M.MemoryBreakdown.TRANSIENT
    bd = M.MemoryBreakdown(**{n: 2.0**i for i, n in enumerate(names)})  # distinct bits
    assert bd.persistent == sum(getattr(bd, n) for n in M.MemoryBreakdown.PERSISTENT)
    assert bd.transient == sum(getattr(bd, n) for n in M.MemoryBreakdown.TRANSIENT)

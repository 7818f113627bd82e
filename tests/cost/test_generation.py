"""planner.cost.generation: the decode step on hand-checked cases, the rollout priced on its
schedule (closed form for equal lengths, a step-by-step sum, the tail), and the properties a
rollout model must have (more KV never slower, a longer cap never faster, partial rollouts
never slower than waiting for the tail)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost import comm
from planner.cost import generation as G
from planner.cost.constants import ENGINES, Engine
from planner.cost.flops import bytes_weights_read_fwd, flops_decode_step, flops_prefill
from planner.cost.rollout import schedule
from planner.cost.states import MIXED_PRECISION_ADAM, Precision
from planner.cost.time import compute_rate
from planner.plan import Layout
from planner.specs.hardware import load_profile
from planner.specs.model import load_model, spec_from_hf_config
from tests.cost.rollout_reference import replica_chunks

H100 = load_profile("h100-sxm")
GPT = spec_from_hf_config({"model_type": "gpt2", "n_embd": 1024, "n_head": 16, "n_layer": 8,
                           "vocab_size": 1000, "n_positions": 4096}, "gpt", "test")
QWEN7B = load_model("qwen2.5-7b")
NO_ENGINE = Engine("none", step_overhead_s=0.0, per_seq_s=0.0)


def lay(**kw) -> Layout:
    return Layout(group="g", **kw)


def step(spec=GPT, layout=None, gpu=H100, engine=NO_ENGINE) -> G.DecodeStep:
    return G.decode_step(spec, layout or lay(), gpu, engine)


# --- the decode step -------------------------------------------------------------------------


def test_decode_is_memory_bound_at_small_batch():
    s = step()
    kv = 512
    expected = (bytes_weights_read_fwd(GPT, 1) + kv * G.bytes_kv_cache_per_token(GPT)) \
        / G.decode_hbm_rate(H100)
    assert s.seconds(1, kv) == pytest.approx(expected)
    assert s.seconds(1, kv) > flops_decode_step(GPT, kv).total / compute_rate(H100)


def test_the_engine_adds_its_step_and_per_sequence_time():
    engine = Engine("x", step_overhead_s=0.002, per_seq_s=1e-5)
    assert step(engine=engine).seconds(8, 4096) == pytest.approx(
        step().seconds(8, 4096) + 0.002 + 8e-5)


def test_an_eager_engine_waits_for_the_host_to_issue_each_layer():
    eager = step(engine=ENGINES["eager"])
    assert eager.host == pytest.approx(GPT.num_hidden_layers * ENGINES["eager"].layer_floor_s)
    assert eager.host > 0
    assert eager.seconds(1, 512) >= eager.host  # the tiny model's kernels take less


def test_the_layer_floor_does_not_shrink_with_tensor_parallelism():
    floor = Engine("x", step_overhead_s=0.0, per_seq_s=0.0, layer_floor_s=1e-3)
    tp2, tp8 = step(QWEN7B, lay(tp=2), engine=floor), step(QWEN7B, lay(tp=8), engine=floor)
    assert tp2.host == tp8.host == pytest.approx(QWEN7B.num_hidden_layers * 1e-3)
    assert tp8.seconds(1, 1024) - tp8.comm - tp8.comm_per_seq == pytest.approx(tp8.host)


def test_decode_turns_compute_bound_at_large_batch_on_a_low_flop_gpu():
    h20 = load_profile("h20")  # 148 TFLOP/s against 4 TB/s
    s = step(QWEN7B, gpu=h20)
    b, ctx = 512, 1024
    assert s.seconds(b, b * ctx) == pytest.approx(
        b * flops_decode_step(QWEN7B, ctx).total / compute_rate(h20))


def test_tp_allreduces_are_latency_bound_at_decode_sizes():
    # an all-reduce per layer after attention and after the MLP, one after the embedding, and
    # the logits gathered: a few KB each, so the launch and hop latencies dominate
    s2 = step(QWEN7B, lay(tp=2))
    L = QWEN7B.num_hidden_layers
    allreduce = comm.time_allreduce_decode(0.0, 2, H100)
    gather = comm.time_allgather(0.0, 2, comm.link_for(H100, 2))
    assert s2.comm == pytest.approx((2 * L + 1) * allreduce + gather)
    assert s2.comm_per_seq * 8 < s2.comm / 10  # bandwidth: under a tenth at batch 8
    row = QWEN7B.hidden_size * 2  # one sequence's bf16 row
    assert s2.comm_per_seq == pytest.approx(
        (2 * L + 1) * (comm.time_allreduce_decode(row, 2, H100) - allreduce)
        + comm.time_allgather(QWEN7B.vocab_size * 2, 2, comm.link_for(H100, 2)) - gather)


@pytest.mark.parametrize(("tp", "measured_us"), [(2, 4.4), (4, 4.8), (8, 5.2)])
def test_the_engines_own_allreduce_inside_a_node(tp, measured_us):
    """rollout.md §2 row 18: vLLM's custom all-reduce of one row on an H100, 4.4 / 4.8 /
    5.2 µs at TP 2 / 4 / 8 — a launch and a little per peer, not NCCL's 2(n − 1) ring steps
    (row 15: 23 µs for TP 8), which the engines of 2023 (`eager`) still pay."""
    custom = comm.time_allreduce_decode(1024.0, tp, H100)
    assert custom * 1e6 == pytest.approx(measured_us, rel=0.1)
    ring = comm.time_allreduce_decode(1024.0, tp, H100, custom=False)
    assert ring == pytest.approx(comm.time_allreduce(1024.0, tp, comm.link_for(H100, tp)))
    assert ring > custom
    eager = step(QWEN7B, lay(tp=tp), engine=ENGINES["eager"])
    assert eager.comm > step(QWEN7B, lay(tp=tp)).comm


def test_tp_across_nodes_pays_a_tree_of_network_hops_not_a_ring():
    """TP16 on two 8-GPU nodes: NCCL's hierarchical all-reduce, 2·7 NVLink hops and 2 network
    hops for one row (rollout.md §2 row 18: 51 µs), where a 16-rank ring took 30 network
    steps (450 µs, the 100–130 ms decode steps of issue 22); across D nodes 2⌈log₂ D⌉ hops.
    64 rows: row 18's 144 µs."""
    intra, inter = H100.intra_node_latency_us, H100.inter_node_latency_us
    launch = H100.collective_launch_us
    for tp, hops in ((16, 2), (32, 4), (64, 6)):
        t = comm.time_allreduce_decode(0.0, tp, H100) * 1e6
        assert t == pytest.approx(launch + 2 * 7 * intra + hops * inter)
        assert t < comm.time_allreduce(0.0, tp, comm.link_for(H100, tp)) * 1e6 / 3
    row = 2 * 8192.0  # one row of hidden 8192 in bf16
    assert comm.time_allreduce_decode(row, 16, H100) * 1e6 == pytest.approx(51, rel=0.1)
    assert comm.time_allreduce_decode(64 * row, 16, H100) * 1e6 == pytest.approx(144, rel=0.1)
    # the whole buffer crosses the network, at a share of one NIC (not 1/8 on each of 8 NICs)
    extra = comm.time_allreduce_decode(8e6, 16, H100) - comm.time_allreduce_decode(0.0, 16, H100)
    nic = comm.link_inter_node(H100).bandwidth
    nvlink = comm.link_intra_node(H100).bandwidth
    assert extra == pytest.approx(
        2 * 7 / 8 * 8e6 / nvlink + 8e6 / (comm.DECODE_ALLREDUCE_NIC_SHARE * nic))


def test_a_mesh_gives_a_small_group_only_its_direct_links():
    """MI300X: 8 GPUs fully connected by 7 xGMI links of 64 GB/s per direction, no switch. A
    TP-2 pair shares one link, TP 4 three, TP 8 all seven (the profile's 448 GB/s); an
    NVSwitch gives any group the whole 450 GB/s."""
    mi = load_profile("mi300x")
    eff = mi.efficiency.intra_node * 1e9
    for tp, links in ((2, 1), (4, 3), (8, 7)):
        assert comm.link_for(mi, tp).bandwidth == pytest.approx(links * 64 * eff)
    assert comm.link_p2p(mi, 2).bandwidth == pytest.approx(64 * eff)
    for tp in (2, 4, 8):
        assert comm.link_for(H100, tp).bandwidth == pytest.approx(
            450 * H100.efficiency.intra_node * 1e9)


def test_a_small_model_decodes_more_per_gpu_at_tp1_on_a_mesh():
    """rollout.md §4 (AMD: no TP above 1 for models ≤ 30B): 2,048 running sequences of a 7B on
    8 MI300Xs at 2,000 tokens of context — TP 1 (8 replicas of 256) decodes more tokens per
    GPU per second than TP 2 or TP 4 (the same sequences over fewer, larger replicas), by a
    fifth at least: their all-reduces and logits cross 1 or 3 of the links."""
    mi = load_profile("mi300x")
    n, ctx = 2048, 2000
    per_gpu = {}
    for tp in (1, 2, 4):
        s = G.decode_step(QWEN7B, lay(dp=8 // tp, tp=tp), mi, ENGINES["vllm-v1"])
        b = n // (8 // tp)
        per_gpu[tp] = b / float(s.seconds(b, b * ctx)) / tp
    assert per_gpu[1] > 1.2 * max(per_gpu[2], per_gpu[4])


def test_prefill_pays_the_same_allreduces_per_prompt_row():
    pre = G.prefill_cost(QWEN7B, lay(tp=4), H100)
    calls = 2 * QWEN7B.num_hidden_layers + 1
    assert pre.per_batch == pytest.approx(calls * comm.time_allreduce_decode(0.0, 4, H100))


def test_expert_parallel_decode_is_not_slower_on_more_gpus():
    """DeepSeek-V3 under vLLM's EP (EP = DP × TP, attention data-parallel) on 8 … 256 H100s
    for the same 512 running sequences: more replicas share the sequences, more GPUs share the
    experts' reads, and each dispatch/combine is posted at once (one launch, one hop) however
    many ranks — so the step never grows (it grew with the ranks under n − 1 sequential
    all-to-all steps: issue 22, the verl plan leaving 192 of 256 GPUs idle)."""
    v3 = load_model("deepseek-v3")
    n, ctx = 512, 1000
    steps = []
    for dp in (1, 2, 4, 8, 16, 32):
        s = G.decode_step(v3, lay(dp=dp, tp=8, ep=8 * dp), H100, ENGINES["vllm-v1"])
        b = n / dp
        steps.append(float(s.seconds(b, b * ctx)))
        # the dispatch/combine latency does not grow with the ranks past one node
        if dp > 1:
            assert comm.time_alltoall_decode(0.0, 8 * dp, H100) == pytest.approx(
                (H100.collective_launch_us + H100.inter_node_latency_us) * 1e-6)
    assert all(later <= earlier for earlier, later in itertools.pairwise(steps))
    assert steps[-1] < steps[0] / 2


def test_expert_parallel_dispatch_sends_each_routed_copy_once():
    """Per MoE layer a dispatch and a combine of b/tp rows × k copies from each rank; FP8
    matmuls dispatch in FP8, the combine comes back in BF16."""
    moe = load_model("qwen3-30b-a3b")
    k, H, n_moe = moe.moe.experts_per_token, moe.hidden_size, moe.moe.moe_layers.count()
    fp8 = Precision(weight_bytes=1, fp8_matmuls=True)
    for precision, dispatch in ((MIXED_PRECISION_ADAM, 2), (fp8, 1)):
        base = G.decode_step(moe, lay(dp=4, tp=2), H100, NO_ENGINE, precision)
        ep = G.decode_step(moe, lay(dp=4, tp=2, ep=8), H100, NO_ENGINE, precision)
        a2a = comm.time_alltoall_decode
        per_seq = n_moe * sum(a2a(k / 2 * H * nbytes, 8, H100) - a2a(0.0, 8, H100)
                              for nbytes in (dispatch, 2))
        assert ep.comm_per_seq - base.comm_per_seq == pytest.approx(per_seq)


def test_pipeline_stages_add_room_not_weight_bandwidth():
    one, two = step(QWEN7B, lay(tp=2)), step(QWEN7B, lay(tp=2, pp=2))
    assert two.weights(16) == pytest.approx(one.weights(16))  # each micro-batch re-reads
    assert two.byte_kv == pytest.approx(one.byte_kv / 2)  # half the layers' KV per GPU
    assert two.comm > one.comm  # the sends between stages


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 300), kv=st.integers(1, 10**6), m=st.integers(1, 400),
       eager=st.booleans())
def test_segments_sum_their_steps_exactly(b, kv, m, eager):
    s = step(QWEN7B, lay(tp=2), engine=ENGINES["eager" if eager else "vllm-v1"])
    gpu_part, overhead = s.segment_seconds(np.array([b]), np.array([kv]), np.array([m]))
    one_by_one = sum(float(s.seconds(b, kv + b * j)) for j in range(m))
    assert float(gpu_part[0] + overhead[0]) == pytest.approx(one_by_one, rel=1e-9)


line = st.tuples(st.integers(0, 10**4), st.integers(-50, 50))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.tuples(line, line), min_size=1, max_size=8),
       m=st.lists(st.integers(0, 300), min_size=8, max_size=8),
       floor=st.integers(0, 2 * 10**4))
def test_sums_of_the_larger_line_are_exact(lines, m, floor):
    """Segments' Σ max of two lines, crossing or not, rising or falling (`_sum_max`), and the
    floor's excess over it for slopes ≥ 0 (`_floor_excess`), against the sums term by term."""
    n = len(lines)
    (a1, b1), (a2, b2) = (tuple(np.array([float(x[k][i]) for x in lines]) for i in (0, 1))
                          for k in (0, 1))
    steps = np.array(m[:n], dtype=float)
    got = G._sum_max((a1, b1), (a2, b2), steps)
    want = [sum(max(a1[k] + b1[k] * j, a2[k] + b2[k] * j) for j in range(int(steps[k])))
            for k in range(n)]
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=1e-9)
    up1, up2 = np.abs(b1), np.abs(b2)
    excess = G._floor_excess((a1, up1), (a2, up2), float(floor), steps)
    want = [sum(max(0.0, floor - max(a1[k] + up1[k] * j, a2[k] + up2[k] * j))
                for j in range(int(steps[k]))) for k in range(n)]
    assert excess.tolist() == pytest.approx(want, rel=1e-12, abs=1e-9)


# --- the rollout -----------------------------------------------------------------------------


def rollout(lengths, layout=None, kv=10**7, max_seqs=10**6, prompt=256, partial=False,
            spec=GPT, engine=NO_ENGINE):
    return G.time_generation(spec, layout or lay(), H100, engine,
                             np.asarray(lengths, dtype=np.int64), prompt, kv, max_seqs, partial)


def test_equal_lengths_reduce_to_the_closed_form():
    n, T, S = 16, 300, 256
    r = rollout([T] * n, prompt=S)
    s = step()
    decode = sum(float(s.seconds(n, n * (S + 1 + j))) for j in range(T))
    prefill = n * flops_prefill(GPT, S).total / compute_rate(H100)
    assert r.seconds == pytest.approx(decode + prefill, rel=1e-9)
    assert r.time.prefill == pytest.approx(prefill)
    assert r.time.recompute == 0 and r.preemptions == 0
    assert r.peak_batch == n and r.mean_batch == n
    assert r.regime == "throughput-bound"


def test_the_stage_ends_with_the_slowest_replica():
    lengths = [100] * 8 + [400] * 8  # replica 1 gets the long ones
    both = rollout(lengths, lay(dp=2))
    assert both.seconds == pytest.approx(rollout([400] * 8).seconds)


def test_a_long_tail_shows_as_tail_time_and_regime():
    lengths = [50] * 63 + [2000]
    r = rollout(lengths)
    assert r.tail_s > 0.8 * r.seconds
    assert r.time.decode_tail > r.time.decode
    assert r.regime == "tail-bound"
    first, *_, last = r.completions  # 63 responses done together, the last one alone
    assert first[0] == last[0] == pytest.approx(r.seconds - r.tail_s)
    assert (first[1], last[1]) == (1.0, pytest.approx(0.1))


def test_a_kv_starved_replica_preempts_and_recomputes():
    lengths = [400] * 32
    roomy, starved = rollout(lengths), rollout(lengths, kv=4 * (256 + 400))
    assert starved.preemptions > 0 and starved.recomputed_tokens > 0
    assert starved.time.recompute > 0
    assert starved.regime == "KV-bound"
    assert starved.seconds > roomy.seconds


LENGTHS = st.lists(st.integers(1, 300), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(lengths=LENGTHS, spare=st.integers(0, 3000), more=st.integers(1, 5000),
       dp=st.integers(1, 3), max_seqs=st.integers(1, 64))
def test_more_kv_memory_is_never_slower(lengths, spare, more, dp, max_seqs):
    """Without preemption, more KV is never slower. vLLM's greedy admission can make it slower
    by admitting sequences it then preempts (lengths [2, 2, 4, 2], prompt 64, 4 running at most:
    a 198-token cache runs three and never preempts, a 260-token one admits the fourth and
    preempts it a step later), but never by more than the recomputation that costs."""
    dp = min(dp, len(lengths))
    kv = 64 + max(lengths) + spare
    kw = dict(layout=lay(dp=dp), max_seqs=max_seqs, prompt=64, spec=QWEN7B)
    more_kv, less_kv = rollout(lengths, kv=kv + more, **kw), rollout(lengths, kv=kv, **kw)
    slack = 1e-12 * less_kv.seconds  # equal up to summation order
    assert more_kv.seconds <= less_kv.seconds + more_kv.time.recompute + slack
    if more_kv.preemptions == 0:
        assert more_kv.seconds <= less_kv.seconds + slack


MOE = load_model("qwen3-30b-a3b")
EAGER = ENGINES["eager"]  # a host floor per layer (`DecodeStep.host`)


@settings(max_examples=80, deadline=None)
@given(lengths=LENGTHS, spare=st.integers(0, 4000), smaller=st.integers(0, 4000),
       shape=st.sampled_from([(GPT, lay()), (QWEN7B, lay(dp=2, tp=2)), (QWEN7B, lay(dp=3)),
                              (MOE, lay(dp=2, tp=2, ep=4)), (GPT, lay(pp=2))]),
       max_seqs=st.integers(1, 64), eager=st.booleans())
def test_the_rollout_floor_is_never_above_a_rollout(lengths, spare, smaller, shape, max_seqs,
                                                    eager):
    """`rollout_floor` at a KV size bounds the rollout, less its recomputation, at that size
    and at every smaller one (what `kv.kv_levels` relies on to leave a size unpriced)."""
    spec, layout = shape
    layout = layout.model_copy(update={"dp": min(layout.dp, len(lengths))})
    engine = EAGER if eager else NO_ENGINE
    kv = 64 + max(lengths) + spare
    at = max(64 + max(lengths), kv - smaller)
    floor = G.rollout_floor(spec, layout, H100, engine, np.asarray(lengths, dtype=np.int64), 64,
                            np.array([kv]), max_seqs)[0]
    r = rollout(lengths, layout, kv=at, max_seqs=max_seqs, prompt=64, spec=spec, engine=engine)
    assert floor <= (r.seconds - r.time.recompute) * (1 + 1e-12)


def test_the_rollout_floor_is_close_when_the_cache_binds():
    lengths = np.random.default_rng(0).integers(100, 4000, 256)
    for kv in (8_192, 65_536):
        r = G.time_generation(QWEN7B, lay(), H100, NO_ENGINE, lengths, 1024, kv, 256)
        floor = G.rollout_floor(QWEN7B, lay(), H100, NO_ENGINE, lengths, 1024, np.array([kv]),
                                256)[0]
        assert 0.75 * r.seconds < floor <= r.seconds


@settings(max_examples=60, deadline=None)
@given(lengths=LENGTHS, cap=st.integers(1, 300), longer=st.integers(1, 300),
       kv=st.integers(0, 3000))
def test_a_longer_cap_is_never_faster(lengths, cap, longer, kv):
    """Never faster, but for the recomputation the shorter run's preemptions cost it: in a
    cache that binds, greedy admission can preempt in the shorter run where the longer one,
    its schedule shifted, does not (lengths [125, 231, 299, 227, 108, 83], a 609-token cache,
    capped at 298 or 299 tokens: 2.1169 s and 2.1131 s)."""
    raw = np.array(lengths)
    capped, wider = np.minimum(raw, cap), np.minimum(raw, cap + longer)
    kw = dict(kv=64 + cap + longer + kv, prompt=64, spec=QWEN7B, max_seqs=16)
    short, long = rollout(capped, **kw), rollout(wider, **kw)
    slack = 1e-12 * short.seconds  # equal up to summation order
    assert long.seconds >= short.seconds - short.time.recompute - slack
    if short.preemptions == 0:
        assert long.seconds >= short.seconds - slack


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 400), min_size=4, max_size=40), dp=st.integers(1, 2),
       spare=st.integers(0, 20_000))
def test_partial_rollouts_are_never_slower_than_waiting_for_the_tail(lengths, dp, spare):
    """But for the recomputation of the responses they carry over: with a handful of short
    sequences that can cost more than the tail it saves (lengths [1, 1, 220, 1, 194, 64, 136],
    one replica, 248 spare KV tokens: 1.4575 s against 1.4562 s, 0.028 s recomputed). New
    prompts cost a step their prefill once each ([1, 380, 112, 1, 1] on two replicas once
    priced 2.5137 s against 2.4899 s: the window's last period admitted six prompts in two
    decode steps, and their prefill was scaled per token generated)."""
    kw = dict(layout=lay(dp=dp), kv=64 + max(lengths) + spare, prompt=64, spec=QWEN7B,
              engine=ENGINES["vllm-v1"])
    partial = rollout(lengths, partial=True, **kw)
    assert partial.seconds <= (rollout(lengths, **kw).seconds + partial.time.recompute) \
        * (1 + 1e-9)


def test_a_partial_step_prefills_its_share_of_prompts_once():
    kw = dict(layout=lay(dp=2), kv=64 + 380, prompt=64, spec=QWEN7B, engine=ENGINES["vllm-v1"])
    lengths = [1, 380, 112, 1, 1]
    full, partial = rollout(lengths, **kw), rollout(lengths, partial=True, **kw)
    assert partial.time.prefill == pytest.approx(full.time.prefill)  # the slowest's 3 prompts


def test_partial_rollouts_carry_unfinished_tokens_and_cut_the_tail():
    lengths = np.array([60] * 60 + [3000] * 4)
    full = rollout(lengths, spec=QWEN7B, prompt=64)
    partial = rollout(lengths, spec=QWEN7B, prompt=64, partial=True)
    assert partial.seconds < full.seconds / 2
    assert partial.carried_tokens > 0 and partial.span > 1
    assert partial.tail_s == 0 and partial.time.decode_tail == 0


def test_replica_shares_are_contiguous_and_even():
    assert [c.stop - c.start for c in replica_chunks(10, 4)] == [3, 3, 2, 2]
    sched = schedule(np.arange(1, 11), 4, 8, 10**6, 100)
    assert sorted(set(sched.replica.tolist())) == [0, 1, 2, 3]

"""Tables VII/VIII: hand values, every row against the literal transcription, the identities
that really hold between rows (and the one that does not), invariants, ZeRO and κ."""

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from theory_cases import PROPERTY, TINY, close, degrees, models
from theory_literal import intra_rows

from planner.theory import intra
from planner.theory.shape import TheoryInputError, TheoryModel

log = math.log2
B0, m0 = 3, 7


def _t(cost):
    return (
        (cost.per_rank.work, cost.per_rank.depth, cost.per_rank.memory),
        (cost.global_.work, cost.global_.depth, cost.global_.memory),
    )


def _same(a, b, rel=1e-9):
    return all(close(x, y, rel) for pa, pb in zip(a, b, strict=True)
               for x, y in zip(pa, pb, strict=True))


def _row(name, M, B, m, P_d=1, P_p=1, P_t=1, P_c=1, P_e=1, **opts):
    match name:
        case "none":
            return intra.none(M, B, m, **opts)
        case "data":
            return intra.data(M, B, m, P_d, **opts)
        case "pipeline":
            return intra.pipeline(M, B, m, P_p, **opts)
        case "tensor":
            return intra.tensor(M, B, m, P_t, **opts)
        case "context":
            return intra.context(M, B, m, P_c, **opts)
        case "expert":
            return intra.expert(M, B, m, P_e, **opts)
        case "3d":
            return intra.three_d(M, B, m, P_d, P_p, P_t, **opts)
        case "5d":
            return intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e, **opts)
    raise AssertionError(name)


ROWS = ("none", "data", "pipeline", "tensor", "context", "expert", "3d", "5d")


def test_baseline_hand_values():
    # body = 256 + 256 + 56 = 568; W0 = 6·3·7·2·568; state = 4|π| = 4416; act = 3·7·2·8
    cost = intra.none(TINY, B0, m0)
    assert cost.per_rank.work == 143136
    assert close(cost.per_rank.depth, 4 * (12 + log(56)) + log(21))
    assert cost.per_rank.memory == 4416 + 336
    assert cost.global_ == cost.per_rank


def test_data_and_tensor_hand_values():
    dp = intra.data(TINY, B0, m0, 2)
    assert dp.per_rank.work == 143136 / 2
    assert close(dp.per_rank.depth, 4 * (12 + log(56)) + log(21 / 2))
    assert dp.per_rank.memory == 4416 + 336 / 2
    assert dp.global_.memory == 2 * 4416 + 336
    tp = intra.tensor(TINY, B0, m0, 2)
    assert close(tp.per_rank.depth, 4 * log(8**4 * 16 * 7 / (4 * 2)) + log(21))
    assert close(tp.global_.depth, 4 * (12 + log(56)) + log(21))  # Table VIII: D0


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       degrees)
def test_every_row_matches_literal(M, B, m, P_d, P_p, P_t, P_c, P_e):
    lit = intra_rows(M, B, m, P_d, P_p, P_t, P_c, P_e)
    for name in ROWS:
        assert _same(_t(_row(name, M, B, m, P_d, P_p, P_t, P_c, P_e)), lit[name]), name


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512))
def test_all_degrees_one_is_the_baseline_row(M, B, m):
    base = _t(intra.none(M, B, m))
    for name in ROWS:
        assert _same(_t(_row(name, M, B, m)), base), name


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), st.integers(2, 8))
def test_5d_with_one_degree_is_the_single_strategy_row(M, B, m, P):
    assert _same(_t(intra.five_d(M, B, m, P_d=P)), _t(intra.data(M, B, m, P)))
    assert _same(_t(intra.five_d(M, B, m, P_p=P)), _t(intra.pipeline(M, B, m, P)))
    assert _same(_t(intra.five_d(M, B, m, P_t=P)), _t(intra.tensor(M, B, m, P)))
    assert _same(_t(intra.five_d(M, B, m, P_c=P)), _t(intra.context(M, B, m, P)))


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees)
def test_5d_without_context_or_expert_is_3d(M, B, m, P_d, P_p, P_t):
    assert _same(
        _t(intra.five_d(M, B, m, P_d, P_p, P_t)), _t(intra.three_d(M, B, m, P_d, P_p, P_t))
    )
    # and 3D with one degree is that degree's row
    assert _same(_t(intra.three_d(M, B, m, P_d, 1, 1)), _t(intra.data(M, B, m, P_d)))
    assert _same(_t(intra.three_d(M, B, m, 1, P_p, 1)), _t(intra.pipeline(M, B, m, P_p)))
    assert _same(_t(intra.three_d(M, B, m, 1, 1, P_t)), _t(intra.tensor(M, B, m, P_t)))


@PROPERTY
@given(models(moe=True), st.integers(1, 64), st.integers(1, 512), st.integers(2, 8))
def test_5d_expert_only_is_not_the_isolated_expert_row(M, B, m, P_e):
    # 5D lets EP ranks own disjoint token shards; the isolated row replicates the dense path
    coupled, isolated = intra.five_d(M, B, m, P_e=P_e), intra.expert(M, B, m, P_e)
    assert coupled.per_rank.work < isolated.per_rank.work
    assert coupled.per_rank.depth < isolated.per_rank.depth
    assert coupled.global_.work < isolated.global_.work
    gap = 6 * B * m * M.L * (P_e - 1) * (4 * M.d**2 + m * M.d)  # P_e − 1 extra dense copies
    assert close(isolated.global_.work - coupled.global_.work, gap)


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       degrees)
def test_global_work_is_invariant_and_split_evenly(M, B, m, P_d, P_p, P_t, P_c, P_e):
    W0 = intra.none(M, B, m).global_.work
    for name, cost in {
        "data": intra.data(M, B, m, P_d),
        "pipeline": intra.pipeline(M, B, m, P_p),
        "tensor": intra.tensor(M, B, m, P_t),
        "context": intra.context(M, B, m, P_c),
        "3d": intra.three_d(M, B, m, P_d, P_p, P_t),
        "5d": intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e),
    }.items():
        assert close(cost.global_.work, W0), name
    N = P_d * P_p * P_t * P_c * P_e
    five = intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e)
    assert close(N * five.per_rank.work, five.global_.work)
    iso = intra.expert(M, B, m, P_e)
    assert close(P_e * iso.per_rank.work, iso.global_.work)


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       st.sampled_from([None, 0, 1, 2, 3]))
def test_ranks_sum_to_global_memory_without_pipeline_boundaries(M, B, m, P_d, P_t, P_c, P_e, z):
    # with P_p = 1 there is no boundary-stage embedding convention: N·per-rank = global
    five = intra.five_d(M, B, m, P_d, 1, P_t, P_c, P_e, zero=z)
    assert close(P_d * P_t * P_c * P_e * five.per_rank.memory, five.global_.memory)
    iso = intra.expert(M, B, m, P_e, zero=z)
    assert close(P_e * iso.per_rank.memory, iso.global_.memory)


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       degrees)
def test_global_depth_is_baseline_and_bounds_the_rank(M, B, m, P_d, P_p, P_t, P_c, P_e):
    assume_tp_ok = P_t**2 * M.h <= M.d**4 * M.d_e * m  # the layer term stays non-negative
    D0 = intra.none(M, B, m).global_.depth
    five = intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e)
    assert close(five.global_.depth, D0)  # Table VIII, not Appendix B-C
    assert close(intra.tensor(M, B, m, P_t).global_.depth, D0)
    assert close(intra.three_d(M, B, m, P_d, P_p, P_t).global_.depth, D0)
    if assume_tp_ok:
        assert five.per_rank.depth <= D0 + 1e-9


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       degrees, st.sampled_from(["P_d", "P_p", "P_t", "P_c", "P_e"]),
       st.sampled_from([None, 1, 2, 3]))
def test_per_rank_cost_does_not_grow_with_any_degree(M, B, m, P_d, P_p, P_t, P_c, P_e, which, z):
    degs = {"P_d": P_d, "P_p": P_p, "P_t": P_t, "P_c": P_c, "P_e": P_e}
    more = degs | {which: degs[which] + 1}
    a = intra.five_d(M, B, m, **degs, zero=z).per_rank
    b = intra.five_d(M, B, m, **more, zero=z).per_rank
    assert b.work <= a.work * (1 + 1e-12)
    assert b.memory <= a.memory * (1 + 1e-12)


# --- ZeRO ---------------------------------------------------------------------------------------


@PROPERTY
@given(st.integers(1, 10**12), st.integers(1, 1024))
def test_zero_model_state_forms(P, P_z):
    assert intra.zero_model_state(P, 0, P_z) == 4 * P
    assert intra.zero_model_state(P, None, P_z) == 4 * P
    assert close(intra.zero_model_state(P, 1, P_z), 2 * P + 2 * P / P_z)
    assert close(intra.zero_model_state(P, 2, P_z), P + 3 * P / P_z)
    assert close(intra.zero_model_state(P, 3, P_z), 4 * P / P_z)
    states = [intra.zero_model_state(P, s, P_z) for s in (0, 1, 2, 3)]
    assert all(x >= y * (1 - 1e-12) for x, y in itertools.pairwise(states))
    for s in (0, 1, 2, 3):
        assert close(intra.zero_model_state(P, s, 1), 4 * P)


def test_zero_in_rows_hand_values():
    # data row, ZeRO-3 over P_d = 2: state 4416 → 4416/2 per rank, P_d·(4416/2) globally
    dp = intra.data(TINY, B0, m0, 2, zero=3)
    assert dp.per_rank.memory == 4416 / 2 + 336 / 2
    assert dp.global_.memory == 4416 + 336
    # ZeRO-1: 2P + 2P/P_z with P = 1104
    assert intra.data(TINY, B0, m0, 2, zero=1).per_rank.memory == 2 * 1104 + 1104 + 168
    # stage 0 is Table VII itself
    assert _same(_t(intra.data(TINY, B0, m0, 2, zero=0)), _t(intra.data(TINY, B0, m0, 2)))
    # nothing to shard across without replicas
    assert _same(_t(intra.tensor(TINY, B0, m0, 2, zero=3)), _t(intra.tensor(TINY, B0, m0, 2)))


def test_zero_5d_shards_dense_and_expert_state_over_their_replicas():
    M = TheoryModel(L=2, d=8, d_ff=16, h=2, V=10, E=4, E_a=2, d_e=6)
    cost = intra.five_d(M, 3, 7, P_d=2, P_c=1, P_e=2, zero=3)
    dense = 16 * 2 * 64 + 4 * 10 * 8  # 16L·d² + 4V·d, replicated over P_d·P_c·P_e = 4
    experts = 8 * 2 * 4 * 8 * 6  # 8L·E·d·d_e, split over P_e, replicated over P_d·P_c = 2
    act = 3 * 7 * 2 * 8
    assert close(cost.per_rank.memory, dense / 4 + experts / 2 / 2 + act / 4)
    assert close(cost.global_.memory, dense + experts + act)


# --- activation checkpointing -------------------------------------------------------------------


def test_kappa_hand_values():
    cost = intra.none(TINY, B0, m0, kappa=0.25)
    chain = 2 * (12 + log(56))  # L·log(d⁴·d_ff·m/h), one forward's layer chain
    assert cost.per_rank.work == 143136 + 143136 / 3  # + the recomputed forward, 2·B·m·L·body
    assert close(cost.per_rank.depth, 2 * chain + log(21) + chain)
    assert cost.per_rank.memory == 4416 + 0.25 * 336


@PROPERTY
@given(models(), st.integers(1, 64), st.integers(1, 512), degrees, degrees, degrees, degrees,
       degrees, st.floats(0.01, 0.99))
def test_kappa_trades_activations_for_recompute(M, B, m, P_d, P_p, P_t, P_c, P_e, kappa):
    plain = intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e)
    ckpt = intra.five_d(M, B, m, P_d, P_p, P_t, P_c, P_e, kappa=kappa)
    for a, b in ((plain.per_rank, ckpt.per_rank), (plain.global_, ckpt.global_)):
        assert close(b.work, a.work * 4 / 3)
        assert b.memory < a.memory
    act = B * m * M.L * M.d
    assert close(plain.global_.memory - ckpt.global_.memory, (1 - kappa) * act)
    fwd_rank = (M.L / P_p) * log(M.d**4 * M.d_e * m / (P_t**2 * M.h))
    assert close(ckpt.per_rank.depth - plain.per_rank.depth, fwd_rank, rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kappa": 1.0}, "kappa"),
        ({"kappa": 0}, "kappa"),
        ({"zero": 4}, "zero"),
        ({"zero": True}, "zero"),
    ],
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(TheoryInputError, match=match):
        intra.data(TINY, B0, m0, 2, **kwargs)


def test_bad_degrees_are_refused():
    with pytest.raises(TheoryInputError, match="P_t"):
        intra.five_d(TINY, B0, m0, P_t=0)
    with pytest.raises(TheoryInputError, match="B"):
        intra.none(TINY, 0, m0)


"""The weight refit (`planner.cost.refit`): what each link carries, per-tensor costs, the
mechanisms against each other, and one price in `evaluate`, the search and the plan JSON."""

from __future__ import annotations

import json

import pytest

from planner.cost import comm
from planner.cost.flops import Head
from planner.cost.iteration import evaluate
from planner.cost.refit import (
    REFIT_RATES,
    bytes_model,
    per_tensor,
    price_refit,
    separate_in,
    tensor_counts,
)
from planner.cost.report import to_plan
from planner.plan import Layout, PlanInput
from planner.search import brute, cpsat
from planner.search.solve import Option, to_plan_input
from planner.search.space import build_space
from planner.specs.hardware import load_profile
from planner.specs.model import load_model
from planner.specs.scenario import load_scenario

H100 = load_profile("h100-sxm")
MOE, DENSE = load_model("qwen3-30b-a3b"), load_model("qwen3-32b")


def lay(dp: int = 1, tp: int = 1, pp: int = 1, ep: int = 1, zero: int = 1) -> Layout:
    return Layout(group="g", dp=dp, tp=tp, pp=pp, ep=ep, etp=1 if ep > 1 else None, zero=zero)


def refit(spec=MOE, mechanism="sharded", train=None, gen=None, gpu=H100, fp8=False,
          colocated=False, same_domain=False):
    return price_refit(spec, Head.POLICY, train or lay(dp=16, ep=8), gen or lay(dp=4, tp=4),
                       train_gpu=gpu, gen_gpu=gpu, mechanism=mechanism, colocated=colocated,
                       same_domain=same_domain, fp8=fp8)


def test_tensor_counts_follow_the_checkpoint():
    """Qwen3-30B-A3B: per layer q, k, v, o, two QK-norms, two norms, the router and 128 experts
    × 3 projections; the embedding, the untied head, the final norm."""
    tensors, nonexpert, matrices = tensor_counts(MOE).stage(MOE, 1, 0)
    assert tensors == 48 * (4 + 2 + 2 + 1 + 128 * 3) + 3 == 18_867
    assert nonexpert == 48 * 9 + 3
    assert matrices == 48 * (4 + 128 * 3)
    # a pipeline stage holds its layers' tensors: the stages add up to the model
    halves = [tensor_counts(MOE).stage(MOE, 2, k)[0] for k in range(2)]
    assert sum(halves) == tensors


def test_more_nics_carry_the_refit_faster():
    """A separate rollout group takes whole tensors in over every NIC of its domains: 2 GPUs
    per node have 2 NICs, 8 have 8 (up to what NVLink fans out); a faster NIC is faster."""
    nic = comm.link_inter_node(H100)
    two = separate_in(MOE, lay(dp=2), H100, Head.POLICY, nic, False)
    eight = separate_in(MOE, lay(dp=8), H100, Head.POLICY, nic, False)
    assert eight == pytest.approx(two / 4)
    fast = H100.model_copy(update={"inter_node_gbps": 2 * H100.inter_node_gbps})
    assert separate_in(MOE, lay(dp=2), fast, Head.POLICY, comm.link_inter_node(fast),
                       False) == pytest.approx(two / 2)
    # sharded: more training ranks each send less
    small, large = (refit(train=lay(dp=g, ep=8), gen=lay(dp=2, tp=32)).send_s for g in (8, 64))
    assert large == pytest.approx(small / 8)


def test_one_rank_broadcast_is_slower_than_the_checkpoint_engine_and_sharded():
    sharded, engine, one_rank = (refit(mechanism=m).seconds for m in
                                 ("sharded", "checkpoint_engine", "one_rank_broadcast"))
    assert sharded < engine < one_rank
    # one rank's NIC carries the whole model: at least W over it
    nic = 50e9 * H100.efficiency.inter_node * REFIT_RATES.link_share
    assert refit(mechanism="checkpoint_engine").send_s >= bytes_model(MOE, Head.POLICY) / nic


def test_relays_widen_the_one_rank_broadcast_over_their_nodes_nics():
    """verl 0.9.1's NCCL engine: the source's node-local training ranks relay each bucket over
    their own NICs. Never slower than one sender; more training GPUs on the source's node
    carry the outbound faster, up to what NVLink fans out; inside one domain (the link is
    NVLink already) they change nothing."""
    def send(train, mechanism="checkpoint_engine_relays", same_domain=False):
        return refit(DENSE, mechanism, train, lay(dp=4, tp=4), same_domain=same_domain).send_s

    for train in (lay(dp=1), lay(dp=2, zero=3), lay(dp=8, zero=3), lay(dp=16, zero=3)):
        assert send(train) <= send(train, "checkpoint_engine")
    two, eight, sixteen = (send(lay(dp=g, tp=2)) for g in (1, 4, 8))  # replicas: no gather
    assert two > eight and eight == pytest.approx(sixteen)
    # a whole model on the source's node (no gather over its NIC): the outbound sets it,
    # over 8 NICs, capped by NVLink
    nics = min(8 * 50e9 * H100.efficiency.inter_node, 450e9 * H100.efficiency.intra_node)
    assert eight == pytest.approx(bytes_model(DENSE, Head.POLICY)
                                  / (REFIT_RATES.link_share * nics))
    one_node = lay(dp=4, zero=3)
    assert send(one_node, same_domain=True) == pytest.approx(
        send(one_node, "checkpoint_engine", same_domain=True))


def test_the_verl_preset_prices_its_engines_relays():
    sc = load_scenario(None, {**GRPO, "framework": "verl"})
    assert sc.runtime.refit == "checkpoint_engine_relays"


def test_moe_pays_its_many_tensors():
    """Qwen3-30B-A3B has fewer bytes than Qwen3-32B but 25× the tensors: its per-tensor work
    is larger, and so is its one-rank broadcast, a synchronised round per tensor."""
    assert bytes_model(MOE, Head.POLICY) < bytes_model(DENSE, Head.POLICY)
    assert per_tensor(MOE, lay(tp=4), False) > 20 * per_tensor(DENSE, lay(tp=4), False)
    moe = refit(MOE, "one_rank_broadcast", lay(dp=16, ep=8), lay(dp=4, tp=4)).seconds
    dense = refit(DENSE, "one_rank_broadcast", lay(dp=16), lay(dp=4, tp=4)).seconds
    assert moe > 10 * dense


def test_an_fp8_engine_pays_the_quantization():
    bf16, fp8 = refit(fp8=False), refit(fp8=True)
    matrices = tensor_counts(MOE).stage(MOE, 1, 0)[2]
    assert fp8.seconds - bf16.seconds == pytest.approx(REFIT_RATES.fp8_quantize_s * matrices)


def test_colocated_training_spread_over_nodes_pulls_over_the_nics():
    """Co-located: a training layout whose node holds half the model (PP2 over two nodes)
    brings the other half in over the node's NICs; one that holds it all (EP inside the node)
    needs none."""
    half = refit(train=lay(dp=8, pp=2, ep=8), gen=lay(dp=8, tp=2), colocated=True)
    whole = refit(train=lay(dp=8, tp=2, ep=4), gen=lay(dp=8, tp=2), colocated=True)
    nics = 8 * 50e9 * H100.efficiency.inter_node * REFIT_RATES.link_share
    assert half.send_s == pytest.approx(bytes_model(MOE, Head.POLICY) / 2 / nics)
    assert whole.send_s == 0


GRPO = {"algorithm": "grpo", "models.actor": "qwen3-30b-a3b", "models.reference": "none",
        "workload.prompts_per_step": 16, "workload.samples_per_prompt": 4,
        "workload.prompt_len": 256, "workload.response_len": 512,
        "workload.max_response_len": 1024, "cluster.gpu": "h100-sxm", "cluster.nodes": 4,
        "search.max_staleness": 1}


def disaggregated(train_gpus: int, gen_gpus: int) -> PlanInput:
    return PlanInput.model_validate({
        "groups": [{"name": "train", "gpus": train_gpus}, {"name": "gen", "gpus": gen_gpus}],
        "layouts": {"actor": {"generation": {"group": "gen", "dp": gen_gpus // 2, "tp": 2},
                              "training": {"group": "train", "dp": train_gpus, "ep": 8,
                                           "etp": 1, "zero": 1, "checkpointing": "full"}}},
        "inter_model": {"placement": "disaggregated", "staleness": 1}})


@pytest.mark.parametrize("mechanism", ["sharded", "checkpoint_engine",
                                       "checkpoint_engine_relays", "one_rank_broadcast"])
def test_evaluate_prices_the_runtime_mechanism_and_the_plan_json_names_it(mechanism):
    sc = load_scenario(None, {**GRPO, "runtime.refit": mechanism})
    ev = evaluate(sc, disaggregated(16, 16))
    gpu = sc.cluster.gpu
    expected = price_refit(sc.actor, Head.POLICY, lay(dp=16, ep=8), lay(dp=8, tp=2),
                           train_gpu=gpu, gen_gpu=gpu, mechanism=mechanism, colocated=False,
                           same_domain=False, fp8=False)
    assert ev.refit == expected and ev.sync_s == expected.seconds
    sync = to_plan(sc, disaggregated(16, 16), ev).breakdown["sync"]
    assert sync["refit"]["mechanism"] == mechanism
    assert sync["refit"]["time_s"] == pytest.approx(sync["time_s"])


def test_the_search_prices_the_refit_as_evaluate_does():
    """Both placements and every mechanism: the solver's objective is evaluate's step (to the
    ms rounding of each term), and CP-SAT's optimum is brute force's."""
    for mechanism in ("sharded", "one_rank_broadcast"):
        sc = load_scenario(None, {**GRPO, "cluster.nodes": 1, "runtime.refit": mechanism,
                                  "models.actor": "qwen2.5-1.5b"})
        for option in (Option(0, False, False), Option(1, False, False)):
            space = build_space(sc, staleness=option.staleness, slots=2)
            best, _, _ = brute.solve(space)
            result = cpsat.solve(space, 30)
            assert result.objective == best
            ev = evaluate(sc, to_plan_input(space, result.choice, option))
            assert ev.iteration_time_s * 1000 == pytest.approx(result.objective,
                                                               abs=len(space.tasks) + 4)


def test_the_refit_flag_sets_the_mechanism_and_a_bad_one_names_the_field(cli, write):
    scenario = write("s.yaml", {
        "algorithm": "grpo", "models": {"actor": "qwen3-30b-a3b", "reference": "none"},
        "workload": {"prompts_per_step": 16, "samples_per_prompt": 4, "prompt_len": 256,
                     "response_len": 512, "max_response_len": 1024},
        "cluster": {"gpu": "h100-sxm", "nodes": 4}, "search": {"max_staleness": 1}})
    plan = write("p.json", disaggregated(16, 16).model_dump(mode="json"))
    result = cli("evaluate", str(scenario), str(plan), "--refit", "one_rank_broadcast", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["breakdown"]["sync"]["refit"]["mechanism"] == \
        "one_rank_broadcast"
    shown = cli("evaluate", str(scenario), str(plan), "--refit", "sharded")
    assert "weight refit" in shown.stdout and "every training rank sends" in shown.stdout
    bad = cli("evaluate", str(scenario), str(plan), "--refit", "rdma")
    assert bad.exit_code == 2 and "runtime.refit" in bad.stderr and "sharded" in bad.stderr


def test_hiding_the_refit_no_choice_sees_keeps_the_optimum(monkeypatch):
    """build_space drops the actor training's refit transfers every rollout candidate's
    outlast (`space.hide_refit`): fewer candidates (training layouts that differed only in the
    bytes a node holds), the same optimum — brute force on one group, CP-SAT on two."""
    from planner.search import space as space_module

    sc = load_scenario(None, {**GRPO, "models.actor": "qwen3-235b-a22b", "cluster.nodes": 8,
                              "workload.prompts_per_step": 32, "runtime.refit": "sharded"})
    hidden = [build_space(sc, slots=1)] + [build_space(sc, staleness=s, slots=2)
                                           for s in (0, 1)]
    monkeypatch.setattr(space_module, "_hide_refit", lambda space: None)
    shown = [build_space(sc, slots=1)] + [build_space(sc, staleness=s, slots=2)
                                          for s in (0, 1)]
    assert all(h.kept < s.kept for h, s in zip(hidden, shown, strict=True))
    assert brute.solve(hidden[0])[0] == brute.solve(shown[0])[0]
    for h, s in zip(hidden[1:], shown[1:], strict=True):
        assert cpsat.solve(h, 60).objective == cpsat.solve(s, 60).objective

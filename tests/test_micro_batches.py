"""Micro-batches: `evaluate` accepts exactly the sizes the search draws — every size that
divides a data-parallel rank's share (of a mini-batch in training, of the step's batch in a
forward; `legality.micro_batch_sizes`) — so no micro-batch of a plan lies outside the space its
optimum is proven over (issue 25); an imported size that does not divide is priced at the
largest that does, with a note."""

from __future__ import annotations

import re

import pytest

from planner.cost.iteration import evaluate
from planner.cost.legality import (
    interleaved_micro_batch_sizes,
    micro_batch_at_most,
    micro_batch_sizes,
    rank_share,
)
from planner.errors import InfeasibleError, InputError
from planner.export import export
from planner.importers import import_config
from planner.plan import PlanInput
from planner.search.solve import plan
from planner.specs.scenario import load_scenario
from tests.export.plans import colocated, priced, scenario


def test_the_sizes_are_the_divisors_of_a_whole_share():
    assert micro_batch_sizes(12) == (1, 2, 3, 4, 6, 12)
    assert micro_batch_sizes(51.2) == ()  # 256 sequences over 5 ranks
    assert micro_batch_sizes(0.5) == ()
    assert (micro_batch_at_most(32, 12), micro_batch_at_most(8, 16),
            micro_batch_at_most(7, 3)) == (8, 8, 1)
    # two interleaved chunks over 4 stages need at least 4 micro-batches of the 16
    assert interleaved_micro_batch_sizes(16, 4, 2) == (1, 2, 4)
    assert interleaved_micro_batch_sizes(16, 4, 1) == micro_batch_sizes(16)


def test_evaluate_refuses_a_training_micro_batch_that_does_not_divide_the_share():
    sc = scenario()  # 64 × 4 = 256 sequences, 2 mini-batches: 16 per rank of 8
    with pytest.raises(InputError, match=re.escape(
            "plan: layouts.actor.training.micro_batch: 3 does not divide the 16 sequences "
            "each data-parallel rank runs; use 2 or 4")):
        evaluate(sc, PlanInput.model_validate(colocated(train={"dp": 8, "micro_batch": 3})))


def test_evaluate_refuses_a_forward_micro_batch_past_the_share_and_an_uneven_dp():
    sc = scenario()  # the forward runs all 256 sequences: 32 per rank of 8
    with pytest.raises(InputError, match=re.escape(
            "layouts.reference.assessment.micro_batch: 64 does not divide the 32 sequences "
            "each data-parallel rank runs; use 32")):
        evaluate(sc, PlanInput.model_validate(colocated(ref={"dp": 8, "micro_batch": 64})))
    with pytest.raises(InputError, match="layouts.reference.assessment.micro_batch: each "
                       "data-parallel rank would run 51.2 sequences, not a whole number"):
        evaluate(sc, PlanInput.model_validate(colocated(
            gpus=5, gen={"dp": 5}, train={"dp": 1, "pp": 5, "last_stage_layers": 4},
            ref={"dp": 5})))


def test_an_imported_micro_batch_that_does_not_divide_is_priced_at_one_that_does():
    sc = scenario()
    text = export(priced(sc, colocated(ref={"dp": 8, "zero": 3, "micro_batch": 4})), sc,
                  "verl").text
    key = "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"
    assert f"{key}=4" in text
    got = import_config(text.replace(f"{key}=4", f"{key}=12"), sc)
    assert got.plan["layouts"]["reference"]["assessment"]["micro_batch"] == 8
    assert ("reference assessment micro-batch: 12 sequence(s) do not divide the 32 each "
            "data-parallel rank runs; priced at 8, the largest size that does") in got.notes
    evaluate(sc, PlanInput.model_validate(got.plan))  # accepted as imported


# GRPO Qwen2.5-0.5B, 64 prompts × 8, responses of 256 tokens, on one node of 8 H100s: while
# training drew micro-batches of 1, 2, 4 and 8 only, `plan` proved 1.511 s with 8, and the
# same plan training on 32 (which divide each rank's 32 sequences) evaluated at 1.098 s
BEATEN = {"algorithm": "grpo", "models.actor": "qwen2.5-0.5b", "models.reference": "actor",
          "workload.prompt_len": 256, "workload.response_len": 256,
          "workload.max_response_len": 256, "workload.samples_per_prompt": 8,
          "workload.prompts_per_step": 64, "cluster.gpu": "h100-sxm", "cluster.nodes": 1,
          "cluster.gpus_per_node": 8}


def test_no_micro_batch_evaluate_accepts_beats_the_optimum():
    sc = load_scenario(None, BEATEN)
    best = plan(sc, explain=False)
    assert best.search["status"] == "OPTIMAL"
    given = PlanInput.model_validate(best.model_dump(mode="json"))
    tried = 0
    for role, stages in given.layouts.items():
        for stage, lay in stages.items():
            if stage == "generation":
                continue
            for mb in interleaved_micro_batch_sizes(rank_share(sc, stage, lay.dp), lay.pp,
                                                    lay.vp):
                try:
                    t = evaluate(sc, given.with_layout(role, stage, micro_batch=mb))
                except InfeasibleError:
                    continue
                tried += 1
                # whole ms per candidate: the proof holds to that rounding
                assert t.iteration_time_s >= best.iteration_time_s - 5e-3, (role, stage, mb)
    assert tried > 8

"""`rlplan import` on launch scripts written the way the published ones are (arrays, `$((...))`,
`${X:-default}`, wrappers, `+` keys): what each framework's release runs — its defaults —
read into the scenario and the plan; bad values are one error naming the key."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from planner.errors import InputError
from planner.importers import lay_out, read_file
from planner.importers.scenario import scenario_for
from tests.conftest import REPO

VERL_MEGATRON = """#!/usr/bin/env bash
set -xeuo pipefail
NNODES=${NNODES:-1}
train_tp=${TP:-2}
max_prompt_length=$((256 * 2))
COMMON=(
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=${train_tp}
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2
)
python3 -m verl.trainer.main_ppo --config-path=config \\
    --config-name='ppo_megatron_trainer.yaml' \\
    algorithm.adv_estimator=grpo \\
    data.train_files="$HOME/data/train.parquet" \\
    data.train_batch_size=64 \\
    data.max_prompt_length=${max_prompt_length} \\
    data.max_response_length=1024 \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    "${COMMON[@]}" \\
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.n=4 \\
    trainer.logger='["console","wandb"]' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=${NNODES} $@
"""


def imported(text: str, settings: dict | None = None, **flags):
    reading = read_file(text, None, settings)
    sc, notes = scenario_for(reading, None, {"cluster.gpu": "h100-sxm", **flags})
    got = lay_out(reading, sc)
    return sc, got.plan, got.notes + notes


def test_verl_megatron_reads_the_script_and_applies_091s_defaults():
    sc, plan, notes = imported(VERL_MEGATRON)
    assert (sc.algorithm, sc.actor.name) == ("grpo", "qwen2.5-0.5b")
    w = sc.workload
    assert (w.prompts_per_step, w.samples_per_prompt, w.prompt_len, w.max_response_len,
            w.mini_batches) == (64, 4, 512, 1024, 4)
    assert (sc.cluster.nodes, sc.cluster.gpus_per_node) == (1, 8)
    train = plan["layouts"]["actor"]["training"]
    # sequence parallelism and the distributed optimizer are verl 0.9.1's Megatron defaults
    assert {k: train[k] for k in ("tp", "pp", "dp", "sp", "zero", "checkpointing",
                                  "micro_batch")} == {"tp": 2, "pp": 2, "dp": 2, "sp": True,
                                                      "zero": 1, "checkpointing": "full",
                                                      "micro_batch": 2}
    ref = plan["layouts"]["reference"]["assessment"]  # inherits the actor's TP/PP
    assert (ref["tp"], ref["pp"], ref["dp"], ref["zero"]) == (2, 2, 2, 0)
    gen = plan["layouts"]["actor"]["generation"]  # rollout TP 2 and max_num_seqs 256: defaults
    assert (gen["tp"], gen["dp"], gen["max_num_seqs"]) == (2, 4, 256)
    assert any("Qwen2.5-0.5B-Instruct: read as the shipped qwen2.5-0.5b" in n for n in notes)
    ignored = next(n for n in notes if n.startswith("ignored"))
    assert "data.train_files" in ignored and "trainer.logger" in ignored


def _pp5(*settings: str):
    """VERL_MEGATRON on 5 stages (TP 2, 5 nodes of 8: DP 4) with `settings` added."""
    cfg = "actor_rollout_ref.actor.megatron.override_transformer_config"
    script = VERL_MEGATRON.replace("pipeline_model_parallel_size=2",
                                   "pipeline_model_parallel_size=5")
    added = "".join(f"    +{cfg}.{s} \\\n" for s in settings)
    script = script.replace('"${COMMON[@]}" \\\n', '"${COMMON[@]}" \\\n' + added)
    return imported(script, {"NNODES": "5"})[1]


def test_verl_uneven_pipeline_keys_become_the_layouts_split():
    """As verl's DeepSeek-V3 script writes them (`+…override_transformer_config.…`): the
    last stage's count (the reference inherits the actor's block), or the account-for
    switches, which Megatron turns into one layer fewer on the first / last stage."""
    plan = _pp5("num_layers_in_last_pipeline_stage=4")
    for lay in (plan["layouts"]["actor"]["training"], plan["layouts"]["reference"]["assessment"]):
        assert (lay["pp"], lay.get("first_stage_layers"), lay["last_stage_layers"]) == (5, None, 4)
    train = _pp5("account_for_embedding_in_pipeline_split=True")["layouts"]["actor"]["training"]
    assert (train["first_stage_layers"], train.get("last_stage_layers")) == (4, None)  # 25/5 − 1
    with pytest.raises(InputError, match=r"override_transformer_config\.num_layers_in_last_"
                       r"pipeline_stage: the other 4 stage\(s\) must split the remaining 19"):
        _pp5("num_layers_in_last_pipeline_stage=5")
    with pytest.raises(InputError, match="cannot be combined with the account-for"):
        _pp5("num_layers_in_last_pipeline_stage=4", "account_for_loss_in_pipeline_split=True")


def test_settings_and_tp1_switch_sequence_parallelism_off():
    sc, plan, _ = imported(VERL_MEGATRON, {"NNODES": "2", "TP": "1"})
    train = plan["layouts"]["actor"]["training"]
    assert (sc.cluster.nodes, train["tp"], train["dp"], train["sp"]) == (2, 1, 8, False)


@pytest.mark.parametrize("change, match", [
    ("NNODES=${NNODES:-1}", "trainer.nnodes=\\${NNODES}: \\$NNODES is not set in the script.*"
                            "--set NNODES=VALUE"),
    ("data.train_batch_size=64", "data.train_batch_size='lots': expected a whole number"),
    ("actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.nn: verl 0.9.1 has no such "
                                      "key"),
])
def test_bad_values_name_the_key(change, match):
    broken = {"NNODES=${NNODES:-1}": "",
              "data.train_batch_size=64": "data.train_batch_size=lots",
              "actor_rollout_ref.rollout.n=4": "actor_rollout_ref.rollout.nn=4"}[change]
    with pytest.raises(InputError, match=match):
        imported(VERL_MEGATRON.replace(change, broken))


def test_verl_fsdp_defaults():
    script = """python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae \\
        actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B critic.model.path=Qwen/Qwen2.5-0.5B \\
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
        critic.ppo_micro_batch_size_per_gpu=8 critic.ulysses_sequence_parallel_size=2 \\
        critic.model.fsdp_config.optimizer_offload=True data.train_batch_size=256
    """
    sc, plan, _ = imported(script)
    assert sc.algorithm == "ppo" and sc.critic is not None and sc.reference is None
    actor, critic = plan["layouts"]["actor"]["training"], plan["layouts"]["critic"]["training"]
    # enable_gradient_checkpointing and reshard_after_forward (ZeRO-3-like) default on
    assert (actor["zero"], actor["checkpointing"], actor["dp"]) == (3, "full", 8)
    assert (critic["cp"], critic["dp"], critic["offload"], critic["micro_batch"]) == \
        (2, 4, "optimizer", 8)
    assert sc.workload.mini_batches == 1  # 256 prompts, ppo_mini_batch_size 256 (default)


def test_verl_frozen_models_are_offloaded_as_091_runs_them():
    script = """python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae \\
        actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B critic.model.path=Qwen/Qwen2.5-0.5B \\
        actor_rollout_ref.actor.use_kl_loss=True \\
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
        actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \\
        critic.ppo_micro_batch_size_per_gpu=8 data.train_batch_size=256 \\
        reward_model.enable=True reward_model.model.path=Qwen/Qwen2.5-0.5B \\
        reward_model.rollout.tensor_model_parallel_size=1 EXTRA
    """
    _, plan, notes = imported(script.replace("EXTRA", ""))
    # the FSDP reference streams from CPU memory whatever param_offload says; the reward
    # engine sleeps (free_cache_engine defaults true)
    assert plan["layouts"]["reference"]["assessment"]["offload"] == "params"
    assert plan["layouts"]["reward"]["assessment"]["offload"] == "sleep"
    assert any("the engine sleeps outside its pass" in n for n in notes)
    _, plan, _ = imported(script.replace(
        "EXTRA", "reward_model.rollout.free_cache_engine=False"))
    assert plan["layouts"]["reward"]["assessment"]["offload"] == "none"
    # a Megatron reference with param_offload (the actor's, by default) sleeps
    _, plan, _ = imported(VERL_MEGATRON.replace(
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.actor.megatron.param_offload=True actor_rollout_ref.rollout.name=vllm"))
    assert plan["layouts"]["reference"]["assessment"]["offload"] == "sleep"
    _, plan, _ = imported(VERL_MEGATRON)
    assert plan["layouts"]["reference"]["assessment"]["offload"] == "none"


OPENRLHF = """set -x
ENGINE_ARGS=(
   --ref.num_nodes 1
   --ref.num_gpus_per_node 4
   --actor.num_nodes 1
   --actor.num_gpus_per_node 4
   --vllm.num_engines ${ENGINES:-2}
   --vllm.tensor_parallel_size 2
   --train.colocate_all
   --ds.zero_stage ZERO
   # --ds.adam_offload
)
ray job submit --address="http://127.0.0.1:8265" \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   ${ENGINE_ARGS[@]} \\
   --actor.model_name_or_path Qwen/Qwen2.5-0.5B \\
   --reward.remote_url http://localhost:5000/get_reward \\
   --algo.advantage.estimator group_norm \\
   --rollout.batch_size 32 --rollout.n_samples_per_prompt 4 --train.batch_size 64 \\
   --data.max_len 2048 --rollout.max_new_tokens 1536 \\
   --data.prompt_dataset some/dataset --logger.wandb.key {token} EXTRA
"""


@pytest.mark.parametrize("zero", [2, 3])
def test_openrlhf_frozen_models_follow_zero3(zero):
    sc, plan, notes = imported(OPENRLHF.replace("ZERO", str(zero)).replace("EXTRA", ""))
    ref = plan["layouts"]["reference"]["assessment"]
    assert ref["zero"] == (3 if zero == 3 else 0)  # get_ds_eval_config
    assert plan["layouts"]["actor"]["training"]["zero"] == zero
    assert [g["gpus"] for g in plan["groups"]] == [4]  # colocate_all: vLLM on the actor's GPUs
    assert (sc.algorithm, sc.reward_kind, sc.workload.prompt_len,
            sc.workload.max_response_len, sc.workload.mini_batches) == \
        ("grpo", "verifier", 512, 1536, 2)
    assert any("--data.prompt_dataset" in n and "--logger.wandb.key" in n for n in notes)


def test_openrlhf_async_with_colocate_all_gives_vllm_its_own_gpus():
    sc, plan, _ = imported(OPENRLHF.replace("ZERO", "3").replace(
        "EXTRA", "--train.async_enable --train.async_queue_size 2"))
    assert [g["gpus"] for g in plan["groups"]] == [4, 4]
    assert plan["layouts"]["actor"]["generation"]["group"] == "g1"
    assert plan["inter_model"]["staleness"] == 2 and sc.search.max_staleness == 2


def test_openrlhf_flat_flags_and_slurm_nodes():
    script = """#SBATCH -N 2
python3 -m openrlhf.cli.train_ppo_ray --actor_num_gpus_per_node 4 --critic_num_gpus_per_node 4 \\
   --ref_num_gpus_per_node 4 --reward_num_gpus_per_node 4 --colocate_actor_ref \\
   --colocate_critic_reward --vllm_num_engines 4 --vllm_tensor_parallel_size 2 \\
   --pretrain Qwen/Qwen2.5-0.5B --reward_pretrain Qwen/Qwen2.5-0.5B --zero_stage 3 \\
   --adam_offload --gradient_checkpointing --ring_attn_size 2 --bf16
"""
    sc, plan, notes = imported(script)
    assert (sc.cluster.nodes, sc.cluster.gpus_per_node) == (2, 8)
    assert [g["gpus"] for g in plan["groups"]] == [4, 4, 8]
    critic = plan["layouts"]["critic"]["training"]
    assert (critic["group"], critic["cp"], critic["dp"], critic["offload"],
            critic["checkpointing"], critic["micro_batch"]) == ("g1", 2, 2, "optimizer",
                                                                "full", 4)
    # ≤ v0.9.5's separate length caps, 1024 each by default
    assert (sc.workload.prompt_len, sc.workload.max_response_len) == (1024, 1024)
    assert any("not flags of OpenRLHF" in n and "--bf16" in n for n in notes)


MEGATRON = """#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES=1
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES)
MODEL_ARGS=(
    --num-layers 24 --hidden-size 896 --ffn-hidden-size 4864 --num-attention-heads 14
    --group-query-attention --num-query-groups 2 --seq-length 2048 --vocab-size 151936
    --swiglu
)
TRAINING_ARGS=(--micro-batch-size 2 --global-batch-size 64 --bf16 --lr 1e-4)
PARALLEL_ARGS=(--tensor-model-parallel-size TP --pipeline-model-parallel-size PP
    --sequence-parallel --use-distributed-optimizer)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]} \\
    ${PARALLEL_ARGS[@]} --data-path $DATA --save $1
"""


def test_megatron_launch_script():
    sc, plan, notes = imported(MEGATRON.replace("TP", "1").replace("PP", "2"))
    assert (sc.algorithm, sc.actor.name, sc.cluster.total_gpus) == ("sft", "qwen2.5-0.5b", 8)
    assert any("is the shipped qwen2.5-0.5b" in n for n in notes)  # found by its shape
    assert (sc.workload.prompts_per_step, sc.workload.seq_len) == (64, 2048)
    assert sc.runtime.training_states == "fp32_grads"  # --bf16 without --grad-reduce-in-bf16
    train = plan["layouts"]["actor"]["training"]
    # validate_args switches sequence parallelism off at TP 1
    assert (train["tp"], train["pp"], train["dp"], train["sp"], train["zero"],
            train["micro_batch"]) == (1, 2, 4, False, 1, 2)


@pytest.mark.parametrize(("flags", "split"), [
    ("--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 4", (2, 4)),
    # the embedding and loss counted as layers: 26 over 2 ranks, 13 each, the ends one fewer
    ("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split", (12, 12)),
    ("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
     "--num-layers-per-virtual-pipeline-stage 1", (12, 12)),
])
def test_megatron_uneven_pipeline_flags(flags, split):
    pp = "8" if "decoder" in flags else "2"
    script = MEGATRON.replace("TP", "1").replace("PP", pp).replace("--sequence-parallel",
                                                                   f"--sequence-parallel {flags}")
    train = imported(script)[1]["layouts"]["actor"]["training"]
    assert (train.get("first_stage_layers"), train.get("last_stage_layers")) == split
    if "virtual" in flags:  # chunks of 1 over (24 + 2) / 2 per rank: Megatron counts the
        assert train["vp"] == 13  # embedding and the loss as layers here too


def test_megatron_world_too_small_names_the_variable():
    with pytest.raises(InputError, match="TP 2 × PP 8 × CP 1 = 16 GPUs.*--set NUM_NODES=N"):
        imported(MEGATRON.replace("TP", "2").replace("PP", "8"))
    sc, plan, _ = imported(MEGATRON.replace("TP", "2").replace("PP", "8"), {"NUM_NODES": "2"})
    assert sc.cluster.total_gpus == 16 and plan["layouts"]["actor"]["training"]["sp"]


def test_unknown_model_names_its_config_json():
    script = VERL_MEGATRON.replace("Qwen/Qwen2.5-0.5B-Instruct", "acme/Phi-4-mini-instruct")
    with pytest.raises(InputError, match="phi-4-mini-instruct is not a shipped model.*"
                                         "config.json \\(https://huggingface.co/acme/"
                                         "Phi-4-mini-instruct/blob/main/config.json\\) with "
                                         "--actor PATH"):
        imported(script)
    sc, _, _ = imported(script, **{"models.actor": "qwen2.5-0.5b"})  # a flag gives it
    assert sc.actor.name == "qwen2.5-0.5b"


def test_local_model_folder(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text((REPO / "model_specs" / "qwen2.5-0.5b.json").read_text())
    sc, _, _ = imported(VERL_MEGATRON.replace("Qwen/Qwen2.5-0.5B-Instruct", str(folder)))
    assert sc.actor.num_hidden_layers == 24


def test_refused_layouts_name_the_key():
    with pytest.raises(InputError, match="pipeline_model_parallel_size=2: pipeline-parallel "
                                         "rollout"):
        imported(VERL_MEGATRON.replace("rollout.n=4", "rollout.n=4 "
                                       "actor_rollout_ref.rollout.pipeline_model_parallel_size=2"))


# --- the command ---------------------------------------------------------------------------------

def test_cli_writes_scenario_and_plan_that_evaluate_prices(cli, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(VERL_MEGATRON)
    plan, scen = tmp_path / "plan.json", tmp_path / "s.yaml"
    r = cli("import", str(script), "--gpu", "h100-sxm", "--out", str(plan), "--out-scenario",
            str(scen))
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(scen.read_text())["workload"]["prompts_per_step"] == 64
    assert json.loads(plan.read_text())["layouts"]["actor"]["training"]["tp"] == 2
    ev = cli("evaluate", str(scen), str(plan), "--json")
    assert ev.exit_code in (0, 3), ev.output
    assert json.loads(ev.stdout)["status"] in ("evaluated", "infeasible")


@pytest.mark.parametrize("args, match", [
    ([], "trainer.nnodes=\\${NNODES}: \\$NNODES is not set"),
    (["--set", "NNODES"], "--set 'NNODES': expected NAME=VALUE"),
    (["--set", "NNODES=two"], "trainer.nnodes='two': expected a whole number"),
])
def test_cli_errors_are_one_line_and_write_nothing(cli, tmp_path, args, match):
    script = tmp_path / "run.sh"
    script.write_text(VERL_MEGATRON.replace("NNODES=${NNODES:-1}", ""))
    plan, scen = tmp_path / "plan.json", tmp_path / "s.yaml"
    r = cli("import", str(script), "--gpu", "h100-sxm", "--out", str(plan), "--out-scenario",
            str(scen), *args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlplan: error:"), r.stderr
    assert re.search(match, lines[0]), lines[0]
    assert not plan.exists() and not scen.exists()


def test_scenario_file_wins_over_the_script_and_says_so(cli, tmp_path, write):
    script = tmp_path / "run.sh"
    script.write_text(VERL_MEGATRON)
    scen = write("s.yaml", {"workload": {"prompts_per_step": 32, "prompt_len": 100,
                                         "response_len": 200}})
    r = cli("import", str(script), "--gpu", "h100-sxm", "--scenario", str(scen), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["scenario"]["workload"]["prompts_per_step"] == 32
    assert out["scenario"]["workload"]["samples_per_prompt"] == 4  # from the script
    assert any("workload.prompts_per_step: 32" in n and "the script says 64" in n
               for n in out["notes"])


def test_override_list_without_a_command():
    """A file of verl overrides, one per line (what users keep beside their launcher)."""
    text = "\n".join(["algorithm.adv_estimator=grpo", "data.train_batch_size=32",
                      "actor_rollout_ref.actor.ppo_mini_batch_size=16",
                      "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B",
                      "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.rollout."
                      "tensor_model_parallel_size=1", "trainer.n_gpus_per_node=4"])
    sc, plan, _ = imported(text)
    assert (sc.workload.prompts_per_step, sc.cluster.total_gpus) == (32, 4)
    assert plan["layouts"]["actor"]["generation"]["dp"] == 4
    with pytest.raises(InputError, match="32 prompts per step are not a whole number of "
                                         "mini-batches of 256"):  # verl's default: it refuses
        imported(text.replace("actor_rollout_ref.actor.ppo_mini_batch_size=16", ""))

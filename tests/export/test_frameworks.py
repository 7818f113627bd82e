"""Every export, checked by the framework's own code (tests/frameworks.txt, installed --no-deps):
verl's Hydra composition against 0.9.1's config files, OpenRLHF 0.11.2's parser and post-parse
checks, DeepSpeed 0.19.8's DeepSpeedConfig with each role's world size, Megatron-LM's
parse_args/validate_args from megatron-core 0.19.2's wheel (fetched from the package index
into a cache folder; skipped, saying why, only when it cannot be downloaded).

Plans span algorithms (GRPO, PPO with critic and reward model, DPO, SFT), model kinds (dense,
MoE), interleaved pipelines and placements (colocated, separate groups, one step off-policy)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from planner.cost.pipeline_split import offered_split, split_problem
from planner.export import FORMATS, ExportError, export
from planner.export.megatron import pipeline_args
from planner.importers import import_config
from planner.plan import Layout, PlanInput
from tests.export import frameworks as fw
from tests.export.plans import (
    FIVE_RANKS,
    colocated,
    dpo_plan,
    partial_scenario,
    ppo_disaggregated,
    ppo_rollout_apart,
    ppo_scenario,
    ppo_split,
    priced,
    scenario,
)


def _moe():
    sc = scenario(**{"models.actor": "qwen3-30b-a3b", "cluster.nodes": 2})
    train = {"group": "g0", "dp": 4, "tp": 2, "pp": 2, "ep": 4, "zero": 1, "micro_batch": 1,
             "checkpointing": "full", "offload": "optimizer"}
    return sc, {"groups": [{"name": "g0", "gpus": 16}],
                "layouts": {"actor": {"generation": {"group": "g0", "dp": 8, "tp": 2},
                                      "training": train},
                            "reference": {"assessment": {"group": "g0", "dp": 16, "zero": 3,
                                                         "micro_batch": 2}}},
                "inter_model": {"placement": "colocated"}}


# case → (scenario, plan, the formats that accept it: the others must refuse)
CASES: dict[str, Callable] = {
    "grpo-dense-colocated": lambda: (scenario(), colocated(),
                                     {"verl", "openrlhf", "deepspeed", "megatron", "nemo-rl"}),
    "grpo-dense-colocated-tp2-offload": lambda: (
        scenario(), colocated(train={"dp": 4, "tp": 2, "zero": 1, "micro_batch": 2,
                                     "offload": "optimizer"}),
        {"verl", "openrlhf", "deepspeed", "megatron", "nemo-rl"}),
    # verl's Megatron backend keeps the ZeRO-3 reference's weights whole per TP × PP group
    # (the actor's): as verl runs it, the KV cache no longer fits (refused, naming the GiB)
    "grpo-moe-colocated-pp": lambda: (*_moe(), {"megatron", "nemo-rl"}),
    "grpo-partial-colocated": lambda: (partial_scenario(), colocated(partial_rollout=True),
                                       {"verl", "openrlhf", "deepspeed", "megatron",
                                        "nemo-rl"}),
    "ppo-megatron-rollout-with-reward": lambda: (ppo_scenario(), ppo_disaggregated(),
                                                 {"verl", "deepspeed", "megatron"}),
    "ppo-split-openrlhf": lambda: (ppo_scenario(nodes=3), ppo_split(),
                                   {"openrlhf", "deepspeed", "megatron"}),
    "ppo-one-step-off": lambda: (ppo_scenario(nodes=3), ppo_rollout_apart(staleness=1),
                                 {"verl", "deepspeed", "megatron"}),
    "ppo-one-step-off-openrlhf": lambda: (ppo_scenario(nodes=3), ppo_split(staleness=1),
                                          {"openrlhf", "deepspeed", "megatron"}),
    "dpo": lambda: (scenario("dpo"), dpo_plan(), {"openrlhf", "deepspeed", "megatron",
                                                  "nemo-rl"}),
    "sft": lambda: (scenario("sft"), {"groups": [{"name": "g0", "gpus": 8}], "layouts": {
        "actor": {"training": {"group": "g0", "dp": 8, "zero": 2, "micro_batch": 2}}},
        "inter_model": {"placement": "colocated"}}, {"deepspeed", "megatron", "nemo-rl"}),
    "grpo-interleaved-pipeline": lambda: (
        scenario(), colocated(train={"dp": 2, "tp": 2, "pp": 2, "vp": 2, "sp": True, "zero": 1,
                                     "micro_batch": 1}), {"verl", "megatron", "nemo-rl"}),
    # uneven pipeline stages (24 layers): explicit first/last counts, interleaved, the
    # reference on the actor's split (inherited in verl); and a split Megatron interleaves only
    # as --account-for-embedding-in-pipeline-split does (4, 5 × 4 over 5 chunks per rank);
    # NeMo-RL runs both at vp 1 (its megatron_cfg has no vp key), the end counts kept
    "grpo-uneven-pipeline": lambda: (
        scenario(), colocated(train={"dp": 2, "pp": 4, "vp": 2, "first_stage_layers": 4,
                                     "last_stage_layers": 4, "zero": 1, "micro_batch": 1},
                              ref={"dp": 2, "pp": 4, "first_stage_layers": 4,
                                   "last_stage_layers": 4, "micro_batch": 2}),
        {"verl", "megatron", "nemo-rl"}),
    "grpo-uneven-pipeline-vp1": lambda: (  # NeMo-RL's megatron_cfg takes the end counts
        scenario(), colocated(train={"dp": 2, "pp": 4, "first_stage_layers": 4,
                                     "last_stage_layers": 4, "zero": 1, "micro_batch": 1}),
        {"verl", "megatron", "nemo-rl"}),
    "grpo-uneven-accounted": lambda: (
        scenario(**FIVE_RANKS), colocated(gpus=5, gen={"dp": 5}, ref={"dp": 5},
                              train={"dp": 1, "pp": 5, "vp": 5, "first_stage_layers": 4,
                                     "zero": 1, "micro_batch": 1}),
        {"verl", "megatron", "nemo-rl"}),
    "grpo-rollout-log-probs": lambda: (scenario(**{"runtime.old_log_probs": "rollout"}),
                                       colocated(), {"verl", "openrlhf", "deepspeed",
                                                     "megatron", "nemo-rl"}),
    "grpo-fp8-rollout": lambda: (scenario(**{"runtime.rollout_weights": "fp8",
                                             "runtime.kv_cache_dtype": "fp8"}), colocated(),
                                 {"verl", "deepspeed", "megatron", "nemo-rl"}),
}


@pytest.fixture(scope="module")
def exports():
    """case → {format: Export or ExportError}, made once."""
    out = {}
    for name, make in CASES.items():
        sc, plan, _ = make()
        plan = priced(sc, plan)
        out[name] = (sc, plan, {})
        for fmt in FORMATS:
            try:
                out[name][2][fmt] = export(plan, sc, fmt)
            except ExportError as err:
                out[name][2][fmt] = err
    return out


@pytest.mark.parametrize("case", CASES)
def test_exactly_the_expected_formats_accept(case, exports):
    accepted = {f for f, r in exports[case][2].items() if not isinstance(r, ExportError)}
    assert accepted == CASES[case]()[2], {f: str(r) for f, r in exports[case][2].items()
                                          if isinstance(r, ExportError)}


def _each(exports, fmt):
    for case in CASES:
        result = exports[case][2][fmt]
        if not isinstance(result, ExportError):
            yield case, exports[case][0], exports[case][1], result


def test_verl_composes_every_export_with_091s_own_config(exports):
    checked = 0
    for case, sc, plan, result in _each(exports, "verl"):
        cfg = fw.verl_compose(result.text)  # Hydra refuses an unknown key or a bad `+`
        rollout = cfg.actor_rollout_ref.rollout
        assert rollout.tensor_model_parallel_size == plan["layouts"]["actor"]["generation"]["tp"]
        gpus = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
        if cfg.trainer.v1.trainer_mode == "separate_async":
            gpus += rollout.nnodes * rollout.n_gpus_per_node
        rm = cfg.reward.reward_model
        if sc.reward_kind == "model":  # issue 14: 0.9.1 reads reward.reward_model.*, ON
            assert rm.enable is True and rm.model_path, case
        if rm.enable and rm.enable_resource_pool:
            gpus += rm.nnodes * rm.n_gpus_per_node
        assert gpus == sum(g["gpus"] for g in plan["groups"]), case  # the planned cluster
        checked += 1
    assert checked >= 4


def test_verl_ppo_turns_the_reward_model_on():
    sc = ppo_scenario(nodes=3)
    cfg = fw.verl_compose(export(priced(sc, ppo_rollout_apart(staleness=1)), sc, "verl").text)
    assert cfg.reward.reward_model.enable is True
    assert cfg.reward.reward_model.model_path == "Qwen/Qwen2.5-0.5B"
    assert cfg.reward.reward_model.enable_resource_pool is True
    assert cfg.trainer.v1.trainer_mode == "separate_async"


def test_openrlhf_parses_every_export_and_passes_its_checks(exports):
    checked = 0
    for case, _sc, _plan, result in _each(exports, "openrlhf"):
        dpo = "openrlhf.cli.train_dpo" in result.text
        args = fw.openrlhf_parse(result.text, "train_dpo" if dpo else "train_ppo_ray")
        if not dpo:  # train()'s placement assertions, which run before any GPU work
            actor = args.actor.num_nodes * args.actor.num_gpus_per_node
            if args.train.colocate_all and not args.train.async_enable:
                assert actor == args.vllm.num_engines * args.vllm.tensor_parallel_size, case
            if args.train.colocate_actor_ref and args.algo.kl.init_coef > 0:
                assert (args.actor.num_nodes, args.actor.num_gpus_per_node) == \
                    (args.ref.num_nodes, args.ref.num_gpus_per_node), case
        checked += 1
    assert checked >= 4


def test_openrlhf_parser_refuses_what_it_should():
    sc = scenario()
    text = export(priced(sc, colocated()), sc, "openrlhf").text
    with pytest.raises(ValueError, match="unrecognized arguments: --vllm_num_engines"):
        fw.openrlhf_parse(text.replace('"$@"', "--vllm_num_engines 4"), "train_ppo_ray")
    with pytest.raises(AssertionError, match="requires --train.async_enable"):
        fw.openrlhf_parse(text.replace('"$@"', "--train.partial_rollout_enable"),
                          "train_ppo_ray")


def test_deepspeed_config_class_accepts_every_ds_config(exports):
    checked = 0
    for case, _, plan, result in _each(exports, "deepspeed"):
        layouts = PlanInput.model_validate(plan).layouts
        for role, config in json.loads(result.text).items():
            world = layouts[role]["training"].gpus
            ds = fw.deepspeed_config(config, world)
            assert ds.train_batch_size == config["train_batch_size"], case
            assert ds.zero_optimization_stage == config["zero_optimization"]["stage"], case
            checked += 1
    assert checked >= 6
    with pytest.raises(AssertionError, match="Check batch related parameters"):
        fw.deepspeed_config(config, world + 1)  # the class does check the arithmetic


def _arrays(text: str) -> dict[str, list[str]]:
    return {name: shlex.split(body, comments=True)
            for name, body in re.findall(r"^(\w+)_ARGS=\((.*?)^\)", text, re.M | re.S)}


def test_nemo_rl_own_config_code_accepts_every_export(exports):
    """Every NeMo-RL export against NeMo-RL's shipped base config and its loader. NeMo-RL is
    not on the package index, so this runs only where a checkout is installed (skips, saying
    so, elsewhere); its Megatron layout is checked by Megatron-Core's own code below."""
    checked = 0
    for case, _sc, _plan, result in _each(exports, "nemo-rl"):
        loaded = fw.nemo_rl_check(result.text)
        assert loaded["cluster.num_nodes"] >= 1, case
        checked += 1
    assert checked >= 6


def test_nemo_rl_megatron_layouts_pass_megatron_core(megatron):
    checked, _ = megatron
    ours = [(w[0], r) for w, r in checked if w[1] == "nemo-rl policy.megatron_cfg"]
    assert len(ours) >= 3 and all(r["ok"] for _, r in ours), ours


def test_megatron_rules_in_every_export(exports):
    for case, _, _, result in _each(exports, "megatron"):
        for words in _arrays(result.text).values():
            if "--optimizer-cpu-offload" in words:  # validate_args asserts it (0.19.2)
                assert "--use-precision-aware-optimizer" in words, case
            tp = int(words[words.index("--tensor-model-parallel-size") + 1])
            cp = int(words[words.index("--context-parallel-size") + 1])
            if tp > 1 or cp > 1:
                assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in result.text, case


def _megatron_cases(result, sc) -> list[tuple[str, list[str], int, dict[str, str]]]:
    """(role, argv, world size, environment) of each role array of a Megatron export, with
    the model's shape as its launcher would give it."""
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if "CUDA_DEVICE_MAX_CONNECTIONS" in \
        result.text else {}
    worlds = {m.group(1).upper(): int(m.group(2)) for m in re.finditer(
        r"^# (\w+) on group \w+: (\d+) GPUs", result.text, re.M)}
    out = []
    for name, words in _arrays(result.text).items():
        spec = sc.critic if name == "CRITIC" else sc.actor
        out.append((name, words + fw.model_args(spec, sc.workload.max_seq_len), worlds[name],
                    env))
    return out


# override_transformer_config keys of an uneven split → the Megatron flags that set the same
# TransformerConfig fields (core_transformer_config_from_args; the account-for flags by name)
_SPLIT_FLAGS = {"num_layers_in_first_pipeline_stage": "--decoder-first-pipeline-num-layers",
                "num_layers_in_last_pipeline_stage": "--decoder-last-pipeline-num-layers",
                "account_for_embedding_in_pipeline_split":
                    "--account-for-embedding-in-pipeline-split",
                "account_for_loss_in_pipeline_split": "--account-for-loss-in-pipeline-split"}


def _verl_megatron_cases(result, sc) -> list[tuple[str, list[str], int, dict[str, str]]]:
    """(role, argv, world size, environment) of the Megatron engines a verl export configures
    (Megatron backend: actor, reference), composed by verl's Hydra config and written as the
    Megatron arguments that build the same TransformerConfig: what verl hands Megatron (the
    degrees, interleaving, the uneven split in override_transformer_config)."""
    cfg = fw.verl_compose(result.text)
    if cfg.actor_rollout_ref.actor.strategy != "megatron":
        return []
    world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    out = []
    for role, m in (("ACTOR", cfg.actor_rollout_ref.actor.megatron),
                    ("REFERENCE", cfg.actor_rollout_ref.ref.megatron)):
        argv = [f"--{k.replace('_', '-')}" if i % 2 == 0 else str(m[k])
                for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                          "context_parallel_size", "expert_model_parallel_size")
                for i in range(2)]
        argv += ["--sequence-parallel"] * bool(m.sequence_parallel)
        argv += ["--use-distributed-optimizer"] * bool(m.use_distributed_optimizer)
        if m.virtual_pipeline_model_parallel_size is not None:
            argv += ["--num-virtual-stages-per-pipeline-rank",
                     str(m.virtual_pipeline_model_parallel_size)]
        for key, flag in _SPLIT_FLAGS.items():
            value = m.override_transformer_config.get(key)
            if isinstance(value, bool):
                argv += [flag] * value
            elif value is not None:
                argv += [flag, str(value)]
        if sc.actor.moe is not None:
            argv += ["--num-experts", str(sc.actor.moe.num_experts)]
            if m.expert_tensor_parallel_size is not None:
                argv += ["--expert-tensor-parallel-size", str(m.expert_tensor_parallel_size)]
        argv += ["--micro-batch-size", "1", "--bf16",
                 *fw.model_args(sc.actor, sc.workload.max_seq_len)]
        out.append((role, argv, world, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}))
    return out


def _refusals() -> list[tuple[list[str], int, dict[str, str]]]:
    """Arguments Megatron must accept (the first) and refuse (the rest): a world size TP × PP
    does not divide, CPU optimizer offload without the precision-aware optimizer, TP without
    CUDA_DEVICE_MAX_CONNECTIONS=1 (the export sets it)."""
    shape = fw.model_args(scenario().actor, 1024)
    base = ["--tensor-model-parallel-size", "2", "--micro-batch-size", "1", "--bf16", *shape]
    one = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return [(base, 6, one), ([*base, "--pipeline-model-parallel-size", "4"], 6, one),
            ([*base, "--optimizer-cpu-offload", "--use-distributed-optimizer"], 8, one),
            (base, 8, {})]


# (layers, pp, vp, first_stage_layers, last_stage_layers): Megatron's uneven-split rules
# against rlplan's (`pipeline_split.split_problem`): the layer counts of DeepSeek-V3 (61) and
# Qwen3-235B (94), the search's offered split, Megatron's account-for split, odd ones
SPLITS = sorted({
    (L, pp, vp, *ends)
    for L in (61, 94) for pp in (4, 5, 8) for vp in (1, 2, 4)
    for ends in ((None, None), offered_split(L, pp, vp) or (None, None),
                 (-(-(L + 2) // pp) - 1,) * 2, (2, None), (None, 6), (11, 11), (3, 2))
    # no ends with vp > 1: Megatron asserts pp·vp | L when it builds the model
    # (get_num_layers_to_build), not in its config checks
    if not (vp > 1 and ends == (None, None))
}, key=str)


def _split_case(L: int, pp: int, vp: int, first: int | None, last: int | None
                ) -> tuple[list[str], int, dict[str, str]]:
    """Megatron's arguments for a split: the exporter's flags (`megatron.pipeline_args`) where
    rlplan runs it, else the explicit counts (and the chunk count) as a user would write."""
    if split_problem(L, pp, vp, first, last) is None:
        layout = Layout(group="g", dp=1, pp=pp, vp=vp, first_stage_layers=first,
                        last_stage_layers=last)
        words = [str(w) for flag, value in pipeline_args(
            SimpleNamespace(num_hidden_layers=L), layout, "split")
            for w in (flag, value) if w is not None]
    else:
        words = [w for flag, n in (("--decoder-first-pipeline-num-layers", first),
                                   ("--decoder-last-pipeline-num-layers", last))
                 if n is not None for w in (flag, str(n))]
        words += ["--num-virtual-stages-per-pipeline-rank", str(vp)] * (vp > 1)
    shape = fw.model_args(scenario().actor, 1024)
    shape[shape.index("--num-layers") + 1] = str(L)
    return (["--pipeline-model-parallel-size", str(pp), *words, "--micro-batch-size", "1",
             "--bf16", *shape], pp, {})


def test_megatron_runs_exactly_the_splits_rlplan_runs(megatron):
    """Every split rlplan accepts, Megatron accepts as exported (with the layers per stage and
    chunks it plans); every split rlplan refuses, Megatron refuses too."""
    results = megatron[1][6:]
    assert len(results) == len(SPLITS) > 80
    disagree = [(split, r.get("error")) for split, r in zip(SPLITS, results, strict=True)
                if r["ok"] != (split_problem(*split) is None)]
    assert not disagree, "\n".join(map(str, disagree))
    accepted = [split for split, r in zip(SPLITS, results, strict=True) if r["ok"]]
    assert any(f is not None and f % vp for _, _, vp, f, _ in accepted)  # by accounting
    assert any(vp > 1 and (f or 0) % vp == 0 for _, _, vp, f, _ in accepted)  # by counts
    assert 12 <= len(accepted) < len(SPLITS) - 40
    for (L, pp, vp, *_), r in zip(SPLITS, results, strict=True):
        if r["ok"]:
            assert (r["args"]["num_layers"], r["args"]["pipeline_model_parallel_size"]) == (L, pp)
            assert r["args"]["virtual_pipeline_model_parallel_size"] == (vp if vp > 1 else None)


def _launch_script_case() -> tuple[list[str], int, dict[str, str]]:
    """The arguments of tests/test_import_scripts.py's Megatron launch script (TP 2, PP 2)."""
    argv = ["--num-layers", "24", "--hidden-size", "896", "--ffn-hidden-size", "4864",
            "--num-attention-heads", "14", "--group-query-attention", "--num-query-groups", "2",
            "--seq-length", "2048", "--max-position-embeddings", "2048", "--micro-batch-size",
            "2", "--global-batch-size", "64", "--bf16", "--lr", "1e-4", "--train-iters", "10",
            "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
            "--sequence-parallel", "--use-distributed-optimizer"]
    return argv, 8, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@pytest.fixture(scope="module")
def megatron(exports):
    """Megatron-LM's own parse_args/validate_args and TransformerConfig, in one process, on:
    every Megatron export of the test cases and the same plans imported back and exported
    again; the Megatron engines every verl export configures; every NeMo-RL export's
    policy.megatron_cfg (NeMo-RL builds Megatron-Core's config from it); the refusal cases; a
    launch script's arguments; bare arguments (Megatron's defaults)."""
    cases, where = [], []
    for case, sc, _plan, result in _each(exports, "megatron"):
        back = PlanInput.model_validate(import_config(result.text, sc).plan)
        again = export(priced(sc, back.model_dump(mode="json")), sc, "megatron")
        for label, res in (("export", result), ("imported, exported again", again)):
            for role, argv, world, env in _megatron_cases(res, sc):
                cases.append((argv, world, env))
                where.append((case, label, role, argv, world))
    for case, sc, _plan, result in _each(exports, "verl"):
        for role, argv, world, env in _verl_megatron_cases(result, sc):
            cases.append((argv, world, env))
            where.append((case, "verl's Megatron engine", role, argv, world))
    for case, sc, _plan, result in _each(exports, "nemo-rl"):  # its policy.megatron_cfg
        got = fw.nemo_rl_megatron_args(result.text)
        if got is not None:
            argv, world = got
            env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}  # NeMo-RL's launcher sets it
            experts = ["--num-experts", str(sc.actor.moe.num_experts)] if sc.actor.moe else []
            cases.append((argv + experts + fw.model_args(sc.actor, sc.workload.max_seq_len),
                          world, env))
            where.append((case, "nemo-rl policy.megatron_cfg", "ACTOR", cases[-1][0], world))
    extra = [*_refusals(), _launch_script_case(),
             (["--micro-batch-size", "1", *fw.model_args(scenario().actor, 1024)], 8, {}),
             *(_split_case(*split) for split in SPLITS)]
    results = fw.megatron_validate(cases + extra)
    return list(zip(where, results[:len(cases)], strict=True)), results[len(cases):]


def test_megatron_validate_args_accepts_every_export(megatron):
    checked, _ = megatron
    refused = [(w[:3], r["error"]) for w, r in checked if not r["ok"]]
    assert not refused, refused
    for (case, _, role, argv, world), r in checked:  # Megatron derives the plan's degrees
        got = r["args"]
        tp, pp, cp = (int(argv[argv.index(f) + 1]) for f in (
            "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
            "--context-parallel-size"))
        assert (got["world_size"], got["data_parallel_size"]) == (world, world // (tp * pp * cp)), \
            (case, role)
        assert got["sequence_parallel"] == ("--sequence-parallel" in argv and tp > 1), (case, role)
        assert got["use_distributed_optimizer"] == ("--use-distributed-optimizer" in argv)
    assert len({w[0] for w, _ in checked}) >= 8


def test_megatron_validate_args_refuses_what_it_should(megatron):
    ok, world, offload, connections = megatron[1][:4]
    assert ok["ok"], ok
    assert not world["ok"] and "world size" in world["error"].lower()
    assert not offload["ok"] and "precision-aware" in offload["error"], offload
    assert not connections["ok"] and "CUDA_DEVICE_MAX_CONNECTIONS" in connections["error"]


def test_megatron_launch_scripts_read_by_the_importer_pass_megatron(megatron):
    """A launch script written like Megatron-LM's examples: the arguments the importer reads
    are ones Megatron itself accepts, with the degrees the importer derives."""
    from tests.test_import_scripts import MEGATRON, imported

    sc, plan, _ = imported(MEGATRON.replace("TP", "2").replace("PP", "2"))
    r = megatron[1][4]
    assert r["ok"], r
    train = plan["layouts"]["actor"]["training"]
    assert (r["args"]["data_parallel_size"], r["args"]["sequence_parallel"],
            r["args"]["global_batch_size"]) == (train["dp"], train["sp"],
                                                sc.workload.prompts_per_step)
    assert r["args"]["accumulate_allreduce_grads_in_fp32"] == \
        (sc.runtime.training_states == "fp32_grads")


def test_importer_megatron_defaults_are_megatrons(megatron):
    """planner/importers/defaults.py's MEGATRON table against parse_args with nothing set."""
    from planner.importers.defaults import MEGATRON

    r = megatron[1][5]
    assert r["ok"], r
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                 "--context-parallel-size", "--expert-model-parallel-size",
                 "--sequence-parallel", "--use-distributed-optimizer",
                 "--recompute-granularity"):
        assert r["args"][flag[2:].replace("-", "_")] == MEGATRON[flag], flag


def test_interleaved_pipeline_is_exported(exports):
    """vp reaches verl's Megatron key and Megatron's layers-per-chunk flag (L/(pp·vp))."""
    _, _, results = exports["grpo-interleaved-pipeline"]
    cfg = fw.verl_compose(results["verl"].text)
    assert cfg.actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size == 2
    words = _arrays(results["megatron"].text)["ACTOR"]
    assert words[words.index("--num-layers-per-virtual-pipeline-stage") + 1] == str(24 // 4)
    for fmt in ("deepspeed", "openrlhf"):  # no pipeline parallelism there
        assert "pp" in str(results[fmt])

"""`rlplan analyze pipeline|intra`: the paper's work–depth–memory view (Tables I, IV, VII–IX).

Numbers are the theory layer's, exactly FORMULAS.md: FLOPs, log2 reduction steps, elements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from planner.cli import options as o
from planner.cli.output import console, print_json, reports_errors
from planner.errors import InputError
from planner.specs.model import load_model
from planner.specs.scenario import Scenario, load_scenario, scenario_input
from planner.specs.workload import Family
from planner.theory.analyze import analyze_intra, analyze_pipeline, readings
from planner.theory.shape import TheoryModel

app = typer.Typer(help="The paper's work–depth–memory model (FLOPs, log2 steps, elements).",
                  no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]

# Table I rows shown per role: key in the JSON, label as the paper writes it.
_BLOCK_ROWS = [("params", "|M| (elements)"), ("cf_tok", "C_f^tok"), ("ctr_tok", "C_tr^tok"),
               ("c_prefill", "C_prefill"), ("c_decode", "C_decode"), ("c_gen", "C_gen"),
               ("m_kv", "M_KV"), ("d_f", "D_f"), ("d_tr", "D_tr"), ("d_gen", "D_gen")]


def _e(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}" if abs(x) < 1e4 else f"{x:.3e}"


def theory_roles(scenario: Scenario) -> dict[str, TheoryModel]:
    """The scenario's models as the theory sees them (L, d, d_ff, h, V and MoE sizes)."""
    return {role: TheoryModel.from_spec(spec) for role, spec in scenario.roles.items()}


def node_size(scenario: Scenario, given: int | None = None) -> int:
    """P_t, the GPUs of a node: the one figure of the cluster the paper's model takes (the
    tensor parallelism of its hybrid and combined rows; it counts no GPUs otherwise). With
    pools, `given` (--gpus-per-node) or the node size the pools share."""
    if given is not None:
        return given
    nodes = {p.name: p.cluster.gpus_per_node for p in scenario.pool_list}
    if len(set(nodes.values())) > 1:
        each = ", ".join(f"{n} ({name})" for name, n in nodes.items())
        raise InputError(f"cluster.pools: the pools' nodes hold {each} GPUs and the paper's model "
                         "takes one node size (P_t of its hybrid and combined rows); pass "
                         "--gpus-per-node N")
    return next(iter(nodes.values()))


def pipeline_result(scenario: Scenario, gpus_per_node: int | None = None) -> dict[str, Any]:
    """Tables I, IV and IX; `gpus_per_node` overrides a pooled cluster's node size."""
    if scenario.family is Family.SFT:
        raise InputError("algorithm: sft has no rows in the work–depth–memory model (it covers "
                         "ppo, grpo and dpo); price sft with `rlplan plan` or `rlplan evaluate`, "
                         "or run `rlplan analyze intra` for its training iteration")
    w = scenario.workload
    return analyze_pipeline(scenario.family.value, theory_roles(scenario),
                            B=w.prompts_per_step, K=w.samples_per_prompt, S=w.prompt_len,
                            T=w.response_len, ppo_epochs=w.ppo_epochs,
                            gpus_per_node=node_size(scenario, gpus_per_node))


def _show_pipeline(result: dict[str, Any], title: str) -> None:
    theory, lines = result["theory"], readings(result)
    blocks = theory["building_blocks"]
    table = Table(title=f"Table I — building blocks ({title})")
    table.add_column("quantity")
    for role in blocks:
        table.add_column(role, justify="right")
    for key, label in _BLOCK_ROWS:
        if any(key in b for b in blocks.values()):
            table.add_row(label, *(_e(b.get(key)) for b in blocks.values()))
    console.print(table)

    table = Table(title="Table IV — stages (work FLOPs, depth log2 steps, memory elements)")
    for col in ("stage", "work", "depth co-located", "depth disaggregated", "memory"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for name, stage in theory["stages"].items():
        table.add_row(name, _e(stage["work"]), _e(stage["depth"]),
                      _e(stage.get("depth_disaggregated")), _e(stage["memory"]))
    console.print(table)
    for name in theory["stages"]:
        console.print(f"  {lines[f'stages.{name}']}")

    base = theory["inter_model"]["baseline"]
    table = Table(title="Table IX — inter-model configurations, one iteration")
    for col in ("configuration", "work", "vs baseline", "depth", "vs baseline", "peak memory",
                "vs baseline"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for name, cell in theory["inter_model"].items():
        row = [name]
        for key in ("work", "depth", "memory"):
            row += [_e(cell[key]), f"{cell[key] / base[key] - 1:+.1%}" if base[key] else "—"]
        table.add_row(*row)
    console.print(table)
    for name in theory["inter_model"]:
        console.print(f"  {lines[f'inter_model.{name}']}")
    console.print(f"[bold]{lines['inter_model.overall']}[/bold]")


@app.command()
@reports_errors
def pipeline(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML.")],
    as_json: JsonFlag = False,
    algo: o.Algo = None, actor: o.Actor = None, reference: o.Reference = None,
    reward: o.Reward = None, critic: o.Critic = None, prompts: o.Prompts = None,
    samples: o.Samples = None, prompt_len: o.PromptLen = None, response_len: o.ResponseLen = None,
    ppo_epochs: o.PpoEpochs = None, gpus_per_node: o.GpusPerNode = None,
) -> None:
    """Tables I, IV and IX for a scenario: work, depth and memory per stage and configuration.
    With cluster.pools the model takes the node size the pools share (--gpus-per-node sets it
    when they differ); it counts no GPUs, so a pooled cluster means nothing else to it."""
    flags = o.overrides(locals())
    node = None
    if scenario_input(scenario, {k: v for k, v in flags.items()
                                 if k != "cluster.gpus_per_node"}).cluster.pools is not None:
        node = flags.pop("cluster.gpus_per_node", None)  # P_t alone: the pools keep their nodes
    sc = load_scenario(scenario, flags)
    result = pipeline_result(sc, node)
    if as_json:
        print_json(result)
        return
    w = sc.workload
    _show_pipeline(result, f"{sc.algorithm}, B={w.prompts_per_step} K={w.samples_per_prompt} "
                           f"S={w.prompt_len} T={w.response_len}")


def _degree(name: str, help_text: str) -> Any:
    return typer.Option(f"--{name}", min=1, help=help_text)


@app.command()
@reports_errors
def intra(
    model: Annotated[str, typer.Option(help="Model: shipped name or path to a config.json.")],
    batch: Annotated[int, typer.Option(min=1, help="B: sequences in the training batch.")],
    prompt_len: Annotated[int, typer.Option(min=1, help="S: prompt tokens.")],
    response_len: Annotated[int, typer.Option(min=1, help="T: response tokens.")],
    dp: Annotated[int, _degree("dp", "P_d: data-parallel degree (the paper's).")] = 1,
    pp: Annotated[int, _degree("pp", "P_p: pipeline stages.")] = 1,
    tp: Annotated[int, _degree("tp", "P_t: tensor-parallel degree.")] = 1,
    cp: Annotated[int, _degree("cp", "P_c: context-parallel degree.")] = 1,
    ep: Annotated[int, _degree("ep", "P_e: expert-parallel degree.")] = 1,
    isolated_expert: Annotated[bool, typer.Option(
        help="Table VII's isolated-expert row (only --ep may differ from 1).")] = False,
    zero: Annotated[int | None, typer.Option(min=0, max=3, help="ZeRO stage 0–3.")] = None,
    kappa: Annotated[float | None, typer.Option(
        help="Activation checkpointing factor κ in (0, 1).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Tables VII (per rank) and VIII (global) for one training iteration of one model."""
    spec = load_model(model)
    result = analyze_intra(TheoryModel.from_spec(spec), B=batch, S=prompt_len, T=response_len,
                           P_d=dp, P_p=pp, P_t=tp, P_c=cp, P_e=ep,
                           isolated_expert=isolated_expert, zero=zero, kappa=kappa)
    if as_json:
        print_json(result)
        return
    baseline = analyze_intra(TheoryModel.from_spec(spec), B=batch, S=prompt_len,
                             T=response_len, zero=zero, kappa=kappa)
    table = Table(title=f"Tables VII/VIII — {spec.name}, strategy {result['strategy']} "
                        f"(P_d={dp} P_p={pp} P_t={tp} P_c={cp} P_e={ep}), B={batch} "
                        f"m={prompt_len + response_len}")
    for col in ("scope", "work FLOPs", "depth log2 steps", "memory elements"):
        table.add_column(col, justify="left" if col == "scope" else "right")
    for scope, label in (("per_rank", "per rank"), ("global", "global"), (None, "no parallelism")):
        cell = result[scope] if scope else baseline["per_rank"]
        table.add_row(label, _e(cell["work"]), _e(cell["depth"]), _e(cell["memory"]))
    console.print(table)
    pr, base = result["per_rank"], baseline["per_rank"]
    console.print(f"  per rank: work ×{pr['work'] / base['work']:.3g}, memory "
                  f"×{pr['memory'] / base['memory']:.3g} of the unparallelised iteration; "
                  f"global work ×{result['global']['work'] / base['work']:.3g} (replicated "
                  "work shows as > 1).")

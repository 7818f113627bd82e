"""`rlplan models`, `rlplan gpus`, `rlplan clusters`: the shipped catalogs. Each command
imports the catalog it lists (models and hardware each cost tens of milliseconds of pydantic
model building): a listing starts as fast as it can."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from planner.cli.output import billions, console, fmt, print_json, reports_errors

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]


@reports_errors
def models(as_json: JsonFlag = False) -> None:
    """List the shipped model specs (a name here is what a scenario's models.* takes)."""
    from planner.specs.model import list_models

    specs = list_models()
    if as_json:
        print_json([s.summary() for s in specs])
        return
    table = Table(title="Shipped models (model_specs/)")
    for col in ("name", "type", "params", "active", "layers", "hidden", "heads q/kv",
                "attention", "FFN", "MoE experts/top-k", "tied"):
        table.add_column(col, justify="right" if col in ("params", "active", "layers",
                                                         "hidden") else "left")
    for s in specs:
        moe = (f"{s.moe.num_experts}/{s.moe.experts_per_token}"
               + (f" +{s.moe.num_shared_experts} shared" if s.moe.num_shared_experts else "")
               if s.moe else "—")
        table.add_row(s.name, s.model_type, billions(s.params_total), billions(s.params_active),
                      str(s.num_hidden_layers), str(s.hidden_size),
                      f"{s.num_attention_heads}/{s.num_key_value_heads}", s.attention_kind,
                      "gated" if s.gated_ffn else "2-proj", moe,
                      "yes" if s.tie_word_embeddings else "no")
    console.print(table)


@reports_errors
def gpus(as_json: JsonFlag = False) -> None:
    """List the shipped hardware profiles (a name here is what cluster.gpu takes)."""
    from planner.specs.hardware import list_profiles

    profiles = list_profiles()
    if as_json:
        print_json([p.model_dump() for p in profiles])
        return
    table = Table(title="Hardware profiles (hardware_profiles/); bandwidths per GPU per direction")
    longest = max((len(p.name) for p in profiles), default=4)
    for col in ("name", "memory GiB", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM TB/s",
                "intra-node GB/s", "inter-node GB/s", "GPUs/node", "host GiB/node",
                "host link GB/s", "$/GPU-h"):
        if col == "name":  # a name is what cluster.gpu takes: never cut
            table.add_column(col, no_wrap=True, min_width=longest)
        else:  # on a narrow terminal a figure folds onto two lines rather than lose digits
            table.add_column(col, justify="right", overflow="fold")
    for p in profiles:
        table.add_row(p.name, fmt(p.memory_gib), fmt(p.bf16_tflops), fmt(p.fp8_tflops),
                      fmt(p.hbm_tbps), fmt(p.intra_node_gbps), fmt(p.inter_node_gbps),
                      str(p.gpus_per_node) + (f" ({p.scale_up_gpus} NVLink)"
                                              if p.scale_up_gpus != p.gpus_per_node else ""),
                      fmt(p.host_memory_gib), fmt(p.host_link_gbps),
                      fmt(p.price_usd_per_gpu_hour))
    console.print(table)
    console.print("'—' = no published figure in the shipped sources. Prices are defaults: "
                  "--price overrides them. `rlplan clusters` lists node presets.")


@reports_errors
def clusters(as_json: JsonFlag = False) -> None:
    """List the shipped cluster presets (a name here is what cluster.preset takes)."""
    from planner.specs.hardware import list_presets, load_profile

    presets = list_presets()
    if as_json:
        print_json([p.model_dump() for p in presets])
        return
    table = Table(title="Cluster presets (hardware_profiles/clusters/)")
    for col in ("name", "gpu", "GPUs/node", "nodes", "description"):
        table.add_column(col)
    for p in presets:
        load_profile(p.gpu)  # a preset naming a missing profile is an error, not a row
        table.add_row(p.name, p.gpu, str(p.gpus_per_node), str(p.nodes), p.description)
    console.print(table)

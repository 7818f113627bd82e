"""Heterogeneous GPU pools: a cluster of several GPU kinds (DESIGN.md `cluster.pools`).

A resolved scenario always has pools: the classic `cluster: {gpu, nodes, …}` is one pool (named
after its preset or profile), whose plans carry no `pool` key — so a single-pool scenario means
what it always meant. Each pool is a `ClusterSpec` of its own, so the cost model prices work on a
pool through the same functions as on a cluster (`Scenario.on_pool`). Between pools the link is
`cluster.inter_pool_gbps` (GB/s per GPU per direction), by default the slower pool's
inter-node figure: traffic between pools leaves each node through its NICs, and the slower side
sets the pace.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import InputError
from planner.specs.files import validate_as
from planner.specs.hardware import ClusterInput, ClusterSpec, load_profile, resolve_cluster


class Pool(BaseModel):
    """One pool of a resolved cluster: a name and the cluster of its GPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    cluster: ClusterSpec


def resolve_pools(spec: ClusterInput, source: str,
                  price_from: Literal["flag", "scenario"] = "scenario"
                  ) -> tuple[tuple[Pool, ...], float | None]:
    """The pools of a scenario's `cluster:` and the link between them (GB/s per GPU per
    direction; None with one pool). `source` prefixes errors, which name the field
    (`cluster.pools[1].gpu`)."""
    if spec.pools is None:
        cluster = resolve_cluster(spec, f"{source}: cluster", price_from)
        return (Pool(name=cluster.name or cluster.gpu.name, cluster=cluster),), None
    pools = []
    for i, p in enumerate(spec.pools):
        where = f"cluster.pools[{i}]"
        try:
            gpu = load_profile(p.gpu)
        except InputError as exc:
            raise InputError(f"{source}: field '{where}.gpu': {exc}") from None
        try:
            cluster = validate_as(ClusterSpec, {
                "name": p.name, "gpu": gpu, "nodes": p.nodes,
                "gpus_per_node": p.gpus_per_node or gpu.gpus_per_node,
                "price_usd_per_gpu_hour": p.price_usd_per_gpu_hour,
                "price_from": "scenario" if p.price_usd_per_gpu_hour else None}, "")
        except InputError as exc:
            raise InputError(f"{source}: field '{where}': {str(exc).removeprefix(': ')}") from None
        pools.append(Pool(name=p.name, cluster=cluster))
    if len(pools) == 1:
        return tuple(pools), None
    gbps = spec.inter_pool_gbps
    if gbps is None:
        lacking = [p.name for p in pools if p.cluster.gpu.inter_node_gbps is None]
        if lacking:
            raise InputError(f"{source}: field 'cluster.inter_pool_gbps' is missing and pool "
                             f"'{lacking[0]}' ({_gpu(pools, lacking[0])}) has no inter_node_gbps "
                             "to default it to; set cluster.inter_pool_gbps (GB/s per GPU per "
                             "direction)")
        gbps = min(p.cluster.gpu.inter_node_gbps for p in pools)  # type: ignore[type-var]
    return tuple(pools), gbps


def _gpu(pools: list[Pool], name: str) -> str:
    return next(p.cluster.gpu.name for p in pools if p.name == name)

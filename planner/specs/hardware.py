"""Hardware profiles (one accelerator in its usual node) and clusters (a profile × nodes).

Profiles are YAML files in `hardware_profiles/`, cluster presets in `hardware_profiles/clusters/`.
Fields carry their unit in the name as written in vendor sheets (GiB, TFLOP/s, TB/s, GB/s);
the `*_bytes`, `*_flops` and `*_bytes_per_s` properties give SI values for the cost model.
Bandwidths are per GPU and per direction. Every shipped number names its source in `sources`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from planner.errors import InputError
from planner.specs import bounds as lim
from planner.specs.files import (
    catalog_names,
    data_dir,
    looks_like_path,
    path_kind,
    read_mapping,
    unknown_name,
    validate_as,
)

GIB = 1024**3
_YAML = (".yaml", ".yml")

# Achievable fractions of peak, used until a profile states its own. They are not calibrated:
# `bench/calibration.py` fits them on ../shared/data/calibration/ and the fitted values go into
# the profiles with that provenance.
DEFAULT_COMPUTE_EFFICIENCY = 0.5
DEFAULT_HBM_EFFICIENCY = 0.8
DEFAULT_LINK_EFFICIENCY = 0.8
# Decode streams the weights and the KV cache: sustained HBM bandwidth there is 55–80% of peak
# (../shared/data/calibration/rollout.md §2: ≈ 0.56 from the Llama-2-70B rows, InferSim 0.8);
# fitted by `bench/calibration.py` on the decode rows of rollout.md §2 (0.65 on 2026-12-03, rows
# 1, 3, 4, 7, 10–13 and 17 moved; 0.7 before).
DEFAULT_DECODE_HBM_EFFICIENCY = 0.65
# Memory a GPU holds outside PyTorch's caching allocator (CUDA context, NCCL buffers, cuBLAS
# workspaces): the step from a framework's peak reserved to what nvidia-smi shows. The
# allocator's own slack is priced apart (planner/cost/constants.py ALLOCATOR_FRAGMENTATION).
# Not fitted: the only rows that include it (training_h100.md ms-swift M45–M49, "n/s", whose
# definition the data file calls uncertain) leave 1.3 GiB (median) over the predicted reserved
# figure, too few and too loosely defined to replace this conservative default.
DEFAULT_RUNTIME_RESERVE_GIB = 4.0
# α of the α–β model: latency of one step of a ring collective. Scale-up: fitted on NCCL
# all-reduces of 10k fp16 elements inside CUDA graphs (../shared/data/calibration/rollout.md §2
# rows 15–16, vidur's profiles): 7 µs at TP 2 and 23 µs at TP 8 on an H100 DGX, 25 µs at TP 8
# on an A100 DGX, = launch + 2(n−1)·α with α ≈ 1.3–1.5 µs (launch below). Scale-out:
# an InfiniBand hop ~10 µs, an order-of-magnitude default (no measurement in the sources).
DEFAULT_INTRA_NODE_LATENCY_US = 1.4
# The fixed latency of one collective call (launch and synchronisation), µs: the same fit
# (7 µs = launch + 2·α at 2 ranks, 23 µs = launch + 14·α at 8 ranks: launch 4.3 µs).
DEFAULT_COLLECTIVE_LAUNCH_US = 4.3
DEFAULT_INTER_NODE_LATENCY_US = 15.0



class Efficiency(BaseModel):
    """Achievable fraction of each peak (compute, HBM in element-wise kernels and in decode,
    links)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute: float = Field(DEFAULT_COMPUTE_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1)
    hbm: float = Field(DEFAULT_HBM_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1)
    decode_hbm: float = Field(DEFAULT_DECODE_HBM_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1,
                              description="HBM bandwidth sustained by decode (weights + KV)")
    intra_node: float = Field(DEFAULT_LINK_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1)
    inter_node: float = Field(DEFAULT_LINK_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1)
    host_link: float = Field(DEFAULT_LINK_EFFICIENCY, ge=lim.MIN_EFFICIENCY, le=1)


class HardwareProfile(BaseModel):
    """One accelerator as it sits in its usual node. `None` means not known (no source)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    vendor: Literal["nvidia", "amd", "intel", "google", "other"] = "other"
    memory_gib: float = Field(gt=0, le=lim.MAX_MEMORY_GIB,
                              description="HBM usable by the framework, GiB")
    bf16_tflops: float = Field(ge=lim.MIN_RATE, le=lim.MAX_RATE,
                               description="dense BF16 peak, TFLOP/s")
    fp8_tflops: float | None = Field(None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
                                     description="dense FP8 peak, TFLOP/s")
    hbm_tbps: float = Field(ge=lim.MIN_RATE, le=lim.MAX_RATE, description="HBM bandwidth, TB/s")
    intra_node_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
        description="scale-up link (NVLink, xGMI, ICI) per GPU per direction, GB/s")
    intra_node_peer_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
        description="a scale-up fabric without a switch (a full mesh: xGMI, Gaudi's "
        "all-to-all RoCE): the direct link to each peer per direction, GB/s — a group of n "
        "GPUs moves at most (n − 1) × this per GPU; none: a switch gives any group "
        "intra_node_gbps")
    inter_node_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
        description="scale-out network per GPU per direction, GB/s")
    gpus_per_node: int = Field(gt=0, le=lim.MAX_GPUS_PER_NODE,
                               description="GPUs per node (per OS host)")
    scale_up_domain_gpus: int | None = Field(
        None, gt=0, le=lim.MAX_TOTAL_GPUS, description="GPUs reachable over the scale-up "
        "link; default gpus_per_node (a GB200 NVL72 rack: 72)")
    host_memory_gib: float | None = Field(None, gt=0, le=lim.MAX_MEMORY_GIB,
                                          description="CPU memory per node, GiB")
    host_link_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
        description="GPU–host link (PCIe) per GPU per direction, GB/s")
    host_memory_bandwidth_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE,
        description="CPU DRAM bandwidth per node, peak, GB/s (CPU Adam, offload "
                    "streams); default planner/cost/constants.py")
    host_cpu_cores: int | None = Field(
        None, gt=0, le=lim.MAX_CPU_CORES, description="CPU cores per node (CPU Adam); default "
                                                    "planner/cost/constants.py")
    price_usd_per_gpu_hour: float | None = Field(None, gt=0,
                                                  le=lim.MAX_PRICE_USD_PER_GPU_HOUR)
    runtime_reserve_gib: float = Field(DEFAULT_RUNTIME_RESERVE_GIB, ge=0)
    intra_node_latency_us: float = Field(DEFAULT_INTRA_NODE_LATENCY_US, ge=0,
                                         le=lim.MAX_LATENCY_US)
    inter_node_latency_us: float = Field(DEFAULT_INTER_NODE_LATENCY_US, ge=0,
                                         le=lim.MAX_LATENCY_US)
    collective_launch_us: float = Field(DEFAULT_COLLECTIVE_LAUNCH_US, ge=0, le=lim.MAX_LATENCY_US,
                                        description="fixed latency of one collective call")
    efficiency: Efficiency = Efficiency()
    sources: dict[str, str] = Field(default_factory=dict,
                                    description="field name → where the number comes from")

    @model_validator(mode="after")
    def _check(self) -> HardwareProfile:
        if self.runtime_reserve_gib >= self.memory_gib:
            raise ValueError(f"runtime_reserve_gib ({self.runtime_reserve_gib}) must be below "
                             f"memory_gib ({self.memory_gib})")
        unknown = set(self.sources) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"sources name fields that do not exist: {sorted(unknown)}")
        return self

    _hash: int = PrivateAttr(0)
    _shipped: HardwareProfile | None = PrivateAttr(None)

    @property
    def shipped(self) -> HardwareProfile:
        """The profile as written, before a cluster narrowed its scale-up domain."""
        return self._shipped or self

    def model_post_init(self, context: object, /) -> None:
        # the `sources` dict defeats pydantic's generated hash; the cost model memoises on
        # profiles (planner/cost/memo.py), so hash the values once
        self._hash = hash(self.model_dump_json())

    def __hash__(self) -> int:
        return self._hash

    @property
    def scale_up_gpus(self) -> int:
        return self.scale_up_domain_gpus or self.gpus_per_node

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    @property
    def usable_memory_bytes(self) -> float:
        return (self.memory_gib - self.runtime_reserve_gib) * GIB

    @property
    def host_bytes_per_gpu(self) -> float | None:
        """Each GPU's share of its node's CPU memory. The share is per GPU of the profile's node
        (a cluster using 2 GPUs of a node gets 2 shares, not the whole node's memory)."""
        if self.host_memory_gib is None:
            return None
        return self.host_memory_gib * GIB / self.gpus_per_node

    @property
    def peak_bf16_flops(self) -> float:
        return self.bf16_tflops * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tbps * 1e12


def gpu_count(n: int) -> str:
    """'1 GPU', '8 GPUs': a count of GPUs in a sentence."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


class ClusterSpec(BaseModel):
    """A cluster: `nodes` nodes of `gpus_per_node` GPUs of one profile.

    `gpu` is the profile as this cluster deploys it: its scale-up domain counts the cluster's
    GPUs (a cluster using 4 of an 8-GPU node's GPUs has a 4-GPU NVLink domain; one using all 4
    GPUs of each GB200 tray keeps the 72-GPU rack), so the cost model reads every link from
    `gpu` alone. The price is the profile's unless the scenario or a flag overrides it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    gpu: HardwareProfile
    nodes: int = Field(gt=0, le=lim.MAX_NODES)
    gpus_per_node: int = Field(gt=0, le=lim.MAX_GPUS_PER_NODE)
    price_usd_per_gpu_hour: float | None = Field(
        None, gt=0, le=lim.MAX_PRICE_USD_PER_GPU_HOUR,
        description="overrides the profile's price (from a flag or the scenario)")
    price_from: Literal["flag", "scenario"] | None = Field(
        None, description="where the override came from")

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.gpus_per_node > self.gpu.gpus_per_node:
            raise ValueError(
                f"gpus_per_node ({self.gpus_per_node}) exceeds the {self.gpu.gpus_per_node} GPUs "
                f"a {self.gpu.name} node holds; use more nodes with at most "
                f"{self.gpu.gpus_per_node} GPUs each")
        if self.total_gpus > lim.MAX_TOTAL_GPUS:
            raise ValueError(f"{self.nodes} nodes × {self.gpus_per_node} GPUs = "
                             f"{self.total_gpus:,} GPUs, above the limit of "
                             f"{lim.MAX_TOTAL_GPUS:,}; use fewer nodes")
        require_links(self.gpu, self.nodes, self.gpus_per_node)
        shipped = self.gpu.shipped  # validation runs again on a copy: derive from the original
        domain = cluster_domain_gpus(shipped, self.gpus_per_node)
        if domain != self.gpu.scale_up_gpus:
            # frozen model: set once, here, the profile as this cluster deploys it
            object.__setattr__(self, "gpu", with_domain(shipped, domain, self.gpus_per_node))
        return self

    def reshaped(self, nodes: int, gpus_per_node: int) -> ClusterSpec:
        """The same profile and price in another node shape (sweep sizes, the fewest-GPU
        search): the domain is derived again from the profile as shipped."""
        return ClusterSpec(name=self.name, gpu=self.gpu.shipped, nodes=nodes,
                           gpus_per_node=gpus_per_node,
                           price_usd_per_gpu_hour=self.price_usd_per_gpu_hour,
                           price_from=self.price_from)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def price(self) -> float | None:
        """USD per GPU-hour: flag > scenario > profile; None when none gives one."""
        return self.price_usd_per_gpu_hour or self.gpu.price_usd_per_gpu_hour

    @property
    def price_source(self) -> str | None:
        """Where `price` comes from: 'flag', 'scenario' or 'profile NAME (its source)'."""
        if self.price_usd_per_gpu_hour is not None:
            return self.price_from or "scenario"
        if self.gpu.price_usd_per_gpu_hour is None:
            return None
        cited = self.gpu.sources.get("price_usd_per_gpu_hour")
        return f"profile {self.gpu.name}" + (f" ({cited})" if cited else "")


def cluster_domain_gpus(gpu: HardwareProfile, gpus_per_node: int) -> int:
    """GPUs of a cluster with `gpus_per_node` GPUs per node in one scale-up domain: the nodes a
    domain spans (1, or 18 GB200 trays) times the GPUs the cluster uses in each."""
    return max(1, gpu.scale_up_gpus // gpu.gpus_per_node) * gpus_per_node


def with_domain(gpu: HardwareProfile, domain: int, gpus_per_node: int) -> HardwareProfile:
    """A copy of `gpu` whose scale-up domain is `domain` GPUs (validated, so freshly hashed)."""
    sources = {**gpu.sources, "scale_up_domain_gpus":
               f"the cluster's {gpus_per_node} of {gpu.gpus_per_node} GPUs per node × "
               f"{domain // gpus_per_node} node(s) per domain"}
    deployed = HardwareProfile(**{**gpu.model_dump(), "scale_up_domain_gpus": domain,
                                  "sources": sources})
    deployed._shipped = gpu
    return deployed


def require_links(gpu: HardwareProfile, nodes: int, gpus_per_node: int) -> None:
    """The link figures a cluster of this shape needs to price its traffic: the scale-up link
    as soon as two GPUs talk, the network once there are two nodes."""
    total = nodes * gpus_per_node
    if total > 1 and gpu.intra_node_gbps is None:
        raise InputError(
            f"profile {gpu.name} has no intra_node_gbps (scale-up link per GPU per direction, "
            f"GB/s) to price traffic among {total} GPUs; set intra_node_gbps in a copy of the "
            f"profile (`rlplan gpus --json` prints it; `rlplan schema hardware` the format) and "
            f"pass its path with --gpu, or plan on 1 GPU")
    if nodes > 1 and gpu.inter_node_gbps is None:
        raise InputError(
            f"{nodes} nodes, but profile {gpu.name} has no inter_node_gbps (network per GPU per "
            f"direction, GB/s); set it in a copy of the profile and pass its path with --gpu, "
            f"or use 1 node")


class ClusterPreset(BaseModel):
    """A shipped cluster preset file: a profile name plus its node shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    gpu: str = Field(min_length=1, description="hardware profile name")
    gpus_per_node: int = Field(gt=0, le=lim.MAX_GPUS_PER_NODE)
    nodes: int = Field(1, gt=0, le=lim.MAX_NODES,
                       description="default node count; a scenario overrides it")
    sources: dict[str, str] = Field(default_factory=dict)


class PoolInput(BaseModel):
    """One pool of `cluster.pools`: GPUs of one profile, named, in their node shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="the pool's name (plan groups name it)")
    gpu: str = Field(min_length=1, description="a profile from `rlplan gpus`, or a path to one")
    nodes: int = Field(1, gt=0, le=lim.MAX_NODES)
    gpus_per_node: int | None = Field(None, gt=0, le=lim.MAX_GPUS_PER_NODE,
                                      description="default: the profile's node")
    price_usd_per_gpu_hour: float | None = Field(
        None, gt=0, le=lim.MAX_PRICE_USD_PER_GPU_HOUR, description="USD per GPU-hour of this "
        "pool; overrides the profile's")


class ClusterInput(BaseModel):
    """The `cluster:` block of a scenario: a preset, or a profile with its shape, or both —
    or, for GPUs of several kinds, `pools` (and the link between them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str | None = Field(None, min_length=1, description="a preset from `rlplan clusters`")
    gpu: str | None = Field(None, min_length=1, description="a profile from `rlplan gpus`, or "
                            "a path to one")
    nodes: int | None = Field(None, gt=0, le=lim.MAX_NODES)
    gpus_per_node: int | None = Field(None, gt=0, le=lim.MAX_GPUS_PER_NODE)
    price_usd_per_gpu_hour: float | None = Field(
        None, gt=0, le=lim.MAX_PRICE_USD_PER_GPU_HOUR, description="USD per GPU-hour; "
        "overrides the profile's (a --price flag overrides this)")

    pools: list[PoolInput] | None = Field(
        None, min_length=1, max_length=lim.MAX_POOLS, description="GPUs of several kinds: "
        "one entry per pool, instead of preset/gpu/nodes/gpus_per_node/price")
    inter_pool_gbps: float | None = Field(
        None, ge=lim.MIN_RATE, le=lim.MAX_RATE, description="link between pools, GB/s per GPU "
        "per direction; default the slower pool's inter_node_gbps")

    @model_validator(mode="after")
    def _check(self) -> ClusterInput:
        if self.pools is not None:
            mixed = [f for f in ("preset", "gpu", "nodes", "gpus_per_node",
                                 "price_usd_per_gpu_hour") if getattr(self, f) is not None]
            if mixed:
                raise ValueError(f"cluster.{mixed[0]} cannot be given with cluster.pools; "
                                 "give each pool its gpu, nodes, gpus_per_node and price, or "
                                 "drop pools")
            seen: dict[str, int] = {}
            for i, pool in enumerate(self.pools):
                if pool.name in seen:
                    raise ValueError(f"cluster.pools[{i}].name: '{pool.name}' is also "
                                     f"pools[{seen[pool.name]}]'s name; give each pool its own")
                seen[pool.name] = i
            return self
        if self.inter_pool_gbps is not None:
            raise ValueError("cluster.inter_pool_gbps is the link between pools, and there are "
                             "no cluster.pools; drop it or list the pools")
        if self.preset is None and self.gpu is None:
            raise ValueError("give 'gpu' (a profile name from `rlplan gpus`, or a path) "
                             "or 'preset' (from `rlplan clusters`)")
        return self


def profiles_dir() -> Path:
    return data_dir("hardware_profiles")


def presets_dir() -> Path:
    return profiles_dir() / "clusters"


def load_profile_file(path: Path) -> HardwareProfile:
    return validate_as(HardwareProfile, read_mapping(path), str(path))


def load_profile(ref: str) -> HardwareProfile:
    """A profile by shipped name (case-insensitive) or by path to a YAML file."""
    path = Path(ref).expanduser()
    if looks_like_path(ref) or path_kind(path) == "file":  # a name too long for a path: a name
        return load_profile_file(path)
    known = catalog_names(profiles_dir(), _YAML)
    if ref.lower() not in known:
        raise unknown_name("GPU profile", ref, list(known), "`rlplan gpus` lists them")
    return load_profile_file(known[ref.lower()])


def list_profiles() -> list[HardwareProfile]:
    return [load_profile_file(p) for p in catalog_names(profiles_dir(), _YAML).values()]


def load_preset_file(path: Path) -> ClusterPreset:
    return validate_as(ClusterPreset, read_mapping(path), str(path))


def load_preset(ref: str) -> ClusterPreset:
    path = Path(ref).expanduser()
    if looks_like_path(ref) or path_kind(path) == "file":
        return load_preset_file(path)
    known = catalog_names(presets_dir(), _YAML)
    if ref.lower() not in known:
        raise unknown_name("cluster preset", ref, list(known), "`rlplan clusters` lists them")
    return load_preset_file(known[ref.lower()])


def list_presets() -> list[ClusterPreset]:
    return [load_preset_file(p) for p in catalog_names(presets_dir(), _YAML).values()]


def resolve_cluster(spec: ClusterInput | str, source: str = "cluster",
                    price_from: Literal["flag", "scenario"] = "scenario") -> ClusterSpec:
    """Turn a scenario's `cluster:` (a preset name, or a mapping) into a ClusterSpec.

    Precedence: fields given in the mapping > the preset's > the profile's own node shape; a
    price in the mapping (`price_from` says whether a flag set it) > the profile's.
    """
    if isinstance(spec, str):
        spec = ClusterInput(preset=spec)
    preset = load_preset(spec.preset) if spec.preset else None
    gpu = load_profile(spec.gpu or preset.gpu)  # type: ignore[union-attr]
    nodes = spec.nodes or (preset.nodes if preset else 1)
    per_node = spec.gpus_per_node or (preset.gpus_per_node if preset else gpu.gpus_per_node)
    price = spec.price_usd_per_gpu_hour
    return validate_as(ClusterSpec, {"name": preset.name if preset else None, "gpu": gpu,
                                     "nodes": nodes, "gpus_per_node": per_node,
                                     "price_usd_per_gpu_hour": price,
                                     "price_from": price_from if price else None}, source)



"""Which collectives a training layout runs, and over which ranks: the DP gradient groups
(non-expert parameters over dp·cp, routed experts over their expert-data-parallel ranks) and
the MoE token dispatch (plain or hierarchical all-to-all). `time.py` prices them per step and
per layer; the α–β arithmetic is `comm.py`'s."""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost import comm
from planner.cost.flops import Head, params_with_head, remote_domains_per_token
from planner.cost.variants import LayoutVariants
from planner.plan import Layout, expert_tp
from planner.specs.hardware import HardwareProfile
from planner.specs.model import ModelSpec, count_params

__all__ = ["ShardGroup", "dp_groups", "time_dispatch"]


@dataclass(frozen=True)
class ShardGroup:
    """Parameters a DP rank is responsible for (elements, per GPU before ZeRO), replicated over
    `replicas` ranks that reduce their gradients (and ZeRO-gather them) over `link`."""

    params: float
    replicas: int
    link: comm.Link


def dp_groups(spec: ModelSpec, head: Head, layout: Layout | LayoutVariants,
              gpu: HardwareProfile) -> tuple[ShardGroup, ...]:
    """The gradient-reduction groups of a layout. Non-expert parameters: /(tp·pp) per GPU,
    replicated over the dp·cp ranks (stride tp). Routed experts (MoE with ep·etp > 1): /(ep·etp·pp)
    per GPU, replicated only over the expert-data-parallel ranks dp·cp·tp/(ep·etp) (stride
    ep·etp: Megatron-Core's expert rank order, ETP innermost then EP; torchtitan / Automodel
    FSDP2 shard experts over the same "edp" mesh). Pricing the experts over all dp·cp ranks would
    move ep·etp/tp times their true volume."""
    L = layout
    params = params_with_head(spec, head)
    etp = expert_tp(L, "training")
    routed = count_params(spec).routed_experts if spec.moe and L.ep * etp > 1 else 0
    replicas = L.dp * L.cp
    groups = [ShardGroup((params - routed) / (L.tp * L.pp), replicas,
                         comm.link_for(gpu, replicas, stride=L.tp))]
    if routed:
        edp = max(1, replicas * L.tp // (L.ep * etp))
        groups.append(ShardGroup(routed / (L.ep * etp * L.pp), edp,
                                 comm.link_for(gpu, edp, stride=L.ep * etp)))
    return tuple(groups)


def time_dispatch(spec: ModelSpec, nbytes: float, ep: int, etp: int, gpu: HardwareProfile,
                  dispatch: str) -> float:
    """One dispatch (or combine) all-to-all of a rank's `nbytes` routed copies over `ep` ranks
    `etp` apart: plain, or hierarchical (a token crosses to each remote domain once, fewer
    under the model's group-limited routing). Every peer's transfer is posted at once — NCCL's
    all-to-all is one group of sends and receives, DeepEP / HybridEP one kernel — so the call
    pays one network latency, not one per peer (`comm.time_alltoall_domains`, steps = 1)."""
    cross = None
    if dispatch == "hierarchical" and ep * etp > gpu.scale_up_gpus:
        domains = ep // comm.ranks_per_domain(gpu, ep, etp)
        moe = spec.moe
        per_token = nbytes / moe.experts_per_token  # one copy of a token's hidden state
        cross = per_token * remote_domains_per_token(
            moe.num_experts, moe.experts_per_token, domains, moe.expert_groups,
            moe.groups_per_token)
    return comm.time_alltoall_domains(nbytes, ep, gpu, stride=etp, cross_bytes=cross, steps=1)

"""One context's full deployment answer: tier plan, reload vs recompute, fan-in. Pure.

``plan_deployment`` composes the placement and reload models for the CLI and library users;
``bytes_at`` (tokens -> KV bytes of one session, under the chosen engine and dtype) is passed
in so this module never needs to know which engine convention priced the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvtool.model.params import ParamCount
from kvtool.model.spec import ModelSpec
from kvtool.plan.placement import (
    GPU_MEMORY_UTILIZATION,
    PlanInputs,
    TierPlan,
    plan_tiers,
)
from kvtool.plan.reload import (
    BreakEven,
    ReloadAssumptions,
    TierPath,
    break_even,
    crossover_tokens,
    fan_in_per_s,
    tier_paths,
)
from kvtool.profiles.schema import NodeProfile, StorageProfile

BREAK_EVEN_CONTEXTS = (1_000, 4_000, 10_000, 32_000, 50_000, 128_000, 200_000, 1_000_000)


@dataclass(frozen=True)
class Hardware:
    """The cluster a plan is for: nodes, and the shared tiers behind them."""

    node: NodeProfile
    nodes: int
    t3: StorageProfile
    t4: StorageProfile
    fsx_capacity_bytes: int | None = None
    fsx_throughput_mbps_per_tib: int | None = None
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION

    @property
    def fsx_bytes_per_s(self) -> float | None:
        """Aggregate FSx throughput: capacity (TiB) x per-unit throughput (MB/s/TiB)."""
        if self.fsx_capacity_bytes is None:
            return None
        per_tib = self.fsx_throughput_mbps_per_tib or self.t3.default_throughput_mbps_per_tib
        return self.fsx_capacity_bytes / 2**40 * per_tib * 1e6


@dataclass(frozen=True)
class FanIn:
    """Cache-hit sessions per second one node can pull from T3 over one client path."""

    path: str
    link_gbps: float
    bytes_per_s: float
    sessions_per_s: float
    seconds_per_session: float


@dataclass(frozen=True)
class DeploymentPlan:
    """Everything ``kvtool size --hardware`` reports for one context length."""

    ctx_tokens: int
    hardware: Hardware
    weights_dtype: str
    weights_bytes: int
    tiers: TierPlan
    paths: tuple[TierPath, ...]
    crossovers: dict[str, int | None]
    break_even: tuple[BreakEven, ...]
    fan_in: tuple[FanIn, ...]
    assumptions: ReloadAssumptions


def plan_deployment(
    spec: ModelSpec,
    params: ParamCount,
    *,
    ctx_tokens: int,
    sessions: int,
    bytes_at: Callable[[int], int],
    hardware: Hardware,
    weights_dtype: str,
    weights_bytes: int,
    assumptions: ReloadAssumptions,
) -> DeploymentPlan:
    """Place ``sessions`` x ``ctx_tokens`` on ``hardware`` and weigh reload against recompute."""
    node = hardware.node
    session = bytes_at(ctx_tokens)
    tiers = plan_tiers(
        PlanInputs(
            node=node,
            nodes=hardware.nodes,
            weights_bytes=weights_bytes,
            kv_bytes_per_session=session,
            sessions=sessions,
            fsx_capacity_bytes=hardware.fsx_capacity_bytes,
            gpu_memory_utilization=hardware.gpu_memory_utilization,
        )
    )
    aggregate = hardware.fsx_bytes_per_s
    share = None if aggregate is None else aggregate / hardware.nodes
    paths = tier_paths(
        node, hardware.t3, hardware.t4, t3_path=assumptions.t3_path, fsx_bytes_per_s_per_node=share
    )
    crossovers = {
        path.tier: crossover_tokens(spec, params.active, node, path, bytes_at, assumptions)
        for path in paths
    }
    contexts = sorted({*BREAK_EVEN_CONTEXTS, ctx_tokens})
    rows = break_even(spec, params.active, node, paths, bytes_at, contexts, assumptions)
    fan_in = []
    for name, link_gbps, nic_gbps in (
        ("ENA/TCP", hardware.t3.client_ena_gbps, node.ena_gbps),
        ("EFA", hardware.t3.client_efa_gbps, node.efa_gbps),
        ("EFA+GDS", hardware.t3.client_efa_gds_gbps, node.efa_gbps if node.gds else 0.0),
    ):
        gbps = min(link_gbps, nic_gbps)
        if gbps <= 0:
            continue
        bandwidth = gbps * 1e9 / 8
        if share is not None:
            bandwidth = min(bandwidth, share)
        fan_in.append(
            FanIn(
                path=name,
                link_gbps=gbps,
                bytes_per_s=bandwidth,
                sessions_per_s=fan_in_per_s(session, bandwidth),
                seconds_per_session=session / bandwidth,
            )
        )
    return DeploymentPlan(
        ctx_tokens=ctx_tokens,
        hardware=hardware,
        weights_dtype=weights_dtype,
        weights_bytes=weights_bytes,
        tiers=tiers,
        paths=tuple(paths),
        crossovers=crossovers,
        break_even=tuple(rows),
        fan_in=tuple(fan_in),
        assumptions=assumptions,
    )

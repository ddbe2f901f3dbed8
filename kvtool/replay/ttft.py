"""Replay's sizes and time-to-first-token model from a deployment plan. Pure.

Sizes: T1 is the node's KV space up to the engine's pressure line, T2 the host memory the plan
gives KV; T3 and T4 are unbounded unless given.

TTFT of one request, alone on one engine instance (an estimate, and labelled so): prefilling n
tokens takes max(FLOPs(n) / (MFU x the instance's peak), one pass over its weights), with the
FLOPs of ``plan.reload.prefill_flops``; reloading k blocks from a tier takes its latency plus
the longer of k x block bytes / bandwidth and k x per-chunk operation / I/O threads, at the
plan's per-node figures (measured ones with ``kvtool plan --bench``). With a cache, TTFT is the
reload of the hit blocks plus the prefill of the rest (FLOPs(n) - FLOPs(hit)), or the full
prefill when that is faster.
"""

from __future__ import annotations

from kvtool.model.params import count_params
from kvtool.model.spec import ModelSpec
from kvtool.plan.deployment import DeploymentPlan
from kvtool.plan.reload import prefill_flops
from kvtool.replay.run import TtftModel


def plan_capacities(plan: DeploymentPlan) -> dict[str, int | None]:
    """T1 and T2 bytes per node from the plan; T3 and T4 unbounded."""
    t2 = next((t.capacity_bytes for t in plan.tiers.tiers if t.name == "T2"), None)
    t2_per_node = (t2 or 0) // plan.hardware.nodes  # the plan's T2 is every node's host memory
    return {"T1": plan.tiers.pressure_bytes_per_node, "T2": t2_per_node, "T3": None, "T4": None}


def ttft_model(spec: ModelSpec, plan: DeploymentPlan, *, block_bytes: int) -> TtftModel:
    """The per-request TTFT model for ``plan`` (one request alone on one engine instance)."""
    params = count_params(spec)
    node = plan.hardware.node
    instance_peak = plan.compute.peak_flops * plan.serving.tp / node.chips
    mfu = plan.assumptions.mfu
    weight_pass = plan.compute.weight_pass_s

    def prefill_s(tokens: int) -> float:
        if tokens <= 0:
            return 0.0
        return max(prefill_flops(spec, params, tokens) / (mfu * instance_peak), weight_pass)

    reload_block = {"T1": 0.0}
    latency = {"T1": 0.0}
    for path in plan.paths:
        stored = block_bytes / path.bytes_divisor
        per_block = max(stored / path.node_bytes_per_s, path.op_s / max(path.io_threads, 1))
        reload_block[path.tier] = per_block
        latency[path.tier] = path.latency_s
    source = (
        f"estimate: one request alone on one tp {plan.serving.tp} instance of"
        f" {node.name} at {mfu:.0%} MFU ({plan.compute.precision}); reloads at the plan's"
        " per-node bandwidths"
    )
    return TtftModel(prefill_s, reload_block, latency, source)

"""Turn an advise request into capacities and call the pure advisor."""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.model.engines import get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv
from kvtool.model.params import count_params, weight_bytes, weights_dtype_of
from kvtool.plan.advise import Advice, Capacity, Workload, advise
from kvtool.plan.placement import (
    HOST_MEMORY_FRACTION,
    PRESSURE_FRACTION,
    PlanInputs,
    kv_space_per_node,
)
from kvtool.profiles.load import load_node_profile
from kvtool.profiles.resolve import resolve_model


@dataclass(frozen=True)
class AdviseRequest:
    """Parsed ``kvtool advise`` inputs."""

    model: str
    hardware: str
    nodes: int
    sessions: int
    contexts: dict[int, float]
    shared_prefix: float
    mean_idle_s: float
    peak_to_mean: float
    disaggregated: bool
    survive_node_failure: bool
    durable_sessions: bool
    gpus_added_for_kv: bool
    kv_dtype: str
    engine: str


@dataclass(frozen=True)
class AdviceResult:
    """The advice with what it was computed from, for rendering."""

    request: AdviseRequest
    model: str
    node: str
    advice: Advice
    session_bytes: dict[int, int]


def run_advice(request: AdviseRequest) -> AdviceResult:
    """Price the model at each context, size the node's tiers, and apply the criteria."""
    resolved = resolve_model(request.model)
    spec = resolved.spec
    rules = get_engine(request.engine)
    fmt = resolve_format(request.kv_dtype, spec.dtype)
    node = load_node_profile(request.hardware)
    session_bytes = {
        ctx: size_kv(spec, rules=rules, fmt=fmt, ctx_tokens=ctx, sessions=1).kv_bytes_per_session
        for ctx in request.contexts
    }
    params = count_params(resolved.config)
    weights = weight_bytes(
        params, weights_dtype_of(resolved.config, spec.dtype), model_dtype=spec.dtype
    )
    space = kv_space_per_node(
        PlanInputs(
            node=node,
            nodes=request.nodes,
            weights_bytes=weights,
            kv_bytes_per_session=1,
            sessions=1,
        )
    )
    if space <= 0:
        from kvtool.errors import InputError

        raise InputError(
            f"{spec.name}'s weights leave no room for KV on {node.name}",
            "pick a node with more HBM (kvtool hardware)",
        )
    capacity = Capacity(
        session_bytes=session_bytes,
        nodes=request.nodes,
        t1_pressure_bytes_per_node=int(space * PRESSURE_FRACTION),
        t2_bytes_per_node=int(node.host_memory_bytes * HOST_MEMORY_FRACTION),
        hbm_kv_space_bytes_per_node=space,
    )
    workload = Workload(
        sessions=request.sessions,
        contexts=request.contexts,
        shared_prefix=request.shared_prefix,
        mean_idle_s=request.mean_idle_s,
        peak_to_mean=request.peak_to_mean,
        disaggregated=request.disaggregated,
        survive_node_failure=request.survive_node_failure,
        durable_sessions=request.durable_sessions,
        gpus_added_for_kv=request.gpus_added_for_kv,
    )
    return AdviceResult(request, spec.name, node.name, advise(workload, capacity), session_bytes)

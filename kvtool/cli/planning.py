"""Parse the tier-plan options of ``kvtool size`` and call the planner for each context."""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.errors import InputError
from kvtool.model.engines import EngineRules
from kvtool.model.formats import KvFormat
from kvtool.model.kv import SizeResult, size_kv
from kvtool.model.params import WEIGHT_BYTES, count_params, weight_bytes, weights_dtype_of
from kvtool.plan.deployment import DeploymentPlan, Hardware, plan_deployment
from kvtool.plan.reload import ReloadAssumptions
from kvtool.profiles.load import load_node_profile, load_storage_profile
from kvtool.profiles.resolve import ResolvedModel
from kvtool.units import parse_bytes, parse_fraction

T3_PATHS = {"ena": "ena", "tcp": "ena", "efa": "efa", "efa-gds": "efa_gds", "gds": "efa_gds"}


@dataclass(frozen=True)
class PlanRequest:
    """The tier-plan options as typed (strings are parsed here, with one-line errors)."""

    hardware: str
    nodes: int
    t3: str
    t4: str
    fsx_capacity: str | None
    fsx_throughput: str | None
    t3_path: str
    weights_dtype: str
    mfu: str
    concurrent_loads: int
    gpu_memory_utilization: str


def build_hardware(request: PlanRequest) -> Hardware:
    """Profiles and FSx settings for the request; bad values raise InputError."""
    t3 = load_storage_profile(request.t3)
    t4 = load_storage_profile(request.t4)
    for profile, tier, option in ((t3, "t3", "--t3"), (t4, "t4", "--t4")):
        if profile.tier != tier:
            raise InputError(
                f"{option} {profile.name!r} is a {profile.tier.upper()} profile",
                "kvtool hardware lists the storage profiles and their tiers",
            )
    throughput = None
    if request.fsx_throughput is not None:
        try:
            throughput = int(request.fsx_throughput)
        except ValueError:
            throughput = -1
        if throughput not in t3.throughput_mbps_per_tib_options:
            options = ", ".join(str(o) for o in t3.throughput_mbps_per_tib_options)
            raise InputError(
                f"--fsx-throughput {request.fsx_throughput!r} is not an FSx option",
                f"{t3.name} offers {options} MB/s per TiB",
            )
    return Hardware(
        node=load_node_profile(request.hardware),
        nodes=request.nodes,
        t3=t3,
        t4=t4,
        fsx_capacity_bytes=None
        if request.fsx_capacity is None
        else parse_bytes(request.fsx_capacity, what="--fsx-capacity"),
        fsx_throughput_mbps_per_tib=throughput,
        gpu_memory_utilization=parse_fraction(
            request.gpu_memory_utilization, what="--gpu-memory-utilization"
        ),
    )


def plan_contexts(
    resolved: ResolvedModel,
    results: list[SizeResult],
    request: PlanRequest,
    *,
    rules: EngineRules,
    fmt: KvFormat,
    block: int | None,
) -> list[DeploymentPlan]:
    """One deployment plan per context in ``results``."""
    hardware = build_hardware(request)
    path = T3_PATHS.get(request.t3_path.strip().lower())
    if path is None:
        raise InputError(f"unknown --t3-path {request.t3_path!r}", "choose ena, efa or efa-gds")
    spec = resolved.spec
    params = count_params(resolved.config)
    dtype = request.weights_dtype.strip().lower()
    if dtype == "auto":
        dtype = weights_dtype_of(resolved.config, spec.dtype)
    if dtype not in WEIGHT_BYTES:
        raise InputError(
            f"unknown --weights-dtype {request.weights_dtype!r}",
            "choose auto, " + ", ".join(WEIGHT_BYTES),
        )
    assumptions = ReloadAssumptions(
        mfu=parse_fraction(request.mfu, what="--mfu"),
        concurrent_loads=request.concurrent_loads,
        t3_path=path,
        use_fp8_compute=dtype in ("fp8", "mxfp4", "nvfp4")
        and hardware.node.fp8_tflops_per_chip > 0,
    )
    first = results[0]

    def bytes_at(tokens: int) -> int:
        return size_kv(
            spec,
            rules=rules,
            fmt=fmt,
            ctx_tokens=tokens,
            sessions=1,
            tp=first.tp,
            block_size=block,
        ).kv_bytes_per_session

    weights = weight_bytes(params, dtype, model_dtype=spec.dtype)
    return [
        plan_deployment(
            spec,
            params,
            ctx_tokens=result.ctx_tokens,
            sessions=result.sessions,
            bytes_at=bytes_at,
            hardware=hardware,
            weights_dtype=dtype,
            weights_bytes=weights,
            assumptions=assumptions,
        )
        for result in results
    ]


def emit_config(
    resolved: ResolvedModel,
    plan: DeploymentPlan,
    target: str,
    *,
    fmt: KvFormat,
    t3_dir: str,
    eager: bool = False,
) -> str:
    """The engine configuration for ``plan`` (the longest context asked for)."""
    from kvtool import __version__
    from kvtool.plan.emit import EmitInputs, emit

    hardware = plan.hardware
    tiers = {t.name: t for t in plan.tiers.tiers}
    t3_used = tiers["T3"].used_bytes + tiers["T4"].used_bytes
    inputs = EmitInputs(
        model_id=resolved.profile.hf_id if resolved.profile else resolved.location,
        node_name=hardware.node.name,
        chips=hardware.node.chips,
        max_model_len=plan.ctx_tokens,
        kv_dtype=fmt.name,
        model_dtype=resolved.spec.dtype,
        gpu_memory_utilization=hardware.gpu_memory_utilization,
        t2_bytes_per_node=(tiers["T2"].capacity_bytes or 0) // hardware.nodes,
        kv_space_bytes_per_node=plan.tiers.kv_space_bytes_per_node,
        t3_bytes_per_node=-(-t3_used // hardware.nodes),
        t3_dir=t3_dir,
        use_gds=plan.assumptions.t3_path == "efa_gds" and hardware.node.gds,
        eager=eager,
        kvtool_version=__version__,
    )
    return emit(target.strip().lower(), inputs)

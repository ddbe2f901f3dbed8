"""A model on a cluster: how it is served, and each context's full plan. Pure.

``plan_contexts`` is what ``kvtool plan`` calls: it chooses how the engine runs the
model on a node (``choose_serving``: tensor-parallel size, engine instances per node, weights),
prices a session at each context under that layout, places the sessions in the tiers
(``placement``) and weighs reloading against recomputing (``reload``). Profiles arrive loaded;
nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvtool.errors import InputError
from kvtool.model.backends import ASSUMED_GPU, Gpu, gpu_of
from kvtool.model.engines import BatchedTokens, batched_tokens
from kvtool.model.kv import SizeResult
from kvtool.model.params import (
    WEIGHT_BYTES,
    ParamCount,
    attention_params,
    count_params,
    weight_bytes,
    weights_dtype_of,
)
from kvtool.model.shape import KvShape
from kvtool.model.spec import ModelSpec
from kvtool.plan.fsx import FileSystem, file_system, smallest_size_at_least
from kvtool.plan.measured import MeasuredTier, apply_measured
from kvtool.plan.offload import LAYOUTS, OffloadLayout, copies_divisor
from kvtool.plan.placement import (
    GPU_MEMORY_UTILIZATION,
    PRESSURE_FRACTION,
    PlanInputs,
    TierPlan,
    kv_space_per_node,
    plan_tiers,
)
from kvtool.plan.reload import (
    BreakEven,
    Compute,
    ReloadAssumptions,
    TierPath,
    break_even,
    crossover_tokens,
    fan_in_per_s,
    node_compute,
    parse_t3_path,
    t3_client_gbps,
    tier_paths,
)
from kvtool.plan.workload import Workload
from kvtool.profiles.hardware import NodeProfile, StorageProfile
from kvtool.units import format_bytes

BREAK_EVEN_CONTEXTS = (1_000, 4_000, 10_000, 32_000, 50_000, 128_000, 200_000, 1_000_000)


@dataclass(frozen=True)
class Hardware:
    """The cluster a plan is for: nodes, the shared tiers behind them, and the client path
    (``ena``, ``efa`` or ``efa_gds``) the nodes use to reach T3."""

    node: NodeProfile
    nodes: int
    t3: StorageProfile
    t4: StorageProfile
    t3_path: str = "efa"
    fsx_capacity_bytes: int | None = None
    fsx_throughput_mbps_per_tib: int | None = None
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    measured: tuple[MeasuredTier, ...] = ()  # kvtool bench figures that replace the spec
    # one engine instance's KV pool in tokens as the engine's metrics report it (kvtool plan
    # --calibrate): the plan's T1 space, in place of kvtool's estimate; None: the estimate
    kv_pool_tokens_per_instance: int | None = None

    @property
    def efa_file_system(self) -> bool:
        """An EFA path means an EFA-enabled file system (with EFA's capacity steps)."""
        return (
            self.t3_path in ("efa", "efa_gds")
            and self.t3.client_efa_gbps > 0
            and self.node.efa_gbps > 0
        )

    def file_system(self, need_bytes: int = 0) -> FileSystem:
        """The T3 file system: ``--fsx-capacity`` checked against FSx's sizes, or the smallest
        valid size holding ``need_bytes`` (marked assumed)."""
        return file_system(
            self.t3,
            capacity_bytes=self.fsx_capacity_bytes,
            throughput_mbps_per_tib=self.fsx_throughput_mbps_per_tib,
            efa=self.efa_file_system,
            need_bytes=need_bytes,
        )


def make_hardware(
    node: NodeProfile,
    t3: StorageProfile,
    t4: StorageProfile,
    *,
    nodes: int = 1,
    t3_path: str = "efa",
    fsx_capacity_bytes: int | None = None,
    fsx_throughput_mbps_per_tib: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    measured: tuple[MeasuredTier, ...] = (),
) -> Hardware:
    """A validated Hardware: T3 and T4 profiles of the right tier, an FSx throughput option
    the T3 offers, a capacity FSx can provision. Raises InputError naming the option at
    fault (for a capacity, with the nearest valid sizes)."""
    for profile, tier, option in ((t3, "t3", "--t3-storage"), (t4, "t4", "--t4-storage")):
        if profile.tier != tier:
            raise InputError(
                f"{option} {profile.name!r} is a {profile.tier.upper()} profile",
                "kvtool hardware lists the storage profiles and their tiers",
            )
    if nodes < 1:
        raise InputError(f"--nodes must be at least 1, got {nodes}")
    throughput = fsx_throughput_mbps_per_tib  # checked with the capacity (plan/fsx.py)
    t3_path = parse_t3_path(t3_path)
    hardware = Hardware(
        node=node,
        nodes=nodes,
        t3=t3,
        t4=t4,
        t3_path=t3_path,
        fsx_capacity_bytes=fsx_capacity_bytes,
        fsx_throughput_mbps_per_tib=throughput,
        gpu_memory_utilization=gpu_memory_utilization,
        measured=measured,
    )
    hardware.file_system()  # raises for a throughput or capacity FSx cannot provision
    return hardware


@dataclass(frozen=True)
class Serving:
    """How the engine runs the model on one node: ``tp`` x ``pp`` chips per engine instance
    (tensor parallel within a pipeline stage, ``pp`` stages each holding its share of the
    layers: vLLM's ``--pipeline-parallel-size``), ``instances`` per node, each holding one
    full copy of the weights."""

    tp: int
    instances: int
    weights_dtype: str
    weights_bytes_per_instance: int
    notes: tuple[str, ...] = ()
    pp: int = 1
    # data-parallel attention (MLA models): each of the tp ranks attends for its own sessions,
    # holding their latents whole (one copy), with the attention weights on every rank
    dp_attention: bool = False

    @property
    def kv_tp(self) -> int:
        """The ranks a session's KV is sharded or replicated over: 1 under DP attention."""
        return 1 if self.dp_attention else self.tp

    @property
    def weights_bytes_per_node(self) -> int:
        """Every instance on the node holds the whole model."""
        return self.weights_bytes_per_instance * self.instances


def choose_serving(
    spec: ModelSpec,
    params: ParamCount,
    node: NodeProfile,
    *,
    tp: int | None,
    weights_dtype: str = "auto",
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    pp: int = 1,
    dp_attention: bool = False,
) -> Serving:
    """The engine layout on ``node``. ``tp`` None chooses the chips of one EC2 instance (one
    engine per instance, tensor-parallel over NVLink/NeuronLink), doubled until the weights
    leave room for KV; ``weights_dtype`` ``auto`` is the checkpoint's own format; ``pp``
    pipeline stages multiply the chips an engine spans.

    Raises InputError for a ``tp`` x ``pp`` that does not divide the node's chips, more stages
    than layers, or an unknown dtype.
    """
    dtype = weights_dtype_of(spec, weights_dtype)
    weights = weight_bytes(params, dtype, model_dtype=spec.dtype)
    notes: list[str] = []
    if pp < 1 or pp > spec.num_layers:
        raise InputError(f"--pp {pp} must be 1 to the model's {spec.num_layers} layers",
                         "each pipeline stage holds at least one layer")  # fmt: skip
    if node.chips % pp:
        raise InputError(f"--pp {pp} does not divide {node.name}'s {node.chips} accelerators",
                         f"pick a divisor of {node.chips}")  # fmt: skip
    if dp_attention and not spec.is_mla:
        raise InputError(f"kvtool models data-parallel attention for MLA models only, and"
                         f" {spec.name} caches full K and V", "drop --dp-attention")  # fmt: skip
    if tp is None:
        tp, why = _default_tp(spec, node, weights, gpu_memory_utilization, pp)
        notes.append(
            f"--tp not given: tp {tp} ({why}), {node.chips // (tp * pp)} engine instance(s) per"
            " node, each with its own copy of the weights"
        )
    elif node.chips % (tp * pp):
        raise InputError(
            f"--tp {tp}" + (f" x --pp {pp}" if pp > 1 else "")
            + f" does not divide {node.name}'s {node.chips} accelerators",
            f"pick a divisor of {node.chips}; kvtool plans whole engine instances per node",
        )  # fmt: skip
    if dp_attention and tp > 1:
        extra = int(attention_params(spec) * WEIGHT_BYTES[dtype] * (tp - 1))
        weights += extra
        notes.append(
            f"data-parallel attention: each of the {tp} ranks holds whole latents for its own"
            f" sessions (one copy, not {tp}) and the attention weights whole, {format_bytes(extra)}"
            " more per engine than tensor-parallel attention (an estimate: the attention"
            " projections counted again on each rank; experts and MLPs stay sharded)"
        )
    return Serving(
        tp=tp,
        instances=node.chips // (tp * pp),
        weights_dtype=dtype,
        weights_bytes_per_instance=weights,
        notes=tuple(notes),
        pp=pp,
        dp_attention=dp_attention,
    )


def _default_tp(
    spec: ModelSpec, node: NodeProfile, weights: int, utilization: float, pp: int = 1
) -> tuple[int, str]:
    """The chips of one instance (over ``pp`` stages), or the largest size below it that
    divides the attention heads (engines shard heads evenly), doubled while the weights leave
    no room for KV."""
    heads = spec.num_attention_heads
    chips = node.chips // pp
    options = [t for t in range(1, chips + 1) if chips % t == 0 and heads % t == 0]
    start = max([t for t in options if t * pp <= node.chips_per_instance] or [1])
    for tp in (t for t in options if t >= start):
        if _room_for_kv(node, weights * (chips // tp), utilization):
            break
    if tp == node.chips_per_instance:
        return tp, "the chips of one instance"
    if tp == start:
        return tp, f"the largest size within one instance that divides {heads} attention heads"
    return tp, "the weights need it"


def _room_for_kv(node: NodeProfile, weights_per_node: int, utilization: float) -> bool:
    probe = PlanInputs(
        node=node,
        nodes=1,
        weights_bytes=weights_per_node,
        kv_bytes_per_session=1,
        sessions=1,
        gpu_memory_utilization=utilization,
    )
    return kv_space_per_node(probe) > 0


def capability_family(node: NodeProfile) -> int | None:
    """The accelerator's compute-capability family (90 for an H200); None when not NVIDIA or
    not known."""
    gpu = gpu_of(node.accelerator)
    return None if gpu is None else gpu.capability[0] * 10


def kv_format_notes(shape: KvShape, node: NodeProfile) -> list[str]:
    """Whether ``node``'s accelerators run ``shape``'s KV format under its engine: InputError
    when they cannot, a note when they can only with limits."""
    if not shape.fmt.name.startswith("nvfp4"):
        return []
    rules = shape.rules
    if not (rules.nvfp4_kv_families or rules.nvfp4_kv_limited_families):
        return [f"kvtool has not checked which GPUs run an NVFP4 KV cache under {rules.source}"]
    family = capability_family(node)
    if family in rules.nvfp4_kv_families:
        return []
    if family in rules.nvfp4_kv_limited_families:
        return [
            f"{node.accelerator} runs an NVFP4 KV cache under {rules.source} only through"
            " FlashInfer's FA2 path: plain nvfp4, not at head_size 64, not with attention sinks"
        ]
    raise InputError(
        f"{node.accelerator} cannot run an NVFP4 KV cache under {rules.source}",
        "use --kv-dtype fp8, or Blackwell nodes (p6-b200, p6-b300, p6e-gb200)",
    )


def client_path(hardware: Hardware) -> str:
    """The path the nodes really take to T3: the one asked for when the node and the file
    system both offer it, else the best they do (no EFA on PERSISTENT_1 or SCRATCH, no GDS on
    Trainium)."""
    return t3_client_gbps(hardware.node, hardware.t3, hardware.t3_path)[0]


def uses_gds(hardware: Hardware) -> bool:
    """The nodes read T3 over EFA with GPUDirect Storage (the path they really take)."""
    return client_path(hardware) == "efa_gds" and hardware.node.gds


def offload_divisors(offload: OffloadLayout, *, is_mla: bool, tp: int) -> dict[str, int]:
    """How many times smaller a session is in T2 and T3 than in HBM (``plan/offload.py``)."""
    return {t: copies_divisor(offload, t, is_mla=is_mla, tp=tp) for t in ("T2", "T3")}


def place_sessions(
    hardware: Hardware,
    serving: Serving,
    *,
    is_mla: bool,
    session_bytes: int,
    sessions: int,
    admission_bytes: int | None,
    offload: OffloadLayout,
    kv_pool_bytes_per_instance: int | None = None,
) -> TierPlan:
    """Place ``sessions`` of ``session_bytes`` on ``hardware`` under ``serving``: the one
    assembly of placement's inputs that ``kvtool plan``, ``advise`` and ``check``
    share (the engine's admission charge, the offload stack's copies, the GPU memory the GDS
    path pins, the HBM share the engine may use). Raises InputError when the weights or one
    session do not fit a node."""
    divisors = offload_divisors(offload, is_mla=is_mla, tp=serving.kv_tp)
    gds = uses_gds(hardware)
    return plan_tiers(
        PlanInputs(
            node=hardware.node,
            nodes=hardware.nodes,
            weights_bytes=serving.weights_bytes_per_node,
            kv_bytes_per_session=session_bytes,
            sessions=sessions,
            fsx_capacity_bytes=hardware.fsx_capacity_bytes,
            gpu_memory_utilization=hardware.gpu_memory_utilization,
            extra_reserve_bytes_per_chip=offload.gpu_reserve_mib_with_gds * 2**20 if gds else 0,
            t1_admission_bytes_per_session=admission_bytes,
            measured_kv_space_bytes_per_node=None
            if kv_pool_bytes_per_instance is None
            else kv_pool_bytes_per_instance * serving.instances,
            t2_bytes_per_session=session_bytes // divisors["T2"],
            t3_bytes_per_session=session_bytes // divisors["T3"],
            t3_medium="FSx for Lustre (shared)"
            if offload.t3_shared
            else "FSx for Lustre (private per worker)",
        )
    )


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
    """Everything ``kvtool plan`` reports for one context length."""

    ctx_tokens: int
    hardware: Hardware
    serving: Serving
    tiers: TierPlan
    file_system: FileSystem
    compute: Compute
    notes: tuple[str, ...]
    paths: tuple[TierPath, ...]
    crossovers: dict[str, int | None]
    break_even: tuple[BreakEven, ...]
    fan_in: tuple[FanIn, ...]
    assumptions: ReloadAssumptions
    best_layout: Layout | None = None  # the layout holding the most sessions in T1

    @property
    def weights_dtype(self) -> str:
        """The weight format the plan priced."""
        return self.serving.weights_dtype


@dataclass(frozen=True)
class Layout:
    """One serving layout on a node and what it does with HBM: sessions of the context under
    the 85% line, the copies of the weights it keeps, and its cross-chip traffic per decoded
    token (an estimate: bf16 activations, two ring all-reduces a layer over ``tp``, one
    hand-off at each of ``pp - 1`` stage boundaries)."""

    tp: int
    pp: int
    instances: int
    sessions_in_t1_per_node: int
    bytes_moved_per_token: float
    dp_attention: bool = False


def best_layout(shape: KvShape, hardware: Hardware, *, weights_dtype: str, ctx_tokens: int,
                max_num_batched_tokens: int | None = None, extra_reserve_bytes_per_chip: int = 0,
                ) -> Layout | None:  # fmt: skip
    """Of every tp (dividing the attention heads) x pp (at most the layers) that tiles the
    node's chips, the one holding the most sessions of ``ctx_tokens`` in T1; ties go to more
    engines, then fewer pipeline stages (a deep pipeline adds latency to every token). None
    when no layout leaves room for KV."""
    spec, node = shape.spec, hardware.node
    params = count_params(spec)
    dtype = weights_dtype_of(spec, weights_dtype)
    weights = weight_bytes(params, dtype, model_dtype=spec.dtype)
    extra_per_rank = int(attention_params(spec) * WEIGHT_BYTES[dtype])  # DP attention's, a rank
    heads = spec.num_attention_heads
    best: tuple[tuple[int, int, int, bool], Layout] | None = None
    for tp in (t for t in range(1, node.chips + 1) if node.chips % t == 0 and heads % t == 0):
        for dp in (False, True) if spec.is_mla and tp > 1 else (False,):
            priced = shape.serving_tp(1 if dp else tp).on_gpu(node_gpu(node))
            try:
                size = priced.size(ctx_tokens, 1, max_num_batched_tokens=max_num_batched_tokens)
            except InputError:
                continue  # a layout the engine refuses for this model
            admitted = max(size.kv_bytes_per_session, size.admission_bytes_per_session or 0)
            per_instance = weights + (extra_per_rank * (tp - 1) if dp else 0)
            rest = node.chips // tp
            for pp in (p for p in range(1, rest + 1) if rest % p == 0 and p <= spec.num_layers):
                instances = rest // pp
                space = kv_space_per_node(PlanInputs(
                    node=node, nodes=1, weights_bytes=per_instance * instances,
                    kv_bytes_per_session=1, sessions=1,
                    gpu_memory_utilization=hardware.gpu_memory_utilization,
                    extra_reserve_bytes_per_chip=extra_reserve_bytes_per_chip,
                ))  # fmt: skip
                if space <= 0 or not admitted:
                    continue
                sessions = int(space * PRESSURE_FRACTION) // admitted
                moved = spec.hidden_size * 2 * (4 * spec.num_layers * (tp - 1) / tp + (pp - 1))
                layout = Layout(tp, pp, instances, sessions, moved, dp)
                key = (sessions, instances, -pp, not dp)
                if best is None or key > best[0]:
                    best = (key, layout)
    return None if best is None else best[1]


def plan_deployment(
    spec: ModelSpec,
    params: ParamCount,
    *,
    ctx_tokens: int,
    sessions: int,
    bytes_at: Callable[[int], int],
    hardware: Hardware,
    serving: Serving,
    assumptions: ReloadAssumptions,
    offload: OffloadLayout = LAYOUTS["vllm"],
    t1_admission_bytes: int | None = None,
) -> DeploymentPlan:
    """Place ``sessions`` x ``ctx_tokens`` on ``hardware`` and weigh reload against recompute.

    ``bytes_at`` (tokens -> KV bytes of one session, under the chosen engine, dtype and tp) is
    passed in so this module never needs to know which engine convention priced the model.
    """
    node = hardware.node
    session = bytes_at(ctx_tokens)
    divisors = offload_divisors(offload, is_mla=spec.is_mla, tp=serving.kv_tp)
    gds = uses_gds(hardware)
    tiers = place_sessions(
        hardware,
        serving,
        is_mla=spec.is_mla,
        session_bytes=session,
        sessions=sessions,
        admission_bytes=t1_admission_bytes,
        offload=offload,
        kv_pool_bytes_per_instance=None
        if hardware.kv_pool_tokens_per_instance is None
        else bytes_at(hardware.kv_pool_tokens_per_instance),
    )
    fs = hardware.file_system(tiers.t3_bytes_needed)
    share = fs.read_bytes_per_s / hardware.nodes
    fsx_why = (
        f"{fs.capacity_gib:,} GiB{' (assumed)' if fs.assumed else ''} x"
        f" {fs.throughput_mbps_per_tib:,} MB/s/TiB = {fs.read_bytes_per_s / 1e9:,.1f} GB/s"
        + (f" / {hardware.nodes} nodes" if hardware.nodes > 1 else "")
        + (f" = {share / 1e9:,.1f} GB/s per node" if hardware.nodes > 1 else "")
    )
    paths = [
        replace(path, bytes_divisor=divisors.get(path.tier, divisors["T3"]))
        for path in tier_paths(
            node,
            hardware.t3,
            hardware.t4,
            t3_path=hardware.t3_path,
            a=assumptions,
            fsx_bytes_per_s_per_node=share,
            fsx_why=f"the file system's throughput, {fsx_why}",
        )
    ]
    if hardware.measured:
        paths = apply_measured(paths, hardware.measured, t3_share_bytes_per_s=share)
    notes = list(_t3_notes(hardware, fs, share))
    taken = client_path(hardware)
    if taken != hardware.t3_path:
        names = {"ena": "ENA/TCP", "efa": "EFA", "efa_gds": "EFA with GDS"}
        why = (
            f"{hardware.t3.name} cannot be EFA-enabled (EFA needs PERSISTENT_2)"
            if hardware.t3.client_efa_gbps <= 0
            else f"{node.name} has no {'GDS' if taken == 'efa' else 'EFA'}"
        )
        notes.insert(
            0,
            f"--t3-path {hardware.t3_path.replace('_', '-')} is not available: {why}; T3"
            f" reads go over {names[taken]}",
        )
    measured_tiers = [p.tier for p in paths if p.bandwidth_source == "measured"]
    if measured_tiers:
        notes.append(
            f"{', '.join(measured_tiers)} reload times use the bandwidth kvtool bench measured,"
            " not the spec; first-byte latencies stay the profile's"
        )
    notes += _offload_notes(offload, divisors, serving, gds)
    if not any(p.tier == "T2" for p in paths) and node.host_memory_gib:
        notes.append(
            f"no T2 reload time: {node.name}'s host-to-accelerator bandwidth is not published"
        )
    compute = node_compute(
        node,
        weights_bytes_per_instance=serving.weights_bytes_per_instance,
        tp=serving.tp,
        a=assumptions,
    )
    crossovers = {
        path.tier: crossover_tokens(spec, params, compute, path, bytes_at, assumptions)
        for path in paths
    }
    contexts = sorted({*BREAK_EVEN_CONTEXTS, ctx_tokens})
    rows = break_even(spec, params, compute, paths, bytes_at, contexts, assumptions)
    fan_in = []
    for name, key in (("ENA/TCP", "ena"), ("EFA", "efa"), ("EFA+GDS", "efa_gds")):
        used, gbps = t3_client_gbps(node, hardware.t3, key)
        if used != key or gbps <= 0:
            continue
        bandwidth = min(gbps * 1e9 / 8, share)
        fan_in.append(
            FanIn(
                path=name,
                link_gbps=gbps,
                bytes_per_s=bandwidth,
                sessions_per_s=fan_in_per_s(session // divisors["T3"], bandwidth),
                seconds_per_session=session // divisors["T3"] / bandwidth,
            )
        )
    fan_in += [
        FanIn(
            path="measured",
            link_gbps=path.node_bytes_per_s * 8 / 1e9,
            bytes_per_s=path.node_bytes_per_s,
            sessions_per_s=fan_in_per_s(session // divisors["T3"], path.node_bytes_per_s),
            seconds_per_session=session // divisors["T3"] / path.node_bytes_per_s,
        )
        for path in paths
        if path.tier == "T3" and path.bandwidth_source == "measured"
    ]
    return DeploymentPlan(
        ctx_tokens=ctx_tokens,
        hardware=hardware,
        serving=serving,
        tiers=tiers,
        file_system=fs,
        compute=compute,
        notes=tuple(notes),
        paths=tuple(paths),
        crossovers=crossovers,
        break_even=tuple(rows),
        fan_in=tuple(fan_in),
        assumptions=assumptions,
    )


@dataclass(frozen=True)
class ContextPlans:
    """``plan_contexts``' answer: the sizes under the serving layout, one plan each, and the
    tokens per batch the admission charge assumed (and where that figure came from)."""

    serving: Serving
    sizes: tuple[SizeResult, ...]
    plans: tuple[DeploymentPlan, ...]
    batched: BatchedTokens
    format_notes: tuple[str, ...] = ()  # what the accelerators make of the KV format


def serve(
    shape: KvShape, hardware: Hardware, *, weights_dtype: str = "auto", pp: int = 1,
    dp_attention: bool = False,
) -> tuple[Serving, KvShape]:  # fmt: skip
    """The serving layout on ``hardware`` (the shape's tp when the user gave one, else
    ``choose_serving``'s; ``pp`` stages) and the shape priced under it: a pipeline splits the
    layers, not the heads, so a session's KV over all ranks is its KV at ``tp``."""
    serving = choose_serving(
        shape.spec,
        count_params(shape.spec),
        hardware.node,
        tp=shape.tp if shape.tp_given else None,
        weights_dtype=weights_dtype,
        gpu_memory_utilization=hardware.gpu_memory_utilization,
        pp=pp,
        dp_attention=dp_attention,
    )
    return serving, shape.serving_tp(serving.kv_tp).on_gpu(node_gpu(hardware.node))


def node_gpu(node: NodeProfile) -> Gpu:
    """The GPU whose vLLM kernels decide block sizes on ``node``; an H100/H200 assumed (and
    said) for an accelerator kvtool knows no CUDA capability for (Trainium)."""
    gpu = gpu_of(node.accelerator)
    if gpu is not None:
        return gpu
    return ASSUMED_GPU._replace(
        why=f"{node.accelerator} runs vLLM's Neuron plugin, whose kernels kvtool does not model"
    )


def plan_contexts(
    shape: KvShape,
    *,
    contexts: list[int],
    sessions: int,
    hardware: Hardware,
    weights_dtype: str = "auto",
    assumptions: ReloadAssumptions | None = None,
    offload: OffloadLayout | None = None,
    max_num_batched_tokens: int | None = None,
    pp: int = 1,
    dp_attention: bool = False,
) -> ContextPlans:
    """``kvtool plan``: choose the serving layout, price a session at each context
    under it, and plan each.

    ``offload`` is the stack that moves KV to T2 and T3 (``plan/offload.py``); by default the
    engine's own (``EngineRules.offload_stack``). ``max_num_batched_tokens`` None takes the
    engine's default on the node's accelerator (``model.engines.batched_tokens``).

    Raises InputError for layouts the engine or the node cannot run (see ``choose_serving``
    and ``size_kv``).
    """
    spec = shape.spec
    params = count_params(spec)
    serving, priced = serve(shape, hardware, weights_dtype=weights_dtype, pp=pp,
                            dp_attention=dp_attention)  # fmt: skip
    a = assumptions or ReloadAssumptions()
    if a.use_fp8_compute is None:
        narrow = serving.weights_dtype in ("fp8", "mxfp4", "nvfp4")
        a = replace(a, use_fp8_compute=narrow and hardware.node.fp8_tflops_per_chip > 0)
    batched = node_batched_tokens(shape, hardware, max_num_batched_tokens)
    format_notes = kv_format_notes(shape, hardware.node)
    sizes = tuple(
        priced.size(tokens, sessions, max_num_batched_tokens=batched.value) for tokens in contexts
    )
    plans = tuple(
        plan_deployment(
            spec,
            params,
            ctx_tokens=size.ctx_tokens,
            sessions=sessions,
            bytes_at=priced.session_bytes,
            hardware=hardware,
            serving=serving,
            assumptions=a,
            offload=offload or LAYOUTS[shape.rules.offload_stack],
            t1_admission_bytes=size.admission_bytes_per_session,
        )
        for size in sizes
    )
    if format_notes:
        plans = tuple(replace(p, notes=(*format_notes, *p.notes)) for p in plans)
    if hardware.kv_pool_tokens_per_instance is None:  # (a measured pool is one layout's)
        stack = offload or LAYOUTS[shape.rules.offload_stack]
        reserve = stack.gpu_reserve_mib_with_gds * 2**20 if uses_gds(hardware) else 0
        plans = tuple(
            replace(p, best_layout=best_layout(shape, hardware, weights_dtype=weights_dtype,
                                               ctx_tokens=p.ctx_tokens,
                                               max_num_batched_tokens=batched.value,
                                               extra_reserve_bytes_per_chip=reserve))
            for p in plans
        )  # fmt: skip
    return ContextPlans(
        serving=serving,
        sizes=sizes,
        plans=plans,
        batched=batched,
        format_notes=tuple(format_notes),
    )


def node_batched_tokens(
    shape: KvShape, hardware: Hardware | None, given: int | None
) -> BatchedTokens:
    """The tokens per batch the engine's admission charge assumes on ``hardware``'s
    accelerator (or with no hardware), or the figure given."""
    node = None if hardware is None else hardware.node
    return batched_tokens(
        shape.rules,
        given,
        hbm_gib=None if node is None else node.hbm_gib_per_chip,
        accelerator="" if node is None else node.accelerator,
    )


@dataclass(frozen=True)
class WorkloadPlan:
    """A workload (a context mix at a mean concurrency, a peak-to-mean ratio) placed on a
    cluster: the serving layout, one session at each context, and the tiers at peak
    concurrency with the mean session (``advise`` and ``check``)."""

    serving: Serving
    sizes: dict[int, SizeResult]
    mean_session_bytes: int
    mean_admission_bytes: int | None
    peak_sessions: int
    tiers: TierPlan

    @property
    def session_bytes(self) -> dict[int, int]:
        """One session's KV at each context of the mix."""
        return {ctx: size.kv_bytes_per_session for ctx, size in self.sizes.items()}


def plan_workload(
    shape: KvShape,
    workload: Workload,
    hardware: Hardware,
    *,
    offload: OffloadLayout | None = None,
    max_num_batched_tokens: int | None = None,
) -> WorkloadPlan:
    """Serve, price and place ``workload`` exactly as ``plan_contexts`` does one context: the
    same serving layout, admission charge, offload copies and GDS reserve, so ``kvtool check``,
    ``advise`` and ``plan`` agree on where sessions live. Over a context mix the
    session and its admission charge are the share-weighted means.

    Raises InputError when the weights or one session do not fit a node.
    """
    serving, priced = serve(shape, hardware, weights_dtype=workload.weights_dtype)
    batched = node_batched_tokens(shape, hardware, max_num_batched_tokens).value
    sizes = {ctx: priced.size(ctx, max_num_batched_tokens=batched) for ctx in workload.contexts}
    mean = int(
        sum(share * sizes[ctx].kv_bytes_per_session for ctx, share in workload.contexts.items())
    )
    admission = None
    if any(size.admission_bytes_per_session is not None for size in sizes.values()):
        admission = int(
            sum(
                share * (sizes[ctx].admission_bytes_per_session or sizes[ctx].kv_bytes_per_session)
                for ctx, share in workload.contexts.items()
            )
        )
    peak = max(1, round(workload.sessions * workload.peak_to_mean))
    tiers = place_sessions(
        hardware,
        serving,
        is_mla=shape.spec.is_mla,
        session_bytes=mean,
        sessions=peak,
        admission_bytes=admission,
        offload=offload or LAYOUTS[shape.rules.offload_stack],
    )
    return WorkloadPlan(
        serving=serving,
        sizes=sizes,
        mean_session_bytes=mean,
        mean_admission_bytes=admission,
        peak_sessions=peak,
        tiers=tiers,
    )


def _t3_notes(hardware: Hardware, fs: FileSystem, share: float) -> list[str]:
    """Where the T3 throughput comes from, and whether the file system or the links bound it."""
    notes = []
    kind = "EFA-enabled " if fs.efa else ""
    if fs.assumed:
        notes.append(
            f"no --fsx-capacity: T3 assumed to be the smallest {kind}{fs.profile.name} that"
            f" holds what spills there, {fs.capacity_gib:,} GiB at"
            f" {fs.throughput_mbps_per_tib:,} MB/s/TiB = {fs.read_bytes_per_s / 1e9:,.1f} GB/s"
            " of reads (capacity x per-unit throughput)"
        )
    _, link_gbps = t3_client_gbps(hardware.node, hardware.t3, hardware.t3_path)
    link = link_gbps * 1e9 / 8
    if share < link:
        need_gib = hardware.nodes * link / (fs.throughput_mbps_per_tib * 1e6) * 1024
        size = smallest_size_at_least(fs.profile, need_gib, fs.throughput_mbps_per_tib, efa=fs.efa)
        notes.append(
            f"T3 reads are bound by the file system, not the client links: {share / 1e9:,.1f}"
            f" GB/s per node against {link / 1e9:,.1f} GB/s of link; {size:,} GiB at"
            f" {fs.throughput_mbps_per_tib:,} MB/s/TiB would match the links of"
            f" {hardware.nodes} node(s)"
        )
    if fs.profile.write_throughput_mbps_per_tib:
        notes.append(
            f"{fs.profile.name} writes at {fs.profile.write_throughput_mbps_per_tib} MB/s/TiB:"
            f" {fs.write_bytes_per_s / 1e9:,.1f} GB/s for eager copies and demotions"
        )
    return notes


def _offload_notes(
    offload: OffloadLayout, divisors: dict[str, int], serving: Serving, gds: bool
) -> list[str]:
    """What the offload stack changes: single MLA copies, a private file tier, a GDS buffer."""
    notes = []
    for tier, divisor in divisors.items():
        if divisor > 1:
            notes.append(
                f"{tier} holds one copy of each MLA session ({offload.source}); HBM holds"
                f" {serving.tp}, one per tensor-parallel rank"
            )
    if serving.tp > 1 and divisors["T2"] == 1 and offload.host_pool_per_rank:
        notes.append(f"{offload.source} keeps a host-memory pool per rank: T2 as HBM holds it")
    if not offload.t3_shared:
        notes.append(
            f"{offload.source}'s disk tier is a private file per worker, deleted when it exits:"
            " on FSx it is not a shared T3 (no cross-node prefix hits, nothing survives a restart)"
        )
    if gds and offload.gpu_reserve_mib_with_gds:
        notes.append(
            f"the GDS path pins {offload.gpu_reserve_mib_with_gds:,} MiB of GPU memory per"
            " worker (gds_buffer_size), taken from the KV space"
        )
    return notes

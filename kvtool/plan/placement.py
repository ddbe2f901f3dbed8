"""Place a deployment's KV cache in the four tiers: HBM, host DRAM, FSx for Lustre, S3.

Pure arithmetic on profiles and sizes. The rules, from the AWS Storage Blog article
"Accelerate inference with KV cache tiering on AWS" (2026-09-21):

* T1 (HBM) holds what fits under the 85% pressure line of the KV space the engine gets:
  ``chips x HBM x gpu_memory_utilization - weights - activation reserve`` per node (vLLM's
  default ``--gpu-memory-utilization`` is 0.92 in 0.33.0); for an engine whose share is of
  the memory left after the weights (``pool_of_free``: TensorRT-LLM's
  ``free_gpu_memory_fraction``, 0.9), ``(chips x HBM - weights - reserve) x fraction``.
* T2 (host DRAM) takes what T1 evicts, up to ``host_memory_fraction`` of DRAM (estimate: the
  rest is the OS, the engine process and pinned staging buffers).
* T3 (FSx for Lustre) takes the rest, up to ``--fsx-capacity``; without one, kvtool reports
  the capacity T3 would need.
* T4 (S3) takes whatever T3 cannot hold.

Worked example (tests/unit/plan/test_placement.py): Llama 3.1 405B at 200K tokens x 100
sessions is 10.3 TB of KV; a Trn3 UltraServer's 20.7 TB of pooled HBM holds it in T1.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvtool.errors import InputError
from kvtool.profiles.hardware import NodeProfile
from kvtool.units import format_bytes

PRESSURE_FRACTION = 0.85
GPU_MEMORY_UTILIZATION = 0.92  # vLLM 0.33.0 vllm/config/cache.py: Field(default=0.92)
HOST_MEMORY_FRACTION = 0.8
ACTIVATION_RESERVE_GB_PER_CHIP = 2.0


class NodeTooSmall(InputError):
    """One node cannot serve a session: the weights leave no room for KV (``by_weights``), or
    one session is over the 85% line. ``kvtool plan`` answers it with a verdict and the tries
    that would serve it (``verdict.rescue``); the other planners refuse it as bad input."""

    def __init__(self, message: str, hint: str, *, by_weights: bool) -> None:
        super().__init__(message, hint)
        self.by_weights = by_weights


@dataclass(frozen=True)
class PlanInputs:
    """What placement needs: the node, how many, the weights per node, one session's KV.

    ``t2_bytes_per_session`` and ``t3_bytes_per_session`` are a session's size in host memory
    and on the file tier (and S3) when the offload stack stores fewer copies than HBM holds (an
    MLA latent saved from one rank: ``plan/offload.py``); None means the same as in HBM.
    ``extra_reserve_bytes_per_chip`` is HBM an offload stack pins (LMCache's GDS buffer).
    """

    node: NodeProfile
    nodes: int
    weights_bytes: int
    kv_bytes_per_session: int
    sessions: int
    fsx_capacity_bytes: int | None = None
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    # the fraction is of what the weights and reserves leave (TensorRT-LLM), not of all HBM
    pool_of_free: bool = False
    pressure_fraction: float = PRESSURE_FRACTION
    host_memory_fraction: float = HOST_MEMORY_FRACTION
    activation_reserve_gb_per_chip: float = ACTIVATION_RESERVE_GB_PER_CHIP
    extra_reserve_bytes_per_chip: int = 0
    t2_bytes_per_session: int | None = None
    t3_bytes_per_session: int | None = None
    # what the engine reserves to admit one session to T1 when that exceeds what it holds
    # (vLLM charges sliding, chunked and state layers their worst case); None: the same
    t1_admission_bytes_per_session: int | None = None
    t3_medium: str = "FSx for Lustre (shared)"
    # the engine's own KV pool on one node, measured (kvtool plan --calibrate): it replaces
    # HBM x utilization less weights and reserves; None: that estimate
    measured_kv_space_bytes_per_node: int | None = None
    # the engine's own host tier on one node, as its metrics report it (--calibrate): T2's
    # capacity in place of host memory x host_memory_fraction; None: that estimate
    measured_t2_bytes_per_node: int | None = None


@dataclass(frozen=True)
class TierUse:
    """One tier of the plan. ``capacity_bytes`` is None for a tier sized to fit (T3 without
    ``--fsx-capacity``) or unbounded (S3)."""

    name: str
    medium: str
    capacity_bytes: int | None
    used_bytes: int
    sessions: int

    @property
    def utilization(self) -> float | None:
        """Used over capacity, or None when the tier has no fixed capacity."""
        if not self.capacity_bytes:
            return None
        return self.used_bytes / self.capacity_bytes


@dataclass(frozen=True)
class TierPlan:
    """Where every session's KV lives, and what it would take to keep all of it in HBM."""

    tiers: tuple[TierUse, ...]
    weights_bytes_per_node: int
    kv_space_bytes_per_node: int
    pressure_bytes_per_node: int
    sessions_per_node_in_t1: int
    nodes_for_all_in_t1: int
    total_kv_bytes: int
    t3_bytes_needed: int
    notes: tuple[str, ...]

    @property
    def fits_in_t1(self) -> bool:
        """True when no session spills out of HBM."""
        return self.tiers[0].sessions == sum(t.sessions for t in self.tiers)


def kv_space_per_node(inputs: PlanInputs) -> int:
    """Bytes of HBM the engine can give KV on one node (before the 85% pressure line): the
    engine's measured pool when there is one, else kvtool's estimate."""
    if inputs.measured_kv_space_bytes_per_node is not None:
        return inputs.measured_kv_space_bytes_per_node
    node = inputs.node
    reserve = node.chips * (
        inputs.activation_reserve_gb_per_chip * 1e9 + inputs.extra_reserve_bytes_per_chip
    )
    if inputs.pool_of_free:  # KvCacheCreator.configure_kv_cache_capacity (model/trtllm.py)
        free = node.hbm_bytes - inputs.weights_bytes - reserve
        return int(free * inputs.gpu_memory_utilization) if free > 0 else int(free)
    usable = node.hbm_bytes * inputs.gpu_memory_utilization
    return int(usable - inputs.weights_bytes - reserve)


def plan_tiers(inputs: PlanInputs) -> TierPlan:
    """Fill T1, then T2, T3 and T4 with whole sessions; raise InputError for impossible plans."""
    if inputs.nodes < 1 or inputs.sessions < 1 or inputs.kv_bytes_per_session < 1:
        raise InputError("nodes, sessions and the per-session KV size must be positive")
    node = inputs.node
    space = kv_space_per_node(inputs)
    if space <= 0:
        raise NodeTooSmall(
            f"the weights ({format_bytes(inputs.weights_bytes)}) leave no room for KV in"
            f" {node.name}'s {format_bytes(node.hbm_bytes)} of HBM"
            + (
                f" at free_gpu_memory_fraction {inputs.gpu_memory_utilization}"
                if inputs.pool_of_free
                else f" at gpu_memory_utilization {inputs.gpu_memory_utilization}"
            ),
            "use more or larger accelerators (--hardware), or narrower weights (--weights-dtype)",
            by_weights=True,
        )
    pressure = int(space * inputs.pressure_fraction)
    per_session = inputs.kv_bytes_per_session
    admitted = max(per_session, inputs.t1_admission_bytes_per_session or 0)
    per_node_t1 = pressure // admitted
    if per_node_t1 == 0:
        raise NodeTooSmall(
            f"one session ({format_bytes(admitted)} of KV as the engine admits it) does not fit"
            f" under the 85% line of one {node.name} ({format_bytes(pressure)})",
            "shorten --ctx, quantize the cache (--kv-dtype fp8), or use larger nodes",
            by_weights=False,
        )
    notes: list[str] = []
    if inputs.pool_of_free and inputs.measured_kv_space_bytes_per_node is None:
        free = space / inputs.gpu_memory_utilization
        gds = (
            f" and the GDS buffer's {format_bytes(inputs.extra_reserve_bytes_per_chip)}"
            if inputs.extra_reserve_bytes_per_chip
            else ""
        )
        notes.append(
            f"HBM for KV: TensorRT-LLM's free_gpu_memory_fraction {inputs.gpu_memory_utilization:g}"
            f" of the {format_bytes(int(free))} a node the weights and kvtool's activation"
            f" reserve ({inputs.activation_reserve_gb_per_chip:g} GB{gds} a chip) leave ="
            f" {format_bytes(space)} (KvCacheCreator.configure_kv_cache_capacity measures its"
            " profiling run's peak in place of that reserve; docs/sizing.md section 9)"
        )
    if inputs.measured_kv_space_bytes_per_node is not None:
        notes.append(
            f"HBM for KV: {format_bytes(space)} a node, the engine's own pool (as its metrics"
            " report it with --calibrate, or vLLM's blocks of --kv-cache-memory-bytes), not"
            " kvtool's estimate from HBM, weights and reserves"
        )
    if admitted > per_session * 1.005:
        notes.append(
            f"T1 holds {per_node_t1:,} session(s) per node by the engine's admission charge,"
            f" {format_bytes(admitted)} each (vLLM reserves a sliding or chunked layer's window"
            f" plus the tokens in flight); a decoding session holds {format_bytes(per_session)}"
        )
    remaining = inputs.sessions
    tiers: list[TierUse] = []

    t1_sessions = min(remaining, per_node_t1 * inputs.nodes)
    remaining -= t1_sessions
    tiers.append(
        TierUse(
            name="T1",
            medium=f"HBM ({inputs.nodes} x {node.chips} x {node.accelerator})",
            capacity_bytes=space * inputs.nodes,
            used_bytes=t1_sessions * per_session,
            sessions=t1_sessions,
        )
    )

    t2_capacity = int(node.host_memory_bytes * inputs.host_memory_fraction) * inputs.nodes
    if inputs.measured_t2_bytes_per_node is not None:
        t2_capacity = inputs.measured_t2_bytes_per_node * inputs.nodes
        notes.append(
            f"host memory for KV: {format_bytes(inputs.measured_t2_bytes_per_node)} a node, the"
            " engine's own offload tier as its metrics report it (--calibrate)"
        )
    t2_per_session = inputs.t2_bytes_per_session or per_session
    t2_sessions = min(remaining, t2_capacity // t2_per_session)
    remaining -= t2_sessions
    tiers.append(
        TierUse(
            name="T2",
            medium=f"host DRAM ({inputs.nodes} x {node.host_memory_gib:,.0f} GiB)",
            capacity_bytes=t2_capacity,
            used_bytes=t2_sessions * t2_per_session,
            sessions=t2_sessions,
        )
    )

    per_session = inputs.t3_bytes_per_session or per_session  # T3 and T4 store alike
    t3_needed = remaining * per_session
    if inputs.fsx_capacity_bytes is None:
        t3_sessions = remaining
        if remaining:
            notes.append(
                f"T3 sized to fit: it needs {format_bytes(t3_needed)}"
                " (pass --fsx-capacity to bound it)"
            )
    else:
        t3_sessions = min(remaining, inputs.fsx_capacity_bytes // per_session)
    remaining -= t3_sessions
    tiers.append(
        TierUse(
            name="T3",
            medium=inputs.t3_medium,
            capacity_bytes=inputs.fsx_capacity_bytes,
            used_bytes=t3_sessions * per_session,
            sessions=t3_sessions,
        )
    )
    tiers.append(
        TierUse(
            name="T4",
            medium="S3",
            capacity_bytes=None,
            used_bytes=remaining * per_session,
            sessions=remaining,
        )
    )
    return TierPlan(
        tiers=tuple(tiers),
        weights_bytes_per_node=inputs.weights_bytes,
        kv_space_bytes_per_node=space,
        pressure_bytes_per_node=pressure,
        sessions_per_node_in_t1=per_node_t1,
        nodes_for_all_in_t1=-(-inputs.sessions // per_node_t1),
        total_kv_bytes=inputs.sessions * inputs.kv_bytes_per_session,
        t3_bytes_needed=t3_needed,
        notes=tuple(notes),
    )

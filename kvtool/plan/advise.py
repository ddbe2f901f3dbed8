"""Is the four-tier architecture worth it for this workload? The AWS article's criteria,
applied.

Pure. The AWS Storage Blog article "Accelerate inference with KV cache tiering on AWS"
(2026-09-21), in "When the architecture is worth it", lists six signs that a shared
T3 pays off; kvtool evaluates each with the workload's numbers and says why it is met or not:

1. the working set (mean concurrency) exceeds the cluster's HBM (the 85% line);
2. over 30% of requests share a prefix;
3. the mean idle time between turns exceeds 30 s;
4. GPUs are being added to hold KV rather than to decode (the operator says so; kvtool shows
   how many nodes it would take to hold the peak working set in HBM, but cannot know why a
   fleet grows);
5. peak-to-mean concurrency exceeds 3x;
6. prefill and decode are disaggregated.

T3 is recommended when any one holds (the article lists them as conditions, each enough; the
recommendation names which), or when the peak working set does not fit T1 + T2 at all;
disaggregated serving requires it (the decode node reads KV another node wrote). T2 is left
out when a node's usable DRAM is smaller than its HBM KV space (a Trn3 UltraServer's pooled
HBM: go T1 -> T3, as the article says). T4 is added when sessions idle
for 10 minutes or more (kvtool's reading of "idle much longer") or must survive restarts.
The write posture is eager when prefill and decode are disaggregated (required: the decode node
never ran the prefill), when KV must survive a node failure, or when shared prefixes are worth
writing once for the whole cluster; lazy otherwise (it saves the second write).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvtool.model.params import count_params
from kvtool.model.shape import KvShape
from kvtool.plan.deployment import (
    Hardware,
    Serving,
    WorkloadPlan,
    engine_hosts,
    offload_divisors,
    plan_assumptions,
    plan_workload,
)
from kvtool.plan.fsx import FileSystem
from kvtool.plan.offload import LAYOUTS
from kvtool.plan.reload import ReloadAssumptions, node_compute
from kvtool.plan.requests import key_scheme
from kvtool.plan.t3_size import T3Size, plan_t3, read_paths
from kvtool.plan.workload import Workload
from kvtool.units import format_bytes, plural

SHARED_PREFIX_THRESHOLD = 0.30
IDLE_THRESHOLD_S = 30.0
PEAK_TO_MEAN_THRESHOLD = 3.0
EXPORT_IDLE_S = 600.0
DISAGGREGATED = "disaggregated prefill/decode"


@dataclass(frozen=True)
class Capacity:
    """The cluster side: per-session bytes at each context, and tier capacities."""

    session_bytes: dict[int, int]
    nodes: int
    t1_pressure_bytes_per_node: int
    t2_bytes_per_node: int
    hbm_kv_space_bytes_per_node: int
    # sessions' HBM bytes one byte of T2 holds: the offload stack's copies (an MLA latent
    # replicated on every tensor-parallel rank in HBM is saved once in host memory)
    t2_divisor: int = 1


@dataclass(frozen=True)
class Criterion:
    """One of the article's six signs, evaluated."""

    name: str
    met: bool
    value: str  # in words, for the text output
    threshold: str
    reason: str
    amount: float | bool = False  # the value and the threshold as numbers, in ``unit``
    bound: float | bool = False
    unit: str = "yes/no"  # bytes, fraction, seconds, ratio or yes/no


@dataclass(frozen=True)
class Advice:
    """The recommended tier set and write posture, with every reason."""

    tiers: tuple[str, ...]
    posture: str
    criteria: tuple[Criterion, ...]
    reasons: tuple[str, ...]
    working_set_bytes: int
    peak_working_set_bytes: int
    nodes_for_peak_in_t1: int
    notes: tuple[str, ...] = field(default=())


def mean_session_bytes(workload: Workload, capacity: Capacity) -> float:
    """Session KV averaged over the context distribution."""
    return sum(share * capacity.session_bytes[ctx] for ctx, share in workload.contexts.items())


def advise(workload: Workload, capacity: Capacity) -> Advice:
    """Apply the article's criteria; see the module docstring for the rules."""
    mean_bytes = mean_session_bytes(workload, capacity)
    working = int(workload.sessions * mean_bytes)
    peak = int(working * workload.peak_to_mean)
    t1_cluster = capacity.t1_pressure_bytes_per_node * capacity.nodes
    # T2 in the units of the working set (HBM bytes): times the copies it saves
    t2_cluster = capacity.t2_bytes_per_node * capacity.nodes * capacity.t2_divisor
    nodes_for_peak = -(-peak // capacity.t1_pressure_bytes_per_node)

    criteria = (
        Criterion(
            "working set exceeds HBM",
            working > t1_cluster,
            format_bytes(working),
            f"HBM at the 85% line: {format_bytes(t1_cluster)}",
            "mean concurrency x mean session KV against every node's T1",
            working,
            t1_cluster,
            "bytes",
        ),
        Criterion(
            "shared prefixes",
            workload.shared_prefix > SHARED_PREFIX_THRESHOLD,
            f"{workload.shared_prefix:.0%}",
            f"> {SHARED_PREFIX_THRESHOLD:.0%}",
            "a prefix computed once on T3 is read by every node",
            workload.shared_prefix,
            SHARED_PREFIX_THRESHOLD,
            "fraction",
        ),
        Criterion(
            "long idle time",
            workload.mean_idle_s > IDLE_THRESHOLD_S,
            f"{workload.mean_idle_s:,.0f} s",
            f"> {IDLE_THRESHOLD_S:.0f} s",
            "idle sessions are demoted off the node and come back later",
            workload.mean_idle_s,
            IDLE_THRESHOLD_S,
            "seconds",
        ),
        Criterion(
            "GPUs added to hold KV",
            workload.gpus_added_for_kv,
            f"{'yes' if workload.gpus_added_for_kv else 'no'} ({plural(nodes_for_peak, 'node')}"
            f" would hold the peak in HBM; {capacity.nodes:,} run)",
            "yes",
            "nodes bought for memory, not for decode throughput (your call)",
            workload.gpus_added_for_kv,
            True,
        ),
        Criterion(
            "bursty concurrency",
            workload.peak_to_mean > PEAK_TO_MEAN_THRESHOLD,
            f"{workload.peak_to_mean:g}x",
            f"> {PEAK_TO_MEAN_THRESHOLD:g}x",
            "peaks spill to a shared tier instead of sizing HBM for them",
            workload.peak_to_mean,
            PEAK_TO_MEAN_THRESHOLD,
            "ratio",
        ),
        Criterion(
            DISAGGREGATED,
            workload.disaggregated,
            "yes" if workload.disaggregated else "no",
            "yes",
            "the decode node must read KV another node wrote",
            workload.disaggregated,
            True,
        ),
    )
    met = sum(c.met for c in criteria)
    reasons: list[str] = []
    tiers = ["T1"]
    use_t2 = (
        capacity.t2_bytes_per_node * capacity.t2_divisor >= capacity.hbm_kv_space_bytes_per_node
    )
    fits_t1 = peak <= t1_cluster
    fits_t1_t2 = peak <= t1_cluster + (t2_cluster if use_t2 else 0)
    if not fits_t1 and use_t2:
        tiers.append("T2")
        reasons.append("T2: the peak working set does not fit the cluster's HBM")
    elif not fits_t1:
        reasons.append(
            "T2 skipped: a node's usable DRAM is smaller than its HBM KV space; go T1 -> T3"
        )
    held = [c.name for c in criteria if c.met]
    if workload.disaggregated:
        tiers.append("T3")
        reasons.append(
            "T3: required, prefill and decode are disaggregated: the decode node reads KV that"
            " another node wrote, so it must be in a shared tier"
            + (f" (also: {', '.join(h for h in held if h != DISAGGREGATED)})" if met > 1 else "")
            + ("" if fits_t1_t2 else "; the peak working set exceeds T1 + T2")
        )
    elif held or not fits_t1_t2:
        tiers.append("T3")
        why = (
            f"{plural(met, 'criterion', 'criteria')} of the article's 6"
            f" {'holds' if met == 1 else 'hold'}"
            f" ({', '.join(held)}), and any one makes a shared tier worth it"
            if held
            else ""
        )
        if not fits_t1_t2:
            why = (why + "; " if why else "") + "the peak working set exceeds T1 + T2"
        reasons.append(f"T3: {why}")
    else:
        reasons.append("T3 not needed: none of the article's 6 criteria holds")
    if "T3" in tiers and (workload.mean_idle_s >= EXPORT_IDLE_S or workload.durable_sessions):
        tiers.append("T4")
        reasons.append(
            "T4: sessions idle 10 minutes or more, or must be durable: export them to S3"
        )
    if len(tiers) == 1:
        reasons.append("T1 only: the peak working set fits HBM and no criterion holds")

    if workload.disaggregated:
        posture, why = "eager", "prefill and decode are disaggregated, so eager is required"
    elif workload.survive_node_failure:
        posture, why = "eager", "KV must survive a node failure"
    elif "T3" in tiers and workload.shared_prefix > SHARED_PREFIX_THRESHOLD:
        posture, why = "eager", "shared prefixes are worth writing to T3 once for the cluster"
    else:
        posture, why = "lazy", "nothing needs KV off the node at once; lazy saves the second write"
    reasons.append(f"posture {posture}: {why}")
    return Advice(
        tiers=tuple(tiers),
        posture=posture,
        criteria=criteria,
        reasons=tuple(reasons),
        working_set_bytes=working,
        peak_working_set_bytes=peak,
        nodes_for_peak_in_t1=nodes_for_peak,
    )


@dataclass(frozen=True)
class AdviceResult:
    """The advice with what it was computed from, for rendering."""

    workload: Workload
    model: str
    node: str
    serving: Serving
    advice: Advice
    session_bytes: dict[int, int]
    placed: WorkloadPlan | None = None  # the workload at peak on the cluster (for --cost)
    hardware: Hardware | None = None
    # the FSx for what stays on T3 at peak (the hot share where idle sessions are released),
    # sized as kvtool plan sizes it (``workload_t3``), and why
    file_system: FileSystem | None = None
    t3_size: T3Size | None = None


def capacity_of(planned: WorkloadPlan, nodes: int, *, t2_divisor: int = 1) -> Capacity:
    """The criteria's view of a placed workload: one session at each context, and the tiers'
    capacities per node as placement computed them (``t2_divisor``: the offload stack's
    copies, as placement counted them)."""
    tiers = planned.tiers
    return Capacity(
        session_bytes=planned.session_bytes,
        nodes=nodes,
        t1_pressure_bytes_per_node=tiers.pressure_bytes_per_node,
        t2_bytes_per_node=(tiers.tiers[1].capacity_bytes or 0) // nodes,
        hbm_kv_space_bytes_per_node=tiers.kv_space_bytes_per_node,
        t2_divisor=t2_divisor,
    )


def advise_workload(
    workload: Workload, shape: KvShape, hardware: Hardware, *,
    assumptions: ReloadAssumptions | None = None, idle_from: str = "the workload's mean_idle",
) -> AdviceResult:  # fmt: skip
    """Serve, price and place the workload as ``kvtool plan`` and ``kvtool check``
    do (``plan_workload``: idle sessions released to S3 by the workload's mean idle time,
    given in ``idle_from``, or ``--set mean_idle`` in ``assumptions``), then apply the
    criteria. The FSx is the one ``kvtool plan`` sizes for what stays on T3 at peak
    (``workload_t3``): the larger of holding it and restoring from it in time.

    Raises InputError when the weights (or one session) leave no room for KV on the node.
    """
    planned = plan_workload(shape, workload, hardware, assumptions=assumptions,
                            idle_from=idle_from)  # fmt: skip
    serving = planned.serving
    divisor = offload_divisors(LAYOUTS[shape.rules.offload_stack], is_mla=shape.spec.is_mla,
                               tp=serving.kv_tp, pp=serving.pp,
                               hosts=engine_hosts(serving, hardware.node))["T2"]  # fmt: skip
    advice = advise(workload, capacity_of(planned, workload.nodes, t2_divisor=divisor))
    t3 = None
    if planned.tiers.t3_bytes_needed and "T3" in advice.tiers:
        t3 = workload_t3(shape, planned, hardware, assumptions)
    return AdviceResult(
        workload=workload,
        model=shape.spec.name,
        node=hardware.node.name,
        serving=planned.serving,
        advice=advice,
        session_bytes=planned.session_bytes,
        placed=planned,
        hardware=hardware,
        file_system=None if t3 is None else t3.file_system,
        t3_size=t3,
    )


def workload_t3(
    shape: KvShape,
    planned: WorkloadPlan,
    hardware: Hardware,
    assumptions: ReloadAssumptions | None = None,
) -> T3Size:
    """The FSx for what stays on T3 at the workload's peak, sized by ``kvtool plan``'s rule
    (``t3_size.plan_t3``, the same read paths and goal: the larger of holding those bytes and
    restoring the concurrent sessions from it faster than recomputing them from the AWS
    article's 50K tokens, or ``--set reload_from``); ``hardware`` with no FSx size to size
    one, with one to judge it. ``kvtool advise`` and ``kvtool check`` name this size."""
    serving, node = planned.serving, hardware.node
    stack = LAYOUTS[shape.rules.offload_stack]  # plan_workload's (and plan's) default stack
    divisors = offload_divisors(stack, is_mla=shape.spec.is_mla, tp=serving.kv_tp, pp=serving.pp,
                                hosts=engine_hosts(serving, node))  # fmt: skip
    a = plan_assumptions(assumptions, serving, node)
    compute = node_compute(node, weights_bytes_per_instance=serving.weights_bytes_per_instance,
                           tp=serving.tp, a=a)  # fmt: skip
    paths_at = read_paths(hardware, a, divisors=divisors, objects=planned.t4_objects_per_chunk,
                          scheme=key_scheme(stack.name)[0], engines=serving.instances)  # fmt: skip
    return plan_t3(shape.spec, count_params(shape.spec), compute, hardware,
                   planned.tiers.t3_bytes_needed, paths_at, planned.bytes_at, a,
                   max(planned.sizes))  # fmt: skip

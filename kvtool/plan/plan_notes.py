"""The notes a deployment plan prints about its T3 and offload tiers. Pure.

``plan_deployment`` (``plan/deployment.py``) adds them: how the T3 file system was chosen and
what bounds its reads, what the offload stack changes (single MLA copies, a private file tier,
a GDS buffer), and a warning when S3 reads back faster than the T3 the plan uses.
"""

from __future__ import annotations

from kvtool.plan.cluster import Hardware
from kvtool.plan.fsx import smallest_size_at_least
from kvtool.plan.offload import OffloadLayout
from kvtool.plan.reload import TierPath, t3_client_gbps
from kvtool.plan.requests import RestoreTerms
from kvtool.plan.serving import Serving
from kvtool.plan.t3_size import FOR_CAPACITY, FOR_THROUGHPUT, T3Size


def s3_out_reads(
    crossovers: dict[str, int | None], t3: T3Size, paths: list[TierPath], nodes: int,
    t4_restore: RestoreTerms | None = None,
) -> list[str]:  # fmt: skip
    """A warning when reloading from S3 beats recompute from a shorter context than T3 does
    (only then), with the FSx capacity whose share per node reads as fast as S3 restores at
    the plan's context (``t4_restore``: its bytes over its time, requests included)."""
    t3_from, t4_from = crossovers.get("T3"), crossovers.get("T4")
    if t4_from is None or (t3_from is not None and t3_from <= t4_from):
        return []
    fs = t3.file_system
    s3 = next(p.node_bytes_per_s for p in paths if p.tier == "T4")
    if t4_restore is not None and t4_restore.total_s > 0:
        s3 *= t4_restore.transfer_s / t4_restore.total_s  # what S3 delivers, requests and all
    gib = smallest_size_at_least(fs.profile, s3 * nodes / (fs.throughput_mbps_per_tib * 1e6) * 1024,
                                 fs.throughput_mbps_per_tib, efa=fs.efa)  # fmt: skip
    return [
        f"S3 out-reads this T3: reload from T4 wins from {t4_from:,} tokens, from T3"
        f" {'never' if t3_from is None else f'from {t3_from:,} tokens'} ({fs.capacity_gib:,}"
        f" GiB, {t3.source}); --fsx-capacity {gib:,} GiB would give each node the"
        f" {s3 / 1e9:,.2f} GB/s S3 restores at"
    ]


def t3_notes(hardware: Hardware, t3: T3Size, share: float) -> list[str]:
    """How the T3 file system was chosen, and whether the file system or the links bound it."""
    notes = []
    fs = t3.file_system
    kind = "EFA-enabled " if fs.efa else ""
    reads = (
        f"{fs.capacity_gib:,} GiB at {fs.throughput_mbps_per_tib:,} MB/s/TiB ="
        f" {fs.read_bytes_per_s / 1e9:,.1f} GB/s of reads"
    )
    if t3.source == FOR_CAPACITY and t3.goal_met:
        notes.append(
            f"no --fsx-capacity: T3 sized by kvtool, the smallest {kind}{fs.profile.name} that"
            f" holds what spills there, {reads}, which already reaches its goal: {t3.goal}"
        )
    elif t3.source == FOR_CAPACITY:
        notes.append(
            f"no --fsx-capacity: T3 sized by kvtool for capacity only, {kind}{fs.profile.name}"
            f" {reads}: no file system reaches {t3.goal}, because the client links cap that"
            f" restore at {t3.restore_s:,.2f} s against {t3.deadline_s:,.2f} s; more throughput"
            " would not buy it"
            + ("" if "restore_slo" in t3.goal else " (recomputing is the faster path there)")
        )
    elif t3.source == FOR_THROUGHPUT:
        holds = f"{t3.capacity_gib:,} GiB would hold what spills there; "
        notes.append(
            f"no --fsx-capacity: T3 sized by kvtool for throughput, {kind}{fs.profile.name}"
            f" {reads} ({holds}this one is sized for: {t3.goal})"
        )
    elif not t3.goal_met:
        notes.append(
            f"--fsx-capacity {fs.capacity_gib:,} GiB as given ({reads}) falls short of"
            f" {t3.goal}: that restore takes {t3.restore_s:,.2f} s against {t3.deadline_s:,.2f} s"
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


def offload_notes(
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

"""The notes a deployment plan prints about its T3 and offload tiers. Pure.

``plan_deployment`` (``plan/deployment.py``) adds them: how the T3 file system was chosen and
what bounds its reads, what the offload stack changes (single MLA copies, a private file tier,
a GDS buffer), a warning when S3 reads back faster than the T3 the plan uses, and where the
engine gives up its engine-direct S3 lookup before it ends.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kvtool.plan.cluster import Hardware
from kvtool.plan.folder_rules import FILES_PER_FOLDER
from kvtool.plan.fsx import smallest_size_at_least
from kvtool.plan.metadata import folder_layout, folders_needed, provisionable
from kvtool.plan.offload import OffloadLayout
from kvtool.plan.reload import ReloadAssumptions, TierPath, t3_client_gbps
from kvtool.plan.requests import KeyScheme, RestoreTerms, lookup_limit_chunks, times_out
from kvtool.plan.serving import Serving
from kvtool.plan.t3_size import FOR_CAPACITY, FOR_THROUGHPUT, T3Size


def s3_out_reads(
    crossovers: dict[str, int | None], t3: T3Size, paths: list[TierPath], nodes: int,
    t4_restore: RestoreTerms | None = None, chunk_tokens: int = 256,
) -> list[str]:  # fmt: skip
    """A warning when reloading from S3 beats recompute from a shorter context than T3 does
    (only then), with the FSx capacity whose share per node reads as fast as S3 restores at
    the plan's context (``t4_restore``: its bytes over its time, requests included); none
    where the engine gives the lookup up at the plan's context (S3 restores nothing there).
    Where the lookup timeout bounds T4's win, the note says up to which context."""
    t3_from, t4_from = crossovers.get("T3"), crossovers.get("T4")
    if t4_from is None or (t3_from is not None and t3_from <= t4_from):
        return []
    if t4_restore is not None and t4_restore.lookup_times_out:
        return []
    t4 = next(p for p in paths if p.tier == "T4")
    limit = t4.lookup_limit_tokens(chunk_tokens)
    until = (
        f" to {limit:,} tokens (its lookup times out past them)"
        if limit is not None and limit < 10_000_000
        else " tokens"
    )
    fs = t3.file_system
    s3 = t4.node_bytes_per_s
    if t4_restore is not None and t4_restore.total_s > 0:
        s3 *= t4_restore.transfer_s / t4_restore.total_s  # what S3 delivers, requests and all
    gib = smallest_size_at_least(fs.profile, s3 * nodes / (fs.throughput_mbps_per_tib * 1e6) * 1024,
                                 fs.throughput_mbps_per_tib, efa=fs.efa)  # fmt: skip
    return [
        f"S3 out-reads this T3: reload from T4 wins from {t4_from:,}{until}, from T3"
        f" {'never' if t3_from is None else f'from {t3_from:,} tokens'} ({fs.capacity_gib:,}"
        f" GiB, {t3.source}); --fsx-capacity {gib:,} GiB would give each node the"
        f" {s3 / 1e9:,.2f} GB/s S3 restores at"
    ]


def lookup_timeout_notes(
    paths: list[TierPath], restores: dict[str, RestoreTerms], scheme: KeyScheme,
    a: ReloadAssumptions,
) -> list[str]:  # fmt: skip
    """Where one session's engine-direct S3 lookup at the plan's context outlasts the engine's
    lookup timeout (LMCache's ``lookup_timeout_ms``): nothing is restored from S3 that way,
    the engine recomputes. Says from which context, the setting and its source, and how the
    AWS article's T4 (released files read back through FSx, a stat a chunk) fares. The same
    for every context past the limit (the restore at each context says what lets it through)."""
    notes = _t3_lookup_timeout(paths, restores, scheme, a)
    path = next((p for p in paths if p.tier == "T4"), None)
    terms = restores.get("T4")
    if path is None or terms is None or not terms.lookup_times_out:
        return notes
    r = path.requests
    limit = path.lookup_limit_tokens(a.chunk_tokens) or 0
    timeout = r.lookup_timeout_s
    ms = f"{timeout * 1e3:,.0f}"
    setting = (
        f"{ms} by --set lookup_timeout, 3,000 by default in {scheme.timeout_source}"
        if a.lookup_timeout_s is not None
        else f"{ms} by default in {scheme.timeout_source}"
    )
    note = (
        f"T4 engine-direct restores no session past {limit:,} tokens: its lookup (a"
        f" {r.lookup_s_per_chunk * 1e3:,.0f} ms HEAD a chunk, in turn) outlasts"
        f" lookup_timeout_ms, {setting}, so {scheme.timeout_effect}"
    )
    fsx = next((p for p in paths if p.tier == "T3"), None)
    if fsx is not None and fsx.requests.lookup_s_per_chunk > 0:
        each = fsx.requests.lookup_s_per_chunk
        chunks = lookup_limit_chunks(replace(fsx.requests, lookup_timeout_s=timeout)) or 0
        note += (
            f"; the AWS article's T4 through FSx ({each * 1e6:,.0f} us a chunk) holds to"
            f" {chunks * a.chunk_tokens:,} tokens"
        )
    return [note, *notes]


def _t3_lookup_timeout(
    paths: list[TierPath], restores: dict[str, RestoreTerms], scheme: KeyScheme,
    a: ReloadAssumptions,
) -> list[str]:  # fmt: skip
    """Where one session's T3 lookup at the plan's context (a stat a chunk, in turn) outlasts
    LMCache's lookup timeout: its fs and GDS backends answer through the same lookup client
    (abstract_backend.py:272-293), so past it LMCache finds no hits and the engine recomputes.
    kvtool's T3 times there assume the timeout raised: said, with the value that lets it
    through. Only for stacks planned on LMCache's lookup (``scheme.lookup_timeout_s``)."""
    fsx = next((p for p in paths if p.tier == "T3"), None)
    terms = restores.get("T3")
    timeout = a.lookup_timeout_s if a.lookup_timeout_s is not None else scheme.lookup_timeout_s
    if (
        fsx is None
        or terms is None
        or timeout == math.inf
        or fsx.requests.lookup_s_per_chunk <= 0
        or not times_out(terms.lookup_session_s, timeout)
    ):
        return []
    each = fsx.requests.lookup_s_per_chunk
    chunks = lookup_limit_chunks(replace(fsx.requests, lookup_timeout_s=timeout)) or 0
    limit = chunks * a.chunk_tokens
    need_ms = math.ceil(terms.lookup_session_s * 1e3)
    return [
        f"LMCache's T3 (its fs or GDS backend) restores no session past {limit:,} tokens: a"
        f" session's lookup here ({each * 1e6:,.0f} us a chunk, in turn:"
        f" {terms.lookup_session_s:,.2f} s) outlasts lookup_timeout_ms ({timeout * 1e3:,.0f},"
        f" {scheme.timeout_source}), so {scheme.timeout_effect}; the T3 reload times here"
        f" assume lookup_timeout_ms {need_ms:,} or more in LMCache's config (vLLM's own fs"
        " offload and SGLang's file tier have no such timeout)"
    ]


def metadata_notes(t3: T3Size) -> list[str]:
    """What the goal's restore asks of the file system's Metadata IOPS, when that decides the
    file system's metadata configuration (``plan/metadata.py``): provisioned beyond what
    AUTOMATIC gives, given and short of it, or out of any setting's reach."""
    md, fs = t3.metadata, t3.file_system
    if not md.modelled:
        return [
            f"T3 metadata not modelled: {fs.profile.name} has no Metadata IOPS configuration"
            " (PERSISTENT_2 only), so a restore's opens and closes are not held to a rate"
        ]
    if md.goal_met and md.mode in ("AUTOMATIC", "given"):
        return []
    files = f"{t3.goal_files:,} files a node, an open and a close each"
    said = (
        f"metadata-bound: the restore T3 is sized for ({files}) needs {md.need_iops:,.0f}"
        " Metadata IOPS"
        if md.need_iops < float("inf")
        else f"metadata-bound: the restore T3 is sized for ({files}) cannot finish in time:"
        " its lookup alone outlasts the deadline"
    )
    if md.mode == "USER_PROVISIONED" and md.goal_met:
        return [
            f"{said}; AUTOMATIC gives {md.automatic_iops:,} at {fs.capacity_gib:,} GiB:"
            f" provision {md.iops:,} (USER_PROVISIONED; --set metadata_iops chooses another)"
        ]
    reach = provisionable(fs.profile, md.need_iops) if md.need_iops < float("inf") else None
    fix = (
        f"; --set metadata_iops={reach} (USER_PROVISIONED) reaches it"
        if reach
        else "; no Metadata IOPS setting reaches it"
    )
    if md.mode == "given":
        return [f"{said}; --set metadata_iops gives {md.iops:,}: short of it{fix}"]
    if md.mode == "AUTOMATIC":
        return [f"{said}; AUTOMATIC gives {md.iops:,} at {fs.capacity_gib:,} GiB: short of it{fix}"]
    return [
        f"{said}; FSx provisions at most {md.iops:,}: no Metadata IOPS setting reaches it"
        " (fewer files reach it: a larger --set chunk_tokens, or fewer workers a chunk)"
    ]


def folder_notes(
    stack: str, *, gds: bool, files: int, sessions: int, per_session: int
) -> list[str]:
    """A note when the T3 folder would hold more files in one directory than the ~100K AWS
    advises for PERSISTENT_2 (FSx performance tips), with the engine's own way to spread
    them (``plan/metadata.py``'s layouts)."""
    layout = folder_layout(stack, gds=gds)
    if layout is None or not files:
        return []
    per_folder = -(-files // layout.folders)
    if per_folder <= FILES_PER_FOLDER:
        return []
    spread = f"; {folders_needed(files):,} folders would hold them: {layout.spread}"
    return [
        f"T3 holds {files:,} files ({sessions:,} sessions x {per_session:,} files each):"
        f" {layout.how} ({layout.source}), {per_folder:,} in a folder, past the ~100K files"
        f" per directory AWS advises for FSx for Lustre PERSISTENT_2 (performance tips){spread}"
    ]


def t3_notes(hardware: Hardware, t3: T3Size, share: float) -> list[str]:
    """How the T3 file system was chosen, and whether the file system or the links bound it."""
    notes = metadata_notes(t3)
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

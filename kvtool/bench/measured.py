"""Which measurements stand in for a tier's spec in a plan (``kvtool plan --bench``). Pure.

* T3: the best ``seq_read`` or ``rand_read`` that ran; a fio client/server run over N nodes is
  their aggregate, so one node's figure is the aggregate over N. Of the GPUDirect Storage
  rows only the node's aggregate (``gds``) whose nvidia-fs verdict says the bytes went direct
  counts: a compat-mode read went through host memory (and, re-read, the page cache), and a
  ``gds-gpu`` row is one GPU's share, not the node's.
* T2: pinned host-to-device copies on all GPUs at once (their sum), at the KV chunk's size where
  one was measured: copies on every chip at once share PCIe switches (and a GB200's C2C link
  serves two GPUs), so one GPU's figure times the chips overstates the node. A node with more
  chips than were measured is scaled (an estimate, said so). Files from older kvtool, with one
  GPU at a time only, give their mean times the chips, marked an estimate. A host-only copy is
  not the link and is never used.
* T4: the S3 ``get`` figure, at the concurrency it ran with.
* T3 from ``kvtool capacity --json``: the read rate of the level whose restores read fastest
  (each restore reads a session's real chunk files to the last byte, several at once, while the
  other sessions restore and write their turns, and with ``--hosts`` while other nodes load the
  same file system). The first-byte latency stays the spec's: a restore's time includes its
  transfer, and capacity measures no read alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from kvtool.bench.result import BenchResult
from kvtool.plan.measured import MeasuredTier


def _block(result: BenchResult) -> str:
    return f"{result.block_bytes / 2**20:,.2f} MiB"


def _stands_for_t3(result: BenchResult) -> bool:
    """A POSIX read (any variant not starting ``gds``: plain fio, the GDS read's baseline),
    or the node's GDS aggregate whose verdict is direct. The note is checked too: a ``gds``
    row from a file written before compat rows had their own variant says "compat mode"."""
    if not result.variant.startswith("gds"):
        return True
    return result.variant == "gds" and "; direct (GPUDirect)" in result.note


def first_byte(rows: Sequence[BenchResult]) -> tuple[float | None, str]:
    """The first-byte latency the rows imply, and how: of those with latencies, the smallest
    block's median completion latency less its transfer at the per-thread rate (fio's
    latency includes moving the block; each thread has one request in flight). None when no
    row measured one, or the transfer accounts for all of it. Reads made one at a time
    (``qd1``, 4 KiB in every ``bench --tier t3``) are the latency itself: the smallest one's
    median is taken as it is."""
    single = [r for r in rows if r.variant == "qd1" and r.latency_us is not None]
    if single:
        row = min(single, key=lambda r: r.block_bytes)
        assert row.latency_us is not None
        return row.latency_us.p50 * 1e-6, (
            f"{row.tool} {row.op} one at a time, median at {row.block_bytes // 1024:,} KiB"
        )
    timed = [r for r in rows if r.latency_us is not None and r.bytes_per_s]
    if not timed:
        return None, ""
    row = min(timed, key=lambda r: (r.block_bytes, -(r.bytes_per_s or 0)))
    assert row.latency_us is not None
    median = row.latency_us.p50 * 1e-6
    per_thread = (row.bytes_per_s or 0) / max(row.threads * max(row.clients, 1), 1)
    first = median - row.block_bytes / per_thread
    if first <= 0:
        return None, ""
    return first, (
        f"{row.tool} {row.op} median {median * 1e3:,.3g} ms at {_block(row)} less its transfer"
        f" at {per_thread / 1e9:,.2f} GB/s a thread"
    )


def measured_tiers(results: Sequence[BenchResult], *, chips: int) -> tuple[MeasuredTier, ...]:
    """The measured T2, T3 and T4 read bandwidths of one node, each with its source."""
    ok = [r for r in results if r.status == "ok" and r.bytes_per_s]
    out = []
    t3 = [
        r for r in ok if r.tier == "t3" and r.op in ("seq_read", "rand_read") and _stands_for_t3(r)
    ]
    if t3:
        best = max(t3, key=lambda r: (r.bytes_per_s or 0) / max(r.clients, 1))
        per_node = (best.bytes_per_s or 0) / max(best.clients, 1)
        clients = ""
        if best.clients > 1:
            clients = f", {best.clients} nodes' aggregate / {best.clients}"
        direct = "O_DIRECT" if best.direct else "buffered"
        if best.filesystem and best.filesystem != "lustre":
            direct += f", on {best.filesystem}, not Lustre"
        latency, how = first_byte(t3)
        out.append(
            MeasuredTier(
                "T3",
                per_node,
                f"kvtool bench: {best.tool} {best.op}{' (GDS)' if best.variant == 'gds' else ''},"
                f" {_block(best)} blocks, {best.threads}"
                f" threads, {direct}{clients}",
                latency,
                how,
            )
        )
    t2 = [r for r in ok if r.tier == "t2" and r.op == "h2d" and r.variant == "pinned"]
    if t2:
        out.append(_t2(t2, chips))
    t4 = [r for r in ok if r.tier == "t4" and r.op == "get"]
    if t4:
        best = max(t4, key=lambda r: r.bytes_per_s or 0)
        latency, how = first_byte(t4)
        out.append(
            MeasuredTier(
                "T4",
                best.bytes_per_s or 0,
                f"kvtool bench: {best.tool} GET, {_block(best)} objects, {best.threads}"
                " connections",
                latency,
                how,
            )
        )
    return tuple(out)


def _t2(rows: Sequence[BenchResult], chips: int) -> MeasuredTier:
    """The node's host-to-GPU bandwidth from pinned h2d rows (the module docstring)."""
    sums = [r for r in rows if r.gpu is None and r.gpus > 0]
    if not sums:
        alone = [r for r in rows if r.gpu is not None]
        if alone and len({r.gpu.device for r in alone if r.gpu is not None}) == 1:
            sums = alone  # one GPU: all at once is that GPU alone
    if sums:
        block = min(r.block_bytes for r in sums)  # the KV chunk, where one was measured
        best = max((r for r in sums if r.block_bytes == block), key=lambda r: r.gpus)
        gpus = max(best.gpus, 1)
        figure = (best.bytes_per_s or 0) * chips / gpus
        at_once = f"on {gpus} GPU(s) at once" if gpus > 1 else "on 1 GPU"
        source = (
            f"kvtool bench: pinned h2d {at_once}, {(best.bytes_per_s or 0) / 1e9:,.1f} GB/s,"
            f" {_block(best)} copies"
        )
        if gpus != chips:
            source += f" x {chips} chips / {gpus} (an estimate: {gpus} of {chips} chips measured)"
        return MeasuredTier("T2", figure, source)
    mean = sum(r.bytes_per_s or 0 for r in rows) / len(rows)
    return MeasuredTier(
        "T2",
        mean * chips,
        f"kvtool bench: pinned h2d {mean / 1e9:,.1f} GB/s mean over {len(rows)} GPU(s)"
        f" x {chips} chips (estimate: measured one GPU at a time)",
    )


def capacity_t3(report: Mapping[str, Any]) -> MeasuredTier:
    """T3 from a ``kvtool capacity --json`` report (the module docstring); ValueError naming
    what is missing or malformed."""
    capacity, workload = report.get("capacity"), report.get("workload")
    if not isinstance(capacity, Mapping) or not isinstance(workload, Mapping):
        raise ValueError("it has no capacity and workload objects")
    levels = capacity.get("levels")
    if not isinstance(levels, list):
        raise ValueError("capacity.levels is not a list")
    ran = []
    for index, level in enumerate(levels):
        rate, sessions = (level.get(k) if isinstance(level, Mapping) else None
                          for k in ("bytes_per_s", "sessions"))  # fmt: skip
        if not _number(rate) or not _number(sessions):
            raise ValueError(f"capacity.levels[{index}] has no bytes_per_s and sessions numbers")
        if rate > 0 and level.get("restores", 0):
            ran.append(level)
    if not ran:
        raise ValueError("no level restored anything")
    best = max(ran, key=lambda level: level["bytes_per_s"])
    chunk, parallel = workload.get("file_bytes"), workload.get("restore_parallel")
    fleet = workload.get("fleet_nodes") or 0
    if not _number(chunk) or not _number(parallel) or not _number(fleet):
        raise ValueError("workload has no file_bytes and restore_parallel numbers")
    p95 = best.get("restore_p95_s")
    source = (
        f"kvtool capacity: {best['sessions']:,} sessions restoring at once, {parallel:,} chunk"
        f" files of {chunk / 2**20:,.2f} MiB at a time each,"
        f" {'O_DIRECT' if workload.get('direct', True) else 'buffered'}"
        + (f", while {fleet:,} more node(s) loaded T3 alike" if fleet else "")
        + (f"; p95 restore {p95 * 1e3:,.0f} ms" if _number(p95) else "")
    )
    return MeasuredTier("T3", float(best["bytes_per_s"]), source)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0

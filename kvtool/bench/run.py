"""Run the requested tiers, and put each measurement beside its spec: what the hardware and
storage profiles promise for the same path, the ratio, and what bounds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kvtool.bench.result import BenchResult, skipped
from kvtool.bench.s3 import run_t4
from kvtool.bench.t3 import T3Options, not_lustre, run_t3
from kvtool.plan.reload import t3_client_gbps
from kvtool.probe.host import Host
from kvtool.profiles.hardware import NodeProfile, StorageProfile

PATH_NAMES = {"ena": "TCP (ENA)", "efa": "EFA", "efa_gds": "EFA with GDS"}


def with_spec(
    result: BenchResult,
    *,
    node: NodeProfile | None,
    t3: StorageProfile | None,
    t4: StorageProfile | None,
    t3_path: str = "efa",
) -> BenchResult:
    """The result with ``spec_bytes_per_s`` and ``limit`` filled from the profiles (or a limit
    that says which profile to pass)."""
    if result.status != "ok":
        return result
    if result.tier == "t2" and result.op in ("h2d", "d2h", "bidir"):
        return _link_spec(result, node)
    if result.tier == "t3" and result.filesystem and result.filesystem != "lustre":
        return result._replace(
            limit=f"the folder is on {result.filesystem}, not Lustre: no FSx spec applies"
        )
    if node is None:
        return result
    if result.tier == "t1":
        spec = node.hbm_tbytes_per_s_per_chip * 1e12
        return result._replace(
            spec_bytes_per_s=spec,
            limit=f"HBM peak {node.hbm_tbytes_per_s_per_chip:g} TB/s per chip, read+write",
        )
    if result.tier == "t2":
        return result._replace(limit="host-only: no accelerator link measured")
    if result.tier == "t3" and result.variant in ("gds-gpu", "gds-compat-gpu"):
        return result._replace(
            limit="one GPU's share of the node's GDS read: the node's client ceiling applies"
            " to the aggregate row (gds), and how it divides over GPUs depends on which NICs"
            " each GPU reaches"
        )
    if result.tier == "t3" and result.variant in ("qd1", "metadata") and t3 is not None:
        measured = result.latency_us.p50 if result.latency_us else None
        top = t3.latency_us_max or t3.latency_us
        verdict = "" if measured is None else (
            f"; p50 {measured:,.0f} us, {'within' if measured <= top else 'above'} it")  # fmt: skip
        return result._replace(limit=f"{t3.name}: 100-{top:,.0f} us a request (the AWS"
                               f" article's T3 latency){verdict}")  # fmt: skip
    if result.tier == "t3" and t3 is not None:
        path, gbps = t3_client_gbps(node, t3, "efa_gds" if result.variant == "gds" else t3_path)
        limit = f"{node.name} over {PATH_NAMES[path]}: {gbps:,.0f} Gbps client ceiling"
        if path == "ena":
            limit = (
                f"this node reaches FSx over TCP: {gbps:,.0f} Gbps ceiling, 5 Gbps per file server"
            )
        limit += "; the file system's own throughput (TiB x MB/s per TiB) may be lower"
        if result.variant == "gds-compat":
            limit += "; not direct (compat mode or unknown): the bytes crossed host memory"
        if result.threads and result.threads < 32:
            limit += f"; {result.threads} threads (AWS's samples use 32 per node)"
        return result._replace(spec_bytes_per_s=gbps * 1e9 / 8, limit=limit)
    if result.tier == "t4" and t4 is not None:
        ena = node.ena_gbps * 1e9 / 8
        requests = result.threads * t4.per_connection_mbytes_per_s * 1e6 or ena
        spec = min(ena, requests)
        limit = (
            f"{result.threads} connections x {t4.per_connection_mbytes_per_s:g} MB/s"
            if requests < ena
            else f"the node's ENA {node.ena_gbps:,.0f} Gbps"
        )
        return result._replace(spec_bytes_per_s=spec, limit=limit)
    return result


def bench_notes(results: list[BenchResult], options: BenchOptions) -> list[str]:
    """What the figures need said beside them: a T3 folder that is not on Lustre (bench
    measured that file system, not FSx)."""
    filesystems = {r.filesystem for r in results if r.tier == "t3" and r.filesystem}
    found = (not_lustre(options.t3_dir or "the T3 folder", fs) for fs in sorted(filesystems))
    return [note for note in found if note]


def _link_spec(result: BenchResult, node: NodeProfile | None) -> BenchResult:
    """A T2 copy beside its GPU's own PCIe link (per direction; a bidirectional row, both),
    else beside the node profile's host-to-chip figure; the sum over all GPUs at once beside
    the profile's figure for that many chips."""
    ways = 2 if result.op == "bidir" else 1
    profile = node.host_to_chip_gbytes_per_s if node is not None else 0.0
    both = " both ways" if ways == 2 else " per direction"
    if result.gpu is None and result.gpus <= 1:  # a row from an older kvtool: no GPU named
        if not profile:
            return result
        return result._replace(
            spec_bytes_per_s=profile * 1e9 * ways,
            limit=f"host-to-chip link {profile:g} GB/s{both} per chip (a profile estimate)",
        )
    if result.gpu is None:
        if not profile:
            return result._replace(limit="no --hardware: no per-chip link figure to add up")
        chips = max(result.gpus, 1)
        return result._replace(
            spec_bytes_per_s=profile * 1e9 * chips * ways,
            limit=f"{chips} x the profile's host-to-chip link {profile:g} GB/s{both}"
            " (an estimate: chips may share PCIe switches)",
        )
    link = result.gpu.link_max
    if link is None:
        if not profile:
            return result._replace(limit="no PCIe link in sysfs and no --hardware: no spec")
        return result._replace(
            spec_bytes_per_s=profile * 1e9 * ways,
            limit=f"host-to-chip link {profile:g} GB/s{both} (a profile estimate; sysfs shows"
            " no PCIe link for this GPU)",
        )
    limit = (
        f"GPU {result.gpu.device}'s PCIe {link}: {link.bytes_per_s * ways / 1e9:,.1f} GB/s{both}"
        " after line coding (packet overhead leaves about 85-90% of it reachable)"
    )
    if result.gpu.downtrained:
        limit += (
            f"; the link ran at {result.gpu.link_now} after the copies: downtrained"
            " (check the slot, riser or retimer) or idle"
        )
    return result._replace(spec_bytes_per_s=link.bytes_per_s * ways, limit=limit)


TIERS = ("t1", "t2", "t3", "t4")
T1_SIZES = (64 * 2**20, 2**30)  # T1 copies these besides a KV chunk
DEFAULT_T4_CONNECTIONS = 64  # LMCache's S3 examples: s3_num_io_threads 64


class BenchOptions(NamedTuple):
    """What ``kvtool bench`` measures, as parsed: the tiers, the transfer size (a KV chunk),
    the T3 folder and fio settings, the S3 prefix and its concurrency."""

    tiers: tuple[str, ...]
    block_bytes: int
    t3: T3Options
    t3_dir: str | None = None
    s3_url: str | None = None
    s3_connections: int = DEFAULT_T4_CONNECTIONS
    s3_bytes: int = 2**30
    gpu_block: int | None = None  # a KV chunk's size for T1 and T2, when --model or a size gave one


def run_bench(
    host: Host,
    options: BenchOptions,
    *,
    s3_client: Callable[[], Any],
    progress: Callable[[str], None] = lambda _: None,
    live: bool = False,
) -> list[BenchResult]:
    """Measure each requested tier in order; a tier that cannot run here is a SKIP result
    with its reason. Raises InputError for bad input (the folder, fio, the S3 endpoint)."""
    from kvtool.bench import gpu

    results: list[BenchResult] = []
    for tier in options.tiers:
        extra = () if options.gpu_block is None else (options.gpu_block,)
        if tier == "t1":
            results += gpu.run_t1(host, sizes=(*extra, *T1_SIZES), progress=progress)
        elif tier == "t2":
            results += gpu.run_t2(host, sizes=(*extra, gpu.T2_LARGE), progress=progress)
        elif tier == "t3":
            if options.t3_dir is None:
                results.append(skipped("t3", "seq_read", "no --t3-dir: name the T3 folder"))
                continue
            results += run_t3(host, options.t3_dir, options.t3, progress=progress, live=live)
        elif tier == "t4":
            if options.s3_url is None:
                results.append(skipped("t4", "get", "no --t4-url: name an S3 prefix to use"))
                continue
            objects = max(1, options.s3_bytes // options.block_bytes)
            results += run_t4(
                s3_client(),
                options.s3_url,
                object_bytes=options.block_bytes,
                objects=objects,
                concurrency=min(options.s3_connections, objects),
                progress=progress,
            )
    return results

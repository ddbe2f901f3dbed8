"""T3 reads straight into GPU memory with GPUDirect Storage, and whether they really went direct.

Two ways, in order: fio's ``libcufile`` engine when the installed fio has it (``fio --enghelp``;
Debian's and Amazon Linux's fio builds do not), else KvikIO (the RAPIDS cuFile binding, the
``gds`` extra) with torch's CUDA buffers. Either reads the files the fio write run laid out.

cuFile falls back to POSIX I/O through a bounce buffer ("compat mode") without an error when
nvidia-fs or the file system cannot do GDS, so the bandwidth alone says nothing: the nvidia-fs
read counters (``/proc/driver/nvidia-fs/stats``, ``readMiB``) before and after tell whether the
bytes went direct. ``direct_verdict`` is pure; the runs need a GPU and are imported lazily.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kvtool.bench.fio import (
    FioError,
    FioJob,
    job_file,
    json_document,
    parse_engines,
    result_from_fio,
)
from kvtool.bench.gpu import torch_or_none
from kvtool.bench.result import BenchResult, latency_of, skipped
from kvtool.probe.host import Host
from kvtool.probe.parse import NvfsStats, parse_nvidia_fs_stats

NVFS_STATS = "/proc/driver/nvidia-fs/stats"
GDS_SHARE_DIRECT = 0.9  # the doctor's rule: at least 90% of the bytes through nvidia-fs


def direct_verdict(before: NvfsStats | None, after: NvfsStats | None, read_bytes: int) -> str:
    """How the bytes reached the GPU, from the nvidia-fs counters around the read."""
    if before is None or after is None:
        return "unknown: /proc/driver/nvidia-fs/stats is missing (nvidia-fs not loaded?)"
    if not after.io_stats_enabled:
        return (
            "unknown: nvidia-fs IO stats are disabled"
            " (echo 1 > /sys/module/nvidia_fs/parameters/rw_stats_enabled)"
        )
    direct_mib = after.read_mib - before.read_mib
    share = direct_mib * 2**20 / max(read_bytes, 1)
    evidence = f"nvidia-fs readMiB +{direct_mib:,} of {read_bytes / 2**20:,.0f} MiB read"
    if direct_mib <= 0:
        return f"compat mode: no read went through nvidia-fs ({evidence})"
    if share < GDS_SHARE_DIRECT:
        return f"partly direct: {min(share, 1):.0%} through nvidia-fs ({evidence})"
    return f"direct (GPUDirect): {evidence}"


def gds_job(job: FioJob) -> FioJob:
    """The write run's files read back with fio's libcufile engine into GPU 0's memory."""
    return job._replace(
        ops=("seq_read",),
        ioengine="libcufile",
        direct=True,
        extra=("cuda_io=cufile", "gpu_dev_ids=0"),
    )


def run_gds_read(
    host: Host,
    job: FioJob,
    *,
    fio_engines: Callable[[], str],
    tool: str,
    progress: Callable[[str], None] = lambda _: None,
) -> BenchResult:
    """One GDS read of ``job``'s files, or a SKIP saying why none can run here.
    ``fio_engines`` returns ``fio --enghelp`` (asked only when nvidia-fs is loaded)."""
    if not job.direct:
        return _skip("--no-direct: GPUDirect Storage needs O_DIRECT")
    if host.read("nvidia_fs_stats", NVFS_STATS) is None:
        return _skip(
            f"nvidia-fs is not loaded ({NVFS_STATS} is missing): cuFile could only run in"
            " compat mode, through host memory"
        )
    if "libcufile" in parse_engines(fio_engines()):
        progress("T3 seq_read with GPUDirect Storage: fio libcufile")
        return _fio_gds(host, gds_job(job), tool=tool)
    kvikio, torch = _kvikio_and_torch()
    if kvikio is None:
        return _skip(
            "no GPUDirect Storage reader here: fio has no libcufile engine and KvikIO is not"
            " installed (pip install 'kvtool[gds]')"
        )
    if torch is None or not torch.cuda.is_available():
        return _skip("no CUDA device: GPUDirect Storage reads need a GPU")
    progress("T3 seq_read with GPUDirect Storage: KvikIO")
    return _kvikio_read(host, kvikio, torch, job)


def _skip(reason: str) -> BenchResult:
    return skipped("t3", "seq_read", reason)._replace(variant="gds")


def _nvfs(host: Host) -> NvfsStats | None:
    text = host.read("nvidia_fs_stats", NVFS_STATS)
    return parse_nvidia_fs_stats(text) if text else None


def _fio_gds(host: Host, job: FioJob, *, tool: str) -> BenchResult:
    job_path = Path(job.directory) / "kvtool-gds-read.fio"
    job_path.write_text(job_file(job))
    before = _nvfs(host)
    done = host.run(
        "fio_gds",
        ["fio", "--output-format=json", "--eta=never", str(job_path)],
        timeout_s=job.runtime_s * 2 + 60,
    )
    after = _nvfs(host)
    try:
        document = json_document(done.stdout)
        result = result_from_fio(document, job, "seq_read", tool=tool)
    except (ValueError, FioError) as exc:
        lines = (done.stderr or str(exc)).strip().splitlines()
        return _skip(f"fio libcufile failed: {lines[-1] if lines else exc}")
    read_bytes = sum(
        int((e.get("read") or {}).get("io_bytes", 0))
        for e in document.get("jobs") or []
        if isinstance(e, dict)
    )
    return result._replace(
        variant="gds",
        note=f"{result.note}, into GPU 0; {direct_verdict(before, after, read_bytes)}",
    )


def _kvikio_and_torch() -> tuple[Any, Any]:
    try:
        import kvikio
    except ImportError:
        return None, None
    return kvikio, torch_or_none()


def _kvikio_compat(kvikio: Any) -> str:
    """KvikIO's own compat mode (POSIX instead of cuFile), across its API versions."""
    defaults = kvikio.defaults
    try:
        value = defaults.get("compat_mode")
    except (AttributeError, TypeError, KeyError):
        value = defaults.compat_mode() if hasattr(defaults, "compat_mode") else "unknown"
    return str(value)


def _kvikio_read(host: Host, kvikio: Any, torch: Any, job: FioJob) -> BenchResult:
    files = gds_files(job.directory)
    if not files:
        return _skip("no files to read: the fio write run laid none out")
    buffer = torch.empty(job.block_bytes, dtype=torch.uint8, device="cuda:0")
    before = _nvfs(host)
    samples: list[float] = []
    moved = 0
    start = time.perf_counter()
    while time.perf_counter() - start < job.runtime_s:
        for path in files:
            with kvikio.CuFile(str(path), "r") as handle:
                for offset in range(0, job.file_bytes - job.block_bytes + 1, job.block_bytes):
                    began = time.perf_counter()
                    moved += handle.pread(buffer, job.block_bytes, offset).get()
                    samples.append(time.perf_counter() - began)
            if time.perf_counter() - start >= job.runtime_s:
                break
    wall = time.perf_counter() - start
    after = _nvfs(host)
    return BenchResult(
        tier="t3",
        op="seq_read",
        status="ok",
        tool=f"kvikio {getattr(kvikio, '__version__', '')}".strip(),
        block_bytes=job.block_bytes,
        threads=1,
        direct=True,
        variant="gds",
        bytes_per_s=moved / wall,
        iops=len(samples) / wall,
        latency_us=latency_of(samples) if samples else None,
        note=f"KvikIO pread into GPU 0, one request at a time, KvikIO compat_mode"
        f" {_kvikio_compat(kvikio)}; {direct_verdict(before, after, moved)}",
    )


def gds_files(directory: str) -> Sequence[Path]:
    """The fio data files in a scratch folder (what a GDS read reads)."""
    return sorted(p for p in Path(directory).glob("kvtool.*") if p.is_file())

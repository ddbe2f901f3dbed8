"""T3 reads straight into GPU memory with GPUDirect Storage, and whether they really went direct.

Two ways, in order: fio's ``libcufile`` engine when the installed fio has it (``fio --enghelp``;
Debian's and Amazon Linux's fio builds do not), else KvikIO (the RAPIDS cuFile binding, the
``gds`` extra) with torch's CUDA buffers. Either reads the files the fio write run laid out,
spread over every GPU of the node, and is preceded by the same read into host memory (the
POSIX baseline) so the two stand side by side.

The rows: the baseline (``posix-baseline``), the node's aggregate (``gds``) and one per GPU
(``gds-gpu``). cuFile falls back to POSIX I/O through a bounce buffer ("compat mode") without
an error when nvidia-fs or the file system cannot do GDS, so the bandwidth alone says nothing:
the nvidia-fs read counters (``/proc/driver/nvidia-fs/stats``, ``readMiB``) before and after
tell whether the bytes went direct, and every row that did not is ``gds-compat`` /
``gds-compat-gpu``, which ``measured.py`` never takes for T3. ``direct_verdict``,
``fio_shares`` and ``gds_rows`` are pure; the runs need a GPU and are imported lazily.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any, NamedTuple

from kvtool.bench.fio import (
    FioError,
    FioJob,
    job_file,
    json_document,
    parse_engines,
    result_from_fio,
    side_latency,
)
from kvtool.bench.gpu import gpu_place, torch_or_none
from kvtool.bench.result import BenchResult, GpuId, Latency, latency_of, skipped
from kvtool.probe.host import Host
from kvtool.probe.parse import NvfsStats, parse_nvidia_fs_stats

NVFS_STATS = "/proc/driver/nvidia-fs/stats"
GDS_SHARE_DIRECT = 0.9  # the doctor's rule: at least 90% of the bytes through nvidia-fs
SLOW_GPU_SHARE = 0.8  # a GPU whose bandwidth per job is under 0.8 of the median is named

VARIANT = "gds"  # the node's aggregate, the bytes went direct
COMPAT = "gds-compat"  # the node's aggregate, not (shown) direct: never T3's bandwidth
PER_GPU = "gds-gpu"  # one GPU's share of the node's read
PER_GPU_COMPAT = "gds-compat-gpu"
BASELINE = "posix-baseline"  # the same read into host memory, right before


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


def went_direct(verdict: str) -> bool:
    """Whether ``direct_verdict`` said the bytes went through nvidia-fs (not compat mode,
    not partly direct, not unknown)."""
    return verdict.startswith("direct")


def gds_job(job: FioJob, gpus: int) -> FioJob:
    """The write run's files read back with fio's libcufile engine, the jobs spread over GPUs
    ``0..gpus-1`` and run as threads, each job reported apart (no group reporting) so that
    each GPU's share can be summed.

    Threads: one process holds one CUDA context per GPU; fio's own example runs its libcufile
    jobs as threads because "cudaMalloc fails if too many processes attach to the GPU"
    (fio examples/libcufile-cufile.fio lines 21-22, fio-3.33)."""
    return job._replace(
        ops=("seq_read",),
        ioengine="libcufile",
        direct=True,
        thread=True,
        per_job=True,
        extra=("cuda_io=cufile", "gpu_dev_ids=" + ":".join(str(g) for g in range(gpus))),
    )


def baseline_job(job: FioJob) -> FioJob:
    """The GDS job with the POSIX engine into host memory instead: same files, jobs, threads,
    block size, queue depth and O_DIRECT, so the pair differs only in where the bytes land."""
    return gds_job(job, 1)._replace(ioengine=job.ioengine, extra=())


def subjob_numbers(count: int) -> list[int]:
    """fio's subjob number of each of a section's ``count`` per-job JSON entries, in order.

    fio reports jobs in the order it created them (stat.c, ``for_each_td``). The section's
    first job is subjob 0; its clones are made by ``while (--numjobs)`` with
    ``td_new->subjob_number = numjobs``, so counting down (fio-3.33 init.c lines 1812-1821):
    the order is 0, count-1, ..., 1, not 0, 1, ..., count-1. Recorded with fio-3.33 in
    tests/fixtures/fio/fio_json_local_seqread_numjobs8_thread_per_job.json, where job k reads
    a file of k+1 MiB named by ``$jobnum`` (= the subjob number, init.c line 1841)."""
    return [0, *range(count - 1, 0, -1)] if count > 0 else []


class GpuShare(NamedTuple):
    """One GPU's part of a GDS read: its jobs, the bytes they read, their summed bandwidth
    and IOPS, and the worst of their latency percentiles."""

    gpu: int
    jobs: int
    bytes_read: int
    bytes_per_s: float
    iops: float
    latency_us: Latency | None


def fio_shares(document: dict[str, Any], op: str, numjobs: int, gpus: int) -> list[GpuShare]:
    """Each GPU's share of a libcufile run from fio's per-job JSON (``per_job``: no group
    reporting), or [] when the entries cannot be matched to jobs (not ``numjobs`` of them).

    libcufile gives subjob ``s`` GPU ``s % n`` of ``gpu_dev_ids``' n entries
    (``gpu_idx = td->subjob_number % id_count``, fio-3.33 engines/libcufile.c line 136,
    ``fio_libcufile_find_gpu_id``, lines 121-157; the same in fio master's
    engines/gpuaccel.c line 43 after the gpuaccel refactor), so each entry's subjob number
    comes from its position (``subjob_numbers``) before the modulo."""
    entries = [
        e for e in document.get("jobs") or [] if isinstance(e, dict) and e.get("jobname") == op
    ]
    if len(entries) != numjobs or gpus < 1:
        return []
    grouped: dict[int, list[dict[str, Any]]] = {g: [] for g in range(gpus)}
    for subjob, entry in zip(subjob_numbers(len(entries)), entries, strict=True):
        side = entry.get("read")
        grouped[subjob % gpus].append(side if isinstance(side, dict) else {})
    shares = []
    for gpu, sides in grouped.items():
        latencies = [lat for s in sides if (lat := side_latency(s)) is not None]
        shares.append(
            GpuShare(
                gpu=gpu,
                jobs=len(sides),
                bytes_read=sum(int(s.get("io_bytes", 0)) for s in sides),
                bytes_per_s=float(sum(s.get("bw_bytes", 0) for s in sides)),
                iops=float(sum(s.get("iops", 0) for s in sides)),
                latency_us=_worst(latencies),
            )
        )
    return shares


def _worst(latencies: Sequence[Latency]) -> Latency | None:
    if not latencies:
        return None
    return Latency(*(max(getattr(lat, f) for lat in latencies) for f in Latency._fields))


def slow_gpus(shares: Sequence[GpuShare]) -> list[int]:
    """The GPUs whose bandwidth per job is under ``SLOW_GPU_SHARE`` of the median GPU's (per
    job, so that a GPU with one job fewer is not named for it); GPUs with no job are left out."""
    per_job = {s.gpu: s.bytes_per_s / s.jobs for s in shares if s.jobs}
    if len(per_job) < 2:
        return []
    middle = median(per_job.values())
    return [gpu for gpu, bps in per_job.items() if bps < SLOW_GPU_SHARE * middle]


def spread_note(jobs: int, gpus: int) -> str:
    """What to know when ``jobs`` do not divide evenly over ``gpus`` ("" when they do)."""
    if jobs < gpus:
        idle = f"GPU {jobs}" if gpus - jobs == 1 else f"GPUs {jobs}-{gpus - 1}"
        return f"only {jobs} jobs for {gpus} GPUs: {idle} read nothing (raise --threads)"
    if jobs % gpus:
        more, fewer = jobs // gpus + 1, jobs // gpus
        extra = jobs % gpus
        which = "GPU 0" if extra == 1 else f"GPUs 0-{extra - 1}"
        return (
            f"{jobs} jobs over {gpus} GPUs is uneven: {more} on {which}, {fewer} on the rest, so"
            f" the per-GPU figures differ by their job count (use a multiple of {gpus} threads)"
        )
    return ""


def gds_rows(
    total: BenchResult,
    shares: Sequence[GpuShare],
    *,
    gpus: int,
    verdict: str,
    compat: bool,
    baseline: BenchResult | None,
    depth: int,
    ids: Sequence[GpuId] = (),
) -> list[BenchResult]:
    """The node's aggregate row (``gds``, or ``gds-compat`` when ``compat`` or the verdict is
    not direct; ``gpu`` None, ``gpus`` N, as T2's sum row) and one row per GPU (``gpu`` from
    ``ids``, by index alone where it has none; ``gpus`` N: they read at once), every one
    carrying the nvidia-fs verdict. ``total`` is the aggregate measurement as read (its note
    says how); ``depth`` is the requests each job keeps in flight (fio's iodepth; 1 for
    KvikIO's blocking preads)."""
    named = {g.device: g for g in ids}
    compat = compat or not went_direct(verdict)
    slow = slow_gpus(shares)
    spread = ":".join(str(g) for g in range(gpus))
    notes = [f"{total.note}, into {gpus} GPU(s) {spread} (jobs round-robin)"]
    notes += [n for n in (spread_note(total.threads // max(depth, 1), gpus),) if n]
    if slow:
        notes.append(
            "slow: GPU(s) " + ", ".join(map(str, slow)) + f" under {SLOW_GPU_SHARE:.0%} of the"
            " median GPU's bandwidth per job (check their PCIe/EFA placement, nvidia-smi topo -m)"
        )
    if not shares:
        notes.append("no per-GPU figures: fio's per-job entries did not match the jobs")
    if baseline is not None and baseline.status == "ok" and baseline.bytes_per_s:
        notes.append(
            f"POSIX baseline {baseline.bytes_per_s / 1e9:,.2f} GB/s into host memory just"
            f" before, GDS x{(total.bytes_per_s or 0) / baseline.bytes_per_s:,.2f}"
        )
    elif baseline is not None:
        notes.append(f"no POSIX baseline: {baseline.reason or baseline.note}")
    notes.append(verdict)
    rows = [total._replace(variant=COMPAT if compat else VARIANT, note="; ".join(notes), gpus=gpus)]
    for share in shares:
        of_node = share.bytes_read / max(sum(s.bytes_read for s in shares), 1)
        flag = "; under 80% of the median GPU per job" if share.gpu in slow else ""
        rows.append(
            total._replace(
                variant=PER_GPU_COMPAT if compat else PER_GPU,
                threads=share.jobs * depth,
                bytes_per_s=share.bytes_per_s,
                iops=share.iops,
                latency_us=share.latency_us,
                note=f"GPU {share.gpu} of {gpus}: {share.jobs} of {total.threads // max(depth, 1)}"
                f" jobs, {of_node:.0%} of the node's bytes{flag}; {verdict}",
                gpu=named.get(share.gpu, GpuId(device=share.gpu, name="")),
                gpus=gpus,
            )
        )
    return rows


def gpu_ids(torch: Any, host: Host, count: int) -> list[GpuId]:
    """GPUs 0 to ``count`` - 1 as T1 and T2 rows name theirs (torch's properties and sysfs),
    read after the read (an idle GPU drops its PCIe link speed); a GPU torch does not see (the
    caller asked for more GPUs than torch sees) by its index alone."""
    seen = 0
    if torch is not None and torch.cuda.is_available():
        seen = int(torch.cuda.device_count())
    return [
        gpu_place(torch, host, g)[0] if g < seen else GpuId(device=g, name="") for g in range(count)
    ]


def gpu_count(gpus: int | None) -> int | None:
    """``gpus`` when the caller knows it, else torch's ``cuda.device_count()`` (None without
    torch or CUDA)."""
    if gpus is not None:
        return gpus
    torch = torch_or_none()
    if torch is None or not torch.cuda.is_available():
        return None
    return int(torch.cuda.device_count())


def run_gds_read(
    host: Host,
    job: FioJob,
    *,
    fio_engines: Callable[[], str],
    tool: str,
    gpus: int | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BenchResult]:
    """The POSIX baseline, then one GDS read of ``job``'s files over ``gpus`` GPUs (default:
    every GPU torch sees): the baseline row, the node's row and one per GPU; or one SKIP
    saying why none can run here. ``fio_engines`` returns ``fio --enghelp`` (asked only when
    nvidia-fs is loaded)."""
    if not job.direct:
        return [_skip("--no-direct: GPUDirect Storage needs O_DIRECT")]
    if host.read("nvidia_fs_stats", NVFS_STATS) is None:
        return [
            _skip(
                f"nvidia-fs is not loaded ({NVFS_STATS} is missing): cuFile could only run in"
                " compat mode, through host memory"
            )
        ]
    if "libcufile" in parse_engines(fio_engines()):
        count = gpu_count(gpus)
        if not count:
            return [
                _skip(
                    "cannot tell how many GPUs to read into: torch is not installed or sees no"
                    " CUDA device (pip install 'kvtool[gpu]')"
                )
            ]
        progress(
            f"T3 seq_read into host memory (the GDS read's POSIX baseline): fio {job.ioengine}"
        )
        baseline = _fio_baseline(host, job, tool=tool)
        progress(f"T3 seq_read with GPUDirect Storage into {count} GPU(s): fio libcufile")
        return [baseline, *_fio_gds(host, job, count, tool=tool, baseline=baseline)]
    kvikio, torch = _kvikio_and_torch()
    if kvikio is None:
        return [
            _skip(
                "no GPUDirect Storage reader here: fio has no libcufile engine and KvikIO is"
                " not installed (pip install 'kvtool[gds]')"
            )
        ]
    if torch is None or not torch.cuda.is_available():
        return [_skip("no CUDA device: GPUDirect Storage reads need a GPU")]
    count = gpus if gpus is not None else int(torch.cuda.device_count())
    progress(f"T3 seq_read into host memory (the GDS read's POSIX baseline): fio {job.ioengine}")
    baseline = _fio_baseline(host, job, tool=tool)
    progress(f"T3 seq_read with GPUDirect Storage into {count} GPU(s): KvikIO")
    return [baseline, *_kvikio_read(host, kvikio, torch, job, count, baseline=baseline)]


def _skip(reason: str) -> BenchResult:
    return skipped("t3", "seq_read", reason)._replace(variant=VARIANT)


def _nvfs(host: Host) -> NvfsStats | None:
    text = host.read("nvidia_fs_stats", NVFS_STATS)
    return parse_nvidia_fs_stats(text) if text else None


def _run_job(host: Host, job: FioJob, key: str) -> tuple[dict[str, Any] | None, str]:
    """Run one job file (``host.run`` key ``key``); fio's JSON, or None and the line that
    says why not."""
    job_path = Path(job.directory) / f"kvtool-{key.replace('_', '-')}.fio"
    job_path.write_text(job_file(job))
    done = host.run(
        key,
        ["fio", "--output-format=json", "--eta=never", str(job_path)],
        timeout_s=job.runtime_s * 2 + 60,
    )
    try:
        return json_document(done.stdout), ""
    except ValueError as exc:
        lines = (done.stderr or str(exc)).strip().splitlines()
        return None, lines[-1] if lines else str(exc)


def _fio_baseline(host: Host, job: FioJob, *, tool: str) -> BenchResult:
    """The POSIX baseline: the GDS job's read into host memory, run just before it (not the
    three-op run's seq_read, which ran processes not threads, before rand_read, and is absent
    when --ops leaves it out)."""
    base = baseline_job(job)
    document, why = _run_job(host, base, "fio_gds_baseline")
    try:
        if document is None:
            raise FioError(0, why)
        result = result_from_fio(document, base, "seq_read", tool=tool)
    except FioError as exc:
        return skipped("t3", "seq_read", f"fio {base.ioengine} failed: {exc}")._replace(
            variant=BASELINE
        )
    return result._replace(
        variant=BASELINE,
        note=f"{result.note}, as threads; the POSIX baseline of the GDS read after it",
    )


def _fio_gds(
    host: Host, job: FioJob, gpus: int, *, tool: str, baseline: BenchResult | None
) -> list[BenchResult]:
    cufile = gds_job(job, gpus)
    before = _nvfs(host)
    document, why = _run_job(host, cufile, "fio_gds")
    after = _nvfs(host)
    try:
        if document is None:
            raise FioError(0, why)
        total = result_from_fio(document, cufile, "seq_read", tool=tool)
    except FioError as exc:
        return [_skip(f"fio libcufile failed: {exc}")]
    shares = fio_shares(document, "seq_read", cufile.numjobs, gpus)
    read_bytes = sum(
        int((e.get("read") or {}).get("io_bytes", 0))
        for e in document.get("jobs") or []
        if isinstance(e, dict)
    )
    return gds_rows(
        total,
        shares,
        gpus=gpus,
        verdict=direct_verdict(before, after, read_bytes),
        compat=False,
        baseline=baseline,
        depth=cufile.iodepth,
        ids=gpu_ids(torch_or_none(), host, gpus),
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


def kvikio_compat_on(value: str, *, preferred: bool | None = None) -> bool:
    """Whether KvikIO's compat mode ``value`` (``True``, ``CompatMode.ON``, ``AUTO``...) means
    POSIX reads: ON, or AUTO where KvikIO prefers compat (``preferred``), or unknown."""
    word = value.rsplit(".", 1)[-1].upper()
    if word in ("OFF", "FALSE", "0", "NO"):
        return False
    if word == "AUTO":
        return preferred is not False
    return True


def _kvikio_threads(kvikio: Any, count: int) -> Callable[[], None]:
    """Resize KvikIO's thread pool to ``count`` (1 by default, which would queue every
    worker's pread behind one thread), across its API versions; returns the undo."""
    defaults = kvikio.defaults
    try:
        old = defaults.get("num_threads")  # KvikIO 25.x: get/set by name
        defaults.set("num_threads", count)
        return lambda: defaults.set("num_threads", old)
    except (AttributeError, TypeError, KeyError, ValueError):
        old = defaults.get_num_threads()  # KvikIO up to 24.x
        defaults.num_threads_reset(count)
        return lambda: defaults.num_threads_reset(old)


def _kvikio_read(
    host: Host, kvikio: Any, torch: Any, job: FioJob, gpus: int, *, baseline: BenchResult | None
) -> list[BenchResult]:
    """``job.numjobs`` worker threads, worker w reading files w, w+numjobs, ... into its own
    buffer on GPU ``w % gpus`` (libcufile's round-robin), each file once: no byte is read twice,
    so a compat-mode run cannot report the page cache. The run stops at ``job.runtime_s`` or
    when every file is read, whichever comes first."""
    files = gds_files(job.directory)
    if not files:
        return [_skip("no files to read: the fio write run laid none out")]
    workers = max(1, min(job.numjobs, len(files)))
    gpus = max(1, gpus)
    offsets = range(0, job.file_bytes - job.block_bytes + 1, job.block_bytes)
    lock = threading.Lock()
    moved = {g: 0 for g in range(gpus)}
    samples: dict[int, list[float]] = {g: [] for g in range(gpus)}
    deadline = time.perf_counter() + job.runtime_s

    def work(worker: int) -> None:
        device = worker % gpus
        buffer = torch.empty(job.block_bytes, dtype=torch.uint8, device=f"cuda:{device}")
        for path in files[worker::workers]:
            with kvikio.CuFile(str(path), "r") as handle:
                for offset in offsets:
                    if time.perf_counter() >= deadline:
                        return
                    began = time.perf_counter()
                    got = int(handle.pread(buffer, job.block_bytes, offset).get())
                    took = time.perf_counter() - began
                    with lock:
                        moved[device] += got
                        samples[device].append(took)

    undo = _kvikio_threads(kvikio, workers)
    before = _nvfs(host)
    start = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work, w) for w in range(workers)]:
                future.result()
    finally:
        undo()
    wall = max(time.perf_counter() - start, 1e-9)
    after = _nvfs(host)
    total_bytes = sum(moved.values())
    every = len(files) * len(offsets) * job.block_bytes
    if total_bytes >= every:
        span = (
            f"every file read once in {wall:,.2f} s, under the {job.runtime_s:g} s asked (the"
            " files are small: raise --size); the figure is over what was read"
        )
    else:
        share = total_bytes / max(every, 1)
        span = f"stopped at {job.runtime_s:g} s with {share:.0%} of the files read once"
    compat_mode = _kvikio_compat(kvikio)
    preferred = getattr(kvikio.defaults, "is_compat_mode_preferred", None)
    compat = kvikio_compat_on(compat_mode, preferred=preferred() if callable(preferred) else None)
    small = (
        "; blocks under KvikIO's gds_threshold (1 MiB by default) take its POSIX path"
        if job.block_bytes < 2**20
        else ""
    )
    all_samples = [t for g in samples.values() for t in g]
    total = BenchResult(
        tier="t3",
        op="seq_read",
        status="ok",
        tool=f"kvikio {getattr(kvikio, '__version__', '')}".strip(),
        block_bytes=job.block_bytes,
        threads=workers,
        direct=True,
        bytes_per_s=total_bytes / wall,
        iops=len(all_samples) / wall,
        latency_us=latency_of(all_samples) if all_samples else None,
        note=f"KvikIO pread, {workers} threads x 1 request, KvikIO thread pool {workers},"
        f" compat_mode {compat_mode}{small}; {span}",
    )
    shares = [
        GpuShare(
            gpu=g,
            jobs=len(range(g, workers, gpus)),
            bytes_read=moved[g],
            bytes_per_s=moved[g] / wall,
            iops=len(samples[g]) / wall,
            latency_us=latency_of(samples[g]) if samples[g] else None,
        )
        for g in range(gpus)
    ]
    return gds_rows(
        total,
        shares,
        gpus=gpus,
        verdict=direct_verdict(before, after, total_bytes),
        compat=compat,
        baseline=baseline,
        depth=1,
        ids=gpu_ids(torch, host, gpus),
    )


def gds_files(directory: str) -> Sequence[Path]:
    """The fio data files in a scratch folder (what a GDS read reads)."""
    return sorted(p for p in Path(directory).glob("kvtool.*") if p.is_file())

"""T3: the shared file system's real bandwidth and latency with fio and KV-shaped I/O.

The runs: ``seq_read`` and ``rand_read``, then ``seq_write`` (results in the order asked),
each time-based, ``direct=1`` unless the user says otherwise, one file per job in a dedicated
scratch folder (``kvtool-bench-<pid>-<random>``) that is removed afterwards, also on Ctrl-C
and on errors; nothing else in the folder is touched.

Reads first (``run_order``): fio lays the files out itself before the first read starts its
clock (written and fsynced, as when one runs fio by hand), so the reads measure the file
system, not the state a timed write just left in it; the write then makes new files of its
own, as KV offload writes new chunk files (overwriting laid-out files could skip the file
system's allocation, and read faster than offload writes). On the development VM, reads run
right after an O_DIRECT write of the same files read 0.50-0.92 of the same reads on laid-out
files (medians of 8-10 rounds of fio alone, 32 jobs of 1 MiB, from one run to the next); an
fsync after the write, a pause, a separate fio process or ``fallocate=none`` did not close
the gap. With ``hosts`` fio's own client/server
mode drives ``fio --server`` on every node for the cluster's aggregate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kvtool.bench.fio import (
    FioError,
    FioJob,
    aligned,
    fresh_writes,
    job_file,
    json_document,
    live_status,
    result_from_fio,
)
from kvtool.bench.gds import run_gds_read
from kvtool.bench.result import BenchResult, Latency
from kvtool.errors import InputError, escape_name
from kvtool.probe.host import NOT_INSTALLED, CommandResult, Host, file_ops_probe, odirect_probe
from kvtool.probe.parse import mount_for, mount_kind, parse_proc_mounts
from kvtool.scratch import Scratch

FIO_INSTALL = "apt-get update && apt-get install -y fio  (or dnf install -y fio)"
SCRATCH_PREFIX = "kvtool-bench-"


class T3Options(NamedTuple):
    """How to drive fio: block size (rounded up to 4 KiB for O_DIRECT), threads (fio jobs),
    per-job queue depth, seconds per run, total scratch bytes, O_DIRECT, fio servers."""

    block_bytes: int
    threads: int = 32
    iodepth: int = 1
    duration_s: float = 10.0
    size_bytes: int = 2**30
    direct: bool = True
    hosts: tuple[str, ...] = ()
    ops: tuple[str, ...] = ("seq_write", "seq_read", "rand_read")
    gds: bool = True  # also read the files into the GPUs with GPUDirect Storage where possible
    gds_gpus: int | None = None  # GPUs to spread the GDS read over (None: all torch sees)
    # queue-depth-1 random reads of these sizes, and open + stat + close of the files: the
    # latency an engine meets per chunk (the AWS article's 100-500 us for FSx), in every run
    small_blocks: tuple[int, ...] = (4096, 65536)
    file_ops: bool = True


def parse_hosts(text: str) -> tuple[str, ...]:
    """``--hosts h1,h2:8766`` -> fio's client addresses ``("h1", "h2,8766")``; InputError
    for an empty name, one with characters no host name or IPv4 address has, or a port that
    is not a number."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        name, _, port = item.partition(":")
        bad_name = not name or not all(c.isascii() and (c.isalnum() or c in ".-_") for c in name)
        if bad_name or (port and not (port.isascii() and port.isdigit())) or (":" in port):
            raise InputError(
                f"--hosts entry {escape_name(item)} is not HOST or HOST:PORT",
                "e.g. --hosts node1,node2:8766 (each running fio --server)",
            )
        out.append(f"{name},{port}" if port else name)
    return tuple(out)


def fio_version(host: Host) -> str:
    """``fio-3.33``; InputError with the install command when fio is missing."""
    result = host.run("fio_version", ["fio", "--version"])
    if result.returncode == NOT_INSTALLED:
        raise InputError("fio is not installed", FIO_INSTALL)
    return result.stdout.strip() or "fio"


def fio_engines(host: Host) -> str:
    """``fio --enghelp``: the I/O engines this fio was built with (libcufile for GDS?)."""
    return host.run("fio_enghelp", ["fio", "--enghelp"]).stdout


def run_order(ops: Sequence[str]) -> tuple[str, ...]:
    """The order fio runs ``ops`` in: the reads, then the writes, each in the order given."""
    return tuple(op for op in ops if op != "seq_write") + tuple(
        op for op in ops if op == "seq_write"
    )


def plan_files(path: str, options: T3Options, free_bytes: int | None) -> int:
    """Bytes per job file: ``--size`` split over the jobs of one node, at least one block;
    InputError when the folder has not room for every node's files (90% of free space): twice
    over when the run reads and writes (the write makes files of its own, ``fresh_writes``)."""
    block = aligned(options.block_bytes)
    per_job = max(block, options.size_bytes // max(options.threads, 1) // block * block)
    clients = max(1, len(options.hosts))
    sets = 2 if fresh_writes(options.ops) else 1
    needed = per_job * options.threads * clients * sets
    if free_bytes is not None and needed > free_bytes * 0.9:
        nodes = f" x {clients} nodes" if clients > 1 else ""
        twice = " x 2: the reads' files and the write's" if sets == 2 else ""
        raise InputError(
            f"{path} has {free_bytes / 2**30:,.2f} GiB free; the test needs"
            f" {needed / 2**30:,.2f} GiB ({options.threads} jobs x {per_job / 2**20:,.0f} MiB"
            f"{nodes}{twice})",
            "lower --size or --threads, or free space",
        )
    return per_job


def t3_folder(host: Host, path: str, key: str) -> dict[str, Any]:
    """``host.path_info`` of the T3 folder; InputError when it is missing, not a folder, or
    not writable."""
    info = host.path_info(key, path)
    if not info.get("is_dir"):
        raise InputError(
            f"{path} is not a folder" if info.get("exists") else f"{path} does not exist",
            "pass the T3 folder with --t3-dir",
        )
    if not info.get("writable"):
        raise InputError(f"{path} is not writable", "pass a folder this user can write")
    return info


def folder_filesystem(host: Host, path: str, info: dict[str, Any]) -> str:
    """The type of the file system that holds the T3 folder (``lustre``, ``ext4``; "" when
    the mount table cannot be read), from /proc/mounts through ``host``."""
    mounts = parse_proc_mounts(host.read("proc_mounts", "/proc/mounts") or "")
    mount = mount_for(str(info.get("realpath") or path), mounts)
    return mount.fstype if mount else ""


def not_lustre(path: str, filesystem: str) -> str | None:
    """The note a T3 measurement needs when its folder is not on Lustre, by the rule doctor's
    ``mount.shared`` grades (``probe.parse.mount_kind``): the figures are that file system's,
    not FSx for Lustre's (an unmounted /fsx is the root disk). None on Lustre, or when the
    mount table was not read."""
    kind = mount_kind(filesystem) if filesystem else "lustre"
    if kind == "lustre":
        return None
    what = {
        "local": f"a node-local {filesystem} file system (kvtool doctor FAILs it as a T3)",
        "shared": f"{filesystem}, a shared file system",
        "unknown": f"{filesystem}, a file system kvtool does not know to be shared",
    }[kind]
    return (
        f"{path} is on {what}, not FSx for Lustre: these are {filesystem}'s figures, not T3's;"
        " mount the file system (sudo mount -t lustre ...) and measure the folder there"
    )


def run_t3(
    host: Host,
    path: str,
    options: T3Options,
    *,
    progress: Callable[[str], None] = lambda _: None,
    live: bool = False,
) -> list[BenchResult]:
    """Measure ``path`` with fio; every scratch file is gone when this returns or raises.
    ``live``: ``progress`` is shown on a terminal, so fio's running figures (elapsed time,
    GB/s, each second) are passed to it as they come.

    Raises InputError for a folder that is missing, read-only, too small, or refuses O_DIRECT
    (unless ``options.direct`` is False), and for a missing fio.
    """
    info = t3_folder(host, path, "bench_path")
    tool = fio_version(host)
    filesystem = folder_filesystem(host, path, info)
    per_job = plan_files(path, options, info.get("free_bytes"))
    with Scratch() as cleanup:  # removed however this ends: errors, SIGINT, SIGTERM, SIGHUP
        scratch = cleanup.folder(Path(path), SCRATCH_PREFIX)
        return _measure(host, path, scratch, options, tool, filesystem, per_job, progress,
                        live=live)  # fmt: skip


def _measure(
    host: Host,
    path: str,
    scratch: Path,
    options: T3Options,
    tool: str,
    filesystem: str,
    per_job: int,
    progress: Callable[[str], None],
    *,
    live: bool = False,
) -> list[BenchResult]:
    """The fio runs (and the GDS read) in ``scratch``."""
    if options.direct:
        check_odirect(scratch, path, "benchmark through the page cache with --no-direct (the"
                      " figures then include caching)")  # fmt: skip
    job = FioJob(
        ops=options.ops,
        directory=str(scratch),
        block_bytes=aligned(options.block_bytes),
        numjobs=options.threads,
        iodepth=options.iodepth,
        file_bytes=per_job,
        runtime_s=options.duration_s,
        direct=options.direct,
        # libaio: in every fio build, takes direct=1, and is allowed where container
        # seccomp profiles block io_uring
        ioengine="libaio",
    )
    about = (
        f"fio, {job.numjobs} jobs, {job.block_bytes / 2**20:,.2f} MiB blocks,"
        f" {options.duration_s:g} s each"
    )
    if not options.hosts:  # one fio process runs the ops in turn: start-up paid once
        ordered = job._replace(ops=run_order(options.ops))
        progress(f"T3 {', '.join(ordered.ops)}: {about}")
        shown = progress if live else None
        done = {r.op: r for r in _run_fio(host, ordered, scratch, (), tool, shown)}
        results = [done[op] for op in options.ops]
        results += _latency_rows(host, job, scratch, options, tool, progress)
        if options.gds:  # the files are there: the first run laid them out
            results += run_gds_read(
                host,
                job,
                fio_engines=lambda: fio_engines(host),
                tool=tool,
                gpus=options.gds_gpus,
                progress=progress,
            )
        return [r._replace(filesystem=filesystem) for r in results]
    # one fio run per op, so that every node runs the same op at the same time and
    # fio's "All clients" sum is that op's aggregate
    results = []
    for index, op in enumerate(run_order(options.ops), 1):
        progress(f"T3 {op} ({index}/{len(options.ops)}) on {len(options.hosts)} nodes: {about}")
        results += _run_fio(host, job._replace(ops=(op,)), scratch, options.hosts, tool)
    order = {op: index for index, op in enumerate(options.ops)}
    results.sort(key=lambda r: order[r.op])
    return [r._replace(filesystem=filesystem) for r in results]


def _latency_rows(
    host: Host, job: FioJob, scratch: Path, options: T3Options, tool: str,
    progress: Callable[[str], None],
) -> list[BenchResult]:  # fmt: skip
    """Queue-depth-1 random reads of ``options.small_blocks`` (one fio job on the first file
    the big reads laid out) and the per-file open + stat + close, where the reads laid files
    out (not for a write alone)."""
    if not any(op != "seq_write" for op in options.ops):
        return []
    rows = []
    seconds = max(1.0, min(3.0, options.duration_s))
    for block in options.small_blocks:
        # psync: each read's whole time is its completion latency (libaio's io_submit may
        # finish a fast read itself, leaving a completion time of a microsecond)
        small = job._replace(ops=("rand_read",), block_bytes=block, numjobs=1, iodepth=1,
                             runtime_s=seconds, ioengine="psync")  # fmt: skip
        progress(f"T3 rand_read qd1: {block // 1024} KiB blocks, {seconds:g} s")
        (row,) = _run_fio(host, small, scratch, (), tool)
        rows.append(row._replace(variant="qd1"))
    if options.file_ops:
        progress("T3 open + stat + close of each file")
        facts = host.computed("t3_file_ops", lambda: file_ops_probe(str(scratch)))
        if facts and facts.get("ok"):
            rows.append(BenchResult(
                tier="t3", op="open_stat_close", status="ok", tool="kvtool (os.open, os.fstat,"
                " os.close)", threads=1, variant="metadata", iops=facts["ops_per_s"],
                latency_us=Latency(facts["p50_us"], facts["p99_us"], facts["p999_us"]),
                note=f"{facts['count']:,} times over {facts['files']:,} files, one at a time: what"
                " an engine pays per chunk file before its bytes move",
            ))  # fmt: skip
    return rows


def check_odirect(scratch: Path, path: str, instead: str) -> None:
    """InputError, with ``instead`` as the fix, when ``scratch`` does not take O_DIRECT."""
    probe = odirect_probe(str(scratch), 1)
    if not probe["ok"]:
        raise InputError(f"{path} does not take O_DIRECT ({probe['error']})", instead)


def servers_unreachable(done: CommandResult) -> None:
    """InputError naming the first line where fio's client could not reach a server, if any
    (a run with ``--client`` that printed no JSON)."""
    lines = (done.stderr or done.stdout).strip().splitlines()
    unreachable = [
        line
        for line in lines
        if any(m in line for m in ("failed to connect", "failed to resolve", "adding client"))
    ]
    if unreachable:
        raise InputError(
            f"fio could not reach its servers ({unreachable[0].removeprefix('fio: ')})",
            "start fio --server on every host in --hosts (port 8765 unless given)",
        )


def _run_fio(
    host: Host, job: FioJob, scratch: Path, hosts: Sequence[str], tool: str,
    progress: Callable[[str], None] | None = None,
) -> list[BenchResult]:  # fmt: skip
    name = "-".join(job.ops)
    argv = ["fio", "--output-format=json", "--eta=never"]
    stream = getattr(host, "stream", None) if progress is not None and not hosts else None
    if stream is not None:  # fio's running figures each second, for the status line
        argv.append("--status-interval=1")
    if not hosts:
        job_path = scratch / f"kvtool-{name}.fio"
        job_path.write_text(job_file(job))
        argv.append(str(job_path))
    # one folder per client: fio's $clientuid (the client's IP) would collide for two
    # servers on one address, and every client must read back the files it wrote
    for index, server in enumerate(hosts):
        folder = scratch / f"client{index}"
        folder.mkdir(exist_ok=True)
        job_path = scratch / f"kvtool-{name}-client{index}.fio"
        job_path.write_text(job_file(job._replace(directory=str(folder))))
        argv += [f"--client={server}", str(job_path)]
    # each op twice its time, plus a minute, plus laying the files out at 200 MB/s
    budget = len(job.ops) * job.runtime_s * 2 + 60 + job.numjobs * job.file_bytes / 200e6
    if stream is not None:
        assert progress is not None

        def show(stdout: str) -> None:
            status = live_status(stdout)
            if status is not None:
                progress(f"T3 {status}")

        done = stream(f"fio_{name}", argv, show, timeout_s=budget)
    else:
        done = host.run(f"fio_{name}", argv, timeout_s=budget)
    try:
        document = json_document(done.stdout)
        return [result_from_fio(document, job, op, tool=tool) for op in job.ops]
    except FioError as exc:
        if exc.errno == 22:
            raise InputError(
                f"{job.directory}: fio could not open files with O_DIRECT",
                "use --no-direct to measure through the page cache",
            ) from None
        raise InputError(
            f"fio failed: {exc}",
            done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "",
        ) from None
    except ValueError:
        last = (done.stderr or done.stdout).strip().splitlines()
        if hosts:
            servers_unreachable(done)
        raise InputError(
            f"fio exited with status {done.returncode} and no JSON",
            last[-1] if last else "run the job file by hand to see why",
        ) from None

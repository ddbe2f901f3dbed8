"""fio for the T3 benchmark: job files built from KV-shaped parameters, fio's JSON read back.
Pure: text in, text out; the ``Host`` runs fio.

fio facts (fio 3.33, HOWTO; shared/reference/fsx-lustre-gds-facts.md section 4):
* ``--output-format=json`` on stdout can be preceded by error lines (``fio: pid=..., err=22``),
  so parsing starts at the first ``{``; each job has its own ``error``.
* With ``group_reporting`` the ``numjobs`` clones are one entry per job section.
* Client/server mode (``--client=HOST,PORT`` per ``fio --server``) reports ``client_stats``
  instead of ``jobs``, one entry per host plus an ``"All clients"`` aggregate that has no
  latency percentiles; job options must come from the job file.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from kvtool.bench.result import BenchResult, Latency
from kvtool.errors import InputError, has_control_character
from kvtool.units import plural

OPS = {"seq_write": "write", "seq_read": "read", "rand_read": "randread"}
ALIGN = 4096  # O_DIRECT needs block sizes and offsets aligned to the logical block (4 KiB)


class FioJob(NamedTuple):
    """One fio run: each of ``ops`` in turn (a stonewalled section each, so one fio process
    pays its start-up once) over ``numjobs`` x files of ``file_bytes`` in ``directory``."""

    ops: tuple[str, ...]
    directory: str
    block_bytes: int
    numjobs: int
    iodepth: int
    file_bytes: int
    runtime_s: float
    direct: bool
    ioengine: str = "libaio"
    extra: tuple[str, ...] = ()  # engine options, e.g. libcufile's cuda_io and gpu_dev_ids
    thread: bool = False  # jobs as threads of one process (libcufile: one CUDA context)
    per_job: bool = False  # no group_reporting: fio's JSON has one entry per job


def aligned(block_bytes: int) -> int:
    """Round a KV chunk up to the 4 KiB O_DIRECT alignment: 81,920 KiB stays, 1,000 B -> 4 KiB."""
    return max(ALIGN, -(-block_bytes // ALIGN) * ALIGN)


def fio_path(path: str) -> str:
    """``path`` as a fio job file value: ':' escaped as fio documents for ``directory``
    (``\\:``); InputError for what fio would read as syntax: a line break or another control
    character (a new option, even ``exec_prerun``), ``;`` or ``#`` (a comment), ``${`` (an
    environment variable)."""
    found = (
        "a control character"
        if has_control_character(path)
        else next((f"'{m}'" for m in (";", "#", "${") if m in path), "")
    )
    if found:
        raise InputError(
            f"the T3 folder {path!r} holds {found}, which fio's job files read as syntax",
            "benchmark a folder whose path has none (a link to it will do)",
        )
    return path.replace(":", "\\:")


WRITE_FILES = "kvtool-write.$jobnum.$filenum"  # a write's own files, beside the reads'


def fresh_writes(ops: tuple[str, ...] | list[str]) -> bool:
    """Whether a run of ``ops`` writes files of its own (``WRITE_FILES``): when it reads too,
    so the reads find files fio laid out and the write makes new ones, as KV offload does."""
    kinds = {OPS[op] == "write" for op in ops if op in OPS}
    return kinds == {True, False}


def job_file(job: FioJob) -> str:
    """The fio job file for ``job``: time-based, one section per op named after it, each after
    the first waiting for the one before (``stonewall``). The reads share one set of files (fio
    lays them out before the first one's clock starts; a GDS read after the run reads them
    too); a write beside reads writes new files of its own (``fresh_writes``).
    ``group_reporting`` unless ``job.per_job``;
    ``thread`` (fio's jobs as threads, not processes) when ``job.thread``."""
    unknown = [op for op in job.ops if op not in OPS]
    if unknown or not job.ops:
        raise InputError(f"unknown fio op {unknown!r}", "choose " + ", ".join(OPS))
    runtime = max(1, round(job.runtime_s))
    fresh = fresh_writes(job.ops)
    sections = []
    for index, op in enumerate(job.ops):
        sections += [f"[{op}]", *(["stonewall"] if index else []), f"rw={OPS[op]}"]
        if fresh and OPS[op] == "write":
            sections.append(f"filename_format={WRITE_FILES}")
        sections.append("")
    return "\n".join(
        [
            "[global]",
            f"directory={fio_path(job.directory)}",
            f"ioengine={job.ioengine}",
            f"direct={1 if job.direct else 0}",
            f"bs={job.block_bytes}",
            f"size={job.file_bytes}",
            f"numjobs={job.numjobs}",
            f"iodepth={job.iodepth}",
            f"runtime={runtime}",
            "time_based=1",
            *([] if job.per_job else ["group_reporting=1"]),
            *(["thread"] if job.thread else []),
            "unique_filename=1",
            "filename_format=kvtool.$jobnum.$filenum",
            *job.extra,
            "",
            *sections,
        ]
    )


def parse_engines(enghelp: str) -> set[str]:
    """The engine names ``fio --enghelp`` lists: the indented lines under "Available IO
    engines:" (its other lines, such as "fio: engine libcufile not loadable", are not names)."""
    names: set[str] = set()
    listing = False
    for line in enghelp.splitlines():
        if line.startswith("Available IO engines"):
            listing = True
        elif listing and line[:1] in ("\t", " ") and line.strip():
            names.add(line.strip())
        elif listing:
            listing = False
    return names


FLEET_FILES = 16  # files each fleet node reads (kvtool capacity --hosts), shared by its jobs


def fleet_job(
    directory: str, *, file_bytes: int, numjobs: int, block_bytes: int, runtime_s: float,
    direct: bool, layout: bool = False,
) -> str:  # fmt: skip
    """A fio job file for one node of ``kvtool capacity --hosts``: ``numjobs`` jobs reading,
    time-based, the same ``FLEET_FILES`` files (``filename`` lists them: laid out once, by the
    ``layout`` run, which writes them whole with one job; a later run finds them the right
    size and reads them as they are)."""
    names = ":".join(f"kvtool-fleet.{i}" for i in range(FLEET_FILES))
    op = "seq_write" if layout else "seq_read"
    return "\n".join([
        "[global]",
        f"directory={fio_path(directory)}",
        "ioengine=libaio",
        f"direct={1 if direct else 0}",
        f"bs={block_bytes}",
        f"filename={names}",
        f"size={file_bytes * FLEET_FILES}",
        f"numjobs={1 if layout else numjobs}",
        "iodepth=1",
        "group_reporting=1",
        *([] if layout else [f"runtime={max(1, round(runtime_s))}", "time_based=1"]),
        "",
        f"[{op}]",
        f"rw={OPS[op]}",
        "",
    ])  # fmt: skip


def json_documents(stdout: str) -> list[dict[str, Any]]:
    """Every whole JSON object in fio's stdout, in order, skipping the lines fio prints
    between them (errors; in client/server mode each server's job summary). With
    ``--status-interval`` fio prints one a period, then its final one."""
    decoder = json.JSONDecoder()
    docs: list[dict[str, Any]] = []
    at = 0
    while True:
        start = 0 if at == 0 and stdout.startswith("{") else stdout.find("\n{", at) + 1
        if start <= 0 and not (at == 0 and stdout.startswith("{")):
            return docs
        try:
            data, at = decoder.raw_decode(stdout, start)
        except ValueError:
            at = start + 1
            continue
        if isinstance(data, dict):
            docs.append(data)


def json_document(stdout: str) -> dict[str, Any]:
    """fio's final JSON document (the last: status dumps come before it)."""
    docs = json_documents(stdout)
    if not docs:
        raise ValueError("no JSON in fio's output")
    return docs[-1]


def live_status(stdout: str) -> str | None:
    """What the newest status dump says: the job running, its seconds so far and the GB/s
    it has moved on average (fio's running figures), or None before the first dump."""
    doc = None
    end = len(stdout)
    for _ in range(3):  # the newest whole dump: the one at the end may still be coming
        start = stdout.rfind("\n{", 0, end) + 1
        if start <= 0 and not stdout.startswith("{"):
            return None
        try:
            doc = json.JSONDecoder().raw_decode(stdout, start)[0]
            break
        except ValueError:
            end = start - 1
    if not isinstance(doc, dict):
        return None

    def moved(job: dict[str, Any], key: str) -> float:
        return sum((job.get(side) or {}).get(key, 0) or 0 for side in ("read", "write"))

    # jobs run in turn (stonewall): the running one is the last that has moved anything
    jobs = [j for j in doc.get("jobs", []) if isinstance(j, dict) and moved(j, "io_bytes")]
    if not jobs:
        return None
    job = jobs[-1]
    seconds = (job.get("job_runtime") or 0) / 1000
    rate = moved(job, "bw_bytes")
    return f"{job.get('jobname', '?')}: {seconds:,.0f} s, {rate / 1e9:,.2f} GB/s (fio)"


def _side(entry: dict[str, Any], op: str) -> dict[str, Any]:
    side = entry.get("write" if OPS[op] == "write" else "read")
    return side if isinstance(side, dict) else {}


def side_latency(side: dict[str, Any]) -> Latency | None:
    """p50, p99 and p99.9 completion latency (microseconds) of one fio JSON read/write side."""
    pct = (side.get("clat_ns") or {}).get("percentile")
    if not isinstance(pct, dict):
        return None
    try:
        return Latency(*(pct[k] / 1000 for k in ("50.000000", "99.000000", "99.900000")))
    except KeyError:
        return None


class FioError(Exception):
    """fio ran but a job failed; ``errno`` is fio's error number (22: no O_DIRECT)."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno


def result_from_fio(document: dict[str, Any], job: FioJob, op: str, *, tool: str) -> BenchResult:
    """The ``BenchResult`` for ``op`` from fio's JSON: local (``jobs``, one entry per section
    with ``group_reporting``) or client/server (``client_stats``: one entry per host and
    section, and an ``"All clients"`` sum that fio adds over every section, so it is used only
    when the run had one).

    Raises FioError when a job reports an error.
    """
    entries = document.get("jobs") or document.get("client_stats") or []
    entries = [e for e in entries if isinstance(e, dict)]
    for entry in entries:
        if entry.get("error"):
            raise FioError(
                int(entry["error"]),
                f"fio job {entry.get('jobname')} failed with error {entry['error']}",
            )
    hosts = [e for e in entries if e.get("jobname") == op]
    if not hosts:
        raise FioError(0, f"fio reported no {op} job")
    total = next((e for e in entries if e.get("jobname") == "All clients"), None)
    if len(job.ops) > 1:
        total = None  # a sum over every section, not this op's
    sides = [_side(e, op) for e in hosts]
    if total is not None:
        bandwidth = float(_side(total, op).get("bw_bytes", 0))
        iops = float(_side(total, op).get("iops", 0))
    else:
        bandwidth = float(sum(s.get("bw_bytes", 0) for s in sides))
        iops = float(sum(s.get("iops", 0) for s in sides))
    latencies = [lat for s in sides if (lat := side_latency(s)) is not None]
    latency = None
    if latencies:
        latency = Latency(*(max(getattr(lat, f) for lat in latencies) for f in Latency._fields))
    clients = len(hosts) if "client_stats" in document else 1
    note = (
        f"fio {job.ioengine}, {'O_DIRECT' if job.direct else 'buffered'},"
        f" {plural(job.numjobs, 'job')} x iodepth {job.iodepth},"
        f" {job.file_bytes // 2**20:,} MiB per job"
    )
    if "client_stats" in document:
        note += f", {clients} fio client(s): aggregate bandwidth, worst client's latency"
    return BenchResult(
        tier="t3",
        op=op,
        status="ok",
        tool=tool,
        block_bytes=job.block_bytes,
        threads=job.numjobs * job.iodepth,
        direct=job.direct,
        clients=clients,
        bytes_per_s=bandwidth,
        iops=iops,
        latency_us=latency,
        note=note,
    )

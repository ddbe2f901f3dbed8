"""``kvtool capacity``: how many returning sessions a T3 folder restores within a latency
target, measured with the sessions' own I/O (``bench/sessions.py`` is the workload and the
search), and the proof that this harness is not the bottleneck: raw fio at the same block size
and concurrency, in the same run, its ratio printed.

The harness is threads doing O_DIRECT ``preadv``/``pwritev`` into page-aligned buffers (the GIL
is released for each call): each session a thread, each restore its chunk files read
``restore_parallel`` at a time, block by block (``IO_BLOCK``, the same block fio is given).
Every file lives in one scratch folder (``kvtool-capacity-<pid>-<random>``) under the T3 folder,
registered with the one clean-up (``scratch.Scratch``): gone when the run ends, fails or is
interrupted. Nothing else in the folder is read or written.
"""

from __future__ import annotations

import functools
import mmap
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from kvtool.bench.fio import FLEET_FILES, FioError, aligned, fleet_job, json_document
from kvtool.bench.sessions import Level, Search, Workload, fixed, level_of, search
from kvtool.bench.t3 import (
    T3Options,
    check_odirect,
    folder_filesystem,
    not_lustre,
    run_t3,
    servers_unreachable,
    t3_folder,
)
from kvtool.errors import InputError
from kvtool.probe.host import CommandResult, Host
from kvtool.scratch import Scratch

SCRATCH_PREFIX = "kvtool-capacity-"
IO_BLOCK = 1 << 20  # bytes per read or write call (a chunk file is read in these)
MAX_THREADS = 2048  # sessions x restore_parallel readers, at most
FLEET_FILE_BYTES = 64 * 2**20  # each of a fleet node's FLEET_FILES


class CapacityOptions(NamedTuple):
    """How the levels run: seconds each, O_DIRECT or the page cache, the percentile and
    target, fixed levels (else the search), the most sessions to try, and whether to run the
    raw-fio check."""

    slo_s: float = 0.5
    at: str = "p95"
    duration_s: float = 10.0
    direct: bool = True
    levels: tuple[int, ...] = ()
    limit: int = 1024
    fio_check: bool = True
    seed: int = 0
    also: tuple[int, ...] = ()  # levels measured besides (the plan's concurrent restores)
    hosts: tuple[str, ...] = ()  # fio servers (t3.parse_hosts) loading T3 alike at each level


class FioCheck(NamedTuple):
    """The harness's read throughput beside raw fio's, same block, same concurrency."""

    concurrency: int
    block_bytes: int
    harness_bytes_per_s: float
    fio_bytes_per_s: float

    @property
    def ratio(self) -> float:
        return self.harness_bytes_per_s / self.fio_bytes_per_s if self.fio_bytes_per_s else 0.0


class CapacityResult(NamedTuple):
    path: str
    workload: Workload
    options: CapacityOptions
    found: Search
    file_bytes: int  # one chunk file as written (aligned for O_DIRECT)
    fio: FioCheck | None
    notes: tuple[str, ...]


def room_for(workload: Workload, free_bytes: int | None, limit: int) -> int:
    """Sessions whose contexts fit in 80% of the folder's free space (turns write a session's
    new chunks before dropping its old ones: one turn's worth more each), at most ``limit``."""
    if free_bytes is None:
        return limit
    file_bytes = aligned(workload.chunk_bytes)
    per_session = (workload.chunks + workload.turn_chunks(workload.turn(0)) + 1) * file_bytes
    return max(0, min(limit, int(free_bytes * 0.8) // per_session))


def run_capacity(
    host: Host, path: str, workload: Workload, options: CapacityOptions, *,
    progress: Callable[[str], None] = lambda _: None,
) -> CapacityResult:  # fmt: skip
    """Measure ``path``; every scratch file is gone when this returns or raises. InputError for
    a folder that is missing, read-only, too small for one session, or refuses O_DIRECT."""
    info = t3_folder(host, path, "capacity_path")
    # every session's readers are threads of this process: at most MAX_THREADS of them
    limit = min(options.limit, MAX_THREADS // max(1, workload.restore_parallel))
    free = info.get("free_bytes")
    if free is not None and options.hosts:  # the fleet's files live in the same folder
        free = max(0, free - len(options.hosts) * FLEET_FILES * FLEET_FILE_BYTES)
    room = room_for(workload, free, limit)
    if room < 1:
        raise InputError(
            f"{path} has no room for one session's context"
            f" ({workload.session_bytes / 2**30:,.2f} GiB)",
            "lower --ctx, or free space",
        )
    if options.levels and max(options.levels) > room:
        raise InputError(
            f"{path} has room for {room:,} sessions' contexts; --sessions asks for"
            f" {max(options.levels):,}",
            "lower --sessions or --ctx, or free space",
        )
    notes = [note] if (note := not_lustre(path, folder_filesystem(host, path, info))) else []
    file_bytes = aligned(workload.chunk_bytes)
    if file_bytes != workload.chunk_bytes:
        notes.append(
            f"chunk files are {file_bytes:,} bytes: {workload.chunk_bytes:,} rounded up to"
            " O_DIRECT's 4 KiB"
        )
    with Scratch() as cleanup:
        scratch = cleanup.folder(Path(path), SCRATCH_PREFIX)
        if options.direct:
            check_odirect(scratch, path, "measure through the page cache with --no-direct"
                          " (restores then include caching)")  # fmt: skip
        files = _Files(scratch / "sessions", workload, file_bytes, options.direct)
        fleet = _Fleet(host, scratch, options, progress) if options.hosts else None

        def measure(n: int) -> Level:
            files.ensure(n, progress)
            progress(f"{n:,} sessions: restoring for {options.duration_s:g} s")
            if fleet is None:
                level = _level(files, n, workload, options)
            else:
                level = fleet.around(n * workload.restore_parallel,
                                     lambda: _level(files, n, workload, options))  # fmt: skip
            shown = level.at(options.at)
            progress(
                f"{n:,} sessions: {level.restores:,} restores,"
                f" {options.at} {'-' if shown is None else f'{shown * 1e3:,.0f} ms'},"
                f" {level.bytes_per_s / 1e9:,.2f} GB/s"
            )
            return level

        if options.levels:
            found = fixed(measure, options.levels, slo_s=options.slo_s, at=options.at)
        else:
            found = search(measure, slo_s=options.slo_s, at=options.at, limit=room)
        done = {lv.sessions for lv in found.levels}
        for n in options.also:  # e.g. the plan's concurrent restores, measured as such
            if n in done:
                continue
            if n > room:
                notes.append(f"{n:,} sessions were not run: the folder has room for {room:,}")
                continue
            found = found._replace(levels=(*found.levels, measure(n)))
        fio = None
        if options.fio_check and found.levels:
            n = found.max_sessions or found.levels[0].sessions
            fio = _fio_check(host, scratch, files, n, workload, options, progress)
        notes += search_notes(found, workload, options, room)
        return CapacityResult(path, workload, options, found, file_bytes, fio, tuple(notes))


def search_notes(
    found: Search, workload: Workload, options: CapacityOptions, room: int
) -> list[str]:
    """What the search's figures rest on: the fleet, levels with few restores (in ascending
    order, whatever order the search ran them in), a closed loop, the page cache, a folder
    that ran out of room."""
    out = []
    if options.hosts:
        out.append(
            f"at each level each of the {len(options.hosts)} --hosts read as many chunks at once"
            f" as the sessions here ({workload.restore_parallel} a session, 1 MiB reads over"
            f" {FLEET_FILES} files of {FLEET_FILE_BYTES // 2**20} MiB, fio client/server): the"
            " restores were measured on this node while the fleet loaded T3 alike; fleet GB/s is"
            " what they read meanwhile"
        )
    few = sorted({lv.sessions for lv in found.levels if 0 < lv.restores < 20})
    if few:
        out.append(
            f"fewer than 20 restores at {', '.join(f'{n:,}' for n in few)} session(s): their"
            f" {options.at} rests on few samples (raise --duration)"
        )
    if not workload.turns:
        out.append(
            "a closed loop: each session restores again as soon as its turn is written (no"
            " think time), so N sessions are N restores at once; --trace takes pauses and turn"
            " lengths from a real trace"
        )
    if not options.direct:
        out.append("measured through the page cache (--no-direct): restores include caching")
    if room < options.limit and found.max_sessions == room:
        out.append(f"the search stopped at {room:,} sessions: the folder has room for no more")
    return out


class _Files:
    """The sessions' chunk files: ``s<i>/c<k>``, the newest ``workload.chunks`` of each
    session its context. Made as levels need them; a turn adds new ones and drops the oldest."""

    def __init__(self, root: Path, workload: Workload, file_bytes: int, direct: bool) -> None:
        self.root = root
        root.mkdir()
        self.workload = workload
        self.file_bytes = file_bytes
        self.direct = direct
        self.chunks: list[deque[int]] = []  # per session: chunk numbers, oldest first
        self.locks: list[threading.Lock] = []
        self.payload = _aligned_buffer(min(file_bytes, IO_BLOCK))
        self.payload[:] = random.Random(0).randbytes(len(self.payload))  # not compressible

    def path(self, session: int, chunk: int) -> str:
        return str(self.root / f"s{session}" / f"c{chunk}")

    def ensure(self, n: int, progress: Callable[[str], None]) -> None:
        """Every session below ``n`` has its context on disk."""
        new = range(len(self.chunks), n)
        if not new:
            return
        size = len(new) * self.workload.session_bytes
        progress(f"writing {len(new):,} more sessions' contexts ({size / 2**30:,.2f} GiB)")
        for session in new:
            (self.root / f"s{session}").mkdir()
            self.chunks.append(deque())
            self.locks.append(threading.Lock())
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda s: self._fill(s, self.workload.chunks), new))

    def _fill(self, session: int, count: int) -> int:
        written = 0
        for _ in range(count):
            number = self.chunks[session][-1] + 1 if self.chunks[session] else 0
            written += self.write(session, number)
            self.chunks[session].append(number)
        return written

    def write(self, session: int, chunk: int) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(self.path(session, chunk), flags | (os.O_DIRECT if self.direct else 0), 0o600)
        try:
            offset = 0
            while offset < self.file_bytes:
                length = min(len(self.payload), self.file_bytes - offset)
                offset += os.pwritev(fd, [memoryview(self.payload)[:length]], offset)
        finally:
            os.close(fd)
        return self.file_bytes

    def turn(self, session: int, new_chunks: int) -> int:
        """A turn: ``new_chunks`` new files, then the oldest dropped; the bytes written."""
        with self.locks[session]:
            written = 0
            for _ in range(new_chunks):
                number = self.chunks[session][-1] + 1
                written += self.write(session, number)
                self.chunks[session].append(number)
            while len(self.chunks[session]) > self.workload.chunks:
                os.unlink(self.path(session, self.chunks[session].popleft()))
            return written

    def context(self, session: int) -> list[str]:
        with self.locks[session]:
            return [self.path(session, c) for c in self.chunks[session]]


class _Fleet:
    """The other nodes (``--hosts``, each running ``fio --server``), loading T3 while a level
    runs here: their files laid out once, then per level ``readers`` fio jobs on each,
    started before the level and finished after it."""

    def __init__(self, host: Host, scratch: Path, options: CapacityOptions,
                 progress: Callable[[str], None]) -> None:  # fmt: skip
        spawn = getattr(host, "spawn", None)
        if spawn is None:
            raise InputError("--hosts needs a live machine to run fio's client from")
        self.host, self.spawn, self.options = host, spawn, options
        self.folders = []
        for index in range(len(options.hosts)):
            folder = scratch / f"client{index}"  # each node its own: no two write one file
            folder.mkdir()
            self.folders.append(folder)
        total = len(options.hosts) * FLEET_FILES * FLEET_FILE_BYTES
        progress(f"laying out the fleet's files ({total / 2**30:,.1f} GiB over"
                 f" {len(options.hosts)} nodes)")  # fmt: skip
        done = self.host.run("fio_fleet_layout", self._argv("layout", 1, 0.0, layout=True),
                             timeout_s=60 + total / 100e6)  # fmt: skip
        self._read(done)

    def _argv(self, name: str, readers: int, seconds: float, *, layout: bool = False) -> list[str]:
        argv = ["fio", "--output-format=json", "--eta=never"]
        for index, (server, folder) in enumerate(zip(self.options.hosts, self.folders,
                                                     strict=True)):  # fmt: skip
            job = folder.parent / f"kvtool-fleet-{name}-{index}.fio"
            job.write_text(fleet_job(
                str(folder), file_bytes=FLEET_FILE_BYTES, numjobs=readers, block_bytes=IO_BLOCK,
                runtime_s=seconds, direct=self.options.direct, layout=layout,
            ))  # fmt: skip
            argv += [f"--client={server}", str(job)]
        return argv

    def _read(self, done: CommandResult) -> float:
        """The fleet's read bandwidth from fio's document; InputError for a run that failed."""
        try:
            document = json_document(done.stdout)
            entries = document.get("client_stats") or document.get("jobs") or []
            for entry in entries:
                if isinstance(entry, dict) and entry.get("error"):
                    raise FioError(int(entry["error"]), f"fio job failed with error"
                                   f" {entry['error']}")  # fmt: skip
        except (ValueError, FioError) as exc:
            servers_unreachable(done)
            last = (done.stderr or done.stdout).strip().splitlines()
            raise InputError(
                f"the fleet's fio did not run ({exc})",
                (last[-1] if last else "")
                or "start fio --server on every host in --hosts (port 8765 unless given)",
            ) from None
        total = next((e for e in entries if e.get("jobname") == "All clients"), None)
        hosts = [e for e in entries if isinstance(e, dict) and e.get("jobname") == "seq_read"]
        if total is not None:
            return float(total.get("read", {}).get("bw_bytes", 0))
        return float(sum(e.get("read", {}).get("bw_bytes", 0) for e in hosts))

    def around(self, readers: int, run: Callable[[], Level]) -> Level:
        """``run()`` (a level here) while every node reads with ``readers`` jobs."""
        seconds = self.options.duration_s + 3  # under way before the level, past its end
        load = self.spawn("fio_fleet", self._argv(str(readers), readers, seconds))
        try:
            time.sleep(1.0)  # the clients reach their servers and start
            level = run()
            done = load.finish(timeout_s=seconds + 60)
        except BaseException:
            load.stop()
            raise
        return level._replace(fleet_bytes_per_s=self._read(done))


def _aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned buffer (anonymous mmap): O_DIRECT needs aligned memory."""
    return mmap.mmap(-1, max(size, mmap.PAGESIZE))


_BUFFERS = threading.local()


def _read_file(path: str, file_bytes: int, direct: bool) -> int:
    """Read one chunk file to its end, ``IO_BLOCK`` at a time; the bytes read."""
    buffer = getattr(_BUFFERS, "buffer", None)
    if buffer is None:
        buffer = _BUFFERS.buffer = _aligned_buffer(IO_BLOCK)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECT if direct else 0))
    try:
        offset = 0
        view = memoryview(buffer)
        while offset < file_bytes:
            got = os.preadv(fd, [view[: min(IO_BLOCK, file_bytes - offset)]], offset)
            if got <= 0:
                break
            offset += got
        return offset
    finally:
        os.close(fd)


def _level(files: _Files, n: int, workload: Workload, options: CapacityOptions) -> Level:
    """``n`` sessions for ``options.duration_s``: restore, write a turn, pause, again. A session
    starts with a restore (a returning user), its chunk files read ``restore_parallel`` at a
    time by readers of its own; restores begun before the end are finished and counted, and
    every session restores at least once."""
    restore_s: list[float] = []
    totals = {"read": 0, "files": 0, "written": 0}
    lock = threading.Lock()
    failures: list[BaseException] = []
    stop = threading.Event()
    rng = random.Random(options.seed * 1_000_003 + n)
    offsets = [rng.randrange(max(1, len(workload.turns))) for _ in range(n)]
    # with a trace's pauses, each session's first return falls at a random moment within its
    # first pause (or the level), as returning users' do; a closed loop starts all at once
    firsts = [rng.uniform(0, min(workload.turn(o).think_s, options.duration_s)) if workload.turns
              else 0.0 for o in offsets]  # fmt: skip
    start = time.monotonic()
    deadline = start + options.duration_s

    def read(path: str) -> int:
        return _read_file(path, files.file_bytes, files.direct)

    def session(index: int) -> None:
        turn_index = offsets[index]
        try:
            if firsts[index] > 0:
                stop.wait(firsts[index])
            with ThreadPoolExecutor(max_workers=workload.restore_parallel) as readers:
                restored = 0
                while not stop.is_set() and (not restored or time.monotonic() < deadline):
                    restored += 1
                    paths = files.context(index)
                    began = time.perf_counter()
                    done = list(readers.map(read, paths))
                    took = time.perf_counter() - began
                    turn = workload.turn(turn_index)
                    turn_index += 1
                    written = files.turn(index, workload.turn_chunks(turn))
                    with lock:
                        restore_s.append(took)
                        totals["read"] += sum(done)
                        totals["files"] += len(done)
                        totals["written"] += written
                    pause = min(turn.think_s, max(0.0, deadline - time.monotonic()))
                    if pause > 0:
                        stop.wait(pause)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            stop.set()

    _run_all([functools.partial(session, i) for i in range(n)], stop)
    seconds = time.monotonic() - start
    if failures:
        exc = failures[0]
        if isinstance(exc, OSError):
            raise InputError(f"a session's I/O failed: {exc}", "check the folder and its space")
        raise exc
    return level_of(n, restore_s, bytes_read=totals["read"], files_read=totals["files"],
                    bytes_written=totals["written"], seconds=seconds)  # fmt: skip


def _run_all(work: Sequence[Callable[[], None]], stop: threading.Event) -> None:
    """Run each of ``work`` in a thread of its own and wait for all of them. On Ctrl-C (or
    SIGTERM, SIGHUP) ``stop`` is set and every one is waited for before the signal goes on,
    so no thread writes into the scratch folder while the clean-up removes it. Each thread
    says it is done through an event of its own: a ``Thread.join`` cut short by a signal can
    leave the thread marked finished while it still runs (CPython 3.11)."""
    done = [threading.Event() for _ in work]

    def run(index: int) -> None:
        try:
            work[index]()
        finally:
            done[index].set()

    started = 0
    try:
        for index in range(len(work)):
            threading.Thread(target=run, args=(index,), daemon=True).start()
            started += 1
        for event in done:
            while not event.wait(0.2):
                pass
    except BaseException:
        stop.set()
        for event in done[:started]:
            while not event.wait(0.2):
                pass
        raise


def _read_loop(files: _Files, concurrency: int, duration_s: float) -> float:
    """The harness's own read throughput: ``concurrency`` threads reading the sessions' chunk
    files back to back for ``duration_s``; bytes per second."""
    sessions = len(files.chunks)
    total = [0] * concurrency
    stopped = threading.Event()
    deadline = time.monotonic() + duration_s

    def reader(index: int) -> None:
        paths = files.context(index % sessions)
        k = index // sessions
        while not stopped.is_set() and time.monotonic() < deadline:
            total[index] += _read_file(paths[k % len(paths)], files.file_bytes, files.direct)
            k += 1

    start = time.monotonic()
    _run_all([functools.partial(reader, i) for i in range(concurrency)], stopped)
    return sum(total) / max(time.monotonic() - start, 1e-9)


def _fio_check(
    host: Host, scratch: Path, files: _Files, n: int, workload: Workload,
    options: CapacityOptions, progress: Callable[[str], None],
) -> FioCheck:  # fmt: skip
    """Raw fio and the harness, reading at the same block and concurrency, one after the
    other, twice (A B A B), in the same run; each side's mean. (fio lays its own files out in
    the scratch folder first, untimed.)"""
    concurrency = min(MAX_THREADS, n * workload.restore_parallel)
    block = min(files.file_bytes, IO_BLOCK)
    seconds = max(3.0, min(options.duration_s, 10.0))
    size = min(n * workload.session_bytes, 4 * 2**30)
    fio_dir = scratch / "fio"
    fio_dir.mkdir()
    job = T3Options(block_bytes=block, threads=concurrency, iodepth=1, duration_s=seconds,
                    size_bytes=max(size, concurrency * block), direct=options.direct,
                    ops=("seq_read",), gds=False, small_blocks=(), file_ops=False)  # fmt: skip
    fio_rates, harness_rates = [], []
    for round_ in (1, 2):  # A B A B: the machine's drift falls on both
        progress(f"raw fio ({round_}/2): {concurrency:,} jobs of {block / 2**20:,.2f} MiB"
                 f" reads, {seconds:g} s")  # fmt: skip
        (result,) = run_t3(host, str(fio_dir), job)
        fio_rates.append(result.bytes_per_s or 0.0)
        progress(f"the harness ({round_}/2): {concurrency:,} readers, {seconds:g} s")
        harness_rates.append(_read_loop(files, concurrency, seconds))
    return FioCheck(concurrency, block, sum(harness_rates) / 2, sum(fio_rates) / 2)


def level_rows(levels: Sequence[Level]) -> list[dict[str, float | int | None]]:
    """The levels as JSON rows (sorted by sessions)."""
    return [
        {
            "sessions": lv.sessions,
            "restores": lv.restores,
            "restore_p50_s": lv.restore_p50_s,
            "restore_p95_s": lv.restore_p95_s,
            "restore_p99_s": lv.restore_p99_s,
            "bytes_per_s": lv.bytes_per_s,
            "files_per_s": lv.files_per_s,
            "write_bytes_per_s": lv.write_bytes_per_s,
            "seconds": lv.seconds,
            "fleet_bytes_per_s": lv.fleet_bytes_per_s,
        }
        for lv in sorted(levels, key=lambda lv: lv.sessions)
    ]

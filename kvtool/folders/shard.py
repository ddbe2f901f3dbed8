"""``kvtool gc --shard K/N``: N cooperating runs (N nodes, or a Kubernetes Indexed Job's N
pods) split one folder so that together they do what one run would.

**The split.** A file belongs to the shard ``key mod N``, where ``key`` is its chunk's id: 64
bits of BLAKE2b of the chunk's identity as its layout defines it (``gc_plan.chunk_id`` of
``layouts.Match.chunk``: LMCache's hash and salt, SGLang's page, vLLM's block hash...), so
every rank, group, layer and pool file of one chunk lands in one shard, wherever its folder,
on every node alike (BLAKE2b, not Python's per-process ``hash``). A file that is no chunk's
(a config, a temporary naming none, a file of no known layout) goes by the id of its path,
so each file is counted by exactly one shard. Each shard lists every name (no ``stat``),
and reads and removes only its own files.

**The limits.** ``--max-age`` needs nothing more: its cut-off is the same in every shard.
``--max-size`` and ``--keep-free`` cap the whole folder, and a shard sees 1/N of it, so the
shards of one run agree on one cut-off first (``Exchange``): each writes its removable chunks
(newest use, id, bytes, allocated bytes: 32 bytes a chunk) and its totals to
``DIR/.kvtool-gc.shards/<run>/K-of-N``, waits until all N have, and computes from all of
them the one cut the unsharded run would make (``select.cut_of``: the same ranking, oldest
first and the smaller id first among equally old ones, the same limits over the summed
bytes, the earliest clock and the least free space any shard saw). Each shard then removes
its own chunks ranked at or before that cut: together exactly the unsharded selection, and
no file in two shards. Dividing the caps by each shard's share of the bytes was the other
way offered; it is not exact (each shard's oldest chunks are not the folder's oldest), so it
is not used.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import struct
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from kvtool.errors import InputError
from kvtool.folders.select import Cut, Limits, Ranked, cut_of
from kvtool.folders.walk import SHARDS_NAME, Root

WAIT_S = 1800.0  # how long a shard waits for the others' summaries
STALE_S = 86400.0  # a run's summaries this old are removed by the next run
_MAX_SUMMARY = 1 << 31
_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HEADER = struct.Struct("<Q")


class Shard(NamedTuple):
    """Shard ``k`` (0-based, as Kubernetes' JOB_COMPLETION_INDEX) of ``n``."""

    k: int
    n: int

    def owns(self, key: int) -> bool:
        return key % self.n == self.k

    @property
    def label(self) -> str:
        return f"{self.k}/{self.n}"


def parse_shard(text: str) -> Shard:
    """``K/N`` (``--shard 3/8``): K from 0 to N-1."""
    m = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if m is None:
        raise InputError(
            f"--shard {text!r} is not K/N", "give the shard's index and the count, e.g. --shard 0/4"
        )
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or k >= n:
        raise InputError(
            f"--shard {text}: K must be 0 to N-1",
            "the N runs take 0/N, 1/N, ... N-1/N (Kubernetes' JOB_COMPLETION_INDEX counts from 0)",
        )
    return Shard(k, n)


def check_run(text: str) -> str:
    """A run's name (``--shard-run``): letters, digits, ``.``, ``_`` and ``-``."""
    if not _RUN.match(text):
        raise InputError(
            f"--shard-run {text!r} is not a run name",
            "use letters, digits, '.', '_' and '-' (a Kubernetes Job's name is one)",
        )
    return text


class ShardWait(Exception):
    """The shards of a run could not agree (one did not report in time, or reported other
    limits): exit 1, nothing removed."""


class Summary(NamedTuple):
    """What a shard tells the others."""

    shard: Shard
    clock: float
    free_bytes: int
    limits: Limits
    ranked: Ranked


def encode(summary: Summary) -> bytes:
    """The summary as bytes: a JSON header's length, the header, then four arrays."""
    import numpy as np

    r = summary.ranked
    header = json.dumps({
        "k": summary.shard.k, "n": summary.shard.n, "clock": summary.clock,
        "free_bytes": summary.free_bytes, "limits": list(summary.limits), "total": r.total,
        "chunks": len(r.ids),
    }).encode()  # fmt: skip
    arrays = [
        np.ascontiguousarray(r.newest, np.float64), np.ascontiguousarray(r.ids, np.int64),
        np.ascontiguousarray(r.bytes, np.int64), np.ascontiguousarray(r.allocated, np.int64),
    ]  # fmt: skip
    return _HEADER.pack(len(header)) + header + b"".join(a.tobytes() for a in arrays)


def decode(data: bytes, *, where: str) -> Summary:
    """A summary another shard wrote; ShardWait when it is not one."""
    import numpy as np

    try:
        (length,) = _HEADER.unpack_from(data)
        head = json.loads(data[8 : 8 + length])
        chunks = int(head["chunks"])
        body = data[8 + length :]
        if chunks < 0 or len(body) != 32 * chunks:
            raise ValueError("arrays cut short")
        part = 8 * chunks
        ints = [np.frombuffer(body, np.int64, chunks, part * i) for i in (1, 2, 3)]
        newest = np.frombuffer(body, np.float64, chunks, 0)
        ranked = Ranked(newest, ints[0], ints[1], ints[2], int(head["total"]))
        limits = Limits(*head["limits"])
        return Summary(
            Shard(int(head["k"]), int(head["n"])), float(head["clock"]), int(head["free_bytes"]),
            limits, ranked,
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise ShardWait(f"{where} is not a shard summary kvtool gc wrote ({exc})") from None


def agree(summaries: list[Summary], limits: Limits) -> Cut:
    """The one cut every shard of the run computes alike from all N summaries."""
    import numpy as np

    def joined(field: str, dtype: Any) -> Any:
        parts = [getattr(s.ranked, field) for s in summaries]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    return cut_of(
        joined("newest", np.float64), joined("ids", np.int64), joined("bytes", np.int64),
        joined("allocated", np.int64), now=min(s.clock for s in summaries), limits=limits,
        total=sum(s.ranked.total for s in summaries),
        free_bytes=min(s.free_bytes for s in summaries),
    )  # fmt: skip


class Exchange:
    """The shards' meeting place in the folder, ``.kvtool-gc.shards/<run>/``, made and read
    relative to the folder's open handle (never by path), as the lock is."""

    def __init__(self, root: Root, shard: Shard, run: str, *, wait_s: float = WAIT_S) -> None:
        self.root = root
        self.shard = shard
        self.run = check_run(run)
        self.wait_s = wait_s

    def agree(self, mine: Summary, tick: Callable[[], None] | None = None) -> Cut:
        """Write this shard's summary, wait for the others' (refreshing the lock with
        ``tick``), and return the cut they all compute."""
        folder = self._folder()
        try:
            self._write(folder, f"{self.shard.k}-of-{self.shard.n}", encode(mine))
            deadline = time.monotonic() + self.wait_s
            summaries: dict[int, Summary] = {self.shard.k: mine}
            while len(summaries) < self.shard.n:
                for k in range(self.shard.n):
                    if k not in summaries:
                        found = self._read(folder, f"{k}-of-{self.shard.n}")
                        if found is not None:
                            summaries[k] = self._check(found, mine, k)
                if len(summaries) == self.shard.n:
                    break
                if time.monotonic() > deadline:
                    missing = sorted(set(range(self.shard.n)) - set(summaries))
                    raise ShardWait(
                        f"shard {self.shard.label} of run {self.run}: shards"
                        f" {', '.join(map(str, missing))} did not report within"
                        f" {self.wait_s / 60:.0f} min: nothing removed"
                    )
                if tick is not None:
                    tick()
                time.sleep(0.2)
            return agree([summaries[k] for k in range(self.shard.n)], mine.limits)
        finally:
            os.close(folder)

    def _check(self, found: Summary, mine: Summary, k: int) -> Summary:
        if found.shard != Shard(k, self.shard.n) or found.limits != mine.limits:
            raise ShardWait(
                f"shard {k}/{self.shard.n} of run {self.run} ran with other limits or another"
                f" shard count: give every shard of a run the same options (nothing removed)"
            )
        return found

    def _folder(self) -> int:
        """``.kvtool-gc.shards/<run>``, made if need be; older runs' folders are removed."""
        top = _mkdir_at(self.root.fd, SHARDS_NAME)
        try:
            _sweep(top, keep=self.run)
            return _mkdir_at(top, self.run)
        finally:
            os.close(top)

    @staticmethod
    def _write(folder: int, name: str, data: bytes) -> None:
        """Whole or not at all: a private file, synced, renamed to ``name``."""
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o644, dir_fd=folder)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise InputError(
                f"cannot write the shard summary {SHARDS_NAME}/…/{name}: {exc.strerror or exc}",
                "the shards of a run meet in the folder itself: run them as a user who may write"
                " there",
            ) from None

    def _read(self, folder: int, name: str) -> Summary | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ShardWait(f"cannot read shard summary {name}: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SUMMARY:
                raise ShardWait(f"{name} in {SHARDS_NAME} is not a shard summary")
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
        finally:
            os.close(fd)
        return decode(data, where=name)


def _mkdir_at(parent: int, name: str) -> int:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ShardWait(f"{name} is not a folder kvtool gc made: nothing removed") from None
        raise InputError(f"cannot make {name}: {exc.strerror or exc}") from None


def _sweep(top: int, *, keep: str) -> None:
    """Remove the folders of runs that ended a day ago or more (their summaries only)."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(top) as entries:
        old = [
            e.name for e in entries
            if e.name != keep and e.is_dir(follow_symlinks=False)
            and now - e.stat(follow_symlinks=False).st_mtime > STALE_S
        ]  # fmt: skip
    for name in old:
        with contextlib.suppress(OSError):
            fd = os.open(name, _FOLDER, dir_fd=top)
            try:
                for entry in os.listdir(fd):
                    with contextlib.suppress(OSError):
                        os.unlink(entry, dir_fd=fd)
            finally:
                os.close(fd)
            os.rmdir(name, dir_fd=top)

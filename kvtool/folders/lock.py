"""gc's lock on a shared folder: one run at a time, on every node that mounts it.

The lock is a small regular file, ``.kvtool-gc.lock``, in the folder, made relative to the
folder's open handle:

* **Taken atomically.** The holder's facts are written to a file of its own (``O_CREAT |
  O_EXCL | O_NOFOLLOW``), which is then ``link``-ed to the lock's name: a link fails when the
  name exists, atomically on every file system (NFS and Lustre included, where ``flock`` is
  coherent across nodes only with FSx's ``flock`` mount option), and a reader never sees half
  of the facts.
* **Refreshed** (its time set through the holder's own handle) at least every ``REFRESH_S``
  while a run lasts, in both walks; at each refresh the holder checks that the name still
  holds its file, and stops (``Lost``) when it does not.
* **Taken over when stale**: not refreshed for ``STALE_S``, or held by a process of this
  machine (same host, boot and pid namespace) that no longer runs. Exactly one of several
  racing takers wins: a stale lock is known by its generation (inode and modification time);
  each taker must first create the marker ``.kvtool-gc.lock.take-<generation>-0`` with
  ``O_EXCL`` (one creator wins), then finds the lock still of that generation, moves it
  aside, checks that what it moved is that generation (else puts it back), and only then
  takes the lock as a fresh run would. A marker left by a taker that was killed mid-way
  (older than ``TAKE_S``) is passed over by creating the next level's marker, ``-1``, so one
  taker still wins.
* **Never anything else.** Whatever lies at the lock's name that is not a small regular file
  (a FIFO, a link, a folder, a device, a large file) is not this lock: ``NotOurs``, naming
  what it is, and nothing is read from it (a FIFO would block). The facts in a lock are
  parsed defensively: a damaged lock is not an error, it goes stale by its age.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import socket
import stat
import time
from typing import Any

from kvtool.errors import escape_name
from kvtool.files import file_kind
from kvtool.folders.walk import LOCK_NAME, Root
from kvtool.scratch import process_start

STALE_S = 600.0  # a lock not refreshed for ten minutes is taken over
REFRESH_S = 30.0
TAKE_S = 60.0  # a takeover marker this old was left by a taker that died mid-way
MAX_LOCK_BYTES = 4096
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LockProblem(Exception):
    """gc could not hold the folder's lock: exit 1, nothing (more) removed."""


class Busy(LockProblem):
    """Another gc holds the folder's lock (the message describes the holder)."""


class NotOurs(LockProblem):
    """Something that is not gc's lock lies at the lock's name."""


class Lost(LockProblem):
    """The lock this run held was taken over or removed while it ran."""


def _machine() -> dict[str, Any]:
    """What tells this machine's processes apart from another's: host, boot and pid
    namespace (containers on one host share a boot id but may not share pids)."""
    facts: dict[str, Any] = {"host": socket.gethostname()}
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id", "rb") as f:
        facts["boot_id"] = f.read(64).decode("ascii", "replace").strip()
    with contextlib.suppress(OSError):
        facts["pid_ns"] = os.readlink("/proc/self/ns/pid")
    return facts


def parse_holder(data: bytes) -> dict[str, Any]:
    """The facts in a lock file's bytes, each kept only when it has the type and range a lock
    gc wrote would have: never an exception, whatever the bytes (a damaged or hostile lock
    simply says less, and goes stale by its age)."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return {}
    if not isinstance(raw, dict):
        return {}
    holder: dict[str, Any] = {}
    for key in ("host", "boot_id", "pid_ns", "pid_start"):
        value = raw.get(key)
        if isinstance(value, str) and 0 < len(value) <= 255:
            holder[key] = value
    pid = raw.get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31:
        holder["pid"] = pid
    started = raw.get("started")
    if (
        isinstance(started, int | float)
        and not isinstance(started, bool)
        and math.isfinite(started)
        and 0 <= started < 2**33
    ):
        holder["started"] = float(started)
    return holder


def describe(holder: dict[str, Any]) -> str:
    """The holder in words, every field from the file escaped."""
    started = holder.get("started")
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "?"
    host = escape_name(holder["host"]) if "host" in holder else "?"
    return f"host {host}, pid {holder.get('pid', '?')}, since {since}"


class Lock:
    """The folder's gc lock: ``acquire`` (or ``Busy``/``NotOurs``), ``refresh`` often (cheap:
    it acts every ``REFRESH_S``), ``release`` at the end (register it with the clean-up door,
    so it runs however the run ends)."""

    def __init__(self, root: Root, *, name: str = LOCK_NAME) -> None:
        self.root = root
        self.name = name  # a shard of a run holds its own (``shard_lock_name``)
        self._fd = -1  # the held lock file's own handle
        self._ino = 0
        self._refreshed = 0.0

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> None:
        try:
            self._acquire()
        except OSError as exc:  # a folder that will not take a new file (quota, read-only)
            raise LockProblem(
                f"cannot make {self.name}: {exc.strerror or exc}: nothing removed"
            ) from None

    def _acquire(self) -> None:
        for _attempt in range(4):
            if self._create():
                return
            try:
                info = os.stat(self.name, dir_fd=self.root.fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # released just now: try again
            holder = self._read(info)
            if not self._stale(holder):
                raise Busy(describe(holder))
            if self._take_over(info):
                return
        raise Busy(describe(self._holder_now()))

    def _holder_now(self) -> dict[str, Any]:
        try:
            info = os.stat(self.name, dir_fd=self.root.fd, follow_symlinks=False)
        except OSError:
            return {}
        return self._read(info)

    def _create(self) -> bool:
        """Put this run's lock in place, if the name is free: True when it is there."""
        facts = {**_machine(), "pid": os.getpid(), "started": time.time()}
        start = process_start(os.getpid())
        if start is not None:
            facts["pid_start"] = start
        mine = f"{self.name}.{os.getpid()}.{secrets.token_hex(6)}"
        fd = os.open(mine, _NEW, 0o644, dir_fd=self.root.fd)
        try:
            os.write(fd, (json.dumps(facts) + "\n").encode())
            with contextlib.suppress(FileExistsError):
                os.link(
                    mine, self.name, src_dir_fd=self.root.fd, dst_dir_fd=self.root.fd,
                    follow_symlinks=False,
                )  # fmt: skip
                self._fd = fd
        finally:
            with contextlib.suppress(OSError):
                os.unlink(mine, dir_fd=self.root.fd)
            if self._fd != fd:
                os.close(fd)
        if self._fd != fd:
            return False
        self._ino = os.fstat(fd).st_ino
        self._refreshed = time.monotonic()
        return True

    def _read(self, info: os.stat_result) -> dict[str, Any]:
        """The holder's facts, read only from a small regular file (``NotOurs`` otherwise),
        with its age."""
        what = None
        if not stat.S_ISREG(info.st_mode):
            what = f"a {file_kind(info.st_mode)}"
        elif info.st_size > MAX_LOCK_BYTES:
            what = f"a file of {info.st_size:,} bytes"
        if what is not None:
            raise NotOurs(f"{self.name} is {what}, not a lock kvtool gc made")
        data = b""
        with contextlib.suppress(OSError):
            fd = os.open(self.name, _READ, dir_fd=self.root.fd)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    data = os.read(fd, MAX_LOCK_BYTES + 1)
            finally:
                os.close(fd)
        holder = parse_holder(data[:MAX_LOCK_BYTES])
        holder["age"] = max(0.0, time.time() - info.st_mtime)
        return holder

    @staticmethod
    def _stale(holder: dict[str, Any]) -> bool:
        if holder["age"] > STALE_S:
            return True
        here = _machine()
        same_machine = holder.get("host") == here["host"] and all(
            holder.get(key) == here.get(key) for key in ("boot_id", "pid_ns") if key in holder
        )
        if not same_machine or "pid" not in holder:
            return False
        start = process_start(holder["pid"])
        if start is None:
            return True  # no such process here
        return "pid_start" in holder and holder["pid_start"] != start  # the pid was reused

    def _take_over(self, info: os.stat_result) -> bool:
        """Take the stale lock ``info`` over, as the one taker of its generation: True when
        this run now holds the lock."""
        generation = f"{info.st_ino}-{info.st_mtime_ns}"
        marker = None
        for level in range(64):
            name = f"{self.name}.take-{generation}-{level}"
            try:
                os.close(os.open(name, _NEW, 0o644, dir_fd=self.root.fd))
            except FileExistsError:
                try:
                    age = (
                        time.time()
                        - os.stat(name, dir_fd=self.root.fd, follow_symlinks=False).st_mtime
                    )
                except FileNotFoundError:
                    age = 0.0
                if age > TAKE_S:
                    continue  # its taker died mid-way: the next level decides
                return False  # another taker is at it
            marker = name
            break
        if marker is None:
            return False
        try:
            return self._replace(info)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(marker, dir_fd=self.root.fd)

    def _replace(self, info: os.stat_result) -> bool:
        """Move the stale lock aside, if it is still the generation ``info`` names, and take
        the lock."""
        fd = self.root.fd
        try:
            now = os.stat(self.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return self._create()
        if (now.st_ino, now.st_mtime_ns) != (info.st_ino, info.st_mtime_ns):
            return False  # refreshed, released or taken since it was judged stale
        aside = f"{self.name}.stale-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            os.rename(self.name, aside, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            return self._create()
        try:
            moved = os.stat(aside, dir_fd=fd, follow_symlinks=False)
            if (moved.st_ino, moved.st_mtime_ns) != (info.st_ino, info.st_mtime_ns):
                # a live holder's lock replaced the stale one in between: put it back
                with contextlib.suppress(FileExistsError):
                    os.link(aside, self.name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(aside, dir_fd=fd)
        return self._create()

    def refresh(self) -> None:
        """Every ``REFRESH_S`` at most: set the lock's time through this run's own handle (so
        other nodes see the run is alive), and check the name still holds this run's file
        (``Lost`` otherwise)."""
        if not self.held or time.monotonic() - self._refreshed < REFRESH_S:
            return
        self._refreshed = time.monotonic()
        with contextlib.suppress(OSError):
            os.utime(self._fd)
        try:
            now = os.stat(self.name, dir_fd=self.root.fd, follow_symlinks=False).st_ino
        except OSError:
            now = -1
        if now != self._ino:
            self._close()
            raise Lost(
                f"{self.name} no longer holds this run's lock (taken over or removed while it"
                " ran): stopped"
            )

    def release(self) -> None:
        """Remove the lock, if the name still holds this run's file."""
        if not self.held:
            return
        with contextlib.suppress(OSError):
            now = os.stat(self.name, dir_fd=self.root.fd, follow_symlinks=False)
            if now.st_ino == self._ino and now.st_dev == os.fstat(self._fd).st_dev:
                os.unlink(self.name, dir_fd=self.root.fd)
        self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def shard_lock_name(k: int, n: int) -> str:
    """The lock of shard ``k`` of ``n`` (``--shard K/N``): each shard holds its own, so N runs
    work at once, and two runs of one shard never do."""
    return f"{LOCK_NAME}.shard-{k}-of-{n}"

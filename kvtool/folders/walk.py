"""Walk a KV folder through open directory handles: every file below it once, with its size
and times, in bounded memory, never outside it.

Everything is relative to handles, as ``shutil.rmtree`` works on Linux and coreutils ``rm``
through fts: the folder is opened once (``Root``), every folder below it is opened from its
parent's handle with ``O_NOFOLLOW`` (``os.open(name, dir_fd=parent)``), listed from that handle
(``os.scandir(fd)``) and its files are stat'ed from it (``follow_symlinks=False``). A path is
never resolved again, so a folder swapped for a symbolic link while the walk runs is met as a
link (``ELOOP``) and skipped, not followed. Nor does the walk leave the folder's file system or
mount: a folder whose device differs from the root's, or whose mount id (``mnt_id`` in
``/proc/self/fdinfo``: a bind mount of the same file system has the same device) does, is a
mount point, reported and not entered. Folders deeper than ``MAX_DEPTH`` are reported, not
entered (no engine nests that deep; an attacker's chain of folders would exhaust handles).
One folder is listed at a time, lazily (a folder of millions of names is never held as a
list), so open handles grow with depth only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from kvtool.errors import InputError

LOCK_NAME = ".kvtool-gc.lock"  # gc's lock on a shared folder: never counted, never removed
SHARDS_NAME = ".kvtool-gc.shards"  # where the shards of a gc run meet (folders/shard.py)
MAX_DEPTH = 64  # folders below the root; engines nest five at most
O_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_KEEP = 10  # how many example names each kind of skipped entry keeps


class Seen(NamedTuple):
    """One file as the walk found it."""

    folder: tuple[str, ...]  # its folder below the root, as parts
    name: str
    size: int  # bytes, as ls shows them
    allocated: int  # bytes the file system holds for it (st_blocks x 512)
    atime: float
    mtime: float
    ino: int
    links: int = 1  # st_nlink: more than one means another name elsewhere holds the data
    ctime: float = 0.0  # the inode's last change: a file moved, copied with -p or restored


def mount_id(fd: int) -> int | None:
    """The mount a handle lies on (``mnt_id`` in ``/proc/self/fdinfo``, Linux 3.15 and
    later), or None where /proc cannot tell."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
            text = f.read(4096)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(b"mnt_id:"):
            try:
                return int(line.split(b":", 1)[1])
            except ValueError:
                return None
    return None


class _Statx:
    """``statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID)`` through glibc (Linux 5.8 and later):
    a folder's device and mount id in one system call, where reading ``/proc/self/fdinfo``
    costs an open, a read and a close (a vLLM tier has nearly a folder per file). ``where``
    returns None when the kernel or C library cannot say, and the walk falls back."""

    AT_EMPTY_PATH = 0x1000
    STATX_MNT_ID = 0x1000
    STATX_INO = 0x100

    def __init__(self) -> None:
        import ctypes
        import struct

        self._unpack = struct.Struct("<I").unpack_from
        self._dev = struct.Struct("<II Q").unpack_from  # dev major, minor; mnt_id (at 136)
        self._buf = ctypes.create_string_buffer(256)
        self._call: Callable[..., int] | None
        try:
            self._call = ctypes.CDLL(None, use_errno=True).statx
        except (OSError, AttributeError):
            self._call = None

    def where(self, fd: int) -> tuple[int, int] | None:
        """(device, mount id) of the open handle ``fd``."""
        if self._call is None:
            return None
        if self._call(fd, b"", self.AT_EMPTY_PATH, self.STATX_MNT_ID, self._buf) != 0:
            return None
        if not self._unpack(self._buf, 0)[0] & self.STATX_MNT_ID:
            return None
        major, minor, mount = self._dev(self._buf, 136)
        return os.makedev(major, minor), mount


_STATX: _Statx | None = None


def _statx() -> _Statx:
    global _STATX
    if _STATX is None:
        _STATX = _Statx()
    return _STATX


class Root:
    """The folder, held open: walks, removals and the lock all work relative to this handle,
    so renaming the path or swapping a link into it while a run lasts changes nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, O_FOLDER)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError(
                    f"{path} is a symbolic link", "give the folder it points to"
                ) from None
            if exc.errno == errno.ENOTDIR:
                raise InputError(f"{path} is not a folder", "give the engine's KV folder") from None
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        info = os.fstat(self.fd)
        self.dev = info.st_dev
        self.ino = info.st_ino
        self._statx = _statx()
        where = self._statx.where(self.fd)
        self.by_statx = where is not None and where[0] == self.dev
        self.mount = where[1] if where is not None and self.by_statx else mount_id(self.fd)

    def on_root_mount(self, fd: int) -> bool:
        """Whether the opened folder ``fd`` lies on the root's file system and mount (its
        device, and its mount id: a bind mount of the same file system has the root's
        device)."""
        if self.by_statx:
            where = self._statx.where(fd)
            if where is not None:
                return where == (self.dev, self.mount)
        if os.fstat(fd).st_dev != self.dev:
            return False
        return self.mount is None or mount_id(fd) == self.mount

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Level:
    """One open folder on the walk's path down."""

    __slots__ = ("count", "entries", "fd", "folder")

    def __init__(self, fd: int, entries: Iterator[os.DirEntry[str]], folder: tuple[str, ...]):
        self.fd = fd
        self.entries = entries
        self.folder = folder
        self.count = 0


class Walk:
    """Iterate over ``root``'s regular files (``Seen``); afterwards ``links``, ``other``
    (sockets, FIFOs, devices), ``unreadable`` (folders that could not be opened or listed),
    ``mounts`` (folders on another mount, not entered), ``too_deep`` and ``per_folder`` (the
    largest file counts per folder, as (count, folder)) say what else was met. ``progress(files,
    bytes)`` is called every ``every`` files, ``tick()`` at every folder and every 256 files
    (gc refreshes its lock there), ``folders(parts)`` before each folder below the root is
    opened (False: it is passed over; gc's second walk enters only the folders its plan
    chose files in). ``names_only`` yields regular files by the listing's file
    type without a ``stat`` each (sizes and times 0): for a walk that stats only the files it
    picks (gc's second). ``want(folder, name)``, when given, is asked of every other name
    before its ``stat``: False passes it over unread (``passed`` counts them: a shard's walk
    reads only its own files). ``folder_fd`` is the handle of the folder of the file last
    yielded."""

    def __init__(
        self,
        root: Root | Path,
        *,
        progress: Callable[[int, int], None] | None = None,
        every: int = 20000,
        top_folders: int = 5,
        names_only: bool = False,
        tick: Callable[[], None] | None = None,
        folders: Callable[[tuple[str, ...]], bool] | None = None,
        want: Callable[[tuple[str, ...], str], bool] | None = None,
    ) -> None:
        self._given = root  # a Path is opened (and closed) by each iteration
        self.root = root if isinstance(root, Root) else None
        self.links: list[str] = []
        self.link_count = 0
        self.other = 0
        self.unreadable: list[str] = []
        self.unreadable_count = 0
        self.mounts: list[str] = []
        self.too_deep: list[str] = []
        self.per_folder: list[tuple[int, str]] = []
        self.folders = 0
        self.folder_fd = self.root.fd if self.root is not None else -1
        self._progress = progress
        self._every = every
        self._top = top_folders
        self._names_only = names_only
        self._tick = tick or (lambda: None)
        self._folders = folders
        self._want = want
        self.passed = 0  # names ``want`` passed over, unread

    def __iter__(self) -> Iterator[Seen]:
        if isinstance(self._given, Root):
            yield from self._walk(self._given)
            return
        with Root(self._given) as root:
            self.root = root
            yield from self._walk(root)

    def _walk(self, root: Root) -> Iterator[Seen]:
        try:
            entries = os.scandir(root.fd)
        except OSError as exc:
            raise InputError(f"cannot read {root.path}: {exc.strerror or exc}") from None
        stack = [_Level(root.fd, entries, ())]
        self.folders = 1
        files = size = 0
        names_only = self._names_only
        want = self._want
        try:
            while stack:
                level = stack[-1]
                try:
                    entry = next(level.entries, None)
                except OSError:  # the listing failed part way (the folder went, an I/O error)
                    self._unreadable(level.folder)
                    entry = None
                if entry is None:
                    self._leave(stack.pop())
                    continue
                name = entry.name
                if not level.folder and (name.startswith(LOCK_NAME) or name == SHARDS_NAME):
                    continue  # gc's own: its lock, and where its shards meet
                try:
                    if entry.is_symlink():
                        self._link(level.folder, name)
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        child = self._enter(level, name)
                        if child is not None:
                            stack.append(child)
                            self.folders += 1
                            self._tick()
                        continue
                    if want is not None and not want(level.folder, name):
                        if entry.is_file(follow_symlinks=False):
                            self.passed += 1
                        else:
                            self.other += 1
                        continue
                    if names_only:  # the file type from the listing, no stat
                        if not entry.is_file(follow_symlinks=False):
                            self.other += 1
                            continue
                        seen = Seen(level.folder, name, 0, 0, 0.0, 0.0, 0)
                    else:
                        info = entry.stat(follow_symlinks=False)
                        if not stat.S_ISREG(info.st_mode):
                            self.other += 1
                            continue
                        if info.st_dev != root.dev:  # a file bind-mounted from elsewhere
                            self._note(self.mounts, "/".join((*level.folder, name)))
                            continue
                        seen = Seen(
                            level.folder, name, info.st_size, info.st_blocks * 512,
                            info.st_atime, info.st_mtime, info.st_ino, info.st_nlink,
                            info.st_ctime,
                        )  # fmt: skip
                except OSError:
                    continue  # removed while we looked: nothing to say of it
                level.count += 1
                files += 1
                size += seen.size
                self.folder_fd = level.fd
                yield seen
                if files & 255 == 0:
                    self._tick()
                if self._progress is not None and files % self._every == 0:
                    self._progress(files, size)
        finally:
            while stack:  # a consumer that stops early, or an error: close every handle
                self._leave(stack.pop(), count=False)
        if self._progress is not None:
            self._progress(files, size)

    def _enter(self, level: _Level, name: str) -> _Level | None:
        """The folder ``name`` below ``level``, opened and listed, or None when it is not to
        be entered (reported by kind)."""
        folder = (*level.folder, name)
        if self._folders is not None and not self._folders(folder):
            return None
        if len(folder) > MAX_DEPTH:
            self._note(self.too_deep, "/".join(folder))
            return None
        try:
            fd = os.open(name, O_FOLDER, dir_fd=level.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a link since it was listed
                self._link(level.folder, name)
            elif exc.errno not in (errno.ENOENT, errno.ENOTDIR):  # gone, or now a file
                self._unreadable(folder)
            return None
        assert self.root is not None
        try:
            if not self.root.on_root_mount(fd):
                self._note(self.mounts, "/".join(folder))
                os.close(fd)
                return None
            entries = os.scandir(fd)
        except OSError:
            os.close(fd)
            self._unreadable(folder)
            return None
        return _Level(fd, entries, folder)

    def _leave(self, level: _Level, *, count: bool = True) -> None:
        close = getattr(level.entries, "close", None)
        if close is not None:
            close()
        if self.root is None or level.fd != self.root.fd:
            os.close(level.fd)
        if count:
            self._keep_top(level.count, "/".join(level.folder) or ".")

    def _link(self, folder: tuple[str, ...], name: str) -> None:
        self.link_count += 1
        self._note(self.links, "/".join((*folder, name)))

    def _unreadable(self, folder: tuple[str, ...]) -> None:
        self.unreadable_count += 1
        self._note(self.unreadable, "/".join(folder) or ".")

    @staticmethod
    def _note(kept: list[str], name: str) -> None:
        if len(kept) < _KEEP:
            kept.append(name)

    def _keep_top(self, count: int, folder: str) -> None:
        top = self.per_folder
        if len(top) < self._top or count > top[-1][0]:
            top.append((count, folder))
            top.sort(key=lambda item: -item[0])
            del top[self._top :]


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


class Handles:
    """Folders below the root, opened for removals: from the root's handle one part at a
    time with ``O_NOFOLLOW`` (a part that is now a link is refused by the kernel), each
    checked to lie on the root's mount, and kept open (at most ``keep``, least recently used
    closed first) for the next removal in them."""

    def __init__(self, root: Root, *, keep: int = 64) -> None:
        self.root = root
        self.keep = keep
        self._open: OrderedDict[tuple[str, ...], int] = OrderedDict()

    def get(self, folder: tuple[str, ...]) -> int | None:
        """The handle of ``folder`` (parts below the root), or None when it is gone, is no
        longer a folder, or lies on another mount."""
        if not folder:
            return self.root.fd
        fd = self._open.get(folder)
        if fd is not None:
            self._open.move_to_end(folder)
            return fd
        parent = self.get(folder[:-1])
        if parent is None:
            return None
        try:
            fd = os.open(folder[-1], O_FOLDER, dir_fd=parent)
        except OSError:
            return None
        try:
            same = self.root.on_root_mount(fd)
        except OSError:
            same = False
        if not same:
            os.close(fd)
            return None
        self._open[folder] = fd
        while len(self._open) > self.keep:
            _, old = self._open.popitem(last=False)
            os.close(old)
        return fd

    def inside(self, folder: tuple[str, ...], *, keep: bool = False) -> bool:
        """Whether ``folder``'s handle still lies where it was opened, below the root: every
        part's name, looked up in its parent's handle, is that very folder (device and inode),
        and the folder's ``..`` is its parent. A folder that left (moved out of the tree with
        ``mv``, or replaced) is forgotten, with all below it: a later ``get`` opens whatever
        then has that name, and the files chosen in it are no longer those. With ``keep`` the
        handles stay open (the caller still has work in that folder, and forgets it after)."""
        chain = [self.root.fd]
        for depth in range(1, len(folder) + 1):
            fd = self.get(folder[:depth])
            if fd is None:
                return False
            try:
                named = _identity(os.stat(folder[depth - 1], dir_fd=chain[-1],
                                          follow_symlinks=False))  # fmt: skip
                held = _identity(os.fstat(fd))
            except OSError:
                named, held = None, (0, 0)
            if named != held:
                if not keep:
                    self.forget(folder[:depth])
                return False
            chain.append(fd)
        if folder:
            try:
                parent_of = _identity(os.stat("..", dir_fd=chain[-1]))
                parent = _identity(os.fstat(chain[-2]))
            except OSError:
                parent_of, parent = None, (0, 0)
            if parent_of != parent:
                if not keep:
                    self.forget(folder)
                return False
        return True

    def forget(self, folder: tuple[str, ...]) -> None:
        """Close the handles of ``folder`` and of every folder below it."""
        for held in [f for f in self._open if f[: len(folder)] == folder]:
            os.close(self._open.pop(held))

    def close(self) -> None:
        while self._open:
            _, fd = self._open.popitem()
            os.close(fd)

    def __enter__(self) -> Handles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def atime_mode(root: Path, mounts_text: str | None) -> tuple[str, str]:
    """How the mount holding ``root`` records last access, from /proc/self/mounts' options:
    ("strictatime" | "relatime" | "noatime" | "unknown", the mount point)."""
    from kvtool.probe.parse import mount_for, parse_proc_mounts

    if not mounts_text:
        return "unknown", ""
    mount = mount_for(str(root.resolve()), parse_proc_mounts(mounts_text))
    if mount is None:
        return "unknown", ""
    options = set(mount.options)
    if "noatime" in options:
        return "noatime", mount.mountpoint
    if "strictatime" in options:
        return "strictatime", mount.mountpoint
    # relatime is the kernel's default since 2.6.30, whether or not the options show it
    return "relatime", mount.mountpoint

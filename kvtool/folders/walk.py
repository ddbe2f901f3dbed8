"""Walk a KV folder: every file below it once, with its size and times, in bounded memory.

The walk never follows a symbolic link (a link is counted and skipped, so nothing outside the
folder is read or removed), reads one folder at a time (``os.scandir``: a folder of millions
of names is never held as a list), and takes each file's facts from one ``lstat``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from kvtool.errors import InputError

LOCK_NAME = ".kvtool-gc.lock"  # gc's lock on a shared folder: never counted, never removed


class Seen(NamedTuple):
    """One file as the walk found it."""

    folder: tuple[str, ...]  # its folder below the root, as parts
    name: str
    size: int  # bytes, as ls shows them
    allocated: int  # bytes the file system holds for it (st_blocks x 512)
    atime: float
    mtime: float
    ino: int


class Walk:
    """Iterate over ``root``'s files (``Seen``); afterwards ``links``, ``other`` (sockets,
    FIFOs, devices), ``unreadable`` (folders that could not be listed) and ``per_folder``
    (the largest file counts per folder, as (count, folder)) say what else was met.
    ``progress(files, bytes)`` is called every ``every`` files. ``names_only`` yields regular
    files by the listing's file type without a ``stat`` each (sizes and times 0): for a walk
    that stats only the files it picks (gc's second)."""

    def __init__(
        self,
        root: Path,
        *,
        progress: Callable[[int, int], None] | None = None,
        every: int = 20000,
        top_folders: int = 5,
        names_only: bool = False,
    ) -> None:
        self.root = root
        self.links: list[str] = []
        self.link_count = 0
        self.other = 0
        self.unreadable: list[str] = []
        self.per_folder: list[tuple[int, str]] = []
        self.folders = 0
        self._progress = progress
        self._every = every
        self._top = top_folders
        self._names_only = names_only

    def __iter__(self) -> Iterator[Seen]:
        files = size = 0
        pending: list[tuple[tuple[str, ...], str]] = [((), str(self.root))]
        while pending:
            folder, path = pending.pop()
            self.folders += 1
            count = 0
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        try:
                            if entry.is_symlink():
                                self.link_count += 1
                                if len(self.links) < 10:
                                    self.links.append("/".join((*folder, entry.name)))
                                continue
                            if entry.is_dir(follow_symlinks=False):
                                pending.append(((*folder, entry.name), entry.path))
                                continue
                            if self._names_only:  # the file type from the listing, no stat
                                regular = entry.is_file(follow_symlinks=False)
                                seen = Seen(folder, entry.name, 0, 0, 0.0, 0.0, 0)
                            else:
                                info = entry.stat(follow_symlinks=False)
                                regular = stat.S_ISREG(info.st_mode)
                                seen = Seen(
                                    folder, entry.name, info.st_size, info.st_blocks * 512,
                                    info.st_atime, info.st_mtime, info.st_ino,
                                )  # fmt: skip
                        except OSError:
                            continue  # removed while we looked: nothing to say of it
                        if not regular:
                            self.other += 1
                            continue
                        if not folder and entry.name.startswith(LOCK_NAME):
                            continue
                        count += 1
                        files += 1
                        size += seen.size
                        yield seen
                        if self._progress is not None and files % self._every == 0:
                            self._progress(files, size)
            except OSError as exc:
                if not folder:
                    raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
                self.unreadable.append("/".join(folder))
            self._keep_top(count, "/".join(folder) or ".")
        if self._progress is not None:
            self._progress(files, size)

    def _keep_top(self, count: int, folder: str) -> None:
        top = self.per_folder
        if len(top) < self._top or count > top[-1][0]:
            top.append((count, folder))
            top.sort(key=lambda item: -item[0])
            del top[self._top :]


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

"""``kvtool gc``'s second walk (``Sweep``): it lists names only, passes over every file whose
hash of folder and name the plan did not choose (a bitmap), gathers a chunk's files until all
of them are seen, and stats each again through its folder's handle: still a regular file on
the folder's file system, the very file the plan chose (its inode), with no other name (a
hard link), not used or rewritten since. Only then is the chunk written to the log and its
files removed, each by rename-then-verify through its folder's handle (docs/gc.md says what
that guarantees and how the tests attack it). ``release.ReleaseSweep`` is the same walk,
releasing to S3 instead."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from kvtool.folders.gc_plan import (
    CHANGED_WHY,
    FAILED_WHY,
    PRIVATE_PREFIX,
    Groups,
    Plan,
    Removal,
    chunk_of,
    group_of,
)
from kvtool.folders.layouts import classify
from kvtool.folders.lock import Lock
from kvtool.folders.scope import FolderModels, Scope, file_model
from kvtool.folders.select import Choice
from kvtool.folders.summary import last_use
from kvtool.folders.walk import Handles, Root, Seen, Walk

_GONE = "removed by another process first"
_CHANGED = "replaced just before its removal"


class Outcome(NamedTuple):
    choice: Choice
    removed_files: int
    removed_bytes: int
    skipped_chunks: int  # used or changed since the plan: left whole
    failed: list[str]  # files that could not be removed, with why (names as on disk)
    dry_run: bool
    removed_chunks: int = 0
    unreadable: tuple[str, ...] = ()  # folders either walk could not read (as on disk)
    unreadable_count: int = 0
    mounts: tuple[str, ...] = ()  # mount points below the folder, not entered
    too_deep: tuple[str, ...] = ()
    left: tuple[str, ...] = ()  # folders that left DIR while the run removed in them
    gone_bytes: int = 0  # of chosen files another process removed first
    released: bool = False  # --release: files were released to S3, not removed
    not_exported: tuple[tuple[str, str], ...] = ()  # --release: files left alone: (path, why)


def _unchanged(info: os.stat_result) -> tuple[int, int, int, int, int, int]:
    """What must not change between gc's last look at a file and its removal."""
    return (info.st_dev, info.st_ino, info.st_nlink, info.st_size, info.st_mtime_ns,
            stat.S_IFMT(info.st_mode))  # fmt: skip


def _why(exc: OSError) -> str:
    """Why the file system would not let a file go (an NFS or FUSE mount holding it): said,
    and the rest goes on."""
    import errno

    return exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))


def _put_back(fd: int, private: str, name: str) -> None:
    """Give a file gc renamed to ``private`` its name back, never over a file that took the
    name meanwhile (``link`` fails if the name exists); where the file system has no hard
    links, a rename when the name is still free. A file that cannot have its name back keeps
    the private one (never removed)."""
    try:
        os.link(private, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileExistsError:
        return  # a newer file has the name: this one stays, under the private name
    except FileNotFoundError:
        return  # gone already (removed before the signal that brought us here)
    except OSError:
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                os.rename(private, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            pass
        return
    with contextlib.suppress(OSError):
        os.unlink(private, dir_fd=fd)


def _line(action: str, **fields: Any) -> str:
    """One JSON line of the log (ASCII: a name's odd bytes are escaped)."""
    return json.dumps({"time": round(time.time(), 3), "action": action, **fields}) + "\n"


# a chunk's file as the second walk met it: folder, name, engine, model, hash of both names
_Member = tuple[tuple[str, ...], str, str, str, int]


class Sweep:
    """The second walk: iterate over the ``Removal``s (done, or in a dry run planned); then
    ``outcome`` says how it went. ``groups`` (the plan's, added to) says per engine layout and
    model what went and what stayed."""

    def __init__(
        self,
        root: Root,
        planned: Plan,
        *,
        scope: Scope,
        mode: str,
        dry_run: bool,
        lock: Lock | None = None,
        progress: Callable[[int, int], None] | None = None,
        journal: Any = None,
    ) -> None:
        self.root = root
        self.planned = planned
        self.choice = planned.choice
        self.chosen = planned.chosen_files
        self.scope = scope
        self.mode = mode
        self.dry_run = dry_run
        self.lock = lock
        self.progress = progress
        self.journal = journal
        self.groups = planned.groups if planned.groups is not None else Groups()
        self.removed_chunks = 0
        self.removed_files = 0
        self.removed_bytes = 0
        self.skipped = 0
        self.failed: list[str] = []
        self.left: list[str] = []  # folders that left DIR while the run removed in them
        self.gone_bytes = 0  # of chosen files another process removed first
        self.walk: Walk | None = None

    def __iter__(self) -> Iterator[Removal]:
        wanted = self.choice.chunks
        pending: dict[int, list[_Member]] = {}
        chosen = self.chosen
        table, mask = (chosen.table, chosen.MASK) if chosen is not None else (b"", 0)
        tick = self.lock.refresh if self.lock is not None else None
        needed = self.planned.folders
        self.walk = walk = Walk(
            self.root, names_only=True, tick=tick,
            folders=None if needed is None else (lambda folder: hash(folder) in needed),
        )  # fmt: skip
        owners = FolderModels(self.root)  # read again: a config changed since is not trusted
        with Handles(self.root) as handles:
            for seen in walk:
                name_hash = hash((seen.folder, seen.name))
                if chosen is not None:  # Chosen.__contains__, inlined: once a file
                    slot = name_hash & mask
                    if not table[slot >> 3] >> (slot & 7) & 1:
                        continue  # not a file the plan chose (a colliding hash is classified)
                match = classify(seen.folder, seen.name)
                model = None if match is None else file_model(match, owners)
                found = chunk_of(seen, self.scope, match, model)
                if found is None or found[1] or found[0] not in wanted:
                    continue
                chunk = found[0]
                members = pending.setdefault(chunk, [])
                engine, model = group_of(match, model)
                members.append((seen.folder, seen.name, engine, model, name_hash))
                if len(members) == wanted[chunk]:
                    del pending[chunk]
                    yield from self._remove(handles, members, self.choice.newest[chunk])
            yield from self._done(handles)
        for members in pending.values():  # a file of theirs went away since the plan
            self._skip(members[0], len(members))

    def _done(self, handles: Handles) -> Iterator[Removal]:
        """What is left to do once every chosen chunk was met (a release's last batch)."""
        return iter(())

    def _skip(self, member: _Member, files: int) -> None:
        self.skipped += 1
        self.groups.kept_of((member[2], member[3]), CHANGED_WHY).add(files, 0, 0.0, chunks=1)

    def _still_chosen(self, handles: Handles, member: _Member, inode: int) -> os.stat_result | None:
        """The file's facts now, if it is still the very file the plan chose: a regular file
        with no other name, on the folder's file system, of the inode the plan saw, unchanged
        since the plan began (its ctime: an inode number may be reused by a new file)."""
        fd = handles.get(member[0])
        if fd is None:
            return None
        try:
            info = os.stat(member[1], dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_dev != self.root.dev
            or info.st_ino != inode
            or info.st_nlink != 1
            or info.st_ctime > self.planned.started  # rewritten, replaced or touched since
        ):
            return None
        return info

    def _check(
        self, handles: Handles, members: list[_Member], newest: float
    ) -> list[tuple[_Member, int, Removal]] | None:
        """A chosen chunk's files, each still the very file the plan chose and not used
        since, with what removing it frees; None (the chunk counted as changed) otherwise."""
        inodes = (
            self.chosen.inodes_of([m[4] for m in members])
            if self.chosen is not None and self.chosen.files
            else [-1] * len(members)
        )
        checked: list[tuple[_Member, int, Removal]] = []
        if not self.dry_run and not self._inside(handles, members):
            self._skip(members[0], len(members))  # a folder of it moved out of DIR
            return None
        for member, inode in zip(members, inodes, strict=True):
            info = self._still_chosen(handles, member, inode)
            if info is None:
                self._skip(member, len(members))
                return None
            now = Seen(member[0], member[1], info.st_size, 0, info.st_atime, info.st_mtime, 0,
                       ctime=info.st_ctime)  # fmt: skip
            used = last_use(now, self.mode)
            if used > newest:
                self._skip(member, len(members))  # used (or written anew) since the plan
                return None
            rel = "/".join((*member[0], member[1]))
            size = info.st_blocks * 512 if self.planned.held else info.st_size
            checked.append((member, inode, Removal(rel, size, used, member[2], member[3])))
        return checked

    def _remove(self, handles: Handles, members: list[_Member], newest: float) -> Iterator[Removal]:
        checked = self._check(handles, members, newest)
        if checked is None:
            return
        if self.journal is not None:  # written before the removals: a SIGKILL loses none
            action = "would remove" if self.dry_run else "remove"
            self.journal.write(
                _line(action, path=r.path, bytes=r.bytes, last_use=round(r.last_use, 3),
                      engine=r.engine)
                for _m, _i, r in checked
            )  # fmt: skip
        any_removed = False
        for member, inode, removal in checked:
            key = (member[2], member[3])
            if not self.dry_run:
                why = self._unlink(handles, member, inode)
                if why is _GONE:
                    self.gone_bytes += removal.bytes
                    continue  # removed by another process first: neither ours nor a failure
                if why is not None:
                    if why is _CHANGED:
                        self.groups.kept_of(key, CHANGED_WHY).add(
                            1, removal.bytes, removal.last_use
                        )
                    else:
                        self.failed.append(f"{removal.path}: {why}")
                        self.groups.kept_of(key, FAILED_WHY).add(1, removal.bytes, removal.last_use)
                    if self.journal is not None:
                        self.journal.write([_line("not removed", path=removal.path, why=why)])
                    continue
            any_removed = True
            self.removed_files += 1
            self.removed_bytes += removal.bytes
            self.groups.removed_of(key).add(1, removal.bytes, removal.last_use)
            yield removal
        if any_removed:
            self.removed_chunks += 1
            self.groups.removed_of((members[0][2], members[0][3])).chunks += 1
        if self.progress is not None:
            self.progress(self.removed_files, self.removed_bytes)

    def _unlink(self, handles: Handles, member: _Member, inode: int) -> str | None:
        """Remove one checked file by rename-then-verify: rename it to a private name in its
        own folder, check that what now has the private name is the file chosen (device,
        inode, one name, size and mtime as just before) and that its folder is still below
        DIR (``Handles.inside``), and only then unlink the private name; otherwise put it back
        under its own name. A writer that renames a new file over the name at any moment
        keeps it: before the rename gc sees another inode, after it the new file takes the
        freed name. None when the file went, ``_GONE`` when another process removed it
        first, ``_CHANGED`` when it is no longer the file chosen (or its folder left DIR),
        else why the file system would not remove it."""
        before = self._still_chosen(handles, member, inode)
        fd = handles.get(member[0])
        if before is None or fd is None:
            try:
                os.stat(member[1], dir_fd=fd, follow_symlinks=False)
            except (OSError, TypeError):
                return _GONE
            return _CHANGED
        private = f"{PRIVATE_PREFIX}{os.getpid()}.{os.urandom(6).hex()}"
        try:
            os.rename(member[1], private, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            return _GONE
        except OSError as exc:
            return _why(exc)
        try:
            after = os.stat(private, dir_fd=fd, follow_symlinks=False)
            same = _unchanged(after) == _unchanged(before)
            # the handle stays open until the name is back: forgetting a folder that left
            # closes it, and a put-back through a closed (or reused) descriptor fails
            inside = handles.inside(member[0], keep=True)
            if not same or not inside:
                _put_back(fd, private, member[1])  # in its folder, wherever that now is
                if not inside:
                    handles.forget(member[0])
                if same:
                    self.left.append("/".join(member[0]))  # its folder left DIR
                return _CHANGED
            os.unlink(private, dir_fd=fd)
        except OSError as exc:
            _put_back(fd, private, member[1])
            return _why(exc)
        except BaseException:  # a signal between the rename and the unlink: nothing lost
            _put_back(fd, private, member[1])
            raise
        return None

    def _inside(self, handles: Handles, members: list[_Member]) -> bool:
        """Whether every folder of a chunk's files is still below DIR (before each chunk)."""
        for folder in dict.fromkeys(m[0] for m in members):
            if not handles.inside(folder):
                self.left.append("/".join(folder))
                return False
        return True

    def outcome(self) -> Outcome:
        first = self.planned.walk
        walks = [w for w in (first, self.walk) if w is not None]
        unreadable = list(dict.fromkeys(u for w in walks for u in w.unreadable))
        return Outcome(
            self.choice,
            self.removed_files,
            self.removed_bytes,
            self.skipped,
            self.failed,
            self.dry_run,
            self.removed_chunks,
            tuple(unreadable),
            max((w.unreadable_count for w in walks), default=0),
            tuple(dict.fromkeys(m for w in walks for m in w.mounts)),
            tuple(dict.fromkeys(d for w in walks for d in w.too_deep)),
            tuple(dict.fromkeys(self.left)),
            self.gone_bytes,
        )

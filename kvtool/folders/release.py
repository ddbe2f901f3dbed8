"""``kvtool gc --release``: free the chosen chunks' space on FSx for Lustre by releasing their
files to the S3 data repository (``lfs hsm_release``) instead of removing them: a released
file keeps its name, size and metadata, its data stays in S3 and a read restores it.

The same plan as removal (``gc_plan.plan``, sizes counted as the bytes the file system holds,
since a released file keeps its apparent size) and the same second walk (``gc.Sweep``): each
chosen chunk's files must still be the very files chosen, unused since the plan. Then, a
batch of files at a time (``lfs.RELEASE_BATCH``), through the folders' open handles
(``/proc/self/fd/N/name``: never a path that could be swapped for a link):

1. each file is stat'ed (the very file chosen: inode, one name, unchanged since the plan);
2. ``lfs hsm_state`` reads its HSM state and ``lfs path2fid`` its FID;
3. each file is stat'ed again: the same inode, size, times and change time, so the state and
   the FID read in between are that file's (a file renamed away and back has a new ctime);
4. only a file that is archived and neither dirty, released, lost nor never_release is
   released, **by its FID** (``lfs hsm_release --mntpath DIR FID...``): whatever its name holds
   by then, the release reaches the file checked, and Lustre itself refuses one changed since
   its export (its data version), open for writing (a lease), or not archived;
5. ``lfs hsm_state`` is read again: a file counts as released (its bytes as freed) only when
   it says released. A batch the kernel stopped part way is retried file by file.

A file never exported, or changed since (dirty), is reported and left alone: never released,
and under ``--release`` nothing is ever removed. Each file's ``release`` line is in the log
before its release.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from kvtool.folders.gc_plan import (
    CHANGED_WHY,
    FAILED_WHY,
    NOT_EXPORTED_WHY,
    RELEASED_WHY,
    Removal,
)
from kvtool.folders.sweep import Outcome, Sweep, _line, _Member, _unchanged
from kvtool.folders.walk import Handles
from kvtool.probe.lfs import RELEASE_BATCH, File, Lfs, nameable
from kvtool.probe.parse import HS_NORELEASE, HsmState

_WHY_NOT = {
    "none": "not exported to S3",
    "dirty": "changed since its export (the S3 copy is stale)",
    "lost": "its S3 copy is lost",
}


def why_not(state: HsmState) -> str:
    """Why a file that is not released may not be, in words."""
    if state.flags & HS_NORELEASE and state.kind == "archived":
        return "marked never_release"
    return _WHY_NOT.get(state.kind, f"HSM state 0x{state.flags:08x}")


# a chosen file waiting in a batch: the member, its inode as planned, what releasing it frees,
# and which chunk (a serial number) it belongs to
_Entry = tuple[_Member, int, Removal, int]


class ReleaseSweep(Sweep):
    """gc's second walk, releasing instead of removing."""

    def __init__(self, *args: Any, lfs: Lfs, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lfs = lfs
        self.batch: list[_Entry] = []
        self.serial = 0
        self.released_chunks: set[int] = set()
        self.not_exported: list[tuple[str, str]] = []  # examples: (path, why)

    def _remove(self, handles: Handles, members: list[_Member], newest: float) -> Iterator[Removal]:
        checked = self._check(handles, members, newest)
        if checked is None:
            return
        self.serial += 1
        for member, inode, removal in checked:
            if nameable(member[1]):
                self.batch.append((member, inode, removal, self.serial))
            else:
                self._fail(member, removal, "a name with a newline: lfs cannot be given it")
        if len(self.batch) >= RELEASE_BATCH:
            yield from self._flush(handles)

    def _done(self, handles: Handles) -> Iterator[Removal]:
        yield from self._flush(handles)

    def _flush(self, handles: Handles) -> Iterator[Removal]:
        batch, self.batch = self.batch, []
        if not batch:
            return
        held: dict[tuple[str, ...], int] = {}  # each folder's handle, duplicated for lfs
        try:
            yield from self._release(handles, batch, held)
        finally:
            for fd in held.values():
                os.close(fd)
        if self.progress is not None:
            self.progress(self.removed_files, self.removed_bytes)

    def _release(
        self, handles: Handles, batch: list[_Entry], held: dict[tuple[str, ...], int]
    ) -> Iterator[Removal]:
        files: dict[int, File] = {}
        before: dict[int, os.stat_result] = {}
        for at, (member, inode, removal, _serial) in enumerate(batch):
            info = self._still_chosen(handles, member, inode)
            fd = handles.get(member[0])
            if info is None or fd is None:
                self._changed(member, removal)
                continue
            if member[0] not in held:
                held[member[0]] = os.dup(fd)
            files[at] = File(held[member[0]], member[1])
            before[at] = info
        states = self.lfs.hsm_state(list(files.values()))
        fids = {} if self.dry_run else self.lfs.path2fid(list(files.values()))
        ready: list[int] = []
        for at, file in files.items():
            member, inode, removal, _serial = batch[at]
            after = self._still_chosen(handles, member, inode)
            if after is None or not _same(before[at], after):
                self._changed(member, removal)  # changed while its state was read
                continue
            state = states.get(file)
            if state is None:
                self._fail(member, removal, "lfs hsm_state could not read it")
            elif state.kind == "released":
                self.groups.kept_of((member[2], member[3]), RELEASED_WHY).add(
                    1, removal.bytes, removal.last_use
                )
            elif not state.releasable:
                self._not_exported(member, removal, why_not(state))
            elif not self.dry_run and file not in fids:
                self._fail(member, removal, "lfs path2fid could not read its FID")
            else:
                ready.append(at)
        if self.dry_run:
            for at in ready:
                yield self._count(batch[at])
            return
        if self.journal is not None:  # written before the release: a SIGKILL loses none
            self.journal.write(
                _line("release", path=batch[at][2].path, bytes=batch[at][2].bytes,
                      last_use=round(batch[at][2].last_use, 3), engine=batch[at][2].engine)
                for at in ready
            )  # fmt: skip
        said: dict[int, str] = {}
        for start in range(0, len(ready), RELEASE_BATCH):
            part = ready[start : start + RELEASE_BATCH]
            done = self.lfs.hsm_release(self.root.fd, [fids[files[at]] for at in part])
            if not done.ok:  # the kernel stopped at a file: try the rest one by one
                for at in self._released(handles, batch, files, part, want=False):
                    one = self.lfs.hsm_release(self.root.fd, [fids[files[at]]])
                    if not one.ok:
                        said[at] = _said(one)
        released = set(self._released(handles, batch, files, ready, want=True))
        for at in ready:
            member, _inode, removal, _serial = batch[at]
            if at in released:
                yield self._count(batch[at])
            else:
                why = said.get(at, "lfs hsm_release did not release it")
                self._fail(member, removal, why)

    def _released(
        self,
        handles: Handles,
        batch: list[_Entry],
        files: dict[int, File],
        ats: list[int],
        *,
        want: bool,
    ) -> list[int]:
        """Of ``ats``, those whose state now is released (``want``) or is not; a file whose
        name no longer holds the file chosen counts as not released."""
        states = self.lfs.hsm_state([files[at] for at in ats])
        out = []
        for at in ats:
            member, inode, _removal, _serial = batch[at]
            fd = handles.get(member[0])
            try:
                now = os.stat(member[1], dir_fd=fd, follow_symlinks=False)
                same = (now.st_dev, now.st_ino) == (self.root.dev, inode)
            except (OSError, TypeError):
                same = False
            state = states.get(files[at])
            released = same and state is not None and state.kind == "released"
            if released == want:
                out.append(at)
        return out

    def _count(self, entry: _Entry) -> Removal:
        member, _inode, removal, serial = entry
        self.removed_files += 1
        self.removed_bytes += removal.bytes
        key = (member[2], member[3])
        self.groups.removed_of(key).add(1, removal.bytes, removal.last_use)
        if serial not in self.released_chunks:
            self.released_chunks.add(serial)
            self.removed_chunks += 1
            self.groups.removed_of(key).chunks += 1
        return removal

    def _changed(self, member: _Member, removal: Removal) -> None:
        self.groups.kept_of((member[2], member[3]), CHANGED_WHY).add(
            1, removal.bytes, removal.last_use
        )

    def _not_exported(self, member: _Member, removal: Removal, why: str) -> None:
        self.groups.kept_of((member[2], member[3]), NOT_EXPORTED_WHY).add(
            1, removal.bytes, removal.last_use
        )
        if len(self.not_exported) < 10:
            self.not_exported.append((removal.path, why))

    def _fail(self, member: _Member, removal: Removal, why: str) -> None:
        self.failed.append(f"{removal.path}: {why}")
        self.groups.kept_of((member[2], member[3]), FAILED_WHY).add(
            1, removal.bytes, removal.last_use
        )
        if self.journal is not None:
            self.journal.write([_line("not released", path=removal.path, why=why)])

    def outcome(self) -> Outcome:
        return super().outcome()._replace(released=True, not_exported=tuple(self.not_exported))


def _same(before: os.stat_result, after: os.stat_result) -> bool:
    """The same file, untouched, between two looks (its change time too)."""
    return _unchanged(before) == _unchanged(after) and before.st_ctime_ns == after.st_ctime_ns


def _said(done: Any) -> str:
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"lfs hsm_release exit status {done.returncode}"

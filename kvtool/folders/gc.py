"""``kvtool gc``: cap a shared KV folder by removing least-recently-used chunks.

Two walks. The first reads every file once and keeps one row per file in flat arrays (five
8-byte fields: 40 bytes a file); ``select.choose`` then picks whole chunks, oldest first, until
the limits hold. The second walk removes them: it lists names only, passes over every file whose
hash of folder and name is not one the plan chose, gathers a chunk's files until all of them are
seen, stats each again (still a regular file, not used or rewritten since the plan), and only
then removes them together. Nothing outside the folder (links are never followed), no
in-flight temporary, no engine's config, no chunk used within the grace period, and no file of
an unknown layout (unless asked) is ever touched.

Several nodes may run gc against one shared folder: a lock file in the folder (created with
``link``, atomic on NFS and Lustre, refreshed while the run lasts) lets one run at a time; a
lock whose holder stopped refreshing it for ``STALE_S`` seconds, or whose holder is a dead
process of this host, is taken over.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import socket
import stat
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from kvtool.folders.layouts import CHUNK, TEMP, Match, classify, model_key
from kvtool.folders.select import Choice, Limits, choose
from kvtool.folders.summary import last_use
from kvtool.folders.walk import LOCK_NAME, Seen, Walk
from kvtool.scratch import Scratch

STALE_S = 600.0  # a lock not refreshed for ten minutes is taken over
REFRESH_S = 30.0


class Scope(NamedTuple):
    """Which files gc may consider."""

    engine: str | None = None
    model: str | None = None
    include_unknown: bool = False


class Removal(NamedTuple):
    """One file removed (or, in a dry run, that would be)."""

    path: str  # below the folder
    bytes: int
    last_use: float
    engine: str


class Outcome(NamedTuple):
    choice: Choice
    removed_files: int
    removed_bytes: int
    skipped_chunks: int  # used or changed since the plan: left whole
    failed: list[str]  # files that could not be removed, with why
    dry_run: bool


class Busy(Exception):
    """Another gc holds the folder's lock."""


class Lock:
    """The folder's gc lock: ``acquire`` or Busy; released however the run ends (it is
    registered with the clean-up door)."""

    def __init__(self, root: Path, scratch: Scratch) -> None:
        self.path = root / LOCK_NAME
        self._scratch = scratch
        self._held = False
        self._refreshed = 0.0

    def acquire(self) -> None:
        if self._link():
            return
        holder = self._holder()
        if self._stale(holder):
            aside = self.path.with_name(f"{LOCK_NAME}.{os.getpid()}.{secrets.token_hex(4)}.stale")
            with contextlib.suppress(OSError):
                os.rename(self.path, aside)
                os.unlink(aside)
            if self._link():
                return
            holder = self._holder()
        raise Busy(_describe(holder))

    def _link(self) -> bool:
        """Try once to put this run's lock in place: True when it is there."""
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        mine = self.path.with_name(
            f"{LOCK_NAME}.{owner['host']}.{os.getpid()}.{secrets.token_hex(4)}"
        )
        self._scratch.path(mine)
        mine.write_text(json.dumps(owner) + "\n")
        try:
            os.link(mine, self.path)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                mine.unlink()
        self._held = True
        self._refreshed = time.monotonic()
        self._scratch.on_exit(self.release)
        return True

    def _holder(self) -> dict[str, Any]:
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except OSError:
            return {"age": 0.0}
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.loads(f.read(4096))
        except (OSError, ValueError):
            data = {}  # unreadable: it goes stale by its age like any other
        holder = data if isinstance(data, dict) else {}
        holder["age"] = age
        return holder

    @staticmethod
    def _stale(holder: dict[str, Any]) -> bool:
        if float(holder.get("age", 0.0)) > STALE_S:
            return True
        if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
            try:
                os.kill(holder["pid"], 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
        return False

    def refresh(self) -> None:
        """Touch the lock now and then, so other nodes see this run is alive."""
        if self._held and time.monotonic() - self._refreshed > REFRESH_S:
            with contextlib.suppress(OSError):
                os.utime(self.path)
            self._refreshed = time.monotonic()

    def release(self) -> None:
        if self._held:
            self._held = False
            with contextlib.suppress(OSError):
                holder = self._holder()
                if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
                    os.unlink(self.path)


def _describe(holder: dict[str, Any]) -> str:
    started = holder.get("started")
    since = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        if isinstance(started, float)
        else "?"
    )
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, since {since}"


def _chunk_id(seen: Seen, scope: Scope, match: Match | None) -> tuple[int, bool] | None:
    """(the chunk id, whether the file is an in-flight temporary) for a file gc may consider,
    None for one it never touches; ``match`` is what ``classify`` made of it."""
    if match is None:
        if scope.include_unknown:
            return hash(("unknown", seen.folder, seen.name)), False
        return None
    if scope.engine is not None and match.engine != scope.engine:
        return None
    if scope.model is not None and match.model and model_key(match.model) != model_key(scope.model):
        return None
    if match.kind == TEMP:
        return (hash(match.chunk), True) if match.chunk else None
    if match.kind != CHUNK:
        return None
    return hash(match.chunk), False


class NameFilter:
    """The files a plan chose, by a hash of folder and name, as a bitmap of ``2**BITS`` bits
    (4 MiB, however many files): the second walk classifies only the names it lets through. A
    name it lets through that the plan did not choose (about chosen / 2**BITS of the others)
    is still classified and judged, so the filter only narrows, never widens."""

    BITS = 25
    MASK = (1 << BITS) - 1

    def __init__(self, hashes: Any) -> None:
        import numpy as np

        slots = np.asarray(hashes, dtype=np.int64) & self.MASK
        table = np.zeros(1 << (self.BITS - 3), np.uint8)
        np.bitwise_or.at(table, slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8))
        self.table = table.tobytes()
        self.files = len(slots)

    def __contains__(self, name_hash: int) -> bool:
        slot = name_hash & self.MASK
        return bool(self.table[slot >> 3] >> (slot & 7) & 1)


class Plan(NamedTuple):
    """The first walk's result: the choice, the clock it was made against, what was seen."""

    choice: Choice
    clock: float
    known_files: int  # files of a known layout (chunks, temporaries, configs), in scope or not
    unknown_files: int
    unknown_examples: list[str]
    temp_files: int
    chosen_files: NameFilter | None = None  # hash((folder, name)) of each chosen file


def plan(
    root: Path,
    *,
    scope: Scope,
    limits: Limits,
    mode: str,
    free_bytes: int,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """The first walk: one row per file gc may consider, then the choice."""
    import numpy as np

    ids, used, sizes, alloc, pinned = array("q"), array("d"), array("q"), array("q"), array("q")
    names = array("q")  # hash((folder, name)): the second walk stats and classifies only these
    known = unknown = temps = 0
    examples: list[str] = []
    for seen in Walk(root, progress=progress):
        match = classify(seen.folder, seen.name)
        if match is None:
            unknown += 1
            if len(examples) < 10:
                examples.append("/".join((*seen.folder, seen.name)))
        else:
            known += 1
            temps += match.kind == TEMP
        found = _chunk_id(seen, scope, match)
        if found is None:
            continue
        chunk, temp = found
        if temp:
            pinned.append(chunk)
            continue
        ids.append(chunk)
        names.append(hash((seen.folder, seen.name)))
        used.append(last_use(seen, mode))
        sizes.append(seen.size)
        alloc.append(seen.allocated)
    clock = time.time()

    def arr(values: array[Any], dtype: Any) -> Any:
        return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)

    choice = choose(
        arr(ids, np.int64),
        arr(used, np.float64),
        arr(sizes, np.int64),
        arr(alloc, np.int64),
        arr(pinned, np.int64),
        now=clock,
        limits=limits,
        free_bytes=free_bytes,
    )
    files = NameFilter(arr(names, np.int64)[choice.rows])
    return Plan(choice, clock, known, unknown, examples, temps, files)


def run_gc(
    root: Path,
    *,
    scope: Scope,
    limits: Limits,
    mode: str,
    free_bytes: int,
    dry_run: bool,
    log: Path | None = None,
    each: Callable[[Removal], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[Plan, Outcome]:
    """Cap ``root``: take the folder's lock (not for a dry run, which changes nothing), plan,
    remove; every removal goes to ``each`` and, as a JSON line, to ``log`` (written whole even
    when a signal stops the run: the lines so far and why it stopped). Busy when another gc
    holds the lock; InputError when the folder holds no file of a known layout."""
    from kvtool.errors import InputError
    from kvtool.scratch import Interrupted

    def step(name: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda files, size: progress(name, files, size))

    with Scratch() as scratch:
        lock = None
        if not dry_run:
            lock = Lock(root, scratch)
            lock.acquire()
        planned = plan(
            root,
            scope=scope,
            limits=limits,
            mode=mode,
            free_bytes=free_bytes,
            progress=step("reading"),
        )
        if planned.known_files == 0 and not scope.include_unknown:
            seen = ", ".join(planned.unknown_examples[:5]) or "nothing"
            raise InputError(
                f"{root} holds no file of a layout kvtool knows (saw {planned.unknown_files:,} "
                f"other files: {seen})",
                "point gc at an engine's KV folder, or add --include-unknown",
            )
        sweep = Sweep(
            root, planned.choice, scope=scope, mode=mode, dry_run=dry_run, lock=lock,
            progress=step("removing" if not dry_run else "checking"),
            chosen_files=planned.chosen_files,
        )  # fmt: skip
        stopped: list[BaseException] = []

        def lines() -> Iterator[str]:
            try:
                for removal in sweep:
                    if each is not None:
                        each(removal)
                    if log is not None:
                        yield log_line(removal, dry_run=dry_run)
            except Interrupted as exc:
                stopped.append(exc)
                yield (
                    json.dumps(
                        {"time": round(time.time(), 3), "action": "interrupted", "why": str(exc)}
                    )
                    + "\n"
                )

        if log is not None:
            from kvtool.files import write_text

            write_text(log, lines())
        else:
            for _line in lines():
                pass
        if stopped:
            raise stopped[0]
        return planned, sweep.outcome()


class Sweep:
    """The second walk: iterate over the ``Removal``s (done, or in a dry run planned); then
    ``outcome`` says how it went."""

    def __init__(
        self,
        root: Path,
        choice: Choice,
        *,
        scope: Scope,
        mode: str,
        dry_run: bool,
        lock: Lock | None = None,
        progress: Callable[[int, int], None] | None = None,
        chosen_files: NameFilter | None = None,
    ) -> None:
        self.root = root
        self.chosen_files = chosen_files
        self.choice = choice
        self.scope = scope
        self.mode = mode
        self.dry_run = dry_run
        self.lock = lock
        self.progress = progress
        self.removed_files = 0
        self.removed_bytes = 0
        self.skipped = 0
        self.failed: list[str] = []

    def __iter__(self) -> Iterator[Removal]:
        wanted = self.choice.chunks
        # a chunk's files seen so far, as (folder, name, engine): no stat is kept, since each is
        # taken again just before the removal
        pending: dict[int, list[tuple[tuple[str, ...], str, str]]] = {}
        chosen = self.chosen_files
        table, mask = (chosen.table, chosen.MASK) if chosen is not None else (b"", 0)
        for seen in Walk(self.root, progress=self.progress, names_only=True):
            if self.lock is not None:
                self.lock.refresh()
            if chosen is not None:  # NameFilter.__contains__, inlined: once a file
                slot = hash((seen.folder, seen.name)) & mask
                if not table[slot >> 3] >> (slot & 7) & 1:
                    continue  # not a file the plan chose (a hash that collides is classified)
            match = classify(seen.folder, seen.name)
            found = _chunk_id(seen, self.scope, match)
            if found is None or found[1] or found[0] not in wanted:
                continue
            chunk = found[0]
            members = pending.setdefault(chunk, [])
            members.append((seen.folder, seen.name, match.engine if match else "unknown"))
            if len(members) == wanted[chunk]:
                del pending[chunk]
                yield from self._remove(members, self.choice.newest[chunk])
        self.skipped += len(pending)  # a file of theirs went away since the plan: left alone

    def _remove(
        self, members: list[tuple[tuple[str, ...], str, str]], newest: float
    ) -> Iterator[Removal]:
        root = str(self.root)
        checked: list[tuple[str, str, Seen, str]] = []  # (path, below the root, as now, engine)
        for folder, name, engine in members:
            rel = "/".join((*folder, name))
            path = f"{root}/{rel}"
            try:
                info = os.lstat(path)
            except OSError:
                self.skipped += 1
                return
            if not stat.S_ISREG(info.st_mode):
                self.skipped += 1
                return
            now = Seen(
                folder, name, info.st_size, info.st_blocks * 512, info.st_atime, info.st_mtime,
                info.st_ino,
            )  # fmt: skip
            if last_use(now, self.mode) > newest:
                self.skipped += 1  # used (or written anew) since the plan: the whole chunk stays
                return
            checked.append((path, rel, now, engine))
        for path, rel, seen, engine in checked:
            if not self.dry_run:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    # one file a mount will not let go (NFS silly-renames, FUSE) never wedges
                    # the run: it is reported and the rest goes on
                    self.failed.append(
                        f"{rel}: {exc.strerror or errno.errorcode.get(exc.errno or 0, exc)}"
                    )
                    continue
            self.removed_files += 1
            self.removed_bytes += seen.size
            yield Removal(rel, seen.size, last_use(seen, self.mode), engine)

    def outcome(self) -> Outcome:
        return Outcome(
            self.choice,
            self.removed_files,
            self.removed_bytes,
            self.skipped,
            self.failed,
            self.dry_run,
        )


def log_line(removal: Removal, *, dry_run: bool) -> str:
    """One JSON line of the delete log."""
    return (
        json.dumps(
            {
                "time": round(time.time(), 3),
                "action": "would remove" if dry_run else "removed",
                "path": removal.path,
                "bytes": removal.bytes,
                "last_use": round(removal.last_use, 3),
                "engine": removal.engine,
            }
        )
        + "\n"
    )

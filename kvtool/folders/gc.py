"""``kvtool gc``: cap a shared KV folder by removing least-recently-used chunks, and never
touch what is not its own (docs/gc.md says what it guarantees and how the tests attack it).

Everything happens relative to the folder's open handle (``walk.Root``): folders below it are
opened from their parent's handle with ``O_NOFOLLOW``, never by path, and never on another
mount; a system or home folder is refused (``guard``); the lock is made and checked from the
same handle (``lock``).

Two walks. The first reads every file once and keeps one row per file in flat arrays (seven
8-byte fields: 56 bytes a file); ``select.choose`` then picks whole chunks, oldest first, until
the limits hold. The second walk removes them: it lists names only, passes over every file
whose hash of folder and name the plan did not choose (a bitmap), gathers a chunk's files until
all of them are seen, and stats each again through its folder's handle: still a regular file
on the folder's file system, the very file the plan chose (its inode), with no other name (a
hard link), not used or rewritten since. Only then is the chunk written to the log and its
files removed, each checked once more just before its ``unlink(name, dir_fd=folder)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path
from typing import Any, NamedTuple

from kvtool.folders.guard import refuse_system_folder
from kvtool.folders.layouts import CHUNK, CONFIG, TEMP, Match, classify
from kvtool.folders.lock import REFRESH_S, STALE_S, Busy, Lock, LockProblem, Lost, NotOurs
from kvtool.folders.scope import FolderModels, Scope, file_model, in_scope
from kvtool.folders.select import CHOSEN, NOT_NEEDED, PINNED, YOUNG, Choice, Limits, choose
from kvtool.folders.summary import last_use
from kvtool.folders.walk import MAX_DEPTH, Handles, Root, Seen, Walk
from kvtool.scratch import Scratch

__all__ = [
    "REFRESH_S", "STALE_S", "Busy", "Chosen", "Lock", "LockProblem", "Lost", "NotOurs",
    "Outcome", "Plan", "Removal", "Scope", "Sweep", "Tally", "plan", "run_gc",
]  # fmt: skip

# why a file stays, in the order the summary lists them
NOT_NEEDED_WHY = "not needed"  # newer than what was removed: the limits held without it
YOUNG_WHY = "young"  # used within the grace period
WRITING_WHY = "being written"  # an in-flight temporary names its chunk
LINKED_WHY = "hard-linked"  # another name holds its data: removing this one frees nothing
CHANGED_WHY = "changed"  # used, rewritten or replaced between the plan and its removal
FAILED_WHY = "failed"  # the file system would not remove it
SCOPE_WHY = "out of scope"  # another layout or model than --layout/--model
TEMPORARY_WHY = "temporary"  # an in-flight temporary: never removed
KEPT_ORDER = (
    NOT_NEEDED_WHY, YOUNG_WHY, WRITING_WHY, LINKED_WHY, CHANGED_WHY, FAILED_WHY, SCOPE_WHY,
    TEMPORARY_WHY,
)  # fmt: skip
_GONE = "removed by another process first"
# a file being removed holds this name for the time of one stat (rename-then-verify); one a
# SIGKILL caught in that instant keeps it, and its path is in the log as removed
PRIVATE_PREFIX = ".kvtool-gc-removing."
_CHANGED = "replaced just before its removal"
_REASON_OF_FATE = {NOT_NEEDED: NOT_NEEDED_WHY, YOUNG: YOUNG_WHY, PINNED: WRITING_WHY}


class Removal(NamedTuple):
    """One file removed (or, in a dry run, that would be)."""

    path: str  # below the folder, as on disk (escape it to print it)
    bytes: int
    last_use: float
    engine: str
    model: str = ""


@dataclass
class Tally:
    """Chunks, files and bytes of one kind, with their oldest and newest last use."""

    chunks: int = 0
    files: int = 0
    bytes: int = 0
    oldest: float = float("inf")
    newest: float = 0.0

    def add(self, files: int, size: int, used: float, chunks: int = 0) -> None:
        self.chunks += chunks
        self.files += files
        self.bytes += size
        if files:
            self.oldest = min(self.oldest, used)
            self.newest = max(self.newest, used)

    def merge(self, other: Tally) -> None:
        self.chunks += other.chunks
        self.files += other.files
        self.bytes += other.bytes
        self.oldest = min(self.oldest, other.oldest)
        self.newest = max(self.newest, other.newest)

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks,
            "files": self.files,
            "bytes": self.bytes,
            "oldest_use": self.oldest if self.files else None,
            "newest_use": self.newest if self.files else None,
        }


GroupKey = tuple[str, str]  # (engine layout, model)


@dataclass
class Groups:
    """Per engine layout and model: what was removed, and what stays by why."""

    removed: dict[GroupKey, Tally] = field(default_factory=dict)
    kept: dict[GroupKey, dict[str, Tally]] = field(default_factory=dict)

    def removed_of(self, key: GroupKey) -> Tally:
        return self.removed.setdefault(key, Tally())

    def kept_of(self, key: GroupKey, why: str) -> Tally:
        return self.kept.setdefault(key, {}).setdefault(why, Tally())

    def names(self) -> list[GroupKey]:
        return sorted(set(self.removed) | set(self.kept))


def _chunk_id(
    seen: Seen, scope: Scope, match: Match | None, model: str | None
) -> tuple[int, bool] | None:
    """(the chunk id, whether the file is an in-flight temporary) for a file gc may consider,
    None for one it never touches; ``match`` is what ``classify`` made of it, ``model`` the
    model it belongs to (``scope.file_model``)."""
    if match is None:
        if scope.include_unknown or _leftover(seen.name):
            return chunk_id("\0".join(("unknown", *seen.folder, seen.name))), False
        return None
    if not in_scope(scope, match, model):
        return None
    if match.kind == TEMP:
        return (chunk_id(match.chunk), True) if match.chunk else None
    if match.kind != CHUNK:
        return None
    return chunk_id(match.chunk), False


def _leftover(name: str) -> bool:
    """A file a gc run killed between its rename and its unlink left under its private name:
    chosen, checked and logged as removed by that run; the next run removes it, whatever the
    scope (its own limits and grace still apply)."""
    return name.startswith(PRIVATE_PREFIX) and len(name) > len(PRIVATE_PREFIX)


def chunk_id(key: str) -> int:
    """A chunk's id: 64 bits of BLAKE2b of its key, the same in every process (Python's own
    ``hash`` of a string changes from run to run, and the id breaks ties between chunks last
    used at the same time, common where times are kept to the second: a dry run and the real
    run must choose alike)."""
    digest = blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _group(match: Match | None, model: str | None = None) -> GroupKey:
    """The engine layout and the model a file is summed under: the model as its name says, or
    for vLLM (whose config.json names it) as that config says, else the folder it lies in."""
    if match is None:
        return ("unknown", "")
    return (match.engine, model or match.model or match.base)


class Bits:
    """A set of 64-bit hashes as a bitmap of ``2**BITS`` bits (4 MiB, however many): every
    hash put in is found; a hash not put in is found with odds of about (hashes put in) /
    2**BITS, so it serves only to narrow what is looked at, never to decide."""

    BITS = 25
    MASK = (1 << BITS) - 1

    def __init__(self, hashes: Any) -> None:
        import numpy as np

        slots = np.asarray(hashes, dtype=np.int64) & self.MASK
        table = np.zeros(1 << (self.BITS - 3), np.uint8)
        np.bitwise_or.at(table, slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8))
        self.table = table.tobytes()

    def __contains__(self, name_hash: int) -> bool:
        slot = name_hash & self.MASK
        return bool(self.table[slot >> 3] >> (slot & 7) & 1)


class Chosen(Bits):
    """The files a plan chose, by a hash of folder and name, with the inode each had: the
    bitmap the second walk asks of every name (a name it lets through that the plan did not
    choose is still classified and judged), and the sorted hashes with their inodes, which a
    chunk's files must still have to be removed."""

    def __init__(self, hashes: Any, inodes: Any = None) -> None:
        import numpy as np

        super().__init__(hashes)
        hashes = np.asarray(hashes, dtype=np.int64)
        inodes = np.zeros(len(hashes), np.int64) if inodes is None else np.asarray(inodes)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.inodes = inodes.astype(np.int64)[order]
        self.files = len(hashes)

    def inodes_of(self, name_hashes: list[int]) -> list[int]:
        """The inode the plan saw for each hash (-1 for a hash it did not choose)."""
        import numpy as np

        wanted = np.asarray(name_hashes, dtype=np.int64)
        at = np.searchsorted(self.hashes, wanted)
        inside = at < len(self.hashes)
        found = np.full(len(wanted), -1, np.int64)
        hit = inside.copy()
        hit[inside] = self.hashes[at[inside]] == wanted[inside]
        found[hit] = self.inodes[at[hit]]
        return [int(i) for i in found]


def needed_folders(leaves: Any, folders: Any, parents: Any) -> Bits:
    """The folders the second walk must enter: those holding a chosen file (``leaves``,
    hashes of their parts) and every folder above them, from each folder's hash and its
    parent's (``folders``, ``parents``: what the first walk entered)."""
    import numpy as np

    order = np.argsort(folders, kind="stable")
    folders, parents = folders[order], parents[order]
    top = hash(())
    needed = [np.unique(leaves)]
    frontier = needed[0]
    for _level in range(MAX_DEPTH + 1):
        at = np.searchsorted(folders, frontier)
        at = at[at < len(folders)]
        frontier = np.unique(parents[at[np.isin(folders[at], frontier)]])
        frontier = frontier[frontier != top]
        if not len(frontier):
            break
        needed.append(frontier)
    return Bits(np.concatenate(needed))


class Plan(NamedTuple):
    """The first walk's result: the choice, the clock it was made against, what was seen."""

    choice: Choice
    clock: float
    known_files: int  # files of a known layout (chunks, temporaries, configs), in scope or not
    unknown_files: int
    unknown_examples: list[str]
    temp_files: int
    chosen_files: Chosen | None = None
    groups: Groups | None = None  # what stays, by why (what goes is the sweep's to say)
    walk: Walk | None = None  # what the first walk met besides files
    config_files: int = 0
    unknown_bytes: int = 0  # of files of no known layout (in scope with --include-unknown)
    hard_linked: int = 0  # files with another name
    started: float = 0.0  # the clock when the first walk began: a file changed since is not removed
    folders: Bits | None = None  # the folders holding chosen files, and those above them
    folder_bytes: int = 0  # every regular file the walk saw, as du --apparent-size counts them
    config_bytes: int = 0
    unknown_kept_bytes: int = 0  # files of no known layout gc keeps (not --include-unknown)


def plan(
    root: Root,
    *,
    scope: Scope,
    limits: Limits,
    mode: str,
    free_bytes: int,
    progress: Callable[[int, int], None] | None = None,
    tick: Callable[[], None] | None = None,
) -> Plan:
    """The first walk: one row per file gc may consider, then the choice."""
    import numpy as np

    started = time.time()
    ids, used, sizes, alloc = array("q"), array("d"), array("q"), array("q")
    names, inodes, groups = array("q"), array("q"), array("l")  # hash((folder, name)), inode
    homes = array("q")  # hash(folder) of each row's folder
    folders, parents = array("q"), array("q")  # hash of each folder entered, and of its parent

    def entered(folder: tuple[str, ...]) -> bool:
        folders.append(hash(folder))
        parents.append(hash(folder[:-1]))
        return True

    last_folder: tuple[str, ...] | None = None
    home = hash(())
    pinned, linked = array("q"), array("q")  # chunk ids: being written, hard-linked
    group_index: dict[GroupKey, int] = {}
    found = Groups()
    known = unknown = unknown_bytes = temps = configs = hard_linked = 0
    folder_bytes = config_bytes = 0
    examples: list[str] = []
    owners = FolderModels(root)  # the models vLLM's config.json files name
    known_homes: set[int] = set()  # folders holding a file of a known layout, in scope or not
    unknown_rows = array("b")  # 1 where the row is a file of no known layout
    walk = Walk(root, progress=progress, tick=tick, folders=entered)
    for seen in walk:
        folder_bytes += seen.size
        match = classify(seen.folder, seen.name)
        leftover = match is None and _leftover(seen.name)
        if leftover:
            known += 1
        elif match is None:
            unknown += 1
            unknown_bytes += seen.size
            if len(examples) < 10:
                examples.append("/".join((*seen.folder, seen.name)))
        else:
            known += 1
            temps += match.kind == TEMP
            configs += match.kind == CONFIG
            config_bytes += seen.size if match.kind == CONFIG else 0
        if seen.folder is not last_folder:  # one tuple a folder: hashed once
            last_folder = seen.folder
            home = hash(last_folder)
        model = None
        if match is not None:
            known_homes.add(home)
            model = file_model(match, owners)
        chunk = _chunk_id(seen, scope, match, model)
        if match is not None and match.kind == TEMP:  # never removed, whatever it names
            found.kept_of(_group(match, model), TEMPORARY_WHY).add(1, seen.size, seen.mtime)
        if chunk is None:
            if match is not None and match.kind == CHUNK and not in_scope(scope, match, model):
                key = _group(match, model)
                found.kept_of(key, SCOPE_WHY).add(1, seen.size, last_use(seen, mode))
            continue
        key = _group(match, model)
        if chunk[1]:
            pinned.append(chunk[0])
            continue
        if seen.links > 1:
            hard_linked += 1
            linked.append(chunk[0])
        group = group_index.setdefault(key, len(group_index))
        ids.append(chunk[0])
        unknown_rows.append(match is None and not leftover)
        homes.append(home)
        names.append(hash((seen.folder, seen.name)))
        inodes.append(seen.ino)
        groups.append(group)
        used.append(last_use(seen, mode))
        sizes.append(seen.size)
        alloc.append(seen.allocated)
    clock = time.time()

    def arr(values: array[Any], dtype: Any) -> Any:
        return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)

    # --include-unknown: a file of no known layout goes only from a folder that also holds an
    # engine's files (a stray file beside chunks); one among files of no known layout stays
    alone = arr(unknown_rows, np.int8).astype(bool)
    homes_a = arr(homes, np.int64)
    alone &= ~np.isin(homes_a, np.fromiter(known_homes, np.int64, len(known_homes)))
    keep = ~alone
    alone_bytes = int(arr(sizes, np.int64)[alone].sum())
    if alone.any():
        alone_used = arr(used, np.float64)[alone]
        found.kept_of(_group(None), SCOPE_WHY).merge(
            Tally(int(alone.sum()), int(alone.sum()), alone_bytes, float(alone_used.min()),
                  float(alone_used.max()))
        )  # fmt: skip

    def rows_of(values: array[Any], dtype: Any) -> Any:
        return arr(values, dtype)[keep]

    ids_a, used_a = rows_of(ids, np.int64), rows_of(used, np.float64)
    sizes_a = rows_of(sizes, np.int64)
    choice = choose(
        ids_a,
        used_a,
        sizes_a,
        rows_of(alloc, np.int64),
        np.concatenate([arr(pinned, np.int64), arr(linked, np.int64)]),
        now=clock,
        limits=limits,
        free_bytes=free_bytes,
        other_bytes=folder_bytes - int(sizes_a.sum()),
    )
    _tally_kept(found, choice, list(group_index), rows_of(groups, np.int64), used_a, sizes_a,
                ids_a, arr(linked, np.int64))  # fmt: skip
    rows = choice.rows
    chosen = Chosen(rows_of(names, np.int64)[rows], rows_of(inodes, np.int64)[rows])
    needed = needed_folders(homes_a[keep][rows], arr(folders, np.int64), arr(parents, np.int64))
    # with --include-unknown they are in scope, removable (but those alone in their folder):
    # not what stays whatever the limits
    unknown_kept = alone_bytes if scope.include_unknown else unknown_bytes
    return Plan(
        choice, clock, known, unknown, examples, temps, chosen, found, walk, configs,
        unknown_bytes, hard_linked, started, needed, folder_bytes, config_bytes, unknown_kept,
    )  # fmt: skip


def _tally_kept(
    found: Groups,
    choice: Choice,
    keys: list[GroupKey],
    group: Any,
    used: Any,
    sizes: Any,
    ids: Any,
    linked: Any,
) -> None:
    """Add to ``found`` what the choice keeps, per group and why (numpy over the rows)."""
    import numpy as np

    if len(group) == 0:
        return
    reasons = 5  # the four fates, then hard-linked (a kind of pinned)
    fate = choice.chunk_fate[choice.row_chunk].astype(np.int64)
    fate[np.isin(ids, linked)] = 4
    key = group * reasons + fate
    cells = len(keys) * reasons
    files = np.bincount(key, minlength=cells)
    size = np.zeros(cells, np.int64)
    np.add.at(size, key, sizes)
    oldest = np.full(cells, np.inf)
    newest = np.zeros(cells)
    np.minimum.at(oldest, key, used)
    np.maximum.at(newest, key, used)
    chunk_key = np.zeros(len(choice.chunk_fate), np.int64)
    chunk_key[choice.row_chunk] = key
    chunks = np.bincount(chunk_key, minlength=cells)
    why_of = {**_REASON_OF_FATE, 4: LINKED_WHY}
    for cell in np.flatnonzero(files):
        index, reason = divmod(int(cell), reasons)
        if reason == CHOSEN:
            continue  # the sweep says what really went
        tally = found.kept_of(keys[index], why_of[reason])
        tally.merge(
            Tally(
                int(chunks[cell]),
                int(files[cell]),
                int(size[cell]),
                float(oldest[cell]),
                float(newest[cell]),
            )
        )


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
    homes: list[str] | None = None,
) -> tuple[Plan, Outcome]:
    """Cap ``root``: open it, refuse it when it is a system or home folder, take its lock
    (not for a dry run, which changes nothing), plan, remove. Every removal goes to ``each``
    and, as JSON lines appended to ``log`` before the files go (so a SIGKILL loses none),
    with a first line for the run and a last saying how it ended. ``LockProblem`` when the
    lock is another's, not a lock, or lost; InputError when the folder is refused or holds no
    file of a known layout."""
    from kvtool.errors import InputError
    from kvtool.files import AppendLog

    def step(name: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda files, size: progress(name, files, size))

    with Root(root) as handle, Scratch() as scratch:
        refuse_system_folder(handle, homes=homes)
        journal = AppendLog(log) if log is not None else None
        if journal is not None:
            scratch.on_exit(journal.close)
            journal.write([_line("start", folder=str(root), dry_run=dry_run,
                                 limits=limits._asdict(), host=socket.gethostname(),
                                 pid=os.getpid())])  # fmt: skip
        lock = None
        sweep: Sweep | None = None
        try:
            if not dry_run:
                lock = Lock(handle)
                scratch.on_exit(lock.release)
                lock.acquire()
            tick = lock.refresh if lock is not None else None
            planned = plan(
                handle, scope=scope, limits=limits, mode=mode, free_bytes=free_bytes,
                progress=step("reading"), tick=tick,
            )  # fmt: skip
            if planned.known_files == 0 and not scope.include_unknown:
                seen = ", ".join(planned.unknown_examples[:5]) or "nothing"
                raise InputError(
                    f"{root} holds no file of a layout kvtool knows (saw "
                    f"{planned.unknown_files:,} other files: {seen})",
                    "point gc at an engine's KV folder, or add --include-unknown",
                )
            sweep = Sweep(
                handle, planned, scope=scope, mode=mode, dry_run=dry_run, lock=lock,
                progress=step("removed" if not dry_run else "would remove"),
                journal=journal,
            )  # fmt: skip
            for removal in sweep:
                if each is not None:
                    each(removal)
            outcome = sweep.outcome()
        except BaseException as exc:
            if journal is not None:
                done = sweep.outcome() if sweep is not None else None
                journal.write([_line("stopped", why=str(exc) or type(exc).__name__,
                                     **_totals(done))])  # fmt: skip
            raise
        if journal is not None:
            journal.write([_line("end", **_totals(outcome))])
        return planned, outcome


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


def _totals(outcome: Outcome | None) -> dict[str, Any]:
    if outcome is None:
        return {"removed_files": 0, "removed_bytes": 0}
    return {
        "removed_chunks": outcome.removed_chunks,
        "removed_files": outcome.removed_files,
        "removed_bytes": outcome.removed_bytes,
        "skipped_chunks": outcome.skipped_chunks,
        "failed": len(outcome.failed),
        "unreadable_folders": outcome.unreadable_count,
    }


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
                found = _chunk_id(seen, self.scope, match, model)
                if found is None or found[1] or found[0] not in wanted:
                    continue
                chunk = found[0]
                members = pending.setdefault(chunk, [])
                engine, model = _group(match, model)
                members.append((seen.folder, seen.name, engine, model, name_hash))
                if len(members) == wanted[chunk]:
                    del pending[chunk]
                    yield from self._remove(handles, members, self.choice.newest[chunk])
        for members in pending.values():  # a file of theirs went away since the plan
            self._skip(members[0], len(members))

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

    def _remove(self, handles: Handles, members: list[_Member], newest: float) -> Iterator[Removal]:
        inodes = (
            self.chosen.inodes_of([m[4] for m in members])
            if self.chosen is not None and self.chosen.files
            else [-1] * len(members)
        )
        checked: list[tuple[_Member, int, Removal]] = []
        if not self.dry_run and not self._inside(handles, members):
            self._skip(members[0], len(members))  # a folder of it moved out of DIR
            return
        for member, inode in zip(members, inodes, strict=True):
            info = self._still_chosen(handles, member, inode)
            if info is None:
                self._skip(member, len(members))
                return
            now = Seen(member[0], member[1], info.st_size, 0, info.st_atime, info.st_mtime, 0,
                       ctime=info.st_ctime)  # fmt: skip
            used = last_use(now, self.mode)
            if used > newest:
                self._skip(member, len(members))  # used (or written anew) since the plan
                return
            rel = "/".join((*member[0], member[1]))
            checked.append((member, inode, Removal(rel, info.st_size, used, member[2], member[3])))
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
            if not same or not handles.inside(member[0]):
                _put_back(fd, private, member[1])  # in its folder, wherever that now is
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

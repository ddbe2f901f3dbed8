"""``kvtool gc``'s plan, its first walk: every file below the folder read once, one row per
file in flat arrays (seven 8-byte fields: 56 bytes a file), each file's chunk and group (engine
layout and model), then ``select.choose``'s whole chunks, oldest first, until the limits hold;
the plan keeps the chosen files' hashes and inodes (``Chosen``) and the folders that hold them
(``needed_folders``) for the second walk (``gc.Sweep``), and tallies what stays and why. The
records both walks share (``Removal``, ``Tally``, ``Groups``, why a file stays) are here."""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import blake2b
from typing import Any, NamedTuple

from kvtool.folders.candidates import Candidates
from kvtool.folders.layouts import CHUNK, CONFIG, TEMP, Match, classify
from kvtool.folders.scope import FolderModels, Scope, file_model, in_scope
from kvtool.folders.select import (
    CHOSEN,
    NOT_NEEDED,
    PINNED,
    YOUNG,
    Choice,
    Cut,
    Limits,
    Ranked,
    choose,
)
from kvtool.folders.shard import Exchange, Shard, Summary
from kvtool.folders.summary import last_use
from kvtool.folders.walk import MAX_DEPTH, Root, Seen, Walk

# why a file stays, in the order the summary lists them
NOT_NEEDED_WHY = "not needed"  # newer than what was removed: the limits held without it
YOUNG_WHY = "young"  # used within the grace period
WRITING_WHY = "being written"  # an in-flight temporary names its chunk
LINKED_WHY = "hard-linked"  # another name holds its data: removing this one frees nothing
CHANGED_WHY = "changed"  # used, rewritten or replaced between the plan and its removal
FAILED_WHY = "failed"  # the file system would not remove it
SCOPE_WHY = "out of scope"  # another layout or model than --layout/--model
TEMPORARY_WHY = "temporary"  # an in-flight temporary: never removed
NOT_EXPORTED_WHY = "not exported"  # --release: no up-to-date copy in S3 (never released)
RELEASED_WHY = "released before"  # --release: its data is in S3 only already
KEPT_ORDER = (
    NOT_NEEDED_WHY, YOUNG_WHY, WRITING_WHY, LINKED_WHY, CHANGED_WHY, FAILED_WHY, SCOPE_WHY,
    TEMPORARY_WHY, NOT_EXPORTED_WHY, RELEASED_WHY,
)  # fmt: skip
# a file being removed holds this name for the time of one stat (rename-then-verify); one a
# SIGKILL caught in that instant keeps it, and its path is in the log as removed
PRIVATE_PREFIX = ".kvtool-gc-removing."
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


def chunk_of(
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


def group_of(match: Match | None, model: str | None = None) -> GroupKey:
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
    held: bool = False  # sizes are what the file system holds (--release), not apparent sizes
    shard: Shard | None = None
    other_shards: int = 0  # files of the other shards: listed, never read
    cut: Cut | None = None  # the cut the shards of a run agreed on
    listed: int | None = None  # files lfs find listed (--candidates lfs-find)
    unlisted: int = 0  # chunk files lfs find did not list (newer than the cut): never read


def plan(
    root: Root,
    *,
    scope: Scope,
    limits: Limits,
    mode: str,
    free_bytes: int,
    progress: Callable[[int, int], None] | None = None,
    tick: Callable[[], None] | None = None,
    held: bool = False,
    shard: Shard | None = None,
    exchange: Exchange | None = None,
    candidates: Candidates | None = None,
) -> Plan:
    """The first walk: one row per file gc may consider, then the choice. ``held``: a file's
    size is what the file system holds for it (``--release``: a released file keeps its size,
    not its data). ``shard``: read only that shard's files (``folders/shard.py``), and with
    ``exchange`` agree with the run's other shards on one cut. ``candidates``: read only the
    files ``lfs find`` listed; a chunk with a file it did not list is newer than the cut."""
    import numpy as np

    started = candidates.clock if candidates is not None else time.time()
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
    fresh = array("q")  # chunk ids with a file lfs find did not list
    last: list[Any] = [None, None, None]  # the name ``want`` classified last, and its match
    unlisted = [0]

    def want(folder: tuple[str, ...], name: str) -> bool:
        match = classify(folder, name)
        last[:] = folder, name, match
        key = shard_key(folder, name, match)
        if shard is not None and not shard.owns(key):
            return False
        row = match is None or match.kind == CHUNK
        if candidates is not None and row and not candidates.has(folder, name):
            fresh.append(key)  # lfs find did not list it: newer than the cut
            unlisted[0] += 1
            return False
        return True

    picky = shard is not None or candidates is not None
    walk = Walk(root, progress=progress, tick=tick, folders=entered, want=want if picky else None)
    for seen in walk:
        size = seen.allocated if held else seen.size
        folder_bytes += size
        if last[0] is seen.folder and last[1] == seen.name:
            match = last[2]
        else:
            match = classify(seen.folder, seen.name)
        leftover = match is None and _leftover(seen.name)
        if leftover:
            known += 1
        elif match is None:
            unknown += 1
            unknown_bytes += size
            if len(examples) < 10:
                examples.append("/".join((*seen.folder, seen.name)))
        else:
            known += 1
            temps += match.kind == TEMP
            configs += match.kind == CONFIG
            config_bytes += size if match.kind == CONFIG else 0
        if seen.folder is not last_folder:  # one tuple a folder: hashed once
            last_folder = seen.folder
            home = hash(last_folder)
        model = None
        if match is not None:
            known_homes.add(home)
            model = file_model(match, owners)
        chunk = chunk_of(seen, scope, match, model)
        if match is not None and match.kind == TEMP:  # never removed, whatever it names
            found.kept_of(group_of(match, model), TEMPORARY_WHY).add(1, size, seen.mtime)
        if chunk is None:
            if match is not None and match.kind == CHUNK and not in_scope(scope, match, model):
                key = group_of(match, model)
                found.kept_of(key, SCOPE_WHY).add(1, size, last_use(seen, mode))
            continue
        key = group_of(match, model)
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
        sizes.append(size)
        alloc.append(seen.allocated)
    clock = started if candidates is not None else time.time()

    def arr(values: array[Any], dtype: Any) -> Any:
        return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)

    # --include-unknown: a file of no known layout goes only from a folder that also holds an
    # engine's files (a stray file beside chunks); one among files of no known layout stays
    alone = arr(unknown_rows, np.int8).astype(bool)
    homes_a = arr(homes, np.int64)
    alone &= ~np.isin(homes_a, np.fromiter(known_homes, np.int64, len(known_homes)))
    keep = ~alone
    if len(fresh):  # a chunk with a file lfs find did not list is newer than the cut: kept whole
        newer = np.isin(arr(ids, np.int64), arr(fresh, np.int64)) & keep
        _tally_rows(found, list(group_index), arr(groups, np.int64)[newer],
                    arr(used, np.float64)[newer], arr(sizes, np.int64)[newer],
                    arr(ids, np.int64)[newer], NOT_NEEDED_WHY)  # fmt: skip
        keep &= ~newer
    alone_bytes = int(arr(sizes, np.int64)[alone].sum())
    if alone.any():
        alone_used = arr(used, np.float64)[alone]
        found.kept_of(group_of(None), SCOPE_WHY).merge(
            Tally(int(alone.sum()), int(alone.sum()), alone_bytes, float(alone_used.min()),
                  float(alone_used.max()))
        )  # fmt: skip

    def rows_of(values: array[Any], dtype: Any) -> Any:
        return arr(values, dtype)[keep]

    ids_a, used_a = rows_of(ids, np.int64), rows_of(used, np.float64)
    sizes_a = rows_of(sizes, np.int64)
    ranked: list[Ranked] = []
    cut = None

    def choice_of(cut: Cut | None) -> Choice:
        return choose(
            ids_a, used_a, sizes_a, rows_of(alloc, np.int64),
            np.concatenate([arr(pinned, np.int64), arr(linked, np.int64)]), now=clock,
            limits=limits, free_bytes=free_bytes, other_bytes=folder_bytes - int(sizes_a.sum()),
            cut=cut, ranked=ranked,
        )  # fmt: skip

    choice = choice_of(None)
    if exchange is not None:  # the shards of a run agree on one cut over the whole folder
        mine = Summary(exchange.shard, clock, free_bytes, limits, ranked[0])
        cut = exchange.agree(mine, tick)
        choice = choice_of(cut)
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
        held, shard, walk.passed - unlisted[0], cut,
        None if candidates is None else candidates.listed, unlisted[0],
    )  # fmt: skip


def shard_key(folder: tuple[str, ...], name: str, match: Match | None) -> int:
    """What a file is split among shards by (``folders/shard.py``): its chunk's id, so a
    chunk's files stay together wherever they lie; for a file that is no chunk's (a config, a
    temporary naming none, a file of no known layout) the id of its path."""
    if match is not None and match.chunk and match.kind in (CHUNK, TEMP):
        return chunk_id(match.chunk)
    return chunk_id("\0".join(("unknown", *folder, name)))


def _tally_rows(
    found: Groups, keys: list[GroupKey], group: Any, used: Any, sizes: Any, ids: Any, why: str
) -> None:
    """Add rows (files) to ``found`` as kept for ``why``, per group, with their chunks."""
    for index in set(group.tolist()):
        rows = group == index
        tally = found.kept_of(keys[index], why)
        tally.merge(Tally(len(set(ids[rows].tolist())), int(rows.sum()), int(sizes[rows].sum()),
                          float(used[rows].min()), float(used[rows].max())))  # fmt: skip


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

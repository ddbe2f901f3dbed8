"""Which chunks gc removes: least recently used first, whole chunks only, until every limit
holds. Pure: arrays of one row per file in, the chosen chunks out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np


class Limits(NamedTuple):
    """What gc must make true; None for a limit not asked for."""

    max_size: int | None = None  # the files in scope hold at most this many bytes
    max_age: float | None = None  # no chunk unused for longer than this many seconds
    keep_free: int | None = None  # the file system keeps at least this many bytes free
    grace: float = 600.0  # a chunk used this recently is never removed


class Choice(NamedTuple):
    """What gc chose."""

    chunks: dict[int, int]  # chunk id -> how many files it has
    newest: dict[int, float]  # chunk id -> its newest file's last use, as planned
    files: int
    bytes: int
    allocated: int
    total_bytes: int  # in scope, before
    chunk_count: int  # in scope, before
    protected_bytes: int  # young or in flight: never removed
    short_bytes: int  # how far from --max-size / --keep-free even after every removable chunk
    rows: Any = None  # numpy int64: the input rows (files) of the chosen chunks
    chunk_fate: Any = None  # numpy int8 per chunk (in id order): one of the FATES' indexes
    row_chunk: Any = None  # numpy int64 per input row: its chunk's index in chunk_fate


# what the choice made of a chunk, by index
NOT_NEEDED, CHOSEN, YOUNG, PINNED = 0, 1, 2, 3
FATES = ("not needed", "chosen", "young", "pinned")


class Cut(NamedTuple):
    """Where the whole folder's choice ends, agreed by the shards of one run (``cut_of``): a
    shard removes exactly its removable chunks ranked at or before (``newest``, ``id``), so
    together they remove what one unsharded run would. ``short`` is how far the whole folder
    stays from a size limit."""

    newest: float
    id: int
    short: int = 0


NOTHING = Cut(float("-inf"), -(1 << 63), 0)  # a cut before every chunk


def _take(
    newest: np.ndarray,
    freed: np.ndarray,
    freed_alloc: np.ndarray,
    *,
    now: float,
    limits: Limits,
    total: int,
    free_bytes: int,
) -> tuple[int, int]:
    """How many of the removable chunks, ranked oldest first (``newest``, and the running sums
    of their bytes and allocated bytes), must go for every limit to hold, and by how many bytes
    a size limit stays out of reach even then. ``total`` is every byte ``--max-size`` counts."""
    import numpy as np

    take = short = 0
    if limits.max_age is not None:
        take = max(take, int(np.searchsorted(newest, now - limits.max_age)))
    if limits.max_size is not None and total > limits.max_size:
        need = total - limits.max_size
        k = int(np.searchsorted(freed, need)) + 1  # the first prefix that frees enough
        if k > len(newest):
            short = max(short, need - (int(freed[-1]) if len(freed) else 0))
        take = max(take, min(k, len(newest)))
    if limits.keep_free is not None and free_bytes < limits.keep_free:
        need = limits.keep_free - free_bytes
        k = int(np.searchsorted(freed_alloc, need)) + 1
        if k > len(newest):
            short = max(short, need - (int(freed_alloc[-1]) if len(freed_alloc) else 0))
        take = max(take, min(k, len(newest)))
    return take, short


def cut_of(
    newest: np.ndarray,
    ids: np.ndarray,
    sizes: np.ndarray,
    allocated: np.ndarray,
    *,
    now: float,
    limits: Limits,
    total: int,
    free_bytes: int,
) -> Cut:
    """The whole folder's cut from every shard's removable chunks (one row a chunk: its newest
    use, id, bytes and allocated bytes, in any order): the same ranking and limits as
    ``choose``, over all of them."""
    import numpy as np

    keep = newest < now - limits.grace
    newest, ids, sizes, allocated = newest[keep], ids[keep], sizes[keep], allocated[keep]
    order = np.lexsort((ids, newest))
    take, short = _take(
        newest[order], np.cumsum(sizes[order]), np.cumsum(allocated[order]), now=now,
        limits=limits, total=total, free_bytes=free_bytes,
    )  # fmt: skip
    if take == 0:
        return NOTHING._replace(short=short)
    last = order[take - 1]
    return Cut(float(newest[last]), int(ids[last]), short)


class Ranked(NamedTuple):
    """A shard's removable chunks, oldest first, as it tells the others (``choose``)."""

    newest: np.ndarray
    ids: np.ndarray
    bytes: np.ndarray
    allocated: np.ndarray
    total: int  # every byte of the shard's files --max-size counts


def choose(
    ids: np.ndarray,
    used: np.ndarray,
    sizes: np.ndarray,
    allocated: np.ndarray,
    pinned: np.ndarray,
    *,
    now: float,
    limits: Limits,
    free_bytes: int,
    other_bytes: int = 0,
    cut: Cut | None = None,
    ranked: list[Ranked] | None = None,
) -> Choice:
    """The chunks to remove. Row ``i`` is one file: its chunk id ``ids[i]``, last use
    ``used[i]`` (seconds since the epoch), ``sizes[i]`` and ``allocated[i]`` bytes. A chunk
    is as recent as its most recent file; ``pinned`` chunk ids (a file of theirs is being
    written) are never removed, nor is a chunk used within ``limits.grace`` seconds. Chunks
    leave oldest first; the one with the smaller id goes first among equally old ones.
    ``other_bytes`` are the folder's files no row stands for (temporaries, configs, unknown
    and out-of-scope files): ``--max-size`` caps them with the rest, as ``du`` counts a
    folder, though none of them is removed. ``rows`` lists every input row of a chosen chunk;
    ``chunk_fate`` and ``row_chunk`` say what became of every chunk (chosen, not needed to reach
    the limits, young, pinned) and which chunk each row belongs to. With ``cut`` (a sharded
    run's, agreed over the whole folder) the removable chunks ranked at or before it go,
    whatever the limits; ``ranked``, when given a list, gets the removable chunks appended."""
    import numpy as np

    if len(ids) == 0:
        none = np.zeros(0, np.int64)
        if ranked is not None:
            ranked.append(Ranked(none.astype(np.float64), none, none, none, other_bytes))
        short = cut.short if cut is not None else 0
        return Choice({}, {}, 0, 0, 0, 0, 0, 0, short, none, none.astype(np.int8), none)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    chunk_ids, starts, counts = np.unique(sorted_ids, return_index=True, return_counts=True)
    newest = np.maximum.reduceat(used[order], starts)
    chunk_bytes = np.add.reduceat(sizes[order], starts)
    chunk_alloc = np.add.reduceat(allocated[order], starts)
    total = int(chunk_bytes.sum())
    is_pinned = np.isin(chunk_ids, pinned)
    removable = (newest < now - limits.grace) & ~is_pinned
    protected = int(chunk_bytes[~removable].sum())
    candidates = np.flatnonzero(removable)
    candidates = candidates[np.lexsort((chunk_ids[candidates], newest[candidates]))]
    if ranked is not None:
        ranked.append(
            Ranked(newest[candidates], chunk_ids[candidates], chunk_bytes[candidates],
                   chunk_alloc[candidates], total + other_bytes)
        )  # fmt: skip
    if cut is not None:  # ranked at or before the agreed cut: (newest, id) <= cut
        at = newest[candidates]
        before = (at < cut.newest) | ((at == cut.newest) & (chunk_ids[candidates] <= cut.id))
        take, short = int(before.sum()), cut.short
    else:
        take, short = _take(
            newest[candidates], np.cumsum(chunk_bytes[candidates]),
            np.cumsum(chunk_alloc[candidates]), now=now, limits=limits,
            total=total + other_bytes, free_bytes=free_bytes,
        )  # fmt: skip
    chosen = candidates[:take]
    n = counts[chosen]
    ends = np.cumsum(n)
    within = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - n, n)
    rows = order[np.repeat(starts[chosen], n) + within]
    fate = np.full(len(chunk_ids), NOT_NEEDED, np.int8)
    fate[~removable] = YOUNG
    fate[is_pinned] = PINNED
    fate[chosen] = CHOSEN
    row_chunk = np.empty(len(ids), np.int64)
    row_chunk[order] = np.repeat(np.arange(len(chunk_ids)), counts)
    return Choice(
        chunks={int(c): int(n) for c, n in zip(chunk_ids[chosen], counts[chosen], strict=True)},
        newest={int(c): float(t) for c, t in zip(chunk_ids[chosen], newest[chosen], strict=True)},
        files=int(counts[chosen].sum()),
        bytes=int(chunk_bytes[chosen].sum()),
        allocated=int(chunk_alloc[chosen].sum()),
        total_bytes=total,
        chunk_count=len(chunk_ids),
        protected_bytes=protected,
        short_bytes=short,
        rows=rows,
        chunk_fate=fate,
        row_chunk=row_chunk,
    )

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
    the limits, young, pinned) and which chunk each row belongs to."""
    import numpy as np

    if len(ids) == 0:
        none = np.zeros(0, np.int64)
        return Choice({}, {}, 0, 0, 0, 0, 0, 0, 0, none, none.astype(np.int8), none)
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
    freed = np.cumsum(chunk_bytes[candidates])
    freed_alloc = np.cumsum(chunk_alloc[candidates])
    take = 0
    short = 0
    if limits.max_age is not None:
        take = max(take, int(np.searchsorted(newest[candidates], now - limits.max_age)))
    if limits.max_size is not None and total + other_bytes > limits.max_size:
        need = total + other_bytes - limits.max_size
        k = int(np.searchsorted(freed, need)) + 1  # the first prefix that frees enough
        if k > len(candidates):
            short = max(short, need - (int(freed[-1]) if len(freed) else 0))
        take = max(take, min(k, len(candidates)))
    if limits.keep_free is not None and free_bytes < limits.keep_free:
        need = limits.keep_free - free_bytes
        k = int(np.searchsorted(freed_alloc, need)) + 1
        if k > len(candidates):
            short = max(short, need - (int(freed_alloc[-1]) if len(freed_alloc) else 0))
        take = max(take, min(k, len(candidates)))
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

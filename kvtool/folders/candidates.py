"""``kvtool gc --candidates lfs-find``: on Lustre, let the metadata server filter by age
(``lfs find DIR --type f --atime +Ns --mtime +Ns --print0``) and read (``stat``) only the
files it lists; every name is still listed, and every file read and removed, through gc's
own dirfd-safe walks, which decide.

The same files go as with gc's own walk, when the age is the only limit (``--max-age``): a
chunk's last use is the latest of its files' access, modification and change times, so a
chunk older than the cut has every file's access and modification time older than it, and
``lfs find`` lists each of them (change times are not asked of lfs: gc reads them). A chunk
with a file lfs did not list is newer than the cut and stays whole, unread. To hold at the
edges, lfs is asked for files 2 s younger than the cut (whole seconds, and lfs's own clock),
and the plan's clock is taken before lfs starts: lfs may list more, never fewer; gc reads
what it lists and applies the exact rule. On a noatime mount access times are left out of
last use, and so out of the filter.
"""

from __future__ import annotations

import math
import time
from array import array
from typing import Any

from kvtool.errors import InputError
from kvtool.folders.select import Limits
from kvtool.folders.walk import Root
from kvtool.probe.lfs import Lfs

SLACK_S = 2  # lfs is asked for files this much younger than the cut


class Candidates:
    """The files ``lfs find`` listed, by a hash of (folder parts, name), as the walks hash
    them; ``clock`` is when the listing began (the plan's clock)."""

    def __init__(self, hashes: Any, clock: float) -> None:
        import numpy as np

        self.hashes = np.unique(np.asarray(hashes, dtype=np.int64))
        self.listed = len(hashes)
        self.clock = clock

    def has(self, folder: tuple[str, ...], name: str) -> bool:
        h = hash((folder, name))
        at = int(self.hashes.searchsorted(h))
        return at < len(self.hashes) and int(self.hashes[at]) == h


def cut_age(limits: Limits) -> float:
    """How old (s) a chunk must be to go: the age limit, and never within the grace."""
    if limits.max_age is None:
        raise ValueError("candidates from lfs find serve --max-age")
    return max(limits.max_age, limits.grace)


def lfs_find(lfs: Lfs, root: Root, *, limits: Limits, mode: str) -> Candidates:
    """The candidates: what ``lfs find`` lists below the open folder ``root``. InputError
    (nothing removed) when lfs find fails: before Lustre 2.13 it takes no time units."""
    older = max(0, math.floor(cut_age(limits)) - SLACK_S)
    times = ("mtime",) if mode == "noatime" else ("atime", "mtime")
    clock = time.time()
    hashes = array("q")
    listing = lfs.find(root.fd, older_s=older, times=times)
    while True:
        try:
            folder, name = next(listing)
        except StopIteration as stop:
            done = stop.value
            break
        hashes.append(hash((folder, name)))
    if not done.ok:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise InputError(
            f"lfs find failed: {said}",
            "run gc without --candidates lfs-find (gc's own walk reads every file); lfs find"
            " takes time units from Lustre 2.13",
        )
    return Candidates(hashes, clock)

"""``kvtool gc``: cap a shared KV folder by removing least-recently-used chunks, and never
touch what is not its own (docs/gc.md says what it guarantees and how the tests attack it).

Everything happens relative to the folder's open handle (``walk.Root``): folders below it are
opened from their parent's handle with ``O_NOFOLLOW``, never by path, and never on another
mount; a system or home folder is refused (``guard``); the lock is made and checked from the
same handle (``lock``).

Two walks. The first (``gc_plan.plan``) reads every file once and keeps one row per file in
flat arrays (seven 8-byte fields: 56 bytes a file); ``select.choose`` then picks whole chunks,
oldest first, until the limits hold. The second walk (``sweep.Sweep``) removes them, or with
``--release`` releases them to S3 (``release.ReleaseSweep``). ``run_gc``, here, holds the
folder, its lock and its log around both.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvtool.folders.candidates import lfs_find
from kvtool.folders.gc_plan import PRIVATE_PREFIX, Chosen, Plan, Removal, Tally, plan
from kvtool.folders.guard import refuse_system_folder
from kvtool.folders.lock import REFRESH_S, STALE_S, Busy, Lock, LockProblem, Lost, NotOurs
from kvtool.folders.release import ReleaseSweep
from kvtool.folders.scope import Scope
from kvtool.folders.select import Limits
from kvtool.folders.shard import Shard
from kvtool.folders.sweep import Outcome, Sweep, _line
from kvtool.folders.walk import LOCK_NAME, Root
from kvtool.probe.lfs import Lfs
from kvtool.scratch import Scratch

__all__ = [
    "PRIVATE_PREFIX", "REFRESH_S", "STALE_S", "Busy", "Chosen", "Lock", "LockProblem", "Lost",
    "NotOurs", "Outcome", "Plan", "Removal", "Scope", "Sweep", "Tally", "plan", "run_gc",
]  # fmt: skip


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
    release: Lfs | None = None,
    shard: Shard | None = None,
    run: str | None = None,
    candidates: Lfs | None = None,
) -> tuple[Plan, Outcome]:
    """Cap ``root``: open it, refuse it when it is a system or home folder, take its lock
    (not for a dry run, which changes nothing), plan, remove. Every removal goes to ``each``
    and, as JSON lines appended to ``log`` before the files go (so a SIGKILL loses none),
    with a first line for the run and a last saying how it ended. ``LockProblem`` when the
    lock is another's, not a lock, or lost; InputError when the folder is refused or holds no
    file of a known layout. ``release``: release the chosen files to S3 through this ``lfs``
    instead (``folders/release.py``). ``shard``: do shard K of N's part (``folders/shard.py``,
    its own lock; ``run`` names the run its shards agree on a size limit's cut in).
    ``candidates``: take candidates from this ``lfs``'s ``lfs find`` (``--max-age`` alone)."""
    from kvtool.errors import InputError
    from kvtool.files import AppendLog
    from kvtool.folders.lock import shard_lock_name
    from kvtool.folders.shard import Exchange

    def step(name: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda files, size: progress(name, files, size))

    with Root(root) as handle, Scratch() as scratch:
        refuse_system_folder(handle, homes=homes)
        journal = AppendLog(log) if log is not None else None
        if journal is not None:
            scratch.on_exit(journal.close)
            journal.write([_line("start", folder=str(root), dry_run=dry_run,
                                 limits=limits._asdict(), host=socket.gethostname(),
                                 pid=os.getpid(), release=release is not None,
                                 shard=None if shard is None else shard.label)])  # fmt: skip
        lock = None
        sweep: Sweep | None = None
        try:
            if not dry_run:
                name = LOCK_NAME if shard is None else shard_lock_name(shard.k, shard.n)
                lock = Lock(handle, name=name)
                scratch.on_exit(lock.release)
                lock.acquire()
            tick = lock.refresh if lock is not None else None
            exchange = None
            if (
                shard is not None
                and shard.n > 1
                and (limits.max_size, limits.keep_free) != (None, None)
            ):
                exchange = Exchange(handle, shard, run or "")
            found = None
            if candidates is not None:
                found = lfs_find(candidates, handle, limits=limits, mode=mode)
            planned = plan(
                handle, scope=scope, limits=limits, mode=mode, free_bytes=free_bytes,
                progress=step("reading"), tick=tick, held=release is not None, shard=shard,
                exchange=exchange, candidates=found,
            )  # fmt: skip
            # an empty folder is an answer (nothing yet: a tier before its first write, gc
            # from cron); files of no layout kvtool knows are the wrong folder, most likely
            if planned.known_files == 0 and planned.unknown_files and not scope.include_unknown:
                seen = ", ".join(planned.unknown_examples[:5])
                raise InputError(
                    f"{root} holds no file of a layout kvtool knows (saw "
                    f"{planned.unknown_files:,} other files: {seen})",
                    "point gc at an engine's KV folder, or add --include-unknown",
                )
            if release is not None:
                sweep = ReleaseSweep(
                    handle, planned, lfs=release, scope=scope, mode=mode, dry_run=dry_run,
                    lock=lock, progress=step("released" if not dry_run else "would release"),
                    journal=journal,
                )  # fmt: skip
            else:
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

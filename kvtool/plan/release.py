"""The AWS article's T4: T3 exports to S3 and releases idle KV; a released file comes back
through FSx. Pure.

The AWS Storage Blog article "Accelerate inference with KV cache tiering on AWS" (2026-09-21)
keeps T3 for hot data and, for a session "idle much longer", exports its KV to S3. On FSx for
Lustre that is a data repository association (DRA) with automatic export (every file the engine
writes is copied to the linked S3 bucket) and a release of the files left idle: a released
file keeps its name and metadata on FSx, its data only in S3, and the first read of it loads
the data back from S3 ("If a user or application accesses a released file, the data is
automatically and transparently loaded back onto your file system from your linked Amazon S3
bucket", FSx for Lustre User Guide, file-release.html; importing-files-dra.html: "FSx for
Lustre automatically copies the content of a file from your data repository and loads it into
the file system when your application first accesses the file"). So a released session returns
by the engine's ordinary read of its files on FSx: nothing in the engine changes.

This module plans that path, named beside the engine-direct one (``reload.s3_path``):

* **which sessions are released**: those idle past ``release_after`` (default 10 minutes,
  kvtool's reading of the article's "idle much longer", which gives no figure; the same line
  ``kvtool advise`` uses to add T4). With the sessions' mean idle time m (``--set mean_idle``)
  and idle gaps taken as exponential (memoryless turns), the share of sessions whose current
  idle time exceeds a threshold t is exp(-t / m) (the age of an exponential gap is exponential
  with the same mean). Those sessions, at most the ones that spill past T1 and T2 (the least
  recently used), are released to S3; the rest of T3 is hot, and FSx is sized for it alone.
  ``kvtool advise`` and ``check`` take m from the workload's ``mean_idle`` (``resolve_idle``);
  a ``--set mean_idle`` given beside it wins, and the plan says so.
* **how long a released session takes to come back** (``hydrate_path``): each file the engine
  opens costs S3's first-byte latency (FSx's GET of the exported object) on top of FSx's, then
  its size at one S3 connection's rate; the engine's T3 I/O threads are the restores in flight
  (FSx does not publish its restore concurrency: assumed); the rate is the lower of S3's GETs
  per partitioned prefix (a DRA's object keys are the files' paths below the association's
  prefix: an engine writing one flat folder gives one prefix) and the file system's opens
  (Metadata IOPS); the bytes land on FSx's disks, so the node's share of the file system's
  write throughput bounds them. AWS publishes no hydration rate; a 455 MB file took 4-7 s
  (65-115 MB/s) on first read in AWS's own HPC workshop (hpcworkshops.com, "About Lazy File
  Loading"), in line with the 85 MB/s a connection kvtool assumes for S3.
* **how the release runs** (``release_commands``): FSx's RELEASE_DATA_FROM_FILESYSTEM task
  selects in whole days only, so a threshold under a day is ``kvtool gc --release`` from a
  client (``lfs hsm_release`` of archived, clean files); a day or more, the FSx task.

Worked numbers (docs/planning.md): Llama 3.1 405B, 1M tokens x 500 sessions on one Trn3
UltraServer, mean idle 30 minutes: exp(-10/30) = 0.7165 of the sessions, 358, are released;
427 spill past T1 and T2, so 69 stay hot on FSx.
"""

from __future__ import annotations

import math
import posixpath
import shlex
from dataclasses import dataclass, replace

from kvtool.plan.cluster import Hardware
from kvtool.plan.fsx import FileSystem
from kvtool.plan.fsx_rules import FILL_IN, create_association, s3_prefix
from kvtool.plan.placement import TierPlan, TierUse
from kvtool.plan.reload import ReloadAssumptions, TierPath, restore
from kvtool.plan.requests import RestoreTerms
from kvtool.profiles.hardware import StorageProfile
from kvtool.units import format_bytes

RELEASE_AFTER_S = 600.0  # kvtool's reading of the article's "idle much longer": 10 minutes
DAY_S = 86_400.0
ARTICLE_PATH = "the AWS article's: FSx exports to S3 (DRA auto-export) and releases idle files"
ENGINE_DIRECT = "engine-direct: the engine's own S3 connector"
RELEASED_MEDIUM = "S3 (released from FSx, DRA)"


@dataclass(frozen=True)
class Release:
    """The sessions the plan releases from FSx to S3, and how a released one comes back.
    ``released_sessions`` is 0 without a mean idle time (nothing says which sessions idle);
    ``restore`` is the plan's concurrent restores of released sessions at its context."""

    release_after_s: float
    after_source: str
    mean_idle_s: float | None
    spilled_sessions: int  # past T1 and T2: on FSx, hot or released
    released_sessions: int
    released_fraction: float  # exp(-release_after / mean_idle) of all sessions
    session_bytes: int  # one session as FSx and S3 store it
    all_fsx_bytes: int  # what FSx would hold with nothing released
    path: TierPath | None = None
    restore: RestoreTerms | None = None
    planned: bool = True  # False: the T4 storage is not a DRA's (S3 Express)
    # where mean_idle_s comes from; without one, how to give it
    idle_source: str = "--set mean_idle"

    @property
    def hot_sessions(self) -> int:
        return self.spilled_sessions - self.released_sessions

    @property
    def released_bytes(self) -> int:
        return self.released_sessions * self.session_bytes

    def summary(self, *, sessions: int) -> str:
        """The plan's T4 path in words: which, why each session is where it is, how a released
        one comes back."""
        after = _age(self.release_after_s)
        if not self.planned:
            return (
                f"T4 path: {ENGINE_DIRECT} (an FSx data repository association links an S3"
                " general purpose bucket, so the AWS article's export-and-release path is planned"
                " on s3-standard only)"
            )
        head = f"T4 path: {ARTICLE_PATH} after {after} idle ({self.after_source})"
        if self.mean_idle_s is None:
            return f"{head}; none released without a mean idle time ({self.idle_source})"
        return (
            f"{head}; {self.split(sessions=sessions)}, FSx holding at least them; a released"
            " session returns when the engine reads its files on FSx, each loaded from S3 on"
            " first read;"
            " the engine-direct path is shown beside it, not used"
        )

    def split(self, *, sessions: int) -> str:
        """Which sessions are released and which stay hot, and why (a mean idle time)."""
        after, idle = _age(self.release_after_s), _age(self.mean_idle_s or 0)
        return (
            f"mean idle {idle} ({self.idle_source}), idle gaps taken as exponential:"
            f" exp(-{after} / {idle}) = {self.released_fraction:.1%} of {sessions:,} sessions"
            f" are idle past {after} at any moment, {self.released_sessions:,} released to S3;"
            f" {self.hot_sessions:,} of the {self.spilled_sessions:,} past T1 and T2 stay"
            " on FSx"
        )


def resolve_release(a: ReloadAssumptions) -> tuple[float, str]:
    """The release threshold and where it comes from."""
    if a.release_after_s is not None:
        return a.release_after_s, "--set release_after"
    return RELEASE_AFTER_S, "the default: kvtool's reading of the AWS article's 'idle much longer'"


def resolve_idle(
    a: ReloadAssumptions, workload: tuple[float, str] | None = None
) -> tuple[float | None, str]:
    """The sessions' mean idle time and where it comes from: ``--set mean_idle`` when given
    (over the workload's, said so), else the workload's (seconds, where it was given; 0 is
    not given). Without either: None, and how to give one."""
    given = workload if workload is not None and workload[0] > 0 else None
    if a.mean_idle_s is not None:
        over = "" if given is None else f", over {_age(given[0])} from {given[1]}"
        return a.mean_idle_s, f"--set mean_idle{over}"
    if given is not None:
        return given
    return None, "--set mean_idle=30m" if workload is None else f"{workload[1]}, e.g. 30m"


def release_idle(
    tiers: TierPlan, *, sessions: int, a: ReloadAssumptions, t4: StorageProfile,
    fsx_capacity_bytes: int | None, workload_idle: tuple[float, str] | None = None,
) -> tuple[TierPlan, Release]:  # fmt: skip
    """``tiers`` with the sessions idle past the threshold moved from T3 to T4 (released to
    S3 through the DRA), T3 needing only the hot ones, and the ``Release`` that says so.
    ``workload_idle``: the workload's mean idle time and where it was given (``resolve_idle``).
    A plan with no T3 (``fsx_capacity_bytes`` 0) releases nothing: nothing is on FSx."""
    by_name = {t.name: t for t in tiers.tiers}
    t3, t4_use = by_name["T3"], by_name["T4"]
    spilled = t3.sessions + t4_use.sessions
    per = (t3.used_bytes + t4_use.used_bytes) // spilled if spilled else 0
    after, source = resolve_release(a)
    idle, idle_source = resolve_idle(a, workload_idle)
    planned = t4.request_rate_scope == "prefix"  # a DRA links a general purpose bucket
    fraction = 0.0
    if idle and planned and fsx_capacity_bytes != 0:
        fraction = math.exp(-after / idle)
    released = min(spilled, math.floor(sessions * fraction + 1e-9))
    release = Release(after, source, idle, spilled, released, fraction, per,
                      all_fsx_bytes=tiers.t3_bytes_needed, planned=planned,
                      idle_source=idle_source)  # fmt: skip
    if not released:
        return tiers, release
    hot = spilled - released
    on_fsx = hot if fsx_capacity_bytes is None else min(hot, fsx_capacity_bytes // max(per, 1))
    moved = [
        replace(t, used_bytes=on_fsx * per, sessions=on_fsx)
        if t.name == "T3"
        else TierUse("T4", RELEASED_MEDIUM, None, (spilled - on_fsx) * per, spilled - on_fsx)
        if t.name == "T4"
        else t
        for t in tiers.tiers
    ]
    notes = tuple(
        f"T3 sized to fit the sessions not released: it needs {format_bytes(hot * per)}"
        " (pass --fsx-capacity to bound it)"
        if note.startswith("T3 sized to fit")
        else note
        for note in tiers.notes
    )
    return replace(tiers, tiers=tuple(moved), t3_bytes_needed=hot * per, notes=notes), release


def hydrate_path(t3_path: TierPath, t4: StorageProfile, a: ReloadAssumptions, *,
                 write_bytes_per_s: float, nodes: int) -> TierPath:  # fmt: skip
    """A released session read back through FSx: the T3 path's files, each first loaded from
    S3 by FSx (see the module docstring for each term and what is assumed)."""
    r = t3_path.requests
    s3_first = t4.latency_us * 1e-6
    prefixes = a.s3_prefixes or 1
    s3_rate = t4.get_requests_per_s * prefixes / max(nodes, 1)
    rate = min(s3_rate, r.rate_per_s)
    per_connection = t4.per_connection_mbytes_per_s * 1e6
    bandwidth = min(t3_path.node_bytes_per_s, write_bytes_per_s / max(nodes, 1))
    why = (
        "--set s3_prefixes"
        if a.s3_prefixes
        else "the DRA's keys are the files' paths: one flat folder, one prefix"
    )
    what = (
        f"{t4.get_requests_per_s:,} GETs/s per partitioned prefix x {prefixes:,}"
        f" prefix{'es' if prefixes > 1 else ''} ({why})"
        + (f", shared by {nodes} nodes" if nodes > 1 else "")
    )
    if r.rate_per_s < s3_rate:
        what = f"the file system's opens ({r.rate_per_s:,.0f} files/s a node) below {what}"
    description = (
        f"{ARTICLE_PATH}; a released file's first read loads it from {t4.name}: FSx's"
        f" {t3_path.latency_s * 1e6:,.0f} us + S3's {s3_first * 1e3:,.0f} ms to first byte a"
        f" file, then {t4.per_connection_mbytes_per_s:,.0f} MB/s a file; {r.connections:,}"
        f" files in flight (the engine's I/O threads; FSx's restore concurrency is not"
        f" published); {what}; the bytes at min(the T3 path, the node's share of FSx's"
        f" writes) = {bandwidth / 1e9:,.1f} GB/s"
    )
    return replace(
        t3_path,
        tier="T4",
        description=description,
        latency_s=t3_path.latency_s + s3_first,
        node_bytes_per_s=bandwidth,
        requests=replace(
            r,
            requests_per_object=1,
            first_byte_s=r.first_byte_s + s3_first,
            per_connection_bytes_per_s=per_connection,
            rate_per_s=rate,
            rate_what=what,
        ),
    )


MOUNT_POINT = "/fsx"  # where AWS's FSx for Lustre examples mount the file system


# what the emitted lines leave to the user, as shell variables set first
def release_commands(release: Release, *, t3_dir: str) -> list[str]:
    """Comment lines for ``--emit``: the DRA's export policy and how the release runs, as
    shell lines: what kvtool cannot know (the file system's id, the bucket; the folder's path
    on the file system when ``t3_dir`` is not below ``/fsx``) is a variable set first and
    marked "fill in"; FSx's ``CreateDataRepositoryAssociation`` takes the folder as a path
    from the file system's root (``/kvcache`` for ``/fsx/kvcache`` mounted at ``/fsx``) and
    the bucket as ``s3://bucket/prefix/``."""
    after = release.release_after_s
    folder = posixpath.normpath(t3_dir)
    fill = dict(FILL_IN)
    if folder.startswith(MOUNT_POINT + "/"):
        path = shlex.quote(folder.removeprefix(MOUNT_POINT))
        where = [
            f"# Link {t3_dir} to an S3 bucket with automatic export: on the file system it is",
            f"# {path} (below {MOUNT_POINT}, where AWS mounts FSx in its examples: change it if"
            " yours is elsewhere).",
        ]
    else:
        fill["FSX_PATH"] = ("/...", f"{t3_dir} below the file system's mount point, from /")
        path = '"$FSX_PATH"'
        where = [f"# Link {t3_dir} to an S3 bucket with automatic export."]
    width = max(len(f"{name}={value}") for name, (value, _) in fill.items())
    head, where_to, export = create_association(
        file_system_id='"$FSX_ID"', path=path, prefix=s3_prefix(t3_dir)
    )
    lines = [
        "# T4, the AWS article's path: FSx exports every file to S3 and releases idle ones.",
        *where,
        f"# Set the {len(fill)} variables marked 'fill in' first:",
        *(
            f"#   {f'{name}={value}':<{width}}  # fill in: {what}"
            for name, (value, what) in fill.items()
        ),
        f"#   {head} \\",
        f"#     {where_to} \\",
        f"#     {export}",
    ]
    quoted = shlex.quote(t3_dir)
    if after >= DAY_S:
        days = math.ceil(after / DAY_S - 1e-9)
        lines += [
            f"# Release what is unused {days} day{'s' if days != 1 else ''} or more, e.g. daily:"
            " FSx's release task",
            "# selects by MAX(atime, ctime, mtime), in whole days; this prints its aws fsx call:",
            f"#   kvtool gc {quoted} --max-age {days}d --release --emit fsx-task"
            ' --fsx-id "$FSX_ID"',
        ]
    else:
        lines += [
            f"# Release what is unused {_age(after)} or more from a client every few minutes"
            " (FSx's",
            "# release task counts whole days only):",
            f"#   kvtool gc {quoted} --max-age {_age(after)} --release",
        ]
    lines.append("# A released file keeps its metadata on FSx; the next read loads it from S3.")
    return lines


def _age(seconds: float) -> str:
    """A duration as gc's --max-age reads it: 10m, 90s, 2h."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def hydrated(release: Release, paths: list[TierPath], hardware: Hardware, fs: FileSystem,
             session_bytes: int, tokens: int, a: ReloadAssumptions) -> Release:  # fmt: skip
    """``release`` with its path and the plan's concurrent restores of released sessions at
    ``tokens`` (none where the path is not planned or the plan has no T3 path)."""
    t3 = next((p for p in paths if p.tier == "T3"), None)
    if t3 is None or not release.planned:
        return release
    path = hydrate_path(t3, hardware.t4, a, write_bytes_per_s=fs.write_bytes_per_s,
                        nodes=hardware.nodes)  # fmt: skip
    return replace(release, path=path, restore=restore(path, session_bytes, tokens, a))

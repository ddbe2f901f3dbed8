"""FSx for Lustre metadata: the opens and closes a restore needs against the Metadata IOPS a
file system has, and the folders its files land in. Pure.

A restore opens one file per chunk per worker (``plan/requests.py``): the Trn3 405B plan at
200,000 tokens restores 16 sessions of 782 chunks x 144 workers, 1,801,728 files. Each is an
open and a close on the metadata servers. A PERSISTENT_2 file system with a metadata
configuration serves them at its Metadata IOPS (FSx API ``MetadataConfiguration``):

* **AUTOMATIC** (SSD only) scales with the capacity: 1,500 at 1,200 GiB, 3,000 at 2,400 GiB,
  6,000 from 4,800 to 9,600 GiB, 12,000 from 12,000 to 45,600 GiB, then 12,000 per 24,000 GiB
  (FSx for Lustre User Guide, managing-metadata-performance.html, as quoted in
  tylertitsworth/skills aws-fsx/SKILL.md);
* **USER_PROVISIONED**: 1,500, 3,000, 6,000, 12,000 or a multiple of 12,000 up to 192,000
  (Intelligent-Tiering: 6,000 or 12,000) (FSx API reference, CreateFileSystemLustreMetadata
  Configuration);
* each Metadata IOPS drives 2 file creates, opens or closes a second, 1 file delete, 0.1
  directory creates or renames, 0.2 directory deletes (managing-metadata-performance.html, same
  quote). A file read back is an open and a close: one Metadata IOPS a second.

So 24,000 GiB on AUTOMATIC (12,000 Metadata IOPS) opens and closes 12,000 files a second: the
Trn3 restore above takes 150 s of metadata, longer than recomputing the 16 sessions (135 s).
AWS advises "limit each directory to less than 100K files" on PERSISTENT_2 for optimal
metadata performance (FSx for Lustre User Guide, performance-tips.html), while LMCache's fs
connector and SGLang's HiCacheFile write one flat folder and LMCache's GDS backend about
10,000 (two levels of two decimal digits of the chunk hash).

The User Guide page on metadata performance was read as quoted in tylertitsworth/skills
``aws-fsx/SKILL.md`` (its provisioned values agree with the API Reference, which was read
directly); the 100K guidance and the provisioned values were read on AWS's own pages.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from kvtool.plan.folder_rules import FILES_PER_FOLDER
from kvtool.plan.reload import TierPath
from kvtool.profiles.hardware import StorageProfile

FILE_OPS_PER_READ = 2  # a file read back: an open and a close
AUTOMATIC_STEPS_GIB = ((1_200, 1_500), (2_400, 3_000), (4_800, 6_000), (12_000, 12_000))
AUTOMATIC_PER_GIB_FROM = 48_000  # from here: 12,000 Metadata IOPS per 24,000 GiB


def automatic_iops(profile: StorageProfile, capacity_gib: int) -> int:
    """The Metadata IOPS AUTOMATIC mode gives ``capacity_gib`` (0 where the profile has no
    metadata configuration: PERSISTENT_1, SCRATCH). 24,000 GiB: 12,000; 96,000 GiB: 48,000."""
    if not profile.metadata_iops_max:
        return 0
    if capacity_gib >= AUTOMATIC_PER_GIB_FROM:
        return min(profile.metadata_iops_max, capacity_gib // 24_000 * 12_000)
    iops = 0
    for gib, step in AUTOMATIC_STEPS_GIB:
        if capacity_gib >= gib:
            iops = step
    return iops or AUTOMATIC_STEPS_GIB[0][1]


def provisionable(profile: StorageProfile, need_iops: float) -> int | None:
    """The smallest USER_PROVISIONED value at least ``need_iops`` (1,500, 3,000, 6,000, 12,000,
    then multiples of 12,000), or None past the profile's maximum (192,000)."""
    if not math.isfinite(need_iops):
        return None
    for value in (1_500, 3_000, 6_000, 12_000):
        if value >= need_iops:
            return value
    value = max(12_000, math.ceil(need_iops / 12_000) * 12_000)
    return value if value <= profile.metadata_iops_max else None


def files_per_s(profile: StorageProfile, iops: int) -> float:
    """Files read back a second at ``iops`` Metadata IOPS (an open and a close each)."""
    return iops * profile.metadata_file_ops_per_iops / FILE_OPS_PER_READ


class MetadataPlan(NamedTuple):
    """The file system's Metadata IOPS and why: ``mode`` AUTOMATIC (from the capacity),
    USER_PROVISIONED (kvtool sized it for ``goal``), ``given`` (--set metadata_iops), or
    ``none`` (the deployment type has no metadata configuration: not modelled);
    ``need_iops`` is what the goal's restore needs (0: not computed)."""

    iops: int
    mode: str
    automatic_iops: int
    need_iops: float
    goal_met: bool

    @property
    def modelled(self) -> bool:
        """False where the file system's metadata rate is unknown (no configuration)."""
        return self.mode != "none"


NO_METADATA = MetadataPlan(0, "none", 0, 0.0, True)  # not sized, or no configuration


def plan_metadata(
    profile: StorageProfile,
    capacity_gib: int,
    *,
    need_iops: float,
    given_iops: int | None = None,
    automatic_only: bool = False,
) -> MetadataPlan:
    """The Metadata IOPS for a file system of ``capacity_gib`` whose goal restore needs
    ``need_iops``: ``given_iops`` as given; AUTOMATIC when it already suffices or when
    ``automatic_only`` (a file system given as it is); else the smallest USER_PROVISIONED
    value that does, or the maximum (goal not met) past it."""
    automatic = automatic_iops(profile, capacity_gib)
    if not profile.metadata_iops_max:
        return MetadataPlan(0, "none", 0, need_iops, True)
    if given_iops is not None:
        return MetadataPlan(given_iops, "given", automatic, need_iops, given_iops >= need_iops)
    if automatic >= need_iops or automatic_only:
        return MetadataPlan(automatic, "AUTOMATIC", automatic, need_iops, automatic >= need_iops)
    value = provisionable(profile, need_iops)
    if value is None:
        top = max(profile.metadata_iops_max, automatic)
        return MetadataPlan(top, "USER_PROVISIONED", automatic, need_iops, False)
    return MetadataPlan(value, "USER_PROVISIONED", automatic, need_iops, True)


def check_iops(profile: StorageProfile, iops: int) -> str | None:
    """Why ``iops`` is not a Metadata IOPS value FSx provisions for ``profile``, or None."""
    if not profile.metadata_iops_max:
        return f"{profile.name} has no metadata configuration (PERSISTENT_2 only)"
    if iops in (1_500, 3_000, 6_000, 12_000) or (
        iops % 12_000 == 0 and 12_000 <= iops <= profile.metadata_iops_max
    ):
        return None
    return (
        f"FSx provisions 1,500, 3,000, 6,000, 12,000 or a multiple of 12,000 up to"
        f" {profile.metadata_iops_max:,} Metadata IOPS"
    )


class FolderLayout(NamedTuple):
    """How an offload stack lays its T3 files out in folders: ``folders`` is how many a fixed
    fan-out makes (1: one flat folder), ``how`` says so, ``source`` where it was read,
    ``spread`` how to spread its files over more folders."""

    folders: int
    how: str
    source: str
    spread: str = "spread them over sub-folders by the chunk hash"


FLAT_LMCACHE = FolderLayout(
    1,
    "LMCache's fs connector writes every chunk file into its base_path, flat",
    "lmcache 0.5.6 v1/storage_backend/connector/fs_connector.py:152-156",
    "LMCache's fs connector takes a comma-separated base_path and puts each chunk in one of"
    " them by its hash (fs_connector.py:74-79, 137-147)",
)
GDS_LMCACHE = FolderLayout(
    100 * 100,
    "LMCache's GDS backend fans files out over two folder levels named by the first two and"
    " the next two decimal digits of the chunk hash (at most 10,000 folders, taken as evenly"
    " filled)",
    "lmcache 0.5.6 v1/storage_backend/gds_backend.py:584-600, str() of the int chunk_hash"
    " (utils.py:422)",
)
FLAT_SGLANG = FolderLayout(
    1,
    "SGLang's HiCache file backend writes one flat folder",
    "sglang 0.5.23 srt/mem_cache/hicache_storage.py (HiCacheFile: storage_dir/{key}..bin)",
)
# each offload stack's T3 layout (``plan/offload.py``'s names), without and with GDS; a stack
# whose disk tier is private per worker (Dynamo KVBM, TensorRT-LLM's host cache) has none
FOLDER_LAYOUTS = {
    "vllm": (FLAT_LMCACHE, GDS_LMCACHE),  # its T3 is LMCache's
    "lmcache": (FLAT_LMCACHE, GDS_LMCACHE),
    "sglang": (FLAT_SGLANG, FLAT_SGLANG),
}


def folder_layout(stack: str, *, gds: bool) -> FolderLayout | None:
    """The T3 folder layout of ``stack`` on the GDS path or not; None for a stack whose disk
    tier is private per worker."""
    layouts = FOLDER_LAYOUTS.get(stack)
    return None if layouts is None else layouts[gds]


def folders_needed(files: int) -> int:
    """Folders that keep ``files`` under ``FILES_PER_FOLDER`` each."""
    return max(1, math.ceil(files / FILES_PER_FOLDER))


def metadata_path(
    path: TierPath, profile: StorageProfile, nodes: int, md: MetadataPlan
) -> TierPath:
    """The T3 ``path`` with this node's share of the file system's Metadata IOPS as its
    request rate (each file read back is an open and a close), said in its description."""
    total = files_per_s(profile, md.iops)
    what = (
        f"{md.iops:,} Metadata IOPS ({md.mode}) x {profile.metadata_file_ops_per_iops:g}"
        f" opens or closes each / {FILE_OPS_PER_READ} a file = {total:,.0f} files/s"
        + (f", shared by {nodes} nodes" if nodes > 1 else "")
    )
    requests = replace(path.requests, rate_per_s=total / nodes, rate_what=what)
    return replace(path, requests=requests, description=f"{path.description}; {what}")

"""How large an FSx for Lustre (T3) a plan needs when the user did not say. Pure.

Two needs; the larger file system wins:

* **capacity**: the smallest size FSx provisions that holds what the plan spills to T3;
* **throughput**: the smallest size whose share of reads per node (FSx's read throughput is
  capacity x MB/s per TiB, shared by the nodes) makes restoring the plan's concurrent sessions
  from T3 beat recomputing them from the context where the AWS article draws its line (50,000
  tokens: "above 50K tokens reading back from T3 beats recompute"), or brings them back within
  the restore time a user asks for (``--set restore_slo=500ms``).

A node cannot read faster than its client links (ENA, EFA, EFA with GDS, per instance): when
even the links cannot reach the goal, throughput would buy nothing it needs, so the file system
is sized for capacity and the goal is said to be out of reach (with the restore time the links
allow). A capacity the user gave (``--fsx-capacity``) is used as given, and said so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvtool.plan.cluster import Hardware
from kvtool.plan.fsx import FileSystem, smallest_size_at_least
from kvtool.plan.metadata import NO_METADATA, MetadataPlan

GIVEN = "given"
FOR_CAPACITY = "sized for capacity"
FOR_THROUGHPUT = "sized for throughput"


@dataclass(frozen=True)
class T3Size:
    """The file system a plan uses and why: ``source`` is ``given``, ``sized for capacity``
    or ``sized for throughput``; ``goal`` says in words what it was sized to reach and
    ``goal_met`` whether it does; ``capacity_gib`` is what holding the bytes alone takes."""

    file_system: FileSystem
    source: str
    goal: str
    goal_met: bool
    capacity_gib: int
    share_bytes_per_s: float  # each node's share of the file system's reads
    restore_s: float  # the goal's restore, timed on this file system
    deadline_s: float  # what it had to be within
    # the file system's Metadata IOPS for that restore's opens and closes (plan/metadata.py)
    metadata: MetadataPlan = NO_METADATA
    goal_files: int = 0  # files one node opens in the goal's restore


def size_t3(
    hardware: Hardware,
    need_bytes: int,
    *,
    reload_s: Callable[[float], float],
    deadline_s: float,
    link_bytes_per_s: float,
    goal: str,
) -> T3Size:
    """The T3 file system for ``hardware``: the given one, or the smallest valid size that
    holds ``need_bytes`` and makes ``reload_s(share per node) <= deadline_s`` (a restore of
    the plan's sessions from T3, timed with that share). ``link_bytes_per_s`` is one node's
    client ceiling: no share above it helps."""
    nodes = hardware.nodes
    holds = hardware.file_system(need_bytes)  # the given size, or the smallest holding it

    def share(fs: FileSystem) -> float:
        return fs.read_bytes_per_s / nodes

    def met(fs: FileSystem) -> bool:
        return reload_s(share(fs)) <= deadline_s

    if not holds.assumed:
        return T3Size(holds, GIVEN, goal, met(holds), holds.capacity_gib, share(holds),
                      reload_s(share(holds)), deadline_s)  # fmt: skip
    if met(holds):
        return T3Size(holds, FOR_CAPACITY, goal, True, holds.capacity_gib, share(holds),
                      reload_s(share(holds)), deadline_s)  # fmt: skip
    if reload_s(link_bytes_per_s) > deadline_s:  # no file system reaches it: the links cap
        # the restore, so throughput bought beyond the bytes would buy nothing the goal needs
        return T3Size(holds, FOR_CAPACITY, goal, False, holds.capacity_gib, share(holds),
                      reload_s(link_bytes_per_s), deadline_s)  # fmt: skip
    low, high = share(holds), link_bytes_per_s
    while high - low > high * 1e-4:  # the least share that meets the goal
        middle = (low + high) / 2
        if reload_s(middle) <= deadline_s:
            high = middle
        else:
            low = middle
    per_tib = holds.throughput_mbps_per_tib * 1e6
    need_gib = high * nodes / per_tib * 1024
    gib = smallest_size_at_least(holds.profile, need_gib, holds.throughput_mbps_per_tib,
                                 efa=holds.efa)  # fmt: skip
    fs = replace(holds, capacity_gib=max(gib, holds.capacity_gib))
    return T3Size(fs, FOR_THROUGHPUT, goal, met(fs), holds.capacity_gib, share(fs),
                  reload_s(share(fs)), deadline_s)  # fmt: skip

"""FSx for Lustre Intelligent-Tiering for a plan's released (cold) sessions: the file system
that would hold them in place of S3, what it needs to bring them back in time, and where it
fits. Pure; ``plan/cost.py`` prices it.

What AWS says of the Intelligent-Tiering storage class (FSx for Lustre User Guide,
docs.aws.amazon.com/fsx/latest/LustreGuide/<page>, and the FSx API Reference,
docs.aws.amazon.com/fsx/latest/APIReference/<page>; read through a documentation search):

* storage is elastic and billed per GB stored in its tiers (frequent access, infrequent access,
  archive instant access); data moves down after weeks without access, so KV released after
  minutes and read back or deleted within days is taken to stay in the frequent access tier
  (kvtool's assumption; the tier thresholds were not read on AWS's FSx pages);
* throughput capacity is provisioned for the file system, "4,000 MBps or increments of 4,000
  MBps, up to a maximum of 2,000,000 MBps" (managing-throughput-capacity.html);
* Metadata IOPS: "For Intelligent-Tiering file systems, valid values are 6000 and 12000"
  (API Reference, CreateFileSystemLustreMetadataConfiguration), and "Intelligent-Tiering file
  systems don't support Automatic mode" (managing-metadata-performance.html);
* "Data access from Intelligent-Tiering storage has time-to-first-byte latencies of roughly
  tens of milliseconds as well as per-request costs, while accesses from the SSD read cache
  return with sub-millisecond latencies" (intelligent-tiering-file-systems.html). kvtool takes
  50 ms a file (an assumption inside "tens of milliseconds"); released KV is read back once,
  so the optional SSD read cache (32 to 131,072 GiB per 4,000 MBps,
  API LustreReadCacheConfiguration) is left out.

So Intelligent-Tiering fits the **cold share only** where the plan's T3 restores need more
than 12,000 Metadata IOPS or sub-millisecond first bytes: the hot sessions stay on the plan's
SSD file system, and the released ones go to an Intelligent-Tiering file system sized so that
the plan's concurrent restores of released sessions beat recomputing them (its throughput
capacity and Metadata IOPS), as the AWS article's release to S3 does. Nothing in FSx moves a
file from one file system to another (a data repository association links S3), so this needs
a mover and a second folder the engine reads: kvtool prices it beside the plan, and does not
plan it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvtool.plan.deployment import DeploymentPlan
from kvtool.plan.metadata import files_per_s
from kvtool.plan.reload import restore, t3_client_gbps
from kvtool.plan.requests import RestoreTerms

THROUGHPUT_STEP_MBPS = 4_000  # managing-throughput-capacity.html: 4,000 MBps or increments
THROUGHPUT_MAX_MBPS = 2_000_000
METADATA_IOPS = (6_000, 12_000)  # API Reference: Intelligent-Tiering's only values
FIRST_BYTE_S = 0.050  # assumed inside AWS's "roughly tens of milliseconds" to first byte


@dataclass(frozen=True)
class Tiering:
    """An Intelligent-Tiering file system for the plan's released sessions: ``stored_bytes``
    of them; ``throughput_mbps`` and ``metadata_iops`` provisioned for the plan's concurrent
    restores of released sessions (``restore``, timed on it) to finish within ``deadline_s``
    (recomputing them); ``s3_restore_s`` is the same restore through FSx from S3 (the plan's
    T4 path); ``t3_need_iops`` what the plan's T3 restores need (past 12,000: cold share
    only)."""

    stored_bytes: int
    throughput_mbps: int
    throughput_need_mbps: float
    metadata_iops: int
    metadata_need_iops: float
    restore: RestoreTerms
    deadline_s: float
    s3_restore_s: float
    t3_need_iops: float
    nodes: int

    @property
    def met(self) -> bool:
        """Whether its restore of released sessions beats recomputing them."""
        return self.restore.total_s <= self.deadline_s

    def fit(self) -> str:
        """Where it fits, in words."""
        if self.t3_need_iops > METADATA_IOPS[-1]:
            where = (
                f"the cold share only: the plan's T3 restores need {self.t3_need_iops:,.0f}"
                f" Metadata IOPS, and Intelligent-Tiering provisions 6,000 or 12,000"
            )
        else:
            where = (
                "the cold share here; its 12,000 Metadata IOPS would also carry the plan's T3"
                f" restores ({self.t3_need_iops:,.0f}), but a non-cached read pays tens of ms"
                " to first byte (sub-ms from an SSD read cache, not priced)"
            )
        verdict = "beats" if self.met else "does not beat"
        return (
            f"fits {where}; its restore of released sessions takes {self.restore.total_s:,.2f} s"
            f" ({self.restore.bound}-bound), {verdict} recompute's {self.deadline_s:,.2f} s"
            f" (through FSx from S3: {self.s3_restore_s:,.2f} s)"
        )

    def sizing(self) -> str:
        """How its throughput and Metadata IOPS were sized, with the arithmetic."""
        r = self.restore
        nodes = f" x {self.nodes} nodes" if self.nodes > 1 else ""
        return (
            f"sized for {r.objects:,} files of {r.object_bytes:,.0f} B a node{nodes} within"
            f" {self.deadline_s:,.2f} s: {self.throughput_need_mbps:,.0f} MB/s, in 4,000 MBps"
            f" steps {self.throughput_mbps:,} MBps; {self.metadata_need_iops:,.0f} opens a"
            f" second, of 6,000 or 12,000 Metadata IOPS {self.metadata_iops:,}; a file"
            f" {FIRST_BYTE_S * 1e3:.0f} ms to first byte (assumed, AWS: 'roughly tens of"
            " milliseconds')"
        )


def plan_tiering(plan: DeploymentPlan) -> Tiering | None:
    """The Intelligent-Tiering file system for ``plan``'s released sessions; None where the
    plan releases none, or has no T3 path or metadata model to start from."""
    release = plan.release
    t3 = next((p for p in plan.paths if p.tier == "T3"), None)
    profile = plan.hardware.t3
    if (
        release is None
        or not release.released_sessions
        or release.restore is None
        or t3 is None
        or not profile.metadata_file_ops_per_iops
    ):
        return None
    row = next((b for b in plan.break_even if b.ctx_tokens == plan.ctx_tokens), None)
    if row is None:
        return None
    nodes = plan.hardware.nodes
    a = plan.assumptions
    shape = restore(t3, row.session_bytes, plan.ctx_tokens, a)  # files and their size
    deadline = row.recompute_s
    window = max(deadline - shape.fixed_s - shape.lookup_s, 1e-9)
    node_bytes = shape.objects * shape.object_bytes
    need_mbps = node_bytes * nodes / window / 1e6
    mbps = min(THROUGHPUT_MAX_MBPS, max(1, math.ceil(need_mbps / THROUGHPUT_STEP_MBPS))
               * THROUGHPUT_STEP_MBPS)  # fmt: skip
    need_iops = shape.objects * nodes / window / files_per_s(profile, 1)  # files a second
    iops = next((v for v in METADATA_IOPS if v >= need_iops), METADATA_IOPS[-1])
    hw = plan.hardware
    link = t3_client_gbps(hw.node, hw.t3, hw.t3_path)[1] * 1e9 / 8  # the node's client links
    path = replace(
        t3,
        node_bytes_per_s=min(mbps * 1e6 / nodes, link),
        requests=replace(
            t3.requests,
            first_byte_s=FIRST_BYTE_S,
            rate_per_s=files_per_s(profile, iops) / nodes,
        ),
    )
    return Tiering(
        stored_bytes=release.released_bytes,
        throughput_mbps=mbps,
        throughput_need_mbps=need_mbps,
        metadata_iops=iops,
        metadata_need_iops=need_iops,
        restore=restore(path, row.session_bytes, plan.ctx_tokens, a),
        deadline_s=deadline,
        s3_restore_s=release.restore.total_s,
        t3_need_iops=plan.t3_size.metadata.need_iops,
        nodes=nodes,
    )

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

``plan_t3`` is that rule with the plan's goal and read paths: ``kvtool plan`` sizes each
context's T3 through it, and ``kvtool advise`` and ``kvtool check`` the workload's
(``plan/advise.py``, ``workload_t3``), so the three name one size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from kvtool.model.params import ParamCount
from kvtool.model.spec import ModelSpec
from kvtool.plan.cluster import Hardware
from kvtool.plan.fsx import FileSystem, smallest_size_at_least
from kvtool.plan.metadata import (
    FILE_OPS_PER_READ,
    NO_METADATA,
    MetadataPlan,
    metadata_path,
    plan_metadata,
)
from kvtool.plan.reload import (
    DEFAULT_T3_RELOAD_FROM_TOKENS,
    Compute,
    ReloadAssumptions,
    TierPath,
    recompute_seconds,
    reload_seconds,
    restore,
    tier_paths,
)
from kvtool.plan.requests import KeyScheme

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


def sized_why(t3: T3Size) -> str:
    """Which need decided the file system, in words, for ``kvtool advise`` and ``kvtool check``
    (``kvtool plan`` says it in its notes)."""
    if t3.source == FOR_THROUGHPUT:
        return (
            f"sized for throughput, as kvtool plan sizes it: {t3.goal};"
            f" {t3.capacity_gib:,} GiB would hold what stays on T3"
        )
    if t3.source == FOR_CAPACITY and t3.goal_met:
        return f"sized for capacity, as kvtool plan sizes it, already meeting its goal: {t3.goal}"
    if t3.source == FOR_CAPACITY:
        return (
            f"sized for capacity, as kvtool plan sizes it: no file system reaches {t3.goal},"
            " the client links cap that restore"
        )
    return "as given" + ("" if t3.goal_met else f", short of: {t3.goal}")


class PathsAt(Protocol):
    """The read paths with each node's share of the file system at ``share``."""

    def __call__(
        self, share: float, fsx_why: str = "", metadata: MetadataPlan | None = None
    ) -> list[TierPath]: ...


def read_paths(
    hardware: Hardware, a: ReloadAssumptions, *, divisors: dict[str, int], objects: int,
    scheme: KeyScheme, engines: int,
) -> PathsAt:  # fmt: skip
    """The plan's read paths on ``hardware`` as a function of each node's share of the file
    system (and of its Metadata IOPS, when ``metadata`` is given): ``divisors`` the offload
    stack's copies per tier, ``objects`` the files (or S3 objects) a chunk is stored as."""

    def paths_at(
        share: float, fsx_why: str = "", metadata: MetadataPlan | None = None
    ) -> list[TierPath]:
        paths = tier_paths(
            hardware.node, hardware.t3, hardware.t4, t3_path=hardware.t3_path, a=a,
            fsx_bytes_per_s_per_node=share, fsx_why=fsx_why, objects_per_chunk=objects,
            nodes=hardware.nodes, scheme=scheme, engines=engines,
        )  # fmt: skip
        paths = [replace(p, bytes_divisor=divisors.get(p.tier, divisors["T3"])) for p in paths]
        if metadata is None or not metadata.modelled:
            return paths
        return [
            metadata_path(p, hardware.t3, hardware.nodes, metadata) if p.tier == "T3" else p
            for p in paths
        ]

    return paths_at


def plan_t3(
    spec: ModelSpec, params: ParamCount, compute: Compute, hardware: Hardware, need_bytes: int,
    paths_at: PathsAt, bytes_at: Callable[[int], int],
    a: ReloadAssumptions, ctx_tokens: int,
) -> T3Size:  # fmt: skip
    """The plan's T3 (``t3_size.size_t3``): sized so that restoring the plan's concurrent
    sessions from it beats recomputing them from ``a.t3_reload_from_tokens`` (the article's
    50K), or, with ``a.restore_slo_s``, brings sessions of the plan's context back in time."""
    if a.restore_slo_s is not None:
        tokens, deadline = ctx_tokens, a.restore_slo_s
        goal = (
            f"{a.concurrent_loads} sessions of {tokens:,} tokens restored from T3 at once per"
            f" node within {a.restore_slo_s * 1e3:,.0f} ms (--set restore_slo)"
        )
    else:
        tokens = a.t3_reload_from_tokens
        deadline = recompute_seconds(spec, params, compute, tokens, a)
        origin = (
            "the AWS article's line"
            if tokens == DEFAULT_T3_RELOAD_FROM_TOKENS
            else "--set reload_from"
        )
        goal = f"T3 reload beats recompute from {tokens:,} tokens ({origin})"
    session = bytes_at(tokens)

    def t3_path(share: float) -> TierPath:
        return next(p for p in paths_at(share) if p.tier == "T3")

    link = t3_path(float("inf")).node_bytes_per_s
    sized = size_t3(
        hardware, need_bytes, goal=goal, deadline_s=deadline, link_bytes_per_s=link,
        reload_s=lambda share: reload_seconds(t3_path(share), session, tokens, a),
    )  # fmt: skip
    # the opens and closes of that restore, within what the lookup and latency leave of the
    # deadline: the Metadata IOPS that reach the goal, sized like the throughput
    terms = restore(t3_path(sized.share_bytes_per_s), session, tokens, a)
    window = deadline - terms.fixed_s - terms.lookup_s
    fs = sized.file_system
    per_node = terms.objects / window if window > 0 else float("inf")
    need = (
        per_node * hardware.nodes * FILE_OPS_PER_READ / (fs.profile.metadata_file_ops_per_iops or 1)
    )
    md = plan_metadata(fs.profile, fs.capacity_gib, need_iops=need,
                       given_iops=hardware.metadata_iops,
                       automatic_only=sized.source == GIVEN)  # fmt: skip
    return replace(sized, metadata=md, goal_met=sized.goal_met and md.goal_met,
                   goal_files=terms.objects)  # fmt: skip

"""What a plan costs a month, per tier, from a prices record; and per served session-hour,
beside holding every session in HBM. Pure: prices arrive loaded (``inputs/prices.py``).

* Nodes (T1 HBM and T2 host DRAM come with them): nodes x $ per instance-hour x 730 h.
* T3, FSx for Lustre: provisioned capacity x $ per GB-month at its per-unit throughput, only
  when the plan puts sessions there.
* T4, S3 or S3 Express One Zone: bytes stored x $ per GB-month (S3 bills in GB of 2^30 bytes);
  requests are per session: a chunk is one object per worker that saves it (LMCache's keys
  carry the worker id), one PUT each written, and each read back is a GET and the engine's
  lookups (LMCache: a HEAD; S3 bills a HEAD as a GET).
* Metadata IOPS (FSx PERSISTENT_2): the ones provisioned past what AUTOMATIC mode gives the
  file system's capacity (``plan/metadata.py``), x $ per IOPS-month, a T3 line of its own.
* FSx Intelligent-Tiering for the released share (``plan/tiering.py``), beside the plan's
  S3: GB stored x $ per GB-month (frequent access tier), throughput capacity x $ per
  MBps-month, Metadata IOPS x $ per IOPS-month (no AUTOMATIC mode, so all of them billed).
* Cross-AZ transfer: none in these plans (the nodes, FSx and an S3 Express bucket are in one
  zone; S3 Standard is regional); the price is shown for a reader who splits them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from kvtool.plan.deployment import DeploymentPlan, Hardware
from kvtool.plan.fsx import FileSystem
from kvtool.plan.metadata import MetadataPlan, plan_metadata
from kvtool.plan.placement import TierPlan

if TYPE_CHECKING:
    from kvtool.plan.tiering import Tiering

HOURS_PER_MONTH = 730  # AWS's monthly convention (8,760 h / 12)
GIB = 2**30
NONE: Mapping[str, float] = MappingProxyType({})


class Prices(NamedTuple):
    """Prices with their source and date; ``example`` marks the bundled example file."""

    source: str
    date: str
    region: str
    example: bool
    instance_hour: Mapping[str, float]
    fsx_gb_month: Mapping[str, float]  # "fsx-lustre-persistent2@1000"
    s3_gb_month: Mapping[str, float]
    s3_put_per_1000: Mapping[str, float]
    s3_get_per_1000: Mapping[str, float]
    cross_az_per_gb: float | None = None
    fsx_metadata_iops_month: Mapping[str, float] = NONE  # by profile: "fsx-lustre-persistent2"
    fsx_intelligent_tiering: Mapping[str, float] = NONE  # "frequent-gb-month", ...


class CostLine(NamedTuple):
    """One line of the bill; ``usd_per_month`` None where its price is missing (``basis``
    then says which price and how to give it)."""

    tier: str
    what: str
    usd_per_month: float | None
    basis: str


class Cost(NamedTuple):
    """A plan's monthly cost by line, per served session-hour, and the all-in-HBM figure.
    A price the prices record lacks never fails the plan: its line has no figure, the totals
    that need it are None, and ``missing`` names each price as its prices-file key."""

    lines: tuple[CostLine, ...]
    usd_per_month: float | None
    usd_per_session_hour: float | None
    all_in_hbm_nodes: int
    all_in_hbm_usd_per_month: float | None
    t4_usd_per_session_written: float | None
    t4_usd_per_session_read: float | None
    prices: Prices
    notes: tuple[str, ...]
    missing: tuple[str, ...] = ()
    # the AWS article's T4 beside all-FSx: the storage lines (T3 + T4) of this plan, and the
    # FSx that would hold every spilled session with none released (None: nothing released)
    storage_usd_per_month: float | None = None
    all_fsx_gib: int | None = None
    all_fsx_usd_per_month: float | None = None
    intelligent_tiering: TieringCost | None = None  # the released share on FSx IT, not S3


class TieringCost(NamedTuple):
    """FSx Intelligent-Tiering in place of S3 for the released sessions: its lines, their sum,
    the storage it would make (the plan's T3 lines and these), where it fits and why."""

    lines: tuple[CostLine, ...]
    usd_per_month: float | None
    storage_usd_per_month: float | None
    fit: str
    sizing: str
    missing: tuple[str, ...]


HOW_TO_PRICE = (
    "add it to a prices file (--prices FILE, the bundled example's keys) or use --prices aws"
)


class _Priced:
    """Looks prices up, keeping the ones the record lacks (as ``table."key"``)."""

    def __init__(self, prices: Prices) -> None:
        self.prices = prices
        self.missing: list[str] = []

    def __call__(self, table: str, key: str) -> float | None:
        prices: Mapping[str, float] = getattr(self.prices, table)
        value = prices.get(key)
        if value is None and f'{table}."{key}"' not in self.missing:
            self.missing.append(f'{table}."{key}"')
        return value

    def unpriced(self, table: str, key: str) -> str:
        return f'no price: {table}."{key}" is not in the prices (see the note)'


def plan_cost(
    hardware: Hardware, tiers: TierPlan, prices: Prices, *, sessions: int, ctx_tokens: int,
    chunk_tokens: int, file_system: FileSystem | None = None, required: tuple[str, ...] = (),
    all_fsx_bytes: int | None = None, objects_per_chunk: int = 1, requests_per_object: int = 1,
    read_back_up_to_tokens: int | None = None,
    metadata: MetadataPlan | None = None, tiering: Tiering | None = None,
) -> Cost:  # fmt: skip
    """The cost under ``prices`` of ``sessions`` (of ``ctx_tokens``, the mean of a mix)
    placed as ``tiers`` on ``hardware``, with the plan's T3 ``file_system`` (default the
    given one, or the smallest that holds what spills there). A tier in ``required`` (the
    advice's tier set) is priced even where the placement puts no session there: a T3 the
    architecture needs is provisioned whether or not the peak spills. ``all_fsx_bytes``
    (a plan that released idle sessions to S3 and sized FSx for the rest) prices beside it
    the FSx that would hold them all: the larger of the size holding those bytes and the
    plan's own (its throughput goal still holds on a larger one). A chunk is
    ``objects_per_chunk`` objects in S3, each read back with ``requests_per_object`` requests
    (the path's ``Requests``: a GET and the engine's lookups); past
    ``read_back_up_to_tokens`` the engine's lookup times out and it reads nothing back (said
    beside the read's price). ``metadata``, the plan's
    Metadata IOPS, bills those provisioned past AUTOMATIC's; ``tiering`` prices FSx
    Intelligent-Tiering for the released sessions beside S3."""
    price = _Priced(prices)
    node = hardware.node.name
    hourly = price("instance_hour", node)
    nodes = hardware.nodes
    if hourly is None:
        lines = [
            CostLine("T1+T2", f"{nodes} x {node}", None, price.unpriced("instance_hour", node))
        ]
    else:
        basis = (
            f"{nodes} x ${hourly:,.2f}/h x {HOURS_PER_MONTH} h; HBM and host DRAM come with them"
        )
        lines = [CostLine("T1+T2", f"{nodes} x {node}", nodes * hourly * HOURS_PER_MONTH, basis)]
    notes: list[str] = []
    by_name = {t.name: t for t in tiers.tiers}
    fs = file_system or hardware.file_system(tiers.t3_bytes_needed)
    if by_name["T3"].sessions or "T3" in required:
        key = f"{fs.profile.name}@{fs.throughput_mbps_per_tib}"
        rate = price("fsx_gb_month", key)
        what = (
            f"{fs.profile.name}, {fs.capacity_gib:,} GiB at {fs.throughput_mbps_per_tib} MB/s/TiB"
        )
        why = (
            "" if by_name["T3"].sessions else "; required by the advice, no session spills at peak"
        )
        if rate is None:
            lines.append(CostLine("T3", what, None, price.unpriced("fsx_gb_month", key)))
        else:
            basis = f"{fs.capacity_gib:,} GB x ${rate}/GB-month" + (
                " (capacity sized by kvtool)" if fs.assumed else ""
            )
            lines.append(CostLine("T3", what, fs.capacity_gib * rate, basis + why))
        lines += _metadata_lines(price, fs, metadata)
    elif metadata is not None and metadata.iops > metadata.automatic_iops:
        notes.append(_unbilled_t3(prices, fs, metadata))
    all_gib = all_usd = storage = None
    if all_fsx_bytes is not None and by_name["T4"].sessions and fs.assumed:
        all_gib = max(hardware.file_system(all_fsx_bytes).capacity_gib, fs.capacity_gib)
        rate = price("fsx_gb_month", f"{fs.profile.name}@{fs.throughput_mbps_per_tib}")
        all_usd = None if rate is None else all_gib * rate
        if metadata is not None and all_usd is not None:  # its own Metadata IOPS, as sized
            sized = plan_metadata(fs.profile, all_gib, need_iops=metadata.need_iops)
            extra = _metadata_lines(price, replace(fs, capacity_gib=all_gib), sized)
            more = _sum([x.usd_per_month for x in extra])
            all_usd = None if more is None else all_usd + more
    t4 = hardware.t4.name
    per_write = per_read = None
    if by_name["T4"].sessions or "T4" in required:
        stored = by_name["T4"].used_bytes / GIB
        rate = price("s3_gb_month", t4)
        why = "" if by_name["T4"].sessions else "; required by the advice, nothing there at peak"
        if rate is None:
            lines.append(CostLine("T4", t4, None, price.unpriced("s3_gb_month", t4)))
        else:
            basis = f"{stored:,.0f} GB x ${rate}/GB-month{why}"
            lines.append(CostLine("T4", t4, stored * rate, basis))
        chunks = -(-ctx_tokens // chunk_tokens)
        puts = chunks * objects_per_chunk
        gets = puts * requests_per_object
        put, get = price("s3_put_per_1000", t4), price("s3_get_per_1000", t4)
        if put is not None and get is not None:
            per_write, per_read = puts * put / 1000, gets * get / 1000
            each = f"{chunks:,} {chunk_tokens}-token chunks" + (
                f" x {objects_per_chunk:,} objects (one per worker)"
                if objects_per_chunk > 1
                else ""
            )
            reads = "a GET" + (
                f" and {requests_per_object - 1} lookup(s)" if requests_per_object > 1 else ""
            )
            notes.append(
                f"T4 requests: ${per_write:.4f} to write a session ({puts:,} PUTs: {each}),"
                f" ${per_read:.4f} to read one back engine-direct ({gets:,} requests: {reads} an"
                " object"
                + (
                    f", were it read: its lookup times out past {read_back_up_to_tokens:,}"
                    " tokens, and the engine recomputes"
                    if read_back_up_to_tokens is not None and ctx_tokens > read_back_up_to_tokens
                    else ""
                )
                + "); not in the monthly total, which has no request rate"
            )
    if prices.cross_az_per_gb is not None:
        notes.append(f"no cross-AZ transfer in this plan (one zone); it would cost"
                     f" ${prices.cross_az_per_gb}/GB each way")  # fmt: skip
    if all_gib is not None:
        storage = _sum([line.usd_per_month for line in lines if line.tier in ("T3", "T4")])
    it = None if tiering is None else _tiering(prices, tiering, lines)
    total = _sum([line.usd_per_month for line in lines])
    all_nodes = tiers.nodes_for_all_in_t1
    if price.missing:
        notes.insert(0, f"no total: {', '.join(price.missing)} missing from {prices.source};"
                        f" {HOW_TO_PRICE}")  # fmt: skip
    if prices.example:
        notes.insert(0, f"EXAMPLE prices ({prices.source}, {prices.date}): not current; pass"
                        " --prices FILE or --prices aws")  # fmt: skip
    return Cost(
        lines=tuple(lines),
        usd_per_month=total,
        usd_per_session_hour=None if total is None else total / (sessions * HOURS_PER_MONTH),
        all_in_hbm_nodes=all_nodes,
        all_in_hbm_usd_per_month=None if hourly is None else all_nodes * hourly * HOURS_PER_MONTH,
        t4_usd_per_session_written=per_write,
        t4_usd_per_session_read=per_read,
        prices=prices,
        notes=tuple(notes),
        missing=tuple(price.missing),
        storage_usd_per_month=storage,
        all_fsx_gib=all_gib,
        all_fsx_usd_per_month=all_usd,
        intelligent_tiering=it,
    )


def deployment_cost(plan: DeploymentPlan, prices: Prices, *, sessions: int) -> Cost:
    """``plan_cost`` of one of ``kvtool plan``'s plans: its file system and Metadata IOPS,
    the all-FSx size beside a release, the engine-direct S3 path's objects a chunk and
    requests an object (1 and 1 without a T4 path), and FSx Intelligent-Tiering for the
    released sessions (``plan/tiering.py``)."""
    from kvtool.plan.tiering import plan_tiering

    path = next((t for t in plan.paths if t.tier == "T4"), None)
    r = path.requests if path is not None else None
    return plan_cost(
        plan.hardware, plan.tiers, prices, sessions=sessions, ctx_tokens=plan.ctx_tokens,
        chunk_tokens=plan.assumptions.chunk_tokens, file_system=plan.file_system,
        all_fsx_bytes=plan.release.all_fsx_bytes if plan.release else None,
        objects_per_chunk=r.objects_per_chunk if r else 1,
        requests_per_object=r.requests_per_object if r else 1,
        read_back_up_to_tokens=(
            path.lookup_limit_tokens(plan.assumptions.chunk_tokens) if path is not None else None
        ),
        metadata=plan.t3_size.metadata, tiering=plan_tiering(plan),
    )  # fmt: skip


def _sum(figures: list[float | None]) -> float | None:
    """The sum of dollar figures, None where any is unpriced."""
    return None if None in figures else sum(f for f in figures if f is not None)


def _metadata_lines(price: _Priced, fs: FileSystem, md: MetadataPlan | None) -> list[CostLine]:
    """The Metadata IOPS provisioned past what AUTOMATIC gives ``fs``'s capacity (USER_PROVISIONED
    by kvtool, or given with --set metadata_iops), x $ per IOPS-month."""
    if md is None or md.iops <= md.automatic_iops:
        return []
    key = fs.profile.name
    rate = price("fsx_metadata_iops_month", key)
    billed = md.iops - md.automatic_iops
    what = f"{md.iops:,} Metadata IOPS ({md.mode})"
    if rate is None:
        return [CostLine("T3", what, None, price.unpriced("fsx_metadata_iops_month", key))]
    basis = (
        f"({md.iops:,} - the {md.automatic_iops:,} AUTOMATIC gives {fs.capacity_gib:,} GiB)"
        f" = {billed:,} x ${rate}/IOPS-month"
    )
    return [CostLine("T3", what, billed * rate, basis)]


def _unbilled_t3(prices: Prices, fs: FileSystem, md: MetadataPlan) -> str:
    """The note for a plan that sizes a metadata-bound T3 where no session spills at peak."""
    rate = prices.fsx_gb_month.get(f"{fs.profile.name}@{fs.throughput_mbps_per_tib}")
    iops = prices.fsx_metadata_iops_month.get(fs.profile.name)
    head = (
        f"T3 not billed: no session spills there at peak; the file system this plan sizes for its"
        f" restores, {fs.capacity_gib:,} GiB with {md.iops:,} Metadata IOPS ({md.mode}),"
    )
    if rate is None or iops is None:
        return f"{head} has no price here"
    extra = (md.iops - md.automatic_iops) * iops
    return (
        f"{head} would cost {fs.capacity_gib:,} x ${rate} + ({md.iops:,} -"
        f" {md.automatic_iops:,}) x ${iops} = ${fs.capacity_gib * rate + extra:,.0f} a month"
        f" (${extra:,.0f} of it Metadata IOPS)"
    )


def _tiering(prices: Prices, t: Tiering, lines: list[CostLine]) -> TieringCost:
    """FSx Intelligent-Tiering for the released sessions, priced beside the plan's S3 line;
    its storage total is the plan's T3 lines and its own."""
    price = _Priced(prices)
    table = "fsx_intelligent_tiering"
    gb = t.stored_bytes / GIB
    parts = (
        ("frequent-gb-month", "storage", gb,
         f"{gb:,.0f} GB x ${{}}/GB-month, frequent access tier"),
        ("throughput-mbps-month", "throughput", t.throughput_mbps,
         f"{t.throughput_mbps:,} MBps x ${{}}/MBps-month"),
        ("metadata-iops-month", "Metadata IOPS", t.metadata_iops,
         f"{t.metadata_iops:,} x ${{}}/IOPS-month, all billed (no AUTOMATIC mode)"),
    )  # fmt: skip
    out = []
    for key, what, amount, basis in parts:
        rate = price(table, key)
        out.append(
            CostLine("T4", what, None, price.unpriced(table, key))
            if rate is None
            else CostLine("T4", what, amount * rate, basis.format(rate))
        )
    own = _sum([line.usd_per_month for line in out])
    storage = _sum([own, *(line.usd_per_month for line in lines if line.tier == "T3")])
    return TieringCost(tuple(out), own, storage, t.fit(), t.sizing(), tuple(price.missing))

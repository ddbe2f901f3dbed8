"""What a plan costs a month, per tier, from a prices record; and per served session-hour,
beside holding every session in HBM. Pure: prices arrive loaded (``inputs/prices.py``).

* Nodes (T1 HBM and T2 host DRAM come with them): nodes x $ per instance-hour x 730 h.
* T3, FSx for Lustre: provisioned capacity x $ per GB-month at its per-unit throughput, only
  when the plan puts sessions there.
* T4, S3 or S3 Express One Zone: bytes stored x $ per GB-month (S3 bills in GB of 2^30 bytes);
  requests are per session, one PUT per chunk written and one GET per chunk read back.
* Cross-AZ transfer: none in these plans (the nodes, FSx and an S3 Express bucket are in one
  zone; S3 Standard is regional); the price is shown for a reader who splits them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kvtool.errors import InputError
from kvtool.plan.deployment import Hardware
from kvtool.plan.fsx import FileSystem
from kvtool.plan.placement import TierPlan

HOURS_PER_MONTH = 730  # AWS's monthly convention (8,760 h / 12)
GIB = 2**30


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


class CostLine(NamedTuple):
    tier: str
    what: str
    usd_per_month: float
    basis: str


class Cost(NamedTuple):
    """A plan's monthly cost by line, per served session-hour, and the all-in-HBM figure."""

    lines: tuple[CostLine, ...]
    usd_per_month: float
    usd_per_session_hour: float
    all_in_hbm_nodes: int
    all_in_hbm_usd_per_month: float
    t4_usd_per_session_written: float | None
    t4_usd_per_session_read: float | None
    prices: Prices
    notes: tuple[str, ...]


def _price(table: Mapping[str, float], key: str, what: str, prices: Prices) -> float:
    try:
        return table[key]
    except KeyError:
        raise InputError(f"no {what} price for {key} in {prices.source}",
                         "add it to the prices file (--prices FILE)") from None  # fmt: skip


def plan_cost(
    hardware: Hardware, tiers: TierPlan, prices: Prices, *, sessions: int, ctx_tokens: int,
    chunk_tokens: int, file_system: FileSystem | None = None,
) -> Cost:  # fmt: skip
    """The cost under ``prices`` of ``sessions`` (of ``ctx_tokens``, the mean of a mix)
    placed as ``tiers`` on ``hardware``, with the plan's T3 ``file_system`` (default the
    given one, or the smallest that holds what spills there)."""
    node = hardware.node.name
    hourly = _price(prices.instance_hour, node, "instance-hour", prices)
    nodes = hardware.nodes
    basis = f"{nodes} x ${hourly:,.2f}/h x {HOURS_PER_MONTH} h; HBM and host DRAM come with them"
    lines = [CostLine("T1+T2", f"{nodes} x {node}", nodes * hourly * HOURS_PER_MONTH, basis)]
    notes: list[str] = []
    by_name = {t.name: t for t in tiers.tiers}
    if by_name["T3"].sessions:
        fs = file_system or hardware.file_system(tiers.t3_bytes_needed)
        key = f"{fs.profile.name}@{fs.throughput_mbps_per_tib}"
        rate = _price(prices.fsx_gb_month, key, "FSx GB-month", prices)
        what = (
            f"{fs.profile.name}, {fs.capacity_gib:,} GiB at {fs.throughput_mbps_per_tib} MB/s/TiB"
        )
        basis = f"{fs.capacity_gib:,} GB x ${rate}/GB-month" + (
            " (capacity sized by kvtool)" if fs.assumed else ""
        )
        lines.append(CostLine("T3", what, fs.capacity_gib * rate, basis))
    t4 = hardware.t4.name
    per_write = per_read = None
    if by_name["T4"].sessions:
        stored = by_name["T4"].used_bytes / GIB
        rate = _price(prices.s3_gb_month, t4, "S3 GB-month", prices)
        lines.append(CostLine("T4", t4, stored * rate, f"{stored:,.0f} GB x ${rate}/GB-month"))
        chunks = -(-ctx_tokens // chunk_tokens)
        per_write = chunks * _price(prices.s3_put_per_1000, t4, "S3 PUT", prices) / 1000
        per_read = chunks * _price(prices.s3_get_per_1000, t4, "S3 GET", prices) / 1000
        notes.append(f"T4 requests: ${per_write:.4f} to write a session ({chunks:,} PUTs of"
                     f" {chunk_tokens}-token chunks), ${per_read:.4f} to read one back; not in"
                     " the monthly total, which has no request rate")  # fmt: skip
    if prices.cross_az_per_gb is not None:
        notes.append(f"no cross-AZ transfer in this plan (one zone); it would cost"
                     f" ${prices.cross_az_per_gb}/GB each way")  # fmt: skip
    total = sum(line.usd_per_month for line in lines)
    all_nodes = tiers.nodes_for_all_in_t1
    if prices.example:
        notes.insert(0, f"EXAMPLE prices ({prices.source}, {prices.date}): not current; pass"
                        " --prices FILE or --prices aws")  # fmt: skip
    return Cost(
        lines=tuple(lines),
        usd_per_month=total,
        usd_per_session_hour=total / (sessions * HOURS_PER_MONTH),
        all_in_hbm_nodes=all_nodes,
        all_in_hbm_usd_per_month=all_nodes * hourly * HOURS_PER_MONTH,
        t4_usd_per_session_written=per_write,
        t4_usd_per_session_read=per_read,
        prices=prices,
        notes=tuple(notes),
    )

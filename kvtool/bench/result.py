"""What a measurement says: one ``BenchResult`` per tier and operation. Pure.

``kvtool bench --json`` prints ``{"results": [...]}`` with one object per measurement; a
measurement that could not run is ``status: "skip"`` with its ``reason``, never a made-up
number. Latencies are microseconds; bandwidths bytes per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple


class Latency(NamedTuple):
    """Latency percentiles in microseconds."""

    p50: float
    p99: float
    p999: float


class BenchResult(NamedTuple):
    """One measurement: ``op`` is seq_read, rand_read, seq_write, h2d, d2h, d2d, copy, get or
    put. ``clients`` is how many nodes drove it (fio client/server: ``bytes_per_s`` is their
    aggregate). ``variant`` tells apart measurements of one op: ``pinned``/``pageable`` host
    memory, ``host-only`` and its numpy ``reference``. ``spec_bytes_per_s`` is what the
    profile promises for the same path (None when no profile applies); ``limit`` says what
    bounds it; ``note`` how it was measured; ``filesystem`` the T3 folder's file-system type
    (``lustre``, ``ext4``...) from /proc/mounts."""

    tier: str
    op: str
    status: str  # "ok", "skip", "error"
    tool: str = ""
    block_bytes: int = 0
    threads: int = 0
    direct: bool | None = None
    clients: int = 1
    variant: str = ""
    filesystem: str = ""
    bytes_per_s: float | None = None
    iops: float | None = None
    latency_us: Latency | None = None
    spec_bytes_per_s: float | None = None
    limit: str = ""
    note: str = ""
    reason: str = ""

    @property
    def ratio(self) -> float | None:
        """Measured over spec, when both exist."""
        if self.bytes_per_s is None or not self.spec_bytes_per_s:
            return None
        return self.bytes_per_s / self.spec_bytes_per_s

    def to_json(self) -> dict[str, Any]:
        """The JSON object for this measurement (the issue's field names)."""
        data = self._asdict()
        data["latency_us"] = None if self.latency_us is None else self.latency_us._asdict()
        data["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        return data


def skipped(tier: str, op: str, reason: str) -> BenchResult:
    """A measurement that cannot run here, and why."""
    return BenchResult(tier=tier, op=op, status="skip", reason=reason)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation (numpy's default).

    >>> percentile([1, 2, 3, 4], 50)
    2.5
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_of(samples_s: Sequence[float]) -> Latency:
    """p50, p99 and p99.9 of per-operation times given in seconds, as microseconds."""
    return Latency(*(percentile(samples_s, q) * 1e6 for q in (50, 99, 99.9)))


def results_from_json(data: Any) -> list[BenchResult]:
    """Read back ``kvtool bench --json`` (for ``kvtool size --bench`` and ``kvtool check``);
    objects that are not measurements are ignored."""
    out = []
    for item in (data or {}).get("results") or []:
        if not isinstance(item, dict) or "tier" not in item or "op" not in item:
            continue
        latency = item.get("latency_us")
        out.append(
            BenchResult(
                tier=str(item["tier"]),
                op=str(item["op"]),
                status=str(item.get("status", "ok")),
                tool=str(item.get("tool", "")),
                block_bytes=int(item.get("block_bytes") or 0),
                threads=int(item.get("threads") or 0),
                direct=item.get("direct"),
                clients=int(item.get("clients") or 1),
                variant=str(item.get("variant", "")),
                filesystem=str(item.get("filesystem", "")),
                bytes_per_s=item.get("bytes_per_s"),
                iops=item.get("iops"),
                latency_us=Latency(**latency) if isinstance(latency, dict) else None,
                spec_bytes_per_s=item.get("spec_bytes_per_s"),
                limit=str(item.get("limit", "")),
                note=str(item.get("note", "")),
                reason=str(item.get("reason", "")),
            )
        )
    return out

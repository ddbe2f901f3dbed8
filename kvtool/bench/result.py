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


# bytes a PCIe lane carries per second and direction after line coding: 8b/10b up to Gen2,
# 128b/130b for Gen3-5, and Gen6's 256-byte FLITs carry 242 bytes of data (PCIe 6.0 spec)
PCIE_LANE_BYTES_PER_S = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5e9 * 8 / 10 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}


class PcieLink(NamedTuple):
    """A PCIe link's generation and lane count."""

    gen: int
    width: int

    def __str__(self) -> str:
        return f"Gen{self.gen} x{self.width}"

    @property
    def bytes_per_s(self) -> float:
        """What the link carries per direction after line coding (Gen5 x16: 63.0 GB/s); packet
        headers take a few percent more, so good hosts reach about 85-90% of it."""
        return PCIE_LANE_BYTES_PER_S[self.gen] * self.width


class GpuId(NamedTuple):
    """Which GPU a measurement ran on: torch's device index, name, UUID, PCI address, the NUMA
    node of its PCI slot and its PCIe link now and at most (None where the machine does not say: a
    GB200's C2C link is not PCIe). A link below its maximum is downtrained, or idle: GPUs drop
    their link speed to save power and raise it under load, so it is read after the copies."""

    device: int
    name: str
    uuid: str = ""
    pci: str = ""
    numa_node: int | None = None
    link_now: PcieLink | None = None
    link_max: PcieLink | None = None

    def __str__(self) -> str:
        text = f"GPU {self.device}" + (f" {self.name}" if self.name else "")
        where = [f"PCI {self.pci}"] if self.pci else []
        if self.numa_node is not None:
            where.append(f"NUMA {self.numa_node}")
        if self.link_max is not None:
            where.append(f"PCIe {self.link_now or '?'} (max {self.link_max})")
        return text + (f" ({', '.join(where)})" if where else "")

    @property
    def downtrained(self) -> bool:
        """The link runs below its maximum generation or width."""
        now, top = self.link_now, self.link_max
        return now is not None and top is not None and (now.gen < top.gen or now.width < top.width)

    def to_json(self) -> dict[str, Any]:
        data = self._asdict()
        for name in ("link_now", "link_max"):
            link = data[name]
            data[name] = None if link is None else link._asdict()
        return data


class BenchResult(NamedTuple):
    """One measurement: ``op`` is seq_read, rand_read, seq_write, h2d, d2h, d2d, copy, get or
    put. ``clients`` is how many nodes drove it (fio client/server: ``bytes_per_s`` is their
    aggregate). ``variant`` tells apart measurements of one op: ``ce``/``sm`` (T1's copy
    engine or a kernel on the SMs), ``pinned``/``pageable`` host memory, ``host-only`` and
    its numpy ``reference``. ``spec_bytes_per_s`` is what the profile promises for the same
    path (None when no profile applies); ``limit`` says what bounds it; ``note`` how it was
    measured; ``filesystem`` the T3 folder's file-system type (``lustre``, ``ext4``...) from
    /proc/mounts. ``gpu`` names the GPU a T1, T2 or GDS row ran on; ``gpus`` is how many GPUs
    copied at the same time (1 alone, N for all at once; a row with ``gpu`` None and ``gpus`` N
    is their sum; 0 for rows that are not GPU copies)."""

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
    gpu: GpuId | None = None
    gpus: int = 0

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
        data["gpu"] = None if self.gpu is None else self.gpu.to_json()
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
    """Read back ``kvtool bench --json`` (for ``kvtool plan --bench`` and ``kvtool check``);
    objects that are not measurements are ignored. A field of the wrong type, or a figure
    that is negative, NaN or infinite, raises ValueError naming it (``results[2].iops``):
    these files travel between teams, and a NaN bandwidth once planned "reload wins"."""
    results = data.get("results") if isinstance(data, dict) else None
    if results is None:
        return []
    if not isinstance(results, list):
        raise ValueError(f"results must be a list, got {_shown(results)}")
    out = []
    for index, item in enumerate(results):
        if not isinstance(item, dict) or "tier" not in item or "op" not in item:
            continue
        field = _Fields(item, f"results[{index}]")
        latency = item.get("latency_us")
        out.append(
            BenchResult(
                tier=field.text("tier"),
                op=field.text("op"),
                status=field.text("status", "ok"),
                tool=field.text("tool"),
                block_bytes=field.whole("block_bytes", 0),
                threads=field.whole("threads", 0),
                direct=field.flag("direct"),
                clients=field.whole("clients", 1) or 1,
                variant=field.text("variant"),
                filesystem=field.text("filesystem"),
                bytes_per_s=field.figure("bytes_per_s"),
                iops=field.figure("iops"),
                latency_us=None if latency is None else _latency(latency, field.where),
                spec_bytes_per_s=field.figure("spec_bytes_per_s"),
                limit=field.text("limit"),
                note=field.text("note"),
                reason=field.text("reason"),
                gpu=_gpu(item.get("gpu"), f"{field.where}.gpu"),
                gpus=field.whole("gpus", 0),
            )
        )
    return out


def _shown(value: Any) -> str:
    return (
        repr(value) if len(repr(value)) <= 40 else f"{type(value).__name__} {repr(value)[:30]}..."
    )


class _Fields:
    """Typed reads of one measurement's fields; ValueError names the field."""

    def __init__(self, item: dict[str, Any], where: str) -> None:
        self.item, self.where = item, where

    def _bad(self, name: str, wanted: str) -> ValueError:
        return ValueError(f"{self.where}.{name} must be {wanted}, got {_shown(self.item[name])}")

    def text(self, name: str, default: str = "") -> str:
        value = self.item.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        return value

    def whole(self, name: str, default: int) -> int:
        value = self.item.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise self._bad(name, "a whole number >= 0")
        return value

    def flag(self, name: str) -> bool | None:
        value = self.item.get(name)
        if value is not None and not isinstance(value, bool):
            raise self._bad(name, "true, false or null")
        return value

    def figure(self, name: str) -> float | None:
        value = self.item.get(name)
        if value is None:
            return None
        if not _finite_figure(value):
            raise self._bad(name, "a finite number >= 0 or null")
        return float(value)


def _finite_figure(value: Any) -> bool:
    import math

    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int past any float
        return False


def _latency(value: Any, where: str) -> Latency:
    names = Latency._fields
    if not isinstance(value, dict) or not all(_finite_figure(value.get(n)) for n in names):
        raise ValueError(
            f"{where}.latency_us must be {{p50, p99, p999}} in microseconds, got {_shown(value)}"
        )
    return Latency(*(float(value[n]) for n in names))


def _gpu(value: Any, where: str) -> GpuId | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object or null, got {_shown(value)}")
    field = _Fields(value, where)
    numa = value.get("numa_node")
    if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int)):
        raise field._bad("numa_node", "a whole number or null")
    return GpuId(
        device=field.whole("device", 0),
        name=field.text("name"),
        uuid=field.text("uuid"),
        pci=field.text("pci"),
        numa_node=numa,
        link_now=_link(value.get("link_now"), f"{where}.link_now"),
        link_max=_link(value.get("link_max"), f"{where}.link_max"),
    )


def _link(value: Any, where: str) -> PcieLink | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or value.get("gen") not in PCIE_LANE_BYTES_PER_S
        or isinstance(value.get("width"), bool)
        or not isinstance(value.get("width"), int)
        or not 1 <= value["width"] <= 32
    ):
        raise ValueError(f"{where} must be {{gen: 1-6, width: 1-32}} or null, got {_shown(value)}")
    return PcieLink(value["gen"], value["width"])

"""The shape of hardware (node) and storage profiles: ``profiles/hardware/*.toml`` and
``profiles/storage/*.toml``. Pure: validates dicts, reads no files.

Kept apart from the model-profile schema so that ``kvtool size`` without ``--hardware`` does not
pay for defining these classes at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kvtool.errors import InputError
from kvtool.profiles.schema import SCHEMA_VERSION, _text, _unknown


@dataclass(frozen=True)
class NodeProfile:
    """One accelerator node (or an UltraServer treated as one node), from a TOML profile.

    Units are in the field names: ``*_gib`` are GiB (2^30 B, as the EC2 API reports memory),
    ``*_gbps`` network fields are gigabits per second, ``*_gbytes_per_s`` are decimal gigabytes
    per second, ``*_tflops_*`` are dense (not sparse) TFLOP/s. A host memory of 0 means the
    vendor publishes none; the planner then gives the node no T2. ``instances`` is how many
    EC2 instances the profile stands for (an UltraServer is several); the whole-node figures
    (chips, memory, ``ena_gbps``, ``efa_gbps``) already add them up, while per-client ceilings
    (FSx, S3) apply to each instance and are multiplied by it.
    """

    name: str
    aliases: tuple[str, ...]
    accelerator: str
    chips: int
    hbm_gib_per_chip: float
    hbm_tbytes_per_s_per_chip: float
    bf16_tflops_per_chip: float
    fp8_tflops_per_chip: float
    host_memory_gib: float
    host_memory_gbytes_per_s: float
    host_to_chip_gbytes_per_s: float
    pcie_gen: int
    ena_gbps: float
    efa_gbps: float
    gds: bool
    sources: dict[str, str]
    notes: str = ""
    instances: int = 1

    def names(self) -> tuple[str, ...]:
        """Every name this profile answers to, lower-cased."""
        return tuple(n.lower() for n in (self.name, *self.aliases))

    @property
    def chips_per_instance(self) -> int:
        """Accelerators in one EC2 instance (an UltraServer is several instances)."""
        return max(1, self.chips // self.instances)

    @property
    def hbm_bytes(self) -> int:
        """HBM of the whole node in bytes."""
        return int(self.chips * self.hbm_gib_per_chip * 2**30)

    @property
    def host_memory_bytes(self) -> int:
        """Host DRAM of the whole node in bytes."""
        return int(self.host_memory_gib * 2**30)


@dataclass(frozen=True)
class StorageProfile:
    """A shared storage tier (FSx for Lustre, S3) from a TOML profile.

    ``throughput_mbps_per_tib_options`` are FSx's per-unit throughput tiers (MB/s per TiB of
    capacity), for reads, and for writes too unless ``write_throughput_mbps_per_tib`` says
    otherwise (SCRATCH_2: 200 read, 100 write). Valid capacities are ``capacity_sizes_gib``
    or multiples of ``capacity_step_gib``; EFA-enabled file systems come in multiples of
    ``efa_capacity_step_gib[throughput]``. ``client_*_gbps`` are per-client-instance ceilings;
    ``get/put_requests_per_s`` are S3 request rates per ``request_rate_scope`` (a prefix for
    general purpose buckets, the whole bucket for directory buckets); latencies are the typical
    range.
    """

    name: str
    aliases: tuple[str, ...]
    tier: str
    medium: str
    latency_us: float
    latency_us_max: float
    sources: dict[str, str]
    throughput_mbps_per_tib_options: tuple[int, ...] = ()
    default_throughput_mbps_per_tib: int = 0
    write_throughput_mbps_per_tib: int = 0
    capacity_sizes_gib: tuple[int, ...] = ()
    capacity_step_gib: int = 0
    efa_capacity_step_gib: dict[int, int] = field(default_factory=dict)
    client_ena_gbps: float = 0.0
    client_efa_gbps: float = 0.0
    client_efa_gds_gbps: float = 0.0
    per_connection_mbytes_per_s: float = 0.0
    get_requests_per_s: int = 0
    put_requests_per_s: int = 0
    request_rate_scope: str = ""
    notes: str = ""
    # FSx metadata configuration (PERSISTENT_2): the most Metadata IOPS it provisions (0: none,
    # not modelled) and the file creates, opens or closes a second each Metadata IOPS drives
    metadata_iops_max: int = 0
    metadata_file_ops_per_iops: float = 0.0

    def names(self) -> tuple[str, ...]:
        """Every name this profile answers to, lower-cased."""
        return tuple(n.lower() for n in (self.name, *self.aliases))


_NODE_NUMBERS = {
    "chips": int,
    "hbm_gib_per_chip": float,
    "hbm_tbytes_per_s_per_chip": float,
    "bf16_tflops_per_chip": float,
    "fp8_tflops_per_chip": float,
    "host_memory_gib": float,
    "host_memory_gbytes_per_s": float,
    "host_to_chip_gbytes_per_s": float,
    "pcie_gen": int,
    "ena_gbps": float,
    "efa_gbps": float,
    "instances": int,
}
_OPTIONAL_NODE_NUMBERS = {"instances": 1}
# figures a plan divides by: 0 elsewhere means "not published" (trn3's host links, fp8 on A100)
_POSITIVE = {
    "chips",
    "hbm_gib_per_chip",
    "hbm_tbytes_per_s_per_chip",
    "bf16_tflops_per_chip",
    "host_memory_gib",
    "ena_gbps",
    "instances",
}
_STORAGE_NUMBERS = {
    "latency_us": float,
    "latency_us_max": float,
    "default_throughput_mbps_per_tib": int,
    "write_throughput_mbps_per_tib": int,
    "capacity_step_gib": int,
    "client_ena_gbps": float,
    "client_efa_gbps": float,
    "client_efa_gds_gbps": float,
    "per_connection_mbytes_per_s": float,
    "get_requests_per_s": int,
    "put_requests_per_s": int,
    "metadata_iops_max": int,
    "metadata_file_ops_per_iops": float,
}
_STORAGE_LISTS = ("throughput_mbps_per_tib_options", "capacity_sizes_gib")


def _number(data: Mapping[str, Any], key: str, kind: type, file: str, required: bool) -> Any:
    if key not in data:
        if required:
            raise InputError(f"{file}: missing key {key!r}", "see profiles/hardware/*.toml")
        return kind()
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e15:
        # NaN and inf are TOML floats; NaN passed a plain "< 0" check
        raise InputError(
            f"{file}: key {key!r} must be a non-negative number below 1e15, got {value!r}"
        )
    if key in _POSITIVE and value == 0:
        raise InputError(
            f"{file}: key {key!r} must be positive, got 0", "kvtool divides by it: give the figure"
        )
    if kind is int and not isinstance(value, int):
        raise InputError(f"{file}: key {key!r} must be a whole number, got {value!r}")
    return kind(value)


def _sources(data: Mapping[str, Any], numbers: Mapping[str, type], file: str) -> dict[str, str]:
    sources = data.get("sources")
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) for v in sources.values()):
        raise InputError(f"{file}: missing [sources] table (one source per figure)")
    extra = {"gds", "efa_capacity_step_gib", "request_rate_scope", *_STORAGE_LISTS}
    unknown = sorted(set(sources) - set(numbers) - extra)
    if unknown:
        raise InputError(f"{file}: [sources] names unknown key {unknown[0]!r}")
    return dict(sources)


def _header(data: Mapping[str, Any], file: str) -> tuple[str, tuple[str, ...]]:
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"{file}: schema_version must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}"
        )
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(f"{file}: aliases must be a list of strings")
    return _text(data, "name", file), tuple(aliases)


def node_profile_from_dict(data: Mapping[str, Any], *, file: str) -> NodeProfile:
    """Validate a parsed hardware TOML; a missing or unknown key raises InputError naming it."""
    allowed = {"schema_version", "name", "aliases", "accelerator", "gds", "sources", "notes"}
    _unknown(data.keys(), allowed | set(_NODE_NUMBERS), "", file)
    name, aliases = _header(data, file)
    numbers = {
        key: _number(data, key, kind, file, key not in _OPTIONAL_NODE_NUMBERS)
        for key, kind in _NODE_NUMBERS.items()
    }
    for key, default in _OPTIONAL_NODE_NUMBERS.items():
        numbers[key] = numbers[key] if key in data else default
    if numbers["chips"] < 1 or numbers["hbm_gib_per_chip"] <= 0 or numbers["instances"] < 1:
        raise InputError(f"{file}: chips, hbm_gib_per_chip and instances must be positive")
    if numbers["chips"] % numbers["instances"]:
        raise InputError(f"{file}: chips must be a multiple of instances")
    if not isinstance(data.get("gds"), bool):
        raise InputError(f"{file}: key 'gds' must be true or false")
    return NodeProfile(
        name=name,
        aliases=aliases,
        accelerator=_text(data, "accelerator", file),
        gds=data["gds"],
        sources=_sources(data, _NODE_NUMBERS, file),
        notes=str(data.get("notes", "")),
        **numbers,
    )


def storage_profile_from_dict(data: Mapping[str, Any], *, file: str) -> StorageProfile:
    """Validate a parsed storage TOML; a missing or unknown key raises InputError naming it."""
    allowed = {
        "schema_version",
        "name",
        "aliases",
        "tier",
        "medium",
        "sources",
        "notes",
        "request_rate_scope",
        "efa_capacity_step_gib",
        *_STORAGE_LISTS,
    }
    _unknown(data.keys(), allowed | set(_STORAGE_NUMBERS), "", file)
    name, aliases = _header(data, file)
    numbers = {
        key: _number(data, key, kind, file, key.startswith("latency"))
        for key, kind in _STORAGE_NUMBERS.items()
    }
    lists: dict[str, Any] = {}
    for key in _STORAGE_LISTS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(o, int) for o in value):
            raise InputError(f"{file}: {key} must be a list of integers")
        lists[key] = tuple(value)
    steps = data.get("efa_capacity_step_gib", {})
    if not isinstance(steps, Mapping) or not all(
        str(k).isdigit() and isinstance(v, int) and v > 0 for k, v in steps.items()
    ):
        raise InputError(
            f"{file}: [efa_capacity_step_gib] maps a throughput tier to a step, e.g. 1000 = 4800"
        )
    tier = _text(data, "tier", file)
    if tier not in ("t3", "t4"):
        raise InputError(f"{file}: tier must be 't3' or 't4', got {tier!r}")
    if tier == "t3" and not numbers["default_throughput_mbps_per_tib"]:
        raise InputError(
            f"{file}: a t3 profile's default_throughput_mbps_per_tib must be positive",
            "give the file system's MB/s per TiB",
        )
    return StorageProfile(
        name=name,
        aliases=aliases,
        tier=tier,
        medium=_text(data, "medium", file),
        sources=_sources(data, _STORAGE_NUMBERS, file),
        efa_capacity_step_gib={int(k): int(v) for k, v in steps.items()},
        request_rate_scope=str(data.get("request_rate_scope", "")),
        notes=str(data.get("notes", "")),
        **lists,
        **numbers,
    )

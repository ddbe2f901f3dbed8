"""The shape of a model profile's ``profile.toml``. Pure: validates dicts, reads no files.

A bundled model is a folder ``profiles/models/<name>/`` holding the model's own
``config.json`` (verbatim, as published) and a ``profile.toml`` that names it and records
where the config was copied from::

    schema_version = 1
    name = "deepseek-r1"
    hf_id = "deepseek-ai/DeepSeek-R1"
    family = "DeepSeek"
    aliases = ["r1"]

    [source]
    repository = "github.com/ai-dynamo/aiconfigurator"
    path = "aic-core/.../deepseek-ai--DeepSeek-R1_config.json"
    commit = "095f58a5..."
    note = "verbatim copy"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvtool.errors import InputError

SCHEMA_VERSION = 1
_TOP_KEYS = {"schema_version", "name", "hf_id", "family", "aliases", "source"}
_SOURCE_KEYS = {"repository", "path", "commit", "note"}


@dataclass(frozen=True)
class ModelSource:
    """Where a bundled config.json was copied from."""

    repository: str
    path: str
    commit: str
    note: str


@dataclass(frozen=True)
class ModelProfile:
    """A bundled model: its names and its source. The config itself stays in config.json."""

    name: str
    hf_id: str
    family: str
    aliases: tuple[str, ...]
    source: ModelSource

    def names(self) -> tuple[str, ...]:
        """Every name this profile answers to, lower-cased."""
        return tuple(n.lower() for n in (self.name, self.hf_id, *self.aliases))


def _unknown(keys: Any, allowed: set[str], where: str, file: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        raise InputError(
            f"{file}: unknown key {extra[0]!r}{where}",
            "allowed keys: " + ", ".join(sorted(allowed)),
        )


def _text(data: Mapping[str, Any], key: str, file: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{file}: key {key!r} is missing or not a string")
    return value


def model_profile_from_dict(data: Mapping[str, Any], *, file: str) -> ModelProfile:
    """Validate a parsed profile.toml; unknown or missing keys raise InputError naming them."""
    _unknown(data.keys(), _TOP_KEYS, "", file)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"{file}: schema_version must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}"
        )
    source = data.get("source")
    if not isinstance(source, Mapping):
        raise InputError(f"{file}: missing [source] table")
    _unknown(source.keys(), _SOURCE_KEYS, " in [source]", file)
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(f"{file}: aliases must be a list of strings")
    return ModelProfile(
        name=_text(data, "name", file),
        hf_id=_text(data, "hf_id", file),
        family=_text(data, "family", file),
        aliases=tuple(aliases),
        source=ModelSource(
            repository=_text(source, "repository", file),
            path=_text(source, "path", file),
            commit=_text(source, "commit", file),
            note=str(source.get("note", "")),
        ),
    )


def model_profile_to_dict(profile: ModelProfile) -> dict[str, Any]:
    """The inverse of ``model_profile_from_dict`` (used to round-trip every bundled profile)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": profile.name,
        "hf_id": profile.hf_id,
        "family": profile.family,
        "aliases": list(profile.aliases),
        "source": {
            "repository": profile.source.repository,
            "path": profile.source.path,
            "commit": profile.source.commit,
            "note": profile.source.note,
        },
    }


# --- hardware and storage profiles ------------------------------------------------------------


@dataclass(frozen=True)
class NodeProfile:
    """One accelerator node (or an UltraServer treated as one node), from a TOML profile.

    Units are in the field names: ``*_gib`` are GiB (2^30 B, as the EC2 API reports memory),
    ``*_gbps`` network fields are gigabits per second, ``*_gbytes_per_s`` are decimal gigabytes
    per second, ``*_tflops_*`` are dense (not sparse) TFLOP/s. A host memory of 0 means the
    vendor publishes none; the planner then gives the node no T2.
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

    def names(self) -> tuple[str, ...]:
        """Every name this profile answers to, lower-cased."""
        return tuple(n.lower() for n in (self.name, *self.aliases))

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

    ``read_gbytes_per_s_per_tib`` options are FSx's per-unit throughput (MB/s/TiB / 1000);
    ``client_*_gbps`` are per-client ceilings; latencies are the typical range.
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
    capacity_step_gib: int = 0
    client_ena_gbps: float = 0.0
    client_efa_gbps: float = 0.0
    client_efa_gds_gbps: float = 0.0
    per_connection_mbytes_per_s: float = 0.0
    get_requests_per_s_per_prefix: int = 0
    put_requests_per_s_per_prefix: int = 0
    notes: str = ""

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
}
_STORAGE_NUMBERS = {
    "latency_us": float,
    "latency_us_max": float,
    "default_throughput_mbps_per_tib": int,
    "capacity_step_gib": int,
    "client_ena_gbps": float,
    "client_efa_gbps": float,
    "client_efa_gds_gbps": float,
    "per_connection_mbytes_per_s": float,
    "get_requests_per_s_per_prefix": int,
    "put_requests_per_s_per_prefix": int,
}


def _number(data: Mapping[str, Any], key: str, kind: type, file: str, required: bool) -> Any:
    if key not in data:
        if required:
            raise InputError(f"{file}: missing key {key!r}", "see profiles/hardware/*.toml")
        return kind()
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InputError(f"{file}: key {key!r} must be a non-negative number, got {value!r}")
    if kind is int and not isinstance(value, int):
        raise InputError(f"{file}: key {key!r} must be a whole number, got {value!r}")
    return kind(value)


def _sources(data: Mapping[str, Any], numbers: Mapping[str, type], file: str) -> dict[str, str]:
    sources = data.get("sources")
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) for v in sources.values()):
        raise InputError(f"{file}: missing [sources] table (one source per figure)")
    unknown = sorted(set(sources) - set(numbers) - {"gds", "throughput_mbps_per_tib_options"})
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
    numbers = {key: _number(data, key, kind, file, True) for key, kind in _NODE_NUMBERS.items()}
    if numbers["chips"] < 1 or numbers["hbm_gib_per_chip"] <= 0:
        raise InputError(f"{file}: chips and hbm_gib_per_chip must be positive")
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
        "throughput_mbps_per_tib_options",
    }
    _unknown(data.keys(), allowed | set(_STORAGE_NUMBERS), "", file)
    name, aliases = _header(data, file)
    numbers = {
        key: _number(data, key, kind, file, key.startswith("latency"))
        for key, kind in _STORAGE_NUMBERS.items()
    }
    options = data.get("throughput_mbps_per_tib_options", [])
    if not isinstance(options, list) or not all(isinstance(o, int) for o in options):
        raise InputError(f"{file}: throughput_mbps_per_tib_options must be a list of integers")
    tier = _text(data, "tier", file)
    if tier not in ("t3", "t4"):
        raise InputError(f"{file}: tier must be 't3' or 't4', got {tier!r}")
    return StorageProfile(
        name=name,
        aliases=aliases,
        tier=tier,
        medium=_text(data, "medium", file),
        sources=_sources(data, _STORAGE_NUMBERS, file),
        throughput_mbps_per_tib_options=tuple(options),
        notes=str(data.get("notes", "")),
        **numbers,
    )

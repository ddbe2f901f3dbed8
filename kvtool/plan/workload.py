"""The workload schema: one description of a deployment's traffic, from a file or from flags.

Pure. ``kvtool advise`` reads it today and ``kvtool check`` will; both go through
``workload_from_mapping``, so a key means the same everywhere, an unknown key is an error that
names it, and every key accepted is used. A workload file (YAML) looks like::

    model: deepseek-r1
    hardware: p5en
    nodes: 4
    sessions: 400            # mean concurrent sessions
    contexts: {8k: 0.5, 128k: 0.5}
    shared_prefix: 0.4
    mean_idle: 2m            # a duration with its unit: 90s, 2m, 1h
    peak_to_mean: 4
    disaggregated: true

Values may be written as the flags take them (``contexts: 8k:0.5,128k:0.5``,
``shared_prefix: 40%``, ``sessions: 1k``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from kvtool.errors import InputError
from kvtool.plan.reload import parse_t3_path
from kvtool.units import parse_bytes, parse_count, parse_duration, parse_fraction


@dataclass(frozen=True)
class Workload:
    """A deployment and its traffic. ``contexts`` maps a context length in tokens to the share
    of sessions at that length (shares sum to 1). ``tp`` of None lets the planner choose (the
    chips of one instance); ``weights_dtype`` ``auto`` is the checkpoint's own format."""

    model: str
    hardware: str
    nodes: int = 1
    sessions: int = 1
    contexts: dict[int, float] = field(default_factory=lambda: {8000: 1.0})
    shared_prefix: float = 0.0
    mean_idle_s: float = 0.0
    peak_to_mean: float = 1.0
    disaggregated: bool = False
    survive_node_failure: bool = False
    durable_sessions: bool = False
    gpus_added_for_kv: bool = False
    engine: str = "vllm"
    kv_dtype: str = "auto"
    tp: int | None = None
    weights_dtype: str = "auto"


# the file's keys: the fields, but durations named without their unit (mean_idle: 2m)
WORKLOAD_KEYS = tuple("mean_idle" if f.name == "mean_idle_s" else f.name for f in fields(Workload))
# old key -> its name now: read for one release, with a note (``renamed_keys``)
RENAMED_KEYS = {"mean_idle_s": "mean_idle", "t3_cap": "max_size"}


def renamed_keys(data: Mapping[str, Any], *, source: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``data`` with every old key under its name now (``mean_idle_s: 120`` becomes
    ``mean_idle: 120s``), and the note each gets; both spellings at once is an error."""
    out = dict(data)
    notes = []
    for old, new in RENAMED_KEYS.items():
        if old not in out:
            continue
        if new in out:
            raise InputError(f"{source}: {old} and {new} are one key", f"keep {new} only")
        value = out.pop(old)
        if old == "mean_idle_s" and not isinstance(value, bool):
            with contextlib.suppress(ValueError):  # not a number: the duration's error says so
                value = f"{float(str(value)):g}s"
        out[new] = value
        notes.append(f"{source}: {old} is now {new}; the old key goes in the next release")
    return out, tuple(notes)


def workload_from_mapping(
    data: Mapping[str, Any], *, source: str, names: Mapping[str, str] | None = None
) -> Workload:
    """Validate ``data`` (a parsed workload file with flags laid over it) into a Workload.

    ``source`` names the file for errors; ``names`` maps a key to the flag it came from
    (``{"shared_prefix": "--shared-prefix"}``) so an error names what the user typed.
    Raises InputError naming the key for an unknown key, a missing model or hardware, or a
    value out of range.
    """
    unknown = sorted(set(data) - set(WORKLOAD_KEYS))
    if unknown:
        if unknown[0] in PLAN_KEYS:
            raise InputError(
                f"{source}: key {unknown[0]!r} belongs to a deployment plan, which kvtool check"
                " reads; advise does not use it",
                f"run kvtool check {source}, or remove the key",
            )
        raise InputError(
            f"{source}: unknown key {unknown[0]!r}", "allowed: " + ", ".join(sorted(WORKLOAD_KEYS))
        )
    names = names or {}

    def what(key: str) -> str:
        return names.get(key) or f"{source}: {key}"

    missing = [key for key in ("model", "hardware") if not data.get(key)]
    if missing:
        raise InputError(
            f"the workload names no {' and no '.join(missing)}",
            "pass --model and --hardware, or put model: and hardware: in the workload file",
        )
    values: dict[str, Any] = {"model": _text(data["model"]), "hardware": _text(data["hardware"])}
    for key in ("nodes", "sessions"):
        if key in data:
            values[key] = parse_count(_text(data[key]), what=what(key))
    if "tp" in data and data["tp"] is not None:
        values["tp"] = parse_count(_text(data["tp"]), what=what("tp"))
    if "contexts" in data:
        values["contexts"] = parse_contexts(data["contexts"], what=what("contexts"))
    if "shared_prefix" in data:
        values["shared_prefix"] = _share(data["shared_prefix"], what("shared_prefix"))
    if "mean_idle" in data:
        raw = data["mean_idle"]
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            raise InputError(
                f"{what('mean_idle')} {raw:g} has no unit",
                f"give a duration, e.g. {raw:g}s or {raw / 60:g}m",
            )
        idle = parse_duration(_text(raw), what=what("mean_idle"))
        if idle > MAX_IDLE_S:
            raise InputError(
                f"{what('mean_idle')} {_text(raw)} is over a year",
                "give the mean time a session sits idle between turns, e.g. 2m",
            )
        values["mean_idle_s"] = idle
    if "peak_to_mean" in data:
        ratio = _number(data["peak_to_mean"], what("peak_to_mean"))
        if not 1 <= ratio <= MAX_PEAK_TO_MEAN:
            raise InputError(
                f"{what('peak_to_mean')} must be 1 to {MAX_PEAK_TO_MEAN:,}, got {ratio:g}",
                "the peak's concurrent sessions over the mean's, e.g. 4",
            )
        values["peak_to_mean"] = ratio
    for key in ("disaggregated", "survive_node_failure", "durable_sessions", "gpus_added_for_kv"):
        if key in data:
            values[key] = _flag(data[key], what(key))
    for key in ("engine", "kv_dtype", "weights_dtype"):
        if key in data:
            values[key] = _text(data[key])
    return Workload(**values)


def parse_contexts(value: Any, *, what: str) -> dict[int, float]:
    """``8k,128k`` (equal shares), ``8k:0.6,128k:0.4``, or a mapping ``{8k: 0.6, 128k: 0.4}``."""
    if isinstance(value, Mapping):
        items = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(v), "") for v in value]
    else:
        items = [(part.partition(":")[0], part.partition(":")[2]) for part in str(value).split(",")]
    if not items:
        raise InputError(f"{what} is empty", "give e.g. 8k:0.6,128k:0.4")
    shares: dict[int, float] = {}
    for tokens, share in items:
        count = parse_count(tokens, what=what)
        shares[count] = shares.get(count, 0.0) + (
            parse_fraction(share, what=f"{what} share") if share else 1.0 / len(items)
        )
    total = sum(shares.values())
    if abs(total - 1.0) > 0.01:
        raise InputError(f"{what} shares add up to {total:g}, not 1", "make them sum to 1")
    return shares


def _text(value: Any) -> str:
    return str(value).strip()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{what} {value!r} is not a number")
    try:
        number = float(str(value).strip().removesuffix("s"))
    except ValueError:
        raise InputError(f"{what} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise InputError(f"{what} must be a finite number, got {value!r}")
    if number < 0:
        raise InputError(f"{what} must not be negative, got {value!r}")
    return number


def _share(value: Any, what: str) -> float:
    text = str(value).strip()
    number = _number(text.removesuffix("%"), what)
    number = number / 100 if text.endswith("%") else number
    if number > 1:
        raise InputError(f"{what} must be at most 1, got {value!r}", "e.g. 0.4 or 40%")
    return number


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    raise InputError(f"{what} must be true or false, got {value!r}")


# --- deployment plans (kvtool check) ----------------------------------------------------------

MAX_IDLE_S = 366 * 86_400  # a mean idle time past a year is a typo, not a workload
MAX_PEAK_TO_MEAN = 10_000

PLAN_KEYS = (
    "fsx", "t3_path", "io_threads", "odirect", "posture", "measured", "tolerance", "t3_dir",
    "max_size",
)  # fmt: skip
FSX_KEYS = (
    "deployment_type",
    "storage_type",
    "storage_capacity_gib",
    "per_unit_storage_throughput",
    "efa_enabled",
    "data_compression_type",
    "s3_association",
    "auto_export",
    "mount_options",
    "stripe_count",
    "same_az",
    "from_terraform",
    "from_cloudformation",
)
MEASURED_KEYS = ("bench", "doctor", "t3_read_gbytes_per_s")


class FsxSettings(NamedTuple):
    """The FSx for Lustre file system as the infrastructure code declares it, and how the
    nodes mount and lay out the KV folder; None means "not declared". ``source`` says where
    the resource settings came from (the plan file, a Terraform plan, a CloudFormation
    template)."""

    deployment_type: str | None = None
    storage_type: str | None = None
    storage_capacity_gib: int | None = None
    per_unit_storage_throughput: int | None = None
    efa_enabled: bool | None = None
    data_compression_type: str | None = None
    s3_association: bool | None = None
    auto_export: bool | None = None  # the association exports every file to S3 by itself
    mount_options: tuple[str, ...] | None = None
    stripe_count: int | None = None
    same_az: bool | None = None
    source: str = ""


class Measured(NamedTuple):
    """Results measured on the deployment: file names of ``kvtool bench --json`` and
    ``kvtool doctor --json`` reports (relative to the plan file), or a T3 read bandwidth."""

    bench: str | None = None
    doctor: tuple[str, ...] = ()
    t3_read_gbytes_per_s: float | None = None


class PlanFile(NamedTuple):
    """A deployment plan: the workload (the advise schema), the file system, the client side
    of the T3 path, measured results, and the tolerance measured figures get."""

    workload: Workload
    fsx: FsxSettings | None
    t3_path: str
    io_threads: int | None
    odirect: bool | None
    posture: str | None
    measured: Measured
    tolerance: float
    terraform: str | None
    cloudformation: str | None
    t3_dir: str | None = None  # the shared KV folder, read where it is mounted
    max_size: int | None = None  # the most the t3_dir folder may hold (bytes)


def plan_from_mapping(data: Mapping[str, Any], *, source: str) -> PlanFile:
    """Validate a plan file: the workload keys through ``workload_from_mapping`` (the same
    loader as advise), the rest here. Raises InputError naming the file and key."""
    _known(data, (*sorted(WORKLOAD_KEYS), *PLAN_KEYS), source)  # the hint lists a plan's keys
    workload = workload_from_mapping(
        {k: v for k, v in data.items() if k not in PLAN_KEYS}, source=source
    )
    fsx_data = data.get("fsx")
    fsx = None
    terraform = cloudformation = None
    if fsx_data is not None:
        if not isinstance(fsx_data, Mapping):
            raise InputError(f"{source}: fsx must be a mapping of settings")
        _known(fsx_data, FSX_KEYS, f"{source}: fsx")
        terraform = _optional_text(fsx_data.get("from_terraform"))
        cloudformation = _optional_text(fsx_data.get("from_cloudformation"))
        fsx = FsxSettings(
            deployment_type=_upper(fsx_data.get("deployment_type")),
            storage_type=_upper(fsx_data.get("storage_type")),
            storage_capacity_gib=_optional_count(fsx_data, "storage_capacity_gib", source),
            per_unit_storage_throughput=_optional_count(
                fsx_data, "per_unit_storage_throughput", source
            ),
            efa_enabled=_optional_flag(fsx_data, "efa_enabled", source),
            data_compression_type=_upper(fsx_data.get("data_compression_type")),
            s3_association=_optional_flag(fsx_data, "s3_association", source),
            auto_export=_optional_flag(fsx_data, "auto_export", source),
            mount_options=None
            if fsx_data.get("mount_options") is None
            else tuple(o.strip() for o in str(fsx_data["mount_options"]).split(",") if o.strip()),
            stripe_count=_stripe(fsx_data, source),
            same_az=_optional_flag(fsx_data, "same_az", source),
            source=source,
        )
    measured_data = data.get("measured") or {}
    if not isinstance(measured_data, Mapping):
        raise InputError(f"{source}: measured must be a mapping")
    _known(measured_data, MEASURED_KEYS, f"{source}: measured")
    doctor = measured_data.get("doctor") or []
    doctor = [doctor] if isinstance(doctor, str) else doctor
    if not isinstance(doctor, list):
        raise InputError(f"{source}: measured.doctor must be a file name or a list of them")
    bandwidth = measured_data.get("t3_read_gbytes_per_s")
    posture = _optional_text(data.get("posture"))
    if posture not in (None, "eager", "lazy"):
        raise InputError(f"{source}: posture must be eager or lazy, got {posture!r}")
    t3_path = parse_t3_path(str(data.get("t3_path", "efa")), what=f"{source}: t3_path")
    t3_dir = _optional_text(data.get("t3_dir"))
    if t3_dir == "":
        raise InputError(f"{source}: t3_dir is empty", "give the KV folder, e.g. /fsx/kvcache")
    max_size = None
    if data.get("max_size") is not None:
        if t3_dir is None:
            raise InputError(
                f"{source}: max_size needs t3_dir", "name the folder it caps: t3_dir: /fsx/kvcache"
            )
        max_size = parse_bytes(str(data["max_size"]), what=f"{source}: max_size")
    tolerance = _number(data.get("tolerance", 0.2), f"{source}: tolerance")
    if tolerance >= 1:
        raise InputError(f"{source}: tolerance must be below 1 (0.2 = 20%), got {tolerance:g}")
    return PlanFile(
        workload=workload,
        fsx=fsx,
        t3_path=t3_path,
        io_threads=_optional_count(data, "io_threads", source),
        odirect=_optional_flag(data, "odirect", source),
        posture=posture,
        measured=Measured(
            bench=_optional_text(measured_data.get("bench")),
            doctor=tuple(str(d) for d in doctor),
            t3_read_gbytes_per_s=None
            if bandwidth is None
            else _number(bandwidth, f"{source}: measured.t3_read_gbytes_per_s"),
        ),
        tolerance=tolerance,
        terraform=terraform,
        cloudformation=cloudformation,
        t3_dir=t3_dir,
        max_size=max_size,
    )


def _known(data: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}", "allowed: " + ", ".join(keys))


def _upper(value: Any) -> str | None:
    """An FSx enum as the API spells it (``persistent_2`` -> ``PERSISTENT_2``)."""
    text = _optional_text(value)
    return None if text is None else text.upper()


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value).strip()


def _optional_count(data: Mapping[str, Any], key: str, source: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    return parse_count(str(value), what=f"{source}: {key}")


def _optional_flag(data: Mapping[str, Any], key: str, source: str) -> bool | None:
    value = data.get(key)
    return None if value is None else _flag(value, f"{source}: {key}")


def _stripe(data: Mapping[str, Any], source: str) -> int | None:
    value = data.get("stripe_count")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value == 0 or value < -1:
        raise InputError(f"{source}: fsx.stripe_count must be -1 (all OSTs) or a positive count")
    return value

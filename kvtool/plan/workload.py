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
    mean_idle_s: 120
    peak_to_mean: 4
    disaggregated: true

Values may be written as the flags take them (``contexts: 8k:0.5,128k:0.5``,
``shared_prefix: 40%``, ``sessions: 1k``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kvtool.errors import InputError
from kvtool.units import parse_count, parse_fraction


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


WORKLOAD_KEYS = tuple(f.name for f in fields(Workload))


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
    if "mean_idle_s" in data:
        values["mean_idle_s"] = _number(data["mean_idle_s"], what("mean_idle_s"))
    if "peak_to_mean" in data:
        ratio = _number(data["peak_to_mean"], what("peak_to_mean"))
        if ratio < 1:
            raise InputError(f"{what('peak_to_mean')} must be at least 1, got {ratio:g}")
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

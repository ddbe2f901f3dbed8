"""``kvtool engine replay`` and ``sweep`` inputs: the trace, the model's shape, the node, the
tier sizes as typed, and the engine's rules, into a ``ReplaySetup`` (``replay/setup.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.replay.setup import ReplaySetup
    from kvtool.replay.trace import StreamedTrace, Trace

TIERS = ("T1", "T2", "T3", "T4")


class ReplayInputs(NamedTuple):
    """A parsed trace (or one to read as it goes), the replay's setup, and for a sweep each
    tier's sizes in units."""

    trace: Trace | StreamedTrace
    setup: ReplaySetup
    sweep: dict[str, list[int | None]]


def resolve_replay(
    trace_path: Path,
    *,
    fmt: str = "auto",
    skip_bad: bool = False,
    sizes: Mapping[str, str | None],
    model: str | None = None,
    engine: str = "vllm",
    kv_dtype: str = "auto",
    tp: str | None = None,
    hardware: str | None = None,
    policy: str = "lru",
    posture: str = "lazy",
    t2_idle: str = "5m",
    t3_idle: str = "1h",
    block_bytes: str | None = None,
    real: bool = False,
    sweep: bool = False,
    stream: bool = False,
) -> ReplayInputs:
    """Everything a replay (``sweep`` False) or a sweep runs with. A sweep's sizes are
    comma-separated lists; the first of each sets the base configuration. ``stream``: the
    trace is read as it is replayed (a replay that only counts), not held."""
    from kvtool.inputs.trace import read_trace, stream_trace
    from kvtool.replay.run import ReplayConfig
    from kvtool.replay.setup import replay_setup, tier_units
    from kvtool.units import parse_bytes, parse_tier_size

    if hardware is not None and model is None:
        raise InputError("--hardware needs --model", "add --model NAME")
    idle_notes: list[str] = []
    t2_idle_s = idle_seconds(t2_idle, what="--t2-idle", notes=idle_notes)
    t3_idle_s = idle_seconds(t3_idle, what="--t3-idle", notes=idle_notes)
    if block_bytes is not None and (not real or model is not None):
        raise InputError("--block-bytes goes with --real and no --model", "drop --block-bytes")
    lists = {
        tier: [parse_tier_size(item, what=f"--{tier.lower()}") for item in text.split(",")]
        for tier, text in sizes.items()
        if text is not None
    }
    if not sweep:
        many = [tier for tier, items in lists.items() if len(items) > 1]
        if many:
            raise InputError(
                f"--{many[0].lower()} takes one size in a replay",
                "use kvtool engine sweep for several",
            )
    elif not lists:
        raise InputError("a sweep needs sizes to vary", "e.g. --t1 1M,3M,10M,30M,inf")
    shape = None
    if model is not None:
        from kvtool.inputs.shape import resolve_shape

        shape = resolve_shape(model, engine=engine, kv_dtype=kv_dtype, tp=tp)
    ignored: list[str] = []
    if model is None:
        from kvtool.inputs.shape import unused_shape_options

        ignored = unused_shape_options(
            engine=engine, kv_dtype=kv_dtype, tp=tp, why="blocks are counted in tokens"
        )
    node = None
    if hardware is not None:
        from kvtool.inputs.hardware import resolve_hardware

        node = resolve_hardware(hardware)
    forced = None
    if real and model is None:
        forced = parse_bytes(block_bytes or "64KiB", what="--block-bytes")
    trace: Trace | StreamedTrace
    if stream and not sweep and not real:
        trace = stream_trace(trace_path, fmt=fmt, skip_bad=skip_bad)
    else:
        trace = read_trace(trace_path, fmt=fmt, skip_bad=skip_bad)
    base = ReplayConfig(
        capacity={},
        block_units=trace.block_tokens,
        unit="tokens",
        policy=policy,
        posture=posture,
        t2_idle_s=t2_idle_s,
        t3_idle_s=t3_idle_s,
    )
    base.engine_config()  # the rules, validated before any work
    first = {tier: items[0] for tier, items in lists.items()}
    setup = replay_setup(
        trace, first, base, shape=shape, hardware=node, block_bytes=forced, ttft=not sweep
    )
    if real and setup.config.unit == "bytes":
        _fits_in_memory(setup.config.block_units, "--block-bytes" if forced else "--model's block")
    grid = {
        tier: [tier_units(trace, setup.config, tier, size) for size in items]
        for tier, items in lists.items()
    }
    setup.notes[:0] = [*idle_notes, *ignored]
    return ReplayInputs(trace, setup, grid if sweep else {})


def idle_seconds(text: str, *, what: str, notes: list[str]) -> float:
    """An idle time as typed: a duration with its unit (``30s``, ``10m``, ``2h``), or, for one
    release, a bare number of seconds (with a note asking for the unit)."""
    from kvtool.units import parse_duration

    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text, what=what)
    notes.append(f"{what} {text} is read as {text}s; give the unit (bare seconds go in the next"
                 " release)")  # fmt: skip
    return seconds


def _fits_in_memory(block_bytes: int, what: str) -> None:
    """InputError when one block (a replay with ``--real`` holds a few at once, and a pinned T2
    pool of them) is more than a quarter of the memory this machine has available now."""
    from kvtool.units import format_bytes_binary

    available = _available_memory()
    if available is not None and block_bytes * 4 > available:
        raise InputError(
            f"{what} of {format_bytes_binary(block_bytes)} is more than a quarter of the"
            f" {format_bytes_binary(available)} of memory available here: --real holds several"
            " blocks at once",
            "give a smaller --block-bytes (64KiB by default), or a model with smaller blocks",
        )


def _available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), else the
    free pages; None where neither can be read."""
    import os

    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None

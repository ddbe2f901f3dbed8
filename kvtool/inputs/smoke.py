"""``kvtool engine smoke``'s inputs: the scenario from the options, where it runs, and a check,
before anything is written, that it fits this machine's memory and the T3 folder's disk."""

from __future__ import annotations

import tempfile
from typing import Any, NamedTuple

from kvtool.engine.mediums import check_t4_url
from kvtool.engine.smoke import (
    MAX_SMOKE_CHUNKS,
    SmokeFootprint,
    SmokeOptions,
    SmokeTargets,
    smoke_footprint,
    smoke_options,
)
from kvtool.errors import InputError
from kvtool.inputs.shape import parse_chunk_tokens, resolve_shape, unused_shape_options
from kvtool.probe.host import Host
from kvtool.probe.parse import parse_meminfo_available_bytes
from kvtool.units import format_bytes_binary, parse_count

MAX_IO_THREADS = 1024
DEFAULT_MODEL, DEFAULT_SESSIONS, DEFAULT_CHUNKS = "llama-3.1-8b", "4", "4"


class SmokeInputs(NamedTuple):
    """The scenario (None for ``--phase read``: the manifest has it), its targets, notes, and
    why T3 cannot take the scenario's writes (None: it can, as far as its free space says)."""

    options: SmokeOptions | None
    targets: SmokeTargets
    notes: list[str]
    t3_fault: str | None = None


def parse_io_threads(text: str) -> int:
    """``--io-threads``: 1 to 1,024 threads reading T3 and T4 folders in parallel."""
    threads = parse_count(text, what="--io-threads")
    if not 1 <= threads <= MAX_IO_THREADS:
        raise InputError(
            f"--io-threads {threads:,} is out of range",
            f"give 1 to {MAX_IO_THREADS:,} (32 is LMCache's and kvtool's default)",
        )
    return threads


ROOM_FIX = "give fewer --sessions or --chunks, or a smaller --chunk-tokens"


def check_room(footprint: SmokeFootprint, *, memory_available: int | None) -> None:
    """InputError, before anything is written, when the scenario cannot fit: more unique
    chunks than a smoke needs, more memory than the host has available (unknown: None, not
    checked). T3's disk is the tier's own finding (``t3_shortfall``), not bad input."""
    if footprint.unique_chunks > MAX_SMOKE_CHUNKS:
        raise InputError(
            f"--sessions x --chunks makes {footprint.unique_chunks:,} unique chunks: a smoke"
            f" test takes at most {MAX_SMOKE_CHUNKS:,}",
            f"{ROOM_FIX}; kvtool engine replay sizes tiers at scale",
        )
    if memory_available is not None and footprint.memory_bytes > memory_available:
        raise InputError(
            f"this smoke needs about {format_bytes_binary(footprint.memory_bytes)} of host"
            f" memory (T1 and T2 hold {footprint.unique_chunks:,} unique chunks); only"
            f" {format_bytes_binary(memory_available)} is available",
            ROOM_FIX,
        )


def t3_shortfall(footprint: SmokeFootprint, *, disk_free: int | None, disk: str) -> str | None:
    """Why T3 (``disk``) cannot take the scenario's writes, or None: less free than it may
    write (an unknown free space, None, is not checked)."""
    if disk_free is None or footprint.disk_bytes <= disk_free:
        return None
    return (
        f"this smoke may write about {format_bytes_binary(footprint.disk_bytes)} to {disk};"
        f" only {format_bytes_binary(disk_free)} is free there ({ROOM_FIX}, or point --t3-dir"
        " at a larger folder)"
    )


def resolve_smoke(
    *,
    model: str,
    engine: str,
    kv_dtype: str,
    tp: str | None,
    chunk_tokens: str,
    sessions: str,
    chunks: str,
    posture: str,
    policy: str,
    io_threads: str,
    targets: SmokeTargets,
    torch: Any,
    host: Host,
) -> SmokeInputs:
    """The smoke's options and targets, or InputError naming the option: a bad value, or a
    scenario bigger than the host memory available. Less disk free where T3 goes than the
    scenario may write is T3's finding (``t3_fault``: a FAIL, exit 1), not bad input."""
    threads = parse_io_threads(io_threads)
    targets = targets._replace(io_threads=threads)
    if targets.t4_url is not None:
        check_t4_url(targets.t4_url)
    if targets.phase == "read":  # the shape comes from the manifest the write phase left
        notes = unused_shape_options(
            engine=engine, kv_dtype=kv_dtype, tp=tp, chunk_tokens=chunk_tokens,
            without="with --phase read", why="the manifest written by --phase write has the shape",
        )  # fmt: skip
        if model != DEFAULT_MODEL:
            notes.append("--model has no effect with --phase read (the manifest names it)")
        for name, value, default in (
            ("--sessions", sessions, DEFAULT_SESSIONS),
            ("--chunks", chunks, DEFAULT_CHUNKS),
        ):
            if value != default:
                parse_count(value, what=name)
                notes.append(f"{name} has no effect with --phase read (the manifest has it)")
        return SmokeInputs(None, targets, notes)
    options = smoke_options(
        resolve_shape(model, engine=engine, kv_dtype=kv_dtype, tp=tp),
        chunk_tokens=parse_chunk_tokens(chunk_tokens),
        sessions=parse_count(sessions, what="--sessions"),
        chunks_per_session=parse_count(chunks, what="--chunks"),
        posture=posture,
        policy=policy,
        io_threads=threads,
    )
    cuda = torch is not None and bool(torch.cuda.is_available())
    footprint = smoke_footprint(options, t1_on_gpu=cuda, t4_beside_t3=targets.t4_url is None)
    meminfo = host.read("proc_meminfo", "/proc/meminfo")
    where = str(targets.t3_dir) if targets.t3_dir is not None else tempfile.gettempdir()
    free = host.path_info("smoke_disk", where).get("free_bytes")
    check_room(
        footprint, memory_available=parse_meminfo_available_bytes(meminfo) if meminfo else None
    )
    fault = t3_shortfall(
        footprint,
        disk_free=free if isinstance(free, int) else None,
        disk=where if targets.t3_dir is not None else f"{where} (the temporary folder)",
    )
    return SmokeInputs(options, targets, [], fault)


__all__ = [
    "DEFAULT_CHUNKS",
    "DEFAULT_MODEL",
    "DEFAULT_SESSIONS",
    "MAX_IO_THREADS",
    "SmokeInputs",
    "parse_io_threads",
    "resolve_smoke",
]

"""``kvtool engine replay --real``: a (small) trace replayed with real mediums, moving real
bytes through T1 -> T2 -> T3 -> T4 and checking every hit.

The replay is the same (``replay.run``); each request's moves are carried out by an ``Engine``
over memory, a T3 folder and a T4 folder. Block ids become hex keys (BLAKE2b-256 of the id, so
nothing but a hex digest names a file), block contents are a function of the key
(``engine.smoke.payload``), and after each request every block of its cached prefix is read back
from T1 and compared with what was written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.engine import Engine
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import Medium
from kvtool.engine.records import Move
from kvtool.engine.smoke import payload
from kvtool.errors import InputError
from kvtool.replay.run import ReplayConfig, ReplayResult, TtftModel, replay
from kvtool.replay.trace import Request, Trace
from kvtool.scratch import Scratch


class RealStats(NamedTuple):
    """What moving real bytes found: per tier bytes and seconds, the blocks checked, any that
    differed, the mediums' faults (their count and the first messages), and, checked at the
    end, every (block, tier) the index claims that the tier's medium does not hold."""

    io: dict[str, dict[str, float]]
    checked: int
    mismatched: int
    faults: list[str]
    mediums: dict[str, str]
    fault_count: int = 0
    index_mismatches: int = 0

    @property
    def ok(self) -> bool:
        """Every hit read back equal and the index agrees with the media."""
        return self.mismatched == 0 and self.index_mismatches == 0


def hex_key(block: str) -> str:
    """The chunk key of a trace's block id (any string JSON can hold: a lone surrogate such
    as ``"\\udc80"`` is hashed as its code point, not an UnicodeEncodeError)."""
    return hashlib.blake2b(block.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


def real_replay(
    requests: Sequence[Request],
    block_tokens: int,
    config: ReplayConfig,
    *,
    block_bytes: int,
    mediums: dict[str, Medium],
    ttft: TtftModel | None = None,
) -> tuple[ReplayResult, RealStats]:
    """Replay with real bytes; ``config``'s units must be bytes of ``block_bytes`` blocks."""
    keyed = [r._replace(blocks=tuple(hex_key(str(b)) for b in r.blocks)) for r in requests]
    managers: list[Manager] = []
    state: dict[str, Engine] = {}
    checked = mismatched = 0

    def engine_now() -> Engine:
        engine = state.get("engine")
        if engine is None:
            engine = state["engine"] = Engine(
                managers[0], mediums, chunk_bytes=block_bytes, chunk_tokens=block_tokens
            )
        return engine

    def carry(moves: list[Move], hit_tiers: list[str], blocks: tuple[str, ...]) -> None:
        nonlocal checked, mismatched
        engine = engine_now()
        puts = {m.key: payload(m.key, block_bytes) for m in moves if m.kind == "put"}
        failed = engine.execute(moves, puts)
        for key in blocks[: len(hit_tiers)]:
            if key in failed or engine.manager.where(key) != "T1":
                continue
            checked += 1
            try:
                data = engine.mediums["T1"].get(key)
            except CorruptChunk:  # T1's checksum caught it and deleted it: the index follows
                engine.manager.corrupt(key, "T1")
                data = None
            if data != payload(key, block_bytes):
                mismatched += 1

    result = replay(keyed, block_tokens, config, ttft=ttft, carry=carry, manager_out=managers)
    engine = state.get("engine")
    io: dict[str, dict[str, float]] = {}
    faults: list[str] = []
    fault_count = disagree = 0
    if engine is not None:
        for chunk in list(engine.manager.chunks.values()):
            for tier in chunk.tiers:
                medium = mediums.get(tier)
                if medium is None or not medium.contains(chunk.key):
                    disagree += 1
        for tier, t in engine.io.items():
            if t.read_bytes or t.write_bytes:
                spent = t.read_s + t.write_s
                io[tier] = {
                    "read_bytes": t.read_bytes,
                    "write_bytes": t.write_bytes,
                    "seconds": spent,
                    "bytes_per_s": (t.read_bytes + t.write_bytes) / spent if spent else 0.0,
                }
        faults = engine.faults.summary()
        fault_count = len(engine.faults)
        engine.close()
    described = {tier: m.description for tier, m in mediums.items()}
    return result, RealStats(
        io, checked, mismatched, faults, described, fault_count, index_mismatches=disagree
    )


def replay_in_folder(
    trace: Trace, config: ReplayConfig, folder: Path, *, torch: Any, no_gpu: str | None = None
) -> tuple[ReplayResult, RealStats]:
    """``--real DIR``: the replay with T1 and T2 in memory and T3 and T4 as folders in a
    scratch folder under ``folder``, removed afterwards. InputError when ``folder`` is not a
    folder or lacks the room every block may need (in T3 and in T4)."""
    import shutil

    from kvtool.engine.mediums import FolderMedium, local_mediums, pool_slots

    if not folder.is_dir():
        raise InputError(
            f"--real {folder} is not a folder", "pass a folder on T3, e.g. /fsx/kvtool"
        )
    unique = len({b for r in trace.requests for b in r.blocks})
    need = unique * (config.block_units + 4096) * 2  # every block may land in T3 and in T4
    free = shutil.disk_usage(folder).free
    if need > free * 0.9:
        raise InputError(
            f"--real needs up to {need / 2**30:,.1f} GiB in {folder}; {free / 2**30:,.1f} GiB free",
            "replay a smaller trace, or lower --block-bytes",
        )
    with Scratch() as cleanup:  # removed however this ends: errors, SIGINT, SIGTERM, SIGHUP
        root = cleanup.folder(folder, "kvtool-replay-")
        batch = max((len(r.blocks) for r in trace.requests), default=1)
        slots = pool_slots(config.capacity, config.block_units, batch=batch, most=unique)
        mediums = local_mediums(
            torch, chunk_bytes=config.block_units, t2_slots=slots, no_gpu=no_gpu
        )
        mediums["T3"] = FolderMedium("T3", root / "t3")
        mediums["T4"] = FolderMedium("T4", root / "t4")
        return real_replay(
            trace.requests, trace.block_tokens, config, block_bytes=config.block_units,
            mediums=mediums,
        )  # fmt: skip

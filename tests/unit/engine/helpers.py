"""What the engine's medium and engine tests share: chunk keys and payloads, a T3 that is
always full, a small eager engine, and an S3 client for moto's server."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from kvtool.engine.chunkfile import decode
from kvtool.engine.engine import Engine
from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import FolderMedium, MemoryMedium, S3Medium
from kvtool.engine.records import EngineConfig

FP = model_fingerprint("m", "bf16", "tp1")
KEYS = chain_keys(list(range(4 * 64)), 4, FP)


def payload(key: str, n: int = 64 * 1024) -> bytes:
    return (key.encode() * (n // 64 + 1))[:n]


def all_files_whole(root: Path) -> int:
    """Every visible chunk file decodes; returns how many there are."""
    files = list((root / "chunks").glob("*/*/*.kv"))
    for path in files:
        decode(path.stem, path.read_bytes())
    return len(files)


class FullFolder(FolderMedium):
    """T3 at the medium boundary when the file system is full: every write fails ENOSPC."""

    def _write(self, folder: int, tmp: str, buffer: object, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def small_engine(
    t3: FolderMedium | S3Medium, *, t4: FolderMedium | S3Medium | None = None
) -> Engine:
    config = EngineConfig(
        capacity_bytes={"T1": 4 * 65536, "T2": 8 * 65536, "T3": None, "T4": None if t4 else 0},
        posture="eager",
        t3_idle_s=10.0,
    )
    mediums = {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"), "T3": t3}
    if t4 is not None:
        mediums["T4"] = t4
    clock = [0.0]
    return Engine(Manager(config, lambda: clock[0]), mediums, chunk_bytes=65536, chunk_tokens=4)


def s3_client() -> object:
    """A client for the moto server the ``s3`` fixture starts (AWS_ENDPOINT_URL)."""
    from kvtool.probe.host import s3_client as make

    return make(connect_timeout_s=0.5)

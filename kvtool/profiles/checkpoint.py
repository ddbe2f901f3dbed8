"""A local checkpoint's exact weight bytes, from its safetensors headers (as hf-mem reads them):
``model.safetensors.index.json``'s ``metadata.total_size`` when there is one, else each
``*.safetensors`` file's header (an 8-byte little-endian length, then that many bytes of JSON
naming every tensor's ``data_offsets``). Only headers are read, never the weights. A file that
is not what it says is passed over, and the arithmetic from the config stays."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import NamedTuple

MAX_HEADER = 100 * 2**20  # safetensors caps its header at 100 MB
MAX_SHARDS = 4096


class CheckpointBytes(NamedTuple):
    """The weights' bytes and where they were read from, in words."""

    nbytes: int
    source: str


def _index_total(folder: Path) -> int | None:
    index = folder / "model.safetensors.index.json"
    try:
        if not index.is_file() or index.stat().st_size > MAX_HEADER:
            return None
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
    except (OSError, ValueError, AttributeError):
        return None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None


def _header_bytes(path: Path) -> int | None:
    """The bytes of every tensor one ``.safetensors`` file holds, from its header alone."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                return None
            (length,) = struct.unpack("<Q", head)
            if not 2 <= length <= MAX_HEADER:
                return None
            raw = f.read(length)
            if len(raw) != length:
                return None  # cut short
            header = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    total = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and o >= 0 for o in offsets)
                or offsets[1] < offsets[0]):  # fmt: skip
            return None
        total += offsets[1] - offsets[0]
    return total


def checkpoint_bytes(folder: Path) -> CheckpointBytes | None:
    """The exact weight bytes of the checkpoint in ``folder``, or None where it holds none
    (a bare config.json) or a header is not one."""
    total = _index_total(folder)
    if total is not None:
        return CheckpointBytes(total, "model.safetensors.index.json metadata.total_size")
    shards = sorted(folder.glob("*.safetensors"))[: MAX_SHARDS + 1]
    if not shards or len(shards) > MAX_SHARDS:
        return None
    sizes = [_header_bytes(shard) for shard in shards]
    if any(size is None for size in sizes):
        return None
    count = len(shards)
    if not sum(s for s in sizes if s is not None):
        return None  # no tensor at all: not a checkpoint
    return CheckpointBytes(
        sum(s for s in sizes if s is not None),
        f"the headers of {count} safetensors file{'s' if count > 1 else ''}",
    )

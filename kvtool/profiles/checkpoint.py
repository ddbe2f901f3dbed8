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
        return _total_size(index.read_text())
    except OSError:
        return None


def _total_size(text: str) -> int | None:
    """``metadata.total_size`` of an index's text, or None."""
    try:
        total = json.loads(text).get("metadata", {}).get("total_size")
    except (ValueError, AttributeError):
        return None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None


def _header_bytes(path: Path) -> int | None:
    """The bytes of every tensor one ``.safetensors`` file holds, from its header alone."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                return None
            length = _header_length(head)
            if length is None:
                return None
            raw = f.read(length)
    except OSError:
        return None
    if len(raw) != length:
        return None  # cut short
    return _tensor_bytes(raw)


def _header_length(head: bytes) -> int | None:
    (length,) = struct.unpack("<Q", head)
    return length if 2 <= length <= MAX_HEADER else None


def _tensor_bytes(raw: bytes) -> int | None:
    """The bytes the tensors a safetensors header names take (its ``data_offsets``); None
    for a header that is not one."""
    try:
        header = json.loads(raw)
    except ValueError:
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


HUB_DEADLINE_S = 10.0  # the whole lookup, every request included


def hub_checkpoint_bytes(
    repo_id: str, *, endpoint: str, token: str | None = None, deadline_s: float = HUB_DEADLINE_S
) -> tuple[CheckpointBytes | None, str]:
    """A Hub repository's exact weight bytes, as ``checkpoint_bytes`` reads a folder but over
    HTTP, headers only: ``model.safetensors.index.json``'s ``metadata.total_size``, else the
    header of ``model.safetensors`` (two range requests: its length, then its JSON). Same
    origin only (``http.get_bytes``: the Hub hands LFS files to a CDN on another origin, which
    is not followed), within one deadline. ``(None, why)`` when neither answers."""
    import time
    from urllib.parse import quote

    from kvtool.http import FetchError, get_bytes

    base = f"{endpoint.rstrip('/')}/{quote(repo_id, safe='/')}/resolve/main"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    end = time.monotonic() + deadline_s

    def get(name: str, byte_range: tuple[int, int] | None = None) -> bytes:
        left = end - time.monotonic()
        if left <= 0:
            raise FetchError(f"no whole answer within {deadline_s:g} s")
        return get_bytes(f"{base}/{name}", deadline_s=left, headers=headers,
                         max_bytes=MAX_HEADER, byte_range=byte_range)  # fmt: skip

    try:
        total = _total_size(get("model.safetensors.index.json").decode("utf-8", "replace"))
        if total is not None:
            return CheckpointBytes(total, "the Hub's model.safetensors.index.json"
                                   " metadata.total_size"), ""  # fmt: skip
        why = "its model.safetensors.index.json has no metadata.total_size"
    except FetchError as exc:
        why = f"model.safetensors.index.json: {exc}"
    try:
        length = _header_length(get("model.safetensors", (0, 7)).ljust(8, b"\0")[:8])
        if length is None:
            return None, f"{why}; model.safetensors: not a safetensors header"
        raw = get("model.safetensors", (8, 8 + length - 1))
        nbytes = _tensor_bytes(raw) if len(raw) == length else None
    except FetchError as exc:
        return None, f"{why}; model.safetensors: {exc}"
    if not nbytes:
        return None, f"{why}; model.safetensors: not a safetensors header"
    return CheckpointBytes(nbytes, "the header of the Hub's model.safetensors"), ""

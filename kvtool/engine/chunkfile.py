"""The on-disk (and in-S3) form of a chunk: a 4 KiB header, then the payload. Pure.

Header, little-endian: magic ``KVTOOLKV`` (8 bytes), version (u16), flags (u16), header size
(u32), payload length (u64), the key (32 raw bytes), the payload's CRC-32 (u32), the header's
own CRC-32 over all 4,096 bytes with this field zero (u32), then zeros. The 4 KiB header keeps
the payload aligned for O_DIRECT; files are padded to a 4 KiB multiple, S3 objects are not.

CRC-32 (zlib, about 2 GB/s here) detects every single-bit flip and every burst up to 32 bits;
the length catches truncation; covering the header's padding catches flips anywhere. It is an
error check, not a signature: T3 and T4 are trusted storage.

Paths fan out by the key's first two bytes (``ab/cd/<key>.kv``: 65,536 folders), so no folder
comes near the 100K files AWS advises as the most per FSx for Lustre directory.
"""

from __future__ import annotations

import struct
import zlib

from kvtool.engine.keys import is_key

MAGIC = b"KVTOOLKV"
VERSION = 1
HEADER_BYTES = 4096
ALIGN = 4096
_FIXED = struct.Struct("<8sHHIQ32sII")  # magic, version, flags, header size, length, key, crcs


class CorruptChunk(Exception):
    """A chunk's bytes failed a check: it must never be served."""


def aligned(n: int) -> int:
    """``n`` rounded up to the 4 KiB O_DIRECT alignment."""
    return -(-n // ALIGN) * ALIGN


def check_key(key: str) -> str:
    """``key`` when it is a hex digest; ValueError otherwise (nothing else becomes a path)."""
    if not is_key(key):
        raise ValueError(f"not a chunk key: {key[:80]!r}")
    return key


def relative_path(key: str) -> str:
    """``ab/cd/<key>.kv`` for a hex key."""
    check_key(key)
    return f"{key[:2]}/{key[2:4]}/{key}.kv"


def header(key: str, payload: bytes | memoryview) -> bytes:
    """The 4 KiB header for ``payload`` stored under ``key``."""
    check_key(key)
    crc = zlib.crc32(payload)
    fixed = _FIXED.pack(MAGIC, VERSION, 0, HEADER_BYTES, len(payload), bytes.fromhex(key), crc, 0)
    block = fixed + bytes(HEADER_BYTES - len(fixed))
    own = zlib.crc32(block)
    return fixed[:-4] + struct.pack("<I", own) + bytes(HEADER_BYTES - len(fixed))


def _checked_header(key: str, view: memoryview) -> tuple[int, int]:
    """The payload length and checksum of the header at the start of ``view``; CorruptChunk
    for a header that is short, of another format, damaged, or of another key."""
    if len(view) < HEADER_BYTES:
        raise CorruptChunk(f"{len(view)} bytes: shorter than the header")
    magic, version, _flags, size, length, raw_key, crc, own = _FIXED.unpack_from(view)
    if magic != MAGIC:
        raise CorruptChunk("bad magic")
    if version != VERSION or size != HEADER_BYTES:
        raise CorruptChunk(f"unknown version {version} or header size {size}")
    block = bytearray(view[:HEADER_BYTES])
    block[_FIXED.size - 4 : _FIXED.size] = bytes(4)
    if zlib.crc32(block) != own:
        raise CorruptChunk("header checksum mismatch")
    if raw_key.hex() != key:
        raise CorruptChunk("the header names another key")
    return int(length), int(crc)


def stored_length(key: str, head: bytes | memoryview) -> int:
    """From a stored chunk's first 4 KiB alone: the bytes the whole chunk takes (header and
    payload, unpadded), so a reader bounds its read before reading; CorruptChunk for a header
    that is not this key's."""
    return HEADER_BYTES + _checked_header(key, memoryview(head))[0]


def decode(key: str, data: bytes | memoryview) -> memoryview:
    """The payload of a stored chunk; CorruptChunk for a wrong magic, version, key, length or
    checksum, or a truncated file. ``data`` may carry padding after the payload."""
    view = memoryview(data)
    length, crc = _checked_header(key, view)
    if len(view) < HEADER_BYTES + length:
        raise CorruptChunk(f"truncated: {len(view) - HEADER_BYTES} of {length} payload bytes")
    payload = view[HEADER_BYTES : HEADER_BYTES + length]
    if zlib.crc32(payload) != crc:
        raise CorruptChunk("payload checksum mismatch")
    if any(view[HEADER_BYTES + length :]):
        raise CorruptChunk("non-zero bytes after the payload")
    return payload

"""Chunk keys: a chained content hash, so equal prefixes share keys across sessions and nodes.

key(chunk i) = BLAKE2b-256(key(chunk i-1), the chunk's token ids, the model fingerprint), as
lowercase hex. The fingerprint covers what changes the bytes of a KV chunk: the model, the KV
dtype and the parallel layout (tp rank share, chunk size). Keys are hex digests only, so a key
can never name a path outside the engine's folder or prefix (``is_key`` checks it). Pure.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Sequence

KEY_HEX = 64
_KEY = re.compile(r"[0-9a-f]{64}")  # the whole text (fullmatch): "$" lets a newline through


def is_key(text: str) -> bool:
    """True for a 64-digit lowercase hex digest, the only shape a chunk key has."""
    return bool(_KEY.fullmatch(text))


def model_fingerprint(model: str, kv_dtype: str, layout: str) -> str:
    """A digest of what a KV chunk's bytes depend on besides its tokens: the model, the KV
    dtype and the parallel layout (e.g. ``tp8-rank0-chunk256``)."""
    text = "\x00".join(("kvtool-kv-1", model, kv_dtype, layout)).encode()
    return hashlib.blake2b(text, digest_size=32).hexdigest()


def chunk_key(parent: str | None, token_ids: Sequence[int], fingerprint: str) -> str:
    """The key of one chunk after ``parent`` (None for a sequence's first chunk)."""
    h = hashlib.blake2b(digest_size=32)
    h.update(bytes.fromhex(fingerprint))
    h.update(bytes.fromhex(parent) if parent else b"\x00" * 32)
    h.update(struct.pack(f"<{len(token_ids)}q", *token_ids))
    return h.hexdigest()


def chain_keys(token_ids: Sequence[int], chunk_tokens: int, fingerprint: str) -> list[str]:
    """Keys of the full chunks of ``token_ids`` (a partial last chunk has no key: it is
    recomputed, as LMCache and vLLM's offloading treat a block that is not full)."""
    keys: list[str] = []
    parent: str | None = None
    for start in range(0, len(token_ids) - chunk_tokens + 1, chunk_tokens):
        parent = chunk_key(parent, token_ids[start : start + chunk_tokens], fingerprint)
        keys.append(parent)
    return keys

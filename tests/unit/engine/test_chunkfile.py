"""The chunk file format: every corruption is caught, and no key can name a path outside the
engine's folder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.engine.chunkfile import (
    HEADER_BYTES,
    CorruptChunk,
    aligned,
    decode,
    header,
    relative_path,
)
from kvtool.engine.keys import chunk_key, is_key, model_fingerprint

FP = model_fingerprint("llama-3.1-8b", "bf16", "vllm-tp1-chunk4")


KEY = chunk_key(None, [1, 2, 3, 4], FP)


def _stored(payload: bytes, pad: bool = True) -> bytes:
    data = header(KEY, payload) + payload
    return data + bytes(aligned(len(data)) - len(data)) if pad else data


def test_round_trip_with_and_without_padding() -> None:
    payload = bytes(range(256)) * 40
    assert bytes(decode(KEY, _stored(payload))) == payload
    assert bytes(decode(KEY, _stored(payload, pad=False))) == payload
    assert len(header(KEY, payload)) == HEADER_BYTES


@settings(max_examples=300)
@given(st.data())
def test_every_single_bit_flip_is_caught(data: st.DataObject) -> None:
    stored = bytearray(_stored(bytes(range(256)) * 20))
    position = data.draw(st.integers(min_value=0, max_value=len(stored) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    stored[position] ^= 1 << bit
    with pytest.raises(CorruptChunk):
        decode(KEY, bytes(stored))


@given(st.integers(min_value=0, max_value=HEADER_BYTES + 5119))
def test_every_truncation_is_caught(length: int) -> None:
    stored = _stored(bytes(range(256)) * 20, pad=False)  # 5,120 payload bytes
    with pytest.raises(CorruptChunk):
        decode(KEY, stored[:length])


def test_a_file_holding_another_key_is_refused() -> None:
    other = chunk_key(None, [9, 9, 9, 9], FP)
    with pytest.raises(CorruptChunk, match="another key"):
        decode(other, _stored(b"x" * 100))


@given(st.text(max_size=80))
def test_nothing_but_a_hex_digest_becomes_a_path(text: str) -> None:
    if is_key(text):
        assert relative_path(text) == f"{text[:2]}/{text[2:4]}/{text}.kv"
    else:
        with pytest.raises(ValueError, match="not a chunk key"):
            relative_path(text)


@pytest.mark.parametrize("bad", ["../" * 10 + "etc/passwd", "/etc/passwd", "A" * 64, KEY + "/x"])
def test_traversal_attempts_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a chunk key"):
        header(bad, b"x")

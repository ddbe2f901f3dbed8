"""Chunk keys and the chunk file format: shared prefixes share keys, every corruption is caught,
and no key can name a path outside the engine's folder."""

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
from kvtool.engine.keys import chain_keys, chunk_key, is_key, model_fingerprint

FP = model_fingerprint("llama-3.1-8b", "bf16", "vllm-tp1-chunk4")
tokens = st.lists(st.integers(min_value=0, max_value=2**31), min_size=0, max_size=40)


@given(tokens, tokens)
def test_equal_prefixes_share_keys_and_different_ones_do_not(a: list[int], b: list[int]) -> None:
    whole = a[: len(a) // 4 * 4]
    keys = chain_keys(whole, 4, FP)
    assert chain_keys(whole + b, 4, FP)[: len(keys)] == keys
    assert all(is_key(k) for k in keys)
    assert len(keys) == len(whole) // 4


def test_a_changed_token_changes_its_chunk_and_every_later_one() -> None:
    base = list(range(16))
    changed = base.copy()
    changed[5] = 999
    a, b = chain_keys(base, 4, FP), chain_keys(changed, 4, FP)
    assert a[0] == b[0]
    assert all(x != y for x, y in zip(a[1:], b[1:], strict=True))


def test_the_fingerprint_separates_models_dtypes_and_layouts() -> None:
    other = [
        model_fingerprint("llama-3.1-70b", "bf16", "vllm-tp1-chunk4"),
        model_fingerprint("llama-3.1-8b", "fp8", "vllm-tp1-chunk4"),
        model_fingerprint("llama-3.1-8b", "bf16", "vllm-tp8-chunk4"),
    ]
    keys = {chunk_key(None, [1, 2, 3, 4], fp) for fp in [FP, *other]}
    assert len(keys) == 4


def test_a_partial_last_chunk_has_no_key() -> None:
    assert len(chain_keys(list(range(10)), 4, FP)) == 2


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

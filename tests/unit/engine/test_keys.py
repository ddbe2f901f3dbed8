"""Chunk keys: shared prefixes share keys, a changed token changes its chunk and every later
one, and the fingerprint separates models, dtypes and layouts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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


def test_a_key_with_a_trailing_newline_is_not_a_key() -> None:
    """``^...$`` matched "<64 hex>\\n": a newline could reach a path."""
    key = chain_keys(list(range(4)), 4, FP)[0]
    assert is_key(key)
    assert not is_key(key + "\n")
    assert not is_key("\n" + key)

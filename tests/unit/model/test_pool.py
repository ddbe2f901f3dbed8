"""model/pool.py: a fixed KV budget in vLLM's terms (v1/core/kv_cache_utils.py in 0.32.0);
the same figures against vLLM's own engine are in tests/cli/test_kv_budget.py."""

from __future__ import annotations

from kvtool.inputs.shape import resolve_shape

BLOCK = 16 * 131_072  # Llama 3.1 8B: 16 tokens x 32 layers x 2 x 8 KV heads x 128 x 2 B


def test_blocks_are_the_budget_floored_and_tokens_are_vllms_capacity() -> None:
    pool = resolve_shape("llama-3.1-8b").pool(32_000, 20 * 2**30)
    assert (pool.bytes_per_block, pool.num_blocks, pool.blocks_per_request) == (
        BLOCK, 10_240, 2_000
    )  # fmt: skip
    assert pool.max_concurrency == 5.12
    assert pool.tokens == 163_840  # int(5.12 x 32,000)
    assert pool.starts


def test_it_starts_only_where_one_request_fits_beside_the_null_block() -> None:
    shape = resolve_shape("llama-3.1-8b")
    fits = shape.pool(1_600, 101 * BLOCK)  # 100 blocks a request, and the null block
    assert fits.starts
    short = shape.pool(1_600, 101 * BLOCK - 1)
    assert not short.starts
    assert short.longest_fit == 99 * 16  # 99 blocks beside the null block


def test_the_longest_fit_is_vllms_binary_search() -> None:
    pool = resolve_shape("llama-3.1-8b").pool(128_000, 10**9)
    assert not pool.starts
    assert pool.longest_fit == 7_600  # (10^9 - one block) // BLOCK = 475 blocks of 16
    assert pool.num_blocks == 476

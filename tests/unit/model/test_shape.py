"""KvShape: one record for a model's KV under an engine, a dtype and a tp, and the bytes every
command takes from it (checked against the AWS article's figures and size_kv itself)."""

from __future__ import annotations

from kvtool.inputs.shape import resolve_shape
from kvtool.model.kv import size_kv


def test_llama_405b_matches_the_briefs_per_token_figure() -> None:
    shape = resolve_shape("llama-3.1-405b", engine="formula")
    assert shape.size(1).kv_bytes_per_token == 516_096  # 2 x 126 x 8 x 128 x 2 B


def test_r1_chunk_and_block_bytes() -> None:
    shape = resolve_shape("deepseek-r1", engine="vllm", tp=8)
    # MLA: (512 + 64) x 61 layers x 2 B = 70,272 B per token on every rank (the latent is
    # replicated), so one rank's 256-token chunk is 256 x 70,272 and a block is 8 of them
    assert shape.chunk_bytes(256) == 256 * 70_272
    assert shape.block_bytes(256) == 8 * 256 * 70_272


def test_fp8_halves_a_bf16_models_bytes() -> None:
    bf16 = resolve_shape("llama-3.1-70b", tp=8)
    fp8 = resolve_shape("llama-3.1-70b", kv_dtype="fp8", tp=8)
    assert fp8.chunk_bytes(256) * 2 == bf16.chunk_bytes(256)
    assert fp8.block_bytes(512) * 2 == bf16.block_bytes(512)
    assert fp8.session_bytes(131_072) * 2 == bf16.session_bytes(131_072)


def test_session_bytes_is_size_kv_padded_to_blocks() -> None:
    shape = resolve_shape("llama-3.1-8b")
    expected = size_kv(
        shape.spec, rules=shape.rules, fmt=shape.fmt, ctx_tokens=1000, sessions=1
    ).kv_bytes_per_session
    assert shape.session_bytes(1000) == expected
    assert shape.session_bytes(1000) > shape.block_bytes(1000)  # 1,008 tokens in 16-token blocks


def test_serving_tp_prices_one_copy_for_engines_that_do_not_shard() -> None:
    shape = resolve_shape("llama-3.1-70b", engine="formula")
    assert not shape.tp_given
    assert shape.serving_tp(8).tp == 1
    assert resolve_shape("llama-3.1-70b").serving_tp(8).tp == 8
    assert resolve_shape("llama-3.1-70b", tp="4").tp_given

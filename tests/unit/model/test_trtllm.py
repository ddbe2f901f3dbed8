"""``--engine trtllm`` against TensorRT-LLM 1.2.1's KV cache manager, row by row: bytes per
token and per block on one rank, each hybrid's per-request state, and the tokens and blocks of
the pool for 40 GiB left after the weights and the profiling run
(``tests/fixtures/engines/trtllm-1.2.1-kv.json``, written by ``record_trtllm_kv.py`` beside it,
which says how it was read). Every bundled model is sized or refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import ConfigError, InputError
from kvtool.model import trtllm
from kvtool.model.engines import ENGINES, get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv
from kvtool.profiles.resolve import resolve_model

ROOT = Path(__file__).parents[3]
RECORD = json.loads((ROOT / "tests/fixtures/engines/trtllm-1.2.1-kv.json").read_text())
RULES = ENGINES["trtllm"]


def _row_id(row: dict[str, Any]) -> str:
    return f"{row['model']}-tp{row['tp']}-{row['kv_dtype']}"


def test_the_recording_covers_twenty_models_of_every_kind() -> None:
    models = {row["model"] for row in RECORD["rows"]}
    assert len(models) >= 20
    kinds = {resolve_model(name).spec.model_type for name in models}
    # GQA, MLA, sliding windows kept whole, learned sinks, chunked attention, both hybrids
    assert {"llama", "deepseek_v3", "gemma3_text", "gpt_oss", "llama4_text"} <= kinds
    assert {"nemotron_h", "qwen3_next"} <= kinds
    assert {row["kv_dtype"] for row in RECORD["rows"]} == {"bf16", "fp8", "nvfp4"}


@pytest.mark.parametrize("row", RECORD["rows"], ids=_row_id)
def test_kvtool_allocates_what_tensorrt_llm_does(row: dict[str, Any]) -> None:
    spec = resolve_model(row["model"]).spec
    fmt = resolve_format(row["kv_dtype"], spec.dtype)
    tp = row["tp"]
    result = size_kv(spec, rules=RULES, fmt=fmt, ctx_tokens=1, sessions=1, tp=tp)
    token_groups = [g for g in result.groups if g.bytes_per_token]
    per_rank = sum(g.bytes_per_token for g in token_groups) // tp
    assert per_rank == row["bytes_per_token_per_rank"]
    assert result.block_size * per_rank == row["bytes_per_block_per_rank"]
    assert result.fixed_bytes_per_session // tp == row["state_bytes_per_request_per_rank"]
    per_token = trtllm.spec_per_token(spec.groups, fmt.name, tp)
    assert per_token == (row["bytes_per_token_per_rank"], row["estimate_bytes_per_token_per_rank"])
    pool = trtllm.pool(RECORD["free_bytes_per_rank"], per_token)
    assert (pool.max_tokens, pool.blocks, pool.exact) == (
        row["pool_tokens"], row["pool_blocks"], row["pool_exact"]
    )  # fmt: skip


@pytest.mark.parametrize("name", RECORD["refused"])
def test_a_model_tensorrt_llm_has_no_class_for_is_refused_by_name(name: str) -> None:
    spec = resolve_model(name).spec
    with pytest.raises(ConfigError, match=r"TensorRT-LLM 1\.2\.1") as caught:
        size_kv(spec, rules=RULES, fmt=resolve_format("auto", spec.dtype), ctx_tokens=8, sessions=1)
    text = str(caught.value)
    assert "has no model class for" in text or "not modelled" in text


def test_every_bundled_model_is_recorded_or_refused() -> None:
    """No bundled model falls through to another engine's answer."""
    bundled = {
        p.name for p in (ROOT / "profiles/models").iterdir() if (p / "config.json").is_file()
    }
    recorded = {row["model"] for row in RECORD["rows"]} | set(RECORD["refused"])
    for name in sorted(bundled - recorded):
        spec = resolve_model(name).spec
        with pytest.raises(ConfigError, match=r"under TensorRT-LLM 1\.2\.1"):
            size_kv(spec, rules=RULES, fmt=resolve_format("auto", spec.dtype), ctx_tokens=8,
                    sessions=1)  # fmt: skip


def test_nvfp4_is_estimated_at_two_bytes_an_element() -> None:
    """get_cache_size_per_token counts 1 byte for fp8 and 2 for everything else: an NVFP4
    cache's pool holds no more tokens than a bf16 one, though each token takes 0.28 of it."""
    spec = resolve_model("llama-3.1-8b").spec
    nvfp4 = trtllm.spec_per_token(spec.groups, "nvfp4")
    bf16 = trtllm.spec_per_token(spec.groups, "bf16")
    assert nvfp4 == (36_864, 131_072)
    assert bf16 == (131_072, 131_072)
    free = 40 * 1024**3
    assert trtllm.pool(free, nvfp4).max_tokens == trtllm.pool(free, bf16).max_tokens == 294_912


def test_kv_heads_round_up_and_the_estimate_rounds_down() -> None:
    """8 KV heads on 16 ranks: one whole head each (ceil), estimated at half a head (floor),
    so the pool is bounded by free memory when the manager is built, not the estimate."""
    per_token = trtllm.bytes_per_token(layers=126, kv_heads=8, head_dim=128, fmt_name="bf16", tp=16)
    assert per_token == (2 * 126 * 128 * 2, 2 * 126 * 64 * 2)
    assert not trtllm.pool(10 * 1024**3, per_token).exact
    dp = trtllm.bytes_per_token(
        layers=126, kv_heads=8, head_dim=128, fmt_name="bf16", tp=16, attention_dp=True
    )
    assert dp.actual == 2 * 126 * 8 * 128 * 2  # attention DP: every head on every rank


def test_max_tokens_caps_the_pool() -> None:
    per_token = trtllm.PerToken(131_072, 131_072)
    assert trtllm.pool(40 * 1024**3, per_token, max_tokens=1000) == (1000, 32, True)


def test_mamba_state_asserts_tp_divides_heads_and_channels() -> None:
    state = trtllm.mamba_state_bytes(
        layers=1, heads=64, head_dim=64, n_groups=8, d_state=128, d_conv=4, model_bytes=2,
        ssm_bytes=2, tp=2,
    )  # fmt: skip
    assert state == (64 * 64 + 2 * 8 * 128) // 2 * 3 * 2 + 32 * 64 * 128 * 2
    with pytest.raises(ValueError, match="tp 3"):
        trtllm.mamba_state_bytes(
            layers=1, heads=64, head_dim=64, n_groups=8, d_state=128, d_conv=4,
            model_bytes=2, ssm_bytes=2, tp=3,
        )  # fmt: skip


def test_sliding_layers_keep_every_token_and_say_so() -> None:
    spec = resolve_model("gemma-3-27b").spec
    result = size_kv(spec, rules=RULES, fmt=resolve_format("auto", spec.dtype),
                     ctx_tokens=32_768, sessions=1)  # fmt: skip
    assert all(g.tokens_held == 32_768 for g in result.groups)
    assert any("max_attention_window" in note for note in result.notes)


@pytest.mark.parametrize("dtype", ["int8", "fp8_e5m2", "fp8_per_token_head", "int4"])
def test_kv_dtypes_tensorrt_llm_does_not_keep_are_refused(dtype: str) -> None:
    spec = resolve_model("llama-3.1-8b").spec
    with pytest.raises(InputError, match=f"keeps no {dtype} KV cache"):
        size_kv(spec, rules=RULES, fmt=resolve_format(dtype, spec.dtype), ctx_tokens=8,
                sessions=1)  # fmt: skip


def test_block_tokens_must_be_a_multiple_of_32() -> None:
    from kvtool.model.engines import check_block_size

    check_block_size(get_engine("trtllm"), 64)
    with pytest.raises(InputError, match="multiple of 32"):
        check_block_size(get_engine("trtllm"), 16)

"""model/cpu.py: what vLLM 0.32.0's CPU build says of a model's KV beyond its block sizes."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.inputs.shape import resolve_shape
from kvtool.model.cpu import cpu_block_size, cpu_notes
from kvtool.model.formats import resolve_format


def test_mla_runs_in_16_token_blocks_and_the_model_dtype_only() -> None:
    spec = resolve_shape("deepseek-v3").spec
    assert cpu_block_size(spec, 128) == 16
    notes = cpu_notes(spec, resolve_format("auto", spec.dtype), 128)
    assert any("--block-tokens 128" in n and "16-token blocks" in n for n in notes)
    assert not any("576-wide latent only" in n for n in notes)  # 512 + 64
    with pytest.raises(InputError, match="CPU_MLA backend takes --kv-cache-dtype auto"):
        cpu_notes(spec, resolve_format("fp8", spec.dtype), None)


def test_another_mla_latent_is_warned_of() -> None:
    spec = resolve_shape("deepseek-v2-lite").spec  # kv_lora_rank 512: the kernel's
    mla = spec._replace(
        groups=tuple(g._replace(kv_lora_rank=256) if hasattr(g, "kv_lora_rank") else g
                     for g in spec.groups)
    )  # fmt: skip
    notes = cpu_notes(mla, resolve_format("auto", spec.dtype), None)
    assert any("576-wide latent only" in n and "320 (256 + 64)" in n for n in notes)


def test_fp8_needs_heads_divisible_by_32_and_avx512() -> None:
    spec = resolve_shape("llama-3.1-8b").spec
    notes = cpu_notes(spec, resolve_format("fp8", spec.dtype), None)
    assert any("AVX-512 or AMX" in n for n in notes)
    odd = spec._replace(groups=tuple(g._replace(head_dim=48, v_head_dim=48) for g in spec.groups))
    with pytest.raises(InputError, match="no fp8 KV for head size 48"):
        cpu_notes(odd, resolve_format("fp8", spec.dtype), None)
    assert cpu_notes(odd, resolve_format("auto", spec.dtype), None) == []

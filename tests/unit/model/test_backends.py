"""The GPU's kernels in vLLM 0.33.0 (model/backends.py): which attention backend, so which
block size, which KV dtypes are refused, and which state mixers keep a prefill-checkpoint page
and align the hybrid block. Figures from the wheel's code (file and line in the module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.model.backends import (
    ASSUMED_GPU,
    Gpu,
    attention_backend,
    gpu_of,
    prefill_checkpoint_alignment,
    prefill_checkpoint_pages,
)
from kvtool.model.config import spec_from_config
from kvtool.model.engines import get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.kv import SizeResult, size_kv
from kvtool.model.spec import ModelSpec, StateLayers

from .test_config import bundled_spec

A100 = Gpu("NVIDIA A100", (8, 0))
L40S = Gpu("NVIDIA L40S", (8, 9))
H200 = Gpu("NVIDIA H200", (9, 0))
B200 = Gpu("NVIDIA B200", (10, 0))
FIXTURES = Path(__file__).parents[2] / "fixtures" / "models"


def vllm(spec: ModelSpec, gpu: Gpu, kv_dtype: str = "auto", ctx: int = 131_072) -> SizeResult:
    fmt = resolve_format(kv_dtype, spec.dtype)
    return size_kv(spec, rules=get_engine("vllm"), fmt=fmt, ctx_tokens=ctx, sessions=1, gpu=gpu)


@pytest.mark.parametrize(
    ("accelerator", "capability"),
    [
        ("NVIDIA H200", (9, 0)),
        ("NVIDIA H100", (9, 0)),
        ("NVIDIA A100 40GB", (8, 0)),
        ("NVIDIA B200", (10, 0)),
        ("NVIDIA GB200", (10, 0)),
        ("NVIDIA B300", (10, 3)),
    ],
)
def test_accelerator_names_map_to_their_compute_capability(
    accelerator: str, capability: tuple[int, int]
) -> None:
    gpu = gpu_of(accelerator)
    assert gpu is not None
    assert gpu.capability == capability
    assert not gpu.assumed


def test_trainium_has_no_cuda_capability_and_the_default_says_it_is_assumed() -> None:
    assert gpu_of("AWS Trainium2") is None
    assert "assumed: no --hardware" in ASSUMED_GPU.describe()


@pytest.mark.parametrize(
    ("gpu", "kv_dtype", "backend", "block"),
    [
        (A100, "auto", "TRITON_MLA", 16),
        (H200, "auto", "FLASH_ATTN_MLA", 16),  # the "16 in 0.33.0, not 64"
        (H200, "fp8", "FLASHMLA", 64),
        (B200, "auto", "FLASHINFER_MLA", 32),
        (B200, "fp8", "FLASHINFER_MLA", 32),
    ],
)
def test_mla_block_size_follows_the_backend_the_gpu_gets(
    gpu: Gpu, kv_dtype: str, backend: str, block: int
) -> None:
    spec = bundled_spec("kimi-k2")
    assert attention_backend(spec, resolve_format(kv_dtype, spec.dtype).name, gpu)[:2] == (
        backend,
        block,
    )
    result = vllm(spec, gpu, kv_dtype, ctx=100)
    assert result.block_size == block
    assert result.groups[0].tokens_held == block * -(-100 // block)
    assert any(backend in note and f"{block}-token blocks" in note for note in result.notes)


def test_an_mla_cache_in_fp8_is_refused_where_only_triton_mla_runs_it_below_sm89() -> None:
    spec = bundled_spec("deepseek-r1")
    with pytest.raises(InputError, match=r"TRITON_MLA.*FP8 needs sm89\+"):
        vllm(spec, A100, "fp8")
    assert vllm(spec, L40S, "fp8").block_size == 16


def test_nvfp4_is_refused_for_dense_mla_on_every_gpu() -> None:
    for gpu in (H200, B200):
        with pytest.raises(InputError, match="no NVFP4 cache for MLA"):
            vllm(bundled_spec("deepseek-r1"), gpu, "nvfp4")


def test_sparse_mla_takes_the_indexer_s_64_and_needs_hopper_or_newer() -> None:
    spec = bundled_spec("deepseek-v3.2")
    assert vllm(spec, H200, ctx=100).block_size == 64
    assert vllm(spec, B200, ctx=100).block_size == 64
    with pytest.raises(InputError, match="sparse-MLA backend needs sm90"):
        vllm(spec, A100)


@pytest.mark.parametrize(
    ("gpu", "kv_dtype", "backend"),
    [
        (A100, "auto", "FLASH_ATTN"),
        (A100, "fp8", "FLASHINFER"),  # FlashAttention's FP8 needs FA3
        (H200, "auto", "FLASH_ATTN"),
        (H200, "fp8", "FLASH_ATTN"),
        (H200, "fp8_e5m2", "FLASHINFER"),
        (B200, "auto", "FLASHINFER"),
        (H200, "nvfp4", "FLASHINFER (FA2 NVFP4 path)"),
    ],
)
def test_attention_backends_all_keep_16_token_blocks(gpu: Gpu, kv_dtype: str, backend: str) -> None:
    spec = bundled_spec("llama-3.1-8b")
    chosen = attention_backend(spec, resolve_format(kv_dtype, spec.dtype).name, gpu)
    assert (chosen.name, chosen.block_size) == (backend, 16)


def test_nvfp4_before_blackwell_is_refused_at_head_size_64_and_with_sinks() -> None:
    """FlashInfer's FA2 path stores NVFP4 on sm80/sm90 but misreads head_size 64 and refuses
    sinks (flashinfer.py:680); on sm100 the trtllm-gen kernels take both."""
    gpt_oss = bundled_spec("gpt-oss-20b")
    assert gpt_oss.attention_sinks
    with pytest.raises(InputError, match="refuses attention sinks"):
        vllm(gpt_oss, H200, "nvfp4")
    assert vllm(gpt_oss, B200, "nvfp4", ctx=100).block_size == 16
    small = bundled_spec("llama-3.2-1b")  # head_dim 64
    with pytest.raises(InputError, match="head_size 64"):
        vllm(small, A100, "nvfp4")


def test_sinks_below_sm90_run_on_triton_whose_fp8_needs_sm89() -> None:
    gpt_oss = bundled_spec("gpt-oss-20b")
    assert attention_backend(gpt_oss, "bf16", A100).name == "TRITON_ATTN"
    with pytest.raises(InputError, match="FP8 needs sm89"):
        vllm(gpt_oss, A100, "fp8")
    assert vllm(gpt_oss, L40S, "fp8", ctx=100).block_size == 16


def qwen35_35b_a3b() -> ModelSpec:
    """transformers' Qwen3_5MoeTextConfig defaults are Qwen/Qwen3.5-35B-A3B's text model; the
    released config keeps the recurrent state in float32 (mamba_ssm_dtype)."""
    from transformers import Qwen3_5MoeTextConfig

    raw = {
        **Qwen3_5MoeTextConfig().to_dict(),
        "architectures": ["Qwen3_5MoeForCausalLM"],
        "mamba_ssm_dtype": "float32",
        "torch_dtype": "bfloat16",
    }
    return spec_from_config(raw, name="qwen3.5-35b-a3b")


@pytest.mark.parametrize(("gpu", "block"), [(H200, 1088), (B200, 1088), (A100, 1056)])
def test_gated_deltanet_on_flashinfer_aligns_the_hybrid_block_to_64(gpu: Gpu, block: int) -> None:
    """The issue's figure: 1,088 not 1,056 for Qwen3.5-35B-A3B. State page 49,152 + 2,097,152 B;
    attention 2,048 B per token per layer; 64 x cdiv(2,146,304, 64 x 2,048) = 1,088."""
    result = vllm(qwen35_35b_a3b(), gpu, ctx=1000)
    assert result.block_size == block


def test_gated_deltanet_is_charged_its_checkpoint_page_only_on_flashinfer() -> None:
    spec = qwen35_35b_a3b()
    (state,) = [g for g in spec.groups if isinstance(g, StateLayers)]
    assert [prefill_checkpoint_pages(state, gpu) for gpu in (A100, H200, B200)] == [0, 1, 1]
    assert prefill_checkpoint_alignment(state, H200) == 64
    assert prefill_checkpoint_alignment(state, A100) == 1
    narrow = state._replace(key_head_dim=64)  # sm100 needs linear_key_head_dim 128
    assert (prefill_checkpoint_pages(narrow, H200), prefill_checkpoint_pages(narrow, B200)) == (
        1,
        0,
    )


def kimi(**linear: Any) -> ModelSpec:
    raw = json.loads((FIXTURES / "kimi-linear-48b-a3b-instruct.json").read_text())
    raw["linear_attn_config"] = {**raw["linear_attn_config"], **linear}
    return spec_from_config(raw, name="kimi")


def test_kimi_k3_s_kda_keeps_a_checkpoint_page_on_flashkda_kimi_linear_s_does_not() -> None:
    """Kimi-K3's layer (full-rank gate) prefills on FlashKDA on sm90/sm100 with a bounded gate
    and keeps one more state page per request (models/kimi_k3/nvidia/kda.py:901)."""
    linear, k3 = kimi(), kimi(use_full_rank_gate=True, gate_lower_bound=-5.0)
    (state,) = [g for g in k3.groups if isinstance(g, StateLayers)]
    assert state.flashkda
    assert [prefill_checkpoint_pages(state, gpu) for gpu in (A100, H200, B200)] == [0, 1, 1]
    plain, three = vllm(linear, H200), vllm(k3, H200)
    assert plain.kv_bytes_per_session == three.kv_bytes_per_session  # what sessions hold
    page = three.groups[-1].fixed_bytes_per_session // 20  # one KDA layer's padded page
    # one more page for each of the 3 groups of 7 layers vLLM makes of the 20 KDA layers
    extra = (three.admission_bytes_per_session or 0) - (plain.admission_bytes_per_session or 0)
    assert extra == 21 * page
    assert any("FlashKDA" in note for note in three.notes)
    unbounded = kimi(use_full_rank_gate=True)  # no gate_lower_bound: Triton, no page
    (state,) = [g for g in unbounded.groups if isinstance(g, StateLayers)]
    assert not state.flashkda


def test_the_released_qwen3_5_35b_a3b_and_kimi_k3_configs() -> None:
    """The bundled real configs: Qwen3.5-35B-A3B gets the issue's 1,088-token blocks on an
    H100/H200, and Kimi-K3 (full-rank, bounded gate, head_dim 128) prefills on FlashKDA."""
    assert vllm(bundled_spec("qwen3.5-35b-a3b"), H200, ctx=1000).block_size == 1088
    k3 = bundled_spec("kimi-k3")
    (state,) = [g for g in k3.groups if isinstance(g, StateLayers)]
    assert (state.num_layers, state.flashkda) == (69, True)
    assert any("FlashKDA" in note for note in vllm(k3, H200).notes)

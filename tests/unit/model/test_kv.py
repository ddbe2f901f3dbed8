"""Bytes per token and per session, pinned to published and engine-derived figures.

Sources for each pinned number are in docs/sizing.md ("Evidence").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.model.backends import ASSUMED_GPU, Gpu
from kvtool.model.config import spec_from_config
from kvtool.model.engines import ENGINES, get_engine
from kvtool.model.formats import FORMATS, resolve_format
from kvtool.model.kv import SizeResult, kv_bytes_per_token, size_kv
from kvtool.model.spec import AttentionLayers, ModelSpec
from kvtool.profiles.load import model_profiles

from .test_config import bundled_spec

ALL_MODELS = [profile.name for profile, _ in model_profiles()]


def size(
    name: str,
    *,
    engine: str = "vllm",
    kv_dtype: str = "auto",
    ctx: int = 1,
    sessions: int = 1,
    tp: int = 1,
    block_size: int | None = None,
    gpu: Gpu = ASSUMED_GPU,
) -> SizeResult:
    spec = bundled_spec(name)
    return size_kv(
        spec,
        rules=get_engine(engine),
        fmt=resolve_format(kv_dtype, spec.dtype),
        ctx_tokens=ctx,
        sessions=sessions,
        tp=tp,
        block_size=block_size,
        gpu=gpu,
    )


B200 = Gpu("NVIDIA B200", (10, 0))
A100 = Gpu("NVIDIA A100", (8, 0))


# --- the AWS article's figures ------------------------------------------------------------


def test_llama_405b_is_516096_bytes_per_token() -> None:
    assert kv_bytes_per_token(bundled_spec("llama-3.1-405b")) == 516_096


def test_deepseek_r1_is_70272_bytes_per_token() -> None:
    assert kv_bytes_per_token(bundled_spec("deepseek-r1")) == 70_272


def test_deepseek_r1_200k_by_100_sessions() -> None:
    result = size("deepseek-r1", engine="formula", ctx=200_000, sessions=100)
    assert result.kv_bytes_total == 70_272 * 200_000 * 100  # 1.41 TB
    # vLLM pages MLA in 64-token blocks; 200,000 is a multiple of 64, so nothing is added.
    assert size("deepseek-r1", ctx=200_000, sessions=100).kv_bytes_total == result.kv_bytes_total


def test_mla_is_about_seven_times_smaller_than_llama_405b() -> None:
    ratio = kv_bytes_per_token(bundled_spec("llama-3.1-405b")) / kv_bytes_per_token(
        bundled_spec("deepseek-r1")
    )
    assert 7.0 < ratio < 7.5


# --- published figures for other models ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        ("llama-3.1-8b", 131_072),  # 128 KiB/token, vLLM worked example
        ("llama-3.1-70b", 327_680),  # frankdenneman.nl 2026-01-12: 2x80x8x128x2
        ("llama-3.3-70b", 327_680),
        ("deepseek-v3", 70_272),  # DeepSeek-V2 paper: (d_c + d_h^R) x l elements
        ("deepseek-v2-lite", 27 * 576 * 2),
        ("kimi-k2", 70_272),
        ("qwen3-next-80b-a3b", 12 * 2 * 2 * 256 * 2),  # 12 full layers only
    ],
)
def test_published_bytes_per_token(name: str, per_token: int) -> None:
    assert kv_bytes_per_token(bundled_spec(name)) == per_token


@pytest.mark.parametrize(
    ("kv_dtype", "per_token"),
    [
        ("bf16", 131_072),
        ("fp8", 65_536),
        ("fp8_per_token_head", 32 * 8 * (256 + 8)),  # 67,584
        ("int8", 67_584),
        ("int4", 32 * 8 * (128 + 8)),  # 34,816
        ("nvfp4", 32 * 8 * 2 * (64 + 8)),  # 36,864 = 0.5625 B/element
    ],
)
def test_llama_8b_kv_dtypes_with_scales_counted(kv_dtype: str, per_token: int) -> None:
    assert size("llama-3.1-8b", kv_dtype=kv_dtype).kv_bytes_per_token == per_token


def test_deepseek_v32_fp8_uses_fp8_ds_mla_plus_indexer() -> None:
    result = size("deepseek-v3.2", kv_dtype="fp8")
    assert result.kv_bytes_per_token == (656 + 132) * 61  # 48,068
    assert [g.bytes_per_token for g in result.groups] == [656 * 61, 132 * 61]


def test_deepseek_v32_indexer_does_not_shrink_with_fp8() -> None:
    bf16 = size("deepseek-v3.2", kv_dtype="bf16").groups[1].bytes_per_token
    fp8 = size("deepseek-v3.2", kv_dtype="fp8").groups[1].bytes_per_token
    assert bf16 == fp8 == 132 * 61


def test_deepseek_v32_nvfp4_uses_nvfp4_ds_mla_which_only_blackwell_runs() -> None:
    result = size("deepseek-v3.2", kv_dtype="nvfp4", gpu=B200)
    assert result.groups[0].bytes_per_token == 352 * 61
    with pytest.raises(InputError, match="nvfp4_ds_mla runs on sm100 only"):
        size("deepseek-v3.2", kv_dtype="nvfp4")  # an H100/H200


def test_mla_without_sparse_attention_fp8_is_plain_576() -> None:
    assert size("deepseek-r1", kv_dtype="fp8").kv_bytes_per_token == 576 * 61


def test_vllm_has_no_int4_mla_cache() -> None:
    with pytest.raises(InputError, match="no int4 cache for MLA"):
        size("deepseek-r1", kv_dtype="int4")
    assert size("deepseek-r1", kv_dtype="int4", engine="formula").kv_bytes_per_token == (
        (288 + 4) * 61
    )


def test_hf_legacy_decompresses_mla() -> None:
    result = size("deepseek-v3", engine="hf-legacy")
    assert result.kv_bytes_per_token == 61 * 128 * (192 + 128) * 2  # 4,997,120 (~71x)
    assert size("deepseek-v3", engine="hf").kv_bytes_per_token == 70_272


def test_hf_rejects_quantized_kv() -> None:
    with pytest.raises(InputError, match="DynamicCache"):
        size("llama-3.1-8b", engine="hf", kv_dtype="fp8")


def test_hf_5_24_caches_falcon_40b_kv_broadcast_to_all_heads_and_5_25_as_they_are() -> None:
    vllm = size("falcon-40b").kv_bytes_per_token
    assert vllm == 60 * 8 * 64 * 2 * 2
    assert size("falcon-40b", engine="hf==5.24").kv_bytes_per_token == vllm * 16  # 128 / 8 heads
    assert size("falcon-40b", engine="hf==5.25").kv_bytes_per_token == vllm


# --- tensor parallelism ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "per_rank_per_token"), [(1, 131_072), (2, 65_536), (8, 16_384), (16, 16_384)]
)
def test_vllm_tp_shards_kv_heads_and_replicates_past_them(tp: int, per_rank_per_token: int) -> None:
    result = size("llama-3.1-8b", tp=tp, ctx=16)
    assert result.kv_bytes_per_rank_per_session == per_rank_per_token * 16
    assert result.kv_bytes_per_session == per_rank_per_token * 16 * tp


def test_mla_latent_is_held_by_every_rank() -> None:
    result = size("deepseek-r1", tp=8, ctx=64)
    assert result.kv_bytes_per_rank_per_session == 70_272 * 64
    assert result.kv_bytes_per_session == 8 * 70_272 * 64


@pytest.mark.parametrize("tp", [3, 6])
def test_tp_must_divide_kv_heads(tp: int) -> None:
    with pytest.raises(InputError, match=f"--tp {tp}"):
        size("llama-3.1-8b", tp=tp)


def test_tp_is_refused_for_single_process_conventions() -> None:
    with pytest.raises(InputError, match="does not apply to --engine formula"):
        size("llama-3.1-8b", engine="formula", tp=2)


# --- windows, paging and state --------------------------------------------------------------


def test_vllm_rounds_full_attention_to_blocks() -> None:
    assert size("llama-3.1-8b", ctx=17).groups[0].tokens_held == 32
    assert size("llama-3.1-8b", ctx=17, engine="formula").groups[0].tokens_held == 17


def test_sliding_window_conventions_differ_per_engine() -> None:
    held = {
        engine: size("gpt-oss-20b", engine=engine, ctx=100_000).groups[0].tokens_held
        for engine in ("formula", "hf", "vllm", "sglang")
    }
    # formula: the window; hf: window - 1; vLLM: blocks overlapping the last 127 tokens
    # (9 blocks of 16 at worst); SGLang: gpt-oss is on its hybrid-SWA list, so the window.
    assert held == {"formula": 128, "hf": 127, "vllm": 144, "sglang": 128}


def test_sglang_keeps_all_tokens_for_gemma_sliding_layers() -> None:
    sliding = size("gemma-3-27b", engine="sglang", ctx=100_000).groups[0]
    assert sliding.kind == "sliding"
    assert sliding.tokens_held == 100_000


def test_chunked_layers_peak_at_one_chunk() -> None:
    result = size("llama-4-scout", ctx=200_000)
    chunked = result.groups[0]
    assert chunked.kind == "chunked"
    assert chunked.tokens_held == 8192  # cdiv(8191, 16) blocks of 16
    assert result.kv_bytes_per_token == 12 * 8 * 256 * 2  # only the 12 global layers grow


def test_sglang_keeps_a_chunk_and_one_token_in_llama4_chunked_layers() -> None:
    """SGLang slides Llama 4's chunked layers as a window of attention_chunk_size and keeps
    window + 1 tokens after each eviction (mem_cache/common.py:111 with pre_len = seqlen - 1);
    gpt-oss's window is sliding_window - 1 there (models/gpt_oss.py:132), so it keeps 128."""
    result = size("llama-4-scout", engine="sglang", ctx=200_000)
    chunked = result.groups[0]
    assert (chunked.kind, chunked.tokens_held) == ("chunked", 8193)
    assert any("reserves 8,322 a running request" in note for note in result.notes)
    assert size("llama-4-scout", engine="sglang", ctx=5000).groups[0].tokens_held == 5000
    gpt_oss = size("gpt-oss-20b", engine="sglang", ctx=100_000)
    assert gpt_oss.groups[0].tokens_held == 128
    assert not any("eviction" in note for note in gpt_oss.notes)


def test_qwen3_next_state_and_vllm_hybrid_block() -> None:
    """On an H100/H200 the Gated DeltaNet prefill runs on FlashInfer, whose 64-token checkpoint
    alignment vLLM folds into the hybrid block (platforms/interface.py:1090); on an A100 it
    runs on Triton and the block aligns to the attention kernel's 16 only."""
    result = size("qwen3-next-80b-a3b", ctx=1000)
    attn, state = result.groups
    per_layer_state = 3 * 8192 * 2 + 32 * 128 * 128 * 2  # conv + recurrent = 1,097,728 B
    assert result.block_size == 64 * -(-per_layer_state // (64 * 2048)) == 576
    assert attn.tokens_held == 1152
    assert state.fixed_bytes_per_session == 36 * 576 * 2048  # state page padded to the block
    a100 = size("qwen3-next-80b-a3b", ctx=1000, gpu=A100)
    assert a100.block_size == 16 * -(-per_layer_state // (16 * 2048)) == 544
    formula = size("qwen3-next-80b-a3b", engine="formula", ctx=1000).groups[1]
    assert formula.fixed_bytes_per_session == 36 * per_layer_state


def test_sglang_keeps_gdn_recurrent_state_in_fp32() -> None:
    result = size("qwen3-next-80b-a3b", engine="sglang", ctx=1)
    assert result.groups[1].fixed_bytes_per_session == 36 * (3 * 8192 * 2 + 32 * 128 * 128 * 4)
    # its admission differs from the one slot a session holds, and the output says so
    assert any("one running request per 3 slots" in note for note in result.notes)
    assert not any("per 3 slots" in note for note in size("qwen3-next-80b-a3b", ctx=1).notes)
    assert not any("per 3 slots" in n for n in size("llama-3.1-8b", engine="sglang").notes)


def test_user_block_size_overrides_default() -> None:
    assert size("llama-3.1-8b", ctx=17, block_size=32).groups[0].tokens_held == 32
    assert size("llama-3.1-8b", ctx=33, block_size=32).groups[0].tokens_held == 64


# --- properties -------------------------------------------------------------------------------

engines = st.sampled_from(["formula", "vllm", "sglang", "hf"])


def _modelled(name: str, engine: str) -> bool:
    """Families checked only against vLLM are refused for SGLang and transformers."""
    from kvtool.model.families import VLLM_ONLY
    from kvtool.profiles.resolve import resolve_model

    return engine in ("formula", "vllm") or resolve_model(name).spec.model_type not in VLLM_ONLY


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(ALL_MODELS),
    engine=engines,
    ctx=st.integers(1, 2_000_000),
    sessions=st.integers(1, 10_000),
)
def test_total_is_linear_in_sessions(name: str, engine: str, ctx: int, sessions: int) -> None:
    assume(_modelled(name, engine))
    one = size(name, engine=engine, ctx=ctx, sessions=1)
    many = size(name, engine=engine, ctx=ctx, sessions=sessions)
    assert many.kv_bytes_total == sessions * one.kv_bytes_per_session


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(ALL_MODELS),
    engine=engines,
    ctx=st.integers(1, 1_000_000),
    more=st.integers(0, 100_000),
)
def test_session_size_never_decreases_with_context(
    name: str, engine: str, ctx: int, more: int
) -> None:
    assume(_modelled(name, engine))
    shorter = size(name, engine=engine, ctx=ctx).kv_bytes_per_session
    assert size(name, engine=engine, ctx=ctx + more).kv_bytes_per_session >= shorter


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ALL_MODELS), engine=engines, ctx=st.integers(1, 4_000_000))
def test_windowed_groups_never_hold_more_than_their_window(
    name: str, engine: str, ctx: int
) -> None:
    assume(_modelled(name, engine))
    result = size(name, engine=engine, ctx=ctx)
    for group in result.groups:
        if group.window is not None:
            # vLLM: cdiv(window - 1, block) + 1 blocks, as a window need not start on a block
            # boundary (SlidingWindowSpec.max_admission_blocks_per_request).
            # SGLang keeps one token past a chunk (EngineRules.chunked_extra_tokens).
            bs = result.block_size
            extra = ENGINES[engine].chunked_extra_tokens if group.kind == "chunked" else 0
            assert group.tokens_held <= bs * (-(-(group.window - 1) // bs) + 1) + extra


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 128),
    kv_heads=st.integers(1, 64),
    head_dim=st.sampled_from([64, 80, 96, 128, 192, 256]),
    fp8=st.sampled_from(["fp8", "fp8_per_token_head", "int8"]),
)
def test_fp8_is_at_most_half_of_bf16_plus_scales(
    layers: int, kv_heads: int, head_dim: int, fp8: str
) -> None:
    spec = ModelSpec(
        "m",
        "llama",
        layers,
        kv_heads,
        kv_heads * head_dim,
        "bf16",
        (AttentionLayers("full", layers, kv_heads, head_dim, head_dim),),
    )
    bf16 = kv_bytes_per_token(spec, "bf16")
    quantized = kv_bytes_per_token(spec, fp8)
    scales = (
        2
        * layers
        * kv_heads
        * (4 if FORMATS[resolve_format(fp8, "bf16").name].scales == "per_token_head" else 0)
    )
    assert quantized <= bf16 // 2 + scales
    assert quantized >= bf16 // 2


@settings(max_examples=40, deadline=None)
@given(ctx=st.integers(1, 10**6), sessions=st.integers(1, 10**4))
def test_formula_is_exactly_linear_in_tokens_for_full_attention(ctx: int, sessions: int) -> None:
    result = size("llama-3.1-405b", engine="formula", ctx=ctx, sessions=sessions)
    assert result.kv_bytes_total == 516_096 * ctx * sessions


# --- layers of different page sizes (vLLM's unify_kv_cache_spec_page_size) ----------------
# Admission figures from vLLM 0.33.0's own planning code (kv_cache_planning.py
# unify_kv_cache_spec_page_size, get_kv_cache_groups, _max_memory_usage_bytes_from_groups)
# run on CPU on the specs these models' layers build, bf16, tp 1, L 131,072, 8,192 batched.

FIXTURES = Path(__file__).parents[2] / "fixtures" / "models"


def fixture_spec(name: str) -> ModelSpec:
    return spec_from_config(json.loads((FIXTURES / f"{name}.json").read_text()), name=name)


@pytest.mark.parametrize(
    ("name", "full", "sliding", "admission"),
    [
        # 9 full layers (4 KV heads, K 192 / V 128) and 39 sliding (8 heads, window 128)
        ("mimo-v2-flash", (9, 4, 192, 128, None), (39, 8, 192, 128, 128), 6_827_950_080),
        # 5 full layers (2 KV heads of 512: attention_k_eq_v), 25 sliding (8 of 256, 1,024)
        ("gemma-4-26b-a4b", (5, 2, 512, 512, None), (25, 8, 256, 256, 1024), 6_252_789_760),
    ],
)
def test_mixed_page_sizes_are_unified_as_vllm_does(
    name: str,
    full: tuple[int, int, int, int, None],
    sliding: tuple[int, int, int, int, int],
    admission: int,
) -> None:
    """The full layers' pages are half the sliding layers', so they take 32-token blocks."""
    spec = fixture_spec(name)
    groups = {g.kind: g for g in spec.groups if isinstance(g, AttentionLayers)}
    for kind, want in (("full", full), ("sliding", sliding)):
        g = groups[kind]
        assert (g.num_layers, g.num_kv_heads, g.head_dim, g.v_head_dim, g.window) == want
    result = size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("auto", spec.dtype),
                     ctx_tokens=131_072, sessions=1, max_num_batched_tokens=8192)  # fmt: skip
    assert result.admission_bytes_per_session == admission
    assert any("full layers keep 32-token blocks" in note for note in result.notes)
    short = size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("auto", spec.dtype),
                    ctx_tokens=40, sessions=1)  # fmt: skip
    by_kind = {g.kind: g.tokens_held for g in short.groups}
    assert by_kind["full"] == 64  # two 32-token blocks


def test_mixed_head_sizes_with_an_unchecked_backend_are_refused() -> None:
    spec = fixture_spec("mimo-v2-flash")
    with pytest.raises(InputError, match="has not checked which attention backend"):
        size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("fp8_e5m2", spec.dtype),
                ctx_tokens=1024, sessions=1)  # fmt: skip
    gemma = fixture_spec("gemma-4-26b-a4b")
    with pytest.raises(InputError, match=r"block sizes for .* on NVIDIA B200"):
        size_kv(gemma, rules=ENGINES["vllm"], fmt=resolve_format("auto", gemma.dtype),
                ctx_tokens=1024, sessions=1, gpu=B200)  # fmt: skip
    assert size("llama-3.1-8b", gpu=B200).block_size == 16  # one head size: checked


L40S = Gpu("NVIDIA L40S", (8, 9))


@pytest.mark.parametrize(
    ("name", "gpu", "block", "kernels"),
    [
        # sm90: per-layer FA3/FA4; FA4's FP8 kernel for the 512-dim layers pages 64 tokens
        ("gemma-4-26b-a4b", ASSUMED_GPU, 64, "FA4 for head_dim 512"),
        ("mimo-v2-flash", ASSUMED_GPU, 16, "FLASH_ATTN_DIFFKV"),
        # sm89: no FA3/FA4, Triton, whose FP8 runs from sm89
        ("gemma-4-26b-a4b", L40S, 16, "TRITON_ATTN"),
        ("mimo-v2-flash", L40S, 16, "TRITON_ATTN_DIFFKV"),
    ],
)
def test_mixed_head_sizes_with_fp8_follow_vllms_kernels(
    name: str, gpu: Gpu, block: int, kernels: str
) -> None:
    spec = fixture_spec(name)
    result = size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("fp8", spec.dtype),
                     ctx_tokens=1024, sessions=1, gpu=gpu)  # fmt: skip
    assert result.block_size == block
    assert any(kernels in note for note in result.notes)
    bf16 = size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("auto", spec.dtype),
                   ctx_tokens=1024, sessions=1, gpu=gpu)  # fmt: skip
    assert bf16.block_size == 16


@pytest.mark.parametrize("name", ["gemma-4-26b-a4b", "mimo-v2-flash"])
def test_mixed_head_sizes_with_fp8_below_sm89_are_refused_as_vllm_raises(name: str) -> None:
    spec = fixture_spec(name)
    with pytest.raises(InputError, match=r"FP8 needs sm89\+ \(triton_attn.py:514\)"):
        size_kv(spec, rules=ENGINES["vllm"], fmt=resolve_format("fp8", spec.dtype),
                ctx_tokens=1024, sessions=1, gpu=A100)  # fmt: skip

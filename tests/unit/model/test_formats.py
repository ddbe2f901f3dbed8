"""KV element formats: bytes per cached vector, scales included, and how ``--kv-dtype`` names
resolve (docs/sizing.md section 3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.model.formats import ALIASES, FORMATS, KV_DTYPE_CHOICES, KvFormat, resolve_format
from kvtool.model.spec import AttentionLayers, MlaLayers
from kvtool.profiles.resolve import resolve_model


@pytest.mark.parametrize(
    ("name", "bytes_128"),
    [
        ("fp32", 512),  # 128 x 4 B
        ("bf16", 256),  # 128 x 2 B
        ("fp16", 256),
        ("fp8_e4m3", 128),  # 128 x 1 B; the per-layer scales live outside the pool
        ("fp8_e5m2", 128),
        ("fp8_per_token_head", 132),  # 128 x 1 B + one fp32 scale
        ("int8", 132),
        ("int4", 68),  # 128 / 2 + one fp32 scale
        ("nvfp4", 72),  # 128 / 2 + 128 / 16 fp8 block scales
    ],
)
def test_bytes_for_one_head_dim_128_vector(name: str, bytes_128: int) -> None:
    assert FORMATS[name].vector_bytes(128) == bytes_128


def test_llama_3_1_8b_bytes_per_token_in_every_format_match_the_docs() -> None:
    """docs/sizing.md: 32 layers x 8 KV heads x head_dim 128, one K and one V per head."""
    spec = resolve_model("llama-3.1-8b").spec
    (group,) = spec.groups
    assert isinstance(group, AttentionLayers)
    assert (group.num_layers, group.num_kv_heads, group.head_dim) == (32, 8, 128)
    vectors = 2 * group.num_layers * group.num_kv_heads  # 512 vectors per token
    per_token = {name: vectors * FORMATS[name].vector_bytes(group.head_dim) for name in FORMATS}
    assert per_token["bf16"] == 131_072
    assert per_token["fp8_e4m3"] == 65_536
    assert per_token["int8"] == per_token["fp8_per_token_head"] == 67_584
    assert per_token["int4"] == 34_816
    assert per_token["nvfp4"] == 36_864  # 0.5625 B per element
    assert per_token["nvfp4"] / (vectors * 128) == 0.5625


def test_an_mla_latent_of_deepseek_r1_in_bf16_is_70272_bytes_per_token() -> None:
    spec = resolve_model("deepseek-r1").spec
    (mla,) = spec.groups
    assert isinstance(mla, MlaLayers)
    # (512 + 64) x 2 B x 61 layers = 70,272 B
    latent = mla.kv_lora_rank + mla.qk_rope_head_dim
    assert FORMATS["bf16"].vector_bytes(latent) * mla.num_layers == 70_272
    assert FORMATS["fp8_e4m3"].vector_bytes(latent) == 576  # plain fp8 on a non-sparse MLA


def test_sub_byte_formats_round_their_data_up_to_whole_bytes() -> None:
    assert FORMATS["int4"].vector_bytes(3) == 2 + 4  # 12 bits -> 2 bytes, + scale
    assert FORMATS["nvfp4"].vector_bytes(17) == 9 + 2  # 68 bits -> 9 bytes, 2 blocks of 16
    assert FORMATS["nvfp4"].vector_bytes(16) == 8 + 1


def test_only_formats_narrower_than_16_bits_are_quantized() -> None:
    assert {name for name, fmt in FORMATS.items() if fmt.is_quantized} == {
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_per_token_head",
        "int8",
        "int4",
        "nvfp4",
    }
    assert all(fmt.scales == "none" for fmt in FORMATS.values() if not fmt.is_quantized)
    assert all(fmt.scales != "none" for fmt in FORMATS.values() if fmt.is_quantized)


def test_every_format_is_keyed_by_its_own_name() -> None:
    assert all(name == fmt.name for name, fmt in FORMATS.items())
    assert all(isinstance(fmt, KvFormat) and fmt.description for fmt in FORMATS.values())


@given(
    name=st.sampled_from(sorted(FORMATS)),
    elements=st.integers(1, 4096),
)
def test_vector_bytes_is_the_elements_bits_rounded_up_plus_the_scales(
    name: str, elements: int
) -> None:
    fmt = FORMATS[name]
    size = fmt.vector_bytes(elements)
    data = -(-elements * fmt.element_bits // 8)
    scales = {"none": 0, "per_tensor": 0, "per_token_head": 4, "block16": -(-elements // 16)}
    assert size == data + scales[fmt.scales]
    assert size >= elements * fmt.element_bits / 8
    assert fmt.vector_bytes(elements + 1) >= size


@given(blocks=st.integers(1, 512))
def test_nvfp4_is_exactly_0_5625_bytes_per_element_in_whole_blocks(blocks: int) -> None:
    elements = 16 * blocks
    assert FORMATS["nvfp4"].vector_bytes(elements) == elements * 9 // 16


# --- resolve_format ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "model_dtype", "resolved"),
    [
        ("auto", "bf16", "bf16"),
        ("auto", "fp16", "fp16"),
        ("auto", "fp32", "fp32"),
        ("auto", "bfloat16", "bf16"),  # a model dtype spelled as torch spells it
        ("fp8", "bf16", "fp8_e4m3"),  # vLLM's fp8 is e4m3
        ("float8_e4m3fn", "bf16", "fp8_e4m3"),
        ("half", "bf16", "fp16"),
        ("float", "bf16", "fp32"),
        ("int8_per_token_head", "bf16", "int8"),
        ("int4_per_token_head", "bf16", "int4"),
        (" FP8_E5M2 ", "bf16", "fp8_e5m2"),  # case and spaces do not matter
        ("NVFP4", "bf16", "nvfp4"),
        ("bf16", "fp32", "bf16"),  # an explicit choice ignores the model's dtype
    ],
)
def test_kv_dtype_names_resolve(typed: str, model_dtype: str, resolved: str) -> None:
    assert resolve_format(typed, model_dtype) is FORMATS[resolved]


def test_auto_is_the_bundled_models_own_dtype() -> None:
    spec = resolve_model("llama-3.1-70b").spec
    assert resolve_format("auto", spec.dtype).name == spec.dtype == "bf16"


def test_every_choice_and_alias_resolves() -> None:
    for choice in KV_DTYPE_CHOICES:
        assert resolve_format(choice, "bf16").name in FORMATS
    for alias, target in ALIASES.items():
        assert resolve_format(alias, "bf16") is FORMATS[target]
    # and every format can be asked for by a listed choice
    assert {resolve_format(c, "bf16").name for c in KV_DTYPE_CHOICES} == set(FORMATS)


@pytest.mark.parametrize("typed", ["fp6", "int2", "", "fp8_ds_mla", "mxfp4"])
def test_an_unknown_kv_dtype_lists_the_choices(typed: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_format(typed, "bf16")
    assert info.value.message == f"unknown --kv-dtype {typed!r}"
    assert info.value.hint == "choose one of " + ", ".join(KV_DTYPE_CHOICES)

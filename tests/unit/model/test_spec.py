"""What a model keeps per token and per sequence: layer groups of every kind, how they are
reported, and the facts a ``ModelSpec`` states about itself, checked on the bundled models."""

from __future__ import annotations

import pytest

from kvtool.model.spec import (
    AttentionLayers,
    IndexerLayers,
    MlaLayers,
    ModelSpec,
    StateLayers,
    group_kind,
)
from kvtool.profiles.load import model_profiles
from kvtool.profiles.resolve import resolve_model

ALL_MODELS = [profile.name for profile, _ in model_profiles()]


def spec(name: str) -> ModelSpec:
    return resolve_model(name).spec


def test_llama_3_1_405b_is_one_group_of_126_full_layers() -> None:
    llama = spec("llama-3.1-405b")
    assert llama.groups == (
        AttentionLayers("full", 126, 8, 128, 128, window=None, hf_cached_kv_heads=8),
    )
    (group,) = llama.groups
    # 2 x 126 layers x 8 KV heads x 128 x 2 B = 516,096 B/token
    assert 2 * group.num_layers * group.num_kv_heads * group.head_dim * 2 == 516_096
    assert not llama.is_mla
    assert not llama.has_indexer


def test_deepseek_r1_caches_one_mla_latent_per_layer() -> None:
    r1 = spec("deepseek-r1")
    (mla,) = r1.groups
    assert isinstance(mla, MlaLayers)
    assert (mla.num_layers, mla.kv_lora_rank, mla.qk_rope_head_dim) == (61, 512, 64)
    # the per-head sizes transformers' eager path decompresses to
    assert (mla.num_heads, mla.qk_nope_head_dim, mla.v_head_dim) == (128, 128, 128)
    assert r1.is_mla
    assert not r1.has_indexer
    assert (r1.dtype, r1.weights_dtype) == ("bf16", "fp8")


def test_deepseek_v3_2_adds_an_indexer_key_beside_the_latent() -> None:
    v32 = spec("deepseek-v3.2")
    assert v32.is_mla
    assert v32.has_indexer
    assert [group_kind(g) for g in v32.groups] == ["mla", "indexer"]
    indexer = v32.groups[1]
    assert indexer == IndexerLayers(num_layers=61, index_head_dim=128, num_heads=64)


@pytest.mark.parametrize(
    ("model", "kinds"),
    [
        ("llama-3.1-70b", ["full"]),
        ("gemma-3-27b", ["sliding", "full"]),
        ("llama-4-scout", ["chunked", "full"]),
        ("deepseek-r1", ["mla"]),
        ("deepseek-v3.2", ["mla", "indexer"]),
        ("qwen3-next-80b-a3b", ["full", "gated_deltanet"]),
        ("nemotron-h-56b", ["full", "mamba2"]),
        ("falcon-mamba-7b", ["mamba1"]),
        ("minimax-m1", ["full", "lightning"]),
    ],
)
def test_group_kinds_of_the_bundled_families(model: str, kinds: list[str]) -> None:
    assert [group_kind(g) for g in spec(model).groups] == kinds


def test_group_kind_names_every_kind_of_group() -> None:
    assert group_kind(AttentionLayers("sliding", 52, 16, 128, 128, window=1024)) == "sliding"
    assert group_kind(AttentionLayers("chunked", 36, 8, 128, 128, window=8192)) == "chunked"
    assert group_kind(MlaLayers(61, 512, 64, 128, 128, 128)) == "mla"
    assert group_kind(IndexerLayers(61, 128)) == "indexer"
    for kind in ("gated_deltanet", "mamba2", "mamba1", "lightning", "kda"):
        assert group_kind(StateLayers(kind, 1, 0, 1, 1, 1)) == kind  # type: ignore[arg-type]


def test_windows_bound_sliding_and_chunked_layers_only() -> None:
    gemma = spec("gemma-3-27b")
    sliding, full = gemma.groups
    assert isinstance(sliding, AttentionLayers)
    assert isinstance(full, AttentionLayers)
    assert (sliding.kind, sliding.num_layers, sliding.window) == ("sliding", 52, 1024)
    assert (full.kind, full.num_layers, full.window) == ("full", 10, None)
    chunked = spec("llama-4-scout").groups[0]
    assert isinstance(chunked, AttentionLayers)
    assert (chunked.kind, chunked.window) == ("chunked", 8192)  # Llama 4's attention chunk


def test_hf_cached_heads_default_to_the_kv_heads() -> None:
    assert AttentionLayers("full", 32, 8, 128, 128).cached_kv_heads_hf == 8
    # Falcon-40B: 8 KV heads, but transformers' cache broadcasts K/V to all 128 heads
    falcon = spec("falcon-40b").groups[0]
    assert isinstance(falcon, AttentionLayers)
    assert (falcon.num_kv_heads, falcon.cached_kv_heads_hf) == (8, 128)


def test_a_recurrent_state_layer_records_its_conv_and_state_sizes() -> None:
    qwen = spec("qwen3-next-80b-a3b")
    state = qwen.groups[1]
    assert isinstance(state, StateLayers)
    # Gated DeltaNet: 32 value heads, each a key_dim x value_dim = 128 x 128 state
    assert (state.kind, state.num_layers, state.state_heads, state.state_head_elems) == (
        "gated_deltanet",
        36,
        32,
        128 * 128,
    )
    assert (state.conv_kernel, state.state_dtype) == (4, None)
    nemotron = spec("nemotron-h-56b").groups[1]
    assert isinstance(nemotron, StateLayers)
    assert nemotron.state_dtype == "fp32"  # the config fixes the SSM state's dtype
    assert (nemotron.n_groups, nemotron.group_state) == (8, 256)


def test_defaults_of_a_minimal_spec() -> None:
    minimal = ModelSpec(
        "llama-3.1-405b",
        "llama",
        126,
        128,
        16384,
        "bf16",
        (AttentionLayers("full", 126, 8, 128, 128),),
    )
    assert (minimal.notes, minimal.layer_kinds, minimal.vocab_size) == ((), (), 0)
    assert (minimal.tied_embeddings, minimal.feed_forward, minimal.weights_dtype) == (
        False,
        None,
        "",
    )
    assert minimal.max_position_embeddings is None
    assert not minimal.is_mla
    assert not minimal.has_indexer


@pytest.mark.parametrize("name", ALL_MODELS)
def test_layer_kinds_has_one_entry_per_block_matching_the_groups(name: str) -> None:
    """``layer_kinds``: one of full, sliding, chunked, linear or none per block; the attention
    and MLA groups cover the attention blocks, the state groups the linear ones."""
    model = spec(name)
    kinds = model.layer_kinds
    assert len(kinds) == model.num_layers
    assert set(kinds) <= {"full", "sliding", "chunked", "linear", "none"}
    attention = sum(
        g.num_layers for g in model.groups if isinstance(g, AttentionLayers | MlaLayers)
    )
    assert attention == sum(k in ("full", "sliding", "chunked") for k in kinds)
    assert sum(g.num_layers for g in model.groups if isinstance(g, StateLayers)) == kinds.count(
        "linear"
    )
    for kind in ("sliding", "chunked"):
        windowed = [g for g in model.groups if isinstance(g, AttentionLayers) and g.kind == kind]
        assert sum(g.num_layers for g in windowed) == kinds.count(kind)
        assert all(g.window for g in windowed)
    assert model.is_mla is any(isinstance(g, MlaLayers) for g in model.groups)
    if model.has_indexer:
        assert model.is_mla  # the indexer sits beside an MLA latent

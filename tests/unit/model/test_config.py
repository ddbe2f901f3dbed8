"""Config dict -> ModelSpec: the conventions peer calculators get wrong, on real configs.

Every config here is a bundled, verbatim config.json (profiles/models/*/config.json) unless a
test builds a small dict to isolate one rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.spec import AttentionLayers, IndexerLayers, MlaLayers, ModelSpec, StateLayers
from kvtool.profiles.load import find_model_profile, read_config_json


def bundled_config(name: str) -> dict[str, Any]:
    found = find_model_profile(name)
    assert found is not None, name
    return read_config_json(found[1] / "config.json")


def bundled_spec(name: str) -> ModelSpec:
    return spec_from_config(bundled_config(name), name=name)


def attention(spec: ModelSpec, kind: str) -> AttentionLayers:
    groups = [g for g in spec.groups if isinstance(g, AttentionLayers) and g.kind == kind]
    assert len(groups) == 1, spec.groups
    return groups[0]


def test_head_dim_comes_from_the_config_not_hidden_over_heads() -> None:
    spec = bundled_spec("qwen3-32b")
    full = attention(spec, "full")
    assert (full.num_kv_heads, full.head_dim) == (8, 128)  # 5120 / 64 would be 80
    assert any("would give 80" in note for note in spec.notes)


@pytest.mark.parametrize(
    ("name", "head_dim", "derived"),
    [("gemma-2-9b", 256, 224), ("gpt-oss-120b", 64, 45), ("glm-4.5", 128, 53)],
)
def test_head_dim_differs_from_derived_value(name: str, head_dim: int, derived: int) -> None:
    spec = bundled_spec(name)
    assert {g.head_dim for g in spec.groups if isinstance(g, AttentionLayers)} == {head_dim}
    assert spec.hidden_size // spec.num_attention_heads == derived


def test_falcon_7b_multi_query_is_one_kv_head() -> None:
    spec = bundled_spec("falcon-7b")  # original RefinedWebModel config: n_head, n_layer
    full = attention(spec, "full")
    assert (spec.num_layers, full.num_kv_heads, full.head_dim) == (32, 1, 64)


def test_falcon_40b_new_decoder_uses_n_head_kv_and_hf_broadcasts() -> None:
    full = attention(bundled_spec("falcon-40b"), "full")
    assert (full.num_layers, full.num_kv_heads, full.cached_kv_heads_hf) == (60, 8, 128)


def test_falcon_model_type_without_multi_query_keeps_all_heads() -> None:
    config = {
        "model_type": "falcon",
        "hidden_size": 4544,
        "num_attention_heads": 71,
        "num_hidden_layers": 32,
        "multi_query": False,
    }
    assert attention(spec_from_config(config, name="f"), "full").num_kv_heads == 71


def test_gemma3_every_sixth_layer_is_global_and_defaults_fill_missing_heads() -> None:
    spec = bundled_spec("gemma-3-4b")  # config.json leaves heads and head_dim to defaults
    sliding, full = attention(spec, "sliding"), attention(spec, "full")
    assert (sliding.num_layers, full.num_layers) == (29, 5)
    assert (sliding.window, sliding.num_kv_heads, sliding.head_dim) == (1024, 4, 256)
    assert any("text_config" in note for note in spec.notes)


def test_gemma2_alternates_sliding_and_full() -> None:
    spec = bundled_spec("gemma-2-9b")
    assert attention(spec, "sliding").num_layers == attention(spec, "full").num_layers == 21
    assert attention(spec, "sliding").window == 4096


def test_gpt_oss_layer_types_list_is_read() -> None:
    spec = bundled_spec("gpt-oss-20b")
    assert attention(spec, "sliding").window == 128
    assert attention(spec, "full").num_layers == 12


def test_qwen_sliding_window_is_off_unless_use_sliding_window() -> None:
    config = bundled_config("qwen2.5-7b")
    assert config["sliding_window"] == 131072
    assert config["use_sliding_window"] is False
    assert [g.kind for g in bundled_spec("qwen2.5-7b").groups] == ["full"]
    on = dict(config, use_sliding_window=True, max_window_layers=20)
    spec = spec_from_config(on, name="q")
    assert attention(spec, "full").num_layers == 20  # layers below max_window_layers
    assert attention(spec, "sliding").num_layers == 8


def test_mistral_style_window_applies_to_every_layer() -> None:
    spec = bundled_spec("phi-3-mini-4k")
    assert attention(spec, "sliding").num_layers == 32
    assert attention(spec, "sliding").window == 2047


def test_llama4_rope_layers_are_chunked_every_fourth_is_global() -> None:
    spec = bundled_spec("llama-4-scout")
    chunked, full = attention(spec, "chunked"), attention(spec, "full")
    assert (chunked.num_layers, full.num_layers, chunked.window) == (36, 12, 8192)


def test_qwen3_next_hybrid_has_gated_deltanet_state() -> None:
    spec = bundled_spec("qwen3-next-80b-a3b")
    full = attention(spec, "full")
    (state,) = [g for g in spec.groups if isinstance(g, StateLayers)]
    assert (full.num_layers, full.num_kv_heads, full.head_dim) == (12, 2, 256)
    assert state.num_layers == 36
    assert state.conv_channels == 2 * 16 * 128 + 32 * 128
    assert (state.state_heads, state.state_head_elems) == (32, 128 * 128)


def test_qwen35_reads_fp32_state_dtype_from_the_config() -> None:
    (state,) = [g for g in bundled_spec("qwen3.5-27b").groups if isinstance(g, StateLayers)]
    assert state.state_dtype == "fp32"


@pytest.mark.parametrize("name", ["deepseek-r1", "deepseek-v3", "kimi-k2", "deepseek-v2-lite"])
def test_mla_models_cache_a_latent(name: str) -> None:
    spec = bundled_spec(name)
    (mla,) = spec.groups
    assert isinstance(mla, MlaLayers)
    assert (mla.kv_lora_rank, mla.qk_rope_head_dim) == (512, 64)
    assert not spec.has_indexer


@pytest.mark.parametrize(("name", "layers"), [("deepseek-v3.2", 61), ("glm-5", 78)])
def test_sparse_attention_models_add_an_indexer_cache(name: str, layers: int) -> None:
    spec = bundled_spec(name)
    indexer = [g for g in spec.groups if isinstance(g, IndexerLayers)]
    assert [(g.num_layers, g.index_head_dim) for g in indexer] == [(layers, 128)]


def test_missing_field_is_named_with_the_model_type() -> None:
    config = bundled_config("deepseek-r1")
    del config["qk_rope_head_dim"]
    with pytest.raises(ConfigError, match=r"'deepseek_v3' needs field 'qk_rope_head_dim'"):
        spec_from_config(config, name="r1", source="r1/config.json")


def test_layers_marked_sliding_need_a_window() -> None:
    config = {
        "model_type": "gpt_oss",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "sliding_window": None,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    with pytest.raises(ConfigError, match="sliding_window is not set"):
        spec_from_config(config, name="x")


def test_layer_types_length_must_match_layer_count() -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "layer_types": ["full_attention"] * 2,
    }
    with pytest.raises(ConfigError, match="2 entries but num_hidden_layers is 3"):
        spec_from_config(config, name="x")


def test_non_integer_field_is_rejected() -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": "four",
        "num_hidden_layers": 3,
    }
    with pytest.raises(ConfigError, match="'num_attention_heads' must be a positive integer"):
        spec_from_config(config, name="x")


def _llama_with(**fields: Any) -> dict[str, Any]:
    return {**bundled_config("llama-3.1-8b"), **fields}


def test_null_kv_heads_are_the_query_heads_with_a_note() -> None:
    spec = spec_from_config(_llama_with(num_key_value_heads=None), name="x")
    assert attention(spec, "full").num_kv_heads == 32  # transformers: num_attention_heads
    assert any("num_key_value_heads is null" in note for note in spec.notes)
    absent = {k: v for k, v in bundled_config("llama-3.1-8b").items() if k != "num_key_value_heads"}
    assert not any("null" in note for note in spec_from_config(absent, name="y").notes)


def test_a_null_head_dim_is_hidden_over_heads_with_a_note() -> None:
    spec = spec_from_config(_llama_with(head_dim=None), name="x")
    assert attention(spec, "full").head_dim == 4096 // 32
    assert any("head_dim is null" in note for note in spec.notes)


def test_a_null_head_dim_is_refused_where_the_family_has_its_own_default() -> None:
    config = {**bundled_config("gemma-2-9b"), "head_dim": None}  # 3584 / 16 = 224, not 256
    with pytest.raises(ConfigError, match="'head_dim' is null"):
        spec_from_config(config, name="x")


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -float("inf"), -5, 0, "131072", True, False, 2.5e5]
)
def test_a_max_context_that_is_no_count_of_tokens_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="'max_position_embeddings' must be a positive integer"):
        spec_from_config(_llama_with(max_position_embeddings=value), name="x")


@pytest.mark.parametrize("factor", [float("inf"), float("nan"), "8", True, -2])
def test_a_rope_factor_that_is_no_number_is_refused(factor: Any) -> None:
    rope = {"rope_type": "linear", "factor": factor}
    with pytest.raises(ConfigError, match="rope_scaling's factor must be a positive number"):
        spec_from_config(_llama_with(rope_scaling=rope), name="x")


def test_a_yarn_original_length_that_is_no_count_is_refused() -> None:
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "x"}
    with pytest.raises(ConfigError, match="'original_max_position_embeddings' must be"):
        spec_from_config(_llama_with(rope_scaling=rope), name="x")

"""Plain-attention architectures (model/plain.py): each is sized from the fields its vLLM
class reads, and a field it never reads does not change the answer."""

from __future__ import annotations

from typing import Any

import pytest

from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.families import plain_record
from kvtool.model.plain import PLAIN_ATTENTION, WRAPPERS
from kvtool.model.spec import AttentionLayers, ModelSpec


def attention(spec: ModelSpec) -> list[tuple[str, int, int, int, int | None]]:
    """(kind, layers, KV heads, head_dim, window) per attention group."""
    return [
        (g.kind, g.num_layers, g.num_kv_heads, g.head_dim, g.window)
        for g in spec.groups
        if isinstance(g, AttentionLayers)
    ]


def config(arch: str, **fields: Any) -> dict[str, Any]:
    base = {
        "architectures": [arch],
        "model_type": arch.lower(),
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "hidden_size": 1024,
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def test_transformers_gpt2_config_is_multi_head_with_its_own_field_names() -> None:
    """GPT-2's JSON says n_head / n_embd / n_layer, and vLLM gives every head its own K and V
    (gpt2.py:95 passes no KV-head count)."""
    from transformers import GPT2Config

    raw = {**GPT2Config().to_dict(), "architectures": ["GPT2LMHeadModel"]}
    spec = spec_from_config(raw, name="gpt2")
    assert attention(spec) == [("full", 12, 12, 64, None)]


@pytest.mark.parametrize("arch", ["OPTForCausalLM", "BloomForCausalLM", "GPTJForCausalLM"])
def test_mha_classes_ignore_a_kv_head_count_in_the_json(arch: str) -> None:
    spec = spec_from_config(config(arch), name="x")
    assert attention(spec)[0][2] == 16


@pytest.mark.parametrize(
    "arch", ["GraniteMoeForCausalLM", "InternLM2ForCausalLM", "MiMoForCausalLM", "OPTForCausalLM"]
)
def test_classes_that_divide_hidden_size_ignore_the_json_head_dim_and_say_so(arch: str) -> None:
    spec = spec_from_config(config(arch, head_dim=256), name="x")
    assert attention(spec)[0][3] == 64
    assert any("head_dim 256 in the config ignored" in n for n in spec.notes)


def test_classes_that_read_head_dim_use_it_and_apply_the_config_class_default() -> None:
    assert (
        attention(spec_from_config(config("ApertusForCausalLM", head_dim=256), name="x"))[0][3]
        == 256
    )
    # transformers' Glm4Config: head_dim 128 when the JSON has none (1024 / 16 would be 64)
    assert attention(spec_from_config(config("Glm4ForCausalLM"), name="x"))[0][3] == 128


@pytest.mark.parametrize(("flag", "heads"), [(True, 2), (False, 16), (None, 16)])
def test_chatglm_groups_kv_heads_only_with_multi_query_attention(
    flag: bool | None, heads: int
) -> None:
    raw = config(
        "ChatGLMModel",
        num_key_value_heads=None,
        num_hidden_layers=None,
        num_layers=40,
        multi_query_group_num=2,
        multi_query_attention=flag,
        kv_channels=128,
    )
    assert attention(spec_from_config(raw, name="glm"))[0][:3] == ("full", 40, heads)


MIXED = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]


def test_a_class_that_reads_layer_types_slides_the_marked_layers_only() -> None:
    spec = spec_from_config(
        config("Exaone4ForCausalLM", layer_types=MIXED, sliding_window=4096), name="x"
    )
    assert sorted(attention(spec)) == [("full", 2, 4, 64, None), ("sliding", 2, 4, 64, 4096)]


def test_a_class_without_per_layer_windows_slides_no_layer_of_a_mixed_model() -> None:
    """vLLM sets the model-wide window only when every layer slides (engine/arg_utils.py:2290),
    and Bailing's class gives no layer its own."""
    spec = spec_from_config(
        config("BailingMoeV2ForCausalLM", layer_types=MIXED, sliding_window=4096), name="x"
    )
    assert attention(spec) == [("full", 4, 4, 64, None)]
    assert any("layer_types ignored" in n for n in spec.notes)


@pytest.mark.parametrize("arch", ["BailingMoeV2ForCausalLM", "Exaone4ForCausalLM"])
def test_a_window_without_layer_types_slides_every_layer(arch: str) -> None:
    spec = spec_from_config(config(arch, sliding_window=4096), name="x")
    assert attention(spec) == [("sliding", 4, 4, 64, 4096)]


@pytest.mark.parametrize("off", [{"sliding_window": 0}, {"use_sliding_window": False}])
def test_a_zero_or_switched_off_window_slides_nothing(off: dict[str, Any]) -> None:
    raw = config("ApertusForCausalLM", sliding_window=4096)
    raw.update(off)
    assert attention(spec_from_config(raw, name="x")) == [("full", 4, 4, 64, None)]


def test_layers_marked_sliding_without_a_window_run_full_as_in_vllm() -> None:
    spec = spec_from_config(config("ApertusForCausalLM", layer_types=MIXED), name="x")
    assert attention(spec) == [("full", 4, 4, 64, None)]
    assert any("no sliding_window" in n for n in spec.notes)


def test_beam_slides_every_layer_by_its_config_class_default() -> None:
    assert attention(spec_from_config(config("BeamForCausalLM"), name="x")) == [
        ("sliding", 4, 4, 64, 4096)
    ]


@pytest.mark.parametrize(
    ("arch", "field", "value"),
    [("DeepseekForCausalLM", "rswa_window", 4096), ("IQuestCoderForCausalLM", "is_causal", False)],
)
def test_a_field_under_which_the_class_builds_another_layer_is_refused(
    arch: str, field: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=f"{arch} with {field}"):
        spec_from_config(config(arch, **{field: value}), name="x")
    spec_from_config(config(arch), name="x")  # and without it, sized


def test_a_config_missing_what_its_class_would_fill_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs layer_types, sliding_window"):
        spec_from_config(config("MuseGlimmerForCausalLM"), name="x")


def test_a_wrapper_is_sized_as_the_language_model_text_config_names() -> None:
    text = config("HyperCLOVAXForCausalLM", head_dim=128)
    raw = {"architectures": ["HCXVisionV2ForCausalLM"], "text_config": text}
    spec = spec_from_config(raw, name="hcx")
    assert attention(spec) == [("full", 4, 4, 128, None)]
    assert any("sized as its language model, HyperCLOVAXForCausalLM" in n for n in spec.notes)
    text_without = {k: v for k, v in text.items() if k != "architectures"}
    with pytest.raises(ConfigError, match="text_config names none"):
        spec_from_config({**raw, "text_config": text_without}, name="hcx")


def test_every_record_cites_a_vllm_file_and_line() -> None:
    for arch, rules in PLAIN_ATTENTION.items():
        assert rules.source.startswith("vllm/"), arch
        assert rules.source.split(":")[-1].isdigit(), arch
        assert plain_record(arch) is rules
    for arch, source in WRAPPERS.items():
        assert source.split(":")[-1].isdigit(), arch
    assert plain_record("LlamaForCausalLM") is None


def test_mla_with_a_model_wide_sliding_window_is_refused() -> None:
    """MLAAttention turns a model-wide window into SlidingWindowMLASpec
    (model_executor/layers/attention/mla_attention.py:1390): not the latent kvtool sizes."""
    raw = config(
        "Glm4MoeLiteForCausalLM",
        model_type="glm4_moe_lite",
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=192,
        v_head_dim=256,
    )
    assert spec_from_config(raw, name="x").is_mla
    with pytest.raises(ConfigError, match="MLA layers with a sliding window"):
        spec_from_config({**raw, "sliding_window": 4096}, name="x")

"""The closed world (model/families.py): every architecture vLLM 0.33.0 registers for text
generation is sized by rules checked against its model file, or refused by name; anything else
is refused, never sized as something it resembles. Every bundled profile is a known family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.errors import ConfigError
from kvtool.model.config import spec_from_config
from kvtool.model.families import (
    ARCHITECTURE_TYPES,
    KNOWN,
    REFUSED,
    coverage_rows,
    foreign_fields,
)
from kvtool.model.plain import PLAIN_ATTENTION, WRAPPERS
from kvtool.model.spec import AttentionLayers

ROOT = Path(__file__).parents[3]
PROFILES = ROOT / "profiles" / "models"
REGISTRY = ROOT / "tests" / "fixtures" / "models" / "vllm-0.33.0-text-generation.json"
PLAIN = {
    "architectures": ["CohereForCausalLM"],
    "model_type": "cohere",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 512,
    "torch_dtype": "bfloat16",
}


def registry() -> list[str]:
    return list(json.loads(REGISTRY.read_text())["architectures"])


def test_the_registry_fixture_is_vllm_0_33_0_s_whole_list() -> None:
    assert len(registry()) == 124
    assert {"LlamaForCausalLM", "DeepseekV4ForCausalLM", "Gemma4ForCausalLM"} <= set(registry())


@pytest.mark.parametrize("arch", registry())
def test_every_vllm_text_generation_architecture_is_sized_or_refused(arch: str) -> None:
    sized = arch in PLAIN_ATTENTION or arch in WRAPPERS or ARCHITECTURE_TYPES.get(arch) in KNOWN
    refused = arch in REFUSED
    assert sized != refused, f"{arch}: sized={sized} refused={refused}"
    assert sum(row[0] == arch for row in coverage_rows()) == 1


@pytest.mark.parametrize("arch", sorted(REFUSED))
def test_a_refused_architecture_is_refused_whatever_its_fields(arch: str) -> None:
    config = {**PLAIN, "architectures": [arch], "model_type": "llama"}
    with pytest.raises(ConfigError, match=f"does not model {arch}'s layer kinds"):
        spec_from_config(config, name="x")


@pytest.mark.parametrize("arch", sorted(PLAIN_ATTENTION))
def test_a_plain_attention_architecture_is_sized_without_a_guess(arch: str) -> None:
    rules = PLAIN_ATTENTION[arch]
    config = {**PLAIN, "architectures": [arch], "model_type": arch.lower()}
    config.update({field: [] if field == "layer_types" else 4096 for field in rules.requires})
    if "layer_types" in rules.requires:
        config["layer_types"] = ["full_attention", "sliding_attention"] * 2
    spec = spec_from_config(config, name="x")
    assert spec.num_layers == 4
    assert spec.groups
    assert all(isinstance(g, AttentionLayers) for g in spec.groups)  # plain attention only


def test_an_unrecorded_architecture_is_refused_by_name_even_when_it_looks_plain() -> None:
    config = {**PLAIN, "architectures": ["BrandNewForCausalLM"], "model_type": "brand_new"}
    with pytest.raises(
        ConfigError, match=r"has not checked how vLLM 0\.33\.0 builds BrandNewForCausalLM"
    ) as caught:
        spec_from_config(config, name="x")
    assert "LlamaForCausalLM" in (caught.value.hint or "")


def test_a_config_naming_neither_type_nor_architecture_is_refused() -> None:
    config = {k: v for k, v in PLAIN.items() if k not in ("architectures", "model_type")}
    with pytest.raises(ConfigError, match="names neither model_type nor architectures"):
        spec_from_config(config, name="x")


@pytest.mark.parametrize(
    "extra",
    [
        {"mamba_d_state": 16, "mamba_expand": 2},  # Jamba
        {"attn_layer_period": 8, "attn_layer_offset": 4},  # Jamba's schedule alone
        {"ssm_state_size": 128},  # Mamba-2
        {"layers_block_type": ["mamba", "attention"]},  # Granite-4.0-H style list
        {"attn_type_list": [0, 1]},  # MiniMax-Text-01 lightning attention
        {"linear_attn_config": {"kda_layers": [1]}},  # Kimi-Linear
        {"num_kv_shared_layers": 10},  # Gemma-3n KV sharing
        {"hybrid_override_pattern": "M*M*"},
    ],
)
def test_an_unknown_family_with_other_layer_kinds_is_refused(extra: dict[str, object]) -> None:
    config = {**PLAIN, "architectures": ["SomeHybridForCausalLM"], "model_type": "some_hybrid"}
    config.update(extra)
    with pytest.raises(ConfigError, match=r"vLLM 0\.33\.0 builds SomeHybridForCausalLM") as caught:
        spec_from_config(config, name="h")
    for field in extra:
        assert field in str(caught.value)


def test_a_config_without_model_type_but_with_mamba_fields_is_refused() -> None:
    config = {k: v for k, v in PLAIN.items() if k != "model_type"}
    config["architectures"] = ["MysteryForCausalLM"]
    config["mamba_d_conv"] = 4
    with pytest.raises(ConfigError, match="mamba_d_conv"):
        spec_from_config(config, name="m")


@pytest.mark.parametrize("folder", sorted(p.name for p in PROFILES.iterdir() if p.is_dir()))
def test_every_bundled_profile_is_a_known_family(folder: str) -> None:
    config = json.loads((PROFILES / folder / "config.json").read_text())
    spec = spec_from_config(config, name=folder)
    assert spec.model_type in KNOWN


def test_plain_attention_fields_are_not_foreign() -> None:
    assert foreign_fields(PLAIN) == []
    assert foreign_fields({"sliding_window": 4096, "rope_theta": 1e6, "head_dim": 128}) == []


def test_the_coverage_table_in_docs_is_the_code_s() -> None:
    from kvtool.model.families import coverage_markdown

    docs = (ROOT / "docs" / "sizing.md").read_text()
    shown = docs.split("<!-- coverage:start -->\n")[1].split("<!-- coverage:end -->")[0]
    assert shown == coverage_markdown()


@pytest.mark.parametrize("arch", ["Lfm2ForCausalLM", "OlmoHybridForCausalLM"])
def test_hybrids_kvtool_does_not_model_are_refused_even_without_tell_tale_fields(
    arch: str,
) -> None:
    config = {**PLAIN, "architectures": [arch], "model_type": arch.lower()}
    with pytest.raises(ConfigError, match=f"does not model {arch}"):
        spec_from_config(config, name="x")


DEEPSEEK_V4 = {  # the fields DeepSeek-V4's config adds beside MLA's (none on the marker list)
    **PLAIN,
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "compress_ratios": [1, 4, 128],
    "index_n_heads": 64,
    "index_head_dim": 128,
    "hc_mult": 4,
    "sliding_window": 128,
}


@pytest.mark.parametrize(
    "config",
    [
        {**DEEPSEEK_V4, "architectures": ["DeepseekV41ForCausalLM"], "model_type": "x"},
        {**DEEPSEEK_V4, "architectures": [], "model_type": "deepseek_v41"},  # by type alone
        {**PLAIN, "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2"},
        {**PLAIN, "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas"},
        {**PLAIN, "architectures": ["Step1ForCausalLM"], "model_type": "step1"},
        # MLA fields alone would size it as one MLA cache per layer: it has two
        {
            **PLAIN,
            "architectures": ["LongcatFlashForCausalLM"],
            "model_type": "longcat_flash",
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
        },
    ],
)
def test_architectures_whose_vllm_code_is_not_plain_attention_are_refused_by_name(
    config: dict[str, object],
) -> None:
    """DeepSeek-V4 used to be sized as sliding-window attention, about 89% too small."""
    with pytest.raises(ConfigError, match=r"kvtool does not model \w+'s layer kinds \(vllm/"):
        spec_from_config(config, name="x")

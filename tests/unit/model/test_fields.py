"""Reading a config.json: a missing or malformed field is named with the model type that
needs it, dtypes are normalized, and a multimodal wrapper's language model is found."""

import pytest

from kvtool.errors import ConfigError
from kvtool.model.fields import ConfigFields, infer_model_type, normalize_dtype, text_config_of


def test_a_missing_or_malformed_field_is_named() -> None:
    fields = ConfigFields({"model_type": "llama", "hidden_size": True}, "x.json")
    with pytest.raises(ConfigError, match="model_type 'llama' needs field 'num_hidden_layers'"):
        fields.require_int("num_hidden_layers")
    with pytest.raises(ConfigError, match="field 'hidden_size' must be a positive integer"):
        fields.require_int("hidden_size")
    assert fields.whole("num_experts", default=0) == 0


def test_family_defaults_fill_only_absent_keys() -> None:
    gemma = ConfigFields({"model_type": "gemma2", "head_dim": None}, "g")
    assert gemma.get("num_key_value_heads") == 4  # absent: transformers' default
    assert gemma.get("head_dim") is None  # present as null: not replaced


def test_dtypes_and_the_text_config() -> None:
    assert normalize_dtype("torch.bfloat16") == "bf16"
    assert normalize_dtype("float") == "fp32"
    assert normalize_dtype("int8") is None
    wrapper = {"torch_dtype": "bfloat16", "text_config": {"num_hidden_layers": 4}}
    assert text_config_of(wrapper) == {"num_hidden_layers": 4, "torch_dtype": "bfloat16"}
    assert text_config_of({"num_hidden_layers": 2}) == {"num_hidden_layers": 2}


def test_a_config_without_model_type_is_read_by_what_it_carries() -> None:
    notes: list[str] = []
    assert infer_model_type({"multi_query": True}, notes) == "falcon"
    assert "Falcon's rules because it has multi_query" in notes[0]
    assert infer_model_type({}, []) == "unknown"


def test_a_null_field_is_read_as_transformers_reads_it_with_a_note() -> None:
    notes: list[str] = []
    llama = ConfigFields({"model_type": "llama", "head_dim": None}, "l")
    assert llama.is_null("head_dim")
    assert not llama.is_null("num_key_value_heads")
    assert llama.null_read_as("head_dim", 128, "hidden_size/num_attention_heads", notes) == 128
    assert notes == [
        "head_dim is null in the config: read as hidden_size/num_attention_heads = 128, as"
        " transformers' LlamaConfig does (configuration_llama.py:86-89, 5.25.0)"
    ]


def test_a_null_field_with_a_family_default_is_refused() -> None:
    # transformers' Gemma2Config takes head_dim: int = 256 and refuses None
    gemma = ConfigFields({"model_type": "gemma2", "head_dim": None}, "g.json")
    with pytest.raises(ConfigError, match="'head_dim' is null, and model_type 'gemma2' takes"):
        gemma.null_read_as("head_dim", 448, "hidden_size/num_attention_heads", [])

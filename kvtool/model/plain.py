"""The architectures vLLM 0.33.0 serves with plain attention layers, each with the rules read
from its model file. Pure data (``families.plain_record`` looks it up).

"Plain" means the model class builds one ``Attention`` layer per decoder layer (K and V of one
head size, no state, no sharing), so kvtool's attention arithmetic applies, but the fields
that feed it differ from family to family, and a config field the class never reads must not
change kvtool's answer either. Each record says, from the file and line cited:

* ``head_dim``: ``"config"`` when the class reads ``head_dim`` (else ``hidden_size //
  num_attention_heads``); ``"hidden"`` when it always divides (a ``head_dim`` in the JSON is
  then ignored, as vLLM ignores it).
* ``kv_heads``: ``"config"`` (``num_key_value_heads``, else all query heads), ``"mha"`` (the
  class passes no KV-head count: every query head has its own K and V), or ``"chatglm"``
  (``multi_query_group_num`` only when ``multi_query_attention`` is true).
* ``windows``: ``"layer_types"`` when the class gives each layer marked
  ``sliding_attention`` the config's ``sliding_window``; ``"model"`` when it passes no
  per-layer window. Either way vLLM's cache-level window (``engine/arg_utils.py:2290``:
  ``sliding_window`` when ``layer_types`` is absent or all sliding) applies to the rest, so a
  ``"model"`` class with a mixed ``layer_types`` slides on no layer at all.
* ``defaults``: the Hugging Face config class's value for a field its JSON may leave out.
* ``refuse``: config fields under which the class builds another kind of layer.
* ``requires``: fields the JSON must carry, because the config class would fill them by a rule
  kvtool does not copy.

A config whose ``use_sliding_window`` is false slides on no layer: the config classes that
carry that flag (Qwen2's and its copies) clear ``sliding_window`` when it is false.

The list of every text-generation architecture vLLM 0.33.0 registers is kept beside the tests
(``tests/fixtures/models/vllm-0.33.0-text-generation.json``); a test fails when one of them is
neither sized nor refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

_NONE: Mapping[str, Any] = MappingProxyType({})


class Plain(NamedTuple):
    """How one architecture's vLLM class builds its attention layers (see the module text)."""

    source: str
    head_dim: Literal["config", "hidden"] = "config"
    kv_heads: Literal["config", "mha", "chatglm"] = "config"
    windows: Literal["layer_types", "model"] = "layer_types"
    defaults: Mapping[str, Any] = _NONE
    refuse: Mapping[str, str] = _NONE
    # fields the config must carry: the config class fills them in a way kvtool does not model
    requires: tuple[str, ...] = ()
    # learned attention sinks (fewer backends serve them): "granite" = granite.py:109, the
    # config's attention_sinks, else whether it has layer_types
    sinks: Literal["no", "yes", "granite"] = "no"


_M = "vllm/model_executor/models/"
_LLAMA = _M + "llama.py:212"

PLAIN_ATTENTION: dict[str, Plain] = {
    "AfmoeForCausalLM": Plain(_M + "afmoe.py:239"),
    "ApertusForCausalLM": Plain(_M + "apertus.py:192"),
    "BailingMoeForCausalLM": Plain(_M + "bailing_moe.py:147", windows="model"),
    "BailingMoeV2ForCausalLM": Plain(_M + "bailing_moe.py:147", windows="model"),
    # vLLM's BeamConfig (transformers_utils/configs/beam.py) slides every layer by default
    "BeamForCausalLM": Plain(
        "vllm/models/beam/nvidia/attention.py:133", defaults={"sliding_window": 4096}
    ),
    "BloomForCausalLM": Plain(_M + "bloom.py:127", head_dim="hidden", kv_heads="mha"),
    "ChatGLMModel": Plain(_M + "chatglm.py:114", head_dim="hidden", kv_heads="chatglm"),
    "ChatGLMForConditionalGeneration": Plain(
        _M + "chatglm.py:114", head_dim="hidden", kv_heads="chatglm"
    ),
    "CohereForCausalLM": Plain(_M + "commandr.py:246", windows="model"),
    "DeepseekForCausalLM": Plain(
        _M + "deepseek_v2.py:221",
        head_dim="hidden",
        windows="model",
        refuse={"rswa_window": "deepseek_v2.py:209 builds RSWAAttention, its own cache spec"},
    ),
    "Ernie4_5ForCausalLM": Plain(_LLAMA),
    "Ernie4_5_MoeForCausalLM": Plain(_M + "ernie45_moe.py:278", windows="model"),
    "ExaoneForCausalLM": Plain(_M + "exaone.py:168", windows="model"),
    "Exaone4ForCausalLM": Plain(_M + "exaone4.py:185"),
    # vLLM's FlintConfig defaults head_dim to 128
    "FlintForCausalLM": Plain(
        "vllm/models/flint/model.py:297", defaults={"head_dim": 128}, sinks="yes"
    ),
    "GemmaForCausalLM": Plain(_M + "gemma.py:183", windows="model"),
    "Glm4ForCausalLM": Plain(_M + "glm4.py:117", windows="model", defaults={"head_dim": 128}),
    "GPT2LMHeadModel": Plain(_M + "gpt2.py:95", head_dim="hidden", kv_heads="mha"),
    "GPTJForCausalLM": Plain(_M + "gpt_j.py:104", head_dim="hidden", kv_heads="mha"),
    "GraniteForCausalLM": Plain(_M + "granite.py:225", sinks="granite"),
    "GraniteSWAForCausalLM": Plain(_M + "granite.py:225", sinks="granite"),
    "GraniteMoeForCausalLM": Plain(_M + "granitemoe.py:214", head_dim="hidden", sinks="granite"),
    "GraniteMoeSharedForCausalLM": Plain(
        _M + "granitemoe.py:214", head_dim="hidden", sinks="granite"
    ),
    "GraniteMoeSWAForCausalLM": Plain(
        _M + "granitemoe.py:214",
        head_dim="hidden",
        requires=("layer_types", "sliding_window"),
        sinks="granite",
    ),
    "HYV3ForCausalLM": Plain(_M + "hy_v3.py:292", windows="model", defaults={"head_dim": 128}),
    "HyperCLOVAXForCausalLM": Plain(_M + "hyperclovax.py:171", windows="model"),
    "InternLM2ForCausalLM": Plain(_M + "internlm2.py:148", head_dim="hidden", windows="model"),
    "InternLM3ForCausalLM": Plain(_LLAMA),
    # transformers' IQuestCoderConfig: head_dim 128 by default; is_causal false would build
    # encoder-only attention, which keeps no KV cache
    "IQuestCoderForCausalLM": Plain(
        _LLAMA,
        defaults={"head_dim": 128},
        refuse={"is_causal": "llama.py:208 builds EncoderOnlyAttention (no KV cache)"},
    ),
    "K2HorizonForCausalLM": Plain(_M + "k2_horizon.py:656", windows="model"),
    "LagunaForCausalLM": Plain(_M + "laguna.py:410", defaults={"head_dim": 128}),
    "LLaMAForCausalLM": Plain(_LLAMA),
    "MiMoForCausalLM": Plain(_M + "qwen2.py:196", head_dim="hidden", windows="model"),
    "MiniCPMForCausalLM": Plain(_M + "minicpm.py:293", head_dim="hidden", windows="model"),
    "Ministral3ForCausalLM": Plain(_LLAMA),
    "MuseGlimmerForCausalLM": Plain(
        _M + "muse_glimmer.py:966", requires=("layer_types", "sliding_window")
    ),
    "NemotronForCausalLM": Plain(_M + "nemotron.py:232", windows="model"),
    "OlmoeForCausalLM": Plain(_M + "olmoe.py:180", head_dim="hidden", windows="model"),
    "OPTForCausalLM": Plain(_M + "opt.py:106", head_dim="hidden", kv_heads="mha"),
    "OrionForCausalLM": Plain(_M + "orion.py:140", head_dim="hidden", windows="model"),
    "Param2MoEForCausalLM": Plain(_M + "param2moe.py:177", windows="model"),
    "PhiMoEForCausalLM": Plain(_M + "phimoe.py:356", windows="model"),
    "SarvamMoEForCausalLM": Plain(
        _M + "bailing_moe.py:147", windows="model", defaults={"head_dim": 64}
    ),
    "SolarForCausalLM": Plain(_M + "solar.py:162", windows="model"),
    "StableLmForCausalLM": Plain(_M + "stablelm.py:154", head_dim="hidden", windows="model"),
    "TeleChat3ForCausalLM": Plain(_LLAMA),
    "TeleFLMForCausalLM": Plain(_LLAMA),
}

# multimodal wrappers whose KV cache is the language model that text_config.architectures names
WRAPPERS: dict[str, str] = {
    "HCXVisionV2ForCausalLM": _M + "hyperclovax_vision_v2.py:441",
}

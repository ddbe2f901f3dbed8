"""The closed world: the model families whose layer kinds kvtool knows, and what to do with one
it does not. Pure.

A family kvtool knows is sized by its rules (``model/config.py``). A family it does not know is
sized as plain attention only when nothing in its config suggests another kind of layer — a
Mamba or other state-space mixer, linear or lightning attention, a per-layer block list, KV
shared between layers — and always with a note naming it as unverified; otherwise it is refused
with the fields kvtool could not interpret. Guessing "attention" for a Jamba or a Mamba-2 model
gives an answer several times off, with nothing to say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvtool.errors import ConfigError

# model_type -> the vLLM model file its layer layout was checked against
KNOWN: dict[str, str] = {
    "llama": "vllm/model_executor/models/llama.py",
    "mistral": "vllm/model_executor/models/llama.py",
    "mixtral": "vllm/model_executor/models/mixtral.py",
    "qwen2": "vllm/model_executor/models/qwen2.py",
    "qwen2_moe": "vllm/model_executor/models/qwen2_moe.py",
    "qwen3": "vllm/model_executor/models/qwen3.py",
    "qwen3_moe": "vllm/model_executor/models/qwen3_moe.py",
    "qwen3_next": "vllm/model_executor/models/qwen3_next.py",
    "qwen3_5_text": "vllm/model_executor/models/qwen3_5.py",
    "qwen3_5_moe_text": "vllm/model_executor/models/qwen3_5.py",
    "gemma2": "vllm/model_executor/models/gemma2.py",
    "gemma3_text": "vllm/model_executor/models/gemma3.py",
    "falcon": "vllm/model_executor/models/falcon.py",
    "RefinedWeb": "vllm/model_executor/models/falcon.py",
    "RefinedWebModel": "vllm/model_executor/models/falcon.py",
    "llama4_text": "vllm/model_executor/models/llama4.py",
    "gpt_oss": "vllm/model_executor/models/gpt_oss.py",
    "deepseek_v2": "vllm/model_executor/models/deepseek_v2.py",
    "deepseek_v3": "vllm/model_executor/models/deepseek_v2.py",
    "deepseek_v32": "vllm/model_executor/models/deepseek_v2.py",
    "kimi_k2": "vllm/model_executor/models/deepseek_v2.py",
    "glm4_moe": "vllm/model_executor/models/glm4_moe.py",
    "glm_moe_dsa": "vllm/model_executor/models/deepseek_v2.py",
    "minimax_m2": "vllm/model_executor/models/minimax_m2.py",
    "phi3": "vllm/model_executor/models/phi3.py",
    "nemotron_h": "vllm/model_executor/models/nemotron_h.py",
    "mamba": "vllm/model_executor/models/mamba.py",
    "falcon_mamba": "vllm/model_executor/models/mamba.py",
    "jamba": "vllm/model_executor/models/jamba.py",
    "kimi_linear": "vllm/model_executor/models/kimi_k3/nvidia/model.py",
    "gemma3n_text": "vllm/model_executor/models/gemma3n.py",
    "mamba2": "vllm/model_executor/models/mamba2.py",
    "granitemoehybrid": "vllm/model_executor/models/granitemoehybrid.py",
    "falcon_h1": "vllm/model_executor/models/falcon_h1.py",
    "zamba2": "vllm/model_executor/models/zamba2.py",
    "bamba": "vllm 0.23.0 vllm/model_executor/models/bamba.py",
    "plamo2": "vllm 0.26.0 vllm/model_executor/models/plamo2.py",
    "minimax_text_01": "vllm 0.23.0 vllm/model_executor/models/minimax_text_01.py",
    "minimax_m1": "vllm 0.23.0 vllm/model_executor/models/minimax_text_01.py",
}

# families whose layout kvtool has checked only against vLLM (and the textbook formula): SGLang's
# and transformers' layouts for them are not modelled, so those engines are refused for them
# rather than given vLLM's numbers
VLLM_ONLY = frozenset(
    {
        "mamba", "falcon_mamba", "jamba", "mamba2", "bamba", "granitemoehybrid", "falcon_h1",
        "zamba2", "kimi_linear", "gemma3n_text", "minimax_text_01", "minimax_m1", "plamo2",
    }
)  # fmt: skip

# families vLLM 0.33.0 refuses to load, with the last release that served them
# (vllm/model_executor/models/registry.py, _PREVIOUSLY_SUPPORTED_MODELS)
DROPPED_BY_VLLM: dict[str, str] = {
    "minimax_text_01": "0.23.0",
    "minimax_m1": "0.23.0",
    "plamo2": "0.26.0",
    "bamba": "0.23.0",
}

# ``architectures[0]`` -> model_type, for configs saved without a model_type (transformers'
# own mapping, for the families whose layout rules kvtool applies by model_type).
ARCHITECTURE_TYPES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Qwen3NextForCausalLM": "qwen3_next",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "FalconForCausalLM": "falcon",
    "Llama4ForCausalLM": "llama4_text",
    "Llama4ForConditionalGeneration": "llama4",
    "GptOssForCausalLM": "gpt_oss",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "Phi3ForCausalLM": "phi3",
    "NemotronHForCausalLM": "nemotron_h",
    "Glm4MoeForCausalLM": "glm4_moe",
    "MiniMaxM2ForCausalLM": "minimax_m2",
    "MambaForCausalLM": "mamba",
    "FalconMambaForCausalLM": "falcon_mamba",
    "Mamba2ForCausalLM": "mamba2",
    "JambaForCausalLM": "jamba",
    "BambaForCausalLM": "bamba",
    "GraniteMoeHybridForCausalLM": "granitemoehybrid",
    "FalconH1ForCausalLM": "falcon_h1",
    "Zamba2ForCausalLM": "zamba2",
    "Plamo2ForCausalLM": "plamo2",
    "MiniMaxText01ForCausalLM": "minimax_text_01",
    "MiniMaxM1ForCausalLM": "minimax_m1",
    "KimiLinearForCausalLM": "kimi_linear",
    "Gemma3nForCausalLM": "gemma3n_text",
    "Gemma3nForConditionalGeneration": "gemma3n",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "GlmMoeDsaForCausalLM": "glm_moe_dsa",
}

# Hybrid and attention-free architectures vLLM 0.33.0 serves whose layer kinds kvtool does not
# model: their configs are refused (short convolutions, other linear-attention kinds)
REFUSED: dict[str, str] = {
    "Lfm2ForCausalLM": "vllm/model_executor/models/lfm2.py (short conv)",
    "Lfm2MoeForCausalLM": "vllm/model_executor/models/lfm2_moe.py (short conv)",
    "BailingMoeV25ForCausalLM": "vllm/model_executor/models/bailing_moe_linear.py",
    "BailingMoeV3ForCausalLM": "vllm/model_executor/models/bailing_moe_v3.py",
    "OlmoHybridForCausalLM": "vllm/model_executor/models/olmo_hybrid.py",
    "AliceAIForCausalLM": "vllm/model_executor/models/alice_ai.py",
    # checked against vLLM 0.33.0's model files: sizing these as plain attention from their
    # fields would be wrong, so they are refused until modelled (issue "every architecture")
    "DeepseekV4ForCausalLM": "vllm/models/deepseek_v4/attention.py:240 (compressed KV per"
    " layer, sparse-attention indexer caches and compressor states)",
    "DeepseekV4ForConditionalGeneration": "vllm/models/deepseek_v4/attention.py:240 (compressed"
    " KV, indexer caches, compressor states)",
    "DeepseekV41ForCausalLM": "vllm/models/deepseek_v41 (DeepSeek-V4's compressed caches)",
    "Cohere2ForCausalLM": "vllm/model_executor/models/commandr.py:246 (window sliding_window"
    " + 1 on the layers sliding_window_pattern marks)",
    "DeciLMForCausalLM": "vllm/model_executor/models/nemotron_nas.py:152 (KV heads per layer"
    " from block_configs, some layers without attention)",
    "DoryForCausalLM": "vllm/model_executor/models/dory.py:119 (MLP-only layers, a KV cache per"
    " recurrent loop)",
    "InklingForConditionalGeneration": "vllm/models/inkling/nvidia/model.py:152 (its own"
    " attention: KV heads and head_dim per layer, a short-conv state)",
    "Step1ForCausalLM": "vllm/model_executor/models/step1.py:136 (KV heads from"
    " num_attention_groups)",
    "TeleChat2ForCausalLM": "vllm/model_executor/models/telechat2.py:49 (heads and layers from"
    " n_head and n_layer through vLLM's attribute_map)",
    "Step3p5ForCausalLM": "vllm/model_executor/models/step3p5.py:261 (KV heads from"
    " num_attention_groups, query heads per layer kind)",
    "ExaoneMoeForCausalLM": "vllm/model_executor/models/exaone_moe.py:263 (a window per layer"
    " from sliding_windows)",
    "PanguEmbeddedForCausalLM": "vllm/model_executor/models/openpangu.py:478 (windows from"
    " interleaved_sliding_window)",
    "IQuestLoopCoderForCausalLM": "vllm/model_executor/models/iquest_loopcoder.py:156 (loop_num"
    " attention modules per layer, the later ones sliding)",
    "LongcatFlashForCausalLM": "vllm/model_executor/models/longcat_flash.py:269 (two MLA"
    " attention modules per decoder layer)",
    "Glm5NextForCausalLM": "vllm/models/glm5next/common/model.py:396 (MLA with a sparse"
    " indexer beside KDA linear-attention layers)",
    "Step3TextForCausalLM": "vllm/model_executor/models/step3_text.py:201 (one KV head;"
    " the config's num_attention_groups)",
    "Cohere2MoeForCausalLM": "vllm/model_executor/models/cohere2_moe.py:269 (window"
    " sliding_window + 1 on the layers its pattern marks)",
    "MiniMaxM3SparseForCausalLM": "vllm/models/minimax_m3/nvidia/model.py:713 (sparse layers"
    " with their own attention and an indexer cache)",
}

# model types refused whatever architecture the config names (a config may omit it)
REFUSED_TYPES: dict[str, str] = {
    "deepseek_v4": "DeepseekV4ForCausalLM",
    "deepseek_v41": "DeepseekV41ForCausalLM",
}


def coverage_rows() -> list[tuple[str, str, str, str]]:
    """(architecture, model_type, what kvtool does, the vLLM file) for docs/sizing.md."""
    rows = []
    for arch, model_type in sorted(ARCHITECTURE_TYPES.items()):
        text_type = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
                     "gemma3n": "gemma3n_text"}.get(model_type, model_type)  # fmt: skip
        source = KNOWN.get(text_type, "")
        if not source:
            continue
        status = "exact"
        if text_type in DROPPED_BY_VLLM:
            status = f"exact, by vLLM {DROPPED_BY_VLLM[text_type]}'s rules (0.33.0 refuses it)"
        if text_type in VLLM_ONLY:
            status += "; vLLM and formula only"
        rows.append((arch, text_type, status, source))
    rows += [(arch, "", "refused", source) for arch, source in sorted(REFUSED.items())]
    return rows


def coverage_markdown() -> str:
    """The coverage table, as docs/sizing.md shows it (a test keeps the two equal)."""
    lines = [
        "| architecture | model_type | kvtool | checked against |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {t or '-'} | {s} | `{src}` |" for a, t, s, src in coverage_rows()]
    return "\n".join(lines) + "\n"


# config keys that mean "this model has layers that are not plain attention"
_FOREIGN_PREFIXES = (
    "mamba", "ssm", "d_conv", "d_state", "conv_kernel", "conv_l_cache", "linear_attn",
    "linear_num", "linear_key", "linear_value", "linear_conv", "lightning", "attn_layer_",
    "attn_type", "layers_block_type", "hybrid", "kda", "full_attn_layers", "kv_shared",
    "num_kv_shared", "block_types", "rwkv", "time_mix", "retention", "shared_attention",
    "mixer", "state_size", "expand", "time_step", "full_attention_interval",
)  # fmt: skip


def foreign_fields(config: Mapping[str, Any]) -> list[str]:
    """The keys of ``config`` that name a layer kind other than plain attention."""
    return sorted(k for k in config if str(k).lower().startswith(_FOREIGN_PREFIXES))


def check_engine(model_type: str, engine: str, *, sizes_hybrids: bool) -> None:
    """InputError when kvtool has not modelled ``engine``'s layout for this family:
    ``sizes_hybrids`` is the engine's ``EngineRules.sizes_hybrids`` (its layout of the
    ``VLLM_ONLY`` families was checked)."""
    if model_type in VLLM_ONLY and not sizes_hybrids:
        raise ConfigError(
            f"kvtool models {model_type} only as vLLM allocates it (and the textbook formula);"
            f" how {engine} lays it out is not modelled",
            "use --engine vllm or --engine formula",
        )


def check_known(
    model_type: str, architecture: str, config: Mapping[str, Any], source: str, notes: list[str]
) -> None:
    """Let a known family through; a plain-attention unknown one through with a note; refuse
    an unknown one whose config suggests other layer kinds (ConfigError naming the fields)."""
    if not architecture or architecture not in REFUSED:
        architecture = REFUSED_TYPES.get(model_type, architecture)
    if architecture in REFUSED:
        raise ConfigError(
            f"{source}: kvtool does not model {architecture}'s layer kinds"
            f" ({REFUSED[architecture]})",
            "see docs/sizing.md for the families kvtool sizes",
        )
    if model_type in KNOWN:
        if model_type in DROPPED_BY_VLLM:
            notes.append(
                f"vLLM 0.33.0 no longer loads {architecture or model_type} (served until"
                f" {DROPPED_BY_VLLM[model_type]}): sized by the rules of its last in-tree model"
            )
        return
    named = architecture or model_type
    foreign = foreign_fields(config)
    if foreign:
        shown = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        raise ConfigError(
            f"{source}: kvtool does not know {named} (model_type {model_type!r}) and its config"
            f" has fields of layers that are not plain attention ({shown}); sizing it as"
            " attention would be wrong",
            "see docs/sizing.md for the families kvtool sizes; a family it does not cover is"
            " refused rather than guessed",
        )
    notes.append(
        f"{named} (model_type {model_type!r}) is not a family kvtool has verified: sized as plain"
        " attention from its fields, as nothing in the config suggests other layer kinds"
    )

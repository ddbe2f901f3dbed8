"""The closed world: the model families whose layer kinds kvtool knows, and what to do with one
it does not. Pure.

A family kvtool knows is sized by its rules (``model/config.py``): by ``model_type`` here, or
by architecture when vLLM builds it with plain attention layers (``model/plain.py``, each
record read from the model file). Every other architecture is refused by name, with what it has
that kvtool does not model when that is known (``REFUSED``) and the config fields that suggest
other layer kinds when it is not: guessing "attention" for DeepSeek-V4 or a Jamba gives an
answer several times off, with nothing to say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvtool.errors import ConfigError

if TYPE_CHECKING:
    from kvtool.model.engines import EngineRules
    from kvtool.model.plain import Plain

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
    # DeepSeek-V2's latent cache (MLAAttention, kv_lora_rank + qk_rope_head_dim, one per layer);
    # both are on vLLM's is_deepseek_mla list (model_arch_config_convertor.py:297)
    "axk1": "vllm/model_executor/models/AXK1.py:548",
    "glm4_moe_lite": "vllm/model_executor/models/glm4_moe_lite.py:150",
    "deepseek_v4": "vllm/models/deepseek_v4/attention.py:238",  # model/dsv4.py
    # KV heads, head sizes and windows per layer kind (model/config.py _per_kind_attention)
    "mimo_v2_flash": "vllm/model_executor/models/mimo_v2.py:382",
    "mimo_v2": "vllm/model_executor/models/mimo_v2.py:382",
    "gemma4_text": "vllm/model_executor/models/gemma4.py:449",
}

# families whose layout kvtool has checked only against vLLM (and the textbook formula): SGLang's
# and transformers' layouts for them are not modelled, so those engines are refused for them
# rather than given vLLM's numbers
VLLM_ONLY = frozenset(
    {
        "mamba", "falcon_mamba", "jamba", "mamba2", "bamba", "granitemoehybrid", "falcon_h1",
        "zamba2", "kimi_linear", "gemma3n_text", "minimax_text_01", "minimax_m1", "plamo2",
        "mimo_v2_flash", "mimo_v2", "gemma4_text",
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
    "DeepseekV4ForCausalLM": "deepseek_v4",
    "MiMoV2FlashForCausalLM": "mimo_v2_flash",
    "MiMoV2ForCausalLM": "mimo_v2",
    "Gemma4ForCausalLM": "gemma4_text",
    "Gemma4ForConditionalGeneration": "gemma4",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "AXK1ForCausalLM": "axk1",
    "Glm4MoeLiteForCausalLM": "glm4_moe_lite",
    # vLLM's Mistral-format reader names it so with model_type deepseek_v3
    # (transformers_utils/configs/mistral.py:34); deepseek_v2.py:1215 builds DeepSeek-V3's MLA
    "MistralLarge3ForCausalLM": "deepseek_v3",
}

# Hybrid and attention-free architectures vLLM 0.33.0 serves whose layer kinds kvtool does not
# model: their configs are refused (short convolutions, other linear-attention kinds)
REFUSED: dict[str, str] = {
    "Lfm2ForCausalLM": "vllm/model_executor/models/lfm2.py (short conv)",
    "Lfm2MoeForCausalLM": "vllm/model_executor/models/lfm2_moe.py (short conv)",
    "BailingMoeV2_5ForCausalLM": "vllm/model_executor/models/bailing_moe_linear.py:365"
    " (MLA beside linear-attention layers)",
    "BailingMoeV3ForCausalLM": "vllm/model_executor/models/bailing_moe_v3.py",
    "OlmoHybridForCausalLM": "vllm/model_executor/models/olmo_hybrid.py",
    "AliceAIForCausalLM": "vllm/model_executor/models/alice_ai.py",
    # checked against vLLM 0.33.0's model files: sizing these as plain attention from their
    # fields would be wrong, so they are refused until modelled (issue "every architecture")
    "DeepseekV4ForConditionalGeneration": "vllm/models/deepseek_v4 (a multimodal wrapper:"
    " kvtool sizes the text model, DeepseekV4ForCausalLM, only)",
    "DeepseekV41ForCausalLM": "vllm/models/deepseek_v41 (V4.1's caches are not checked against"
    " V4's)",
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
    "DbrxForCausalLM": "vllm/model_executor/models/dbrx.py:200 (KV heads in"
    " attn_config.kv_n_heads, MLP widths in ffn_config: not read)",
    "DomynEdgeForCausalLM": "vllm/model_executor/models/domyn_edge.py:97 (head_dim and window"
    " per layer from per_layer_config)",
    "ExaoneMoEForCausalLM": "vllm/model_executor/models/exaone_moe.py:263 (a window per layer"
    " from sliding_windows)",
    "HrmTextForCausalLM": "vllm/model_executor/models/hrm_text.py:217 (recurrent H and L"
    " stacks, each with its own caches)",
    "HYV4ForCausalLM": "vllm/models/hy_v4/nvidia/attention.py:508 (MLA with a lightning"
    " indexer cache)",
    "InklingForCausalLM": "vllm/models/inkling/nvidia/model.py:152 (its own attention: KV"
    " heads and head_dim per layer, a short-conv state)",
    "LongcatFlashNgramForCausalLM": "vllm/model_executor/models/longcat_flash.py:269 (two MLA"
    " attention modules per decoder layer)",
    "MiniCPM3ForCausalLM": "vllm/model_executor/models/minicpm3.py:126 (full K and V per head"
    " of qk_nope + qk_rope dims, not an MLA latent, though the config has kv_lora_rank)",
    "NemotronHPuzzleForCausalLM": "vllm/model_executor/models/nemotron_h.py:295 (per-layer"
    " configs from get_nemotron_h_config_for_layer)",
    "PanguProMoEV2ForCausalLM": "vllm/model_executor/models/openpangu.py:630 (sink attention"
    " with its own V size, per-layer windows)",
    "PanguUltraMoEForCausalLM": "vllm/model_executor/models/openpangu.py:366 (MLA or sink"
    " attention, chosen by fields)",
    "Plamo3ForCausalLM": "vllm/model_executor/models/plamo3.py:199 (windows from"
    " interleaved_sliding_window)",
    "Qwen4ExpForCausalLM": "vllm/models/qwen4_exp/nvidia/model.py:228 (Gated DeltaNet layers"
    " of its own beside attention)",
    "Rnj1ForCausalLM": "vllm/model_executor/models/rnj1.py:160 (chunked_attention layers kept"
    " as a window with a look-back chunk)",
    "SarvamMLAForCausalLM": "vllm/model_executor/models/sarvam.py:223 (MLA layers, but vLLM's"
    " is_deepseek_mla list omits sarvam_mla: which backend serves them is not settled)",
    "Step5ForCausalLM": "vllm/models/step5/nvidia/model.py:1196 (KV heads and head_dim per"
    " layer kind from attention_other_setting)",
}

REFUSED["Gemma4UnifiedForConditionalGeneration"] = (
    "vllm/model_executor/models/gemma4_unified.py (not checked against Gemma 4's text model)"
)
REFUSED["MiMoV2OmniForCausalLM"] = (
    "vllm/model_executor/models/mimo_v2_omni.py (not checked against MiMo-V2's text model)"
)

# model types refused whatever architecture the config names (a config may omit it)
REFUSED_TYPES: dict[str, str] = {
    "deepseek_v41": "DeepseekV41ForCausalLM",
}


# multimodal configs' model_type -> their text model's
_TEXT_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
               "gemma3n": "gemma3n_text", "gemma4": "gemma4_text"}  # fmt: skip


def plain_record(architecture: str) -> Plain | None:
    """``plain.PLAIN_ATTENTION``'s record of ``architecture``; the records are read only for
    an architecture outside the families named here (``kvtool size``'s start-up)."""
    if not architecture or architecture in ARCHITECTURE_TYPES or architecture in REFUSED:
        return None
    from kvtool.model.plain import PLAIN_ATTENTION

    return PLAIN_ATTENTION.get(architecture)


def wrapper_source(architecture: str) -> str:
    """The vLLM file of a multimodal wrapper sized as its text model (``plain.WRAPPERS``)."""
    if not architecture or architecture in ARCHITECTURE_TYPES or architecture in REFUSED:
        return ""
    from kvtool.model.plain import WRAPPERS

    return WRAPPERS.get(architecture, "")


def coverage_rows() -> list[tuple[str, str, str, str]]:
    """(architecture, model_type, what kvtool does, the vLLM file) for docs/sizing.md."""
    from kvtool.model.plain import PLAIN_ATTENTION, WRAPPERS

    rows = []
    for arch, model_type in sorted(ARCHITECTURE_TYPES.items()):
        text_type = _TEXT_TYPES.get(model_type, model_type)
        source = KNOWN.get(text_type, "")
        if not source:
            continue
        status = "exact"
        if text_type in DROPPED_BY_VLLM:
            status = f"exact, by vLLM {DROPPED_BY_VLLM[text_type]}'s rules (0.33.0 refuses it)"
        if text_type in VLLM_ONLY:
            status += "; " + _hybrid_engines(text_type)
        if text_type == "deepseek_v4":
            status += " under vLLM; kvtool size only (parameters and chunks not modelled)"
        rows.append((arch, text_type, status, source))
    for arch, plain in PLAIN_ATTENTION.items():
        rows.append((arch, "", "exact: " + _plain_summary(plain), plain.source))
    for arch, source in WRAPPERS.items():
        rows.append((arch, "", "as the language model text_config names", source))
    rows += [(arch, "", "refused", source) for arch, source in REFUSED.items()]
    return sorted(rows, key=lambda row: row[0].lower())


def _hybrid_engines(model_type: str) -> str:
    """``vLLM, formula and hf only``: the engines whose layout of a hybrid family was checked."""
    from kvtool.model.engines import ENGINES

    names = {"vllm": "vLLM"}
    order = ("vllm", "formula", "sglang", "hf", "hf-legacy")
    rules = [ENGINES[name] for name in order]
    checked = [names.get(r.name, r.name) for r in rules
               if r.sizes_hybrids or model_type in r.checked_hybrids]  # fmt: skip
    return ", ".join(checked[:-1]) + f" and {checked[-1]} only"


def _plain_summary(plain: Plain) -> str:
    parts = ["plain attention"]
    if plain.head_dim == "hidden":
        parts.append("head_dim = hidden/heads")
    if plain.kv_heads != "config":
        parts.append(
            {"mha": "a KV head per query head", "chatglm": "multi_query_group_num"}[plain.kv_heads]
        )
    if plain.windows == "model":
        parts.append("no per-layer window")
    return ", ".join(parts)


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


def check_engine(model_type: str, rules: EngineRules) -> None:
    """ConfigError when kvtool has not modelled ``rules``' engine's layout for this family:
    an engine that does not size every ``VLLM_ONLY`` family (``sizes_hybrids``) sizes only
    those in its ``checked_hybrids``; ``hybrids_refused`` gives the reason for some. An engine
    with ``model_types`` sizes those families only (``model_types_refused`` says why not)."""
    if rules.model_types is not None and model_type not in rules.model_types:
        why = dict(rules.model_types_refused).get(model_type)
        if why is None:
            why = rules.model_types_unknown.format(model_type=model_type)
        raise ConfigError(f"kvtool does not size {model_type} under {rules.source}: {why}",
                          "use --engine vllm or --engine formula")  # fmt: skip
    if model_type not in VLLM_ONLY or rules.sizes_hybrids or model_type in rules.checked_hybrids:
        return
    why = dict(rules.hybrids_refused).get(model_type)
    if why is not None:
        raise ConfigError(f"kvtool does not size {model_type} under {rules.source}: {why}",
                          "use --engine vllm or --engine formula")  # fmt: skip
    raise ConfigError(
        f"kvtool models {model_type} only as vLLM allocates it (and the textbook formula);"
        f" how {rules.name} lays it out is not modelled",
        "use --engine vllm or --engine formula",
    )


def check_known(
    model_type: str, architecture: str, config: Mapping[str, Any], source: str, notes: list[str]
) -> None:
    """Let through a family kvtool has checked against vLLM's code (by model_type, or an
    architecture in ``plain.PLAIN_ATTENTION``); refuse everything else by name (ConfigError):
    a refused architecture with what it has that kvtool does not model, an unrecorded one with
    the config fields that suggest other layer kinds, if any."""
    if not architecture or architecture not in REFUSED:
        architecture = REFUSED_TYPES.get(model_type, architecture)
    if architecture in REFUSED:
        raise ConfigError(
            f"{source}: kvtool does not model {architecture}'s layer kinds"
            f" ({REFUSED[architecture]})",
            "see docs/sizing.md for the families kvtool sizes",
        )
    plain = plain_record(architecture)
    if plain is not None:
        _check_plain(architecture, plain, config, source)
        return
    if model_type in KNOWN:
        if model_type in DROPPED_BY_VLLM:
            notes.append(
                f"vLLM 0.33.0 no longer loads {architecture or model_type} (served until"
                f" {DROPPED_BY_VLLM[model_type]}): sized by the rules of its last in-tree model"
            )
        return
    if model_type == "unknown" and not architecture:
        raise ConfigError(
            f"{source}: the config names neither model_type nor architectures, so kvtool cannot"
            " tell which of vLLM's model classes builds it",
            'add the model\'s "architectures" (and "model_type") from its config.json',
        )
    named = architecture or f"model_type {model_type!r}"
    if architecture and model_type != "unknown":
        named += f" (model_type {model_type!r})"
    foreign = foreign_fields(config)
    shown = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
    why = f"; its config has fields of layers that are not plain attention ({shown})"
    raise ConfigError(
        f"{source}: kvtool has not checked how vLLM 0.33.0 builds {named}"
        f"{why if foreign else ''}, so it refuses it rather than guess",
        "docs/sizing.md lists every architecture kvtool sizes; for a model built exactly like"
        ' Llama, set "architectures": ["LlamaForCausalLM"] in a copy of its config',
    )


def _check_plain(architecture: str, plain: Plain, config: Mapping[str, Any], source: str) -> None:
    for field, why in plain.refuse.items():
        if config.get(field) not in (None, True):
            raise ConfigError(
                f"{source}: kvtool does not model {architecture} with {field}"
                f" {config[field]!r:.40} ({why})",
                "see docs/sizing.md for the families kvtool sizes",
            )
    missing = [field for field in plain.requires if config.get(field) is None]
    if missing:
        raise ConfigError(
            f"{source}: {architecture}'s config needs {', '.join(missing)}: its config class"
            " fills them by a rule kvtool does not copy",
            "take the values from the model's config.json on Hugging Face",
        )

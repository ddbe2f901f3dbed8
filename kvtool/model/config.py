"""Build a ``ModelSpec`` from a Hugging Face ``config.json`` dict. Pure: no I/O.

The rules follow how transformers' config classes derive per-layer attention types, so a raw
``config.json`` and the same file loaded through ``transformers.AutoConfig`` give the same spec
(a test checks this for every bundled profile):

* ``head_dim`` is read from the config when present; ``hidden_size // num_attention_heads``
  is only the fallback (Qwen3-32B: 128, not 5120/64 = 80).
* Falcon: ``new_decoder_architecture`` uses ``num_kv_heads`` (Falcon-40B: 8); otherwise
  ``multi_query`` (default true) means one KV head (Falcon-7B).
* Per-layer types come from ``layer_types`` when the config lists them, else from the
  family's rule: Gemma 2 alternates sliding/full; Gemma 3 makes every
  ``sliding_window_pattern``-th layer full; Qwen2/Qwen3 slide only with
  ``use_sliding_window: true``, from layer ``max_window_layers`` on; Llama 4 makes RoPE layers
  chunked-local (every 4th, NoPE, layer is global); Qwen3-Next/Qwen3.5 make every
  ``full_attention_interval``-th layer full and the rest Gated DeltaNet; other models with a
  ``sliding_window`` slide on every layer.
* MLA is recognised by ``kv_lora_rank``; DeepSeek sparse attention by ``index_head_dim``.
* Multimodal wrappers (Gemma 3, Llama 4, Qwen3.5) keep the language model in ``text_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvtool.errors import ConfigError
from kvtool.model.families import check_known, plain_record, wrapper_source
from kvtool.model.fields import (
    ATTENTION_KINDS,
    FALCON_TYPES,
    HIDDEN_OVER_HEADS_TYPES,
    HYBRID_GDN_TYPES,
    LAYER_TYPE_KIND,
    MAMBA1_TYPES,
    MAX_FIELD,
    MINIMAX_LINEAR_TYPES,
    NO_KV_LAYER_TYPES,
    QWEN_SLIDING_TYPES,
    ConfigFields,
    normalize_dtype,
    text_config_of,
)
from kvtool.model.spec import (
    AttentionLayers,
    Dsv4Layers,
    FeedForward,
    IndexerLayers,
    LayerGroup,
    MlaLayers,
    ModelSpec,
)
from kvtool.model.state import state_groups

if TYPE_CHECKING:
    from kvtool.model.plain import Plain


def spec_from_config(config: Mapping[str, Any], *, name: str, source: str = "") -> ModelSpec:
    """Reduce a HF config dict to the layer groups that decide KV size.

    ``source`` names where the config came from, for error messages.
    Raises ConfigError naming the missing field when the config lacks one its
    ``model_type`` needs.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"{source or name}: a model config must be a JSON object")
    text = text_config_of(config)
    notes: list[str] = []
    architecture = _architecture_of(config, text, notes)
    fields = ConfigFields(text, source or name, notes, plain=plain_record(architecture))
    if text is not config:
        notes.append("read the language model from text_config")
    check_known(fields.model_type, architecture, text, fields.source, notes)
    if fields.model_type == "deepseek_v4":
        return _dsv4_spec(fields, name, notes, config)

    layer_types = _layer_types(fields, notes)
    num_layers = len(layer_types)
    if any(kind in ATTENTION_KINDS for kind in layer_types):
        num_heads = fields.require_int("num_attention_heads", "n_head", "num_heads")
    else:  # attention-free (Mamba): heads only matter for attention layers
        num_heads = fields.whole("num_attention_heads", "n_head", "num_heads", default=0)
    hidden_size = fields.require_int("hidden_size", "n_embd", "d_model", "n_embed")
    dtype = normalize_dtype(fields.get("torch_dtype", "dtype"))
    if dtype is None:
        dtype = "bf16"
        notes.append("config names no float dtype; assumed bf16")

    groups: list[LayerGroup] = []
    if fields.get("kv_lora_rank") is not None:
        if fields.get("sliding_window"):
            # MLAAttention builds a SlidingWindowMLASpec from the model-wide window
            # (model_executor/layers/attention/mla_attention.py:1390)
            raise ConfigError(
                f"{fields.source}: kvtool does not model MLA layers with a sliding window"
                f" (sliding_window {fields.get('sliding_window')!r:.20})",
                "see docs/sizing.md for the families kvtool sizes",
            )
        mla_layers = sum(1 for kind in layer_types if kind in ATTENTION_KINDS)
        groups.extend(_mla_groups(fields, mla_layers, num_heads, notes))
        groups.extend(state_groups(fields, layer_types, hidden_size))
    else:
        groups.extend(_attention_groups(fields, layer_types, num_heads, hidden_size, notes))
        groups.extend(state_groups(fields, layer_types, hidden_size))
    if not groups:
        raise ConfigError(f"{fields.source}: no attention or state layers found in the config")

    _note_mtp(fields, notes)
    return ModelSpec(
        name=name,
        model_type=fields.model_type,
        num_layers=num_layers,
        num_attention_heads=num_heads,
        hidden_size=hidden_size,
        dtype=dtype,
        groups=tuple(groups),
        notes=tuple(notes),
        layer_kinds=tuple(layer_types),
        vocab_size=_optional_int(fields, "vocab_size", "padded_vocab_size") or 0,
        tied_embeddings=bool(
            fields.get("tie_word_embeddings", default=fields.model_type in FALCON_TYPES)
        ),
        feed_forward=_feed_forward(fields, layer_types, hidden_size),
        weights_dtype=weights_dtype_of(config, dtype),
        max_position_embeddings=max_context_of(fields),
        attention_sinks=_has_sinks(fields),
    )


def _note_mtp(fields: ConfigFields, notes: list[str]) -> None:
    mtp = fields.get("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0)
    if isinstance(mtp, int) and mtp > 0:
        notes.append(
            f"{mtp} multi-token-prediction layer(s) not counted: engines cache KV for them"
            " only with speculative decoding on"
        )


# DeepSeek-V4's layer types -> compress ratio (transformers' DeepseekV4Config)
_DSV4_RATIO = {
    "sliding_attention": 0,
    "compressed_sparse_attention": 4,
    "heavily_compressed_attention": 128,
}


def _dsv4_spec(
    fields: ConfigFields, name: str, notes: list[str], config: Mapping[str, Any]
) -> ModelSpec:
    """DeepSeek-V4: one group of every layer, sized by model/dsv4.py. Which layers compress
    comes from ``layer_types``, else the released configs' ``compress_ratios`` (one entry per
    layer, then the MTP layers'), as transformers' ``DeepseekV4Config`` reads them."""
    num_layers = fields.require_int("num_hidden_layers")
    types, listed = fields.get("layer_types"), fields.get("compress_ratios")
    if isinstance(types, list):
        ratios = [_DSV4_RATIO.get(str(t), -1) for t in types]
    elif isinstance(listed, list):
        ratios = list(listed)
    else:
        raise ConfigError(
            f"{fields.source}: DeepSeek-V4 needs layer_types or compress_ratios to know which"
            " layers compress",
            "take them from the model's config.json",
        )
    ratios = ratios[:num_layers]
    if (
        len(ratios) != num_layers
        or any(r not in (0, 4, 128) for r in ratios)
        or fields.get("compress_rates")
    ):
        raise ConfigError(
            f"{fields.source}: kvtool models DeepSeek-V4 layers that compress by 0, 4 or 128"
            " (vLLM's compressor.py:158), one per layer",
            "check layer_types / compress_ratios against num_hidden_layers",
        )
    csa, hca = ratios.count(4), ratios.count(128)
    if not csa or not hca:
        raise ConfigError(
            f"{fields.source}: kvtool models DeepSeek-V4 with both compressed (4) and heavily"
            " compressed (128) layers, as Flash and Pro have; vLLM packs others differently",
        )
    layers = Dsv4Layers(
        num_layers=num_layers,
        csa_layers=csa,
        hca_layers=hca,
        window=fields.require_int("sliding_window"),
        head_dim=fields.require_int("head_dim"),
        index_head_dim=fields.require_int("index_head_dim"),
    )
    dtype = normalize_dtype(fields.get("torch_dtype", "dtype")) or "bf16"
    _note_mtp(fields, notes)
    return ModelSpec(
        name=name,
        model_type="deepseek_v4",
        num_layers=num_layers,
        num_attention_heads=fields.require_int("num_attention_heads"),
        hidden_size=fields.require_int("hidden_size"),
        dtype=dtype,
        groups=(layers,),
        notes=tuple(notes),
        layer_kinds=("dsv4",) * num_layers,
        vocab_size=_optional_int(fields, "vocab_size") or 0,
        weights_dtype=weights_dtype_of(config, dtype),
        max_position_embeddings=max_context_of(fields),
        kv_dtype_auto="fp8_e4m3",
    )


def _has_sinks(fields: ConfigFields) -> bool:
    """Learned attention sinks: gpt-oss's on every layer (models/gpt_oss.py), a plain
    architecture's as its record says."""
    plain = fields.plain
    if plain is None:
        return fields.model_type == "gpt_oss"
    if plain.sinks == "granite":
        return bool(fields.get("attention_sinks", default=fields.get("layer_types") is not None))
    return plain.sinks == "yes"


def _architecture_of(config: Mapping[str, Any], text: Mapping[str, Any], notes: list[str]) -> str:
    """``architectures[0]``; for a multimodal wrapper whose KV cache is its language model's
    (``plain.WRAPPERS``), the architecture ``text_config`` names."""
    archs = config.get("architectures") or []
    architecture = str(archs[0]) if isinstance(archs, list) and archs else ""
    wrapper = wrapper_source(architecture)
    if wrapper:
        inner = text.get("architectures") if text is not config else None
        inner_name = str(inner[0]) if isinstance(inner, list) and inner else ""
        if not inner_name:
            raise ConfigError(
                f"{architecture} builds the language model text_config.architectures names"
                f" ({wrapper}), and this config's text_config names none",
                "add text_config.architectures (see the model's config.json)",
            )
        notes.append(f"{architecture}: sized as its language model, {inner_name}")
        return inner_name
    return architecture


def _optional_int(fields: ConfigFields, *names: str) -> int | None:
    value = fields.get(*names)
    return None if value is None else fields.positive_int(names[0], value)


# Keys vLLM reads, in order, for a model's longest context (``_get_and_verify_max_len`` in
# vllm/config/model.py, 0.33.0); 2,048 when none is present, as vLLM assumes.
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def max_context_of(fields: ConfigFields) -> int | None:
    """The longest context vLLM would accept for this config without an override.

    The first of vLLM's keys, scaled by ``rope_scaling`` as vLLM scales it: YaRN gives
    ``original_max_position_embeddings x factor``, linear and dynamic scaling multiply the
    key by ``factor``; llama3 and longrope leave it (the key already counts them).
    """
    # each key present must be a count of tokens, as transformers' strict config classes
    # hold it: NaN, Infinity, a string or a bool is refused, and so is 0 or less (which
    # transformers lets through and no engine can serve)
    found = [fields.positive_int(k, v) for k in _MAX_LEN_KEYS if (v := fields.get(k)) is not None]
    if not found:
        return None
    limit = found[0]
    rope = fields.get("rope_scaling")
    if isinstance(rope, Mapping):
        kind = str(rope.get("rope_type") or rope.get("type") or "")
        factor = rope.get("factor")
        if factor is not None and (
            isinstance(factor, bool) or not isinstance(factor, int | float)
            or not 0 < factor < MAX_FIELD  # (NaN fails every comparison)
        ):  # fmt: skip
            raise ConfigError(
                f"{fields.source}: rope_scaling's factor must be a positive number,"
                f" got {factor!r:.40}",
                "fix the value in the config",
            )
        if factor is not None and factor > 1:
            original = rope.get("original_max_position_embeddings")
            if kind == "yarn" and original is not None:
                original = fields.positive_int("original_max_position_embeddings", original)
                limit = int(original * factor)
            elif kind in ("linear", "dynamic"):
                limit = int(limit * factor)
    return limit


def _feed_forward(fields: ConfigFields, layer_types: list[str], hidden_size: int) -> FeedForward:
    """The MLP facts parameter counts need; see ``FeedForward``."""
    raw = fields.get("intermediate_size", "ffn_hidden_size", default=4 * hidden_size)
    if isinstance(raw, list) and raw:  # per-layer widths (Gemma-3n): their mean, for parameters
        widths = [fields.positive_int("intermediate_size", w) for w in raw]
        raw = sum(widths) // len(widths)
    intermediate = fields.positive_int("intermediate_size", raw)
    expert = fields.whole("moe_intermediate_size", default=intermediate)
    experts = fields.whole("n_routed_experts", "num_experts", "num_local_experts", default=0)
    shared = (
        None
        if fields.get("shared_expert_intermediate_size") is None
        else fields.whole("shared_expert_intermediate_size", default=0)
    )
    if shared is None:
        n_shared = fields.whole("n_shared_experts", "num_shared_experts", default=0)
        if fields.model_type.startswith("llama4"):
            n_shared = 1
        shared = n_shared * expert
    first_dense = fields.whole("first_k_dense_replace", default=0)
    dense_only = set(fields.get("mlp_only_layers") or [])
    step = fields.whole("interleave_moe_layer_step", "decoder_sparse_step", default=1) or 1
    moe = tuple(
        bool(experts) and i >= first_dense and i not in dense_only and (i + 1) % step == 0
        for i in range(len(layer_types))
    )
    return FeedForward(
        intermediate_size=intermediate,
        dense_intermediate_size=fields.whole("intermediate_size_mlp", default=intermediate),
        expert_intermediate_size=expert,
        routed_experts=experts,
        experts_per_token=fields.whole(
            "num_experts_per_tok", "experts_per_token", "moe_topk", default=0
        ),
        shared_intermediate_size=shared,
        gated=fields.model_type not in FALCON_TYPES and fields.model_type != "nemotron_h",
        moe_layers=moe,
    )


def weights_dtype_of(config: Mapping[str, Any], model_dtype: str) -> str:
    """The checkpoint's own weight format: ``quantization_config.quant_method`` when it names
    one kvtool knows (fp8 for DeepSeek-V3/R1 and Kimi K2, mxfp4 for gpt-oss), else the model
    dtype."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        text = config.get("text_config")
        quant = text.get("quantization_config") if isinstance(text, Mapping) else None
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, Mapping) else ""
    if method in ("fp8", "mxfp4", "nvfp4"):
        return method
    return model_dtype


def _layer_types(fields: ConfigFields, notes: list[str]) -> list[str]:
    """One kvtool kind per block: full, sliding, chunked, linear, or none (MLP-only blocks)."""
    if fields.plain is not None:
        return _plain_layer_types(fields, fields.plain, notes)
    if fields.model_type in MIMO_V2_TYPES:  # mimo_v2.py:499: 1 a sliding layer, 0 a full one
        pattern = fields.get("hybrid_layer_pattern")
        if not isinstance(pattern, list) or any(p not in (0, 1) for p in pattern):
            raise ConfigError(
                f"{fields.source}: MiMo-V2 needs hybrid_layer_pattern, a list of 0 and 1",
                "take it from the model's config.json",
            )
        return _checked_length(fields, ["sliding" if p == 1 else "full" for p in pattern])
    listed = fields.get("layer_types", "layers_block_type")
    if listed is None and isinstance(fields.get("hybrid_override_pattern"), str):
        pattern = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
        try:
            listed = [pattern[char] for char in fields.get("hybrid_override_pattern")]
        except KeyError as exc:
            raise ConfigError(
                f"{fields.source}: hybrid_override_pattern has unknown block {exc.args[0]!r}"
            ) from None
    if listed is not None:
        kinds = []
        for value in listed:
            if value in NO_KV_LAYER_TYPES:
                kinds.append("none")
            elif value in LAYER_TYPE_KIND:
                kinds.append(LAYER_TYPE_KIND[value])
            else:
                raise ConfigError(
                    f"{fields.source}: layer_types has unknown entry {value!r}",
                    "kvtool knows " + ", ".join(sorted(LAYER_TYPE_KIND)),
                )
        shared = fields.whole("num_kv_shared_layers", default=0)
        if shared:
            # Gemma-3n: the last layers read an earlier layer's cache and own none
            # (vllm models/gemma3n.py, kv_sharing_target_layer_name)
            first = len(kinds) - shared
            kinds = kinds[:first] + ["shared"] * shared
            notes.append(
                f"the last {shared} layers read the KV of the last earlier layer of their kind"
                " and own no cache (vLLM's kv_sharing_target_layer_name)"
            )
        return _checked_length(fields, kinds)

    num_layers = fields.require_int("num_hidden_layers", "n_layer", "num_layers")
    model_type = fields.model_type
    window = fields.get("sliding_window")
    if model_type == "gemma2":
        return ["sliding" if (i + 1) % 2 else "full" for i in range(num_layers)]
    if model_type in ("gemma3", "gemma3_text"):
        every = fields.get("sliding_window_pattern", default=6)
        return ["sliding" if (i + 1) % every else "full" for i in range(num_layers)]
    if model_type in QWEN_SLIDING_TYPES:
        if not fields.get("use_sliding_window", default=False) or window is None:
            if window is not None:
                notes.append("sliding_window ignored: use_sliding_window is false")
            return ["full"] * num_layers
        first = fields.get("max_window_layers", default=28)
        return ["sliding" if i >= first else "full" for i in range(num_layers)]
    if model_type in ("llama4", "llama4_text"):
        chunk = fields.get("attention_chunk_size", default=8192)
        interval = fields.get("no_rope_layer_interval", default=4)
        rope = fields.get("no_rope_layers") or [
            int((i + 1) % interval != 0) for i in range(num_layers)
        ]
        kinds = ["chunked" if use_rope and chunk is not None else "full" for use_rope in rope]
        return _checked_length(fields, kinds)
    if model_type in HYBRID_GDN_TYPES:
        interval = fields.get("full_attention_interval", default=4)
        return ["linear" if (i + 1) % interval else "full" for i in range(num_layers)]
    if model_type in MAMBA1_TYPES or model_type == "mamba2":  # every block a Mamba mixer
        return ["linear"] * num_layers
    if model_type == "falcon_h1":  # every layer runs attention and Mamba2 in parallel
        return ["parallel"] * num_layers
    if model_type == "plamo2":  # vLLM 0.26.0 models/plamo2.py is_mamba()
        step = fields.whole("mamba_step", default=2)
        if num_layers <= step // 2:
            return ["linear"] * (num_layers - 1) + ["full"]
        return ["full" if i % step == step // 2 else "linear" for i in range(num_layers)]
    if model_type == "bamba":  # attn_layer_indices, 0-based; the rest Mamba2
        attention = set(fields.get("attn_layer_indices") or [])
        return ["full" if i in attention else "linear" for i in range(num_layers)]
    if model_type == "jamba":  # transformers' JambaConfig.layers_block_type, 0-based
        period = fields.whole("attn_layer_period", default=8)
        offset = fields.whole("attn_layer_offset", default=4)
        return ["full" if i % period == offset else "linear" for i in range(num_layers)]
    if model_type in MINIMAX_LINEAR_TYPES:  # attn_type_list: 0 lightning, 1 softmax
        types = fields.get("attn_type_list", "decoder_attention_types")
        if not isinstance(types, list):
            raise ConfigError(f"{fields.source}: MiniMax-Text-01/M1 configs list attn_type_list")
        return _checked_length(fields, ["full" if t == 1 else "linear" for t in types])
    if model_type == "kimi_linear":  # linear_attn_config.kda_layers is 1-based
        linear = fields.get("linear_attn_config")
        kda = set(linear.get("kda_layers") or []) if isinstance(linear, Mapping) else set()
        if not kda:
            raise ConfigError(f"{fields.source}: Kimi-Linear needs linear_attn_config.kda_layers")
        return ["linear" if i + 1 in kda else "full" for i in range(num_layers)]
    if window is not None and fields.get("use_sliding_window", default=True) is not False:
        return ["sliding"] * num_layers
    return ["full"] * num_layers


def _plain_layer_types(fields: ConfigFields, plain: Plain, notes: list[str]) -> list[str]:
    """Full or sliding per layer, as vLLM decides for a plain-attention class: a layer marked
    ``sliding_attention`` gets ``sliding_window`` when the class reads ``layer_types``; every
    other layer gets the cache-level window, which is set only when ``layer_types`` is absent
    or all sliding (``engine/arg_utils.py:2290``)."""
    num_layers = fields.require_int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    window = fields.get("sliding_window") or None  # 0 means none (config/model.py:819)
    if window is not None and fields.get("use_sliding_window") is False:
        notes.append(
            "sliding_window ignored: use_sliding_window is false (the config classes with that"
            " flag clear the window)"
        )
        window = None
    listed = fields.get("layer_types")
    if listed is not None and (
        not isinstance(listed, list) or not all(isinstance(t, str) for t in listed)
    ):
        raise ConfigError(f"{fields.source}: layer_types must be a list of layer-type names")
    sliding = [t == "sliding_attention" for t in listed] if listed else []
    model_wide = window is not None and (not listed or all(sliding))
    if not listed or plain.windows == "model":
        if window is not None and any(sliding) and not all(sliding):
            notes.append(
                f"layer_types ignored: {plain.source} gives no layer its own window, and vLLM"
                " sets the model-wide window only when every layer slides"
            )
        return ["sliding" if model_wide else "full"] * num_layers
    if window is None and any(sliding):
        notes.append(
            "layer_types marks sliding layers but the config has no sliding_window: vLLM runs"
            " them as full attention"
        )
    kinds = ["sliding" if s and window is not None else "full" for s in sliding]
    return _checked_length(fields, kinds)


def _checked_length(fields: ConfigFields, kinds: list[str]) -> list[str]:
    declared = fields.get("num_hidden_layers", "n_layer", "num_layers")
    if declared is not None and declared != len(kinds) and fields.model_type != "nemotron_h":
        raise ConfigError(
            f"{fields.source}: the per-layer list has {len(kinds)} entries"
            f" but num_hidden_layers is {declared}",
            "make the two agree",
        )
    if not kinds:
        raise ConfigError(f"{fields.source}: the config lists no layers")
    return kinds


def _falcon_new_decoder(fields: ConfigFields) -> bool:
    """Falcon-40B/180B layout. The original remote-code configs (model_type ``RefinedWeb``)
    have no flag; vLLM's RWConfig switches it on for them ("hack for falcon-40b")."""
    if fields.model_type not in FALCON_TYPES:
        return False
    # Without the flag, a config that names a KV-head count is the new layout (a Falcon-40B
    # config saved without its model_type still has n_head_kv).
    default = fields.model_type == "RefinedWeb" or (
        fields.model_type == "falcon" and fields.get("n_head_kv", "num_kv_heads") is not None
    )
    return bool(fields.get("new_decoder_architecture", default=default))


def _kv_heads(fields: ConfigFields, num_heads: int, notes: list[str]) -> int:
    if fields.model_type in FALCON_TYPES:
        if _falcon_new_decoder(fields):
            # RWConfig (remote code) defaults n_head_kv to 1; FalconConfig to num_heads.
            legacy = fields.model_type != "falcon"
            heads = fields.get("num_kv_heads", "n_head_kv", default=1 if legacy else num_heads)
            notes.append(f"Falcon new_decoder_architecture: {heads} KV heads (num_kv_heads)")
            return int(heads)
        if fields.get("multi_query", default=True):
            notes.append("Falcon multi_query: one KV head shared by all query heads")
            return 1
        return fields.whole("num_kv_heads", default=num_heads)
    if fields.plain is not None:
        return _plain_kv_heads(fields, fields.plain, num_heads, notes)
    heads = fields.get("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    if heads is None:
        return _mha_heads(fields, num_heads, notes)
    return fields.positive_int("num_key_value_heads", heads)


def _plain_kv_heads(fields: ConfigFields, plain: Plain, num_heads: int, notes: list[str]) -> int:
    if plain.kv_heads == "mha":
        return num_heads
    if plain.kv_heads == "chatglm":
        if not fields.get("multi_query_attention", default=False):
            return num_heads
        return fields.require_int("multi_query_group_num")
    heads = fields.get("num_key_value_heads")
    if heads is None:
        return _mha_heads(fields, num_heads, notes)
    return fields.positive_int("num_key_value_heads", heads)


def _mha_heads(fields: ConfigFields, num_heads: int, notes: list[str]) -> int:
    """A config without KV heads has one per query head (transformers' and vLLM's default);
    one that names them as null gets a note that this was assumed."""
    if fields.is_null("num_key_value_heads"):
        return fields.null_read_as("num_key_value_heads", num_heads, "num_attention_heads", notes)
    return num_heads


def _head_dim(fields: ConfigFields, num_heads: int, hidden_size: int, notes: list[str]) -> int:
    if fields.model_type == "zamba2":  # transformers: attention_head_dim = 2 x hidden / heads
        return fields.whole("attention_head_dim", default=2 * hidden_size // num_heads)
    if fields.model_type in HIDDEN_OVER_HEADS_TYPES:  # vllm bamba/granitemoehybrid: no head_dim
        return hidden_size // num_heads
    if fields.model_type == "plamo2":
        return fields.require_int("hidden_size_per_head")
    derived = hidden_size // num_heads
    if fields.plain is not None and fields.plain.head_dim == "hidden":
        ignored = fields.get("head_dim")
        if ignored is not None and ignored != derived:
            notes.append(
                f"head_dim {ignored} in the config ignored: {fields.plain.source} uses"
                f" hidden_size/num_attention_heads = {derived}"
            )
        return derived
    names = ("head_dim",) if fields.plain is not None else ("head_dim", "attention_head_dim")
    explicit = fields.get(*names)
    if explicit is None:
        if fields.is_null("head_dim"):
            how = "hidden_size/num_attention_heads"
            return fields.null_read_as("head_dim", derived, how, notes)
        return derived
    head_dim = fields.positive_int("head_dim", explicit)
    if head_dim != derived:
        notes.append(
            f"head_dim {head_dim} from the config (hidden_size/num_attention_heads"
            f" would give {derived})"
        )
    return head_dim


def _attention_groups(
    fields: ConfigFields,
    layer_types: list[str],
    num_heads: int,
    hidden_size: int,
    notes: list[str],
) -> list[LayerGroup]:
    if not any(kind in ATTENTION_KINDS for kind in layer_types):
        return []  # attention-free (Mamba, FalconMamba)
    per_kind = _per_kind_attention(fields)
    if per_kind is not None:
        return [
            AttentionLayers(
                kind=kind,  # type: ignore[arg-type]
                num_layers=layer_types.count(kind),
                num_kv_heads=heads,
                head_dim=k_dim,
                v_head_dim=v_dim,
                window=window,
                hf_cached_kv_heads=heads,
            )
            for kind, (heads, k_dim, v_dim, window) in per_kind.items()
            if layer_types.count(kind)
        ]
    kv_heads = _kv_heads(fields, num_heads, notes)
    head_dim = _head_dim(fields, num_heads, hidden_size, notes)
    window = fields.get("sliding_window")
    chunk = fields.get("attention_chunk_size")
    counts: dict[str, int] = {}
    for kind in layer_types:
        if kind == "parallel":  # attention and a state mixer side by side (Falcon-H1, Zamba2)
            kind = "full"
        if kind in ("full", "sliding", "chunked"):
            counts[kind] = counts.get(kind, 0) + 1
    if counts.get("sliding") and window is None:
        raise ConfigError(
            f"{fields.source}: layers are marked sliding_attention but sliding_window is not set",
            "add the model's sliding_window to the config",
        )
    groups: list[LayerGroup] = []
    for kind, count in counts.items():
        bound = {"sliding": window, "chunked": chunk}.get(kind)
        groups.append(
            AttentionLayers(
                kind=kind,  # type: ignore[arg-type]
                num_layers=count,
                num_kv_heads=kv_heads,
                head_dim=head_dim,
                v_head_dim=head_dim,
                window=None if bound is None else fields.positive_int(kind, bound),
                hf_cached_kv_heads=num_heads if _falcon_new_decoder(fields) else kv_heads,
            )
        )
    return groups


MIMO_V2_TYPES = frozenset({"mimo_v2_flash", "mimo_v2"})


def _per_kind_attention(
    fields: ConfigFields,
) -> dict[str, tuple[int, int, int, int | None]] | None:
    """(KV heads, K dim, V dim, window) of full and sliding layers for the families whose
    two kinds differ: MiMo-V2 (``mimo_v2.py:408``: the sliding layers' own ``swa_*`` fields and
    ``sliding_window_size``, not ``sliding_window``) and Gemma 4 (``gemma4.py:449, 578``:
    sliding layers ``head_dim``, full ones ``global_head_dim`` and, with
    ``attention_k_eq_v``, ``num_global_key_value_heads``; V as wide as K). None for others."""
    if fields.model_type in MIMO_V2_TYPES:
        full_k = fields.require_int("head_dim")
        swa_k = fields.require_int("swa_head_dim")
        return {
            "full": (
                fields.require_int("num_key_value_heads"),
                full_k,
                fields.whole("v_head_dim", default=0) or full_k,
                None,
            ),
            "sliding": (
                fields.require_int("swa_num_key_value_heads"),
                swa_k,
                fields.whole("swa_v_head_dim", default=0) or swa_k,
                fields.require_int("sliding_window_size"),
            ),
        }
    if fields.model_type == "gemma4_text":
        sliding_heads = fields.require_int("num_key_value_heads")
        full_heads = sliding_heads
        if fields.get("attention_k_eq_v", default=False):
            full_heads = fields.require_int("num_global_key_value_heads")
        local, wide = fields.require_int("head_dim"), fields.require_int("global_head_dim")
        return {
            "full": (full_heads, wide, wide, None),
            "sliding": (sliding_heads, local, local, fields.require_int("sliding_window")),
        }
    return None


def _mla_groups(
    fields: ConfigFields, num_layers: int, num_heads: int, notes: list[str]
) -> list[LayerGroup]:
    rope = fields.require_int("qk_rope_head_dim")
    groups: list[LayerGroup] = [
        MlaLayers(
            num_layers=num_layers,
            kv_lora_rank=fields.require_int("kv_lora_rank"),
            qk_rope_head_dim=rope,
            num_heads=num_heads,
            qk_nope_head_dim=fields.require_int("qk_nope_head_dim"),
            v_head_dim=fields.require_int("v_head_dim"),
            q_lora_rank=_optional_int(fields, "q_lora_rank"),
        )
    ]
    if fields.get("index_head_dim") is not None:
        indexed = _indexer_layer_count(fields, num_layers)
        groups.append(
            IndexerLayers(
                num_layers=indexed,
                index_head_dim=fields.require_int("index_head_dim"),
                num_heads=fields.whole("index_n_heads", default=64),
            )
        )
        notes.append("DeepSeek sparse attention: an indexer key cache beside the MLA latent")
        if indexed < num_layers:
            notes.append(
                f"{num_layers - indexed} layers reuse the previous layer's top-k and cache no"
                " indexer keys"
            )
    return groups


def _indexer_layer_count(fields: ConfigFields, num_layers: int) -> int:
    """Layers that run their own indexer. GLM-5.1-style configs mark others ``shared``
    (``indexer_types``, ``index_topk_pattern`` or ``index_topk_freq``; transformers'
    GlmMoeDsaConfig); without those every layer has one (DeepSeek-V3.2)."""
    types = fields.get("indexer_types")
    if types is None and isinstance(fields.get("index_topk_pattern"), str):
        types = ["full" if c == "F" else "shared" for c in fields.get("index_topk_pattern")]
    if types is None and fields.get("index_topk_freq") is not None:
        freq = max(fields.whole("index_topk_freq", default=1), 1)
        offset = fields.whole("index_skip_topk_offset", default=2)
        types = [
            "full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(num_layers)
        ]
    if types is None:
        return num_layers
    return sum(1 for t in types if t == "full")

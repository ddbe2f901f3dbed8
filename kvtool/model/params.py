"""Parameter counts from a config: total (what the weights occupy) and active per token.

Pure. Counts every matrix of the transformer blocks and the embeddings; norms and biases are
left out (under 0.1% of any bundled model). Checked against the published counts of the
bundled models in tests/unit/model/test_params.py. Multi-token-prediction layers are not
counted (they are loaded only for speculative decoding).

Worked number: Llama 3.1 8B = embeddings 128,256 x 4,096 x 2 (untied) + 32 layers x
(attention 4,096 x (4,096 + 2 x 1,024 + 4,096) + MLP 3 x 4,096 x 14,336) = 8.03 B.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvtool.model.config import FALCON_TYPES, ConfigFields, text_config_of


@dataclass(frozen=True)
class ParamCount:
    """Total parameters, and those a token's matrix multiplies use.

    ``active`` leaves out the input embedding table (a lookup, no FLOPs) and the experts a
    token is not routed to; it keeps the output projection. This is the count model cards
    quote as "active" (gpt-oss-120b: 5.1 B) and the one prefill FLOPs scale with.
    """

    total: int
    active: int
    routed_experts: int = 0


def _mlp(fields: ConfigFields, hidden: int, intermediate: int) -> int:
    """Gated (SwiGLU/GeGLU) MLPs have three matrices; Falcon's and Nemotron-H's have two."""
    gated = fields.model_type not in FALCON_TYPES and fields.model_type != "nemotron_h"
    return (3 if gated else 2) * hidden * intermediate


def _attention(fields: ConfigFields, hidden: int, heads: int) -> int:
    if fields.get("kv_lora_rank") is not None:
        nope = int(fields.get("qk_nope_head_dim"))
        rope = int(fields.get("qk_rope_head_dim"))
        v_dim = int(fields.get("v_head_dim"))
        rank = int(fields.get("kv_lora_rank"))
        q_rank = fields.get("q_lora_rank")
        q = (
            hidden * heads * (nope + rope)
            if q_rank is None
            else hidden * q_rank + q_rank * heads * (nope + rope)
        )
        kv = hidden * (rank + rope) + rank * heads * (nope + v_dim)
        params = q + kv + heads * v_dim * hidden
        if fields.get("index_head_dim") is not None and q_rank is not None:
            index_dim = int(fields.get("index_head_dim"))
            index_heads = int(fields.get("index_n_heads", default=64))
            params += q_rank * index_heads * index_dim + hidden * index_dim + hidden * index_heads
        return params
    kv_heads = int(fields.get("num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads))
    if fields.model_type in FALCON_TYPES and not fields.get(
        "new_decoder_architecture", default=fields.model_type == "RefinedWeb"
    ):
        kv_heads = 1 if fields.get("multi_query", default=True) else heads
    head_dim = int(fields.get("head_dim", "attention_head_dim", default=hidden // heads))
    return hidden * head_dim * (2 * heads + 2 * kv_heads)


def _linear_attention(fields: ConfigFields, hidden: int) -> int:
    """Gated DeltaNet (Qwen3-Next) or Mamba2 (Nemotron-H) projections."""
    if fields.get("linear_num_value_heads") is not None:
        key_dim = int(fields.get("linear_num_key_heads")) * int(fields.get("linear_key_head_dim"))
        value_heads = int(fields.get("linear_num_value_heads"))
        value_dim = value_heads * int(fields.get("linear_value_head_dim"))
        conv = (2 * key_dim + value_dim) * int(fields.get("linear_conv_kernel_dim"))
        return hidden * (2 * key_dim + 2 * value_dim + 2 * value_heads) + conv + value_dim * hidden
    heads = int(fields.get("mamba_num_heads"))
    inner = heads * int(fields.get("mamba_head_dim"))
    groups_state = 2 * int(fields.get("n_groups")) * int(fields.get("ssm_state_size"))
    conv = (inner + groups_state) * int(fields.get("conv_kernel"))
    return hidden * (2 * inner + groups_state + heads) + conv + inner * hidden


def _moe_layer(fields: ConfigFields, index: int, num_layers: int) -> bool:
    experts = fields.get("n_routed_experts", "num_experts", "num_local_experts")
    if not experts:
        return False
    if index < int(fields.get("first_k_dense_replace", default=0)):
        return False
    if index in (fields.get("mlp_only_layers") or []):
        return False
    step = int(fields.get("interleave_moe_layer_step", "decoder_sparse_step", default=1))
    return (index + 1) % step == 0


def count_params(config: Mapping[str, Any]) -> ParamCount:
    """Total and active parameters of the language model described by ``config``.

    >>> count_params({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
    ...               "intermediate_size": 14336, "num_hidden_layers": 32,
    ...               "num_attention_heads": 32, "num_key_value_heads": 8}).total
    8030261248
    """
    text = text_config_of(config)
    fields = ConfigFields(text, str(text.get("model_type")))
    hidden = fields.require_int("hidden_size", "n_embd", "d_model")
    heads = fields.require_int("num_attention_heads", "n_head", "num_heads")
    layers = fields.get("layers_block_type", "layer_types")
    num_layers = (
        len(layers)
        if fields.model_type == "nemotron_h" and layers
        else (fields.require_int("num_hidden_layers", "n_layer", "num_layers"))
    )
    vocab = int(fields.get("vocab_size", default=0))
    tied = bool(fields.get("tie_word_embeddings", default=fields.model_type in FALCON_TYPES))
    embeddings = vocab * hidden * (1 if tied else 2)

    intermediate = int(fields.get("intermediate_size", "ffn_hidden_size", default=4 * hidden))
    dense_mlp = int(fields.get("intermediate_size_mlp", default=intermediate))
    expert_size = int(fields.get("moe_intermediate_size", default=intermediate))
    experts = int(fields.get("n_routed_experts", "num_experts", "num_local_experts", default=0))
    top_k = int(fields.get("num_experts_per_tok", "experts_per_token", "moe_topk", default=0))
    shared = fields.get("shared_expert_intermediate_size")
    if shared is None:
        n_shared = int(fields.get("n_shared_experts", "num_shared_experts", default=0))
        if fields.model_type.startswith("llama4"):
            n_shared = 1
        shared = n_shared * expert_size
    shared = int(shared)

    types = _block_types(fields, num_layers, layers)
    total = embeddings
    routed_total = 0
    active = vocab * hidden  # the output projection (tied or not); the lookup is free
    for index, kind in enumerate(types):
        if kind == "attention":
            block = _attention(fields, hidden, heads)
            total, active = total + block, active + block
        elif kind == "linear":
            block = _linear_attention(fields, hidden)
            total, active = total + block, active + block
        if kind == "mlp":
            block = _mlp(fields, hidden, intermediate)
            total, active = total + block, active + block
            continue
        if fields.model_type == "nemotron_h":
            continue  # Nemotron-H's MLPs are their own blocks ("-")
        if _moe_layer(fields, index, num_layers):
            expert = _mlp(fields, hidden, expert_size)
            routed = experts * expert + hidden * experts
            routed_total += experts * expert
            total += routed + _mlp(fields, hidden, shared) * (shared > 0)
            active += (
                top_k * expert + hidden * experts + _mlp(fields, hidden, shared) * (shared > 0)
            )
        else:
            block = _mlp(fields, hidden, dense_mlp)
            total, active = total + block, active + block
    return ParamCount(total=total, active=active, routed_experts=routed_total)


def _block_types(fields: ConfigFields, num_layers: int, layers: Any) -> list[str]:
    """attention / linear per transformer layer; Nemotron-H lists MLP blocks separately."""
    if fields.model_type == "nemotron_h":
        pattern = fields.get("hybrid_override_pattern")
        if isinstance(pattern, str):
            mapping = {"M": "linear", "*": "attention", "-": "mlp", "E": "mlp"}
            return [mapping[c] for c in pattern]
        mapping = {"linear_attention": "linear", "full_attention": "attention"}
        return [mapping.get(t, "mlp") for t in layers]
    if isinstance(layers, list) and "linear_attention" in layers:
        return ["linear" if t == "linear_attention" else "attention" for t in layers]
    interval = fields.get("full_attention_interval")
    if fields.get("linear_num_value_heads") is not None and interval:
        return ["linear" if (i + 1) % int(interval) else "attention" for i in range(num_layers)]
    return ["attention"] * num_layers


# Bytes per weight for each --weights-dtype. Block-scaled formats include their scales:
# MXFP4 keeps one 8-bit scale per 32 values (OCP MX spec), NVFP4 one FP8 scale per 16.
WEIGHT_BYTES = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "mxfp4": 0.5 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
    "int4": 0.5 + 2 / 128,  # group size 128 with an fp16 scale (GPTQ/AWQ style; estimate)
}


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


def weight_bytes(params: ParamCount, weights_dtype: str, *, model_dtype: str) -> int:
    """Bytes of one model replica's weights.

    gpt-oss ships MXFP4 experts and BF16 everything else, so ``mxfp4`` applies to the routed
    experts only when the model has any. Raises KeyError for an unknown dtype (the CLI checks).
    """
    if weights_dtype == "mxfp4" and params.routed_experts:
        rest = params.total - params.routed_experts
        return int(params.routed_experts * WEIGHT_BYTES["mxfp4"] + rest * WEIGHT_BYTES[model_dtype])
    return int(params.total * WEIGHT_BYTES[weights_dtype])

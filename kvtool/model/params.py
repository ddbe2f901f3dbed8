"""Parameter counts from a model spec: total (what the weights occupy) and active per token.

Pure, and read from the ``ModelSpec`` that ``spec_from_config`` built, so the config's fields
are interpreted once (KV heads, head_dim, MLA ranks, hybrid layer kinds mean the same here as
in the KV arithmetic). Counts every matrix of the transformer blocks and the embeddings; norms
and biases are left out (under 0.1% of any bundled model). Checked against the published
counts of the bundled models in tests/unit/model/test_params.py. Multi-token-prediction layers
are not counted (they are loaded only for speculative decoding).

Worked number: Llama 3.1 8B = embeddings 128,256 x 4,096 x 2 (untied) + 32 layers x
(attention 4,096 x (4,096 + 2 x 1,024 + 4,096) + MLP 3 x 4,096 x 14,336) = 8.03 B.
"""

from __future__ import annotations

from typing import NamedTuple

from kvtool.errors import ConfigError, InputError
from kvtool.model.spec import (
    AttentionLayers,
    FeedForward,
    IndexerLayers,
    MlaLayers,
    ModelSpec,
    StateLayers,
)


class ParamCount(NamedTuple):
    """Total parameters, and those a token's matrix multiplies use.

    ``active`` leaves out the input embedding table (a lookup, no FLOPs) and the experts a
    token is not routed to; it keeps the output projection (``lm_head``). This is the count
    model cards quote as "active" (gpt-oss-120b: 5.1 B). A prefill runs the ``lm_head`` for
    its last position only, so prefill FLOPs scale with ``active - lm_head`` per token.
    """

    total: int
    active: int
    routed_experts: int = 0
    lm_head: int = 0


def _mlp(ffn: FeedForward, hidden: int, intermediate: int) -> int:
    """Gated (SwiGLU/GeGLU) MLPs have three matrices; Falcon's and Nemotron-H's have two."""
    return (3 if ffn.gated else 2) * hidden * intermediate


def _attention(spec: ModelSpec) -> int:
    """One attention layer's projections (Q, K, V, O; MLA's low-rank ones; the DSA indexer)."""
    hidden, heads = spec.hidden_size, spec.num_attention_heads
    params = 0
    for group in spec.groups:
        if isinstance(group, MlaLayers):
            nope, rope, v_dim = group.qk_nope_head_dim, group.qk_rope_head_dim, group.v_head_dim
            rank, q_rank = group.kv_lora_rank, group.q_lora_rank
            q = (
                hidden * heads * (nope + rope)
                if q_rank is None
                else hidden * q_rank + q_rank * heads * (nope + rope)
            )
            kv = hidden * (rank + rope) + rank * heads * (nope + v_dim)
            params = q + kv + heads * v_dim * hidden
            indexer = next((g for g in spec.groups if isinstance(g, IndexerLayers)), None)
            if indexer is not None and q_rank is not None:
                dim, index_heads = indexer.index_head_dim, indexer.num_heads
                params += q_rank * index_heads * dim + hidden * dim + hidden * index_heads
            return params
    for group in spec.groups:
        if isinstance(group, AttentionLayers):
            return hidden * group.head_dim * (2 * heads + 2 * group.num_kv_heads)
    return 0


def _linear_attention(spec: ModelSpec) -> int:
    """One Gated DeltaNet (Qwen3-Next) or Mamba2 (Nemotron-H) layer's projections.

    Both project the input to the conv channels plus the value width (the gate) plus a
    per-head term (GDN: beta and alpha per value head; Mamba2: dt per head), run a depthwise
    conv, and project the value width back out.
    """
    for group in spec.groups:
        if isinstance(group, StateLayers):
            per_head = 2 if group.kind == "gated_deltanet" else 1
            in_proj = group.conv_channels + group.inner_dim + per_head * group.state_heads
            conv = group.conv_channels * group.conv_kernel
            return spec.hidden_size * in_proj + conv + group.inner_dim * spec.hidden_size
    return 0


def count_params(spec: ModelSpec) -> ParamCount:
    """Total and active parameters of the language model ``spec`` describes.

    Raises ValueError for a spec built by hand without its ``feed_forward`` facts.
    """
    if spec.model_type == "deepseek_v4":
        raise ConfigError(
            "kvtool does not count DeepSeek-V4's parameters (its hyper-connections, grouped"
            " output projection and compressors), so it cannot plan where its weights go",
            "size its KV cache with kvtool size, without --hardware",
        )
    ffn = spec.feed_forward
    if ffn is None:
        raise ValueError(f"{spec.name}: the spec has no feed-forward facts to count")
    hidden = spec.hidden_size
    lm_head = spec.vocab_size * hidden
    embeddings = lm_head * (1 if spec.tied_embeddings else 2)
    attention, linear = _attention(spec), _linear_attention(spec)
    # Nemotron-H lists MLP blocks as layers of their own ("none": no KV, no state).
    blocks_own_mlp = "none" not in spec.layer_kinds
    total = embeddings
    active = lm_head  # the output projection (tied or not); the input lookup is free
    routed_total = 0
    for index, kind in enumerate(spec.layer_kinds):
        block = {
            "linear": linear,
            "none": _mlp(ffn, hidden, ffn.intermediate_size),
            "parallel": attention + linear,  # Falcon-H1, Zamba2: both mixers in one layer
        }.get(kind, attention)
        total, active = total + block, active + block
        if not blocks_own_mlp:
            continue
        if ffn.moe_layers[index]:
            expert = _mlp(ffn, hidden, ffn.expert_intermediate_size)
            shared = _mlp(ffn, hidden, ffn.shared_intermediate_size)
            router = hidden * ffn.routed_experts
            routed_total += ffn.routed_experts * expert
            total += ffn.routed_experts * expert + router + shared
            active += ffn.experts_per_token * expert + router + shared
        else:
            dense = _mlp(ffn, hidden, ffn.dense_intermediate_size)
            total, active = total + dense, active + dense
    return ParamCount(total=total, active=active, routed_experts=routed_total, lm_head=lm_head)


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


def weight_bytes(params: ParamCount, weights_dtype: str, *, model_dtype: str) -> int:
    """Bytes of one model replica's weights.

    gpt-oss ships MXFP4 experts and BF16 everything else, so ``mxfp4`` applies to the routed
    experts only when the model has any. Raises KeyError for an unknown dtype (callers check
    against ``WEIGHT_BYTES``).
    """
    if weights_dtype == "mxfp4" and params.routed_experts:
        rest = params.total - params.routed_experts
        return int(params.routed_experts * WEIGHT_BYTES["mxfp4"] + rest * WEIGHT_BYTES[model_dtype])
    return int(params.total * WEIGHT_BYTES[weights_dtype])


class Weights(NamedTuple):
    """One replica's weights: its parameter counts, the dtype they are stored in and bytes."""

    params: ParamCount
    dtype: str
    nbytes: int


def attention_params(spec: ModelSpec) -> int:
    """The parameters of every attention layer's projections (MLA's low-rank ones, the DSA
    indexer): what data-parallel attention keeps whole on each rank."""
    per_layer = _attention(spec)
    return per_layer * sum(1 for kind in spec.layer_kinds if kind not in ("linear", "none"))


def weights_dtype_of(spec: ModelSpec, weights_dtype: str = "auto") -> str:
    """The dtype ``--weights-dtype`` names for ``spec`` (``auto``: the checkpoint's own
    format, else the model dtype); InputError for one kvtool has no bytes per weight for."""
    dtype = weights_dtype.strip().lower()
    if dtype == "auto":
        dtype = spec.weights_dtype or spec.dtype
    if dtype not in WEIGHT_BYTES:
        raise InputError(
            f"unknown --weights-dtype {weights_dtype!r}", "choose auto, " + ", ".join(WEIGHT_BYTES)
        )
    return dtype


def replica_bytes(spec: ModelSpec, params: ParamCount, weights_dtype: str = "auto") -> int:
    """One replica's weight bytes: a local checkpoint's exact bytes (``spec.checkpoint_bytes``,
    from its safetensors headers) when ``weights_dtype`` is ``auto``, its own format; else the
    parameter arithmetic in ``weights_dtype``."""
    if weights_dtype.strip().lower() == "auto" and spec.checkpoint_bytes:
        return spec.checkpoint_bytes
    dtype = weights_dtype_of(spec, weights_dtype)
    return weight_bytes(params, dtype, model_dtype=spec.dtype)


def model_weights(spec: ModelSpec, weights_dtype: str = "auto") -> Weights:
    """``spec``'s weights in ``weights_dtype`` (``weights_dtype_of``; a local checkpoint's
    exact bytes with ``auto``). ConfigError for a model whose parameters kvtool does not
    count (``count_params``)."""
    dtype = weights_dtype_of(spec, weights_dtype)
    params = count_params(spec)
    return Weights(params, dtype, replica_bytes(spec, params, weights_dtype))

"""What a model keeps per token and per sequence: its layer groups.

A ``ModelSpec`` is the architecture reduced to the facts that decide KV-cache size. Layers
that store the same thing are grouped: full-attention layers, sliding-window layers,
chunked-local layers, MLA latent layers, DeepSeek sparse-attention indexer caches, and
linear-attention / Mamba layers that keep a fixed state instead of per-token KV.
Pure data: built by ``kvtool.model.config.spec_from_config`` and priced by ``kvtool.model.kv``.
"""

from typing import Literal

from kvtool.record import Record

AttentionKind = Literal["full", "sliding", "chunked"]


class AttentionLayers(Record):
    """MHA / GQA / MQA layers: one K and one V vector per KV head per token.

    ``window`` bounds how many past tokens a layer attends to: a sliding window for
    ``kind="sliding"``, the chunk size of chunked local attention (Llama 4) for
    ``kind="chunked"``, ``None`` for full attention.
    Example: Llama 3.1 405B is one group of 126 full layers, 8 KV heads, head_dim 128.
    """

    kind: AttentionKind
    num_layers: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    window: int | None = None
    hf_cached_kv_heads: int | None = None

    @property
    def cached_kv_heads_hf(self) -> int:
        """KV heads transformers' cache really holds: Falcon-40B broadcasts K/V to all heads."""
        return self.hf_cached_kv_heads or self.num_kv_heads


class MlaLayers(Record):
    """Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2, GLM-5).

    Engines that run the absorbed form cache one latent of ``kv_lora_rank`` plus the
    decoupled RoPE key of ``qk_rope_head_dim`` per layer per token (DeepSeek-R1: 512 + 64).
    The head counts and per-head dims are kept because transformers' eager implementation
    caches the decompressed per-head K and V instead.
    """

    num_layers: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    num_heads: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None


class IndexerLayers(Record):
    """DeepSeek sparse attention's lightning-indexer key cache (DeepSeek-V3.2, GLM-5).

    One ``index_head_dim`` key per layer per token, stored beside the MLA latent.
    """

    num_layers: int
    index_head_dim: int
    num_heads: int = 64


class StateLayers(Record):
    """Linear-attention or Mamba layers: a fixed-size recurrent state per sequence.

    The state is a causal-conv window of ``conv_kernel - 1`` steps over ``conv_channels``
    channels, plus a recurrent state of ``state_heads x state_head_elems`` elements.
    ``inner_dim`` is the value width (Gated DeltaNet: value heads x value dim; Mamba2: heads x
    head_dim); with ``conv_channels`` it gives the layer's projection sizes for parameter counts.
    For Gated DeltaNet (Qwen3-Next) the recurrent state is per value head, key_dim x
    value_dim; for Mamba2 (Nemotron-H) it is per head, head_dim x ssm_state_size; for Mamba1
    (Mamba, FalconMamba, Jamba) per inner channel, d_state; for lightning attention
    (MiniMax-Text-01/M1) per head, head_dim x head_dim with no conv; for KDA (Kimi-Linear) per
    head, head_dim x head_dim, in float32.
    ``state_dtype`` is the recurrent state's dtype when the model config fixes one
    (Qwen3.5's ``mamba_ssm_dtype: float32``), else ``None`` (the KV dtype is used).
    """

    kind: Literal["gated_deltanet", "mamba2", "mamba1", "lightning", "kda"]
    num_layers: int
    conv_channels: int
    conv_kernel: int
    state_heads: int
    state_head_elems: int
    state_dtype: str | None = None
    inner_dim: int = 0
    n_groups: int = 0  # Mamba2: B/C groups, replicated per rank when tp does not divide them
    group_state: int = 0  # Mamba2: d_state, the conv channels each group adds twice
    key_head_dim: int = 0  # Gated DeltaNet: linear_key_head_dim (picks the prefill kernel)
    # KDA built by Kimi-K3's layer with everything FlashKDA needs but the GPU
    # (model/backends.py): its prefill keeps a checkpoint page
    flashkda: bool = False
    # the config key that set ``state_dtype`` (mamba_ssm_dtype, mamba_ssm_cache_dtype), or ''
    # for a family's own default; engines read different keys (EngineRules.state_dtype_keys)
    state_dtype_key: str = ""
    # Mamba2: the config gives the inner width (intermediate_size), not only expand x hidden
    inner_given: bool = True


class Dsv4Layers(Record):
    """DeepSeek-V4's caches (model/dsv4.py): every layer slides over ``window`` tokens;
    ``csa_layers`` also compress by 4 (with an indexer), ``hca_layers`` by 128."""

    num_layers: int
    csa_layers: int
    hca_layers: int
    window: int
    head_dim: int
    index_head_dim: int
    kind: Literal["dsv4"] = "dsv4"


LayerGroup = AttentionLayers | MlaLayers | IndexerLayers | StateLayers | Dsv4Layers


class FeedForward(Record):
    """The MLP side of the model, for parameter counts (weights and prefill FLOPs).

    ``moe_layers`` marks, per layer, whether its MLP is a mixture of experts (DeepSeek keeps its
    first ``first_k_dense_replace`` layers dense; Llama 4 interleaves). ``gated`` MLPs
    (SwiGLU/GeGLU) have three matrices, plain ones (Falcon, Nemotron-H) two.
    """

    intermediate_size: int
    dense_intermediate_size: int
    expert_intermediate_size: int
    routed_experts: int
    experts_per_token: int
    shared_intermediate_size: int
    gated: bool
    moe_layers: tuple[bool, ...]


class ModelSpec(Record):
    """A model as the KV cache sees it.

    ``dtype`` is the model's own activation dtype (what ``--kv-dtype auto`` resolves to);
    ``weights_dtype`` the checkpoint's weight format (``quantization_config``: fp8 for
    DeepSeek-R1, mxfp4 for gpt-oss), or ``dtype``. ``layer_kinds`` has one entry per block:
    full, sliding, chunked, linear, or none (Nemotron-H's MLP-only blocks).
    ``max_position_embeddings`` is the longest context the model was built for, when the
    config says. ``notes`` say which convention was read from the config, e.g. where
    ``head_dim`` came from, so the user can check it.
    """

    name: str
    model_type: str
    num_layers: int
    num_attention_heads: int
    hidden_size: int
    dtype: str
    groups: tuple[LayerGroup, ...]
    notes: tuple[str, ...] = ()
    layer_kinds: tuple[str, ...] = ()
    vocab_size: int = 0
    tied_embeddings: bool = False
    feed_forward: FeedForward | None = None
    weights_dtype: str = ""
    max_position_embeddings: int | None = None
    # learned per-head attention sinks (gpt-oss, Flint, Granite SWA): the KV is the same, but
    # fewer attention backends serve them (model/backends.py)
    attention_sinks: bool = False
    # what --kv-dtype auto means for this model when not its dtype (DeepSeek-V4: fp8, which
    # vLLM keeps as fp8_ds_mla)
    kv_dtype_auto: str = ""
    # a local checkpoint's exact weight bytes (its safetensors headers), and where they were
    # read; None: the parameter arithmetic (a bare config, a bundled profile, a Hub id)
    checkpoint_bytes: int | None = None
    checkpoint_source: str = ""

    @property
    def is_mla(self) -> bool:
        """True when the model caches MLA latents rather than per-head K/V."""
        return any(isinstance(group, MlaLayers) for group in self.groups)

    @property
    def has_indexer(self) -> bool:
        """True for DeepSeek sparse attention models (V3.2, GLM-5) with an indexer cache."""
        return any(isinstance(group, IndexerLayers) for group in self.groups)


def group_kind(group: LayerGroup) -> str:
    """The name a group is reported under: full, sliding, chunked, mla, indexer, or a state kind."""
    if isinstance(group, AttentionLayers | StateLayers):
        return group.kind
    if isinstance(group, MlaLayers):
        return "mla"
    return "indexer"

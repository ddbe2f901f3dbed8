"""TensorRT-LLM 1.2.1's KV cache manager (PyTorch backend, its default), as kvtool sizes it.
Pure data and arithmetic; ``engines.py`` builds the ``trtllm`` rules from it.

Where it was read. The 1.2.1 wheel is not on the package index this project reaches (PyPI
serves a placeholder that fetches it from NVIDIA's own index), and the repository snapshot is
too large to bring here, so the rules were read from the stored source of NVIDIA/TensorRT-LLM
at commit ``b35ac1b6`` (``tensorrt_llm/version.py``: 1.2.0rc2, the 1.2 line) and checked
against the 1.2.1 wheel's ``KvCacheConfig`` as catalogued from that wheel
(``llmapi/llm_args.py:1627-1772``). Functions are cited by qualified name in the file named:

* bytes per token, per rank (``KVCacheManager.get_cache_bytes_per_token``,
  ``_torch/pyexecutor/resource_manager.py``): ``kv_factor x sum(KV heads per local layer) x
  head_dim`` elements in the cache dtype, with KV heads per rank ``ceil(heads / tp)``
  (``KVCacheManager.__init__``; ``tp`` is 1 under attention DP) and the layers of this pipeline
  rank (``get_pp_layers``). MLA caches one latent of ``kv_lora_rank + qk_rope_head_dim`` as
  one KV head with ``kv_factor`` 1 (``CacheType.SELFKONLY``,
  ``KvCacheCreator._create_kv_cache_manager``, ``_torch/pyexecutor/_util.py``), whole on every
  rank. NVFP4 adds one fp8 scale per 16 elements
  (``calculate_scaling_factor_size_bytes``); the dtypes it takes are FP8, HALF, BF16, FLOAT and
  NVFP4 (anything else raises ``Cannot support ... KV cache``), and ``kv_cache_config.dtype``
  is one of ``auto``, ``fp8``, ``nvfp4`` (``_VALID_KV_CACHE_DTYPES``,
  ``_torch/pyexecutor/model_loader.py``).
* blocks: ``tokens_per_block`` 32 (``KvCacheConfig.tokens_per_block``, llm_args.py:1711).
* the pool (``KvCacheCreator.configure_kv_cache_capacity`` and ``_cal_max_memory``): after the
  profiling run, ``(total - peak + KV allocated for the run) x free_gpu_memory_fraction``
  (0.9, llm_args.py:1650), capped by ``max_tokens`` when given, divided by the *estimate*
  ``get_cache_size_per_token`` (``KVCacheManager``): 1 byte per element for an fp8 cache, else
  2 (an NVFP4 cache is estimated at 2 bytes per element, not its 0.5625), ``head_dim x
  kv_heads // tp`` per layer (floor, not the ceiling the allocation takes). The manager then
  takes ``ceil(max_tokens / tokens_per_block)`` blocks (``calculate_max_num_blocks``), unless
  ``free_gpu_memory_fraction x free memory / bytes per token`` at that moment is smaller.
* windows: ``max_attention_window`` is ``[max_seq_len]`` unless ``kv_cache_config`` sets it
  (``KVCacheManager.__init__``): sliding and chunked layers keep every token by default.
* hybrids (``get_kv_cache_manager_cls``, _util.py): ``MambaHybridCacheManager`` for Nemotron-H
  and Qwen3-Next only; ``MambaCacheManager`` (``_torch/pyexecutor/mamba_cache_manager.py``)
  allocates conv ``(conv_dim / tp, d_conv - 1)`` in the model dtype and SSM ``(heads / tp,
  head_dim, d_state)`` states for ``max_batch_size`` requests up front, asserting that ``tp``
  divides both; the SSM dtype is ``kv_cache_config.mamba_ssm_cache_dtype``, ``auto`` being the
  model's ``torch_dtype`` (``validate_and_set_mamba_ssm_cache_dtype``, model_loader.py), and
  block reuse must be off.
"""

import math

from kvtool.model.spec import AttentionLayers, LayerGroup, MlaLayers
from kvtool.record import Record

RELEASE = "1.2.1"
SOURCE_COMMIT = "b35ac1b64368513d215c57d2ed01d62d910df8da"
TOKENS_PER_BLOCK = 32
FREE_GPU_MEMORY_FRACTION = 0.9
DEFAULT_MAX_BATCH_SIZE = 2048  # TorchLlmArgs.validate_misc: max_batch_size None -> 2048
# kvtool's --kv-dtype formats TensorRT-LLM keeps (kv_cache_config.dtype auto/fp8/nvfp4; the
# model dtype for auto)
KV_FORMATS = frozenset({"bf16", "fp16", "fp32", "fp8_e4m3", "nvfp4"})

_M = "tensorrt_llm/_torch/models/"

# kvtool's families (model_type) TensorRT-LLM 1.2.1's PyTorch backend has a class for, and the
# class the config's architecture resolves to (AutoModelForCausalLM, register_auto_model)
MODEL_CLASSES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "llama4_text": "Llama4ForConditionalGeneration",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "kimi_k2": "DeepseekV3ForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",  # added in 1.2.1 (its release notes)
    "nemotron_h": "NemotronHForCausalLM",
}

_NO_CLASS = "TensorRT-LLM {release} has no model class for {arch} (PyTorch backend)"
_NO_CLASS_FOR = {
    "RefinedWeb": "FalconForCausalLM",
    "RefinedWebModel": "FalconForCausalLM",
    "falcon": "FalconForCausalLM",
    "falcon_mamba": "FalconMambaForCausalLM",
    "mamba": "MambaForCausalLM",
    "mamba2": "Mamba2ForCausalLM",
    "jamba": "JambaForCausalLM",
    "kimi_linear": "KimiLinearForCausalLM",
    "minimax_m1": "MiniMaxM1ForCausalLM",
    "minimax_text_01": "MiniMaxText01ForCausalLM",
    "qwen3_5_text": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe_text": "Qwen3_5MoeForConditionalGeneration",
    "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "deepseek_v4": "DeepseekV4ForCausalLM",
    "bamba": "BambaForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "falcon_h1": "FalconH1ForCausalLM",
    "zamba2": "Zamba2ForCausalLM",
    "plamo2": "Plamo2ForCausalLM",
    "gemma3n_text": "Gemma3nForConditionalGeneration",
    "gemma4_text": "Gemma4ForConditionalGeneration",
    "mimo_v2_flash": "MiMoV2FlashForCausalLM",
    "mimo_v2": "MiMoV2ForCausalLM",
}
NOT_MODELLED: dict[str, str] = {
    # DeepseekV32ForCausalLM exists, but its cache is the sparse-attention manager's (an
    # indexer-key pool beside the latent, DSACacheManager), whose blocks kvtool has not read
    "deepseek_v32": "its DSA indexer-key pool is not modelled (DSACacheManager, the"
    " sparse-attention cache)",
}

# a family whose multimodal wrapper has no class (its text model alone would have one):
# Kimi-K2.5's KimiK25ForConditionalGeneration holds a Kimi-K2 (DeepseekV3) text model
WRAPPED_REFUSED: tuple[tuple[str, str], ...] = (
    ("kimi_k2", _NO_CLASS.format(release=RELEASE, arch="KimiK25ForConditionalGeneration")),
)

REFUSED: tuple[tuple[str, str], ...] = (
    *((t, _NO_CLASS.format(release=RELEASE, arch=a)) for t, a in _NO_CLASS_FOR.items()),
    *NOT_MODELLED.items(),
)


# why a family outside MODEL_CLASSES and REFUSED is refused ({model_type} filled in)
UNKNOWN_FAMILY = (
    f"kvtool has not checked TensorRT-LLM {RELEASE}'s model class for {{model_type}}"
    " (PyTorch backend)"
)


class PerToken(Record):
    """One rank's KV bytes for one token: what the allocation takes (``actual``) and what the
    pool estimate divides memory by (``estimate``)."""

    actual: int
    estimate: int


def bytes_per_token(
    *,
    layers: int,
    kv_heads: int,
    head_dim: int,
    fmt_name: str,
    tp: int = 1,
    mla: bool = False,
    attention_dp: bool = False,
) -> PerToken:
    """``get_cache_bytes_per_token`` and ``get_cache_size_per_token`` for ``layers`` attention
    layers of one pipeline rank (uniform KV heads), with ``head_dim`` the per-head size (the
    latent's for MLA)."""
    tp_size = 1 if attention_dp else tp
    if mla:
        elements = layers * head_dim  # kv_factor 1, one "head"
        estimate_elements = layers * head_dim
    else:
        elements = 2 * layers * -(-kv_heads // tp_size) * head_dim
        estimate_elements = 2 * layers * (head_dim * kv_heads // tp_size)
    if fmt_name == "nvfp4":
        actual = elements // 2 + elements // 16  # fp4 values + one fp8 scale per 16
    else:
        actual = elements * {"fp8_e4m3": 1, "bf16": 2, "fp16": 2, "fp32": 4}[fmt_name]
    return PerToken(actual, estimate_elements * (1 if fmt_name == "fp8_e4m3" else 2))


class Pool(Record):
    """The KV pool one rank allocates: tokens (``max_tokens``), blocks, and whether the
    estimate decides it (``exact``) or the free memory when the manager is built (then
    ``max_tokens`` is an upper bound)."""

    max_tokens: int
    blocks: int
    exact: bool


def pool(
    free_bytes: int,
    per_token: PerToken,
    *,
    fraction: float = FREE_GPU_MEMORY_FRACTION,
    max_tokens: int | None = None,
    tokens_per_block: int = TOKENS_PER_BLOCK,
) -> Pool:
    """One rank's pool from ``free_bytes``, the memory left after the weights and the
    profiling run (``total - peak + KV allocated for the run``): ``configure_kv_cache_capacity``
    then ``calculate_max_num_blocks``."""
    available = int(free_bytes * fraction)
    if max_tokens is not None:
        available = min(available, max_tokens * per_token.estimate)
    tokens = available // per_token.estimate
    return Pool(
        tokens, math.ceil(tokens / tokens_per_block), per_token.actual <= per_token.estimate
    )


def mamba_state_bytes(
    *,
    layers: int,
    heads: int,
    head_dim: int,
    n_groups: int,
    d_state: int,
    d_conv: int,
    model_bytes: int,
    ssm_bytes: int,
    tp: int = 1,
) -> int:
    """One request's Mamba/GDN state on one rank (``MambaCacheManager.__init__``): conv
    ``(conv_dim / tp, d_conv - 1)`` in the model dtype, SSM ``(heads / tp, head_dim, d_state)``
    in the SSM cache dtype; ValueError where ``tp`` divides neither (TensorRT-LLM asserts)."""
    conv_dim = head_dim * heads + 2 * n_groups * d_state
    if heads % tp or conv_dim % tp:
        raise ValueError(f"tp {tp} must divide {heads} heads and {conv_dim} conv channels")
    conv = conv_dim // tp * (d_conv - 1) * model_bytes
    ssm = heads // tp * head_dim * d_state * ssm_bytes
    return layers * (conv + ssm)


def spec_per_token(
    groups: tuple[LayerGroup, ...], fmt_name: str, tp: int = 1, *, attention_dp: bool = False
) -> PerToken:
    """``bytes_per_token`` summed over a model's attention and MLA groups (its state layers
    hold no per-token KV): one rank's allocation and the pool's estimate."""
    actual = estimate = 0
    for group in groups:
        if isinstance(group, AttentionLayers):
            one = bytes_per_token(
                layers=group.num_layers, kv_heads=group.num_kv_heads, head_dim=group.head_dim,
                fmt_name=fmt_name, tp=tp, attention_dp=attention_dp,
            )  # fmt: skip
        elif isinstance(group, MlaLayers):
            one = bytes_per_token(
                layers=group.num_layers, kv_heads=1,
                head_dim=group.kv_lora_rank + group.qk_rope_head_dim, fmt_name=fmt_name,
                tp=tp, mla=True, attention_dp=attention_dp,
            )  # fmt: skip
        else:
            continue
        actual += one.actual
        estimate += one.estimate
    return PerToken(actual, estimate)

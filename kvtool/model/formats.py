"""KV element formats: how many bytes one cached vector of n elements takes, scales included.

Sources (vLLM 0.33.0 wheel, ``vllm/v1/attention/backends/triton_attn.py`` and
``vllm/utils/torch_utils.py``; SGLang 0.5.23 ``memory_pool.py``; see docs/sizing.md):

* bf16 / fp16 / fp32: 2 / 2 / 4 bytes per element, no scales.
* fp8 (e4m3 or e5m2): 1 byte per element; vLLM and SGLang keep one fp32 scale per layer
  for K and one for V outside the KV pool, so nothing grows with tokens.
* fp8 / int8 with per-token-head scales: 1 byte per element plus one fp32 scale per vector
  (vLLM ``fp8_per_token_head`` / ``int8_per_token_head``).
* int4 per-token-head: two elements per byte plus one fp32 scale per vector
  (vLLM ``int4_per_token_head``).
* NVFP4: 4-bit e2m1 elements plus one fp8-e4m3 scale per 16 elements
  (vLLM ``nvfp4_kv_cache_full_dim``: head_size // 2 + head_size // 16), and a per-layer fp32
  global scale outside the pool: 0.5625 bytes per element.
"""

from typing import Literal

from kvtool.errors import InputError
from kvtool.record import Record

ScaleScheme = Literal["none", "per_tensor", "per_token_head", "block16"]


class KvFormat(Record):
    """One KV element format: element width and where its scales live."""

    name: str
    element_bits: int
    scales: ScaleScheme
    description: str

    @property
    def is_quantized(self) -> bool:
        """True for formats narrower than 16 bits (they need scales somewhere)."""
        return self.element_bits < 16

    def vector_bytes(self, elements: int) -> int:
        """Bytes for one cached vector (one K, one V or one MLA latent) of ``elements`` values.

        >>> FORMATS["int8"].vector_bytes(128)   # 128 int8 values + one fp32 scale
        132
        >>> FORMATS["nvfp4"].vector_bytes(128)  # 64 bytes of fp4 + 8 fp8 block scales
        72
        """
        data = -(-elements * self.element_bits // 8)
        if self.scales == "per_token_head":
            return data + 4
        if self.scales == "block16":
            return data + -(-elements // 16)
        return data


FORMATS: dict[str, KvFormat] = {
    fmt.name: fmt
    for fmt in (
        KvFormat("fp32", 32, "none", "IEEE float32"),
        KvFormat("bf16", 16, "none", "bfloat16"),
        KvFormat("fp16", 16, "none", "float16"),
        KvFormat("fp8_e4m3", 8, "per_tensor", "fp8 e4m3, one fp32 scale per layer for K and V"),
        KvFormat("fp8_e5m2", 8, "per_tensor", "fp8 e5m2, one fp32 scale per layer for K and V"),
        KvFormat(
            "fp8_per_token_head", 8, "per_token_head", "fp8 with an fp32 scale per token per head"
        ),
        KvFormat("int8", 8, "per_token_head", "int8 with an fp32 scale per token per head"),
        KvFormat("int4", 4, "per_token_head", "int4 with an fp32 scale per token per head"),
        KvFormat("nvfp4", 4, "block16", "fp4 e2m1 with an fp8 scale per 16 elements"),
    )
}

ALIASES = {
    "fp8": "fp8_e4m3",
    "float8": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "int8_per_token_head": "int8",
    "int4_per_token_head": "int4",
}

KV_DTYPE_CHOICES = (
    "auto",
    "bf16",
    "fp16",
    "fp32",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_per_token_head",
    "int8",
    "int4",
    "nvfp4",
)


def resolve_format(name: str, model_dtype: str) -> KvFormat:
    """Map a ``--kv-dtype`` value to a format; ``auto`` is the model's own dtype (as in vLLM).

    Raises InputError listing the valid names for anything else.
    """
    key = name.strip().lower()
    if key == "auto":
        key = model_dtype
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise InputError(
            f"unknown --kv-dtype {name!r}",
            "choose one of " + ", ".join(KV_DTYPE_CHOICES),
        )
    return FORMATS[key]

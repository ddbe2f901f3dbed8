"""Reading a ``config.json``: the families' type names, transformers' per-layer kinds and
defaults, and ``ConfigFields``, which reads a value and names the one missing or malformed.
Pure. ``config.spec_from_config`` and ``state.state_groups`` build on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvtool.errors import ConfigError
from kvtool.model.families import ARCHITECTURE_TYPES

if TYPE_CHECKING:
    from kvtool.model.plain import Plain

FALCON_TYPES = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})
QWEN_SLIDING_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
HYBRID_GDN_TYPES = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})
MAMBA1_TYPES = frozenset({"mamba", "falcon_mamba"})
HIDDEN_OVER_HEADS_TYPES = frozenset({"bamba", "granitemoehybrid", "jamba"})
MINIMAX_LINEAR_TYPES = frozenset({"minimax_text_01", "minimax_m1"})

# transformers' names for per-layer attention kinds -> kvtool's group kinds
LAYER_TYPE_KIND = {
    "full_attention": "full",
    "attention": "full",
    "global_attention": "full",
    "sliding_attention": "sliding",
    "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "linear",
    "hybrid": "parallel",  # Zamba2: its own Mamba2 mixer plus a (weight-shared) attention block
    "indexed_attention": "full",  # DeepSeek sparse attention (MLA + indexer) in transformers 5
}
NO_KV_LAYER_TYPES = frozenset({"mlp", "moe"})  # Nemotron-H blocks without attention or state
ATTENTION_KINDS = frozenset({"full", "sliding", "chunked", "parallel"})  # kinds with K and V
STATE_KINDS = frozenset({"linear", "parallel"})  # kinds with a recurrent state

_DTYPE_NAMES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp32": "fp32",
}


# Defaults of transformers' config classes (5.24) for fields that published config.json
# files leave out: google/gemma-3-4b-it names neither its heads nor its head_dim.
# Applied only where the key is absent, never where it is present as null.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": {
        "tie_word_embeddings": True,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 4096,
    },
    "gemma3_text": {
        "tie_word_embeddings": True,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 4096,
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
    },
    # FalconConfig's default; the RefinedWeb remote-code configs name no limit and vLLM then
    # assumes 2,048 too.
    "falcon": {"max_position_embeddings": 2048},
    "RefinedWeb": {"max_position_embeddings": 2048},
    "RefinedWebModel": {"max_position_embeddings": 2048},
    "mistral": {"sliding_window": 4096},
    "gpt_oss": {"sliding_window": 128},
    "llama4_text": {"attention_chunk_size": 8192},
    # vLLM and transformers both keep Nemotron-H's Mamba2 recurrent state in float32.
    "nemotron_h": {"mamba_ssm_cache_dtype": "float32", "head_dim": 128},
}


# Fields only Falcon's configs carry; a config that has one is read by Falcon's rules.
_FALCON_FIELDS = ("multi_query", "new_decoder_architecture", "n_head_kv", "parallel_attn")


def infer_model_type(config: Mapping[str, Any], notes: list[str]) -> str:
    """``model_type``, else the one its ``architectures`` imply, else Falcon's when it has a
    Falcon-only field, else ``"unknown"``; every guess adds a note."""
    declared = config.get("model_type")
    if declared:
        return str(declared)
    architectures = config.get("architectures") or []
    arch = str(architectures[0]) if isinstance(architectures, list) and architectures else ""
    if arch in ARCHITECTURE_TYPES:
        notes.append(f"config names no model_type; read as {ARCHITECTURE_TYPES[arch]} ({arch})")
        return ARCHITECTURE_TYPES[arch]
    falcon = [name for name in _FALCON_FIELDS if name in config]
    if falcon or arch == "RWForCausalLM":
        why = f"it has {falcon[0]}" if falcon else arch
        notes.append(f"config names no model_type; read by Falcon's rules because {why}")
        return "falcon"
    return "unknown"  # sized by the architecture's record, or refused (families.check_known)


class ConfigFields:
    """Reads config fields and names the missing one, with the model_type that needs it."""

    def __init__(
        self,
        config: Mapping[str, Any],
        source: str,
        notes: list[str] | None = None,
        *,
        plain: Plain | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.model_type = infer_model_type(config, notes if notes is not None else [])
        # an architecture vLLM builds with plain attention: its recorded rules, not the
        # model_type's (vLLM picks the class by architecture)
        self.plain = plain
        self.defaults = {
            **FAMILY_DEFAULTS.get(self.model_type, {}),
            **(plain.defaults if plain else {}),
        }

    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            value = self.config.get(name)
            if value is not None:
                return value
        for name in names:
            if name not in self.config and name in self.defaults:
                return self.defaults[name]
        return default

    def null_read_as(self, name: str, value: int, how: str, notes: list[str]) -> int:
        """``value`` for a field the config names as JSON null, with a note of what was
        assumed: transformers' LlamaConfig reads a null ``head_dim`` as hidden_size /
        num_attention_heads and a null ``num_key_value_heads`` as num_attention_heads
        (configuration_llama.py:86-89, transformers 5.25.0), and vLLM sizes what it gets.
        A family whose config class has a default of its own (Gemma: head_dim 256) refuses
        a null there (transformers' strict dataclass validation): so does kvtool."""
        if name in self.defaults:
            raise ConfigError(
                f"{self.source}: field {name!r} is null, and model_type {self.model_type!r}"
                f" takes a number (transformers' default: {self.defaults[name]!r:.20})",
                f"give {name!r}, or leave the key out for the default",
            )
        notes.append(
            f"{name} is null in the config: read as {how} = {value}, as transformers'"
            " LlamaConfig does (configuration_llama.py:86-89, 5.25.0)"
        )
        return value

    def is_null(self, name: str) -> bool:
        """True where the config names ``name`` as JSON null (not where it leaves it out)."""
        return name in self.config and self.config[name] is None

    def require_int(self, *names: str) -> int:
        value = self.get(*names)
        if value is None:
            raise ConfigError(
                f"{self.source}: model_type {self.model_type!r} needs field {names[0]!r},"
                " which the config lacks",
                f"add {names[0]!r} to the config (see the model's config.json on Hugging Face)",
            )
        return self.positive_int(names[0], value)

    def positive_int(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < MAX_FIELD:
            raise ConfigError(
                f"{self.source}: field {name!r} must be a positive integer, got {value!r:.40}",
                "fix the value in the config",
            )
        return value

    def number(self, name: str, default: float) -> float:
        """A positive factor (``expand``, 2 or 1.5); ConfigError for anything else."""
        value = self.get(name, default=default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
            raise ConfigError(
                f"{self.source}: field {name!r} must be a positive number, got {value!r:.40}",
                "fix the value in the config",
            )
        return float(value)

    def whole(self, *names: str, default: int) -> int:
        """A count that may be 0 (experts, shared experts, dense layers first), or
        ``default`` when the config has none; ConfigError for anything but a whole number."""
        value = self.get(*names, default=default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_FIELD:
            raise ConfigError(
                f"{self.source}: field {names[0]!r} must be a whole number, got {value!r:.40}",
                "fix the value in the config",
            )
        return value


MAX_FIELD = 2**40  # past any real width, layer or expert count: a typo or a hostile config


def text_config_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language-model part of a config: ``text_config`` for multimodal wrappers."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" in text:
        merged = dict(text)
        for key in ("torch_dtype", "dtype"):
            if merged.get(key) is None and config.get(key) is not None:
                merged[key] = config[key]
        return merged
    return config


def normalize_dtype(value: Any) -> str | None:
    """``'torch.bfloat16'`` / ``'bfloat16'`` -> ``'bf16'``; ``None`` if not a known float dtype."""
    if value is None:
        return None
    name = str(value).removeprefix("torch.")
    return _DTYPE_NAMES.get(name)

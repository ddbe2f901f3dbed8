"""kvtool: size, place, benchmark and check KV-cache tiers for LLM serving.

The library API used by the CLI::

    from kvtool import resolve_model, size_kv, get_engine, resolve_format
    model = resolve_model("deepseek-r1")
    result = size_kv(model.spec, rules=get_engine("vllm"),
                     fmt=resolve_format("auto", model.spec.dtype),
                     ctx_tokens=200_000, sessions=100)
    result.kv_bytes_total   # 1,405,440,000,000 bytes
"""

from kvtool.errors import ConfigError, InputError, KvtoolError
from kvtool.model.config import spec_from_config
from kvtool.model.engines import ENGINES, get_engine
from kvtool.model.formats import FORMATS, resolve_format
from kvtool.model.kv import SizeResult, kv_bytes_per_token, size_kv
from kvtool.model.spec import ModelSpec
from kvtool.profiles.resolve import ResolvedModel, resolve_model

__version__ = "0.1.0"

__all__ = [
    "ENGINES",
    "FORMATS",
    "ConfigError",
    "InputError",
    "KvtoolError",
    "ModelSpec",
    "ResolvedModel",
    "SizeResult",
    "__version__",
    "get_engine",
    "kv_bytes_per_token",
    "resolve_format",
    "resolve_model",
    "size_kv",
    "spec_from_config",
]

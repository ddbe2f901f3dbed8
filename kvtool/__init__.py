"""kvtool: size the KV cache of an LLM deployment and plan where it lives (HBM, DRAM, FSx, S3).

The library API used by the CLI::

    from kvtool import resolve_model, size_kv, get_engine, resolve_format
    model = resolve_model("deepseek-r1")
    result = size_kv(model.spec, rules=get_engine("vllm"),
                     fmt=resolve_format("auto", model.spec.dtype),
                     ctx_tokens=200_000, sessions=100)
    result.kv_bytes_total   # 1,405,440,000,000 bytes
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Imported on first use, so that ``import kvtool`` (and ``kvtool --help``) costs nothing.
_LAZY = {
    "ConfigError": "kvtool.errors",
    "InputError": "kvtool.errors",
    "KvtoolError": "kvtool.errors",
    "spec_from_config": "kvtool.model.config",
    "ENGINES": "kvtool.model.engines",
    "get_engine": "kvtool.model.engines",
    "FORMATS": "kvtool.model.formats",
    "resolve_format": "kvtool.model.formats",
    "SizeResult": "kvtool.model.kv",
    "kv_bytes_per_token": "kvtool.model.kv",
    "size_kv": "kvtool.model.kv",
    "ModelSpec": "kvtool.model.spec",
    "ResolvedModel": "kvtool.profiles.resolve",
    "resolve_model": "kvtool.profiles.resolve",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvtool' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

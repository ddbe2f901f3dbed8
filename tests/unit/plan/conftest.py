"""Helpers for planning tests: bundled models priced under vLLM, bundled hardware."""

from __future__ import annotations

from kvtool.model.engines import ENGINES
from kvtool.model.formats import resolve_format
from kvtool.model.kv import size_kv
from kvtool.model.params import ParamCount, count_params
from kvtool.model.shape import KvShape
from kvtool.model.spec import ModelSpec
from kvtool.profiles.load import find_model_profile, read_config_json


def model(name: str) -> tuple[ModelSpec, ParamCount]:
    from kvtool.model.config import spec_from_config

    found = find_model_profile(name)
    assert found is not None
    config = read_config_json(found[1] / "config.json")
    spec = spec_from_config(config, name=name)
    return spec, count_params(spec)


def session_bytes(spec: ModelSpec, ctx: int, kv_dtype: str = "auto") -> int:
    fmt = resolve_format(kv_dtype, spec.dtype)
    return size_kv(
        spec, rules=ENGINES["vllm"], fmt=fmt, ctx_tokens=ctx, sessions=1
    ).kv_bytes_per_session


def shape(
    spec: ModelSpec, engine: str = "vllm", kv_dtype: str = "auto", tp: int | None = None
) -> KvShape:
    """``spec`` under ``engine`` in ``kv_dtype``; ``tp`` None lets a planner choose."""
    return KvShape(
        spec,
        ENGINES[engine],
        resolve_format(kv_dtype, spec.dtype),
        tp=tp or 1,
        tp_given=tp is not None,
    )

"""Model + engine + KV dtype + tp (+ block size), as typed, into one ``KvShape``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvtool.model.engines import get_engine
from kvtool.model.formats import resolve_format
from kvtool.model.shape import KvShape
from kvtool.profiles.resolve import resolve_model
from kvtool.units import parse_count

if TYPE_CHECKING:
    from kvtool.profiles.resolve import ResolvedModel


def resolve_shape(
    model: str | ResolvedModel,
    *,
    engine: str = "vllm",
    kv_dtype: str = "auto",
    tp: str | int | None = None,
    block_size: str | int | None = None,
) -> KvShape:
    """The shape of ``model``'s KV: a bundled name, a config path or a Hub id (or a model
    already resolved), under ``engine``'s rules, in ``kv_dtype`` (``auto``: the model's own),
    at ``tp`` (None: 1, marked not given so a planner may choose)."""
    resolved = resolve_model(model) if isinstance(model, str) else model
    spec = resolved.spec
    return KvShape(
        spec=spec,
        rules=get_engine(engine),
        fmt=resolve_format(kv_dtype, spec.dtype),
        tp=_count(tp, "--tp") or 1,
        block_size=_count(block_size, "--block-size"),
        tp_given=tp is not None,
    )


def _count(value: str | int | None, what: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    return parse_count(value, what=what)


def parse_chunk_tokens(text: str | int) -> int:
    """``--chunk-tokens``: tokens per chunk file (LMCache's chunk_size)."""
    return text if isinstance(text, int) else parse_count(text, what="--chunk-tokens")

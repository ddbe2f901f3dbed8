"""``kvtool size``: KV bytes per token, per session and in total for a model."""

from __future__ import annotations

from typing import Annotated

import typer

from kvtool.model.engines import ENGINES, get_engine
from kvtool.model.formats import KV_DTYPE_CHOICES, resolve_format
from kvtool.model.kv import SizeResult, size_kv
from kvtool.profiles.resolve import resolve_model
from kvtool.units import parse_count, parse_count_list


def size(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="Bundled model name or alias (see `kvtool models`), a config.json path or a"
            " folder holding one, or a Hugging Face repo id (needs the hf extra).",
        ),
    ],
    ctx: Annotated[
        str,
        typer.Option(
            "--ctx",
            metavar="TOKENS[,TOKENS...]",
            help="Context length(s) per session, comma-separated. k/m = x1000, K/M = x1024"
            " (vLLM's --max-model-len rule): 200k = 200,000; 128K = 131,072.",
        ),
    ] = "8k",
    sessions: Annotated[
        str,
        typer.Option("--sessions", "-n", metavar="N", help="Concurrent sessions (e.g. 100, 1k)."),
    ] = "1",
    kv_dtype: Annotated[
        str,
        typer.Option(
            "--kv-dtype",
            metavar="DTYPE",
            help="KV element format: " + ", ".join(KV_DTYPE_CHOICES) + ". auto = model dtype.",
        ),
    ] = "auto",
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            metavar="ENGINE",
            help="Allocation convention: " + ", ".join(ENGINES) + ".",
        ),
    ] = "vllm",
    tp: Annotated[
        str,
        typer.Option(
            "--tp", metavar="N", help="Tensor-parallel size (vllm, sglang): per-rank view."
        ),
    ] = "1",
    block_size: Annotated[
        str | None,
        typer.Option(
            "--block-size",
            metavar="TOKENS",
            help="Override the engine's KV block/page size in tokens.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """How much KV cache MODEL needs: per token, per session, and for all sessions.

    Examples:

      kvtool size deepseek-r1 --ctx 200k --sessions 100

      kvtool size llama-3.1-70b --ctx 8k,32k,128K --kv-dtype fp8 --tp 8

      kvtool size ./my-model/config.json --ctx 1m --engine formula --json
    """
    from kvtool.cli import render

    contexts = parse_count_list(ctx, what="--ctx")
    count = parse_count(sessions, what="--sessions")
    tp_size = parse_count(tp, what="--tp")
    block = None if block_size is None else parse_count(block_size, what="--block-size")
    rules = get_engine(engine)
    resolved = resolve_model(model)
    fmt = resolve_format(kv_dtype, resolved.spec.dtype)
    results: list[SizeResult] = [
        size_kv(
            resolved.spec,
            rules=rules,
            fmt=fmt,
            ctx_tokens=tokens,
            sessions=count,
            tp=tp_size,
            block_size=block,
        )
        for tokens in contexts
    ]
    if as_json:
        render.print_json(render.size_json(resolved, results, contexts_typed=ctx))
    else:
        render.print_size(resolved, results)

"""``kvtool size``: KV bytes per token, per session and in total for a model."""

import sys
from typing import Annotated

import typer

from kvtool.errors import InputError
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
    hardware: Annotated[
        str | None,
        typer.Option(
            "--hardware",
            metavar="NODE",
            help="Add a tier plan for this node type (kvtool hardware lists them) or a .toml.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    nodes: Annotated[
        str,
        typer.Option(
            "--nodes", metavar="N", help="Nodes serving the sessions.", rich_help_panel="Tier plan"
        ),
    ] = "1",
    fsx_capacity: Annotated[
        str | None,
        typer.Option(
            "--fsx-capacity",
            metavar="SIZE",
            help="FSx for Lustre capacity, e.g. 96TiB (default: sized to fit).",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    fsx_throughput: Annotated[
        str | None,
        typer.Option(
            "--fsx-throughput",
            metavar="MBPS",
            help="FSx per-unit throughput in MB/s per TiB: 125, 250, 500 or 1000.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t3: Annotated[
        str,
        typer.Option(
            "--t3",
            metavar="STORAGE",
            help="T3 profile: fsx-lustre-persistent2, -persistent1, -scratch2, or a .toml.",
            rich_help_panel="Tier plan",
        ),
    ] = "fsx-lustre-persistent2",
    t4: Annotated[
        str,
        typer.Option(
            "--t4",
            metavar="STORAGE",
            help="T4 profile: s3-standard, s3-express-one-zone.",
            rich_help_panel="Tier plan",
        ),
    ] = "s3-standard",
    t3_path: Annotated[
        str,
        typer.Option(
            "--t3-path",
            metavar="PATH",
            help="Client path to FSx: ena, efa, efa-gds.",
            rich_help_panel="Tier plan",
        ),
    ] = "efa",
    weights_dtype: Annotated[
        str,
        typer.Option(
            "--weights-dtype",
            metavar="DTYPE",
            help="auto (the checkpoint's), bf16, fp16, fp8, int8, int4, mxfp4, nvfp4.",
            rich_help_panel="Tier plan",
        ),
    ] = "auto",
    mfu: Annotated[
        str,
        typer.Option(
            "--mfu",
            metavar="FRACTION",
            help="Prefill model-FLOPs utilisation for recompute times.",
            rich_help_panel="Tier plan",
        ),
    ] = "0.4",
    concurrent_loads: Annotated[
        str,
        typer.Option(
            "--concurrent-loads",
            metavar="N",
            help="Sessions restoring at once on a node (share its links).",
            rich_help_panel="Tier plan",
        ),
    ] = "16",
    gpu_memory_utilization: Annotated[
        str,
        typer.Option(
            "--gpu-memory-utilization",
            metavar="FRACTION",
            help="Share of HBM the engine may use (vLLM's default 0.9).",
            rich_help_panel="Tier plan",
        ),
    ] = "0.9",
    emit: Annotated[
        str | None,
        typer.Option(
            "--emit",
            metavar="ENGINE",
            help="Print a configuration for the plan instead: lmcache, vllm, sglang, dynamo.",
            rich_help_panel="Tier plan",
        ),
    ] = None,
    t3_dir: Annotated[
        str,
        typer.Option(
            "--t3-dir",
            metavar="PATH",
            help="KV directory on the FSx mount (--emit).",
            rich_help_panel="Tier plan",
        ),
    ] = "/fsx/kvcache",
    eager: Annotated[
        bool,
        typer.Option(
            "--eager",
            help="Write KV to the shared tier when prefill ends (--emit); the default is lazy.",
            rich_help_panel="Tier plan",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """How much KV cache MODEL needs: per token, per session, and for all sessions.

    Examples:

      kvtool size deepseek-r1 --ctx 200k --sessions 100

      kvtool size llama-3.1-70b --ctx 8k,32k,128K --kv-dtype fp8 --tp 8

      kvtool size ./my-model/config.json --ctx 1m --engine formula --json

      kvtool size deepseek-r1 --ctx 128K --sessions 500 --hardware p5en --nodes 4

      kvtool size llama-3.1-70b --ctx 128K --sessions 200 --hardware p5en --emit lmcache
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
    plans = None
    if emit is not None and hardware is None:
        raise InputError("--emit needs a plan", "add --hardware NODE (kvtool hardware lists them)")
    if hardware is not None:
        from kvtool.cli.planning import PlanRequest, plan_contexts

        request = PlanRequest(
            hardware=hardware,
            nodes=parse_count(nodes, what="--nodes"),
            t3=t3,
            t4=t4,
            fsx_capacity=fsx_capacity,
            fsx_throughput=fsx_throughput,
            t3_path=t3_path,
            weights_dtype=weights_dtype,
            mfu=mfu,
            concurrent_loads=parse_count(concurrent_loads, what="--concurrent-loads"),
            gpu_memory_utilization=gpu_memory_utilization,
        )
        plans = plan_contexts(resolved, results, request, rules=rules, fmt=fmt, block=block)
        if emit is not None:
            from kvtool.cli.planning import emit_config

            sys.stdout.write(
                emit_config(resolved, plans[-1], emit, fmt=fmt, t3_dir=t3_dir, eager=eager)
            )
            return
    if as_json:
        render.print_json(render.size_json(resolved, results, plans))
    else:
        render.print_size(resolved, results)
        if plans:
            render.print_plans(plans)

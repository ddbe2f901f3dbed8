"""``kvtool plan``: where a deployment's KV lives on a cluster (HBM, host DRAM, FSx for Lustre,
S3), how fast it comes back, what it costs, and the engine configuration for it."""

from typing import Annotated

import typer

from kvtool.cli.options import (
    PANEL_SHAPE,
    CtxOpt,
    KvDtypeOpt,
    SessionsOpt,
    TpOpt,
    plan_flag,
    plan_option,
    settings_option,
)
from kvtool.model.engines import ENGINES


def plan(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="Bundled model name or alias (see `kvtool models`), a config.json path or a"
            " folder holding one, or a Hugging Face repo id. Several, comma-separated, side by"
            " side.",
        ),
    ],
    hardware: Annotated[str | None, plan_option("--hardware", panel=None)] = None,
    ctx: CtxOpt = "8k",
    sessions: SessionsOpt = "1",
    nodes: Annotated[str | None, plan_option("--nodes", panel=None)] = None,
    kv_dtype: KvDtypeOpt = "auto",
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            "-e",
            metavar="ENGINE",
            help="Whose memory layout to count: " + ", ".join(ENGINES) + " (default vllm;"
            " hf: the transformers release installed here, hf==5.24 names one; with --emit,"
            " the engine that target configures).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = None,
    tp: TpOpt = None,
    pp: Annotated[str | None, plan_option("--pp")] = None,
    weights_dtype: Annotated[str | None, plan_option("--weights-dtype")] = None,
    fsx_capacity: Annotated[str | None, plan_option("--fsx-capacity")] = None,
    t3_storage: Annotated[str | None, plan_option("--t3-storage")] = None,
    t3_path: Annotated[str | None, plan_option("--t3-path")] = None,
    bench: Annotated[str | None, plan_option("--bench")] = None,
    calibrate: Annotated[str | None, plan_option("--calibrate")] = None,
    cost: Annotated[bool, plan_flag("--cost")] = False,
    prices: Annotated[str | None, plan_option("--prices")] = None,
    emit: Annotated[str | None, plan_option("--emit")] = None,
    t3_dir: Annotated[str | None, plan_option("--t3-dir")] = None,
    posture: Annotated[str | None, plan_option("--posture")] = None,
    settings: Annotated[
        list[str] | None,
        settings_option(
            "A less used setting, as many times as needed: mfu, concurrent_loads,"
            " gpu_memory_utilization, max_num_batched_tokens, kv_cache_memory_bytes (vLLM's"
            " fixed KV budget a rank: T1 is its pool, in blocks), vllm_t3 (--emit vllm's T3:"
            " lmcache, or fs, vLLM's own tiered offload), fsx_throughput, t4_storage,"
            " region, dp_attention, block_tokens (each as its kvtool size option);"
            " fp8_attention (true: the engine's attention runs at the FP8 peak); the storage"
            " model's chunk_tokens, io_threads, s3_connections (per instance), s3_lookups,"
            " s3_lookups_at_once (sessions an engine looks up at once; LMCache: 1),"
            " lookup_timeout (LMCache's lookup_timeout_ms, default 3s: a longer S3 lookup is"
            " recomputed), s3_prefixes and metadata_iops (each printed with its source); for the T3"
            " that kvtool sizes, reload_from (the context from which reading it back must beat"
            " recompute, default 50k, the AWS article's line) or restore_slo (the time the"
            " plan's concurrent restores at --ctx must finish in, e.g. 500ms); for the AWS"
            " article's T4 (FSx releases idle sessions to S3), mean_idle (the sessions' mean"
            " idle time, e.g. 30m: who is released) and release_after (default 10m).",
            panel="Plan",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> int | None:
    """Plan MODEL's KV on --hardware: sessions per tier (HBM, host DRAM, FSx for Lustre, S3),
    reload against recompute, the FSx to provision, and with --cost, --emit or --bench what
    it costs, the engine's configuration, or the plan with measured bandwidths.

    Examples:

      kvtool plan deepseek-r1 --hardware p5en --ctx 128K --sessions 500 --nodes 4

      kvtool plan llama-3.1-70b --hardware p5en --ctx 128K --sessions 200 --emit lmcache

      kvtool plan llama-3.1-70b --hardware p5en --ctx 32k --sessions 200 --cost --json

      kvtool plan deepseek-r1 --hardware p5en --ctx 128K --set mfu=0.35 --set dp_attention=true

      kvtool plan llama-3.1-70b --hardware p5en --ctx 32k --nodes 8 --set restore_slo=500ms
    """
    from kvtool.cli.size import answer
    from kvtool.errors import InputError
    from kvtool.inputs.plan_settings import MODEL_KEYS, flag, parse_settings
    from kvtool.inputs.size import SizeRequest

    if hardware is None:
        raise InputError(
            "kvtool plan needs --hardware NODE",
            "kvtool hardware lists them; kvtool size MODEL answers without one",
        )
    extra = parse_settings(settings)
    if engine is None:  # the engine the emitted configuration is for, else vLLM
        from kvtool.plan.emit import EMIT_ENGINE

        engine = EMIT_ENGINE.get((emit or "").strip().lower(), "vllm")
        if engine != "vllm":
            from kvtool.cli.render.text import note

            note(f"--emit {emit}: the plan is sized by {engine}'s rules (no --engine given)")
    return answer(
        SizeRequest(
            model, ctx=ctx, sessions=sessions, kv_dtype=kv_dtype, engine=engine, tp=tp,
            block_size=extra.get("block_tokens"), hardware=hardware, nodes=nodes,
            fsx_capacity=fsx_capacity, fsx_throughput=extra.get("fsx_throughput"),
            t3=t3_storage, t4=extra.get("t4_storage"), t3_path=t3_path,
            weights_dtype=weights_dtype, mfu=extra.get("mfu"),
            concurrent_loads=extra.get("concurrent_loads"),
            gpu_memory_utilization=extra.get("gpu_memory_utilization"), emit=emit,
            t3_dir=t3_dir, bench=bench,
            max_num_batched_tokens=extra.get("max_num_batched_tokens"), pp=pp,
            kv_cache_memory_bytes=extra.get("kv_cache_memory_bytes"),
            vllm_t3=extra.get("vllm_t3"),
            dp_attention=flag(extra, "dp_attention"), cost=cost, prices=prices,
            region=extra.get("region"), calibrate=calibrate, posture=posture,
            as_json=as_json, restore_slo=extra.get("restore_slo"),
            reload_from=extra.get("reload_from"),
            settings={k: v for k, v in extra.items() if k in MODEL_KEYS},
        ),
        command="plan",
    )  # fmt: skip

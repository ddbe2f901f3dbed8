"""``kvtool capacity``: how many returning sessions this T3 restores within a latency target,
measured with the model's real chunk files, beside the plan."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.options import (
    TOKENS_RULE,
    ChunkTokensOpt,
    EngineOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    TpOpt,
    model_option,
)

PANEL_RUN = "The run"


def _run_option(name: str, metavar: str, help_text: str) -> object:
    return typer.Option(name, metavar=metavar, help=help_text, rich_help_panel=PANEL_RUN)


def capacity(
    t3_dir: Annotated[
        str | None,
        _run_option("--t3-dir", "DIR", "The T3 folder (a scratch sub-folder is made and removed)."),
    ] = None,
    model: Annotated[
        str | None, model_option("Whose chunk files the sessions write and restore.")
    ] = None,
    ctx: Annotated[
        str,
        _run_option(
            "--ctx", "TOKENS", f"Context each session restores (default 32k); {TOKENS_RULE}."
        ),
    ] = "32k",
    restore_slo: Annotated[
        str, _run_option("--restore-slo", "TIME", "Restore target (default 500ms).")
    ] = "500ms",
    at: Annotated[
        str, _run_option("--percentile", "P", "p50, p95 (default) or p99 of restore times.")
    ] = "p95",
    sessions: Annotated[
        str | None,
        _run_option("--sessions", "N[,N]", "Run these levels instead of searching, e.g. 8,16,32."),
    ] = None,
    trace: Annotated[
        str | None,
        _run_option("--trace", "FILE", "Turn lengths and pauses from a multi-turn trace (JSONL)."),
    ] = None,
    duration: Annotated[
        str, _run_option("--duration", "SECONDS", "Seconds per level (default 10).")
    ] = "10",
    restore_parallel: Annotated[
        str, _run_option("--restore-parallel", "N", "Chunks a restore reads at once (default 8).")
    ] = "8",
    chunk_tokens: ChunkTokensOpt = "256",
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    tp: TpOpt = None,
    hardware: HardwareOpt = None,
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            metavar="N",
            help="Nodes in the plan beside the run (default 1).",
            rich_help_panel="Cluster",
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        _run_option(
            "--hosts",
            "H1,H2[:PORT]",
            "Other nodes (each running fio --server) that load"
            " T3 alike at each level while this one measures.",
        ),
    ] = None,
    direct: Annotated[
        bool,
        typer.Option(
            "--direct/--no-direct",
            help="O_DIRECT (default); --no-direct goes through the page cache.",
            rich_help_panel=PANEL_RUN,
        ),
    ] = True,
    fio_check: Annotated[
        bool,
        typer.Option(
            "--fio-check/--no-fio-check",
            help="Read with raw fio at the same block and"
            " concurrency, and print the harness's ratio to it (default on).",
            rich_help_panel=PANEL_RUN,
        ),
    ] = True,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Draw restore time against sessions, with the target (PNG, SVG or PDF).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Find the most sessions whose restores from --t3-dir stay within --restore-slo: each
    session restores its whole context (the model's chunk files, read --restore-parallel at a
    time), writes its next turn's chunks and pauses; the sessions double until the percentile
    misses the target, then bisect. Beside it, raw fio at the same block and concurrency (the
    harness's ratio to it), and with --hardware what the plan assumed.

    Exit status: 0 measured (the answer may be 0 sessions), 1 a level failed or the plan's
    concurrent restores miss the target, 2 bad usage or input.

    Examples:

      kvtool capacity --t3-dir /fsx/kvcache --model llama-3.1-70b --tp 8 --ctx 32k  # on FSx

      kvtool capacity --t3-dir /fsx/kvcache --model llama-3.1-8b --hosts node2,node3  # on FSx

      kvtool capacity --t3-dir /tmp --model llama-3.2-1b --ctx 4k --duration 3

      kvtool capacity --t3-dir /tmp --model llama-3.2-1b --ctx 4k --sessions 1,4 --duration 2 --json

      kvtool capacity --t3-dir /fsx/kvcache --model llama-3.1-8b --hardware p5en --nodes 4 \\
        --trace examples/traces/small.jsonl --plot capacity.png  # on FSx
    """
    from kvtool.bench.capacity import run_capacity
    from kvtool.cli import status as exit_status
    from kvtool.cli.render import capacity as render
    from kvtool.cli.render.text import StatusLine, print_json
    from kvtool.files import PLOT_SUFFIXES, output_file
    from kvtool.inputs.capacity import resolve_capacity
    from kvtool.probe.host import LocalHost

    target = None
    if plot is not None:  # before the run, not after it
        target = output_file(Path(plot), option="--plot", suffixes=PLOT_SUFFIXES)

    request = resolve_capacity(
        t3_dir=t3_dir, model=model, ctx=ctx, restore_slo=restore_slo, at=at, sessions=sessions,
        trace=trace, duration=duration, restore_parallel=restore_parallel,
        chunk_tokens=chunk_tokens, kv_dtype=kv_dtype, engine=engine, tp=tp, hardware=hardware,
        nodes=nodes, direct=direct, fio_check=fio_check, hosts=hosts,
    )  # fmt: skip
    with StatusLine(not as_json, "kvtool capacity") as status:
        result = run_capacity(LocalHost(), request.path, request.workload, request.options,
                              progress=status.update)  # fmt: skip
    notes = [*request.notes, *result.notes]
    missing = None  # without matplotlib: the table, then the error
    if target is not None:
        from kvtool.cli.render.replay import draw_chart

        chart = target
        missing = draw_chart(lambda: render.plot_capacity(result, request.plan, chart), notes)
    if as_json:
        print_json(render.capacity_json(result, request.plan, request.about, notes),
                   command="capacity")  # fmt: skip
    else:
        render.print_capacity(result, request.plan, request.about, notes)
    if missing is not None:
        raise missing
    return exit_status.PROBLEMS if render.misses_plan(result, request.plan) else exit_status.OK

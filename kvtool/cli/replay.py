"""``kvtool engine replay``, ``sweep`` and ``gen``: request traces through the tiering engine
on the trace's clock (docs/replay.md). Set-up is ``inputs/replay.py`` and ``replay/setup.py``."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvtool.cli.options import (
    EngineOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelOpt,
    TpOpt,
    engine_rule_options,
)
from kvtool.errors import InputError

PANEL_RULES = "Engine rules"
TIER_HELP = "tokens (3M), bytes (80GiB: needs --model), 0 (off) or inf"
POLICY, POSTURE = engine_rule_options()

TraceArg = Annotated[
    Path, typer.Argument(metavar="TRACE", help="A Mooncake or kvtool JSONL trace.")
]
FormatOpt = Annotated[
    str, typer.Option("--format", metavar="FORMAT", help="auto, mooncake or jsonl.")
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad", help="Count and skip malformed lines instead of stopping.")
]
PolicyOpt = Annotated[str, POLICY]
PostureOpt = Annotated[str, POSTURE]
T2IdleOpt = Annotated[
    float,
    typer.Option(
        "--t2-idle", metavar="S", help="T2 -> T3 after this idle.", rich_help_panel=PANEL_RULES
    ),
]
T3IdleOpt = Annotated[
    float,
    typer.Option(
        "--t3-idle", metavar="S", help="T3 -> T4 after this idle.", rich_help_panel=PANEL_RULES
    ),
]


def _tier_opt(tier: str, many: bool = False) -> Any:
    help_text = f"{tier} size: {TIER_HELP}" + (", or a comma-separated list" if many else "")
    return typer.Option(
        f"--{tier.lower()}", metavar="SIZE" + ("[,SIZE]" if many else ""), help=help_text
    )


def replay_command(
    trace: TraceArg,
    fmt: FormatOpt = "auto",
    skip_bad: SkipBadOpt = False,
    t1: Annotated[str | None, _tier_opt("T1")] = None,
    t2: Annotated[str | None, _tier_opt("T2")] = None,
    t3: Annotated[str | None, _tier_opt("T3")] = None,
    t4: Annotated[str | None, _tier_opt("T4")] = None,
    model: ModelOpt = None,
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    tp: TpOpt = None,
    hardware: HardwareOpt = None,
    policy: PolicyOpt = "lru",
    posture: PostureOpt = "lazy",
    t2_idle: T2IdleOpt = 300.0,
    t3_idle: T3IdleOpt = 3600.0,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", metavar="FILE.png", help="Draw tier occupancy over time."),
    ] = None,
    real: Annotated[
        Path | None,
        typer.Option(
            "--real",
            metavar="DIR",
            help="Move real bytes: T3 and T4 as folders under DIR (small traces).",
        ),
    ] = None,
    block_bytes: Annotated[
        str | None,
        typer.Option(
            "--block-bytes", metavar="SIZE", help="With --real and no --model (default 64KiB)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Replay TRACE through the tiering engine on its own clock: hit ratios, tier traffic, TTFT.

    Sizes are tokens (3M, as --ctx), bytes (80GiB: needs --model), 0 (off) or inf.
    Without sizes they come from --hardware and --model.

    Examples:

      kvtool engine replay conversation_trace.jsonl --t1 3M --t2 10M --t3 inf

      kvtool engine replay trace.jsonl --model llama-3.1-70b --kv-dtype fp8 --hardware p5en --json

      kvtool engine replay small.jsonl --t1 64K --t2 128K --t3 inf --real /fsx/shared

    Exit status: 0 replayed, 1 --real found a block that read back wrong, 2 bad input.
    """
    from kvtool.cli import status
    from kvtool.cli.render import replay as render
    from kvtool.inputs.replay import resolve_replay

    inputs = resolve_replay(
        trace, fmt=fmt, skip_bad=skip_bad, sizes={"T1": t1, "T2": t2, "T3": t3, "T4": t4},
        model=model, engine=engine, kv_dtype=kv_dtype, tp=tp, hardware=hardware,
        policy=policy, posture=posture, t2_idle=t2_idle, t3_idle=t3_idle,
        block_bytes=block_bytes, real=real is not None,
    )  # fmt: skip
    loaded, setup = inputs.trace, inputs.setup
    notes = list(setup.notes)
    extra: dict[str, Any] = {}
    if real is not None:
        from kvtool.bench.gpu import torch_or_none
        from kvtool.replay.real import replay_in_folder

        result, stats = replay_in_folder(loaded, setup.config, real, torch=torch_or_none())
        extra["real"] = stats._asdict()
        notes.append(
            f"--real: {stats.checked:,} hit blocks read back from T1 and compared,"
            f" {stats.mismatched} differed; {len(stats.faults)} medium fault(s)"
        )
    else:
        from kvtool.replay.run import replay

        result = replay(loaded.requests, loaded.block_tokens, setup.config, ttft=setup.ttft)
    if plot is not None:
        notes.append(render.plot_occupancy(result, plot))
    bad = bool(extra) and extra["real"]["mismatched"] > 0
    if as_json:
        from kvtool.cli.render.text import print_json

        print_json({**result.to_json(), "trace": loaded.source, "format": loaded.format,
                    "skipped_lines": loaded.skipped, "notes": notes, **extra})  # fmt: skip
    else:
        render.print_replay(result, loaded, notes, chart=plot is None)
        if extra:
            render.print_real(extra["real"])
    return status.PROBLEMS if bad else status.OK


def sweep_command(
    trace: TraceArg,
    fmt: FormatOpt = "auto",
    skip_bad: SkipBadOpt = False,
    t1: Annotated[str | None, _tier_opt("T1", many=True)] = None,
    t2: Annotated[str | None, _tier_opt("T2", many=True)] = None,
    t3: Annotated[str | None, _tier_opt("T3", many=True)] = None,
    t4: Annotated[str | None, _tier_opt("T4", many=True)] = None,
    model: ModelOpt = None,
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    tp: TpOpt = None,
    hardware: HardwareOpt = None,
    policy: PolicyOpt = "lru",
    posture: PostureOpt = "lazy",
    t2_idle: T2IdleOpt = 300.0,
    t3_idle: T3IdleOpt = 3600.0,
    processes: Annotated[
        str | None, typer.Option("--processes", "-j", metavar="N", help="Cores to use (all).")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", metavar="FILE.png", help="Draw hit ratio against capacity."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay TRACE once per combination of tier sizes, on all cores: hit ratio vs capacity.

    Examples:

      kvtool engine sweep conversation_trace.jsonl --t1 1M,3M,10M,30M,inf

      kvtool engine sweep trace.jsonl --t1 3M --t2 0,10M,30M --t3 0,inf --plot sweep.png
    """
    from kvtool.cli.render import replay as render
    from kvtool.inputs.replay import resolve_replay
    from kvtool.replay.sweep import grid, run_sweep
    from kvtool.units import parse_count

    inputs = resolve_replay(
        trace, fmt=fmt, skip_bad=skip_bad, sizes={"T1": t1, "T2": t2, "T3": t3, "T4": t4},
        model=model, engine=engine, kv_dtype=kv_dtype, tp=tp, hardware=hardware,
        policy=policy, posture=posture, t2_idle=t2_idle, t3_idle=t3_idle, sweep=True,
    )  # fmt: skip
    loaded, base, notes = inputs.trace, inputs.setup.config, list(inputs.setup.notes)
    count = None if processes is None else parse_count(processes, what="--processes")
    points = run_sweep(loaded, grid(inputs.sweep, base), processes=count)
    if plot is not None:
        notes.append(render.plot_sweep(points, list(inputs.sweep), plot, unit=base.unit))
    if as_json:
        from kvtool.cli.render.text import print_json
        from kvtool.replay.sweep import sweep_json

        print_json({"trace": loaded.source, "unit": base.unit, "points": sweep_json(points),
                    "notes": notes})  # fmt: skip
        return
    render.print_sweep(points, list(inputs.sweep), loaded, notes, unit=base.unit,
                       chart=plot is None)  # fmt: skip


def gen_command(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here (default: stdout)."),
    ] = None,
    requests: Annotated[str, typer.Option("--requests", "-n", metavar="N")] = "10000",
    arrival_rate: Annotated[
        float, typer.Option("--arrival-rate", metavar="PER_S", help="New sessions per second.")
    ] = 2.0,
    turns: Annotated[
        float, typer.Option("--turns", metavar="N", help="Mean turns per session.")
    ] = 4.0,
    think: Annotated[
        float, typer.Option("--think", metavar="S", help="Mean seconds between turns.")
    ] = 30.0,
    system_prompts: Annotated[
        int, typer.Option("--system-prompts", metavar="N", help="Distinct shared system prompts.")
    ] = 8,
    system_tokens: Annotated[int, typer.Option("--system-tokens", metavar="N")] = 2000,
    rag_preambles: Annotated[
        int, typer.Option("--rag-preambles", metavar="N", help="Distinct shared RAG documents.")
    ] = 200,
    rag_share: Annotated[
        float, typer.Option("--rag-share", metavar="F", help="Share of sessions with one.")
    ] = 0.3,
    rag_tokens: Annotated[int, typer.Option("--rag-tokens", metavar="N")] = 6000,
    user_tokens: Annotated[
        int, typer.Option("--user-tokens", metavar="N", help="Mean user message (lognormal).")
    ] = 300,
    output_tokens: Annotated[
        int, typer.Option("--output-tokens", metavar="N", help="Mean answer (lognormal).")
    ] = 400,
    max_context: Annotated[str, typer.Option("--max-context", metavar="TOKENS")] = "128k",
    block_tokens: Annotated[int, typer.Option("--block-tokens", metavar="N")] = 512,
    seed: Annotated[int, typer.Option("--seed", metavar="N")] = 1,
) -> None:
    """Write a synthetic trace (kvtool's JSONL) from a workload description; seeded.

    Examples:

      kvtool engine gen --requests 1000 --seed 7

      kvtool engine gen -n 1m --arrival-rate 20 --rag-share 0.5 -o big.jsonl
    """
    from kvtool.replay.gen import Workload, write_lines
    from kvtool.units import parse_count

    numbers = {
        "--system-prompts": system_prompts, "--rag-preambles": rag_preambles,
        "--system-tokens": system_tokens, "--rag-tokens": rag_tokens,
        "--user-tokens": user_tokens, "--output-tokens": output_tokens,
        "--block-tokens": block_tokens,
    }  # fmt: skip
    for name, value in numbers.items():
        if value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    for name, fraction in (("--rag-share", rag_share),):
        if not 0 <= fraction <= 1:
            raise InputError(f"{name} must be between 0 and 1, got {fraction}")
    for name, positive in (
        ("--arrival-rate", arrival_rate),
        ("--think", think),
        ("--turns", turns),
    ):
        if positive <= 0:
            raise InputError(f"{name} must be positive, got {positive}")
    workload = Workload(
        requests=parse_count(requests, what="--requests"),
        arrival_rate=arrival_rate,
        turns=turns,
        think_s=think,
        system_prompts=system_prompts,
        system_tokens=system_tokens,
        rag_preambles=rag_preambles,
        rag_share=rag_share,
        rag_tokens=rag_tokens,
        user_tokens=user_tokens,
        output_tokens=output_tokens,
        max_context=parse_count(max_context, what="--max-context"),
        block_tokens=block_tokens,
        seed=seed,
    )
    if output is None:
        sys.stdout.writelines(write_lines(workload))
        return
    from kvtool.files import write_text

    write_text(output, write_lines(workload))
    print(f"kvtool: wrote {workload.requests:,} requests to {output}", file=sys.stderr)

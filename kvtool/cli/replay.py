"""``kvtool engine replay``, ``sweep`` and ``gen``: request traces through the tiering engine
on the trace's clock (docs/replay.md)."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.plan.deployment import DeploymentPlan
    from kvtool.replay.run import ReplayConfig, TtftModel
    from kvtool.replay.trace import Trace
    from kvtool.units import TierSize

PANEL_MODEL = "Model and hardware (bytes, default sizes, TTFT)"
PANEL_RULES = "Engine rules"
TIER_HELP = "tokens (3M), bytes (80GiB), 0 (off) or inf"

TraceArg = Annotated[
    Path, typer.Argument(metavar="TRACE", help="A Mooncake or kvtool JSONL trace.")
]
FormatOpt = Annotated[
    str, typer.Option("--format", metavar="FORMAT", help="auto, mooncake or jsonl.")
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad", help="Count and skip malformed lines instead of stopping.")
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Size blocks in bytes for this model.", rich_help_panel=PANEL_MODEL
    ),
]
EngineOpt = Annotated[
    str, typer.Option("--engine", "-e", metavar="ENGINE", rich_help_panel=PANEL_MODEL)
]
TpOpt = Annotated[
    str | None,
    typer.Option("--tp", metavar="N", help="Tensor-parallel size.", rich_help_panel=PANEL_MODEL),
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware",
        metavar="NODE",
        help="Default T1/T2 sizes from this node's plan, and the TTFT model.",
        rich_help_panel=PANEL_MODEL,
    ),
]
PolicyOpt = Annotated[
    str,
    typer.Option("--policy", metavar="NAME", help="lru or s3fifo.", rich_help_panel=PANEL_RULES),
]
PostureOpt = Annotated[
    str, typer.Option("--posture", metavar="eager|lazy", rich_help_panel=PANEL_RULES)
]
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


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

      kvtool engine replay trace.jsonl --model llama-3.1-70b --hardware p5en --json

      kvtool engine replay small.jsonl --t1 64K --t2 128K --t3 inf --real /fsx/shared

    Exit status: 0 replayed, 1 --real found a block that read back wrong, 2 bad input.
    """
    from kvtool.cli import status
    from kvtool.units import parse_bytes

    loaded = _load(trace, fmt, skip_bad)
    forced = None
    if real is not None and model is None:
        forced = parse_bytes(block_bytes or "64KiB", what="--block-bytes")
    elif block_bytes is not None:
        raise InputError("--block-bytes goes with --real and no --model", "drop --block-bytes")
    config, ttft, notes = _config(
        loaded, {"T1": t1, "T2": t2, "T3": t3, "T4": t4}, model, engine, tp, hardware,
        policy, posture, t2_idle, t3_idle, block_bytes=forced,
    )  # fmt: skip
    from kvtool.cli.render import replay as render
    from kvtool.replay.run import replay

    extra: dict[str, Any] = {}
    if real is not None:
        result, stats = _real(loaded, config, real)
        extra["real"] = stats._asdict()
        notes.append(
            f"--real: {stats.checked:,} hit blocks read back from T1 and compared,"
            f" {stats.mismatched} differed; {len(stats.faults)} medium fault(s)"
        )
    else:
        result = replay(loaded.requests, loaded.block_tokens, config, ttft=ttft)
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


def _real(trace: "Trace", config: "ReplayConfig", folder: Path) -> "tuple[Any, Any]":
    """The replay with real mediums in a scratch folder under ``folder``, removed after."""
    import os
    import secrets
    import shutil

    from kvtool.bench.gpu import torch_or_none
    from kvtool.engine.mediums import FolderMedium
    from kvtool.engine.smoke import memory_mediums
    from kvtool.replay.real import real_replay

    if not folder.is_dir():
        raise InputError(
            f"--real {folder} is not a folder", "pass a folder on T3, e.g. /fsx/kvtool"
        )
    unique = len({b for r in trace.requests for b in r.blocks})
    need = unique * (config.block_units + 4096) * 2  # every block may land in T3 and in T4
    free = shutil.disk_usage(folder).free
    if need > free * 0.9:
        raise InputError(
            f"--real needs up to {need / 2**30:,.1f} GiB in {folder}; {free / 2**30:,.1f} GiB free",
            "replay a smaller trace, or lower --block-bytes",
        )
    root = folder / f"kvtool-replay-{os.getpid()}-{secrets.token_hex(3)}"
    root.mkdir()
    try:
        mediums = memory_mediums(torch_or_none())
        mediums["T3"] = FolderMedium("T3", root / "t3")
        mediums["T4"] = FolderMedium("T4", root / "t4")
        return real_replay(
            trace.requests, trace.block_tokens, config, block_bytes=config.block_units,
            mediums=mediums,
        )  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
    from kvtool.replay.sweep import grid, run_sweep
    from kvtool.units import parse_count

    loaded = _load(trace, fmt, skip_bad)
    lists = {"T1": t1, "T2": t2, "T3": t3, "T4": t4}
    first = {tier: (text.split(",")[0] if text else None) for tier, text in lists.items()}
    base, _, notes = _config(
        loaded, first, model, engine, tp, hardware, policy, posture, t2_idle, t3_idle,
        ttft=False,
    )  # fmt: skip
    sizes = {
        tier: [_units(loaded, base, tier, item) for item in text.split(",")]
        for tier, text in lists.items()
        if text
    }
    if not sizes:
        raise InputError("a sweep needs sizes to vary", "e.g. --t1 1M,3M,10M,30M,inf")
    configs = grid(sizes, base)
    count = None if processes is None else parse_count(processes, what="--processes")
    points = run_sweep(loaded, configs, processes=count)
    from kvtool.cli.render import replay as render

    if plot is not None:
        notes.append(render.plot_sweep(points, list(sizes), plot, unit=base.unit))
    if as_json:
        from kvtool.cli.render.text import print_json
        from kvtool.replay.sweep import sweep_json

        print_json({"trace": loaded.source, "unit": base.unit, "points": sweep_json(points),
                    "notes": notes})  # fmt: skip
        return
    render.print_sweep(points, list(sizes), loaded, notes, unit=base.unit, chart=plot is None)


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
    import os

    tmp = output.with_name(f".{output.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(write_lines(workload))
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(f"kvtool: wrote {workload.requests:,} requests to {output}", file=sys.stderr)


# --- shared -----------------------------------------------------------------------------------


def _load(path: Path, fmt: str, skip_bad: bool) -> "Trace":
    from kvtool.replay.trace import parse_trace

    if not path.is_file():
        raise InputError(f"{path} is not a file", "pass a trace (JSONL, one request per line)")
    try:
        with path.open(encoding="utf-8") as f:
            return parse_trace(f, fmt=fmt, skip_bad=skip_bad, source=str(path))
    except UnicodeDecodeError:
        raise InputError(f"{path} is not text", "pass a JSONL trace") from None


def _config(
    trace: "Trace",
    sizes: dict[str, str | None],
    model: str | None,
    engine: str,
    tp: str | None,
    hardware: str | None,
    policy: str,
    posture: str,
    t2_idle: float,
    t3_idle: float,
    *,
    ttft: bool = True,
    block_bytes: int | None = None,
) -> "tuple[ReplayConfig, TtftModel | None, list[str]]":
    """The replay's capacities in blocks' units, the TTFT model, and notes on what was assumed."""
    from kvtool.engine.policy import POLICIES
    from kvtool.replay.run import ReplayConfig

    if policy not in POLICIES:
        raise InputError(f"unknown --policy {policy!r}", "choose " + ", ".join(POLICIES))
    if posture not in ("eager", "lazy"):
        raise InputError(f"unknown --posture {posture!r}", "choose eager or lazy")
    if t2_idle <= 0 or t3_idle <= 0:
        raise InputError("--t2-idle and --t3-idle must be positive seconds")
    if hardware is not None and model is None:
        raise InputError("--hardware needs --model", "add --model NAME")
    notes: list[str] = []
    plan = None
    ttft_model = None
    if model is not None:
        block_bytes, plan, spec = _model(trace, model, engine, tp, hardware)
        if plan is not None and ttft:
            from kvtool.replay.ttft import ttft_model as build

            ttft_model = build(spec, plan, block_bytes=block_bytes)
    unit = "bytes" if block_bytes is not None else "tokens"  # a model's, or --real's
    base = ReplayConfig(
        capacity={},
        block_units=block_bytes or trace.block_tokens,
        unit=unit,
        policy=policy,
        posture=posture,
        t2_idle_s=t2_idle,
        t3_idle_s=t3_idle,
    )
    capacity: dict[str, int | None] = {}
    if plan is not None:
        from kvtool.replay.ttft import plan_capacities

        capacity = plan_capacities(plan)
        from_plan = [t for t, v in sizes.items() if v is None and t in ("T1", "T2")]
        if from_plan:
            notes.append(
                f"{', '.join(from_plan)} from the {plan.hardware.node.name} plan"
                " (T1: HBM for KV up to the 85% pressure line; T2: host memory for KV)"
            )
    elif all(v is None for v in sizes.values()):
        capacity = {"T1": None, "T2": 0, "T3": 0, "T4": 0}
        notes.append("no sizes and no --hardware: T1 unbounded and the rest off (the reuse ratio)")
    else:
        capacity = {"T1": 0, "T2": 0, "T3": 0, "T4": 0}
    for tier, text in sizes.items():
        if text is not None:
            capacity[tier] = _units(trace, base, tier, text)
    for tier in ("T1", "T2", "T3", "T4"):
        capacity.setdefault(tier, None)
    if ttft_model is None and ttft:
        notes.append("no TTFT estimate: it needs --model and --hardware")
    return base._replace(capacity=capacity), ttft_model, notes


def _units(trace: "Trace", base: "ReplayConfig", tier: str, text: str) -> int | None:
    """A typed size in the replay's units: whole blocks (tokens, or bytes with a model)."""
    from kvtool.units import parse_tier_size

    size: TierSize = parse_tier_size(text, what=f"--{tier.lower()}")
    if size.unit == "off":
        return 0
    if size.unit == "unbounded":
        return None
    if size.unit == "bytes":
        if base.unit != "bytes":
            raise InputError(
                f"--{tier.lower()} {text!r} is in bytes: that needs --model", "add --model NAME"
            )
        return size.value // base.block_units * base.block_units
    blocks = size.value // trace.block_tokens  # a capacity in tokens holds whole blocks
    return blocks * base.block_units


def _model(
    trace: "Trace", model: str, engine: str, tp: str | None, hardware: str | None
) -> "tuple[int, DeploymentPlan | None, Any]":
    """Bytes of one block (all ranks) and, with --hardware, the plan for one node."""
    from kvtool.model.engines import get_engine
    from kvtool.model.formats import resolve_format
    from kvtool.model.kv import size_kv
    from kvtool.profiles.resolve import resolve_model
    from kvtool.units import parse_count

    spec = resolve_model(model).spec
    rules = get_engine(engine)
    fmt = resolve_format("auto", spec.dtype)
    tp_size = None if tp is None else parse_count(tp, what="--tp")
    plan = None
    if hardware is not None:
        from kvtool.cli.options import hardware_from_options
        from kvtool.plan.deployment import plan_contexts
        from kvtool.plan.reload import ReloadAssumptions

        longest = max(r.input_tokens for r in trace.requests)
        planned = plan_contexts(
            spec,
            rules=rules,
            fmt=fmt,
            contexts=[max(longest, trace.block_tokens)],
            sessions=1,
            hardware=hardware_from_options(
                hardware,
                nodes=None,
                t3_path=None,
                t3=None,
                t4=None,
                fsx_capacity=None,
                fsx_throughput=None,
                gpu_memory_utilization=None,
            ),
            tp=tp_size,
            assumptions=ReloadAssumptions(concurrent_loads=1),
        )
        plan = planned.plans[0]
        tp_size = plan.serving.tp
    block = size_kv(
        spec, rules=rules, fmt=fmt, ctx_tokens=trace.block_tokens, sessions=1, tp=tp_size or 1,
        block_size=1,
    ).kv_bytes_per_session  # fmt: skip
    return block, plan, spec

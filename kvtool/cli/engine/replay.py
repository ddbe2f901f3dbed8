"""``kvtool engine replay``: a request trace through the tiering engine on the trace's clock
(docs/replay.md); set-up in ``inputs/replay.py`` and ``replay/setup.py``."""

from pathlib import Path
from typing import Annotated, Any

import typer

from kvtool.cli.engine.options import (
    FormatOpt,
    PolicyOpt,
    PostureOpt,
    SkipBadOpt,
    T2IdleOpt,
    T3IdleOpt,
    TraceArg,
    tier_option,
)
from kvtool.cli.options import EngineOpt, HardwareOpt, JsonOpt, KvDtypeOpt, ModelOpt, TpOpt


def replay(
    trace: TraceArg,
    fmt: FormatOpt = "auto",
    skip_bad: SkipBadOpt = False,
    t1: Annotated[str | None, tier_option("T1")] = None,
    t2: Annotated[str | None, tier_option("T2")] = None,
    t3: Annotated[str | None, tier_option("T3")] = None,
    t4: Annotated[str | None, tier_option("T4")] = None,
    model: ModelOpt = None,
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    tp: TpOpt = None,
    hardware: HardwareOpt = None,
    policy: PolicyOpt = "lru",
    posture: PostureOpt = "lazy",
    t2_idle: T2IdleOpt = "5m",
    t3_idle: T3IdleOpt = "1h",
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", metavar="FILE.png", help="Draw tier occupancy over time (.png, .svg or .pdf)."
        ),
    ] = None,
    real: Annotated[
        str | None,
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

    Sizes are tokens (as --ctx: 3m = 3,000,000; 3M = 3,145,728), bytes with a unit
    (80GiB, 2TB: needs --model), 0 (off) or inf.
    Without sizes they come from --hardware and --model.

    Examples:

      kvtool engine replay examples/traces/small.jsonl --t1 64K --t2 128K --t3 inf

      kvtool engine replay examples/traces/small.jsonl --model llama-3.1-70b --hardware p5en

      kvtool engine replay examples/traces/small.jsonl --t1 64K --real /fsx/shared  # on FSx

    Exit status: 0 replayed, 1 --real found a block that read back wrong, 2 bad input.
    """
    from kvtool.cli import status
    from kvtool.cli.render import replay as render
    from kvtool.files import PLOT_SUFFIXES, output_file

    if plot is not None:  # before the replay, not after it
        output_file(plot, option="--plot", suffixes=PLOT_SUFFIXES)
    from kvtool.files import path_option
    from kvtool.inputs.replay import resolve_replay

    folder = None if real is None else path_option(real, option="--real")

    inputs = resolve_replay(
        trace, fmt=fmt, skip_bad=skip_bad, sizes={"T1": t1, "T2": t2, "T3": t3, "T4": t4},
        model=model, engine=engine, kv_dtype=kv_dtype, tp=tp, hardware=hardware,
        policy=policy, posture=posture, t2_idle=t2_idle, t3_idle=t3_idle,
        block_bytes=block_bytes, real=real is not None, stream=True,
    )  # fmt: skip
    loaded, setup = inputs.trace, inputs.setup
    notes = list(setup.notes)
    extra: dict[str, Any] = {}
    if folder is not None:
        from kvtool.bench.gpu import torch_and_why
        from kvtool.probe.host import LocalHost
        from kvtool.replay.real import replay_in_folder
        from kvtool.replay.trace import Trace

        assert isinstance(loaded, Trace)  # --real reads the whole trace (resolve_replay)
        torch, no_gpu = torch_and_why(LocalHost())
        result, stats = replay_in_folder(loaded, setup.config, folder, torch=torch, no_gpu=no_gpu)
        extra["real"] = stats._asdict()
        notes.append(
            f"--real: {stats.checked:,} hit blocks read back from T1 and compared,"
            f" {stats.mismatched} differed; {stats.fault_count:,} medium fault(s);"
            f" {stats.index_mismatches:,} index entries the media do not hold"
        )
    else:
        from kvtool.cli.render.text import Progress
        from kvtool.replay.run import replay as run_replay

        with Progress(not as_json, "kvtool engine replay", "requests") as progress:
            result = run_replay(
                loaded.requests, loaded.block_tokens, setup.config, ttft=setup.ttft,
                progress=progress,
            )  # fmt: skip
    missing = None  # without matplotlib: the table, then the error
    if plot is not None:
        title = Path(loaded.source).name + (f", {model}" if model else "")
        missing = render.draw_chart(lambda: render.plot_occupancy(result, plot, title=title), notes)
    bad = bool(extra) and not (
        extra["real"]["mismatched"] == 0 and extra["real"]["index_mismatches"] == 0
    )
    if as_json:
        from kvtool.cli.render.text import print_json

        data = {**result.to_json(), "trace": loaded.source, "format": loaded.format,
                "skipped_lines": loaded.skipped, "notes": notes, **extra}  # fmt: skip
        print_json(data, command="engine replay")
    else:
        render.print_replay(result, loaded, notes, chart=plot is None or missing is not None)
        if extra:
            render.print_real(extra["real"])
    if missing is not None:
        raise missing
    return status.PROBLEMS if bad else status.OK

"""``kvtool engine sweep``: one replay per combination of tier sizes, on all cores."""

from pathlib import Path
from typing import Annotated

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


def sweep(
    trace: TraceArg,
    fmt: FormatOpt = "auto",
    skip_bad: SkipBadOpt = False,
    t1: Annotated[str | None, tier_option("T1", many=True)] = None,
    t2: Annotated[str | None, tier_option("T2", many=True)] = None,
    t3: Annotated[str | None, tier_option("T3", many=True)] = None,
    t4: Annotated[str | None, tier_option("T4", many=True)] = None,
    model: ModelOpt = None,
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    tp: TpOpt = None,
    hardware: HardwareOpt = None,
    policy: PolicyOpt = "lru",
    posture: PostureOpt = "lazy",
    t2_idle: T2IdleOpt = "5m",
    t3_idle: T3IdleOpt = "1h",
    processes: Annotated[
        str | None, typer.Option("--processes", "-j", metavar="N", help="Cores to use (all).")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE.png",
            help="Draw hit ratio against capacity (.png, .svg or .pdf).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay TRACE once per combination of tier sizes, on all cores: hit ratio vs capacity.

    Examples:

      kvtool engine sweep examples/traces/small.jsonl --t1 16K,64K,256K,1M,inf

      kvtool engine sweep examples/traces/small.jsonl --t1 64K --t2 0,128K,512K --plot sweep.png
    """
    from kvtool.cli.render import replay as render
    from kvtool.files import PLOT_SUFFIXES, output_file

    if plot is not None:  # before the replay, not after it
        output_file(plot, option="--plot", suffixes=PLOT_SUFFIXES)
    from kvtool.inputs.replay import resolve_replay
    from kvtool.replay.sweep import grid
    from kvtool.replay.sweep import sweep as sweep_trace
    from kvtool.units import parse_count

    inputs = resolve_replay(
        trace, fmt=fmt, skip_bad=skip_bad, sizes={"T1": t1, "T2": t2, "T3": t3, "T4": t4},
        model=model, engine=engine, kv_dtype=kv_dtype, tp=tp, hardware=hardware,
        policy=policy, posture=posture, t2_idle=t2_idle, t3_idle=t3_idle, sweep=True,
    )  # fmt: skip
    loaded, base, notes = inputs.trace, inputs.setup.config, list(inputs.setup.notes)
    from kvtool.replay.trace import Trace

    assert isinstance(loaded, Trace)  # a sweep holds the trace: each point reads it again
    count = None if processes is None else parse_count(processes, what="--processes")
    from kvtool.cli.render.text import Progress

    with Progress(not as_json, "kvtool engine sweep", "points") as progress:
        outcome = sweep_trace(loaded, grid(inputs.sweep, base), processes=count, progress=progress)
    points, curve = outcome.points, outcome.curve
    notes.append(outcome.how)
    from kvtool.replay.sweep import curve_json, sweep_json

    missing = None  # without matplotlib: the table, then the error
    if plot is not None:
        title = Path(loaded.source).name + (f", {model}" if model else "")
        whole = None if curve is None else curve_json(curve, base.block_units)
        missing = render.draw_chart(lambda: render.plot_sweep(points, list(inputs.sweep), plot,
                                    unit=base.unit, title=title, curve=whole), notes)  # fmt: skip

    if as_json:
        from kvtool.cli.render.text import print_json

        print_json({"trace": loaded.source, "unit": base.unit, "points": sweep_json(points),
                    "curve": None if curve is None else curve_json(curve, base.block_units),
                    "notes": notes}, command="engine sweep")  # fmt: skip
    else:
        whole = None if curve is None else curve_json(curve, base.block_units)
        render.print_sweep(points, list(inputs.sweep), loaded, notes, unit=base.unit,
                           chart=plot is None or missing is not None, curve=whole)  # fmt: skip
    if missing is not None:
        raise missing

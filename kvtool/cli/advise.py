"""``kvtool advise``: which tiers and which write posture a workload needs, and why."""

from pathlib import Path
from typing import Annotated

import typer

from kvtool.cli.options import CostOpt, PricesOpt, RegionOpt, settings_option
from kvtool.cli.render.text import note as say_note


def advise(
    workload_file: Annotated[
        Path | None,
        typer.Argument(metavar="[WORKLOAD.yaml]", help="Workload file; flags override it."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model (as for size).")] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Node type or .toml.")] = None,
    nodes: Annotated[str | None, typer.Option("--nodes", metavar="N")] = None,
    sessions: Annotated[
        str | None, typer.Option("--sessions", "-n", metavar="N", help="Mean concurrent sessions.")
    ] = None,
    ctx: Annotated[
        str | None,
        typer.Option("--ctx", metavar="DIST", help="Context mix: 8k:0.6,128k:0.4 (or 8k,128k)."),
    ] = None,
    shared_prefix: Annotated[
        str | None,
        typer.Option(
            "--shared-prefix",
            metavar="FRACTION",
            help="Share of requests with a shared prefix, e.g. 0.4.",
        ),
    ] = None,
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle", metavar="DURATION", help="Mean idle time between turns, e.g. 90s or 2m."
        ),
    ] = None,
    peak_to_mean: Annotated[
        str | None, typer.Option("--peak-to-mean", metavar="X", help="Peak over mean concurrency.")
    ] = None,
    disaggregated: Annotated[
        bool | None,
        typer.Option("--disaggregated/--colocated", help="Separate prefill and decode pools."),
    ] = None,
    survive_node_failure: Annotated[
        bool | None, typer.Option("--survive-node-failure", help="KV must outlive its node.")
    ] = None,
    durable: Annotated[
        bool | None, typer.Option("--durable", help="Sessions must be durable (S3).")
    ] = None,
    gpus_added_for_kv: Annotated[
        bool | None,
        typer.Option("--gpus-added-for-kv", help="GPUs are being added to hold KV, not to decode."),
    ] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", metavar="DTYPE")] = None,
    engine: Annotated[str | None, typer.Option("--engine", "-e", metavar="ENGINE")] = None,
    tp: Annotated[
        str | None,
        typer.Option("--tp", metavar="N", help="Tensor-parallel size (default: one instance)."),
    ] = None,
    weights_dtype: Annotated[
        str | None,
        typer.Option(
            "--weights-dtype", metavar="DTYPE", help="auto (the checkpoint's), bf16, fp8..."
        ),
    ] = None,
    cost: CostOpt = False,
    prices: PricesOpt = None,
    region: RegionOpt = None,
    settings: Annotated[
        list[str] | None,
        settings_option(
            "The AWS article's T4 (FSx releases idle sessions to S3): mean_idle (the release"
            " split's idle time, over --idle's, e.g. 30m) or release_after (default 10m)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Recommend the tier set (T1 / T1+T2 / T1+T2+T3 (+T4)) and the write posture.

    Examples:

      kvtool advise --model deepseek-r1 --hardware p5en --nodes 4 --sessions 400 \\
        --ctx 8k:0.5,128k:0.5 --shared-prefix 0.4 --idle 2m --peak-to-mean 4 \\
        --disaggregated

      kvtool advise examples/workload.yaml --json
    """
    from kvtool.inputs.workload import read_workload
    from kvtool.plan.advise import advise_workload

    flags: dict[str, tuple[str, object | None]] = {
        "model": ("--model", model),
        "hardware": ("--hardware", hardware),
        "nodes": ("--nodes", nodes),
        "sessions": ("--sessions", sessions),
        "contexts": ("--ctx", ctx),
        "shared_prefix": ("--shared-prefix", shared_prefix),
        "mean_idle": ("--idle", idle),
        "peak_to_mean": ("--peak-to-mean", peak_to_mean),
        "disaggregated": ("--disaggregated", disaggregated),
        "survive_node_failure": ("--survive-node-failure", survive_node_failure),
        "durable_sessions": ("--durable", durable),
        "gpus_added_for_kv": ("--gpus-added-for-kv", gpus_added_for_kv),
        "kv_dtype": ("--kv-dtype", kv_dtype),
        "engine": ("--engine", engine),
        "tp": ("--tp", tp),
        "weights_dtype": ("--weights-dtype", weights_dtype),
    }
    bare = idle is not None and idle.strip().replace(".", "", 1).isdigit()
    if bare:
        flags["mean_idle"] = ("--idle", f"{idle}s".strip())
    inputs = read_workload(workload_file, flags, settings)
    notes = list(inputs.notes)
    if bare:
        notes.append(f"--idle {idle} is read as {idle}s; give the unit (bare seconds go in the"
                     " next release)")  # fmt: skip
    for note in notes:  # after the inputs: a mistake in them is one line, alone
        say_note(f"{note}")
    if not cost:
        for option, value in (("--prices", prices), ("--region", region)):
            if value is not None:
                say_note(f"{option} has no effect without --cost")
    result = advise_workload(
        inputs.workload,
        inputs.shape,
        inputs.hardware,
        assumptions=inputs.assumptions,
        idle_from=inputs.idle_from,
    )
    priced = None
    if cost:
        from kvtool.inputs.prices import resolve_prices
        from kvtool.plan.cost import plan_cost

        assert result.placed is not None
        assert result.hardware is not None
        mean_ctx = round(sum(c * share for c, share in inputs.workload.contexts.items()))
        priced = plan_cost(
            result.hardware, result.placed.tiers,
            resolve_prices(prices, region=region, hardware=inputs.hardware),
            sessions=result.placed.peak_sessions, ctx_tokens=mean_ctx, chunk_tokens=256,
            required=result.advice.tiers, file_system=result.file_system,
            all_fsx_bytes=result.placed.release.all_fsx_bytes if result.placed.release else None,
            objects_per_chunk=result.placed.t4_objects_per_chunk,
            requests_per_object=result.placed.t4_requests_per_object,
        )  # fmt: skip
    from kvtool.cli.render import advise as render

    if as_json:
        from kvtool.cli.render.text import print_json

        data = render.advice_json(result)
        if priced is not None:
            from kvtool.cli.render.cost import cost_json

            data["cost"] = cost_json(priced)
        print_json(data, command="advise")
    else:
        render.print_advice(result)
        if priced is not None:
            from kvtool.cli.render.cost import print_cost

            print_cost(f"Cost a month at peak ({result.placed.peak_sessions:,} sessions)"
                       if result.placed else "Cost a month", priced)  # fmt: skip

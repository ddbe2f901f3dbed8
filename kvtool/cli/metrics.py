"""``kvtool metrics``: what running engines say of their KV cache, beside the plan."""

from typing import Annotated

import typer

from kvtool.cli.options import (
    TOKENS_RULE,
    EngineOpt,
    GpuMemoryUtilizationOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelOpt,
    TpOpt,
)
from kvtool.errors import InputError


def metrics(
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SOURCE...",
            help="A Prometheus /metrics URL, host:port (for http://host:port/metrics) or a saved"
            " scrape file; several read at once.",
        ),
    ] = None,
    from_file: Annotated[
        str | None,
        typer.Option("--from", metavar="FILE", help="Read more sources from FILE, one a line."),
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option(
            "--interval",
            metavar="SECONDS",
            help="Scrape twice this far apart and report what the counters added (rates).",
        ),
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            metavar="URL",
            help="Read every engine's series from this Prometheus server's HTTP API instead of"
            " scraping them (credentials: KVTOOL_PROMETHEUS_TOKEN, or _USER and _PASSWORD).",
        ),
    ] = None,
    window: Annotated[
        str,
        typer.Option(
            "--window",
            metavar="DURATION",
            help="With --prometheus: what the counters added over this (default 15m).",
        ),
    ] = "15m",
    selector: Annotated[
        str | None,
        typer.Option(
            "--selector",
            metavar="MATCHERS",
            help="With --prometheus: only these series, e.g. '{namespace=\"prod\"}'.",
        ),
    ] = None,
    timeout: Annotated[
        str,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="Per source, per scrape: the whole scrape, connect to last byte (default 5).",
        ),
    ] = "5",
    model: ModelOpt = None,
    hardware: HardwareOpt = None,
    ctx: Annotated[
        str,
        typer.Option(
            "--ctx", metavar="TOKENS", help=f"Context of a session, for the plan; {TOKENS_RULE}."
        ),
    ] = "128K",
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    tp: TpOpt = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
    as_json: JsonOpt = False,
) -> int:
    """Read engines' Prometheus metrics (vLLM, SGLang, LMCache, Dynamo KVBM): KV capacity,
    usage, prefix-cache hits by tier from the counters, offload bytes and time; with --model
    and --hardware, each figure beside kvtool's plan. Exit 1 when a source does not answer or
    the engine and the plan disagree.

    Examples:

      kvtool metrics examples/metrics/vllm-scrape.prom

      kvtool metrics http://vllm-0:8000/metrics  # an engine's /metrics

      kvtool metrics --from examples/metrics/hosts.txt --interval 60 --json  # your engines

      kvtool metrics --prometheus http://prometheus:9090 --window 15m  # your Prometheus

      kvtool metrics examples/metrics/vllm-scrape.prom --model llama-3.1-8b --hardware p5 --ctx 128K
    """
    from kvtool.cli import status
    from kvtool.cli.render import metrics as render
    from kvtool.inputs.metrics import scrape_all, source_list
    from kvtool.units import parse_count

    if (model is None) != (hardware is None):
        raise InputError("the plan's side needs both --model and --hardware",
                         "give both, or neither to read the engines alone")  # fmt: skip
    seconds = _seconds(timeout, "--timeout")
    every = None if interval is None else _seconds(interval, "--interval")
    if prometheus is not None and (sources or from_file or interval is not None):
        raise InputError(
            "--prometheus reads the fleet's series from one server",
            "drop the sources, --from and --interval (--window sets the span)",
        )
    if prometheus is None and (selector is not None or window != "15m"):
        raise InputError("--window and --selector go with --prometheus", "add --prometheus URL")
    listed = [] if prometheus is not None else source_list(sources or [], from_file)
    plan_at = None
    if model is not None and hardware is not None:
        from kvtool.inputs.hardware import resolve_hardware
        from kvtool.inputs.shape import resolve_shape
        from kvtool.plan.deployment import ContextPlans, plan_contexts

        shape = resolve_shape(model, engine=engine, kv_dtype=kv_dtype, tp=tp)
        node = resolve_hardware(hardware, gpu_memory_utilization=gpu_memory_utilization)
        tokens = parse_count(ctx, what="--ctx")

        def plan_at(tp_size: int | None) -> ContextPlans:
            chosen = shape if tp_size is None else shape._replace(tp=tp_size, tp_given=True)
            return plan_contexts(chosen, contexts=[tokens], sessions=1, hardware=node,
                                 verdicts=False)  # fmt: skip

    if prometheus is not None:
        from kvtool.inputs.prometheus import scrape_prometheus
        from kvtool.units import parse_duration

        span = parse_duration(window, what="--window")
        scraped = scrape_prometheus(prometheus, window_s=span, selector=selector, timeout=seconds)
    else:
        scraped = scrape_all(listed, timeout=seconds, interval=every)
    chosen = None
    if plan_at is not None:
        from kvtool.metrics.layout import choose_layout

        chips = node.node.chips
        chosen = choose_layout(
            plan_at, tp_given=tp is not None,
            candidates=[t for t in range(1, chips + 1) if chips % t == 0],
            readings=[r for one in scraped for r in one.readings],
        )  # fmt: skip
    report = render.report(scraped, chosen)
    if as_json:
        from kvtool.cli.render.text import print_json

        print_json(render.to_json(report), command="metrics")
    else:
        render.print_report(report)
    return status.PROBLEMS if render.problems(report) else status.OK


def _seconds(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option} must be seconds, got {text!r}", "e.g. 5 or 0.5") from None
    if not value > 0 or value == float("inf"):
        raise InputError(f"{option} must be a positive number of seconds, got {text!r}")
    return value

"""``kvtool bench``: each tier's measured bandwidth and latency, with KV-shaped I/O, beside
its spec."""

from typing import TYPE_CHECKING, Annotated

import typer

from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.bench.run import BenchOptions
    from kvtool.profiles.hardware import NodeProfile, StorageProfile

PANEL_SHAPE = "Transfer size"
PANEL_T3 = "T3 (shared file system, fio)"
PANEL_SPEC = "Spec to compare with"
DEFAULT_BLOCK = 2**20  # without --model or --block-size: 1 MiB, AWS's fio examples' size


def bench(
    tier: Annotated[
        str,
        typer.Option(
            "--tier",
            "-t",
            metavar="TIER[,TIER]",
            help="t1 (HBM), t2 (host memory <-> GPU), t3 (--path), t4 (--s3-url), or all.",
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Size each transfer as one chunk of this model's KV (one rank's share).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option("--engine", "-e", metavar="ENGINE", rich_help_panel=PANEL_SHAPE),
    ] = "vllm",
    chunk_tokens: Annotated[
        str,
        typer.Option(
            "--chunk-tokens",
            metavar="N",
            help="Tokens per chunk (LMCache's chunk_size, 256).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = "256",
    tp: Annotated[
        str,
        typer.Option(
            "--tp", metavar="N", help="Tensor-parallel size.", rich_help_panel=PANEL_SHAPE
        ),
    ] = "1",
    kv_dtype: Annotated[
        str, typer.Option("--kv-dtype", metavar="DTYPE", rich_help_panel=PANEL_SHAPE)
    ] = "auto",
    block_size: Annotated[
        str | None,
        typer.Option(
            "--block-size",
            metavar="SIZE",
            help="Transfer size instead of --model, e.g. 4MiB (default 1MiB).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = None,
    path: Annotated[
        str | None,
        typer.Option(
            "--path",
            "-p",
            metavar="DIR",
            help="The T3 folder (a scratch sub-folder is made and removed).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    threads: Annotated[
        str | None,
        typer.Option(
            "--threads",
            metavar="N",
            help="fio jobs per node (default 32); S3 connections for t4 (default 64).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    iodepth: Annotated[
        str | None,
        typer.Option(
            "--iodepth",
            metavar="N",
            help="Queue depth per fio job (default 1).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            metavar="SECONDS",
            help="Seconds per fio run, default 10 (three runs: write, read, random read).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    size: Annotated[
        str,
        typer.Option(
            "--size",
            metavar="SIZE",
            help="Scratch data per node for t3, bytes moved each way for t4 (default 1GiB).",
            rich_help_panel=PANEL_T3,
        ),
    ] = "1GiB",
    direct: Annotated[
        bool | None,
        typer.Option(
            "--direct/--no-direct",
            help="O_DIRECT (default); --no-direct goes through the page cache.",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        typer.Option(
            "--hosts",
            metavar="H1,H2[:PORT]",
            help="Drive fio --server on these nodes for the aggregate (fio client/server).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    s3_url: Annotated[
        str | None,
        typer.Option(
            "--s3-url",
            metavar="s3://BUCKET/PREFIX",
            help="T4: where test objects go (deleted after). AWS_ENDPOINT_URL is honoured.",
        ),
    ] = None,
    hardware: Annotated[
        str | None,
        typer.Option(
            "--hardware",
            metavar="NODE",
            help="Node profile whose spec each figure is compared with (kvtool hardware).",
            rich_help_panel=PANEL_SPEC,
        ),
    ] = None,
    t3: Annotated[
        str | None,
        typer.Option(
            "--t3",
            metavar="STORAGE",
            help="T3 profile (default fsx-lustre-persistent2).",
            rich_help_panel=PANEL_SPEC,
        ),
    ] = None,
    t4: Annotated[
        str | None,
        typer.Option(
            "--t4",
            metavar="STORAGE",
            help="T4 profile (default s3-standard).",
            rich_help_panel=PANEL_SPEC,
        ),
    ] = None,
    t3_path: Annotated[
        str | None,
        typer.Option(
            "--t3-path",
            metavar="PATH",
            help="Client path to FSx: ena, efa (default), efa-gds.",
            rich_help_panel=PANEL_SPEC,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Measure each tier's bandwidth and latency with KV-shaped transfers, beside its spec.

    Exit status: 0 measured (a tier that cannot run here is SKIP), 2 bad usage or input.

    Examples:

      kvtool bench --tier t3 --path /fsx/kvcache --model llama-3.1-70b --tp 8

      kvtool bench --tier t3 --path /fsx/kvcache --hosts node1,node2 --json > t3.json

      kvtool bench --tier t4 --s3-url s3://my-bucket/kv --block-size 16MiB

      kvtool bench --tier all --path /fsx/kvcache --hardware p5en --json > bench.json
    """
    import os
    import signal
    import socket

    from kvtool import __version__
    from kvtool.bench.run import run_bench, with_spec
    from kvtool.cli.render import bench as render
    from kvtool.cli.render.text import StatusLine, print_json
    from kvtool.probe.host import LocalHost, s3_client

    options, notes = _options(
        tier,
        model=model,
        engine=engine,
        chunk_tokens=chunk_tokens,
        tp=tp,
        kv_dtype=kv_dtype,
        block_size=block_size,
        path=path,
        threads=threads,
        iodepth=iodepth,
        duration=duration,
        size=size,
        direct=direct,
        hosts=hosts,
        s3_url=s3_url,
    )
    node, t3_profile, t4_profile, t3_key = _profiles(hardware, t3, t4, t3_path)

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # the same clean-up as Ctrl-C: scratch files, test objects

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with StatusLine(not as_json, "kvtool bench") as status:
            results = run_bench(LocalHost(), options, s3_client=s3_client, progress=status.update)
    finally:
        signal.signal(signal.SIGTERM, previous)
    results = [
        with_spec(r, node=node, t3=t3_profile, t4=t4_profile, t3_path=t3_key) for r in results
    ]
    if node is None:
        notes.append("no --hardware: nothing to compare with (kvtool hardware lists the nodes)")
    host = socket.gethostname()
    if as_json:
        about = {"hostname": host, "kvtool_version": __version__, "pid": os.getpid()}
        print_json(render.bench_json(results, notes=notes, about=about))
        return
    render.print_bench(results, notes=notes, header=f"kvtool bench on {host}")


def _options(
    tier: str,
    *,
    model: str | None,
    engine: str,
    chunk_tokens: str,
    tp: str,
    kv_dtype: str,
    block_size: str | None,
    path: str | None,
    threads: str | None,
    iodepth: str | None,
    duration: str | None,
    size: str,
    direct: bool | None,
    hosts: str | None,
    s3_url: str | None,
) -> "tuple[BenchOptions, list[str]]":
    """Parse and check the options; the notes say what was assumed or has no effect."""
    from kvtool.bench.run import DEFAULT_T4_CONNECTIONS, TIERS, BenchOptions
    from kvtool.bench.s3 import parse_s3_url
    from kvtool.bench.t3 import T3Options, parse_hosts
    from kvtool.units import parse_bytes, parse_count

    names = [t.strip().lower() for t in tier.split(",") if t.strip()]
    tiers = TIERS if names == ["all"] else tuple(dict.fromkeys(names))
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise InputError(f"unknown --tier {tier!r}", "choose t1, t2, t3, t4 or all (t3,t4 for two)")
    explicit = names != ["all"]
    if explicit and "t3" in tiers and path is None:
        raise InputError("--tier t3 needs the folder to measure", "add --path /fsx/kvcache")
    if explicit and "t4" in tiers and s3_url is None:
        raise InputError("--tier t4 needs an S3 prefix", "add --s3-url s3://bucket/prefix")
    if s3_url is not None:
        parse_s3_url(s3_url)
    notes: list[str] = []
    if model is not None and block_size is not None:
        raise InputError("--model and --block-size both set the transfer size", "give one")
    if model is not None:
        block, why = _chunk(model, engine, chunk_tokens, tp, kv_dtype)
        notes.append(why)
    elif block_size is not None:
        block = parse_bytes(block_size, what="--block-size")
    else:
        block = DEFAULT_BLOCK
        if "t3" in tiers or "t4" in tiers:
            notes.append(
                "no --model or --block-size: 1 MiB transfers (give --model for KV-sized I/O)"
            )
    seconds = 10.0 if duration is None else _seconds(duration)
    thread_count = None if threads is None else parse_count(threads, what="--threads")
    io_depth = 1 if iodepth is None else parse_count(iodepth, what="--iodepth")
    total = parse_bytes(size, what="--size")
    host_list = () if hosts is None else parse_hosts(hosts)
    t3_options = T3Options(
        block_bytes=block,
        threads=thread_count or 32,
        iodepth=io_depth,
        duration_s=seconds,
        size_bytes=total,
        direct=direct is not False,
        hosts=host_list,
    )
    uses_t3 = "t3" in tiers and path is not None
    if not uses_t3:
        given = {"--hosts": hosts, "--iodepth": iodepth, "--duration": duration, "--direct": direct}
        notes += [
            f"{name} has no effect without a t3 run"
            for name, value in given.items()
            if value is not None
        ]
    if direct is False and uses_t3:
        notes.append("--no-direct: T3 figures go through the page cache and include its caching")
    return (
        BenchOptions(
            tiers=tiers,
            block_bytes=block,
            t3=t3_options,
            t3_dir=path,
            s3_url=s3_url,
            s3_connections=thread_count or DEFAULT_T4_CONNECTIONS,
            s3_bytes=total,
        ),
        notes,
    )


def _seconds(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("s"))
    except ValueError:
        value = -1.0
    if not 1 <= value <= 3600:
        raise InputError(f"--duration {text!r} is not 1 to 3600 seconds", "e.g. --duration 10")
    return value


def _chunk(model: str, engine: str, chunk_tokens: str, tp: str, kv_dtype: str) -> tuple[int, str]:
    """One rank's KV chunk in bytes, and a note saying how it was derived."""
    from kvtool.model.engines import get_engine
    from kvtool.model.formats import resolve_format
    from kvtool.model.kv import chunk_bytes
    from kvtool.profiles.resolve import resolve_model
    from kvtool.units import format_bytes_binary, parse_count

    spec = resolve_model(model).spec
    tokens = parse_count(chunk_tokens, what="--chunk-tokens")
    tp_size = parse_count(tp, what="--tp")
    fmt = resolve_format(kv_dtype, spec.dtype)
    block = chunk_bytes(spec, rules=get_engine(engine), fmt=fmt, chunk_tokens=tokens, tp=tp_size)
    return block, (
        f"transfer size {format_bytes_binary(block)}: one {tokens}-token chunk of {spec.name}"
        f" ({fmt.name}, tp {tp_size}, one rank's share)"
    )


def _profiles(
    hardware: str | None, t3: str | None, t4: str | None, t3_path: str | None
) -> "tuple[NodeProfile | None, StorageProfile | None, StorageProfile | None, str]":
    """The profiles to compare with (none without --hardware), checked as kvtool size does."""
    if hardware is None:
        for name, value in (("--t3", t3), ("--t4", t4), ("--t3-path", t3_path)):
            if value is not None:
                raise InputError(
                    f"{name} needs --hardware NODE", "add --hardware (kvtool hardware)"
                )
        return None, None, None, "efa"
    from kvtool.cli.options import hardware_from_options

    plan = hardware_from_options(
        hardware,
        nodes=None,
        t3_path=t3_path,
        t3=t3,
        t4=t4,
        fsx_capacity=None,
        fsx_throughput=None,
        gpu_memory_utilization=None,
    )
    return plan.node, plan.t3, plan.t4, plan.t3_path

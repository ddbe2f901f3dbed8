"""``kvtool bench``: each tier's measured bandwidth and latency, with KV-shaped I/O, beside
its spec."""

from typing import Annotated

import typer

from kvtool.cli.options import (
    PANEL_SHAPE,
    ChunkTokensOpt,
    EngineOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    T3PathOpt,
    T3StorageOpt,
    T4StorageOpt,
    TpOpt,
    merge,
    model_option,
    renamed,
)

PANEL_T3 = "T3 (shared file system, fio)"


def bench(
    tier: Annotated[
        str,
        typer.Option(
            "--tier",
            "-t",
            metavar="TIER[,TIER]",
            help="t1 (HBM), t2 (host memory <-> GPU), t3 (--t3-dir), t4 (--t4-url), or all.",
        ),
    ],
    model: Annotated[
        str | None,
        model_option("Size each transfer as one chunk of this model's KV (one rank's share)."),
    ] = None,
    engine: EngineOpt = "vllm",
    chunk_tokens: ChunkTokensOpt = "256",
    tp: TpOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    transfer_size: Annotated[
        str | None,
        typer.Option(
            "--transfer-size",
            metavar="SIZE",
            help="Transfer size instead of --model, e.g. 4MiB (default 1MiB).",
            rich_help_panel=PANEL_SHAPE,
        ),
    ] = None,
    t3_dir: Annotated[
        str | None,
        typer.Option(
            "--t3-dir",
            metavar="DIR",
            help="The T3 folder (a scratch sub-folder is made and removed).",
            rich_help_panel=PANEL_T3,
        ),
    ] = None,
    threads: Annotated[
        str | None,
        typer.Option(
            "--io-threads",
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
    t4_url: Annotated[
        str | None,
        typer.Option(
            "--t4-url",
            metavar="s3://BUCKET/PREFIX",
            help="T4: where test objects go (deleted after). AWS_ENDPOINT_URL is honoured.",
        ),
    ] = None,
    hardware: HardwareOpt = None,
    t3: T3StorageOpt = None,
    t4: T4StorageOpt = None,
    t3_path: T3PathOpt = None,
    old_block_size: Annotated[str | None, renamed("--block-size", "--transfer-size")] = None,
    old_threads: Annotated[str | None, renamed("--threads", "--io-threads")] = None,
    old_path: Annotated[str | None, renamed("--path", "--t3-dir")] = None,
    old_s3_url: Annotated[str | None, renamed("--s3-url", "--t4-url")] = None,
    old_t3: Annotated[str | None, renamed("--t3", "--t3-storage")] = None,
    old_t4: Annotated[str | None, renamed("--t4", "--t4-storage")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Measure each tier's bandwidth and latency with KV-shaped transfers, beside its spec.

    Exit status: 0 measured (a tier that cannot run here is SKIP), 1 a measurement failed (a GPU
    error: its row says FAIL and why; the other tiers still ran), 2 bad usage or input.

    Examples:

      kvtool bench --tier t3 --t3-dir /fsx/kvcache --model llama-3.1-70b --tp 8  # on FSx

      kvtool bench --tier t3 --t3-dir /fsx/kvcache --hosts node1,node2 --json > t3.json  # on FSx

      kvtool bench --tier t4 --t4-url s3://my-bucket/kv --transfer-size 16MiB  # on AWS

      kvtool bench --tier all --t3-dir /fsx/kvcache --hardware p5en --json > bench.json  # on FSx
    """
    import os
    import socket

    from kvtool import __version__
    from kvtool.bench.run import bench_notes, run_bench, with_spec
    from kvtool.cli import status as exit_status
    from kvtool.cli.render import bench as render
    from kvtool.cli.render.text import StatusLine, print_json
    from kvtool.inputs.bench import resolve_bench
    from kvtool.inputs.hardware import resolve_spec_profiles
    from kvtool.probe.host import LocalHost, s3_client

    options, notes = resolve_bench(
        tier,
        model=model,
        engine=engine,
        chunk_tokens=chunk_tokens,
        tp=tp,
        kv_dtype=kv_dtype,
        transfer_size=merge(
            transfer_size, old_block_size, old="--block-size", new="--transfer-size"
        ),
        t3_dir=merge(t3_dir, old_path, old="--path", new="--t3-dir"),
        threads=merge(threads, old_threads, old="--threads", new="--io-threads"),
        iodepth=iodepth,
        duration=duration,
        size=size,
        direct=direct,
        hosts=hosts,
        t4_url=merge(t4_url, old_s3_url, old="--s3-url", new="--t4-url"),
    )
    node, t3_profile, t4_profile, t3_key = resolve_spec_profiles(
        hardware,
        t3=merge(t3, old_t3, old="--t3", new="--t3-storage"),
        t4=merge(t4, old_t4, old="--t4", new="--t4-storage"),
        t3_path=t3_path,
    )

    with StatusLine(not as_json, "kvtool bench") as status:
        results = run_bench(LocalHost(), options, s3_client=s3_client, progress=status.update,
                            live=status.live)  # fmt: skip
    results = [
        with_spec(r, node=node, t3=t3_profile, t4=t4_profile, t3_path=t3_key) for r in results
    ]
    notes[:0] = bench_notes(results, options)  # first: what the figures are of
    if node is None:
        notes.append("no --hardware: nothing to compare with (kvtool hardware lists the nodes)")
    host = socket.gethostname()
    if as_json:
        about = {"hostname": host, "kvtool_version": __version__, "pid": os.getpid()}
        print_json(render.bench_json(results, notes=notes, about=about), command="bench")
    else:
        render.print_bench(results, notes=notes, header=f"kvtool bench on {host}")
    return exit_status.PROBLEMS if render.failed(results) else exit_status.OK

"""``kvtool bench``'s options, as typed, into ``BenchOptions``: the tiers, the transfer size
(one chunk of a model's KV, or given), and the fio and S3 settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.bench.run import BenchOptions

DEFAULT_TRANSFER = 2**20  # without --model or --transfer-size: 1 MiB, AWS's fio examples' size


def resolve_bench(
    tier: str,
    *,
    model: str | None = None,
    engine: str = "vllm",
    chunk_tokens: str = "256",
    tp: str | None = None,
    kv_dtype: str = "auto",
    transfer_size: str | None = None,
    t3_dir: str | None = None,
    threads: str | None = None,
    iodepth: str | None = None,
    duration: str | None = None,
    size: str = "1GiB",
    direct: bool | None = None,
    hosts: str | None = None,
    t4_url: str | None = None,
) -> tuple[BenchOptions, list[str]]:
    """``kvtool bench``'s options, parsed and checked; the notes say what was assumed or has
    no effect."""
    from kvtool.bench.fio import fio_path
    from kvtool.bench.run import DEFAULT_T4_CONNECTIONS, TIERS, BenchOptions
    from kvtool.bench.s3 import parse_s3_url
    from kvtool.bench.t3 import T3Options, parse_hosts
    from kvtool.inputs.shape import parse_chunk_tokens, resolve_shape
    from kvtool.units import (
        format_bytes_binary,
        parse_bytes,
        parse_count,
        parse_transfer_size,
    )

    names = [t.strip().lower() for t in tier.split(",") if t.strip()]
    tiers = TIERS if names == ["all"] else tuple(dict.fromkeys(names))
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        raise InputError(f"unknown --tier {tier!r}", "choose t1, t2, t3, t4 or all (t3,t4 for two)")
    explicit = names != ["all"]
    if explicit and "t3" in tiers and t3_dir is None:
        raise InputError("--tier t3 needs the folder to measure", "add --t3-dir /fsx/kvcache")
    if explicit and "t4" in tiers and t4_url is None:
        raise InputError("--tier t4 needs an S3 prefix", "add --t4-url s3://bucket/prefix")
    if t4_url is not None:
        parse_s3_url(t4_url)
    if t3_dir is not None:
        fio_path(t3_dir)  # what fio would read as syntax, refused before any work
    notes: list[str] = []
    if model is not None and transfer_size is not None:
        raise InputError("--model and --transfer-size both set the transfer size", "give one")
    gpu_block = None
    if model is not None:
        tokens = parse_chunk_tokens(chunk_tokens)
        shape = resolve_shape(model, engine=engine, kv_dtype=kv_dtype, tp=tp)
        block = gpu_block = shape.chunk_bytes(tokens)
        notes.append(
            f"transfer size {format_bytes_binary(block)}: one {tokens}-token chunk of"
            f" {shape.spec.name} ({shape.fmt.name}, tp {shape.tp}, one rank's share)"
        )
    else:
        from kvtool.inputs.shape import unused_shape_options

        notes += unused_shape_options(
            engine=engine, kv_dtype=kv_dtype, tp=tp, chunk_tokens=chunk_tokens,
            why="they size transfers from a model's chunk",
        )  # fmt: skip
        if transfer_size is not None:
            block = gpu_block = parse_transfer_size(transfer_size)
            notes.append(f"transfer size {format_bytes_binary(block)} ({block:,} B)")
        else:
            block = DEFAULT_TRANSFER
            if "t3" in tiers or "t4" in tiers:
                notes.append(
                    "no --model or --transfer-size: 1 MiB transfers (give --model for KV-sized I/O)"
                )
            if explicit and ("t1" in tiers or "t2" in tiers):
                notes.append(
                    "no --model or --transfer-size: T1 and T2 copy large buffers only (give"
                    " --model to copy one KV chunk too)"
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
    uses_t3 = "t3" in tiers and t3_dir is not None
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
            t3_dir=t3_dir,
            s3_url=t4_url,
            s3_connections=thread_count or DEFAULT_T4_CONNECTIONS,
            s3_bytes=total,
            gpu_block=gpu_block,
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

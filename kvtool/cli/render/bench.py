"""``kvtool bench``: one table row per measurement beside its spec, then how each was measured
and what bounds it; a live status line on a terminal while the I/O runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Block, Table, coloured, echo, print_notes, seconds, wrapped
from kvtool.units import format_bytes_binary

if TYPE_CHECKING:
    from kvtool.bench.result import BenchResult


def _gbytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:,.2f} GB/s"


def _latency(result: BenchResult) -> tuple[str, str, str]:
    lat = result.latency_us
    if lat is None:
        return "-", "-", "-"
    return seconds(lat.p50 / 1e6), seconds(lat.p99 / 1e6), seconds(lat.p999 / 1e6)


def _what(result: BenchResult) -> str:
    text = f"{result.tier.upper()} {result.op}" + (f" {result.variant}" if result.variant else "")
    if result.gpu is not None:
        text += f" GPU {result.gpu.device}"
        if result.gpus > 1:
            text += f" (all {result.gpus} at once)"
    elif result.gpus > 1:
        text += f" all {result.gpus} GPUs"
    return text


def failed(results: Sequence[BenchResult]) -> bool:
    """A measurement raised (status ``error``): the command's exit status is 1."""
    return any(r.status == "error" for r in results)


def _gpu_lines(results: Sequence[BenchResult]) -> list[str]:
    """Each GPU measured, once: index, name, PCI, NUMA, link; a downtrained link flagged."""
    seen: dict[int, str] = {}
    for r in results:
        gpu = r.gpu
        if gpu is None or gpu.device in seen:
            continue
        line = f"  {gpu}"
        if gpu.uuid:
            line += f" {gpu.uuid}"
        if gpu.downtrained:
            line += f"  LINK BELOW ITS MAXIMUM: {gpu.link_now} of {gpu.link_max}"
        seen[gpu.device] = line
    return list(seen.values())


def bench_json(
    results: Sequence[BenchResult], *, notes: Sequence[str], about: dict[str, Any]
) -> Any:
    """``{"results": [...]}`` with one object per measurement, then where and how it ran."""
    return {"results": [r.to_json() for r in results], **about, "notes": list(notes)}


def print_bench(results: Sequence[BenchResult], *, notes: Sequence[str], header: str) -> None:
    """The measurements table, then per measurement how it ran and what limits it."""
    echo(header)
    table = Table(
        "measurement",
        "block",
        "threads",
        "measured",
        "IOPS",
        "p50",
        "p99",
        "p99.9",
        "spec",
        "ratio",
        left=(0,),
    )
    skips: list[tuple[str, str, str]] = []
    for r in results:
        if r.status != "ok":
            skips.append((_what(r), "FAIL" if r.status == "error" else "SKIP", r.reason))
            continue
        table.add_row(
            _what(r),
            format_bytes_binary(r.block_bytes) if r.block_bytes else "-",
            f"{r.threads:,}",
            _gbytes(r.bytes_per_s),
            "-" if r.iops is None else f"{r.iops:,.0f}",
            *_latency(r),
            _gbytes(r.spec_bytes_per_s),
            "-" if r.ratio is None else f"{r.ratio:.0%}",
        )
    if table.rows:
        echo(table.render())
    for what, status, reason in skips:  # "T1 d2d: SKIP, no CUDA ...", the status coloured
        first, *more = wrapped(f"{what}: {status}, {reason}", hang=4)
        at = len(what) + 2
        echo(Block(first[:at] + coloured(status, status) + first[at + len(status) :]))
        for line in more:
            echo(Block(line))
    gpus = _gpu_lines(results)
    if gpus:
        echo()
        echo("GPUs:")
        for line in gpus:
            echo(line)
    # measurements that ran the same way share one line: "T3 seq_write, seq_read: fio ..."
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for r in results:
        if r.status == "ok":
            groups.setdefault((r.tier, r.tool, r.note, r.limit), []).append(
                r.op + (f" {r.variant}" if r.variant else "")
            )
    if groups:
        echo()
        echo("How each was measured, and what bounds it:")
    for (tier, tool, note, limit), ops in groups.items():
        echo(f"  {tier.upper()} {', '.join(dict.fromkeys(ops))}: {tool}; {note}")
        if limit:
            echo(f"    limit: {limit}")
    print_notes(list(notes))

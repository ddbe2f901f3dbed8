"""``kvtool engine replay`` and ``sweep``: the ratios, each tier's share and traffic, TTFT, and
charts (matplotlib when the ``plot`` extra is installed, text otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kvtool.cli.render.text import Table, echo, plural, print_notes, seconds
from kvtool.errors import InputError
from kvtool.units import format_bytes_binary

if TYPE_CHECKING:
    from kvtool.replay.run import ReplayResult
    from kvtool.replay.sweep import SweepPoint
    from kvtool.replay.trace import StreamedTrace, Trace

BAR = 40


def _capacity(value: float | None, unit: str) -> str:
    """A tier's size: ``off`` for 0, ``inf`` for unbounded."""
    return "off" if value == 0 else _amount(value, unit)


def _amount(value: float | None, unit: str) -> str:
    if value is None:
        return "inf"
    if unit == "bytes":
        return format_bytes_binary(value)
    return f"{value:,.0f} tok"


def print_replay(
    result: ReplayResult, trace: Trace | StreamedTrace, notes: list[str], *, chart: bool
) -> None:
    """The replay's summary, one row per tier, the TTFT estimate and an occupancy chart."""
    skipped = f", {plural(trace.skipped, 'bad line')} skipped" if trace.skipped else ""
    blocks = f"{trace.block_tokens}-token blocks"
    echo(f"kvtool engine replay {trace.source} ({trace.format}, {blocks}{skipped})")
    echo(
        f"requests {result.requests:,}; mean input {result.mean_input_tokens:,.0f} tokens,"
        f" output {result.mean_output_tokens:,.0f}"
    )
    echo(
        f"token hit ratio {result.token_hit_ratio:.1%} (blocks {result.block_hit_ratio:.1%},"
        f" full blocks {result.full_block_hit_ratio:.1%}); with unbounded capacity"
        f" {result.reuse_ratio_unbounded:.1%}"
    )
    unit = result.unit
    table = Table("tier", "capacity", "token hits", "hit blocks", "peak", "read", "written")
    for t in result.tiers:
        table.add_row(
            t.tier, _capacity(t.capacity, unit), f"{t.token_hit_ratio:.1%}", f"{t.hit_blocks:,}",
            _amount(t.peak, unit), _amount(t.read, unit), _amount(t.written, unit),
        )  # fmt: skip
    echo()
    echo(table.render())
    c = result.counters
    echo()
    echo(
        f"evictions {c['evictions']:,}, demotions {c['demotions']:,}, promotions"
        f" {c['promotions']:,}, inserts {c['inserts']:,}"
    )
    if result.ttft:
        warm, cold = result.ttft["with_cache_s"], result.ttft["without_cache_s"]
        echo()
        echo(f"TTFT ({result.ttft['source']}):")
        echo("  with the cache:    " + ", ".join(f"{k} {seconds(v)}" for k, v in warm.items()))
        echo("  without the cache: " + ", ".join(f"{k} {seconds(v)}" for k, v in cold.items()))
        echo(f"  prefill time saved: {seconds(result.ttft['prefill_seconds_saved'])} in all")
    if chart and result.occupancy and any(t.capacity for t in result.tiers):
        echo()
        echo("occupancy over the trace (share of each bounded tier's capacity):")
        for t in result.tiers:
            if t.capacity:
                line = "".join(
                    _spark(used.get(t.tier, 0) / t.capacity) for _, used in result.occupancy
                )
                echo(f"  {t.tier} |{line[:100]}|")
    print_notes(notes)


def print_real(stats: dict[str, object]) -> None:
    """What ``--real`` moved, tier by tier, and what it checked."""
    echo()
    echo("real bytes moved (--real):")
    io = stats["io"]
    assert isinstance(io, dict)
    for tier, t in io.items():
        echo(
            f"  {tier}: read {format_bytes_binary(t['read_bytes'])}, wrote"
            f" {format_bytes_binary(t['write_bytes'])}, {t['bytes_per_s'] / 1e9:,.2f} GB/s"
        )
    mediums = stats["mediums"]
    assert isinstance(mediums, dict)
    for tier, description in mediums.items():
        echo(f"  {tier}: {description}")
    faults = stats["faults"]
    assert isinstance(faults, list)
    for fault in faults:
        echo(f"  fault: {fault}")


SPARKS = " ▁▂▃▄▅▆▇█"


def _spark(share: float) -> str:
    return SPARKS[min(len(SPARKS) - 1, max(0, round(share * (len(SPARKS) - 1))))]


def print_sweep(
    points: Sequence[SweepPoint],
    varied: list[str],
    trace: Trace,
    notes: list[str],
    *,
    unit: str,
    chart: bool,
    curve: list[dict[str, float]] | None = None,
) -> None:
    """One row per configuration, and a bar per row; then the whole T1 curve when there is
    one (``replay.sweep.sweep_curve``)."""
    blocks = f"{trace.block_tokens}-token blocks"
    echo(f"kvtool engine sweep {trace.source} ({len(points)} configurations, {blocks})")
    tiers = [t.tier for t in points[0].result.tiers] if points else []
    table = Table(*varied, "token hits", *(f"{t} hits" for t in tiers), "blocks", left=())
    for p in points:
        by_tier = {t.tier: t for t in p.result.tiers}
        table.add_row(
            *(_capacity(p.capacity[t], unit) for t in varied),
            f"{p.result.token_hit_ratio:.1%}",
            *(f"{by_tier[t].token_hit_ratio:.1%}" if t in by_tier else "-" for t in tiers),
            f"{p.result.block_hit_ratio:.1%}",
        )
    echo(table.render())
    if chart:
        echo()
        for p in points:
            label = " ".join(_capacity(p.capacity[t], unit) for t in varied)
            filled = round(p.result.token_hit_ratio * BAR)
            bar = "█" * filled + " " * (BAR - filled)
            echo(f"  {label:>24} |{bar}| {p.result.token_hit_ratio:.1%}")
    if curve:
        echo()
        echo("token hit ratio by T1 size (the whole curve):")
        for point in curve:
            ratio = point["token_hit_ratio"]
            bar = "█" * round(ratio * BAR) + " " * (BAR - round(ratio * BAR))
            echo(f"  {_amount(point['T1'], unit):>24} |{bar}| {ratio:.1%}")
    print_notes(notes)


def _pyplot() -> object:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib", "pip install 'kvtool[plot]'") from None
    return plt


def _axis_amount(unit: str) -> object:
    """A tick formatter in human units: 1.5 GiB for bytes, 3M tokens for tokens."""
    from matplotlib.ticker import FuncFormatter

    def tokens(value: float) -> str:
        for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
            if abs(value) >= size:
                return f"{value / size:g}{suffix}"
        return f"{value:g}"

    if unit == "bytes":
        return FuncFormatter(lambda value, _: format_bytes_binary(value) if value else "0")
    return FuncFormatter(lambda value, _: tokens(value))


def plot_occupancy(result: ReplayResult, path: Path, *, title: str) -> str:
    """Each tier's occupancy over the trace (PNG, SVG or PDF, by the name), in human units,
    ``title`` naming the trace and model; returns a note naming the file written."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 4))  # type: ignore[attr-defined]
    times = [t for t, _ in result.occupancy]
    for tier in result.tiers:
        axes.plot(times, [used.get(tier.tier, 0) for _, used in result.occupancy], label=tier.tier)
    axes.set_xlabel("trace time (s)")
    axes.set_ylabel("occupancy" + ("" if result.unit == "bytes" else " (tokens)"))
    axes.yaxis.set_major_formatter(_axis_amount(result.unit))
    axes.set_title(f"{title}: tier occupancy; token hit ratio {result.token_hit_ratio:.1%}")
    axes.legend()
    figure.tight_layout()
    _save(plt, figure, path)
    return f"occupancy chart written to {path}"


def swept_tier(points: Sequence[SweepPoint], varied: list[str]) -> str:
    """The tier the sweep varies most (the most distinct sizes; the first given on a tie):
    the x axis. The other varied tiers become one line each."""
    return max(varied, key=lambda t: (len({p.capacity[t] for p in points}), -varied.index(t)))


def plot_sweep(
    points: Sequence[SweepPoint], varied: list[str], path: Path, *, unit: str, title: str
) -> str:
    """Token hit ratio against the swept tier's capacity (``swept_tier``; one line per
    setting of the others), sizes in human units, ``title`` naming the trace and model."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 4))  # type: ignore[attr-defined]
    x_tier = swept_tier(points, varied)
    others = [t for t in varied if t != x_tier]
    finite = [c for p in points if (c := p.capacity[x_tier])]
    top = max(finite) * 2 if finite else 1
    groups: dict[str, list[SweepPoint]] = {}
    for p in points:
        key = ", ".join(f"{t} {_capacity(p.capacity[t], unit)}" for t in others) or "hit ratio"
        groups.setdefault(key, []).append(p)
    for label, group in groups.items():
        xs = [top if (c := p.capacity[x_tier]) is None else c for p in group]
        axes.plot(xs, [p.result.token_hit_ratio for p in group], marker="o", label=label)
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(_axis_amount(unit))
    axes.set_xlabel(f"{x_tier} capacity (the rightmost point is inf)")
    axes.set_ylabel("token hit ratio")
    axes.set_ylim(0, 1)
    axes.set_title(f"{title}: hit ratio by {x_tier} size")
    axes.legend()
    figure.tight_layout()
    _save(plt, figure, path)
    return f"sweep chart written to {path}"


def _save(plt: object, figure: object, path: Path) -> None:
    """The chart in the format its name says (checked before the run: files.output_file),
    written whole through the one writer."""
    import io

    from kvtool.files import write_bytes

    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lower().lstrip("."), dpi=120)  # type: ignore[attr-defined]
    plt.close(figure)  # type: ignore[attr-defined]
    write_bytes(path, buffer.getvalue())

"""``kvtool engine replay`` and ``sweep``: the ratios, each tier's share and traffic, TTFT, and
charts (matplotlib when the ``plot`` extra is installed, text otherwise)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Block, Table, echo, plural, print_notes, seconds, width
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
        cells = min(100, width() - 7)  # "  T1 |...|" within the width
        for t in result.tiers:
            if t.capacity:
                shares = [used.get(t.tier, 0) / t.capacity for _, used in result.occupancy]
                sparks = "".join(_spark(s) for s in _fewer(shares, cells))
                echo(Block(f"  {t.tier} |{sparks}|"))  # laid out: its blanks are no spaces
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


def _fewer(values: list[float], most: int) -> list[float]:
    """``values`` in at most ``most`` buckets, each its highest: a narrow chart still shows
    every peak."""
    if len(values) <= most:
        return values
    edges = [round(i * len(values) / most) for i in range(most + 1)]
    return [max(values[a:b]) for a, b in itertools.pairwise(edges) if b > a]


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


def draw_chart(draw: Callable[[], str], notes: list[str]) -> InputError | None:
    """Run ``draw`` (a ``plot_*`` call) and add the note it returns to ``notes``; without
    matplotlib, the error to raise once the table is printed (the figures were measured:
    they are shown, then ``--plot needs matplotlib`` alone on stderr, exit 2)."""
    try:
        notes.append(draw())
    except InputError as exc:
        if not exc.message.startswith("--plot needs matplotlib"):
            raise
        return exc
    return None


def tick_label(value: float, unit: str) -> str:
    """A size as the user would have typed it: ``10 GiB`` or ``10 GB`` for bytes (whichever
    divides it), ``3M`` (3 x 2^20) or ``10m`` (10^7) tokens; a capacity rounded down to whole
    blocks (1m tokens in 512-token blocks is 999,936) is labelled by what it was rounded from
    (three significant figures)."""
    exact = _labelled(value, unit)
    rounded = _labelled(float(f"{value:.3g}"), unit)
    shortest = min((c for c in (exact, rounded) if c), key=len, default=None)  # exact on a tie
    return shortest or (format_bytes_binary(value) if unit == "bytes" else f"{value:,.0f}")


def _labelled(value: float, unit: str) -> str | None:
    """The shortest exact spelling of ``value`` in whole or decimal units (None: none)."""
    if unit == "bytes":
        units = [(2**40, " TiB"), (2**30, " GiB"), (2**20, " MiB"), (2**10, " KiB"),
                 (10**12, " TB"), (10**9, " GB"), (10**6, " MB"), (10**3, " kB")]  # fmt: skip
    else:
        units = [(2**30, "G"), (2**20, "M"), (2**10, "K"), (10**9, "g"), (10**6, "m"), (10**3, "k")]
    found = [f"{value / size:g}{suffix}" for size, suffix in units  # (1.5 GiB, 2.25 MiB)
             if value >= size and round(value / size, 2) == value / size
             and "e" not in f"{value / size:g}"]  # fmt: skip
    return min(found, key=len) if found else None


LINE_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def sweep_chart(
    points: Sequence[SweepPoint], varied: list[str], *, unit: str,
    curve: list[dict[str, float]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What the sweep chart draws, as data (tested without matplotlib): the x tier, its ticks
    (each swept size, labelled as typed; an unbounded point drawn at four times the largest,
    as ``inf``, and a tier turned off at a quarter of the smallest, as ``off``: a log axis has
    no 0), the x label with its unit, one series per setting of the other tiers (each its own
    line style, so a line drawn over another still shows), and the stack-distance curve."""
    x_tier = swept_tier(points, varied)
    others = [t for t in varied if t != x_tier]
    finite = sorted({c for p in points if (c := p.capacity[x_tier])})
    has_inf = any(p.capacity[x_tier] is None for p in points)
    has_off = any(p.capacity[x_tier] == 0 for p in points)
    whole = [(float(q[x_tier]), q["token_hit_ratio"]) for q in curve or () if q.get(x_tier)]
    if x_tier != "T1":
        whole = []  # the one-pass curve is T1's alone
    top = max([*finite, *(x for x, _ in whole), 1]) * 4  # inf: clear of every point and label
    low = min([*finite, *(x for x, _ in whole)] or [4]) / 4  # off: left of every point
    ticks = ([(low, "off")] if has_off else []) + [(c, tick_label(c, unit)) for c in finite]
    ticks += [(top, "inf")] if has_inf else []
    series: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        key = ", ".join(f"{t} {_capacity(p.capacity[t], unit)}" for t in others) or "hit ratio"
        c = p.capacity[x_tier]
        x = top if c is None else low if c == 0 else c
        series.setdefault(key, []).append((x, p.result.token_hit_ratio))
    what = "bytes" if unit == "bytes" else "tokens"
    drawn = [f"; {name} drawn at the {side}" for name, side, shown in
             (("off", "left", has_off), ("inf", "right", has_inf)) if shown]  # fmt: skip
    return {
        "x_tier": x_tier,
        "ticks": ticks,
        "xlabel": f"{x_tier} capacity ({what}, log scale{''.join(drawn)})",
        "series": [(label, pts, *LINE_STYLES[i % len(LINE_STYLES)])
                   for i, (label, pts) in enumerate(series.items())],
        "curve": whole,
    }  # fmt: skip


def occupancy_chart(result: ReplayResult) -> dict[str, Any]:
    """What the occupancy chart draws, as data: a line per tier that held anything (a tier
    empty all along is named, not drawn over the axis), and each bounded tier's capacity as
    a dashed line of its colour."""
    times = [t for t, _ in result.occupancy]
    lines, empty = [], []
    for tier in result.tiers:
        values = [used.get(tier.tier, 0) for _, used in result.occupancy]
        if any(values):
            lines.append((tier.tier, values, tier.capacity))
        else:
            empty.append(tier.tier)
    return {"times": times, "lines": lines, "empty": empty}


def plot_occupancy(result: ReplayResult, path: Path, *, title: str) -> str:
    """Each tier's occupancy over the trace (PNG, SVG or PDF, by the name), in human units,
    with its capacity, ``title`` naming the trace and model; returns a note naming the file."""
    plt = _pyplot()  # first: without matplotlib, one line
    from matplotlib.ticker import FuncFormatter

    data = occupancy_chart(result)
    figure, axes = plt.subplots(figsize=(8, 4))  # type: ignore[attr-defined]
    for tier, values, capacity in data["lines"]:
        (line,) = axes.plot(data["times"], values, label=tier)
        if capacity:
            axes.axhline(capacity, color=line.get_color(), linestyle="--", linewidth=0.8,
                         label=f"{tier} capacity")  # fmt: skip
    axes.set_xlabel("trace time (s)")
    axes.set_ylabel("occupancy" + (" (bytes)" if result.unit == "bytes" else " (tokens)"))
    axes.yaxis.set_major_formatter(FuncFormatter(
        lambda value, _: tick_label(value, result.unit) if value else "0"))  # fmt: skip
    empty = f"; empty all along: {', '.join(data['empty'])}" if data["empty"] else ""
    axes.set_title(f"{title}: tier occupancy; token hit ratio {result.token_hit_ratio:.1%}{empty}",
                   fontsize=9)  # fmt: skip
    axes.legend(fontsize=8)
    figure.tight_layout()
    _save(plt, figure, path)
    return f"occupancy chart written to {path}"


def swept_tier(points: Sequence[SweepPoint], varied: list[str]) -> str:
    """The tier the sweep varies most (the most distinct sizes; the first given on a tie):
    the x axis. The other varied tiers become one line each."""
    return max(varied, key=lambda t: (len({p.capacity[t] for p in points}), -varied.index(t)))


def plot_sweep(
    points: Sequence[SweepPoint], varied: list[str], path: Path, *, unit: str, title: str,
    curve: list[dict[str, float]] | None = None,
) -> str:  # fmt: skip
    """Token hit ratio against the swept tier's capacity (``sweep_chart``: one line per
    setting of the others, the stack-distance curve behind them), ``title`` naming the trace
    and model."""
    plt = _pyplot()  # first: without matplotlib, one line
    from matplotlib.ticker import FixedLocator, NullLocator

    data = sweep_chart(points, varied, unit=unit, curve=curve)
    figure, axes = plt.subplots(figsize=(8, 4))  # type: ignore[attr-defined]
    if data["curve"]:
        xs, ys = zip(*data["curve"], strict=True)
        axes.plot(xs, ys, color="0.7", linewidth=1, label="the whole curve (stack distances)")
    for label, pts, style, marker in data["series"]:
        xs, ys = zip(*pts, strict=True)
        axes.plot(xs, ys, linestyle=style, marker=marker, label=label)
    axes.set_xscale("log")
    axes.xaxis.set_major_locator(FixedLocator([x for x, _ in data["ticks"]]))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticklabels([label for _, label in data["ticks"]])
    axes.set_xlabel(data["xlabel"])
    axes.set_ylabel("token hit ratio")
    axes.set_ylim(0, 1)
    axes.set_title(f"{title}: hit ratio by {data['x_tier']} size")
    axes.legend(fontsize=8)
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

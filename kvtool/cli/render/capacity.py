"""``kvtool capacity``: the verdict first, one row per level, the harness beside raw fio, the
plan's figures beside the measured ones, and the chart of restore time against sessions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.bench.sessions import PlanSide, holds, level_near, verdict
from kvtool.cli.render.text import Table, echo, print_notes, seconds

if TYPE_CHECKING:
    from kvtool.bench.capacity import CapacityResult


def _gb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:,.2f}"


def _s(value: float | None) -> str:
    return "-" if value is None else seconds(value)


def _verdict(result: CapacityResult, plan: PlanSide | None) -> str:
    o = result.options
    return verdict(result.found, slo_s=o.slo_s, at=o.at, plan=plan,
                   closed=not result.workload.turns, fleet=len(o.hosts))  # fmt: skip


def misses_plan(result: CapacityResult, plan: PlanSide | None) -> bool:
    """Exit 1: with a plan beside it, the plan's concurrent restores do not fit the target."""
    if plan is None:
        return False
    return (result.found.max_sessions or 0) < plan.concurrent_restores


def print_capacity(
    result: CapacityResult, plan: PlanSide | None, about: str, notes: list[str]
) -> None:
    o = result.options
    echo(_verdict(result, plan))
    echo(f"  {result.found.stopped}")
    echo()
    echo(f"T3 folder {result.path}; {about}")
    echo(f"each level {o.duration_s:g} s, {result.workload.restore_parallel} chunk reads at once"
         f" per restore, {'O_DIRECT' if o.direct else 'page cache'}"
         + (f"; sessions per node, {len(o.hosts)} more nodes loading T3 alike" if o.hosts
            else ""))  # fmt: skip
    fleet = bool(o.hosts)
    table = Table("sessions", "restores", "p50", "p95", "p99", "read GB/s", "files/s",
                  "write GB/s", *(["fleet GB/s"] if fleet else []),
                  f"{o.at} <= {seconds(o.slo_s)}")  # fmt: skip
    for lv in sorted(result.found.levels, key=lambda lv: lv.sessions):
        table.add_row(
            f"{lv.sessions:,}", f"{lv.restores:,}", _s(lv.restore_p50_s), _s(lv.restore_p95_s),
            _s(lv.restore_p99_s), f"{lv.bytes_per_s / 1e9:,.2f}", f"{lv.files_per_s:,.0f}",
            f"{lv.write_bytes_per_s / 1e9:,.2f}",
            *([_gb(lv.fleet_bytes_per_s)] if fleet else []),
            "yes" if holds(lv, o.slo_s, o.at) else "no",
        )  # fmt: skip
    echo(table.render())
    if result.fio is not None:
        f = result.fio
        echo()
        echo(
            f"the harness reads {f.harness_bytes_per_s / 1e9:,.2f} GB/s where raw fio reads"
            f" {f.fio_bytes_per_s / 1e9:,.2f} GB/s ({f.concurrency:,} readers, "
            f"{f.block_bytes / 2**20:,.2f} MiB blocks): ratio {f.ratio:.2f}"
        )
    if plan is not None:
        echo()
        echo(f"beside the plan ({plan.source}):")
        echo(f"  sessions restored at once per node: {plan.concurrent_restores}")
        echo(f"  restore time the reload-vs-recompute table assumed: {seconds(plan.restore_s)}")
        near = level_near(result.found, plan.concurrent_restores)
        if near is not None:
            echo(f"  measured {o.at} at {near.sessions:,} sessions: {_s(near.at(o.at))}")
    print_notes(notes)


def capacity_json(
    result: CapacityResult, plan: PlanSide | None, about: str, notes: list[str]
) -> dict[str, Any]:
    from kvtool.bench.capacity import level_rows

    o, w = result.options, result.workload
    near = None if plan is None else level_near(result.found, plan.concurrent_restores)
    return {
        "verdict_text": _verdict(result, plan),
        "path": result.path,
        "about_text": about,
        "capacity": {
            "max_sessions": result.found.max_sessions,
            "slo_s": o.slo_s,
            "percentile": o.at,
            "stopped_text": result.found.stopped,
            "levels": level_rows(result.found.levels),
        },
        "workload": {
            "ctx_tokens": w.ctx_tokens,
            "chunk_tokens": w.chunk_tokens,
            "chunk_bytes": w.chunk_bytes,
            "file_bytes": result.file_bytes,
            "files_per_restore": w.chunks,
            "restore_parallel": w.restore_parallel,
            "turns_from_trace": len(w.turns),
            "level_s": o.duration_s,
            "direct": o.direct,
            "fleet_nodes": len(o.hosts),
        },
        "fio_check": None
        if result.fio is None
        else {
            "concurrency": result.fio.concurrency,
            "block_bytes": result.fio.block_bytes,
            "harness_bytes_per_s": result.fio.harness_bytes_per_s,
            "fio_bytes_per_s": result.fio.fio_bytes_per_s,
            "ratio": result.fio.ratio,
        },
        "plan": None
        if plan is None
        else {
            "source": plan.source,
            "concurrent_restores": plan.concurrent_restores,
            "restore_s": plan.restore_s,
            "measured_sessions": None if near is None else near.sessions,
            "measured_restore_s": None if near is None else near.at(o.at),
        },
        "notes": list(notes),
    }


def capacity_chart(result: CapacityResult, plan: PlanSide | None) -> dict[str, Any]:
    """What the chart draws, as data (tested without matplotlib): the chosen percentile of
    restore time per level, in ms, sorted by sessions; the target line; with a plan, its
    concurrent restores as a vertical line and the restore time it assumed there as a point."""
    o = result.options
    points = [
        (lv.sessions, value * 1e3)
        for lv in sorted(result.found.levels, key=lambda lv: lv.sessions)
        if (value := lv.at(o.at)) is not None
    ]
    return {
        "points": points,
        "slo_ms": o.slo_s * 1e3,
        "ylabel": f"{o.at} restore time (ms)",
        "plan_sessions": None if plan is None else plan.concurrent_restores,
        "plan_point": None if plan is None else (plan.concurrent_restores, plan.restore_s * 1e3),
        "max_sessions": result.found.max_sessions,
    }


def plot_capacity(result: CapacityResult, plan: PlanSide | None, path: Path) -> str:
    """The chart (PNG, SVG or PDF, by the name); returns a note naming the file."""
    from kvtool.cli.render.replay import _pyplot, _save

    plt = _pyplot()
    data = capacity_chart(result, plan)
    figure, axes = plt.subplots(figsize=(7, 4))  # type: ignore[attr-defined]
    if data["points"]:
        xs, ys = zip(*data["points"], strict=True)
        axes.plot(xs, ys, marker="o", label=f"measured {result.options.at}")
    axes.axhline(data["slo_ms"], color="tab:red", linestyle="--",
                 label=f"target {data['slo_ms']:,.0f} ms")  # fmt: skip
    if data["plan_sessions"] is not None:
        axes.axvline(data["plan_sessions"], color="0.5", linestyle=":",
                     label=f"the plan: {data['plan_sessions']} at once")  # fmt: skip
        axes.plot(*data["plan_point"], marker="x", color="0.3", linestyle="none",
                  label="the restore time the plan assumed")  # fmt: skip
    from matplotlib.ticker import FixedLocator, NullLocator

    axes.set_xscale("log", base=2)
    ticks = sorted({x for x, _ in data["points"]} | (
        {data["plan_sessions"]} if data["plan_sessions"] else set()))  # fmt: skip
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticklabels([f"{t:,}" for t in ticks])
    axes.set_xlabel("concurrent sessions (log scale)")
    axes.set_ylabel(data["ylabel"])
    axes.set_title(f"{result.path}: most sessions within target:"
                   f" {data['max_sessions'] if data['max_sessions'] is not None else 'none'}",
                   fontsize=9)  # fmt: skip
    axes.legend(fontsize=8)
    figure.tight_layout()
    _save(plt, figure, path)
    return f"capacity chart written to {path}"

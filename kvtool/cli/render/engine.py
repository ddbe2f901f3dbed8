"""``kvtool engine smoke``: one line per step with its I/O, then the details, counters and
what each tier was."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvtool.cli.render.text import Table, echo, seconds
from kvtool.units import format_bytes_binary

if TYPE_CHECKING:
    from kvtool.engine.smoke import SmokeReport, Step


def _io(step: Step) -> str:
    parts = []
    for tier, io in step.tiers.items():
        moved = int(io["read_bytes"] + io["write_bytes"])
        parts.append(f"{tier} {format_bytes_binary(moved)} at {io['bytes_per_s'] / 1e9:,.2f} GB/s")
    return "; ".join(parts) or "-"


def print_smoke(report: SmokeReport, *, folder: Path, phase: str, kept: bool) -> None:
    """The steps as a table, then what each step checked, the counters and the mediums."""
    echo(f"kvtool engine smoke ({phase}) in {folder}" + (" (kept)" if kept else " (removed)"))
    table = Table("step", "status", "moved", "time", "per tier", left=(0, 1, 4))
    for step in report.steps:
        table.add_row(
            step.name, step.status, format_bytes_binary(step.bytes), seconds(step.seconds),
            _io(step),
        )  # fmt: skip
    echo(table.render())
    echo()
    for step in report.steps:
        echo(f"  {step.status}  {step.name}: {step.detail}")
    if report.counters:
        echo()
        shown = {k: v for k, v in report.counters.items() if v}
        echo("counters: " + ", ".join(f"{k} {v:,}" for k, v in shown.items()))
    echo()
    for tier, description in report.mediums.items():
        echo(f"{tier}: {description}")
    for fault in report.faults:
        echo(f"fault: {fault}")
    passed = sum(s.status == "PASS" for s in report.steps)
    echo()
    echo(
        f"summary: {passed} of {len(report.steps)} steps passed"
        + ("" if report.passed else " (FAILED)")
    )

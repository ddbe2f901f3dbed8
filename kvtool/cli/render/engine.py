"""``kvtool engine smoke``: one line per step with its I/O, then the details, counters and
what each tier was."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvtool.cli.render.text import Table, echo, seconds, status_lines
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
    table = Table("step", "status", "moved", "time", "per tier", left=(0, 1, 4), statuses=(1,))
    for step in report.steps:
        table.add_row(
            step.name, step.status, format_bytes_binary(step.bytes), seconds(step.seconds),
            _io(step),
        )  # fmt: skip
    echo(table.render())
    echo()
    for step in report.steps:
        for line in status_lines(step.status, f"{step.name}: {step.detail}"):
            echo(line)
    if report.counters:
        echo()
        echo(_counters(report.counters))
    echo()
    for tier, description in report.mediums.items():
        echo(f"{tier}: {description}")
    _faults(report.faults)
    passed = sum(s.status == "PASS" for s in report.steps)
    echo()
    echo(
        f"summary: {passed} of {len(report.steps)} steps passed"
        + ("" if report.passed else " (FAILED)")
    )


EVENTS = {  # the engine's event counters, in words
    "lookups": "lookups",
    "lookup_chunks": "chunks looked up",
    "misses": "chunks missed",
    "inserts": "chunks computed into T1",
    "evictions": "evicted by pressure",
    "demotions": "demoted by idle time",
    "promotions": "promoted into T1 on a hit",
    "recomputes": "hits recomputed (faster than reloading)",
    "expired": "expired (shared-prefix TTL)",
    "corrupt": "corrupt chunks refused and quarantined",
    "faults": "moves that failed and were undone",
}


def _counters(counters: dict[str, int]) -> str:
    """The engine's counters as two small tables: per tier, then the events that happened."""
    tiers = Table("tier", "hits", "hit tokens", "read", "written")
    for tier in ("T1", "T2", "T3", "T4"):
        row = [counters.get(f"{name}_{tier}", 0) for name in
               ("hits", "hit_tokens", "bytes_read", "bytes_written")]  # fmt: skip
        if any(row):
            tiers.add_row(tier, f"{row[0]:,}", f"{row[1]:,}", format_bytes_binary(row[2]),
                          format_bytes_binary(row[3]))  # fmt: skip
    events = Table("event", "count", left=(0,))
    for key, words in EVENTS.items():
        if counters.get(key):
            events.add_row(words, f"{counters[key]:,}")
    return tiers.render() + "\n\n" + events.render()


def _faults(faults: list[str]) -> None:
    """The faults met: each kind's count in words, then the first messages (the scenario's
    own, a flipped bit and a T3 that refuses writes, say "injected" or "corrupt")."""
    counted = [f for f in faults if f.rsplit(": ", 1)[-1].replace(",", "").isdigit()
               and "/" not in f.rsplit(": ", 1)[0]]  # fmt: skip
    if not faults:
        return
    echo()
    echo("faults met (those the scenario injects are expected: a flipped bit, a T3 that refuses"
         " writes):")  # fmt: skip
    for line in counted:
        kind, count = line.rsplit(": ", 1)
        if kind == "corrupt":
            kind = "corrupt chunk refused and quarantined"
        elif kind.startswith(("move ", "copy ")):
            kind = f"{kind.replace('->', ' -> ')} failed, undone (the chunk kept, or sent on down)"
        echo(f"  {kind}: {count}")
    for line in faults:
        if line not in counted:
            echo(f"  - {line}")

"""``kvtool doctor`` and ``kvtool check``: findings grouped by area, the fix printed under each
problem."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvtool.cli.render.text import echo, status_lines

if TYPE_CHECKING:
    from kvtool.doctor.run import MergedReport
    from kvtool.findings import Finding, Report

AREA_TITLES = {
    "plan": "plan",
    "fsx": "FSx for Lustre checklist",
    "measured": "measured results",
    "path": "path",
    "mount": "mount",
    "layout": "layout and directories",
    "targets": "targets (OSTs, MDTs)",
    "client": "client",
    "network": "network (EFA)",
    "gds": "GPUDirect Storage",
    "aws": "AWS (FSx, EC2)",
}


def _finding_lines(f: Finding, *, verbose: bool) -> list[str]:
    lines = status_lines(f.status, f"{f.id:<22} {f.message}", hang=31)  # under the message
    if f.evidence and (verbose or f.status in ("FAIL", "WARN")):
        lines.append(f"        evidence: {f.evidence}")
    if f.measured and (verbose or f.status in ("FAIL", "WARN")):
        lines.append(f"        measured: {f.measured}")
    if f.fix and f.status in ("FAIL", "WARN"):
        lines.append(f"        fix: {f.fix}")
    return lines


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[s]} {s}" for s in ("FAIL", "WARN", "PASS", "SKIP"))


def print_report(
    report: Report, *, verbose: bool = False, title: str = "", strict: bool = False
) -> None:
    """One report (a node's doctor run, or a plan's checklist), area by area; ``strict``: a
    WARN fails it too (``check --strict``), and the summary says so."""
    echo(title or f"kvtool doctor {report.path} on {report.node}")
    areas = list(dict.fromkeys(f.area for f in report.findings))
    for area in areas:
        echo()
        echo(AREA_TITLES.get(area, area))
        for f in report.findings:
            if f.area == area:
                for line in _finding_lines(f, verbose=verbose):
                    echo(line)
    echo()
    verdict = "problems found" if report.failed else "no failures"
    if not report.failed and report.fails(strict=strict):
        verdict = "problems found: --strict fails a WARN"
    echo(f"summary: {_summary(report.summary)} ({verdict})")


def print_merged(merged: MergedReport) -> None:
    """A cluster view: each node's summary, then what differs between nodes."""
    echo(f"kvtool doctor: {len(merged.reports)} node(s)")
    echo()
    for report in merged.reports:
        fails = [f.id for f in report.findings if f.status == "FAIL"]
        echo(
            f"  {report.node:<24} {_summary(report.summary)}"
            + (f"  failing: {', '.join(fails)}" if fails else "")
        )
    echo()
    if not merged.differences:
        echo("the nodes agree on every check")
    else:
        echo("differences between nodes")
        for d in merged.differences:
            for line in _finding_lines(d, verbose=True):
                echo(line)
    echo()
    echo("summary: " + ("problems found" if merged.failed else "no failures"))

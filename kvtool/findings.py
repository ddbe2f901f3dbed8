"""Findings and reports: what a check concluded, on what evidence, and the exact fix. Pure.

Shared by `kvtool doctor` (checks on a node) and `kvtool check` (checks on a plan file).

A finding is PASS (the setting is right), WARN (it works but costs performance or money), FAIL
(the tier will underperform, lose data or not work) or SKIP (the check could not run here, with
the reason). A report FAILs when any finding does; SKIP never counts as PASS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]
STATUSES: tuple[Status, ...] = ("FAIL", "WARN", "PASS", "SKIP")


class Finding(NamedTuple):
    """One check's conclusion. ``id`` is stable (``mount.flock``) so CI can grep and JUnit can
    name it; ``area`` groups the report; ``fix`` is a command or setting, empty when none;
    ``measured`` holds figures this run measured (a probe's MiB/s, counter deltas): shown with
    the evidence, never compared between nodes (two runs on one node differ by noise)."""

    id: str
    area: str
    status: Status
    message: str
    evidence: str = ""
    fix: str = ""
    measured: str = ""

    def to_json(self) -> dict[str, Any]:
        """The finding as JSON (``kvtool doctor --json``)."""
        return dict(self._asdict())


def finding_from_json(data: dict[str, Any]) -> Finding:
    """Read back a finding written by ``Finding.to_json`` (for ``--merge``)."""
    status = str(data.get("status", "SKIP"))
    return Finding(
        id=str(data.get("id", "")),
        area=str(data.get("area", "")),
        status=status if status in STATUSES else "SKIP",
        message=str(data.get("message", "")),
        evidence=str(data.get("evidence", "")),
        fix=str(data.get("fix", "")),
        measured=str(data.get("measured", "")),
    )


class Report(NamedTuple):
    """All findings for one path on one node."""

    path: str
    node: str
    findings: tuple[Finding, ...]

    @property
    def summary(self) -> dict[str, int]:
        """How many findings of each status."""
        return {s: sum(f.status == s for f in self.findings) for s in STATUSES}

    @property
    def failed(self) -> bool:
        """True when any finding FAILs (the command exits 1)."""
        return any(f.status == "FAIL" for f in self.findings)

    def fails(self, *, strict: bool = False) -> bool:
        """True when the report fails a gate: any FAIL, or, when ``strict``, any WARN too."""
        return self.failed or (strict and any(f.status == "WARN" for f in self.findings))

    def to_json(self) -> dict[str, Any]:
        """``{"path", "node", "findings": [...], "summary"}``."""
        return {
            "path": self.path,
            "node": self.node,
            "findings": [f.to_json() for f in self.findings],
            "summary": self.summary,
        }


def junit_xml(
    suite: str, findings: Iterable[Finding], *, hostname: str = "", strict: bool = False
) -> str:
    """JUnit XML that GitHub Actions and GitLab CI show natively: one testcase per finding,
    FAIL as ``<failure>``, SKIP as ``<skipped>``, WARN as a passing case with ``WARN:`` and
    its message in ``<system-out>`` or, when ``strict``, as ``<failure type="WARN">`` (the
    gate fails on it, so the report must not show it passed)."""
    import re
    from xml.sax.saxutils import escape as escape_text
    from xml.sax.saxutils import quoteattr as quote_text

    # XML 1.0 has no place for most control characters (ANSI colours in a command's output)
    invalid = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

    def escape(text: str) -> str:
        return escape_text(invalid.sub("\ufffd", text))

    def quoteattr(text: str) -> str:
        return quote_text(invalid.sub("\ufffd", text))

    cases = list(findings)
    failing = ("FAIL", "WARN") if strict else ("FAIL",)
    failures = sum(f.status in failing for f in cases)
    skipped = sum(f.status == "SKIP" for f in cases)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name={quoteattr(suite)} tests="{len(cases)}" failures="{failures}"'
        f' errors="0" skipped="{skipped}">',
        f'  <testsuite name={quoteattr(suite)} tests="{len(cases)}" failures="{failures}"'
        f' errors="0" skipped="{skipped}" hostname={quoteattr(hostname or "localhost")}>',
    ]
    for f in cases:
        head = f"    <testcase classname={quoteattr(f.area)} name={quoteattr(f.id)}"
        detail = "\n".join(
            x
            for x in (
                f.message,
                f.evidence and f"evidence: {f.evidence}",
                f.measured and f"measured: {f.measured}",
                f.fix and f"fix: {f.fix}",
            )
            if x
        )
        if f.status in failing:
            lines += [
                head + ">",
                f"      <failure type={quoteattr(f.status)} message={quoteattr(f.message)}>"
                f"{escape(detail)}</failure>",
                "    </testcase>",
            ]
        elif f.status == "SKIP":
            lines += [
                head + ">",
                f"      <skipped message={quoteattr(f.message)}/>",
                "    </testcase>",
            ]
        else:
            lines += [
                head + ">",
                f"      <system-out>{escape(f.status + ': ' + detail)}</system-out>",
                "    </testcase>",
            ]
    lines += ["  </testsuite>", "</testsuites>"]
    return "\n".join(lines) + "\n"

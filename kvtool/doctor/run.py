"""Run the doctor on one node, and merge many nodes' reports into a cluster view.

``run_doctor`` gathers facts through the ``Host`` it is given (live, a snapshot folder, or a
capturing wrapper) and applies the pure checks. ``merge_reports`` flags what differs between
nodes: a finding that passes on some and not others, or evidence (mount options, layouts,
tunings, AZ, EFA use) that is not the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kvtool.doctor.aws import check_aws
from kvtool.doctor.checks import (
    Check,
    DoctorOptions,
    check_atime,
    check_directory,
    check_flock,
    check_layout,
    check_modprobe,
    check_modules,
    check_mount,
    check_odirect,
    check_path,
    check_targets,
    check_tunings,
)
from kvtool.doctor.folder import FolderAsk, folder_facts
from kvtool.doctor.network import check_efa, check_gds, check_lnet_health
from kvtool.errors import InputError
from kvtool.findings import Finding, Report, finding_from_json
from kvtool.plan.folder_rules import folder_findings
from kvtool.probe.facts import NodeFacts
from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import Host

CHECKS: tuple[Check, ...] = (
    check_path,
    check_mount,
    check_flock,
    check_atime,
    check_layout,
    check_directory,
    check_targets,
    check_modules,
    check_tunings,
    check_modprobe,
    check_odirect,
    check_efa,
    check_lnet_health,
    check_gds,
    check_aws,
)


def run_checks(facts: NodeFacts, options: DoctorOptions) -> list[Finding]:
    """Every check (``checks``, ``network``, ``aws``), in report order."""
    return [finding for check in CHECKS for finding in check(facts, options)]


def run_doctor(
    host: Host,
    path: str,
    *,
    gather_options: GatherOptions,
    options: DoctorOptions,
    folder: FolderAsk | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Observe ``path`` through ``host`` and check it, and with ``folder`` read what the
    engines' layouts hold there (``plan/folder_rules.py``; ``progress(files, bytes)`` during
    the walk). Never raises for what the node lacks."""
    facts = gather(host, path, gather_options)
    hostname = (host.read("hostname", "/proc/sys/kernel/hostname") or "").strip() or "unknown"
    findings = run_checks(facts, options)
    if folder is None:
        findings += folder_findings(None, skipped="--no-contents: the folder was not read")
    elif not facts.path_info.get("is_dir") and facts.path_info.get("captured") is not False:
        findings += folder_findings(None, skipped=f"{path} is not a folder")
    else:
        contents, why = folder_facts(host, path, folder, progress=progress)
        findings += folder_findings(contents, cap=folder.cap, skipped=why)
    return Report(path=path, node=hostname, findings=tuple(findings))


class MergedReport(NamedTuple):
    """Many nodes' reports: every node's findings, and the checks whose outcome differs."""

    reports: tuple[Report, ...]
    differences: tuple[Finding, ...]

    @property
    def failed(self) -> bool:
        """True when any node FAILs a check, or some nodes FAIL a check others pass (a
        difference that fails nowhere, such as other mount options that all pass, is a WARN:
        reported, not failed)."""
        return any(r.failed for r in self.reports) or any(
            d.status == "FAIL" for d in self.differences
        )

    def to_json(self) -> dict[str, Any]:
        """``{"nodes": [...reports], "differences": [...], "summary"}``."""
        findings = [f for r in self.reports for f in r.findings]
        return {
            "nodes": [r.to_json() for r in self.reports],
            "differences": [d.to_json() for d in self.differences],
            "summary": {
                "nodes": len(self.reports),
                "failing_nodes": sum(r.failed for r in self.reports),
                "differences": len(self.differences),
                **{
                    s: sum(f.status == s for f in findings)
                    for s in ("FAIL", "WARN", "PASS", "SKIP")
                },
            },
        }


def report_from_json(data: Any, *, source: str) -> Report:
    """A report written by ``kvtool doctor --json``; InputError names the file and what is
    wrong otherwise: a finding that is not an object, a status that is not PASS, WARN, FAIL
    or SKIP, a node or path that is not text, a summary that is not counts."""
    from kvtool.findings import STATUSES

    def wrong(what: str) -> InputError:
        return InputError(
            f"{source}: not a kvtool doctor --json report ({what})",
            "pass the file kvtool doctor --json wrote",
        )

    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise wrong("no findings list")
    for key in ("node", "path"):
        if key in data and not isinstance(data[key], str):
            raise wrong(f"its {key} is not text")
    summary = data.get("summary", {})
    if not isinstance(summary, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in summary.values()
    ):
        raise wrong("its summary is not counts")
    for index, finding in enumerate(data["findings"]):
        if not isinstance(finding, dict):
            raise wrong(f"finding {index + 1} is not an object")
        if finding.get("status") not in STATUSES:
            raise wrong(f"finding {index + 1}'s status {str(finding.get('status'))[:20]!r} is"
                        " not PASS, WARN, FAIL or SKIP")  # fmt: skip
        if not isinstance(finding.get("id"), str) or not finding["id"]:
            raise wrong(f"finding {index + 1} has no id")
    return Report(
        path=str(data.get("path", "")),
        node=str(data.get("node", source)),
        findings=tuple(finding_from_json(f) for f in data["findings"]),
    )


def merge_reports(reports: Sequence[Report]) -> MergedReport:
    """Flag every check whose status or evidence is not the same on all nodes (a FAIL when
    some nodes pass and others fail, else a WARN), naming the nodes on each side; what a run
    measured (``Finding.measured``) is not compared. A node name in more than one report is a
    WARN of its own (``merge.nodes``)."""
    differences: list[Finding] = []
    ids = list(dict.fromkeys(f.id for r in reports for f in r.findings))
    for id_ in ids:
        seen: dict[tuple[str, str], list[str]] = {}
        area = ""
        for report in reports:
            for f in report.findings:
                if f.id == id_:
                    area = f.area
                    seen.setdefault((f.status, f.evidence), []).append(report.node)
        if len(seen) <= 1:
            continue
        statuses = {status for status, _ in seen}
        groups = "; ".join(
            f"{status} on {', '.join(nodes)}" + (f" ({evidence})" if evidence else "")
            for (status, evidence), nodes in seen.items()
        )
        mixed_fail = "FAIL" in statuses and statuses - {"FAIL", "SKIP"}
        differences.append(
            Finding(
                id=id_,
                area=area,
                status="FAIL" if mixed_fail else "WARN",
                message=f"nodes differ on {id_}",
                evidence=groups,
                fix="make the nodes alike: the same mount options, layout, tunings and AZ",
            )
        )
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.node] = counts.get(report.node, 0) + 1
    twice = {node: n for node, n in counts.items() if n > 1}
    if twice:
        differences.insert(
            0,
            Finding(
                id="merge.nodes",
                area="merge",
                status="WARN",
                message="the same node name appears in more than one report",
                evidence=", ".join(f"{node} x {n}" for node, n in twice.items()),
                fix="merge one report per node (two runs of one node, or nodes that share a"
                " hostname?)",
            ),
        )
    return MergedReport(tuple(reports), tuple(differences))

"""``run_doctor`` on the recorded examples/doctor-snapshot, variants of it and a real temp
folder; ``report_from_json`` on written reports; ``merge_reports`` and ``MergedReport`` on the
findings of several nodes: which differences are FAIL and which WARN, and the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.doctor.checks import DoctorOptions
from kvtool.doctor.run import MergedReport, merge_reports, report_from_json, run_doctor
from kvtool.errors import InputError
from kvtool.findings import Finding, Report, Status
from kvtool.probe.gather import GatherOptions
from kvtool.probe.host import LocalHost, SnapshotHost

from .snapshots import KV_PATH, variant

EXAMPLE = Path(__file__).parents[3] / "examples" / "doctor-snapshot"


def by_id(report: Report) -> dict[str, Finding]:
    return {f.id: f for f in report.findings}


def node(name: str, *findings: tuple[str, Status, str]) -> Report:
    """A report of ``(id, status, evidence)`` findings on node ``name``."""
    return Report(
        path=KV_PATH,
        node=name,
        findings=tuple(Finding(i, i.split(".")[0], s, f"{i} is {s}", e) for i, s, e in findings),
    )


# --- run_doctor ---------------------------------------------------------------------------------


def test_the_example_snapshot_is_checked_as_its_node() -> None:
    report = run_doctor(
        SnapshotHost(EXAMPLE), KV_PATH, gather_options=GatherOptions(), options=DoctorOptions()
    )
    assert (report.path, report.node) == (KV_PATH, "node-a")
    assert not report.failed
    ids = [f.id for f in report.findings]
    assert len(ids) == len(set(ids))  # one finding per check
    found = by_id(report)
    assert found["mount.flock"].status == "PASS"
    assert found["network.efa_carries"].status == "PASS"
    assert found["fsx.same_az"].status == "PASS"


def test_the_options_reach_gather_and_the_checks() -> None:
    report = run_doctor(
        SnapshotHost(EXAMPLE),
        KV_PATH,
        gather_options=GatherOptions(aws=False),
        options=DoctorOptions(nodes=16),
    )
    aws = [f for f in report.findings if f.area in ("aws", "fsx")]
    assert [(f.id, f.status, f.message) for f in aws] == [
        ("aws.file_system", "SKIP", "AWS not asked (--no-aws)")
    ]
    with_aws = run_doctor(
        SnapshotHost(EXAMPLE),
        KV_PATH,
        gather_options=GatherOptions(),
        options=DoctorOptions(nodes=16),
    )
    assert "for 16 node(s)" in by_id(with_aws)["aws.throughput"].evidence


@pytest.mark.parametrize(("hostname", "expected"), [("gpu-07\n", "gpu-07"), (" \n", "unknown")])
def test_the_node_is_the_captured_hostname_or_unknown(
    tmp_path: Path, hostname: str, expected: str
) -> None:
    folder = variant(EXAMPLE, tmp_path / "snap", hostname=hostname)
    report = run_doctor(
        SnapshotHost(folder), KV_PATH, gather_options=GatherOptions(), options=DoctorOptions()
    )
    assert report.node == expected


def test_an_empty_snapshot_is_an_unknown_node_that_only_skips(tmp_path: Path) -> None:
    report = run_doctor(
        SnapshotHost(tmp_path), KV_PATH, gather_options=GatherOptions(), options=DoctorOptions()
    )
    assert report.node == "unknown"
    assert report.summary == {"FAIL": 0, "WARN": 0, "PASS": 0, "SKIP": len(report.findings)}
    assert len(report.findings) > 10


def test_a_live_run_on_a_temp_folder_names_this_node_and_leaves_it_empty(tmp_path: Path) -> None:
    hostname = Path("/proc/sys/kernel/hostname")
    if not hostname.exists():
        pytest.skip("no /proc/sys/kernel/hostname: not Linux")
    kv = tmp_path / "kv"
    kv.mkdir()
    report = run_doctor(
        LocalHost(),
        str(kv),
        gather_options=GatherOptions(probe_mib=1, gds=False, aws=False),
        options=DoctorOptions(probe_mib=1),
    )
    assert report.node == hostname.read_text().strip()
    found = by_id(report)
    assert found["path.writable"].status == "PASS"
    assert found["mount.shared"].status in ("FAIL", "WARN")  # a temp folder is not shared
    assert found["client.odirect"].status in ("PASS", "FAIL")  # the probe really ran
    assert list(kv.iterdir()) == []


# --- report_from_json ---------------------------------------------------------------------------


def test_a_written_report_reads_back_equal() -> None:
    report = run_doctor(
        SnapshotHost(EXAMPLE), KV_PATH, gather_options=GatherOptions(), options=DoctorOptions()
    )
    text = json.dumps(report.to_json())
    assert report_from_json(json.loads(text), source="node-a.json") == report


@pytest.mark.parametrize(
    ("finding", "why"),
    [
        ({"id": "mount.flock", "area": "mount", "status": "BROKEN"}, "status 'BROKEN' is not"),
        ("not a finding", "finding 1 is not an object"),
        ({"status": "PASS"}, "finding 1 has no id"),
    ],
)
def test_a_finding_that_no_doctor_wrote_is_refused_not_read_as_a_skip(
    finding: object, why: str
) -> None:
    """A report was read leniently once: an unknown status became SKIP and a string finding
    was dropped, so a merge of a damaged report exited 0."""
    data = {"path": "/fsx/kv", "findings": [finding]}
    with pytest.raises(InputError) as raised:
        report_from_json(data, source="gpu-3.json")
    assert why in raised.value.message
    ok = {"path": "/fsx/kv", "findings": [{"id": "path.writable", "status": "PASS"}]}
    report = report_from_json(ok, source="gpu-3.json")
    assert report.node == "gpu-3.json"  # no node: the file names it
    assert report.findings == (Finding("path.writable", "", "PASS", ""),)


@pytest.mark.parametrize("data", [[], "text", {"path": "/x"}, {"findings": {"a": 1}}])
def test_what_is_not_a_report_names_the_file(data: object) -> None:
    with pytest.raises(InputError) as raised:
        report_from_json(data, source="reports/b.json")
    assert raised.value.message == (
        "reports/b.json: not a kvtool doctor --json report (no findings list)"
    )


# --- merge_reports ------------------------------------------------------------------------------


def test_nodes_that_pass_and_fail_a_check_are_a_fail_naming_both_sides() -> None:
    merged = merge_reports(
        [
            node("a", ("mount.flock", "PASS", "flock")),
            node("b", ("mount.flock", "FAIL", "no flock")),
            node("c", ("mount.flock", "PASS", "flock")),
        ]
    )
    (difference,) = merged.differences
    assert difference == Finding(
        id="mount.flock",
        area="mount",
        status="FAIL",
        message="nodes differ on mount.flock",
        evidence="PASS on a, c (flock); FAIL on b (no flock)",
        fix="make the nodes alike: the same mount options, layout, tunings and AZ",
    )
    assert merged.failed


@pytest.mark.parametrize(
    ("a", "b", "status"),
    [
        (("PASS", "relatime,flock"), ("PASS", "noatime,flock"), "WARN"),  # evidence only
        (("PASS", ""), ("WARN", ""), "WARN"),
        (("FAIL", ""), ("SKIP", ""), "WARN"),  # a node that could not check does not pass
        (("FAIL", ""), ("WARN", ""), "FAIL"),
    ],
)
def test_how_a_difference_is_graded(
    a: tuple[Status, str], b: tuple[Status, str], status: Status
) -> None:
    merged = merge_reports([node("a", ("mount.flock", *a)), node("b", ("mount.flock", *b))])
    assert [d.status for d in merged.differences] == [status]


def test_a_difference_without_evidence_shows_only_statuses_and_nodes() -> None:
    merged = merge_reports(
        [node("a", ("gds.direct", "PASS", "")), node("b", ("gds.direct", "SKIP", ""))]
    )
    assert merged.differences[0].evidence == "PASS on a; SKIP on b"


def test_alike_nodes_have_no_differences_but_a_shared_fail_still_fails() -> None:
    same: tuple[tuple[str, Status, str], ...] = (
        ("mount.flock", "FAIL", "no flock"),
        ("mount.atime", "PASS", "relatime"),
    )
    merged = merge_reports([node("a", *same), node("b", *same)])
    assert merged.differences == ()
    assert merged.failed  # both nodes fail mount.flock
    healthy = merge_reports([node("a", same[1]), node("b", same[1])])
    assert not healthy.failed


def test_differences_come_in_the_order_checks_first_appear() -> None:
    merged = merge_reports(
        [
            node("a", ("path.writable", "PASS", ""), ("mount.flock", "PASS", "")),
            node("b", ("path.writable", "FAIL", ""), ("mount.flock", "FAIL", "")),
        ]
    )
    assert [d.id for d in merged.differences] == ["path.writable", "mount.flock"]


def test_merging_nothing_is_empty_and_passes() -> None:
    merged = merge_reports([])
    assert merged == MergedReport((), ())
    assert not merged.failed
    assert merged.to_json()["summary"] == {
        "nodes": 0,
        "failing_nodes": 0,
        "differences": 0,
        "FAIL": 0,
        "WARN": 0,
        "PASS": 0,
        "SKIP": 0,
    }


def test_merged_json_has_every_node_the_differences_and_totals() -> None:
    a = node("a", ("mount.flock", "PASS", ""), ("mount.atime", "WARN", ""))
    b = node("b", ("mount.flock", "FAIL", ""), ("mount.atime", "WARN", ""))
    c = node("c", ("mount.flock", "PASS", ""), ("gds.stack", "SKIP", ""))
    data = merge_reports([a, b, c]).to_json()
    assert set(data) == {"nodes", "differences", "summary"}
    assert [n["node"] for n in data["nodes"]] == ["a", "b", "c"]
    assert data["nodes"][1] == b.to_json()
    assert [(d["id"], d["status"]) for d in data["differences"]] == [("mount.flock", "FAIL")]
    assert data["summary"] == {
        "nodes": 3,
        "failing_nodes": 1,
        "differences": 1,
        "FAIL": 1,
        "WARN": 2,
        "PASS": 2,
        "SKIP": 1,
    }


def test_merging_real_reports_of_two_snapshots_flags_the_az(tmp_path: Path) -> None:
    other = variant(EXAMPLE, tmp_path / "b", imds_az_id="apne2-az3\n", hostname="node-b\n")
    reports = [
        run_doctor(
            SnapshotHost(folder), KV_PATH, gather_options=GatherOptions(), options=DoctorOptions()
        )
        for folder in (EXAMPLE, other)
    ]
    merged = merge_reports(reports)
    assert [d.id for d in merged.differences] == ["fsx.same_az"]
    (difference,) = merged.differences
    assert difference.status == "FAIL"
    assert difference.evidence.startswith(
        "PASS on node-a (instance apne2-az1, file system apne2-az1)"
    )
    assert "FAIL on node-b (instance apne2-az3, file system apne2-az1)" in difference.evidence
    assert merged.failed


def test_merge_does_not_compare_what_a_run_measured() -> None:
    """Two runs differ by noise in the probe's MiB/s: that is no difference between nodes."""

    def probe(node: str, measured: str) -> Report:
        finding = Finding("client.odirect", "client", "PASS", "ok", "probe", measured=measured)
        return Report("/kv", node, (finding,))

    a = probe("node-a", "write 812 MiB/s, read 1,934 MiB/s")
    b = probe("node-b", "write 790 MiB/s, read 2,015 MiB/s")
    assert merge_reports([a, b]).differences == ()


def test_merge_notices_the_same_node_twice() -> None:
    a = node("node-a", ("mount.flock", "PASS", "flock"))
    merged = merge_reports([a, a, node("node-b", ("mount.flock", "PASS", "flock"))])
    (twice,) = merged.differences
    assert (twice.id, twice.status, twice.evidence) == ("merge.nodes", "WARN", "node-a x 2")
    assert not merged.failed

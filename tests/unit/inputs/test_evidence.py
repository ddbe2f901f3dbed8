"""The front door's evidence: kvtool bench and kvtool doctor JSON, each parsed once into the
plan's own types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.evidence import read_bench, read_doctor_report

EXAMPLES = Path(__file__).parents[3] / "examples" / "check"


def test_bench_report_gives_results_and_the_measured_tiers() -> None:
    report = read_bench(EXAMPLES / "bench-t3.json")
    (result,) = report.results
    assert (result.tier, result.op, result.bytes_per_s, result.direct) == (
        "t3",
        "seq_read",
        5.6e9,
        True,
    )
    (t3,) = report.measured(chips=8)
    assert t3.tier == "T3"
    assert t3.bytes_per_s == 5.6e9
    assert "seq_read" in t3.source


def test_bench_measurements_that_did_not_run_are_not_evidence(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    results = [
        {"tier": "t3", "op": "seq_read", "status": "skip", "reason": "no fio"},
        {"tier": "t4", "op": "get", "status": "ok", "bytes_per_s": 2e9, "threads": 64},
    ]
    path.write_text(json.dumps({"results": results}))
    (t4,) = read_bench(path).measured(chips=8)
    assert (t4.tier, t4.bytes_per_s) == ("T4", 2e9)


def test_doctor_reports_keep_node_and_findings() -> None:
    report = read_doctor_report(EXAMPLES / "doctor-node-a.json")
    assert report.node
    assert report.findings
    assert {f.status for f in report.findings} <= {"PASS", "WARN", "FAIL", "SKIP"}
    assert any(f.id == "fsx.deployment" for f in report.findings)


def test_files_that_are_not_reports_are_one_line(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError, match="not a kvtool doctor --json report"):
        read_doctor_report(other)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(InputError, match="malformed JSON at line 1"):
        read_bench(broken)
    listing = tmp_path / "list.json"
    listing.write_text("[]")
    with pytest.raises(InputError, match="must be a JSON object"):
        read_bench(listing)


def test_a_capacity_report_is_read_as_t3_and_a_broken_one_is_named(tmp_path: Path) -> None:
    report = {"schema_version": 1, "command": "capacity",
              "capacity": {"levels": [{"sessions": 2, "bytes_per_s": 2e9, "restores": 5}]},
              "workload": {"file_bytes": 4096, "restore_parallel": 8, "direct": True}}  # fmt: skip
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(report))
    (t3,) = read_bench(path).measured(chips=8)
    assert (t3.tier, t3.bytes_per_s) == ("T3", 2e9)
    report["capacity"] = {"levels": []}
    path.write_text(json.dumps(report))
    with pytest.raises(InputError, match="not a kvtool capacity --json report: no level"):
        read_bench(path)
    path.write_text(json.dumps({"schema_version": 1, "command": "replay", "results": []}))
    with pytest.raises(InputError, match="is kvtool replay's report, not kvtool bench's"):
        read_bench(path)

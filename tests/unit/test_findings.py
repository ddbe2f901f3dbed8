"""Findings and reports: the JSON a finding and a report write (and read back for ``--merge``),
the summary and the FAIL rule, and the JUnit XML parsed back with ``xml.etree``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from kvtool.findings import STATUSES, Finding, Report, finding_from_json, junit_xml

FAIL = Finding(
    "mount.flock",
    "mount",
    "FAIL",
    "flock is off",
    evidence="opts: rw,noatime",
    fix="mount -o flock",
)
WARN = Finding("net.mtu", "network", "WARN", "MTU 1500 on EFA", evidence="mtu=1500")
PASS = Finding("t3.stripe", "lustre", "PASS", "striped over 8 OSTs")
SKIP = Finding("gpu.gds", "gpu", "SKIP", "no nvidia-fs module here")


def test_a_finding_as_json_has_every_field_with_empty_defaults() -> None:
    assert PASS.to_json() == {
        "id": "t3.stripe",
        "area": "lustre",
        "status": "PASS",
        "message": "striped over 8 OSTs",
        "evidence": "",
        "fix": "",
        "measured": "",
    }
    assert FAIL.to_json()["fix"] == "mount -o flock"
    assert type(FAIL.to_json()) is dict


def test_findings_read_back_from_their_json() -> None:
    for finding in (FAIL, WARN, PASS, SKIP):
        assert finding_from_json(json.loads(json.dumps(finding.to_json()))) == finding


def test_an_unknown_status_reads_back_as_skip_never_pass() -> None:
    read = finding_from_json({"id": "x", "area": "a", "status": "OK", "message": "m"})
    assert read.status == "SKIP"
    assert finding_from_json({"id": "x", "status": "pass"}).status == "SKIP"  # case matters


def test_missing_fields_read_back_empty_and_others_as_text() -> None:
    assert finding_from_json({}) == Finding("", "", "SKIP", "", "", "")
    read = finding_from_json({"id": 7, "area": None, "status": "WARN", "message": 1.5})
    assert read == Finding("7", "None", "WARN", "1.5", "", "")


def test_the_summary_counts_every_status_in_order() -> None:
    report = Report("/fsx", "node-1", (FAIL, WARN, WARN, PASS, SKIP, SKIP, SKIP))
    assert report.summary == {"FAIL": 1, "WARN": 2, "PASS": 1, "SKIP": 3}
    assert list(report.summary) == list(STATUSES) == ["FAIL", "WARN", "PASS", "SKIP"]
    assert Report("/fsx", "n", ()).summary == {"FAIL": 0, "WARN": 0, "PASS": 0, "SKIP": 0}


def test_a_report_fails_only_when_a_finding_fails() -> None:
    assert Report("/fsx", "n", (PASS, FAIL)).failed
    assert not Report("/fsx", "n", (PASS, WARN, SKIP)).failed
    assert not Report("/fsx", "n", (SKIP,)).failed  # skipped is not failed (nor passed)
    assert not Report("/fsx", "n", ()).failed


def test_a_report_as_json() -> None:
    report = Report("/fsx/kv", "ip-10-0-0-1", (FAIL, SKIP))
    data = json.loads(json.dumps(report.to_json()))
    assert data == {
        "path": "/fsx/kv",
        "node": "ip-10-0-0-1",
        "findings": [FAIL.to_json(), SKIP.to_json()],
        "summary": {"FAIL": 1, "WARN": 0, "PASS": 0, "SKIP": 1},
    }
    assert [finding_from_json(f) for f in data["findings"]] == [FAIL, SKIP]


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def test_junit_counts_and_names_the_suite_and_host() -> None:
    text = junit_xml("kvtool doctor", [FAIL, WARN, PASS, SKIP], hostname="ip-10-0-0-1")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    assert text.endswith("</testsuites>\n")
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    for element in (root, suites[0]):
        assert element.attrib["name"] == "kvtool doctor"
        assert element.attrib["tests"] == "4"
        assert element.attrib["failures"] == "1"
        assert element.attrib["skipped"] == "1"
        assert element.attrib["errors"] == "0"
    assert suites[0].attrib["hostname"] == "ip-10-0-0-1"
    assert ET.fromstring(junit_xml("s", [])).find("testsuite").attrib["hostname"] == "localhost"


def test_junit_has_one_case_per_finding_named_by_id_and_area() -> None:
    root = ET.fromstring(junit_xml("s", [FAIL, WARN, PASS, SKIP]))
    cases = root.findall("testsuite/testcase")
    assert [(c.attrib["classname"], c.attrib["name"]) for c in cases] == [
        ("mount", "mount.flock"),
        ("network", "net.mtu"),
        ("lustre", "t3.stripe"),
        ("gpu", "gpu.gds"),
    ]


def test_a_fail_is_a_failure_with_message_evidence_and_fix() -> None:
    case = _cases(ET.fromstring(junit_xml("s", [FAIL])))["mount.flock"]
    failure = case.find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "flock is off"
    assert failure.text == "flock is off\nevidence: opts: rw,noatime\nfix: mount -o flock"
    assert case.find("skipped") is None
    assert case.find("system-out") is None


def test_a_skip_is_skipped_with_its_reason() -> None:
    case = _cases(ET.fromstring(junit_xml("s", [SKIP])))["gpu.gds"]
    skipped = case.find("skipped")
    assert skipped is not None
    assert skipped.attrib["message"] == "no nvidia-fs module here"
    assert case.find("failure") is None


def test_warn_and_pass_are_passing_cases_that_say_their_status() -> None:
    cases = _cases(ET.fromstring(junit_xml("s", [WARN, PASS])))
    for name, out in (
        ("net.mtu", "WARN: MTU 1500 on EFA\nevidence: mtu=1500"),
        ("t3.stripe", "PASS: striped over 8 OSTs"),
    ):
        case = cases[name]
        assert case.find("failure") is None
        assert case.find("skipped") is None
        system_out = case.find("system-out")
        assert system_out is not None
        assert system_out.text == out


def test_markup_in_any_field_is_escaped() -> None:
    nasty = Finding(
        "a\"<b>&'c", "x&y", "FAIL", "size < 1 & > 0", evidence="<![CDATA[ ]]>", fix='echo "a"'
    )
    root = ET.fromstring(junit_xml('suite "<&>"', [nasty], hostname="h&<"))
    assert root.attrib["name"] == 'suite "<&>"'
    assert root.find("testsuite").attrib["hostname"] == "h&<"
    case = _cases(root)["a\"<b>&'c"]
    assert case.attrib["classname"] == "x&y"
    failure = case.find("failure")
    assert failure.attrib["message"] == "size < 1 & > 0"
    assert failure.text == 'size < 1 & > 0\nevidence: <![CDATA[ ]]>\nfix: echo "a"'


# XML 1.0 text: no control characters (bar newline, added below), surrogates or non-characters
XML_TEXT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Cn")) | st.just("\n"), max_size=40
)


@given(
    st.lists(
        st.builds(
            Finding,
            id=XML_TEXT,
            area=XML_TEXT,
            status=st.sampled_from(STATUSES),
            message=XML_TEXT,
            evidence=XML_TEXT,
            fix=XML_TEXT,
        ),
        max_size=6,
    )
)
def test_any_findings_round_trip_through_the_xml(findings: list[Finding]) -> None:
    root = ET.fromstring(junit_xml("suite", findings))
    cases = root.findall("testsuite/testcase")
    assert root.attrib["tests"] == str(len(findings))
    assert root.attrib["failures"] == str(sum(f.status == "FAIL" for f in findings))
    assert root.attrib["skipped"] == str(sum(f.status == "SKIP" for f in findings))
    assert len(cases) == len(findings)
    for finding, case in zip(findings, cases, strict=True):
        assert case.attrib["name"] == finding.id
        assert case.attrib["classname"] == finding.area
        if finding.status == "FAIL":
            assert case.find("failure").attrib["message"] == finding.message
        elif finding.status == "SKIP":
            assert case.find("skipped").attrib["message"] == finding.message
        else:
            text = case.find("system-out").text or ""
            assert text.startswith(f"{finding.status}: {finding.message}")


def test_junit_xml_survives_control_characters_in_a_finding() -> None:
    """ANSI colours or stray control bytes from a command's output made unparseable XML."""
    import xml.etree.ElementTree as ET

    from kvtool.findings import Finding, junit_xml

    text = junit_xml("s", [Finding("a.b", "a", "FAIL", "red \x1b[31mtext", "\x01evidence", "")])
    root = ET.fromstring(text)
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == "red \ufffd[31mtext"
    assert "\ufffdevidence" in (failure.text or "")

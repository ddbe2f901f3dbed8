"""``kvtool doctor`` end to end: snapshots, a live run on a real temp folder, JUnit, --merge,
AWS through moto's server and IMDSv2 through a small HTTP server, both on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import SCRATCH_PREFIX, LocalHost, odirect_probe
from tests.conftest import CliResult
from tests.unit.doctor.snapshots import KV_PATH, broken, healthy
from tests.unit.folders.conftest import build

Run = Callable[..., CliResult]
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return healthy(tmp_path_factory.mktemp("doctor") / "healthy")


def test_the_examples_snapshot_is_what_the_builder_makes(tmp_path: Path) -> None:
    built = healthy(tmp_path / "built")
    example = ROOT / "examples" / "doctor-snapshot"
    names = sorted(p.name for p in built.iterdir())
    assert names == sorted(p.name for p in example.iterdir() if p.name != "README.md")
    for name in names:
        assert (built / name).read_text() == (example / name).read_text(), name


def test_healthy_snapshot_exits_0_with_the_json_shape(kvtool: Run, snapshot: Path) -> None:
    result = kvtool("doctor", "--snapshot", str(snapshot), KV_PATH, "--json")
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    assert set(data) == {"schema_version", "command", "path", "node", "findings", "summary"}
    assert (data["schema_version"], data["command"]) == (1, "doctor")
    assert data["node"] == "node-a"
    assert data["summary"]["FAIL"] == 0
    assert {"id", "area", "status", "message", "evidence", "fix"} <= set(data["findings"][0])


def test_broken_snapshot_exits_1_and_junit_names_the_failure(
    kvtool: Run, snapshot: Path, tmp_path: Path
) -> None:
    folder = broken("no_flock", snapshot, tmp_path / "nf")
    junit = tmp_path / "doctor.xml"
    result = kvtool("doctor", "--snapshot", str(folder), KV_PATH, "--junit", str(junit))
    assert result.exit_code == 1
    assert "FAIL  mount.flock" in result.stdout
    assert "fix: sudo umount /mnt/lustre && sudo mount -t lustre -o relatime,flock" in result.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "1"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["mount.flock"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_live_run_on_a_real_folder_leaves_nothing_behind(kvtool: Run, tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    folder.mkdir()
    result = kvtool("doctor", str(folder), "--no-aws", "--gds", "off", "--json", "--probe-mib", "4")
    data = json.loads(result.stdout)
    findings = {f["id"]: f for f in data["findings"]}
    assert findings["mount.shared"]["status"] in ("FAIL", "WARN")  # a temp folder is node-local
    assert findings["client.odirect"]["status"] in ("PASS", "FAIL")  # it really ran
    assert result.exit_code == 1
    assert list(folder.iterdir()) == []  # the probe's scratch file is gone


def test_a_folder_past_its_cap_fails_and_the_capture_replays_it(
    kvtool: Run, tmp_path: Path
) -> None:
    folder, capture = tmp_path / "kv", tmp_path / "capture"
    build(folder, "sglang-0.5.23.json")  # SGLang's own names, 258,148 bytes
    args = ("--no-aws", "--gds", "off", "--no-write", "--json", "--max-size", "200KB")
    model = ("--model", "llama-3.1-8b", "--tp", "2")
    live = kvtool("doctor", str(folder), *model, "--capture", str(capture), *args)
    assert live.exit_code == 1
    found = {f["id"]: f for f in json.loads(live.stdout)["findings"]}
    assert found["folder.cap"]["status"] == "FAIL"
    assert found["folder.cap"]["message"] == "over its cap by 56.8 KiB"  # 58,148 B
    assert found["folder.orphans"]["status"] == "WARN"  # the other five models' files
    assert (
        "57 files that llama-3.1-8b (or 5 other names) over 2 ranks"
        in (found["folder.orphans"]["message"])
    )
    assert (capture / "folder_contents.json").is_file()
    replay = kvtool("doctor", "--snapshot", str(capture), str(folder), *args)
    assert json.loads(replay.stdout)["findings"] == json.loads(live.stdout)["findings"]
    old = kvtool("doctor", "--snapshot", str(capture), str(folder), *args[:-2], "--cap", "200KB")
    assert json.loads(old.stdout)["findings"] == json.loads(live.stdout)["findings"]
    assert old.stderr.endswith("kvtool: note: --cap is now --max-size; the old name goes in the"
                               " next release\n")  # fmt: skip
    skipped = kvtool("doctor", str(folder), "--no-aws", "--gds", "off", "--no-write", "--json",
                     "--no-contents")  # fmt: skip
    found = {f["id"]: f for f in json.loads(skipped.stdout)["findings"]}
    assert found["folder.cap"]["status"] == "SKIP"


def test_odirect_probe_on_a_real_folder(tmp_path: Path) -> None:
    result = odirect_probe(str(tmp_path), 2)
    if result["ok"]:
        assert result["bytes"] == 2 * 2**20
    else:
        assert result["errno"] == 22  # a file system without O_DIRECT
    assert not list(tmp_path.glob(SCRATCH_PREFIX + "*"))


def test_capture_then_snapshot_gives_the_same_report(kvtool: Run, tmp_path: Path) -> None:
    folder, capture = tmp_path / "kv", tmp_path / "capture"
    folder.mkdir()
    args = ("--no-aws", "--gds", "off", "--json", "--probe-mib", "2")
    live = json.loads(kvtool("doctor", str(folder), "--capture", str(capture), *args).stdout)
    assert (capture / "proc_mounts.txt").exists()
    assert (capture / "path.json").exists()
    replay = json.loads(kvtool("doctor", "--snapshot", str(capture), str(folder), *args).stdout)
    assert replay["findings"] == live["findings"]


def test_merge_cli_flags_differences(kvtool: Run, snapshot: Path, tmp_path: Path) -> None:
    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(kvtool("doctor", "--snapshot", str(snapshot), KV_PATH, "--json").stdout)
    folder = broken("other_az", snapshot, tmp_path / "oaz")
    (folder / "hostname.txt").write_text("node-b\n")
    bad.write_text(kvtool("doctor", "--snapshot", str(folder), KV_PATH, "--json").stdout)
    result = kvtool("doctor", "--merge", str(good), str(bad))
    assert result.exit_code == 1
    assert "nodes differ on fsx.same_az" in result.stdout
    data = json.loads(kvtool("doctor", "--merge", str(good), str(bad), "--json").stdout)
    assert data["summary"]["nodes"] == 2
    assert [d["id"] for d in data["differences"]] == ["fsx.same_az"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/folder"], "/no/such/folder does not exist"),
        (["{file}"], "is not a folder"),
        (["--snapshot", "{empty}", "/x"], "is empty"),
        (["--snapshot", "/no/such/snap", "/x"], "is not a folder"),
        (["{dir}", "--gds", "maybe"], "unknown --gds 'maybe'"),
        (["--merge", "{file}"], "not a kvtool doctor --json report"),
        (["--merge"], "--merge needs doctor --json reports"),
        (["{dir}", "{dir}"], "doctor checks one PATH"),
        (["{dir}", "--sessions", "10"], "--sessions and --ctx need --model"),
        (["{dir}", "--max-size", "-5GiB"], "--max-size"),
        (["{dir}", "--cap", "-5GiB"], "--max-size"),  # the old name: its error, alone
    ],
)
def test_bad_input_is_one_line_exit_2(
    kvtool: Run, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.json").write_text('{"not": "a report"}')
    subs = {
        "{file}": str(tmp_path / "file.json"),
        "{empty}": str(tmp_path / "empty"),
        "{dir}": str(tmp_path / "dir"),
    }
    result = kvtool("doctor", *(subs.get(a, a) for a in args), "--no-aws")
    assert result.exit_code == 2, result.stdout
    assert result.stderr.count("\n") == 1
    assert message in result.stderr


# --- AWS and IMDS on 127.0.0.1 -------------------------------------------------------------


class _Imds(http.server.BaseHTTPRequestHandler):
    """IMDSv2 as EC2 serves it: PUT a token, then GET metadata with the token header."""

    values: ClassVar[dict[str, str]] = {
        "placement/availability-zone-id": "apne2-az1",
        "placement/region": "ap-northeast-2",
        "instance-type": "p5en.48xlarge",
    }

    def do_PUT(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"token-123")

    def do_GET(self) -> None:
        key = self.path.removeprefix("/latest/meta-data/")
        if self.headers.get("X-aws-ec2-metadata-token") != "token-123" or key not in self.values:
            self.send_response(401 if key in self.values else 404)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.values[key].encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def aws_endpoints(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's server and an IMDS stub on 127.0.0.1; dummy credentials set before any client."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    imds = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    thread = threading.Thread(target=imds.serve_forever, daemon=True)
    thread.start()
    host, port = server.get_host_and_port()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{imds.server_address[1]}",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    try:
        yield f"http://{host}:{port}"
    finally:
        imds.shutdown()
        server.stop()


def test_aws_facts_through_boto3_and_imds(aws_endpoints: str, tmp_path: Path) -> None:
    import boto3

    ec2 = boto3.client("ec2", region_name="ap-northeast-2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(
        VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="ap-northeast-2a"
    )["Subnet"]
    fs = boto3.client("fsx", region_name="ap-northeast-2").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=4800,
        SubnetIds=[subnet["SubnetId"]],
        LustreConfiguration={
            "DeploymentType": "PERSISTENT_2",
            "PerUnitStorageThroughput": 1000,
            "EfaEnabled": True,
            "DataCompressionType": "NONE",
        },
    )["FileSystem"]
    facts = gather(
        LocalHost(),
        str(tmp_path),
        GatherOptions(write_probe=False, gds=False, file_system_id=fs["FileSystemId"]),
    )
    aws = facts.aws
    assert (aws.availability_zone_id, aws.region, aws.instance_type) == (
        "apne2-az1",
        "ap-northeast-2",
        "p5en.48xlarge",
    )
    assert aws.file_system is not None
    assert aws.file_system["LustreConfiguration"]["EfaEnabled"] is True
    assert aws.subnet_az_id == subnet["AvailabilityZoneId"]
    assert aws.associations is None  # moto has no data repository associations: reported
    assert "dra" in aws.errors


def test_no_credentials_or_endpoint_is_a_quick_skip(
    kvtool: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on port 9
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    start = time.monotonic()
    data = json.loads(
        kvtool("doctor", str(tmp_path), "--json", "--no-write", "--gds", "off").stdout
    )
    assert time.monotonic() - start < 20
    aws = [f for f in data["findings"] if f["area"] == "aws"]
    assert [f["status"] for f in aws] == ["SKIP"]
    assert os.listdir(tmp_path) == []

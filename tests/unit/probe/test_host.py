"""The three hosts: ``LocalHost`` on real files, real subprocesses (``sys.executable -c``), a real
O_DIRECT probe, a stand-in ``gdsio`` script, IMDSv2 and moto on 127.0.0.1; ``SnapshotHost`` on
the recorded examples/doctor-snapshot; ``CapturingHost`` writing what ``SnapshotHost`` reads
back. Also ``s3_client``'s settings. Nothing here waits on the internet."""

from __future__ import annotations

import errno
import http.server
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.probe.gather import gather
from kvtool.probe.host import (
    NOT_INSTALLED,
    SCRATCH_PREFIX,
    CapturingHost,
    CommandResult,
    LocalHost,
    SnapshotHost,
    environment,
    odirect_probe,
    on_cpus,
    s3_client,
)
from tests.cli import test_doctor as doctor_cli
from tests.unit.doctor.snapshots import KV_PATH

aws_endpoints = doctor_cli.aws_endpoints  # the fixture: moto and an IMDS stub on 127.0.0.1
EXAMPLE = Path(__file__).parents[3] / "examples" / "doctor-snapshot"
PY = sys.executable
MIB = 2**20


def python(code: str) -> list[str]:
    return [PY, "-c", code]


def odirect_works(folder: Path) -> bool:
    """Whether this file system takes O_DIRECT (tmpfs and ramfs answer EINVAL)."""
    return bool(odirect_probe(str(folder), 1)["ok"])


# --- CommandResult --------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "ok"), [(0, True), (1, False), (NOT_INSTALLED, False)])
def test_only_exit_status_0_is_ok(code: int, ok: bool) -> None:
    assert CommandResult(code, "", "").ok is ok


# --- LocalHost.read and run -------------------------------------------------------------------


def test_local_read_gives_text_and_none_for_what_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       805306368 kB\n")
    (tmp_path / "bad").write_bytes(b"ok \xff\n")
    host = LocalHost()
    assert host.read("proc_meminfo", str(tmp_path / "meminfo")) == "MemTotal:       805306368 kB\n"
    assert host.read("x", str(tmp_path / "bad")) == "ok \ufffd\n"  # replaced, not an error
    assert host.read("x", str(tmp_path / "missing")) is None
    assert host.read("x", str(tmp_path)) is None  # a folder


def test_local_run_returns_the_exit_status_and_both_streams() -> None:
    result = LocalHost().run(
        "k", python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    )
    assert result == CommandResult(3, "out\n", "err\n")
    assert LocalHost().run("k", python("print('fine')")) == CommandResult(0, "fine\n", "")


def test_output_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    """fio echoes a host name back as it was given: bytes that are not UTF-8 must not raise."""
    code = (
        "import sys; sys.stderr.buffer.write(b'bad <\\xff>\\n'); sys.stdout.buffer.write(b'\\xfe')"
    )
    assert LocalHost().run("k", python(code)) == CommandResult(0, "\ufffd", "bad <\ufffd>\n")
    spawned = LocalHost().spawn("k", python(code))
    assert spawned.finish(timeout_s=30) == CommandResult(0, "\ufffd", "bad <\ufffd>\n")


def test_local_run_uses_no_shell() -> None:
    result = LocalHost().run("k", [*python("import sys; print(sys.argv[1])"), "$HOME; echo hi"])
    assert result.stdout == "$HOME; echo hi\n"


def test_a_program_that_is_not_installed_is_127() -> None:
    result = LocalHost().run("lfs_df", ["kvtool-no-such-tool", "df"])
    assert result == CommandResult(NOT_INSTALLED, "", "kvtool-no-such-tool: command not found")


def test_a_file_that_cannot_be_executed_is_126(tmp_path: Path) -> None:
    script = tmp_path / "lfs"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o644)
    result = LocalHost().run("lfs_df", [str(script), "df"])
    assert result == CommandResult(126, "", f"{script}: Permission denied")


def test_a_command_past_its_timeout_is_stopped_and_reported_as_124(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    start = time.monotonic()
    result = LocalHost().run("lnet_before", [*python(code), str(pid_file)], timeout_s=0.5)
    assert time.monotonic() - start < 5
    assert result == CommandResult(124, "", f"{PY}: timed out after 0.5 s")
    with pytest.raises(ProcessLookupError):  # the child was stopped and reaped
        os.kill(int(pid_file.read_text()), 0)


def test_the_hosts_own_timeout_applies_when_none_is_given() -> None:
    result = LocalHost(timeout_s=0.3).run("k", python("import time; time.sleep(60)"))
    assert (result.returncode, result.stderr) == (124, f"{PY}: timed out after 0.3 s")


# --- LocalHost.path_info ----------------------------------------------------------------------


def test_path_info_of_a_folder_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    for name in ("a", "b", ".hidden"):
        (real / name).write_text("x")
    (real / "sub").mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    info = LocalHost().path_info("path", str(link))
    assert {k: info[k] for k in ("path", "exists", "is_dir", "writable", "realpath")} == {
        "path": str(link),
        "exists": True,
        "is_dir": True,
        "writable": True,
        "realpath": str(real.resolve()),
    }
    assert info["entries"] == 4  # hidden files and folders count: all are directory entries
    st = os.statvfs(real)
    assert info["files"] == st.f_files
    assert info["free_bytes"] > 0


def test_path_info_of_a_file_and_of_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    host = LocalHost()
    info = host.path_info("path", str(tmp_path / "f"))
    assert info == {
        "path": str(tmp_path / "f"),
        "exists": True,
        "is_dir": False,
        "writable": False,
        "realpath": str((tmp_path / "f").resolve()),
    }
    missing = host.path_info("path", str(tmp_path / "gone"))
    assert (missing["exists"], missing["is_dir"], missing["writable"]) == (False, False, False)
    assert "entries" not in missing


def test_path_info_stops_counting_at_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kvtool.probe.host.ENTRY_COUNT_LIMIT", 3)
    for i in range(5):
        (tmp_path / f"chunk-{i}").write_text("x")
    assert LocalHost().path_info("path", str(tmp_path))["entries"] == 3


# --- the O_DIRECT probe -------------------------------------------------------------------------


def test_odirect_probe_through_the_host_moves_the_asked_size(tmp_path: Path) -> None:
    result = LocalHost().odirect_probe("odirect", str(tmp_path), 3)
    if result["ok"]:
        assert result["bytes"] == 3 * MIB
        assert result["write_s"] >= 0
        assert result["read_s"] >= 0
        assert result["errno"] is None
    else:  # a file system without O_DIRECT
        assert (result["errno"], result["error"]) == (errno.EINVAL, "Invalid argument")
    assert list(tmp_path.iterdir()) == []


def test_odirect_probe_keep_leaves_the_file_for_the_caller(tmp_path: Path) -> None:
    result = odirect_probe(str(tmp_path), 2, keep=True)
    if not result["ok"]:
        assert "path" not in result
        assert list(tmp_path.iterdir()) == []
        pytest.skip(f"no O_DIRECT on {tmp_path}: {result['error']}")
    kept = Path(result["path"])
    assert kept.parent == tmp_path
    assert kept.name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-")
    assert kept.stat().st_size == 2 * MIB
    kept.unlink()


def test_odirect_probe_in_a_missing_folder_reports_enoent(tmp_path: Path) -> None:
    result = odirect_probe(str(tmp_path / "gone"), 1)
    assert result == {
        "ok": False,
        "errno": errno.ENOENT,
        "error": "No such file or directory",
        "bytes": 0,
    }
    assert list(tmp_path.iterdir()) == []


# --- the cuFile probe, with a stand-in gdsio ----------------------------------------------------


def fake_gdsio(folder: Path, monkeypatch: pytest.MonkeyPatch, *, rc: int = 0) -> Path:
    """A ``gdsio`` first on PATH that prints the file it was given, its size and the rest of
    its arguments, logs that it ran, and exits ``rc``."""
    folder.mkdir()
    script = folder / "gdsio"
    script.write_text(
        f"#!{PY}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "path = args[args.index('-f') + 1]\n"
        "open(os.path.join(os.path.dirname(sys.argv[0]), 'ran'), 'w').write(path)\n"
        "print(os.path.getsize(path), ' '.join(args[2:]))\n"
        f"print('gdsio exit {rc}', file=sys.stderr)\n"
        f"sys.exit({rc})\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


def test_cufile_probe_reads_a_scratch_file_with_gdsio_then_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = tmp_path / "kv"
    kv.mkdir()
    if not odirect_works(kv):
        pytest.skip(f"no O_DIRECT on {kv}: the scratch file cannot be written")
    bin_dir = fake_gdsio(tmp_path / "bin", monkeypatch)
    result = LocalHost().cufile_read_probe("cufile_read", str(kv), 2)
    assert (result["ran"], result["rc"]) == (True, 0)
    assert result["output"] == f"{2 * MIB} -d 0 -w 1 -s 2M -i 1M -x 0 -I 0\ngdsio exit 0\n"
    assert Path((bin_dir / "ran").read_text()).name.startswith(SCRATCH_PREFIX)
    assert {"nvfs_before", "nvfs_after"} <= set(result)
    assert list(kv.iterdir()) == []


def test_a_failing_gdsio_did_not_run_and_its_file_is_still_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = tmp_path / "kv"
    kv.mkdir()
    if not odirect_works(kv):
        pytest.skip(f"no O_DIRECT on {kv}: the scratch file cannot be written")
    fake_gdsio(tmp_path / "bin", monkeypatch, rc=5)
    result = LocalHost().cufile_read_probe("cufile_read", str(kv), 1)
    assert (result["ran"], result["rc"]) == (False, 5)
    assert result["output"].endswith("gdsio exit 5\n")
    assert list(kv.iterdir()) == []


def test_cufile_probe_without_a_scratch_file_does_not_call_gdsio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_gdsio(tmp_path / "bin", monkeypatch)
    result = LocalHost().cufile_read_probe("cufile_read", str(tmp_path / "gone"), 1)
    assert result["ran"] is False
    assert result["reason"] == "could not write the scratch file: No such file or directory"
    assert not (bin_dir / "ran").exists()


def test_cufile_probe_without_gdsio_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if list(Path("/usr/local").glob("cuda*/gds/tools/gdsio")):
        pytest.skip("the GDS tools are installed here: gdsio is found outside PATH")
    monkeypatch.setenv("PATH", str(tmp_path))
    result = LocalHost().cufile_read_probe("cufile_read", str(tmp_path), 1)
    assert result == {"ran": False, "reason": "gdsio (the GDS tools) is not installed"}
    assert list(tmp_path.iterdir()) == []


# --- IMDSv2 on 127.0.0.1 ------------------------------------------------------------------------


@pytest.fixture
def imds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """tests/cli/test_doctor.py's IMDSv2 stub on 127.0.0.1, noting each token request's TTL."""
    ttls: list[str] = []

    class Counting(doctor_cli._Imds):
        def do_PUT(self) -> None:
            ttls.append(self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", ""))
            super().do_PUT()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/"  # the trailing / is dropped
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint)
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    try:
        yield ttls
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.server
def test_imds_gets_one_token_then_answers_each_value(imds: list[str]) -> None:
    host = LocalHost()
    assert host.imds("imds_az_id", "placement/availability-zone-id") == "apne2-az1"
    assert host.imds("imds_instance_type", "instance-type") == "p5en.48xlarge"
    assert host.imds("imds_region", "placement/region") == "ap-northeast-2"
    assert imds == ["300"]  # one token for the whole run


@pytest.mark.server
def test_imds_without_the_value_is_none(imds: list[str]) -> None:
    assert LocalHost().imds("k", "placement/no-such-thing") is None  # 404


def test_imds_disabled_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "TRUE")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    host = LocalHost()
    assert host.imds("imds_az_id", "placement/availability-zone-id") is None
    assert host._imds_token is None  # no token was asked for


def test_imds_with_nothing_listening_is_a_quick_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    assert LocalHost(aws_timeout_s=1).imds("imds_az_id", "placement/availability-zone-id") is None
    assert time.monotonic() - start < 2


# --- AWS through boto3 --------------------------------------------------------------------------


@pytest.fixture
def no_aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No region, profile, credentials or instance metadata from this machine."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_aws_without_boto3_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 now raises ImportError
    response = LocalHost().aws("aws_fsx", "fsx", "describe_file_systems", {"_region": "x"})
    assert response == {"error": "boto3 is not installed (pip install 'kvtool[aws]')"}


@pytest.mark.usefixtures("no_aws_config")
def test_aws_without_a_region_is_an_error_not_an_exception() -> None:
    response = LocalHost().aws("aws_fsx", "fsx", "describe_file_systems", {"_region": None})
    assert response == {"error": "NoRegionError: You must specify a region."}


@pytest.mark.usefixtures("no_aws_config")
def test_aws_with_nothing_listening_is_a_quick_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    start = time.monotonic()
    response = LocalHost(aws_timeout_s=1).aws(
        "aws_fsx", "fsx", "describe_file_systems", {"_region": "us-east-1"}
    )
    assert time.monotonic() - start < 10
    assert response["error"].startswith("EndpointConnectionError: Could not connect")
    assert "http://127.0.0.1:9/" in response["error"]


def test_aws_through_moto_gives_plain_json_and_keeps_client_errors(
    aws_endpoints: str, tmp_path: Path
) -> None:
    import boto3

    ec2 = boto3.client("ec2", region_name="ap-northeast-2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(
        VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="ap-northeast-2a"
    )["Subnet"]
    created = boto3.client("fsx", region_name="ap-northeast-2").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[subnet["SubnetId"]],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
    )["FileSystem"]
    key_name = f"kv-{tmp_path.name}"  # moto's state lives as long as the test process
    ec2.create_key_pair(KeyName=key_name)
    host = CapturingHost(LocalHost(), tmp_path)
    params = {"_region": "ap-northeast-2", "FileSystemIds": [created["FileSystemId"]]}
    response = host.aws("aws_fsx", "fsx", "describe_file_systems", params)
    assert params["_region"] == "ap-northeast-2"  # the caller's dict is left alone
    assert "ResponseMetadata" not in response
    (described,) = response["FileSystems"]
    assert described["FileSystemId"] == created["FileSystemId"]
    assert described["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    assert SnapshotHost(tmp_path).aws("aws_fsx", "fsx", "describe_file_systems", {}) == response
    local = LocalHost()
    (pair,) = local.aws(
        "k", "ec2", "describe_key_pairs", {"_region": "ap-northeast-2", "KeyNames": [key_name]}
    )["KeyPairs"]
    assert isinstance(pair["CreateTime"], str)  # a datetime from boto3, made plain text
    missing = local.aws(
        "aws_subnet",
        "ec2",
        "describe_subnets",
        {"_region": "ap-northeast-2", "SubnetIds": ["subnet-0000000000000dead"]},
    )
    assert set(missing) == {"error"}
    assert "InvalidSubnetID.NotFound" in missing["error"]


# --- s3_client --------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_aws_config")
def test_s3_client_honours_the_region_endpoint_and_timeouts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    client = s3_client(connect_timeout_s=1.5)
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.endpoint_url == "http://127.0.0.1:9"
    config = client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (1.5, 30.0)
    assert config.retries["mode"] == "standard"
    assert config.max_pool_connections == 256


@pytest.mark.usefixtures("no_aws_config")
def test_s3_client_region_falls_back_to_aws_default_region_then_us_east_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert s3_client().meta.region_name == "us-east-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-northeast-2")
    assert s3_client().meta.region_name == "ap-northeast-2"


def test_s3_client_without_boto3_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(InputError) as raised:
        s3_client()
    assert (raised.value.message, raised.value.hint) == (
        "boto3 is not installed",
        "pip install 'kvtool[aws]'",
    )


# --- SnapshotHost -------------------------------------------------------------------------------


def test_snapshot_host_answers_from_the_captured_files_not_this_machine() -> None:
    host = SnapshotHost(EXAMPLE)
    mounts = (EXAMPLE / "proc_mounts.txt").read_text()
    assert host.read("proc_mounts", "/proc/self/mounts") == mounts
    assert host.run("lfs_df", ["lfs", "df", "/anything"]) == CommandResult(
        0, (EXAMPLE / "lfs_df.txt").read_text(), ""
    )
    assert host.imds("imds_az_id", "placement/availability-zone-id") == "apne2-az1"
    assert host.path_info("path", "/elsewhere")["realpath"] == KV_PATH  # as captured
    assert host.odirect_probe("odirect", "/elsewhere", 1)["bytes"] == 64 * MIB  # as captured
    assert host.cufile_read_probe("cufile_read", "/elsewhere", 1)["ran"] is True
    fsx = host.aws("aws_fsx", "fsx", "describe_file_systems", {})
    assert fsx["FileSystems"][0]["LustreConfiguration"]["MountName"] == "krvlrbev"


def test_snapshot_host_reads_a_failed_command_from_its_error_file(tmp_path: Path) -> None:
    (tmp_path / "lfs_df.error.txt").write_text("rc=19\nlfs df: No such device\n")
    (tmp_path / "gdscheck.error.txt").write_text("rc=oops\nsegfault\n")
    host = SnapshotHost(tmp_path)
    assert host.run("lfs_df", []) == CommandResult(19, "", "lfs df: No such device\n")
    assert host.run("gdscheck", []) == CommandResult(1, "", "segfault\n")  # rc unreadable: 1


def test_snapshot_host_prefers_the_output_over_an_old_error_file(tmp_path: Path) -> None:
    (tmp_path / "fi_info.txt").write_text("provider: efa\n")
    (tmp_path / "fi_info.error.txt").write_text("rc=127\nfi_info: command not found\n")
    assert SnapshotHost(tmp_path).run("fi_info", []) == CommandResult(0, "provider: efa\n", "")


def test_snapshot_host_says_what_was_not_captured(tmp_path: Path) -> None:
    host = SnapshotHost(tmp_path)
    assert host.read("proc_mounts", "/proc/self/mounts") is None
    assert host.run("lfs_df", ["lfs", "df"]) == CommandResult(
        NOT_INSTALLED, "", "lfs_df was not captured in the snapshot"
    )
    assert host.path_info("path", "/x") == {"path": "/x", "captured": False}
    assert host.odirect_probe("odirect", "/x", 64) == {"captured": False}
    assert host.cufile_read_probe("cufile_read", "/x", 64) == {
        "ran": False,
        "reason": "cufile_read was not captured",
    }
    assert host.imds("imds_az_id", "placement/availability-zone-id") is None
    assert host.aws("aws_fsx", "fsx", "describe_file_systems", {}) == {
        "error": "aws_fsx was not captured in the snapshot"
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not JSON"),
        (b"\xff\xfe garbage", "is not JSON"),
        (b"[" * 100_000, "is not JSON"),  # RecursionError in json.loads
        (b"[1, 2]", "the file must be a JSON object, got"),
        (b'"text"', "the file must be a JSON object, got 'text'"),
    ],
)
def test_a_garbled_or_non_object_json_file_is_refused_by_name(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """A snapshot comes from a customer: a damaged file is named, not read as 'not captured'
    (which the checks would report as SKIP, as if nothing were wrong)."""
    (tmp_path / "path.json").write_bytes(content)
    host = SnapshotHost(tmp_path)
    with pytest.raises(InputError, match=f"path.json.*{re.escape(message)}"):
        host.path_info("path", "/x")


def test_a_snapshot_file_that_is_a_fifo_or_a_device_is_refused_not_read(tmp_path: Path) -> None:
    """A FIFO hung the doctor; a link to /dev/zero read until memory ran out."""
    os.mkfifo(tmp_path / "proc_mounts.txt")
    (tmp_path / "proc_meminfo.txt").symlink_to("/dev/zero")
    host = SnapshotHost(tmp_path)
    with pytest.raises(InputError, match=r"proc_mounts\.txt is a FIFO"):
        host.read("proc_mounts", "/proc/self/mounts")
    with pytest.raises(InputError, match=r"proc_meminfo\.txt is a character device"):
        host.read("proc_meminfo", "/proc/meminfo")


# --- CapturingHost ------------------------------------------------------------------------------


def test_capturing_host_writes_command_output_and_failures_that_replay_alike(
    tmp_path: Path,
) -> None:
    host = CapturingHost(LocalHost(), tmp_path)
    ok = host.run("lfs_df", python("print('UUID 1K-blocks Used')"))
    failed = host.run("lctl_tunables", python("import sys; sys.exit('lctl: no such param')"))
    missing = host.run("fi_info", ["kvtool-no-such-tool", "-p", "efa"])
    assert (tmp_path / "lfs_df.txt").read_text() == "UUID 1K-blocks Used\n"
    assert (tmp_path / "lctl_tunables.error.txt").read_text() == "rc=1\nlctl: no such param\n"
    assert (tmp_path / "fi_info.error.txt").read_text() == (
        "rc=127\nkvtool-no-such-tool: command not found"
    )
    replay = SnapshotHost(tmp_path)
    assert replay.run("lfs_df", []) == ok
    assert replay.run("lctl_tunables", []) == failed
    assert replay.run("fi_info", []) == missing


def test_capturing_host_writes_nothing_for_what_was_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = tmp_path / "capture"
    out.mkdir()
    host = CapturingHost(LocalHost(), out)
    assert host.read("modprobe_conf", str(tmp_path / "no-modprobe.conf")) is None
    assert host.imds("imds_az_id", "placement/availability-zone-id") is None
    assert list(out.iterdir()) == []


def test_capturing_host_writes_a_real_folder_and_probe_as_json(tmp_path: Path) -> None:
    kv, out = tmp_path / "kv", tmp_path / "capture"
    kv.mkdir()
    out.mkdir()
    (kv / "chunk").write_text("x")
    host = CapturingHost(LocalHost(), out)
    info = host.path_info("path", str(kv))
    probe = host.odirect_probe("odirect", str(kv), 1)
    assert json.loads((out / "path.json").read_text()) == info
    assert info["entries"] == 1
    replay = SnapshotHost(out)
    assert replay.path_info("path", "/x") == info
    assert replay.odirect_probe("odirect", "/x", 1) == probe
    assert [p.name for p in kv.iterdir()] == ["chunk"]  # the probe's file is gone


def test_capturing_a_snapshot_reproduces_it_file_for_file(tmp_path: Path) -> None:
    facts = gather(CapturingHost(SnapshotHost(EXAMPLE), tmp_path), KV_PATH)
    assert gather(SnapshotHost(tmp_path), KV_PATH) == facts
    written = sorted(p.name for p in tmp_path.iterdir())
    # everything gather reads; hostname.txt and folder_contents.json are run_doctor's,
    # README.md is documentation
    theirs = ("README.md", "hostname.txt", "folder_contents.json")
    assert written == sorted(p.name for p in EXAMPLE.iterdir() if p.name not in theirs)
    for name in written:
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text(), name


def test_a_command_killed_by_a_signal_replays_with_its_code(tmp_path: Path) -> None:
    """CapturingHost records rc=-9 for a SIGKILLed child; SnapshotHost used to replay it as 1."""
    kill = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    live = CapturingHost(LocalHost(), tmp_path).run("killed", kill)
    assert live.returncode == -9
    assert SnapshotHost(tmp_path).run("killed", []).returncode == -9


def test_an_empty_imds_answer_in_a_snapshot_is_no_answer(tmp_path: Path) -> None:
    (tmp_path / "imds_az_id.txt").write_text("\n")
    assert SnapshotHost(tmp_path).imds("imds_az_id", "placement/availability-zone-id") is None


def _closing_listener() -> tuple[int, list[int], threading.Event]:
    """A TCP port on 127.0.0.1 that closes every connection at once, counting them."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted = [0]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted[0] += 1
            conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], accepted, stop


@pytest.mark.server
def test_aws_calls_make_one_attempt_and_s3_one_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/doctor.md: one attempt for the doctor's AWS calls; s3_client: one retry. botocore's
    ``max_attempts`` counts retries, so it used to give 2 and 3 attempts."""
    port, accepted, stop = _closing_listener()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    try:
        answer = LocalHost(aws_timeout_s=0.5).aws(
            "aws_fsx", "fsx", "describe_file_systems", {"_region": "us-east-1"}
        )
        assert "error" in answer
        assert accepted[0] == 1
        accepted[0] = 0
        with pytest.raises(Exception):  # noqa: B017,PT011 botocore's connection error
            s3_client(connect_timeout_s=0.5).head_bucket(Bucket="b")
        assert accepted[0] == 2
    finally:
        stop.set()


def test_on_cpus_runs_the_block_on_those_cpus_and_gives_the_affinity_back() -> None:
    allowed = set(os.sched_getaffinity(0))
    one = max(allowed)
    with on_cpus(frozenset({one, 10_000})) as moved:  # a CPU this process may not use is left out
        assert moved is True
        assert os.sched_getaffinity(0) == {one}
    assert os.sched_getaffinity(0) == allowed
    with on_cpus(frozenset({10_000})) as moved:  # none of them allowed: nothing changes
        assert moved is False
        assert os.sched_getaffinity(0) == allowed
    with pytest.raises(KeyError), on_cpus(frozenset({one})):
        raise KeyError("the block fails")
    assert os.sched_getaffinity(0) == allowed


def test_environment_reads_this_process_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert environment("CUDA_VISIBLE_DEVICES") == ""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert environment("CUDA_VISIBLE_DEVICES") is None


def test_stream_passes_stdout_as_it_comes_within_one_deadline() -> None:
    import sys
    import time

    from kvtool.probe.host import LocalHost

    seen: list[str] = []
    code = (
        "import sys, time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.1)\n"
        "print('e', file=sys.stderr)"
    )
    done = LocalHost().stream("t", [sys.executable, "-c", code], seen.append, timeout_s=10)
    assert (done.returncode, done.stdout, done.stderr) == (0, "0\n1\n2\n", "e\n")
    assert seen[0].startswith("0")  # the first line, as soon as it came
    assert len(seen) >= 3
    assert seen[-1] == "0\n1\n2\n"
    start = time.monotonic()
    hung = LocalHost().stream("t", [sys.executable, "-c", "import time; time.sleep(30)"],
                              seen.append, timeout_s=0.5)  # fmt: skip
    assert hung.returncode == 124
    assert time.monotonic() - start < 12  # SIGINT, then at most 10 s before a kill
    missing = LocalHost().stream("t", ["no-such-command-kvtool"], seen.append)
    assert missing.returncode == 127


def test_file_ops_probe_opens_the_folder_s_own_files_and_never_a_link(tmp_path: Path) -> None:
    from kvtool.probe.host import file_ops_probe

    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"x" * 4096)
    (tmp_path / "kvtool-seq_read.fio").write_text("[global]\n")  # a job file: left out
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_bytes(b"secret")
    (tmp_path / "link").symlink_to(outside)  # a link: never opened
    (tmp_path / "sub").mkdir()
    done = file_ops_probe(str(tmp_path), count=50)
    assert done["ok"], done
    assert (done["files"], done["count"]) == (2, 50)
    assert 0 < done["p50_us"] <= done["p99_us"] <= done["p999_us"]
    assert done["ops_per_s"] > 0
    empty = tmp_path / "sub"
    assert file_ops_probe(str(empty)) == {"ok": False, "error": "no files to open"}
    assert file_ops_probe(str(tmp_path / "link"))["ok"] is False  # the folder itself: no link
    outside.unlink()


# --- LocalHost.spawn --------------------------------------------------------------------------


def test_a_spawned_command_runs_beside_the_caller_and_finishes_with_its_output() -> None:
    code = "import sys, time; time.sleep(0.3); print('done'); print('e', file=sys.stderr)"
    start = time.monotonic()
    spawned = LocalHost().spawn("k", python(code))
    assert time.monotonic() - start < 0.25  # returned at once: the child still sleeps
    assert spawned.finish(timeout_s=30) == CommandResult(0, "done\n", "e\n")


def test_a_spawned_command_past_its_deadline_is_stopped_and_124(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    spawned = LocalHost().spawn("k", [*python(code), str(pid_file)])
    assert spawned.finish(timeout_s=0.5) == CommandResult(124, "", f"{PY}: timed out after 0.5 s")
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(int(pid_file.read_text()), 0)


def test_stop_ends_a_spawned_command_and_a_missing_program_is_127(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    spawned = LocalHost().spawn("k", [*python(code), str(pid_file)])
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    spawned.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    missing = LocalHost().spawn("k", ["kvtool-no-such-tool"])
    missing.stop()  # nothing to stop
    assert missing.finish(timeout_s=1) == CommandResult(
        NOT_INSTALLED, "", "kvtool-no-such-tool: command not found"
    )

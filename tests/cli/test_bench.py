"""``kvtool bench`` end to end: the real fio binary on temp folders (and two ``fio --server``s
on 127.0.0.1 for --hosts), S3 through moto's server on 127.0.0.1, torch on CPU for T1/T2,
real subprocesses for signals. Every run is short (1 s per fio op, MiBs of data)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import free_port
from tests.conftest import CliResult

FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is not installed (apt-get install -y fio)")
QUICK = ("--duration", "1", "--size", "8MiB", "--threads", "2", "--transfer-size", "1MiB")
Kvtool = Callable[..., CliResult]

MiB = 2**20


def _scratch_left(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith("kvtool-bench-")]


@needs_fio
@pytest.mark.fio
def test_t3_on_a_folder_with_real_fio(kvtool: Kvtool, tmp_path: Path) -> None:
    keep = tmp_path / "someone-elses.bin"
    keep.write_bytes(b"x" * 4096)
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK, "--json")
    assert done.exit_code == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    ran = [r for r in results if r["status"] == "ok" and not r["variant"]]
    assert [r["op"] for r in ran] == ["seq_write", "seq_read", "rand_read"]
    small = [(r["op"], r["block_bytes"]) for r in results if r["variant"] == "qd1"]
    assert small == [("rand_read", 4096), ("rand_read", 65536)]  # in every run
    assert [r["op"] for r in results if r["variant"] == "metadata"] == ["open_stat_close"]
    for r in ran:
        assert r["tier"] == "t3"
        assert r["tool"].startswith("fio-")
        assert r["block_bytes"] == 2**20
        assert r["threads"] == 2
        assert r["direct"] is True
        assert r["bytes_per_s"] > 0
        assert r["iops"] > 0
        assert 0 < r["latency_us"]["p50"] <= r["latency_us"]["p99"] <= r["latency_us"]["p999"]
        assert r["filesystem"]  # from /proc/mounts
    gds = [r for r in results if r.get("variant") == "gds"]
    assert gds
    assert gds[0]["status"] == "skip"  # no GPU here, and the reason says why
    assert gds[0]["reason"]
    assert _scratch_left(tmp_path) == []
    assert keep.read_bytes() == b"x" * 4096
    assert sorted(p.name for p in tmp_path.iterdir()) == ["someone-elses.bin"]


@needs_fio
@pytest.mark.fio
def test_t3_text_report_says_how_and_what_bounds_it(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK, "--hardware", "p5en")
    assert done.exit_code == 0, done.stderr
    assert "T3 seq_read" in done.stdout
    assert "fio libaio, O_DIRECT, 2 jobs x iodepth 1" in done.stdout
    # a temp folder is not Lustre: the FSx spec is not compared with it
    assert "not Lustre: no FSx spec applies" in done.stdout


@needs_fio
@pytest.mark.fio
def test_a_t3_folder_off_lustre_is_said_first_without_hardware(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    """An unmounted /fsx gave believable T3 figures silently (issue 54); a temp folder is on
    no Lustre here, so bench says so, first among its notes, in text and in --json."""
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK)
    assert done.exit_code == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("note: ")]
    assert notes[0].startswith(f"note: {tmp_path} is on ")
    assert "not FSx for Lustre" in notes[0]
    data = json.loads(kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK,
                             "--json").stdout)  # fmt: skip
    assert "not FSx for Lustre" in data["notes"][0]


@needs_fio
@pytest.mark.fio
def test_model_sizes_the_transfer_as_one_kv_chunk(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool(
        "bench", "--tier", "t3", "--t3-dir", str(tmp_path), "--duration", "1", "--size", "64MiB",
        "--threads", "2", "--model", "llama-3.1-70b", "--tp", "8", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    # 80 layers x 1 KV head per rank x 128 x 2 (K and V) x 2 bytes x 256 tokens = 10 MiB
    assert {r["block_bytes"] for r in data["results"]
            if r["status"] == "ok" and not r["variant"]} == {10 * 2**20}  # fmt: skip
    assert any("256-token chunk of llama-3.1-70b" in n for n in data["notes"])


@needs_fio
@pytest.mark.fio
def test_hosts_drive_two_fio_servers_for_the_aggregate(
    kvtool: Kvtool, tmp_path: Path, fio_servers: list[int]
) -> None:
    folder = tmp_path / "t3"
    folder.mkdir()
    hosts = ",".join(f"127.0.0.1:{port}" for port in fio_servers)
    done = kvtool(
        "bench", "--tier", "t3", "--t3-dir", str(folder), *QUICK, "--hosts", hosts, "--json"
    )
    assert done.exit_code == 0, done.stderr
    ran = [r for r in json.loads(done.stdout)["results"] if r["status"] == "ok"]
    assert [r["op"] for r in ran] == ["seq_write", "seq_read", "rand_read"]
    for r in ran:
        assert r["clients"] == 2
        assert r["bytes_per_s"] > 0
        assert r["latency_us"]["p99"] > 0  # from the hosts' entries: "All clients" has none
        assert "2 fio client(s)" in r["note"]
    assert _scratch_left(folder) == []


@needs_fio
@pytest.mark.fio
def test_hosts_that_do_not_answer_are_one_clear_error(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK,
                  "--hosts", f"127.0.0.1:{free_port()}")  # fmt: skip
    assert done.exit_code == 2
    assert "fio could not reach its servers" in done.stderr
    assert "fio --server" in done.stderr
    assert _scratch_left(tmp_path) == []


def test_a_missing_folder(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path / "nope"), *QUICK)
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines() == [
        f"kvtool: error: {tmp_path / 'nope'} does not exist (pass the T3 folder with --t3-dir)"
    ]


@needs_fio
def test_a_folder_too_small_for_the_test_size(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), "--size", "100PiB")
    assert done.exit_code == 2
    assert "GiB free; the test needs" in done.stderr
    assert "lower --size or --threads" in done.stderr
    assert _scratch_left(tmp_path) == []


def test_fio_missing_names_the_install_command(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK)
    assert done.exit_code == 2
    assert "fio is not installed (apt-get update && apt-get install -y fio" in done.stderr
    assert _scratch_left(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_folder(kvtool: Kvtool, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(folder), *QUICK)
    assert done.exit_code == 2
    assert "is not writable" in done.stderr


@needs_fio
@pytest.mark.fio
def test_no_odirect_hints_no_direct_and_no_direct_works(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's answer on ramfs (recorded: open(O_DIRECT) gives EINVAL) stands in for a
    file system without O_DIRECT, which this machine does not have."""
    import kvtool.bench.t3 as t3

    def ramfs(directory: str, size_mib: int) -> dict[str, object]:
        return {"ok": False, "errno": 22, "error": "[Errno 22] Invalid argument"}

    monkeypatch.setattr(t3, "odirect_probe", ramfs)
    done = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK)
    assert done.exit_code == 2
    assert "does not take O_DIRECT" in done.stderr
    assert "--no-direct" in done.stderr
    assert _scratch_left(tmp_path) == []
    buffered = kvtool("bench", "--tier", "t3", "--t3-dir", str(tmp_path), *QUICK, "--no-direct",
                      "--json")  # fmt: skip
    assert buffered.exit_code == 0, buffered.stderr
    data = json.loads(buffered.stdout)
    assert all(r["direct"] is False for r in data["results"]
               if r["status"] == "ok" and r["variant"] != "metadata")  # fmt: skip
    assert any("page cache" in n for n in data["notes"])


@pytest.mark.no_gpu
def test_t1_skips_without_cuda_and_says_why(kvtool: Kvtool) -> None:
    done = kvtool("bench", "--tier", "t1", "--json")
    assert done.exit_code == 0
    (t1,) = json.loads(done.stdout)["results"]
    assert t1["status"] == "skip"
    assert t1["bytes_per_s"] is None
    assert "CUDA" in t1["reason"] or "torch" in t1["reason"]
    text = kvtool("bench", "--tier", "t1")
    assert "T1 d2d: SKIP" in text.stdout


@pytest.mark.torch
@pytest.mark.no_gpu
def test_t2_without_a_gpu_is_a_host_only_copy_beside_numpy(kvtool: Kvtool) -> None:
    done = kvtool("bench", "--tier", "t2", "--json")
    assert done.exit_code == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["variant"] for r in results] == ["host-only", "reference"]
    host, reference = results
    assert host["tool"].startswith("torch")
    assert reference["tool"].startswith("numpy")
    assert "host-only" in host["note"]
    assert "not the host-to-GPU link" in host["note"]
    assert host["bytes_per_s"] > 0
    assert reference["bytes_per_s"] > 0


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with dummy credentials and a bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="kv-bench")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _keys(bucket: str = "kv-bench") -> list[str]:
    import boto3

    listing = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in listing.get("Contents", [])]


@pytest.mark.torch
@pytest.mark.gpu
def test_t1_and_t2_on_a_gpu_measure_every_device(kvtool: Kvtool) -> None:
    """On a CUDA machine: d2d on each GPU, pinned and pageable h2d/d2h, no host-only stand-in."""
    import torch

    done = kvtool("bench", "--tier", "t1,t2", "--json")
    assert done.exit_code == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    t1 = [r for r in results if r["tier"] == "t1"]
    assert t1
    assert all(r["status"] == "ok" and r["bytes_per_s"] > 0 for r in t1)
    t2 = [r for r in results if r["tier"] == "t2" and r["status"] == "ok"]
    assert {r["variant"] for r in t2} >= {"pinned"}
    assert "host-only" not in {r["variant"] for r in t2}
    assert torch.cuda.device_count() >= 1
    # every row of one GPU names it; the all-at-once sum names how many
    assert all(r["gpu"] is not None or r["gpus"] > 1 for r in t1 + t2)
    assert {r["op"] for r in t2} >= {"h2d", "d2h", "bidir"}
    chunk = kvtool("bench", "--tier", "t2", "--model", "llama-3.1-70b", "--tp", "8", "--json")
    sizes = {r["block_bytes"] for r in json.loads(chunk.stdout)["results"]}
    assert sizes == {10 * MiB, 256 * MiB}  # one KV chunk (256 tokens at tp 8) and a large copy


def test_t1_and_t2_on_fake_gpus_name_each_gpu_and_a_failing_one_exits_1(
    kvtool: Kvtool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA path through the fake torch: the GPUs listed with their links, a GPU that
    raised as a FAIL line, exit status 1, and the other GPU still measured."""
    import types

    from kvtool.bench import gpu
    from tests.unit.bench.fake_cuda import FakeTorch

    fake = FakeTorch(["FakeGPU-A", "FakeGPU-B"], fail={1: RuntimeError("CUDA error: ECC")})
    fake.cuda.free[0] = 80 * 2**30
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    monkeypatch.setattr(
        gpu, "time", types.SimpleNamespace(perf_counter=iter(range(10**6)).__next__)
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    done = kvtool("bench", "--tier", "t1,t2", "--hardware", "p5en")
    assert done.exit_code == 1, done.stderr
    out = done.stdout
    assert "T1 d2d ce GPU 0" in out
    assert "T1 d2d sm GPU 0" in out
    assert "T2 h2d pinned GPU 0" in out
    assert "T1 d2d: FAIL, GPU 1: RuntimeError: CUDA error: ECC" in out
    assert "GPUs:\n  GPU 0 FakeGPU-A (PCI 0000:18:00.0) GPU-00000000-aaaa-bbbb-cccc-dddd" in out
    assert "  T2 h2d pinned, d2h pinned: torch 9.9.9+fake; pinned host memory" in out
    rows = json.loads(kvtool("bench", "--tier", "t1", "--json").stdout)["results"]
    assert [(r["status"], r["variant"], r["gpu"] and r["gpu"]["device"]) for r in rows] == [
        ("ok", variant, device) for device in (0, 1) for _ in range(2) for variant in ("ce", "sm")
    ]


def test_t4_puts_and_gets_through_boto3_and_deletes_its_objects(
    kvtool: Kvtool, s3_endpoint: str
) -> None:
    done = kvtool("bench", "--tier", "t4", "--t4-url", "s3://kv-bench/kv", "--transfer-size",
                  "256KiB", "--size", "4MiB", "--threads", "4", "--json")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["op"] for r in results] == ["put", "get"]
    for r in results:
        assert r["tier"] == "t4"
        assert r["block_bytes"] == 256 * 2**10
        assert r["threads"] == 4
        assert r["bytes_per_s"] > 0
        assert r["latency_us"]["p99"] > 0
        assert r["tool"].startswith("boto3")
    assert _keys() == []


def test_t4_missing_bucket_is_one_line_and_leaves_nothing(kvtool: Kvtool, s3_endpoint: str) -> None:
    done = kvtool("bench", "--tier", "t4", "--t4-url", "s3://no-such-bucket/kv",
                  "--transfer-size", "64KiB", "--size", "1MiB")  # fmt: skip
    assert done.exit_code == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "NoSuchBucket" in done.stderr


def test_t4_unreachable_endpoint(kvtool: Kvtool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    done = kvtool("bench", "--tier", "t4", "--t4-url", "s3://kv-bench/kv", "--transfer-size",
                  "64KiB", "--size", "1MiB")  # fmt: skip
    assert done.exit_code == 2
    assert "EndpointConnectionError" in done.stderr
    assert "Traceback" not in done.stderr


def test_t4_missing_credentials(
    kvtool: Kvtool, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    done = kvtool("bench", "--tier", "t4", "--t4-url", "s3://kv-bench/kv", "--transfer-size",
                  "64KiB", "--size", "1MiB")  # fmt: skip
    assert done.exit_code == 2
    assert "NoCredentialsError" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tier", "t9"), "unknown --tier"),
        (("--tier", "t3"), "--tier t3 needs the folder"),
        (("--tier", "t4"), "--tier t4 needs an S3 prefix"),
        (("--tier", "t4", "--t4-url", "http://x"), "is not s3://bucket/prefix"),
        (("--tier", "t1", "--duration", "0"), "--duration '0' is not 1 to 3600 seconds"),
        (("--tier", "t1", "--transfer-size", "1MB"), "--transfer-size '1MB' is ambiguous"),
        (("--tier", "t1", "--transfer-size", "lots"), "--transfer-size 'lots' is not a size"),
        (("--tier", "t1", "--t3-storage", "s3-standard"), "--t3-storage needs --hardware"),
        (("--tier", "t1", "--model", "llama-3.1-8b", "--transfer-size", "1MiB"), "give one"),
        (("--tier", "t3", "--t3-dir", "/tmp", "--hosts", "a:b"), "--hosts entry"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    kvtool: Kvtool, args: tuple[str, ...], message: str
) -> None:
    done = kvtool("bench", *args)
    assert done.exit_code == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_options_without_effect_say_so(kvtool: Kvtool) -> None:
    done = kvtool("bench", "--tier", "t1", "--duration", "5", "--json")
    assert done.exit_code == 0
    assert "--duration has no effect without a t3 run" in json.loads(done.stdout)["notes"]


@needs_fio
@pytest.mark.fio
def test_sigterm_stops_fio_and_removes_the_scratch_folder(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kvtool", "bench", "--tier", "t3", "--t3-dir", str(tmp_path),
         "--duration", "30", "--size", "8MiB", "--threads", "2", "--transfer-size", "1MiB"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(tmp_path.glob("kvtool-bench-*/kvtool.*")):
        time.sleep(0.1)  # until fio has laid its files out
    assert any(tmp_path.glob("kvtool-bench-*/kvtool.*")), "fio never started"
    scratch = next(tmp_path.glob("kvtool-bench-*"))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 143  # 128 + SIGTERM, as shells report it
    assert "interrupted (SIGTERM)" in stderr
    assert "Traceback" not in stderr
    assert _scratch_left(tmp_path) == []
    running = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True)
    assert running.stdout.strip() == "", "fio still running after kvtool stopped"

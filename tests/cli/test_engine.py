"""``kvtool engine smoke`` end to end: real chunk files, a real second process, S3 through
moto's server on 127.0.0.1. Small chunks (16 tokens of Llama-3.1-8B: 2 MiB) keep it quick."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.unit.engine.smoke_helpers import STEPS  # the smoke's steps, in order

Kvtool = Callable[..., CliResult]
SMALL = ("--chunk-tokens", "16")


def expected_t1() -> str:
    """What T1 is here: GPU tensors on a CUDA machine, CPU tensors standing in for HBM with
    torch and no GPU, host bytes without torch; the report must say which."""
    from tests.conftest import HAS_TORCH, has_cuda

    if not HAS_TORCH:
        return "host bytes (torch is not installed)"
    if has_cuda():
        return "torch tensors on cuda:0; T1<->T2 by DMA on a side stream"
    import torch

    from kvtool.bench.gpu import cuda_reason
    from kvtool.probe.host import LocalHost

    # the command names the cause as kvtool bench does (a CPU build of torch, no driver...)
    return f"torch CPU tensors standing in for HBM ({cuda_reason(torch, LocalHost())})"


@pytest.mark.parametrize("posture", ["lazy", "eager"])
@pytest.mark.parametrize("policy", ["lru", "s3fifo"])
def test_smoke_passes_every_step_and_cleans_up(
    kvtool: Kvtool, tmp_path: Path, posture: str, policy: str
) -> None:
    done = kvtool("engine", "smoke", *SMALL, "--t3-dir", str(tmp_path), "--posture", posture,
                  "--policy", policy, "--json")  # fmt: skip
    data = json.loads(done.stdout)
    assert done.exit_code == 0, [s for s in data["steps"] if s["status"] != "PASS"]
    assert [s["name"] for s in data["steps"]] == STEPS
    assert data["passed"] is True
    for step in data["steps"]:
        assert set(step) >= {"name", "status", "bytes", "seconds", "tiers", "detail"}
    counters = data["counters"]
    assert counters["corrupt"] == 1
    assert counters["expired"] == 1
    assert counters["evictions"] > 0
    assert counters["demotions"] > 0
    assert counters["promotions"] > 0
    assert counters["hits_T3"] > 0
    assert counters["hits_T4"] > 0
    assert counters["bytes_written_T3"] > 0
    assert data["mediums"]["T1"] == expected_t1()
    assert list(tmp_path.iterdir()) == []  # its folder removed, nothing else touched


def test_text_report_names_each_step_and_the_mediums(kvtool: Kvtool) -> None:
    done = kvtool("engine", "smoke", *SMALL)
    assert done.exit_code == 0, done.stdout
    for name in STEPS:
        assert name in done.stdout
    assert f"summary: {len(STEPS)} of {len(STEPS)} steps passed" in done.stdout
    assert "T3: files under" in done.stdout


def test_two_phases_on_two_nodes_share_t3(kvtool: Kvtool, tmp_path: Path) -> None:
    write = kvtool(
        "engine", "smoke", *SMALL, "--t3-dir", str(tmp_path), "--phase", "write", "--json"
    )
    assert write.exit_code == 0, write.stdout
    assert (tmp_path / "kvtool-smoke" / "t3" / "manifest.json").is_file()
    read = kvtool("engine", "smoke", "--t3-dir", str(tmp_path), "--phase", "read", "--json")
    assert read.exit_code == 0, read.stdout
    (step,) = json.loads(read.stdout)["steps"]
    assert step["status"] == "PASS"
    assert "bytes equal" in step["detail"]
    assert list(tmp_path.iterdir()) == []  # the read phase removes the folder


def test_a_failed_step_exits_1(kvtool: Kvtool, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvtool.engine.smoke as smoke

    def broken(self: smoke.Scenario) -> tuple[bool, str]:
        return False, "made to fail"

    monkeypatch.setattr(smoke.Scenario, "ttl", broken)
    done = kvtool("engine", "smoke", *SMALL, "--json")
    assert done.exit_code == 1
    data = json.loads(done.stdout)
    assert data["passed"] is False
    assert data["steps"][-1] == {**data["steps"][-1], "status": "FAIL", "detail": "made to fail"}


def test_a_t3_that_cannot_take_the_smoke_exits_1_not_2(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T3 full (statvfs reports 1 MiB free) was 'bad usage', exit 2, and no report: it is
    the tier's finding (issue 53)."""
    from kvtool.probe.host import LocalHost

    real = LocalHost.path_info

    def full(self: LocalHost, key: str, path: str) -> dict[str, object]:
        return (
            {**real(self, key, path), "free_bytes": 2**20}
            if key == "smoke_disk"
            else real(self, key, path)
        )

    monkeypatch.setattr(LocalHost, "path_info", full)
    for json_flag in ((), ("--json",)):
        done = kvtool("engine", "smoke", *SMALL, "--t3-dir", str(tmp_path), *json_flag)
        assert done.exit_code == 1, done.stderr
        assert "T3 takes the smoke's writes" in done.stdout
        assert "only 1.00 MiB is free there" in done.stdout.replace("\n  ", " ")
    assert json.loads(done.stdout)["steps"][0]["status"] == "FAIL"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="kv-smoke")
    try:
        yield "kv-smoke"
    finally:
        server.stop()


def test_smoke_with_t4_on_s3_leaves_no_object(kvtool: Kvtool, bucket: str) -> None:
    import boto3

    done = kvtool("engine", "smoke", *SMALL, "--t4-url", f"s3://{bucket}/kvtool", "--json")
    data = json.loads(done.stdout)
    assert done.exit_code == 0, [s for s in data["steps"] if s["status"] != "PASS"]
    assert data["mediums"]["T4"].startswith("S3 objects under s3://kv-smoke/kvtool/")
    assert data["counters"]["hits_T4"] > 0
    listing = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=bucket)
    assert listing.get("KeyCount") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--posture", "sometimes"), "unknown --posture"),
        (("--policy", "clock"), "unknown --policy"),
        (("--phase", "both"), "unknown --phase"),
        (("--phase", "read"), "--phase read needs the shared folder"),
        (("--t4-url", "ftp://x"), "is not s3://bucket/prefix or file:///path"),
        (("--chunks", "1"), "--chunks must be at least 2"),
        (("--model", "no-such-model"), "no-such-model"),
        (("--io-threads", "100000"), "--io-threads 100,000 is out of range"),
        (("--sessions", "100000", "--chunks", "1000000"), "a smoke test takes at most"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    kvtool: Kvtool, args: tuple[str, ...], message: str
) -> None:
    done = kvtool("engine", "smoke", *SMALL, *args)
    assert done.exit_code == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_read_without_a_written_manifest(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("engine", "smoke", "--t3-dir", str(tmp_path), "--phase", "read")
    assert done.exit_code == 2
    assert "run --phase write with the same --t3-dir first" in done.stderr
    assert os.listdir(tmp_path) == []


def test_t4_as_a_folder_is_used_and_left_clean(kvtool: Kvtool, tmp_path: Path) -> None:
    t4 = tmp_path / "t4"
    t4.mkdir()
    keep = t4 / "someone-elses.txt"
    keep.write_text("x")
    done = kvtool("engine", "smoke", *SMALL, "--t4-url", f"file://{t4}", "--json")
    data = json.loads(done.stdout)
    assert done.exit_code == 0, [s for s in data["steps"] if s["status"] != "PASS"]
    assert data["mediums"]["T4"].startswith(f"files under {t4}/kvtool-smoke-")
    assert data["counters"]["hits_T4"] > 0
    assert sorted(p.name for p in t4.iterdir()) == ["someone-elses.txt"]


def test_a_scenario_bigger_than_memory_is_refused_up_front(kvtool: Kvtool) -> None:
    """``--sessions 100000`` ran for a minute, then died of MemoryError."""
    start = time.monotonic()
    done = kvtool("engine", "smoke", "--sessions", "100000")
    assert done.exit_code == 2
    assert "of host memory" in done.stderr
    assert "give fewer --sessions" in done.stderr
    assert time.monotonic() - start < 10


def test_counters_and_faults_are_small_tables_with_words(kvtool: Kvtool) -> None:
    done = kvtool("engine", "smoke", *SMALL)
    assert done.exit_code == 0, done.stdout
    lines = done.stdout.splitlines()
    assert not any(line.startswith("counters:") for line in lines)  # no 700-character line
    assert max(len(line) for line in lines if not line.startswith(("T1:", "T2:", "T3:", "T4:"))
               and "|" not in line) < 300  # fmt: skip
    assert "corrupt chunks refused and quarantined" in done.stdout
    assert "faults met (those the scenario injects are expected" in done.stdout
    assert "corrupt chunk refused and quarantined: 1" in done.stdout
    assert "fault: corrupt: 1" not in done.stdout

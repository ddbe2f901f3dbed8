"""``kvtool gc --release``, ``--emit fsx-task``, ``--shard`` and ``--candidates lfs-find`` end to
end: refusals are one line, exit 2; a release with a fake ``lfs`` on PATH (tests/fake_lfs.py)
and the folder's mount read as Lustre; the emitted FSx request held to botocore's own model;
two real shard processes choosing together what one run does."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.probe.host import LocalHost
from tests.aws_cli import aws_request
from tests.aws_cli import validate as validate_line
from tests.conftest import CliResult
from tests.fake_lfs import ARCHIVED, DIRTY, EXISTS, RELEASED, FakeLfs
from tests.fixtures.folders import scaled
from tests.unit.folders.test_fsx_task import validate

Kvtool = Callable[..., CliResult]
CLEAN = EXISTS | ARCHIVED


def _one_line(result: CliResult, *words: str) -> None:
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kvtool: error: ")
    for word in words:
        assert word in line


def _on_lustre(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """/proc/self/mounts as a node with FSx mounted at each folder would show it."""
    real = LocalHost.read

    def read(self: LocalHost, key: str, path: str) -> str | None:
        text = real(self, key, path)
        if key != "proc_mounts":
            return text
        lines = [
            f"10.0.1.5@tcp:/abcdefgh {f.resolve()} lustre rw,flock,lazystatfs 0 0" for f in folders
        ]
        return (text or "") + "\n".join(lines) + "\n"

    monkeypatch.setattr(LocalHost, "read", read)


def _pages(root: Path, count: int, *, size: int = 8192) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    when = time.time() - 5 * 86400
    made = []
    for i in range(count):
        for rank in (0, 1):
            path = root / f"{i:064x}_m-x_{rank}_2.bin"
            path.write_bytes(os.urandom(size))
            os.utime(path, (when + i, when + i))
            made.append(path)
    return made


def test_release_needs_lustre_and_lfs(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = tmp_path / "kv"
    _pages(kv, 2)
    _one_line(kvtool("gc", str(kv), "--max-age", "1d", "--release"), "needs FSx for Lustre")
    _on_lustre(monkeypatch, kv)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    _one_line(kvtool("gc", str(kv), "--max-age", "1d", "--release"), "lfs command", "not installed")
    assert len(list(kv.iterdir())) == 4


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_release_run_end_to_end(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lfs: FakeLfs
) -> None:
    kv = tmp_path / "kv"
    files = _pages(kv, 6)
    for n, path in enumerate(files):
        fake_lfs.set(path, CLEAN if n % 4 else EXISTS | DIRTY | ARCHIVED)
    _on_lustre(monkeypatch, kv)
    log = tmp_path / "gc.jsonl"
    done = kvtool("gc", str(kv), "--max-age", "1d", "--release", "--log", str(log), "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["release"] is True
    assert data["removed_files"] == 9
    assert all(p.exists() for p in files)
    assert [bool(fake_lfs.flags(p) & RELEASED) for p in files] == [n % 4 != 0 for n in range(12)]
    assert len(data["not_exported_examples"]) == 3
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(line["action"] == "release" for line in lines) == 9
    assert lines[0]["release"] is True
    text = kvtool("gc", str(kv), "--max-age", "1d", "--release", "--dry-run")
    assert text.exit_code == 0, text.stdout + text.stderr
    assert "released (in S3)" in text.stdout  # released before: listed, in S3
    assert "kept: not exported" in text.stdout
    assert "nothing was released" in " ".join(text.stdout.split())


@pytest.mark.usefixtures("ctime_as_mtime")
def test_an_unexported_file_misses_a_size_limit_exit_1(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lfs: FakeLfs
) -> None:
    kv = tmp_path / "kv"
    files = _pages(kv, 4)
    for path in files[1:]:
        fake_lfs.set(path, CLEAN)
    _on_lustre(monkeypatch, kv)
    done = kvtool("gc", str(kv), "--max-size", "0", "--grace", "0s", "--release")
    assert done.exit_code == 1, done.stdout + done.stderr
    flat = " ".join(done.stdout.split())
    assert "the limit is missed by" in flat
    assert "EXPORT_TO_REPOSITORY" in flat
    assert files[0].exists()
    assert not fake_lfs.flags(files[0]) & RELEASED


def test_the_emitted_fsx_task_is_valid_for_botocore(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount = tmp_path / "fsx"
    kv = mount / "kv"
    _pages(kv, 1)
    _on_lustre(monkeypatch, mount)
    done = kvtool(
        "gc", str(kv), "--max-age", "36h", "--release", "--emit", "fsx-task",
        "--fsx-id", "fs-0a0a63dea8324225b",
    )  # fmt: skip
    assert done.exit_code == 0, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()
    argv = shlex.split(line)
    assert argv[:4] == ["aws", "fsx", "create-data-repository-task", "--cli-input-json"]
    request = json.loads(argv[4])
    validate(request)
    # the line as the AWS CLI reads it (--cli-input-json), held to FSx's model
    # CreateDataRepositoryTaskRequest (tests/aws_cli.py: botocore 1.43.11, awscli 1.45.11)
    assert aws_request(argv) == ("CreateDataRepositoryTask", request)
    validate_line(*aws_request(line))
    assert request["Paths"] == ["kv"]
    assert request["ReleaseConfiguration"]["DurationSinceLastAccess"] == {
        "Unit": "DAYS",
        "Value": 2,
    }
    assert "--max-age 36h is sent as 2 days" in " ".join(done.stderr.split())
    assert len(list(kv.iterdir())) == 2  # nothing done


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([], ["--emit fsx-task is the FSx side of --release"]),
        (["--release", "--json"], ["not JSON"]),
        (["--release", "--shard", "0/2"], ["cannot keep to --shard"]),
        (["--release", "--model", "m-x"], ["cannot keep to --model"]),
    ],
)
def test_what_the_fsx_task_cannot_do_is_refused(
    kvtool: Kvtool, tmp_path: Path, extra: list[str], words: list[str]
) -> None:
    kv = tmp_path / "kv"
    _pages(kv, 1)
    args = ["gc", str(kv), "--max-age", "7d", "--emit", "fsx-task", "--fsx-id", "fs-01234567"]
    _one_line(kvtool(*args, *extra), *words)


def test_shard_refusals(kvtool: Kvtool, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    _pages(kv, 1)
    _one_line(kvtool("gc", str(kv), "--max-age", "1d", "--shard", "2/2"), "K must be 0 to N-1")
    _one_line(kvtool("gc", str(kv), "--max-size", "1MiB", "--shard", "0/2"), "needs --shard-run")
    _one_line(
        kvtool("gc", str(kv), "--max-age", "1d", "--shard-run", "job-1"), "no --shard was given"
    )
    _one_line(
        kvtool("gc", str(kv), "--max-age", "1d", "--shard", "0/2", "--shard-run", "a word"),
        "is not a run name",
    )
    _one_line(
        kvtool("gc", str(kv), "--max-size", "1MiB", "--candidates", "lfs-find"),
        "serves --max-age alone",
    )


def _gc(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kvtool", "gc", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip


def test_two_shard_processes_remove_what_one_run_would(tmp_path: Path) -> None:
    """Real processes, as two nodes: each takes its own lock, they meet in DIR for the cut-off,
    and together they remove exactly the unsharded dry run's files."""
    kv = tmp_path / "kv"
    scaled.make(kv, 4000)
    total = sum(p.stat().st_size for p in kv.rglob("*") if p.is_file())
    cap = f"{total // 2 // 1024}KiB"
    # a process reads change times as they are (the files were just made): no grace, then
    dry = _gc(str(kv), "--max-size", cap, "--grace", "0s", "--dry-run", "--list", "--json")
    out, err = dry.communicate(timeout=300)
    assert dry.returncode == 0, err
    planned = {f["path"] for f in json.loads(out)["files"]}
    runs = [
        _gc(str(kv), "--max-size", cap, "--grace", "0s", "--shard", f"{k}/2", "--shard-run",
            "t1", "--json", "--list", "--log", str(tmp_path / f"gc-{k}.jsonl"))
        for k in range(2)
    ]  # fmt: skip
    removed: list[set[str]] = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        data = json.loads(out)
        removed.append({f["path"] for f in data["files"]})
    assert removed[0]
    assert removed[1]
    assert not removed[0] & removed[1]
    assert removed[0] | removed[1] == planned
    assert not any((kv / p).exists() for p in planned)
    starts = [(tmp_path / f"gc-{k}.jsonl").read_text().splitlines()[0] for k in range(2)]
    assert [json.loads(line)["shard"] for line in starts] == ["0/2", "1/2"]


@pytest.mark.usefixtures("ctime_as_mtime")
def test_candidates_from_lfs_find_choose_what_the_walk_does(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lfs: FakeLfs
) -> None:
    kv = tmp_path / "kv"
    scaled.make(kv, 3000)
    _on_lustre(monkeypatch, kv)
    runs = {}
    for source in ("walk", "lfs-find"):
        done = kvtool("gc", str(kv), "--max-age", "12d", "--dry-run", "--list", "--json",
                      "--candidates", source)  # fmt: skip
        assert done.exit_code == 0, done.stdout + done.stderr
        runs[source] = json.loads(done.stdout)
    assert runs["lfs-find"]["candidates"] == "lfs-find"
    assert runs["lfs-find"]["lfs_find_listed"] < 3000
    walked = {f["path"] for f in runs["walk"]["files"]}
    assert walked
    assert {f["path"] for f in runs["lfs-find"]["files"]} == walked
    assert [c[0] for c in fake_lfs.calls()].count("find") == 1

"""The engine's mediums with real files, processes and an S3 endpoint: atomic writes under
SIGKILL, concurrent writers and readers, a full or read-only T3, S3 going away mid-run, and
corruption caught on every read."""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvtool.engine.chunkfile import CorruptChunk, decode
from kvtool.engine.engine import Engine
from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import EngineConfig, Manager
from kvtool.engine.mediums import FolderMedium, MediumError, MemoryMedium, S3Medium

FP = model_fingerprint("m", "bf16", "tp1")
KEYS = chain_keys(list(range(4 * 64)), 4, FP)


def _payload(key: str, n: int = 64 * 1024) -> bytes:
    return (key.encode() * (n // 64 + 1))[:n]


def _all_files_whole(root: Path) -> int:
    """Every visible chunk file decodes; returns how many there are."""
    files = list((root / "chunks").glob("*/*/*.kv"))
    for path in files:
        decode(path.stem, path.read_bytes())
    return len(files)


def test_put_get_delete_and_the_fanned_out_path(tmp_path: Path) -> None:
    t3 = FolderMedium("T3", tmp_path)
    key = KEYS[0]
    t3.put(key, _payload(key))
    assert t3.path(key) == tmp_path / "chunks" / key[:2] / key[2:4] / f"{key}.kv"
    assert t3.get(key) == _payload(key)
    assert t3.contains(key)
    assert t3.direct is not None  # found out on the first write
    t3.delete(key)
    assert t3.get(key) is None
    assert not t3.contains(key)
    assert [p.name for p in t3.path(key).parent.iterdir()] == []  # no temporary left


def test_a_corrupt_file_is_never_served_and_is_quarantined(tmp_path: Path) -> None:
    t3 = FolderMedium("T3", tmp_path)
    key = KEYS[1]
    t3.put(key, _payload(key))
    path = t3.path(key)
    data = bytearray(path.read_bytes())
    data[5000] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptChunk):
        t3.get(key)
    assert not path.exists()
    assert len(list((tmp_path / "quarantine").iterdir())) == 1
    assert t3.get(key) is None  # gone: a miss from now on


def _writer(root: str, seconds: float) -> None:
    """Write big chunks in a loop until killed."""
    t3 = FolderMedium("T3", Path(root))
    deadline = time.monotonic() + seconds
    index = 0
    while time.monotonic() < deadline:
        key = KEYS[index % len(KEYS)]
        t3.put(key, _payload(key, 4 * 2**20))
        index += 1


def test_sigkill_mid_write_leaves_no_partial_chunk_visible(tmp_path: Path) -> None:
    code = (
        "import sys; from tests.integration.test_engine_mediums import _writer;"
        " _writer(sys.argv[1], 30)"
    )
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=Path.cwd())
        time.sleep(0.6)  # well into a stream of 4 MiB writes
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert _all_files_whole(tmp_path) >= 1
    leftovers = list((tmp_path / "chunks").glob("*/*/.*.tmp"))
    t3 = FolderMedium("T3", tmp_path)
    for key in KEYS:
        got = t3.get(key)
        assert got is None or got == _payload(key, 4 * 2**20)
    assert all(not p.name.endswith(".kv") for p in leftovers)


def _mixed(root: str, worker: int, rounds: int, queue: multiprocessing.Queue[str]) -> None:
    t3 = FolderMedium("T3", Path(root))
    bad = 0
    for index in range(rounds):
        key = KEYS[(index * 7 + worker) % 8]
        if (index + worker) % 2:
            t3.put(key, _payload(key, 256 * 1024))
        else:
            got = t3.get(key)
            if got is not None and got != _payload(key, 256 * 1024):
                bad += 1
    queue.put(f"{worker}:{bad}")


def test_concurrent_processes_read_intact_chunks_and_each_key_is_one_file(tmp_path: Path) -> None:
    queue: multiprocessing.Queue[str] = multiprocessing.Queue()
    workers = [
        multiprocessing.Process(target=_mixed, args=(str(tmp_path), w, 60, queue)) for w in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    results = sorted(queue.get(timeout=5) for _ in workers)
    assert results == [f"{w}:0" for w in range(4)]
    written = {KEYS[(i * 7 + w) % 8] for w in range(4) for i in range(60) if (i + w) % 2}
    files = list((tmp_path / "chunks").glob("*/*/*.kv"))
    assert sorted(p.stem for p in files) == sorted(written)  # one file per key
    assert _all_files_whole(tmp_path) == len(written)
    assert not list((tmp_path / "chunks").glob("*/*/.*.tmp"))


class FullFolder(FolderMedium):
    """T3 at the medium boundary when the file system is full: every write fails ENOSPC."""

    def _write(self, tmp: Path, buffer: object, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _engine(t3: FolderMedium | S3Medium, *, t4: FolderMedium | S3Medium | None = None) -> Engine:
    config = EngineConfig(
        capacity_bytes={"T1": 4 * 65536, "T2": 8 * 65536, "T3": None, "T4": None if t4 else 0},
        posture="eager",
        t3_idle_s=10.0,
    )
    mediums = {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"), "T3": t3}
    if t4 is not None:
        mediums["T4"] = t4
    clock = [0.0]
    return Engine(Manager(config, lambda: clock[0]), mediums, chunk_bytes=65536, chunk_tokens=4)


def test_a_full_t3_is_a_fault_and_the_engine_keeps_serving_from_t1_and_t2(tmp_path: Path) -> None:
    engine = _engine(FullFolder("T3", tmp_path))
    keys = KEYS[:6]
    for key in keys:
        engine.insert(key, _payload(key), 4)
    assert engine.faults
    assert all("No space left on device" in f for f in engine.faults)
    assert engine.manager.counters["faults"] == len(keys)
    hit = engine.lookup(keys)
    assert hit.keys == keys
    assert hit.data == [_payload(k) for k in keys]
    assert engine.manager.used["T3"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_really_full_tmpfs(tmp_path: Path) -> None:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip("mount is not permitted here")
    try:
        engine = _engine(FolderMedium("T3", mount))
        keys = KEYS[:8]  # 8 x 64 KiB chunks (plus headers) into 256 KiB
        for key in keys:
            engine.insert(key, _payload(key), 4)
        assert any("No space left" in f for f in engine.faults)
        hit = engine.lookup(keys)
        assert hit.data == [_payload(k) for k in hit.keys]
        assert len(hit.keys) == len(keys)  # T1 and T2 hold what T3 could not
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        readonly = _engine(FolderMedium("T3", mount))
        readonly.insert(KEYS[20], _payload(KEYS[20]), 4)
        assert any("Read-only file system" in f for f in readonly.faults)
        assert readonly.lookup([KEYS[20]]).keys == [KEYS[20]]
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, object]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="kv-t4")
    try:
        yield endpoint, server
    finally:
        server.stop()


def _client() -> object:
    from kvtool.probe.host import s3_client

    return s3_client(connect_timeout_s=0.5)


def test_s3_round_trip_corruption_and_delete_prefix(s3: tuple[str, object]) -> None:
    import boto3

    t4 = S3Medium("T4", "s3://kv-t4/smoke", client_factory=_client)
    key = KEYS[2]
    t4.put(key, _payload(key))
    assert t4.contains(key)
    assert t4.get(key) == _payload(key)
    raw = boto3.client("s3", region_name="us-east-1")
    body = bytearray(raw.get_object(Bucket="kv-t4", Key=t4.object_key(key))["Body"].read())
    body[-1] ^= 1
    raw.put_object(Bucket="kv-t4", Key=t4.object_key(key), Body=bytes(body))
    with pytest.raises(CorruptChunk):
        t4.get(key)
    assert not t4.contains(key)  # deleted, never served again
    t4.put(KEYS[3], _payload(KEYS[3]))
    assert t4.delete_prefix() == 1
    assert raw.list_objects_v2(Bucket="kv-t4").get("KeyCount") == 0


def test_s3_stopping_mid_run_is_retried_then_the_chunk_stays_in_t3(
    s3: tuple[str, object], tmp_path: Path
) -> None:
    _, server = s3
    t4 = S3Medium("T4", "s3://kv-t4/run", client_factory=_client, attempts=2, backoff_s=0.01)
    engine = _engine(FolderMedium("T3", tmp_path), t4=t4)
    keys = KEYS[:3]
    for key in keys:
        engine.insert(key, _payload(key), 4)  # eager: in T3
    server.stop()  # type: ignore[attr-defined]
    clock_now = 11.0
    engine.manager.clock = lambda: clock_now
    engine.tick()  # T3 -> T4 demotions: S3 is gone
    assert engine.faults
    assert any("failed 2 times" in f for f in engine.faults)
    assert all(engine.manager.where(k) in ("T1", "T2", "T3") for k in keys)
    assert all("T3" in engine.manager.chunks[k].tiers for k in keys)  # nothing lost
    engine.drop_local()
    hit = engine.lookup(keys)
    assert hit.data == [_payload(k) for k in keys]


def test_a_missing_medium_write_raises_medium_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    t3 = FolderMedium("T3", blocked)
    with pytest.raises(MediumError):
        t3.put(KEYS[0], b"x" * 10)

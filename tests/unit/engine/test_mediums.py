"""The engine's mediums with real files, processes and an S3 endpoint: atomic writes under
SIGKILL, concurrent writers and readers, corruption caught on every read and quarantined, S3
round trips and prefix deletion against moto's server on 127.0.0.1."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.mediums import FolderMedium, MediumError, S3Medium
from tests.unit.engine.helpers import KEYS, all_files_whole, payload, s3_client


def test_put_get_delete_and_the_fanned_out_path(tmp_path: Path) -> None:
    t3 = FolderMedium("T3", tmp_path)
    key = KEYS[0]
    t3.put(key, payload(key))
    assert t3.path(key) == tmp_path / "chunks" / key[:2] / key[2:4] / f"{key}.kv"
    assert t3.get(key) == payload(key)
    assert t3.contains(key)
    assert t3.direct is not None  # found out on the first write
    t3.delete(key)
    assert t3.get(key) is None
    assert not t3.contains(key)
    assert [p.name for p in t3.path(key).parent.iterdir()] == []  # no temporary left


def test_a_corrupt_file_is_never_served_and_is_quarantined(tmp_path: Path) -> None:
    t3 = FolderMedium("T3", tmp_path)
    key = KEYS[1]
    t3.put(key, payload(key))
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
        t3.put(key, payload(key, 4 * 2**20))
        index += 1


def test_sigkill_mid_write_leaves_no_partial_chunk_visible(tmp_path: Path) -> None:
    code = (
        "import sys; from tests.unit.engine.test_mediums import _writer; _writer(sys.argv[1], 30)"
    )
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=Path.cwd())
        time.sleep(0.6)  # well into a stream of 4 MiB writes
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert all_files_whole(tmp_path) >= 1
    leftovers = list((tmp_path / "chunks").glob("*/*/.*.tmp"))
    t3 = FolderMedium("T3", tmp_path)
    for key in KEYS:
        got = t3.get(key)
        assert got is None or got == payload(key, 4 * 2**20)
    assert all(not p.name.endswith(".kv") for p in leftovers)


def _mixed(root: str, worker: int, rounds: int, queue: multiprocessing.Queue[str]) -> None:
    t3 = FolderMedium("T3", Path(root))
    bad = 0
    for index in range(rounds):
        key = KEYS[(index * 7 + worker) % 8]
        if (index + worker) % 2:
            t3.put(key, payload(key, 256 * 1024))
        else:
            got = t3.get(key)
            if got is not None and got != payload(key, 256 * 1024):
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
    assert all_files_whole(tmp_path) == len(written)
    assert not list((tmp_path / "chunks").glob("*/*/.*.tmp"))


def test_s3_round_trip_corruption_and_delete_prefix(s3: tuple[str, object]) -> None:
    import boto3

    t4 = S3Medium("T4", "s3://kv-t4/smoke", client_factory=s3_client)
    key = KEYS[2]
    t4.put(key, payload(key))
    assert t4.contains(key)
    assert t4.get(key) == payload(key)
    raw = boto3.client("s3", region_name="us-east-1")
    body = bytearray(raw.get_object(Bucket="kv-t4", Key=t4.object_key(key))["Body"].read())
    body[-1] ^= 1
    raw.put_object(Bucket="kv-t4", Key=t4.object_key(key), Body=bytes(body))
    with pytest.raises(CorruptChunk):
        t4.get(key)
    assert not t4.contains(key)  # deleted, never served again
    t4.put(KEYS[3], payload(KEYS[3]))
    assert t4.delete_prefix() == 1
    assert raw.list_objects_v2(Bucket="kv-t4").get("KeyCount") == 0


def test_a_missing_medium_write_raises_medium_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    t3 = FolderMedium("T3", blocked)
    with pytest.raises(MediumError):
        t3.put(KEYS[0], b"x" * 10)

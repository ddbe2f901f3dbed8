"""The engine: the manager's moves carried out by real mediums, every byte checked; a full or
read-only T3 and S3 going away mid-run are faults, and the engine keeps serving."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kvtool.engine.mediums import FolderMedium, S3Medium
from tests.unit.engine.helpers import KEYS, FullFolder, payload, s3_client, small_engine


def test_a_full_t3_is_a_fault_and_the_engine_keeps_serving_from_t1_and_t2(tmp_path: Path) -> None:
    engine = small_engine(FullFolder("T3", tmp_path))
    keys = KEYS[:6]
    for key in keys:
        engine.insert(key, payload(key), 4)
    assert engine.faults
    assert all("No space left on device" in f for f in engine.faults)
    assert engine.manager.counters["faults"] == len(keys)
    hit = engine.lookup(keys)
    assert hit.keys == keys
    assert hit.data == [payload(k) for k in keys]
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
        engine = small_engine(FolderMedium("T3", mount))
        keys = KEYS[:8]  # 8 x 64 KiB chunks (plus headers) into 256 KiB
        for key in keys:
            engine.insert(key, payload(key), 4)
        assert any("No space left" in f for f in engine.faults)
        hit = engine.lookup(keys)
        assert hit.data == [payload(k) for k in hit.keys]
        assert len(hit.keys) == len(keys)  # T1 and T2 hold what T3 could not
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        readonly = small_engine(FolderMedium("T3", mount))
        readonly.insert(KEYS[20], payload(KEYS[20]), 4)
        assert any("Read-only file system" in f for f in readonly.faults)
        assert readonly.lookup([KEYS[20]]).keys == [KEYS[20]]
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_s3_stopping_mid_run_is_retried_then_the_chunk_stays_in_t3(
    s3: tuple[str, object], tmp_path: Path
) -> None:
    _, server = s3
    t4 = S3Medium("T4", "s3://kv-t4/run", client_factory=s3_client, attempts=2, backoff_s=0.01)
    engine = small_engine(FolderMedium("T3", tmp_path), t4=t4)
    keys = KEYS[:3]
    for key in keys:
        engine.insert(key, payload(key), 4)  # eager: in T3
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
    assert hit.data == [payload(k) for k in keys]


def test_a_bad_key_is_refused_before_the_index_changes(tmp_path: Path) -> None:
    engine = small_engine(FolderMedium("T3", tmp_path))
    with pytest.raises(ValueError, match="not a chunk key"):
        engine.insert(KEYS[0] + "\n", payload(KEYS[0]), 4)
    assert engine.manager.chunks == {}  # it used to claim T1 and T3 held the chunk
    with pytest.raises(ValueError, match="not a chunk key"):
        engine.lookup(["../../etc/passwd"])

"""The engine: the manager's moves carried out by real mediums, every byte checked; a full or
read-only T3 and S3 going away mid-run are faults, and the engine keeps serving."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.engine.engine import Engine
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import FolderMedium, S3Medium
from kvtool.engine.records import EngineConfig
from tests.unit.engine.fake_torch import FakeTorch
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


def _faulty_engine(tmp_path: Path, *, t3: FolderMedium) -> tuple[Engine, list[float]]:
    from kvtool.engine.manager import Manager
    from kvtool.engine.mediums import MemoryMedium
    from kvtool.engine.records import EngineConfig

    config = EngineConfig(
        capacity_bytes={"T1": 8 * 65536, "T2": 16 * 65536, "T3": None, "T4": None},
        posture="lazy",
        t2_idle_s=10.0,
        t3_idle_s=20.0,
    )
    clock = [0.0]
    mediums = {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"), "T3": t3,
               "T4": FolderMedium("T4", tmp_path / "t4")}  # fmt: skip
    manager = Manager(config, lambda: clock[0])
    return Engine(manager, mediums, chunk_bytes=65536, chunk_tokens=4), clock


def test_a_failed_t3_write_during_idle_demotion_loses_no_chunk_with_t4_up(tmp_path: Path) -> None:
    """The failed T2 -> T3 move was reverted alone; the T3 -> T4 move planned with it then
    marked the chunk as held by T3, and the next tick dropped the only copy from T2."""
    from kvtool.engine.keys import chain_keys, model_fingerprint

    engine, clock = _faulty_engine(tmp_path, t3=FullFolder("T3", tmp_path / "t3"))
    keys = chain_keys(list(range(4 * 120)), 4, model_fingerprint("m", "bf16", "lost"))
    for key in keys:
        engine.insert(key, payload(key), 4)
    for step in range(1, 12):  # past both idle thresholds, ticking as a server would
        clock[0] = 15.0 * step
        engine.tick()
    lost = []
    for key in keys:
        where = engine.manager.where(key)
        data = engine.mediums[where].get(key) if where else None
        if data != payload(key):
            lost.append(key)
    assert lost == []
    assert engine.faults  # the refusals are recorded ...
    assert len(engine.faults.examples) <= engine.faults.KEEP  # ... summarised, not kept each


def test_a_full_t3_does_not_let_t2_grow_past_its_capacity(tmp_path: Path) -> None:
    """T2 held 2,987 chunks against a capacity of 64 while T3 refused every write."""
    from kvtool.engine.keys import chain_keys, model_fingerprint

    engine, _clock = _faulty_engine(tmp_path, t3=FullFolder("T3", tmp_path / "t3"))
    keys = chain_keys(list(range(4 * 300)), 4, model_fingerprint("m", "bf16", "grow"))
    for key in keys:
        engine.insert(key, payload(key), 4)
        assert engine.manager.used["T2"] <= 16 * 65536
    assert engine.manager.used["T4"] > 0  # what T3 refused went on to T4
    assert all(engine.manager.where(k) is not None for k in keys)  # T4 is unbounded: all kept
    assert engine.faults.counts  # one kind, counted
    assert len(engine.faults.examples) <= engine.faults.KEEP


def test_a_drop_never_removes_the_last_copy(tmp_path: Path) -> None:
    """A drop leans on the copy the index says a lower tier holds: when that copy is gone,
    the drop is refused and the upper copy stays."""
    from kvtool.engine.records import Move

    engine, _clock = _faulty_engine(tmp_path, t3=FolderMedium("T3", tmp_path / "t3"))
    key = KEYS[5]
    engine.insert(key, payload(key), 4)
    manager = engine.manager
    manager.adopt(key, 65536, 4, "T3")  # the index believes T3 has it; T3 does not
    manager._remove(manager.chunks[key], "T1")  # as the manager does when it plans the drop
    failed = engine.execute([Move("drop", key, "T1", "T3", 65536, "idle")])
    assert failed == {key}
    assert engine.mediums["T1"].get(key) == payload(key)  # not deleted
    assert manager.chunks[key].tiers == {"T1"}  # and the index says where it really is


class _CountingFolder(FolderMedium):
    """T3 that records how many reads run at once (each read waits a little, so reads on
    several threads overlap)."""

    def __init__(self, root: Path, io_threads: int) -> None:
        super().__init__("T3", root, io_threads=io_threads)
        self.lock = threading.Lock()
        self.running = self.peak = 0

    def get(self, key: str) -> bytes | None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            time.sleep(0.02)
            return super().get(key)
        finally:
            with self.lock:
                self.running -= 1


@pytest.mark.parametrize("threads", [1, 4])
def test_a_reload_from_t3_reads_on_io_threads_chunks_at_once(tmp_path: Path, threads: int) -> None:
    """``--io-threads`` had no effect: every T3 read was serial. A session's chunks coming back
    from T3 are now read ``io_threads`` at a time, bytes and faults as before."""
    t3 = _CountingFolder(tmp_path, threads)
    engine = small_engine(t3)
    keys = KEYS[:8]
    for key in keys:
        engine.insert(key, payload(key), 4)
    engine.drop_local()  # the node is lost: all 8 come back from T3
    hit = engine.lookup(keys)
    assert hit.keys == keys
    assert hit.tiers == ["T3"] * 8
    assert hit.data == [payload(k) for k in keys]
    assert t3.peak == threads
    assert engine.io["T3"].read_bytes == 8 * len(payload(keys[0]))
    engine.close()


def test_a_corrupt_chunk_read_ahead_is_quarantined_and_ends_the_prefix(tmp_path: Path) -> None:
    t3 = FolderMedium("T3", tmp_path, io_threads=4)
    engine = small_engine(t3)
    keys = KEYS[:6]
    for key in keys:
        engine.insert(key, payload(key), 4)
    engine.drop_local()
    victim = t3.path(keys[3])
    data = bytearray(victim.read_bytes())
    data[-1] ^= 1
    victim.write_bytes(bytes(data))
    hit = engine.lookup(keys)
    assert hit.keys == keys[:3]
    assert hit.data == [payload(k) for k in keys[:3]]
    assert engine.manager.counters["corrupt"] == 1
    assert not victim.exists()
    engine.close()


def _gpu_engine(
    *,
    t2_slots: int | None = None,
    timer: Callable[[], float] | None = None,
    gpu_bytes: int | None = None,
) -> tuple[Engine, FakeTorch]:
    """T1 (2 chunks) and T2 (4 chunks) on a fake CUDA machine whose GPU can allocate
    ``gpu_bytes`` (None: no limit), T2 a pinned pool sized by ``pool_slots`` unless
    ``t2_slots`` says otherwise; no lower tier."""
    from kvtool.engine.mediums import local_mediums, pool_slots

    chunk = 65536
    capacity: dict[str, int | None] = {"T1": 2 * chunk, "T2": 4 * chunk, "T3": 0, "T4": 0}
    fake = FakeTorch(devices=1, gpu_bytes=gpu_bytes)
    slots = pool_slots(capacity, chunk, batch=1) if t2_slots is None else t2_slots
    mediums = local_mediums(fake, chunk_bytes=chunk, t2_slots=slots)
    config = EngineConfig(capacity_bytes=capacity, pressure=1.0)
    manager = Manager(config, lambda: 0.0)
    engine = Engine(
        manager, mediums, chunk_bytes=chunk, chunk_tokens=4, timer=timer or time.perf_counter
    )
    return engine, fake


def test_a_t1_t2_move_on_a_gpu_is_dma_and_counts_once_per_tier() -> None:
    ticks = iter(range(0, 10_000, 1))
    engine, fake = _gpu_engine(timer=lambda: float(next(ticks)))
    first, second, third = KEYS[:3]
    engine.insert(first, payload(first), 4)
    engine.insert(second, payload(second), 4)
    fake.conversions.clear()
    before = {
        t: (io.read_bytes, io.read_s, io.write_bytes, io.write_s) for t, io in engine.io.items()
    }
    engine.insert(third, payload(third), 4)  # T1 full: ``first`` moves to T2
    assert engine.manager.where(first) == "T2"
    assert fake.conversions == ["frombuffer"]  # the put's bytes; the move saw none
    assert [(c.src, c.dst, c.pinned, c.non_blocking) for c in fake.copies[-1:]] == [
        ("cuda:0", "cpu", True, True)
    ]
    io = engine.io
    # the put into T1 took one tick; the DMA one tick, counted as T1's read and T2's write
    assert io["T1"].write_bytes - before["T1"][2] == 65536
    assert io["T1"].read_bytes - before["T1"][0] == 65536
    assert io["T2"].write_bytes - before["T2"][2] == 65536
    assert io["T1"].read_s - before["T1"][1] == 1.0
    assert io["T2"].write_s - before["T2"][3] == 1.0
    assert io["T2"].read_bytes == 0
    hit = engine.lookup([first])  # back up by DMA, then read out and checked
    assert hit.tiers == ["T2"]
    assert hit.data == [payload(first)]
    assert [(c.src, c.dst, c.non_blocking) for c in fake.copies if c.stream != "default"] == [
        ("cuda:0", "cpu", True),
        ("cpu", "cuda:0", True),
        ("cuda:0", "cpu", True),  # ``second``, pushed down to make room
    ]
    assert io["T2"].read_bytes == 65536
    assert not engine.faults


def test_a_gpu_another_process_fills_is_a_reported_fault_not_a_traceback() -> None:
    """T1 has room for its 2 chunks on paper, but the GPU holds one: the second put is torch's
    out-of-memory error, reported as T1's fault; the chunk that fit is still served."""
    engine, _ = _gpu_engine(gpu_bytes=65536 + 100)
    first, second = KEYS[:2]
    engine.insert(first, payload(first), 4)
    engine.insert(second, payload(second), 4)
    assert engine.faults
    text = " ".join(engine.faults)
    assert "cuda:0 has no room for a 65,536 B chunk (CUDA out of memory." in text
    assert engine.lookup([first]).data == [payload(first)]
    assert engine.manager.where(second) is None


def test_a_corrupt_chunk_in_t1_is_a_miss_counted_and_gone() -> None:
    engine, fake = _gpu_engine()
    key = KEYS[0]
    engine.insert(key, payload(key), 4)
    fake.held(engine.mediums["T1"], key)[7] ^= 0x04
    hit = engine.lookup([key])
    assert hit.keys == []  # recomputed by the caller, never served
    assert engine.manager.counters["corrupt"] == 1
    assert engine.manager.where(key) is None
    assert not engine.mediums["T1"].contains(key)
    assert engine.faults.counts == {"corrupt": 1}


def test_t2s_pool_needs_one_calls_chunks_beside_its_own_capacity() -> None:
    """The manager plans T1's evictions into T2 before T2's own in a call: once T2 is full,
    each insert moves a chunk from T1 into T2 before T2 drops its oldest. A pool of T2's
    capacity alone runs out there (a fault, reported); one sized by ``pool_slots`` (T2's and
    one insert's chunk) does not."""
    for slots, faults in ((4, True), (None, False)):
        engine, _ = _gpu_engine(t2_slots=slots)
        for key in KEYS[:8]:
            engine.insert(key, payload(key), 4)
        assert bool(engine.faults) is faults, engine.faults.summary()
        if not faults:
            held = [k for k in KEYS[:8] if engine.manager.where(k) is not None]
            assert held == KEYS[2:8]  # T2's 4 and T1's 2
            for key in held:
                assert engine.lookup([key]).data == [payload(key)]


def test_insert_many_is_insert_for_each_with_room_made_once(tmp_path: Path) -> None:
    """A request's chunks at once: the same bytes served as chunk-by-chunk inserts, the
    request's own chunks kept in T1 while older ones go, and bad input refused before the
    index changes."""
    one, many = (small_engine(FolderMedium("T3", tmp_path / name)) for name in ("one", "many"))
    first, second = KEYS[:3], KEYS[3:6]
    for key in first + second:
        one.insert(key, payload(key), 4)
    many.insert_many(first, [payload(k) for k in first], 4)
    many.insert_many(second, [payload(k) for k in second], 4)
    assert [many.manager.where(k) for k in second] == ["T1", "T1", "T1"]  # T1 holds 3.4 chunks
    for engine in (one, many):
        hit = engine.lookup(first + second)
        assert hit.keys == first + second
        assert hit.data == [payload(k) for k in first + second]
    assert many.manager.counters["inserts"] == one.manager.counters["inserts"] == 6
    with pytest.raises(ValueError, match="2 keys and 1 chunks"):
        many.insert_many(KEYS[6:8], [payload(KEYS[6])], 4)
    with pytest.raises(ValueError, match="one size"):
        many.insert_many(KEYS[6:8], [payload(KEYS[6]), payload(KEYS[7], 100)], 4)
    with pytest.raises(ValueError, match="not a chunk key"):
        many.insert_many(["../etc"], [payload(KEYS[6])], 4)
    assert KEYS[6] not in many.manager.chunks
    one.close()
    many.close()

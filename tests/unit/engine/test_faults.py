"""The engine under injected faults, as a reliability engineer would run it: a random schedule
of inserts, lookups and idle ticks against T3 and T4 folders that go full (ENOSPC), read-only
(EROFS) or away (every call fails) in phases, while a corrupter damages chunk files (a flipped
byte, truncated, extended, swapped for a folder or a link). After every operation:

* no wrong bytes: every chunk served is the chunk inserted;
* capacities held: T1 and T2 never hold more than their capacity, faults or not;
* the index tells the truth: each tier the index names for a chunk holds it;
* nothing lost: with T4 healthy, every chunk inserted is still held somewhere, unless the
  corrupter damaged its only copy (then it is a counted miss, recomputed, never served).

``CHAOS_SEEDS`` schedules run in the suite (``KVTOOL_CHAOS_SEEDS`` for a longer hunt); the
test prints the totals so a run's figures can be quoted."""

from __future__ import annotations

import errno
import os
import random
from collections import Counter
from pathlib import Path

import pytest

from kvtool.engine.engine import Engine
from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import Manager
from kvtool.engine.mediums import FolderMedium, MediumError, MemoryMedium
from kvtool.engine.records import EngineConfig
from tests.unit.engine.helpers import payload

CHUNK = 16 * 1024
CHAOS_SEEDS = int(os.environ.get("KVTOOL_CHAOS_SEEDS", "12"))
STEPS = 160


class ChaosFolder(FolderMedium):
    """A folder tier whose state the schedule sets: ``healthy``, ``full`` (writes fail
    ENOSPC), ``read-only`` (EROFS) or ``away`` (every call fails, as a dead mount or S3)."""

    def __init__(self, tier: str, root: Path, injected: Counter[str]) -> None:
        super().__init__(tier, root, io_threads=4)
        self.state = "healthy"
        self.injected = injected

    def _write(self, folder: int, tmp: str, buffer: object, size: int) -> None:
        if self.state in ("full", "read-only"):
            code = errno.ENOSPC if self.state == "full" else errno.EROFS
            self.injected[f"{self.tier} {self.state}"] += 1
            raise OSError(code, os.strerror(code))
        super()._write(folder, tmp, buffer, size)  # type: ignore[arg-type]

    def _away(self) -> None:
        if self.state == "away":
            self.injected[f"{self.tier} away"] += 1
            raise MediumError(f"{self.tier} is away")

    def put(self, key: str, data: bytes | memoryview) -> None:
        self._away()
        super().put(key, data)

    def get(self, key: str) -> bytes | None:
        self._away()
        return super().get(key)

    def contains(self, key: str) -> bool:
        self._away()
        return super().contains(key)

    def delete(self, key: str) -> None:
        self._away()
        super().delete(key)


def _damage(path: Path, how: str, outside: Path) -> None:
    if how == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
    elif how == "truncate":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size - 1000)
    elif how == "extend":
        with path.open("ab") as f:
            f.write(b"\0" * 5000)
    elif how == "folder":
        path.unlink()
        path.mkdir()
    else:  # a link to a file outside, with a valid-looking size
        path.unlink()
        path.symlink_to(outside)


def run_schedule(seed: int, root: Path, *, t4_faults: bool) -> Counter[str]:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    outside = root / "outside.kv"
    outside.write_bytes(b"\0" * (4096 + CHUNK))
    t3 = ChaosFolder("T3", root / "t3", counts)
    t4 = ChaosFolder("T4", root / "t4", counts)
    capacity = {"T1": 6 * CHUNK, "T2": 12 * CHUNK, "T3": None, "T4": None}
    config = EngineConfig(
        capacity_bytes=capacity,
        posture=rng.choice(["lazy", "eager"]),
        policy=rng.choice(["lru", "s3fifo"]),
        t2_idle_s=20.0,
        t3_idle_s=60.0,
    )
    clock = [0.0]
    engine = Engine(
        Manager(config, lambda: clock[0]),
        {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"), "T3": t3, "T4": t4},
        chunk_bytes=CHUNK,
        chunk_tokens=4,
    )
    fingerprint = model_fingerprint("m", "bf16", f"chaos-{seed}")
    sessions = [
        chain_keys([s * 1000 + t for t in range(4 * rng.randint(2, 6))], 4, fingerprint)
        for s in range(24)
    ]
    inserted: set[str] = set()
    damaged: set[str] = set()  # chunks whose T3 file the corrupter touched
    lost: set[str] = set()
    lies: set[tuple[str, str]] = set()
    try:
        for _ in range(STEPS):
            if rng.random() < 0.15:
                t3.state = rng.choice(["healthy", "healthy", "full", "read-only", "away"])
            if t4_faults and rng.random() < 0.15:
                t4.state = rng.choice(["healthy", "full", "away"])
            action = rng.random()
            keys = rng.choice(sessions)
            if action < 0.45:
                for key in keys:
                    if engine.manager.where(key) is None:
                        engine.insert(key, payload(key, CHUNK), 4)
                        inserted.add(key)
                        counts["inserts"] += 1
            elif action < 0.8:
                hit = engine.lookup(keys)
                counts["lookups"] += 1
                counts["chunks served"] += len(hit.keys)
                counts["wrong bytes"] += sum(
                    data != payload(key, CHUNK)
                    for key, data in zip(hit.keys, hit.data, strict=True)
                )
            elif action < 0.95:
                clock[0] += rng.choice([5.0, 25.0, 70.0])
                engine.tick()
                counts["ticks"] += 1
            else:
                files = [f for f in sorted((root / "t3" / "chunks").glob("*/*/*.kv"))
                         if f.is_file() and not f.is_symlink()]  # fmt: skip
                if files:
                    victim = rng.choice(files)
                    how = rng.choice(["flip", "truncate", "extend", "folder", "link"])
                    _damage(victim, how, outside)
                    damaged.add(victim.stem)
                    counts[f"damaged: {how}"] += 1
            _check(engine, inserted, damaged, capacity, counts, t4_healthy=not t4_faults,
                   lost=lost, lies=lies)  # fmt: skip
    finally:
        engine.close()
    counts["faults recorded"] += len(engine.faults)
    counts["corrupt detected"] += engine.manager.counters["corrupt"]
    return counts


def _check(
    engine: Engine,
    inserted: set[str],
    damaged: set[str],
    capacity: dict[str, int | None],
    counts: Counter[str],
    *,
    t4_healthy: bool,
    lost: set[str],
    lies: set[tuple[str, str]],
) -> None:
    """Count, once each, chunks gone from every tier and index entries the media lack."""
    manager = engine.manager
    for tier in ("T1", "T2"):
        limit = capacity[tier]
        assert limit is not None
        if manager.used[tier] > limit:
            counts[f"{tier} over capacity"] += 1
        stored = sum(len(v) for v in getattr(engine.mediums[tier], "_store", {}).values())
        if stored > limit:
            counts[f"{tier} medium over capacity"] += 1
    for key in inserted - damaged:  # a damaged file is found out when read, not before
        chunk = manager.chunks.get(key)
        if chunk is None:
            if t4_healthy and key not in lost:
                lost.add(key)
                counts["chunks lost"] += 1
            continue
        for tier in chunk.tiers:
            medium = engine.mediums[tier]
            state = getattr(medium, "state", "healthy")
            if state == "away":
                continue  # cannot be asked; checked when it comes back
            if not medium.contains(key) and (key, tier) not in lies:
                lies.add((key, tier))
                counts["index claims a copy the medium lacks"] += 1


BAD = ("wrong bytes", "chunks lost", "index claims a copy the medium lacks")


@pytest.mark.parametrize("t4_faults", [False, True], ids=["T4 healthy", "T4 failing too"])
def test_chaos_loses_nothing_serves_nothing_wrong_and_holds_capacities(
    tmp_path: Path, t4_faults: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    totals: Counter[str] = Counter()
    for seed in range(CHAOS_SEEDS):
        root = tmp_path / f"seed{seed}"
        root.mkdir()
        totals += run_schedule(seed, root, t4_faults=t4_faults)
    with capsys.disabled():
        print(f"\nchaos ({'T4 failing too' if t4_faults else 'T4 healthy'}), {CHAOS_SEEDS} seeds:",
              dict(sorted(totals.items())))  # fmt: skip
    for bad in (*BAD, "T1 over capacity", "T2 over capacity"):
        assert totals[bad] == 0, (bad, dict(totals))
    assert totals["T1 medium over capacity"] == totals["T2 medium over capacity"] == 0
    # the schedule really did hurt: every kind of fault and damage happened
    for injected in ("T3 full", "T3 read-only", "T3 away"):
        assert totals[injected] > 0, injected
    assert totals["corrupt detected"] > 0
    assert totals["chunks served"] > 100


def test_a_failed_t3_write_sends_idle_chunks_on_to_t4_and_node_loss_loses_nothing(
    tmp_path: Path,
) -> None:
    """Issue 36's repro: T3 refuses every write (ENOSPC) while T4 is up. The chunks idle in
    T2 go on to T4 in the same tick, each fault counted, so after the node is lost a lookup
    serves both; T2's copies were deleted only after T4's were there."""
    from tests.unit.engine.helpers import KEYS, FullFolder

    config = EngineConfig(
        capacity_bytes={"T1": 65536, "T2": None, "T3": None, "T4": None},
        t2_idle_s=10.0,
        t3_idle_s=100.0,
    )
    clock = [0.0]
    t4 = FolderMedium("T4", tmp_path / "t4")
    mediums = {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"),
               "T3": FullFolder("T3", tmp_path / "t3"), "T4": t4}  # fmt: skip
    engine = Engine(Manager(config, lambda: clock[0]), mediums, chunk_bytes=65536, chunk_tokens=4)
    keys = KEYS[:2]
    for key in keys:
        engine.insert(key, payload(key), 4)
    engine.insert(KEYS[2], payload(KEYS[2]), 4)  # pushes both out of T1 into T2
    assert [engine.manager.where(k) for k in keys] == ["T2", "T2"]
    clock[0] = 20.0
    engine.tick()
    assert [engine.manager.where(k) for k in keys] == ["T4", "T4"]
    assert engine.faults.counts == {"move T2->T3": 2}
    assert not engine.at_risk
    clock[0] = 200.0
    engine.tick()
    engine.drop_local()
    hit = engine.lookup(keys)
    assert hit.keys == keys
    assert hit.data == [payload(k) for k in keys]
    # the third too: T1 was over its line, and room is made after any fault
    assert sum(1 for _ in (tmp_path / "t4" / "chunks").glob("*/*/*.kv")) == 3


def test_a_chunk_no_shared_tier_takes_is_at_risk_and_named_when_the_node_is_lost(
    tmp_path: Path,
) -> None:
    from tests.unit.engine.helpers import KEYS, FullFolder

    config = EngineConfig(
        capacity_bytes={"T1": 65536, "T2": None, "T3": None, "T4": None}, t2_idle_s=10.0
    )
    clock = [0.0]
    mediums = {"T1": MemoryMedium("T1"), "T2": MemoryMedium("T2"),
               "T3": FullFolder("T3", tmp_path / "t3"),
               "T4": FullFolder("T4", tmp_path / "t4")}  # fmt: skip
    engine = Engine(Manager(config, lambda: clock[0]), mediums, chunk_bytes=65536, chunk_tokens=4)
    for key in KEYS[:2]:
        engine.insert(key, payload(key), 4)
    clock[0] = 20.0
    engine.tick()
    # both: the second left T1 when room was made after the first fault
    assert sorted(engine.at_risk) == sorted(KEYS[:2])
    assert "T4 write" in engine.at_risk[KEYS[0]]
    assert [engine.manager.where(k) for k in KEYS[:2]] == ["T2", "T2"]
    engine.drop_local()
    assert engine.faults.counts["lost with the node"] == 2
    assert any(m.startswith(f"{KEYS[0][:12]}: lost with the node") for m in engine.faults)
    assert not engine.at_risk


def test_chunks_gone_from_t3_are_tried_once_a_tick_not_thousands_of_times(tmp_path: Path) -> None:
    """T3's folder removed under the engine (issue 53): each idle T3 -> T4 demotion whose
    source file is gone was planned and tried again and again in one tick (7 chunks, 7,491
    tries); now once each a tick, the rest of the batch unharmed."""
    import shutil

    from tests.unit.engine.helpers import KEYS

    config = EngineConfig(
        capacity_bytes={"T1": 65536, "T2": 0, "T3": None, "T4": None},
        t2_idle_s=10.0,
        t3_idle_s=100.0,
        posture="eager",
    )
    clock = [0.0]
    mediums = {"T1": MemoryMedium("T1"), "T3": FolderMedium("T3", tmp_path / "t3"),
               "T4": FolderMedium("T4", tmp_path / "t4")}  # fmt: skip
    engine = Engine(Manager(config, lambda: clock[0]), mediums, chunk_bytes=65536, chunk_tokens=4)
    keys = KEYS[:7]
    for key in keys:
        engine.insert(key, payload(key), 4)
    assert all("T3" in engine.manager.chunks[k].tiers for k in keys)
    shutil.rmtree(tmp_path / "t3")
    for tick in range(1, 4):
        clock[0] = 200.0 * tick
        engine.tick()
        assert engine.faults.counts.get("move T3->T4", 0) <= 7 * tick, engine.faults.counts

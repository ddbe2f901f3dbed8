"""T3 in a folder (engine/folder.py) with real files and processes: atomic writes under
SIGKILL, concurrent writers and readers, every damaged chunk quarantined and never served,
no link in the fan-out followed."""

from __future__ import annotations

import multiprocessing
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.mediums import (
    FolderMedium,
    MediumError,
    MemoryMedium,
)
from tests.unit.engine.helpers import KEYS, all_files_whole, payload


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
    code = "import sys; from tests.unit.engine.test_folder import _writer; _writer(sys.argv[1], 30)"
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=Path.cwd())
        deadline = time.monotonic() + 30  # a loaded machine starts a child slowly
        while not list(tmp_path.glob("chunks/*/*/*.kv")) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # well into a stream of 4 MiB writes
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


def test_a_missing_medium_write_raises_medium_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    t3 = FolderMedium("T3", blocked)
    with pytest.raises(MediumError):
        t3.put(KEYS[0], b"x" * 10)


def test_a_tier_whose_folder_above_is_gone_is_not_made_again(tmp_path: Path) -> None:
    """The run's folder removed (or the file system unmounted, leaving its mount point): a
    write is a MediumError, never a new folder tree on whatever disk now holds the path."""
    run = tmp_path / "mnt" / "run"
    run.mkdir(parents=True)
    t3 = FolderMedium("T3", run / "t3")
    t3.put(KEYS[0], b"x" * 10)  # its own folder it makes
    shutil.rmtree(tmp_path / "mnt")
    with pytest.raises(MediumError, match="is gone"):
        t3.put(KEYS[1], b"y" * 10)
    assert not (tmp_path / "mnt").exists()


def _damages(tmp_path: Path) -> list[tuple[str, object]]:
    """Every kind of damage a chunk file can meet: (name, how to apply it to its path)."""
    import os

    def truncate(n: int) -> object:
        return lambda p: os.truncate(p, n)

    def extend(n: int) -> object:
        return lambda p: p.open("ab").write(bytes(n))

    def flip(at: int) -> object:
        def apply(p: Path) -> None:
            data = bytearray(p.read_bytes())
            data[at % len(data)] ^= 0x40
            p.write_bytes(bytes(data))

        return apply

    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x" * 8192)

    def link_outside(p: Path) -> None:
        p.unlink()
        p.symlink_to(outside)

    def folder_instead(p: Path) -> None:
        p.unlink()
        p.mkdir()

    def fifo_instead(p: Path) -> None:
        p.unlink()
        os.mkfifo(p)

    sizes = (0, 1, 100, 4095, 4096, 4097, 8191, 12288, 70000)
    cases: list[tuple[str, object]] = [(f"truncate {n}", truncate(n)) for n in sizes]
    cases += [(f"extend {n}", extend(n)) for n in (1, 100, 4096, 5000, 2**22)]
    cases += [(f"flip {at}", flip(at)) for at in (0, 8, 20, 64, 4095, 4096, 5000, -1)]
    cases += [("link outside", link_outside), ("a folder", folder_instead),
              ("a fifo", fifo_instead)]  # fmt: skip
    return cases


@pytest.mark.parametrize("direct", [True, False], ids=["O_DIRECT", "buffered"])
def test_every_damaged_chunk_is_quarantined_never_served_never_raised(
    tmp_path: Path, direct: bool
) -> None:
    """Damaged files used to raise OSError(EINVAL) out of a read under O_DIRECT (sizes not a
    multiple of 4 KiB, links), IsADirectoryError for a folder, and to read a 4 MiB padded file
    whole before judging it."""
    from kvtool.engine.engine import Engine
    from kvtool.engine.manager import Manager
    from kvtool.engine.records import EngineConfig

    for index, (name, damage) in enumerate(_damages(tmp_path)):
        root = tmp_path / f"t3-{index}"
        t3 = FolderMedium("T3", root)
        key = KEYS[index % len(KEYS)]
        t3.put(key, payload(key, 3 * 4096 + 100))
        t3.direct = direct and t3.direct  # as a process that wrote with O_DIRECT reads
        damage(t3.path(key))  # type: ignore[operator]
        with pytest.raises(CorruptChunk):
            t3.get(key)
        assert not t3.path(key).exists(), name
        assert not t3.path(key).is_symlink(), name
        assert t3.quarantined == 1, name
        assert t3.get(key) is None, name
        # through the engine: a miss, counted, never bytes, never an exception
        t3.put(key, payload(key, 3 * 4096 + 100))
        damage(t3.path(key))  # type: ignore[operator]
        config = EngineConfig(capacity_bytes={"T1": 10**9, "T2": 0, "T3": None, "T4": 0})
        mediums = {"T1": MemoryMedium("T1"), "T3": t3}
        engine = Engine(
            Manager(config, lambda: 0.0), mediums, chunk_bytes=3 * 4096 + 100, chunk_tokens=4
        )
        engine.manager.adopt(key, 3 * 4096 + 100, 4, "T3")
        hit = engine.lookup([key])
        assert hit.keys == [], name
        assert engine.manager.where(key) is None, name  # the index no longer claims it
    assert (tmp_path / "outside.bin").read_bytes() == b"x" * 8192  # a link is never followed


def test_a_link_in_the_fan_out_cannot_send_chunks_outside(tmp_path: Path) -> None:
    root = tmp_path / "t3"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    key = KEYS[0]
    (root / "chunks").mkdir(parents=True)
    (root / "chunks" / key[:2]).symlink_to(outside)
    t3 = FolderMedium("T3", root)
    with pytest.raises(MediumError, match="is not a folder of kvtool's"):
        t3.put(key, payload(key))
    assert list(outside.iterdir()) == []
    with pytest.raises(MediumError):
        t3.get(key)
    assert not t3.contains(key)


def test_quarantine_moves_only_the_file_that_was_judged(tmp_path: Path) -> None:
    """A reader that judged a damaged file must not move aside the good one another process
    renamed into place since."""
    import os

    t3 = FolderMedium("T3", tmp_path)
    key = KEYS[3]
    t3.put(key, payload(key))
    path = t3.path(key)
    stale = os.stat(path)
    t3.put(key, payload(key))  # replaced by another writer: a new inode at the same name
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        t3._quarantine(folder, path.name, (stale.st_dev, stale.st_ino))
    finally:
        os.close(folder)
    assert t3.get(key) == payload(key)
    assert t3.quarantined == 0

"""The engine's mediums with real files, processes and an S3 endpoint: atomic writes under
SIGKILL, concurrent writers and readers, corruption caught on every read and quarantined, S3
round trips and prefix deletion against moto's server on 127.0.0.1."""

from __future__ import annotations

import multiprocessing
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.mediums import (
    FolderMedium,
    MediumError,
    MemoryMedium,
    S3Medium,
    dma_pair,
    local_mediums,
    pool_slots,
    transfer,
)
from kvtool.errors import InputError
from tests.unit.engine.fake_torch import Copy, FakeTorch
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
    from kvtool.engine.manager import EngineConfig, Manager

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


@pytest.mark.server
def test_a_frozen_s3_costs_one_deadline_not_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts and never answers stalled each read about 4 minutes (30 s read
    timeout x retries at two levels); the medium's deadline bounds the whole operation."""
    import socket
    import threading

    from kvtool.probe.host import s3_client as make_client

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept and say nothing
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    t4 = S3Medium(
        "T4",
        "s3://kv/frozen",
        client_factory=lambda: make_client(connect_timeout_s=0.5, read_timeout_s=0.5, attempts=1),
        backoff_s=0.05,
        deadline_s=1.5,
    )
    start = time.monotonic()
    try:
        with pytest.raises(MediumError, match="T4 S3 get_object failed"):
            t4.get(KEYS[0])
    finally:
        stop.set()
        for conn in held:
            conn.close()
        server.close()
    assert time.monotonic() - start < 5.0


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://", "is not s3://bucket/prefix or file:///path"),
        ("s3:///x", "is not s3://bucket/prefix"),
        ("s3://My_Bucket/kv", "'My_Bucket' is not an S3 bucket name"),
        ("s3://b/kv", "'b' is not an S3 bucket name"),
        ("s3://bucket/kv\nx", "holds a control character"),
        ("file://", "names no absolute folder"),  # was T4 in the current folder, exit 0
        ("file://relative/dir", "names no absolute folder"),
        ("file:///no/such/folder", "/no/such/folder is not a folder"),
        ("ftp://x", "is not s3://bucket/prefix"),
    ],
)
def test_a_t4_url_that_cannot_work_is_refused_by_name(url: str, message: str) -> None:
    from kvtool.engine.mediums import check_t4_url

    with pytest.raises(InputError, match=re.escape(message)):
        check_t4_url(url)


def test_good_t4_urls_pass(tmp_path: Path) -> None:
    from kvtool.engine.mediums import check_t4_url

    for url in ("s3://my-bucket.kv/prefix/", "s3://abc", f"file://{tmp_path}"):
        assert check_t4_url(url) == url


# --- memory mediums: DMA between a GPU T1 and a pinned pool, the pool, the checksums ---------


def _gpu_pair(slots: int = 2, chunk: int = 10_000) -> tuple[FakeTorch, MemoryMedium, MemoryMedium]:
    """A fake CUDA machine's T1 (tensors on cuda:0) and T2 (a pinned pool of ``slots``)."""
    fake = FakeTorch(devices=1)
    t1 = MemoryMedium("T1", torch=fake)
    t2 = MemoryMedium("T2", torch=fake, slots=slots, chunk_bytes=chunk)
    return fake, t1, t2


def test_t1_to_t2_and_back_is_tensor_to_tensor_dma_on_a_side_stream() -> None:
    fake, t1, t2 = _gpu_pair()
    key, data = KEYS[0], payload(KEYS[0], 10_000)
    t1.put(key, data)
    assert dma_pair(t1, t2)
    assert dma_pair(t2, t1)
    fake.copies.clear()
    fake.conversions.clear()
    assert transfer(t1, t2, key) == 10_000
    t1.delete(key)
    assert bytes(fake.held(t2, key)) == data  # landed: the event was waited on
    assert transfer(t2, t1, key) == 10_000
    t2.delete(key)
    assert fake.conversions == []  # never through Python bytes
    side = fake.cuda.streams[0].name
    assert fake.copies == [
        Copy("cuda:0", "cpu", True, True, side, 10_000),
        Copy("cpu", "cuda:0", True, True, side, 10_000),
    ]
    assert len(fake.cuda.streams) == 1  # one side stream, made once and reused
    assert fake.cuda.streams[0].waited_on == ["default", "default"]  # after T1's own writes
    assert fake.synchronized == 2
    assert t1.get(key) == data


def test_a_full_gpu_or_host_is_a_medium_error_naming_it_and_other_errors_stay_loud() -> None:
    fake = FakeTorch(devices=1, gpu_bytes=15_000)  # another process holds the rest
    t1 = MemoryMedium("T1", torch=fake)
    t2 = MemoryMedium("T2", torch=fake)  # one pinned allocation per chunk
    first, second = KEYS[:2]
    t1.put(first, payload(first, 10_000))
    with pytest.raises(MediumError) as full:
        t1.put(second, payload(second, 10_000))
    assert str(full.value) == (
        "T1: cuda:0 has no room for a 10,000 B chunk (CUDA out of memory. Tried to allocate"
        " 0.01 MiB. GPU 0 has a total capacity of 139.80 GiB of which 2.00 MiB is free.):"
        " another process may hold the GPU's memory (nvidia-smi lists it), or give T1 less"
        " capacity"
    )
    t2.put(second, payload(second, 10_000))
    with pytest.raises(MediumError, match=r"^T1: cuda:0 has no room"):
        transfer(t2, t1, second)  # back up into the full GPU: refused,
    assert t2.get(second) == payload(second, 10_000)  # and the chunk stays where it was
    assert t1.get(first) == payload(first, 10_000)

    def host_full(*_: object, **__: object) -> None:
        raise RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be ...")

    fake.empty = host_full  # type: ignore[method-assign,assignment]
    with pytest.raises(MediumError, match=r"^T2: pinned host memory has no room for a 3 B chunk"
                       r" \(CUDA error: out of memory\): give T2 less capacity$"):  # fmt: skip
        t2.put(KEYS[2], b"abc")
    pool = MemoryMedium("T2", torch=fake, slots=4, chunk_bytes=4096)
    with pytest.raises(MediumError, match=r"^T2: no room for the pool's 16,384 B of host memory"):
        pool.put(KEYS[2], b"abc")

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    fake.empty = broken  # type: ignore[method-assign,assignment]
    with pytest.raises(RuntimeError, match="illegal memory access"):  # a bug is not "full"
        t1.put(KEYS[3], b"abc")


def test_dma_waits_for_the_copy_before_the_source_is_freed_or_read() -> None:
    """Without the wait, the fake's asynchronous copy has not landed: the copy holds the
    pool's garbage, and the checksum it carried says so when it is read out."""
    fake, t1, t2 = _gpu_pair()
    key, data = KEYS[1], payload(KEYS[1], 10_000)
    t1.put(key, data)
    fake.cuda.Event = lambda: types.SimpleNamespace(record=lambda s: None, synchronize=lambda: None)  # type: ignore[method-assign]
    transfer(t1, t2, key)
    assert bytes(fake.held(t2, key)) != data
    with pytest.raises(CorruptChunk):
        t2.get(key)


def test_dma_is_only_between_a_gpu_t1_and_pinned_host_memory() -> None:
    fake, t1, t2 = _gpu_pair()
    cpu = FakeTorch(devices=0)
    assert not dma_pair(MemoryMedium("T1", torch=cpu), MemoryMedium("T2", torch=cpu))
    assert not dma_pair(MemoryMedium("T1"), MemoryMedium("T2"))  # bytes without torch
    assert not dma_pair(t1, MemoryMedium("T2", torch=FakeTorch(devices=1)))  # another torch
    with pytest.raises(ValueError, match="no DMA from"):
        transfer(MemoryMedium("T1"), t2, KEYS[0])
    assert transfer(t1, t2, KEYS[0]) is None  # not there: nothing copied
    assert fake.copies == []


def test_the_pinned_pool_takes_exactly_its_slots_reuses_them_and_refuses_when_full() -> None:
    chunk = 17_989_632 + 1  # rounded up to the next 4 KiB: 17,993,728 B a slot
    fake, t1, t2 = _gpu_pair(slots=3, chunk=chunk)
    assert t2.held_bytes == 0  # allocated on first use, not by the constructor
    assert fake.allocations == []
    small = [(k, payload(k, 5000)) for k in KEYS[:4]]
    for key, data in small[:3]:
        t2.put(key, data)
    slot = 17_989_632 + 4096
    assert t2.held_bytes == 3 * slot
    assert fake.allocations == [(3 * slot, "cpu", False)]  # one plain allocation ...
    assert [size for _, size, _ in fake.register_calls] == [3 * slot]  # ... page-locked whole
    assert fake.held(t2, KEYS[0]).base is not None  # a view of the pool
    where = fake.held(t2, KEYS[1]).ctypes.data
    with pytest.raises(MediumError, match="all 3 pool slots are taken"):
        t2.put(*small[3])
    t2.delete(KEYS[1])
    t2.put(*small[3])  # into the freed slot
    assert fake.held(t2, KEYS[3]).ctypes.data == where
    assert t2.get(KEYS[3]) == small[3][1]
    assert len(fake.allocations) == 1
    with pytest.raises(MediumError, match="does not fit the pool's 17,993,728 B slots"):
        t2.put(KEYS[5], bytes(slot + 1))
    assert t2.description == "pinned host pool of 3 slots x 17,993,728 B"
    assert t1.description == "torch tensors on cuda:0; T1<->T2 by DMA on a side stream"
    t2.close()
    assert fake.registered == {}  # unregistered before it is released
    assert t2.held_bytes == 0


def test_a_pool_that_cannot_be_page_locked_is_a_medium_error() -> None:
    fake, _, t2 = _gpu_pair()
    fake.cuda.cudart().error = 2
    with pytest.raises(MediumError, match="cudaHostRegister of 24,576 B failed"):
        t2.put(KEYS[0], payload(KEYS[0], 100))
    assert not t2.contains(KEYS[0])


def test_unpooled_pinned_t2_counts_each_chunk_as_a_power_of_two() -> None:
    fake = FakeTorch(devices=1)
    t2 = MemoryMedium("T2", torch=fake)
    t2.put(KEYS[0], payload(KEYS[0], 10 * 2**20))
    assert t2.held_bytes == 16 * 2**20
    assert fake.allocations == [(10 * 2**20, "cpu", True)]
    assert t2.get(KEYS[0]) == payload(KEYS[0], 10 * 2**20)


@pytest.mark.parametrize("tier", ["T1", "T2"])
def test_a_flipped_byte_in_memory_is_a_corrupt_chunk_and_is_deleted(tier: str) -> None:
    fake, t1, t2 = _gpu_pair()
    medium = {"T1": t1, "T2": t2}[tier]
    key = KEYS[2]
    medium.put(key, payload(key, 10_000))
    fake.held(medium, key)[4321] ^= 0x01
    with pytest.raises(CorruptChunk, match=f"{tier}: checksum mismatch"):
        medium.get(key)
    assert not medium.contains(key)
    assert medium.get(key) is None
    if tier == "T2":  # its slot is free again
        for other in KEYS[3:5]:
            t2.put(other, payload(other, 10))


def test_the_checksum_travels_with_a_chunk_moved_by_dma() -> None:
    """Damaged in T2, moved to T1 by DMA (no bytes seen on the way): caught when T1 reads it."""
    fake, t1, t2 = _gpu_pair()
    key = KEYS[3]
    t2.put(key, payload(key, 10_000))
    fake.held(t2, key)[0] ^= 0x80
    transfer(t2, t1, key)
    t2.delete(key)
    with pytest.raises(CorruptChunk):
        t1.get(key)
    assert not t1.contains(key)


def test_plain_bytes_are_checked_too() -> None:
    t2 = MemoryMedium("T2")
    key = KEYS[4]
    t2.put(key, payload(key))
    held = t2._store[key]
    t2._store[key] = held._replace(data=b"\x00" + held.data[1:])
    with pytest.raises(CorruptChunk):
        t2.get(key)
    assert not t2.contains(key)
    assert t2.held_bytes == 0
    assert t2.description == "host bytes (torch is not installed)"


@pytest.mark.torch
@pytest.mark.no_gpu
def test_real_cpu_torch_pool_and_checksums() -> None:
    import torch

    t1 = MemoryMedium("T1", torch=torch)
    t2 = MemoryMedium("T2", torch=torch, slots=2, chunk_bytes=65536)
    assert not dma_pair(t1, t2)  # no CUDA: the bytes path
    assert t2.description == "host pool (torch, not pinned: no CUDA) of 2 slots x 65,536 B"
    for key in KEYS[:2]:
        t2.put(key, payload(key))
        t1.put(key, payload(key))
    assert [t2.get(k) for k in KEYS[:2]] == [payload(k) for k in KEYS[:2]]
    assert t2.held_bytes == 2 * 65536
    assert t1.held_bytes == 2 * 65536
    with pytest.raises(MediumError):
        t2.put(KEYS[2], payload(KEYS[2]))
    t1._store[KEYS[0]].data[100] ^= 1
    with pytest.raises(CorruptChunk):
        t1.get(KEYS[0])
    t2._store[KEYS[1]].data[-1] ^= 1
    with pytest.raises(CorruptChunk):
        t2.get(KEYS[1])
    t2.put(KEYS[2], payload(KEYS[2]))  # the corrupt chunk's slot, freed
    assert t2.get(KEYS[2]) == payload(KEYS[2])
    t1.close()
    t2.close()


def test_pool_slots_are_t2s_capacity_and_one_calls_push_from_t1_in_chunks() -> None:
    capacity: dict[str, int | None] = {"T1": 4 * 100, "T2": 10 * 100 + 1}
    assert pool_slots(capacity, 100, batch=3) == 11 + 3
    assert pool_slots(capacity, 100, batch=9) == 11 + 4  # never more than T1 holds
    assert pool_slots(capacity, 100, batch=3, most=12) == 12  # nor than every chunk there is
    assert pool_slots({"T1": None, "T2": 1000}, 100, batch=2, most=7) == 7
    assert pool_slots({"T1": None, "T2": 1000}, 100, batch=2) == 12
    assert pool_slots({"T1": 100, "T2": None}, 100, batch=1) is None
    assert pool_slots({"T1": 100, "T2": 0}, 100, batch=1) == 0
    assert local_mediums(FakeTorch(), chunk_bytes=100, t2_slots=0)["T2"].description == (
        "pinned host memory, one torch allocation per chunk (a power of two each)"
    )


def test_t1_on_the_cpu_says_the_cause_it_is_given_or_what_torch_says() -> None:
    cpu = FakeTorch(devices=0)
    given = local_mediums(cpu, no_gpu="no CUDA: the NVIDIA driver 550.135 is too old")["T1"]
    assert given.description == (
        "torch CPU tensors standing in for HBM (no CUDA: the NVIDIA driver 550.135 is too old)"
    )
    plain = local_mediums(cpu)["T1"].description
    assert plain.startswith("torch CPU tensors standing in for HBM (no GPU here: torch ")

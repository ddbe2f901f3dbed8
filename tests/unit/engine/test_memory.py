"""T1 and T2 in memory (engine/memory.py), through a fake torch that records every copy and
the real CPU torch where installed: DMA between a GPU T1 and pinned T2, the slot pool, a
checksum on every chunk, a full GPU or host as a medium error."""

from __future__ import annotations

import types

import pytest

from kvtool.engine.chunkfile import CorruptChunk
from kvtool.engine.mediums import (
    MediumError,
    MemoryMedium,
    dma_pair,
    local_mediums,
    pool_slots,
    transfer,
)
from tests.unit.engine.fake_torch import Copy, FakeTorch
from tests.unit.engine.helpers import KEYS, payload


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

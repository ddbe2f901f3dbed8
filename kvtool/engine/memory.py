"""T1 and T2 in memory: ``MemoryMedium`` (torch tensors on the GPU or host, plain bytes
without torch), the pinned host ``SlotPool`` T2 lives in, and ``transfer``, T1 to T2 and back
by DMA on a side stream. ``mediums`` says what every medium promises."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from kvtool.engine.chunkfile import (
    CorruptChunk,
    aligned,
)
from kvtool.engine.medium import MediumError


class SlotPool:
    """T2's host memory: ``slots`` chunk slots of ``slot_bytes`` each (the chunk size rounded up
    to 4 KiB, chunkfile's ``ALIGN``) carved from one allocation, made on first use, so a chunk
    takes its own bytes and not the power of two torch's pinned caching host allocator would
    round each allocation up to (a 10 MiB chunk holding 16 MiB). With ``pin`` the allocation is
    a torch CPU tensor page-locked with ``cudaHostRegister`` (not from that allocator, which
    would round the one allocation up too), so copies to and from the GPU are DMA. A freed slot
    is reused; when every slot is taken ``take`` raises MediumError."""

    def __init__(self, torch: Any, slots: int, chunk_bytes: int, *, pin: bool) -> None:
        if slots < 1 or chunk_bytes < 1:
            raise ValueError(f"a pool needs slots and bytes, got {slots} x {chunk_bytes}")
        self.slots = slots
        self.slot_bytes = aligned(chunk_bytes)
        self.pin = pin
        self._torch = torch
        self._memory: Any = None
        self._free: list[int] = []

    @property
    def held_bytes(self) -> int:
        """The bytes the pool's allocation takes: ``slots x slot_bytes`` once made, else 0."""
        return 0 if self._memory is None else self.slots * self.slot_bytes

    def _allocate(self) -> None:
        torch = self._torch
        total = self.slots * self.slot_bytes
        try:
            memory = torch.empty(total, dtype=torch.uint8)
        except (MemoryError, RuntimeError) as exc:
            if not out_of_memory(torch, exc):
                raise
            raise MediumError(
                f"T2: no room for the pool's {total:,} B of host memory ({_first_line(exc)}):"
                " give T2 less capacity"
            ) from None
        if self.pin:
            error = torch.cuda.cudart().cudaHostRegister(memory.data_ptr(), total, 0)
            if int(error) != 0:
                raise MediumError(
                    f"T2: cudaHostRegister of {total:,} B failed (CUDA error {int(error)}):"
                    " give T2 less capacity, or raise the locked-memory limit (ulimit -l)"
                )
        self._memory = memory
        self._free = list(range(self.slots - 1, -1, -1))  # the lowest slot first

    def take(self, nbytes: int) -> tuple[int, Any]:
        """A free slot and a tensor view of its first ``nbytes``; MediumError when the chunk is
        bigger than a slot or every slot is taken."""
        if nbytes > self.slot_bytes:
            raise MediumError(
                f"T2: a {nbytes:,} B chunk does not fit the pool's {self.slot_bytes:,} B slots:"
                " size the pool for this chunk size"
            )
        if self._memory is None:
            self._allocate()
        if not self._free:
            raise MediumError(
                f"T2: all {self.slots:,} pool slots are taken: T2 was given more chunks than its"
                " capacity"
            )
        slot = self._free.pop()
        start = slot * self.slot_bytes
        return slot, self._memory[start : start + nbytes]

    def give(self, slot: int) -> None:
        """``slot`` is free again."""
        self._free.append(slot)

    def close(self) -> None:
        """The allocation unregistered (when pinned) and released."""
        memory, self._memory, self._free = self._memory, None, []
        if memory is not None and self.pin:
            self._torch.cuda.cudart().cudaHostUnregister(memory.data_ptr())


def pool_slots(
    capacity: Mapping[str, int | None],
    chunk_bytes: int,
    *,
    batch: int,
    most: int | None = None,
) -> int | None:
    """How many slots T2's pool needs for ``capacity`` (bytes per tier): T2's capacity in
    chunks, and room for the chunks one engine call (a lookup or an insert of at most ``batch``
    chunks) pushes from T1 into T2: the manager plans those ahead of the chunks T2 then pushes
    out in the same call, so T2 briefly holds up to that many over its capacity (never more than
    T1 holds). Never more than ``most`` (every chunk there is). None when that is unbounded,
    and 0 when T2 is off. A pool that still runs out refuses the chunk (MediumError): the
    engine reports it as a fault and the chunk stays where it was."""
    t2 = capacity.get("T2", 0)
    if t2 == 0:
        return 0
    if t2 is None:
        return most
    t1 = capacity.get("T1", 0)
    over = batch if t1 is None else min(batch, -(-t1 // chunk_bytes))
    need = -(-t2 // chunk_bytes) + max(over, 0)
    return need if most is None else min(need, most)


class _Held(NamedTuple):
    """One chunk in memory: its bytes (``bytes``, or a uint8 tensor of exactly its bytes), its
    length, the CRC-32 it had when it first entered, and its pool slot (None: no pool)."""

    data: Any
    nbytes: int
    crc: int
    slot: int | None


class MemoryMedium:
    """T1 or T2: chunks in memory, each kept with the CRC-32 it had when it entered the engine
    and checked when it is read out as bytes (``get``): a chunk that fails is deleted and
    raises CorruptChunk.

    With ``torch``: T1 is uint8 tensors on ``device`` (``cuda:0`` when CUDA is present, else CPU
    tensors standing in for HBM); T2 is host memory, pinned when CUDA is present, in a
    ``SlotPool`` of ``slots`` chunks of ``chunk_bytes`` when given (else one tensor per chunk).
    Between a CUDA T1 and a pinned T2, ``transfer`` copies tensor to tensor by DMA. Without
    torch, ``bytes``."""

    def __init__(
        self,
        tier: str,
        *,
        device: str | None = None,
        torch: Any = None,
        slots: int | None = None,
        chunk_bytes: int | None = None,
        no_gpu: str | None = None,
    ) -> None:
        self.tier = tier
        self._torch = torch
        self._store: dict[str, _Held] = {}
        self._no_gpu = no_gpu
        self._stream: Any = None
        self._pool: SlotPool | None = None
        cuda = torch is not None and bool(torch.cuda.is_available())
        if torch is None:
            self._device, self.kind = None, "bytes"
        elif tier == "T1":
            self._device = device or ("cuda:0" if cuda else "cpu")
            self.kind = "cuda" if self._device.startswith("cuda") else "cpu"
        else:
            self._device, self.kind = "cpu", "pinned" if cuda else "host"
            if slots is not None:
                if chunk_bytes is None:
                    raise ValueError("a T2 pool of slots needs chunk_bytes")
                self._pool = SlotPool(torch, slots, chunk_bytes, pin=cuda)

    @property
    def description(self) -> str:
        """What holds the chunks, in words."""
        pool = self._pool
        if self.kind == "bytes":
            return "host bytes (torch is not installed)"
        if self.kind == "cuda":
            return f"torch tensors on {self._device}; T1<->T2 by DMA on a side stream"
        if self.kind == "cpu":
            why = self._no_gpu or f"no GPU here: {_no_gpu(self._torch)}"
            return f"torch CPU tensors standing in for HBM ({why})"
        if pool is not None:
            what = "pinned host pool" if pool.pin else "host pool (torch, not pinned: no CUDA)"
            return f"{what} of {pool.slots:,} slots x {pool.slot_bytes:,} B"
        if self.kind == "pinned":
            return "pinned host memory, one torch allocation per chunk (a power of two each)"
        return "host memory (torch)"

    @property
    def held_bytes(self) -> int:
        """The memory the chunks take: the pool's whole allocation; else each chunk's bytes, a
        per-chunk pinned one rounded up to a power of two as torch's caching host allocator
        does. (On a GPU, the CUDA caching allocator's own rounding is not counted.)"""
        if self._pool is not None:
            return self._pool.held_bytes
        if self.kind == "pinned":
            return sum(1 << max(h.nbytes - 1, 0).bit_length() for h in self._store.values())
        return sum(h.nbytes for h in self._store.values())

    def _place(self, nbytes: int) -> tuple[Any, int | None]:
        """Room for a chunk of ``nbytes``: a uint8 tensor of exactly that length and its pool
        slot (None when there is no pool). MediumError when the pool is full or the memory
        has no room (a GPU another process fills: torch's out-of-memory error)."""
        torch = self._torch
        if self._pool is not None:
            slot, view = self._pool.take(nbytes)
            return view, slot
        try:
            if self.kind == "pinned":
                return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True), None
            return torch.empty(nbytes, dtype=torch.uint8, device=self._device), None
        except (MemoryError, RuntimeError) as exc:
            if not out_of_memory(torch, exc):
                raise
            where = "pinned host memory" if self.kind == "pinned" else self._device
            fix = f"give {self.tier} less capacity"
            if self.kind == "cuda":
                fix = f"another process may hold the GPU's memory (nvidia-smi lists it), or {fix}"
            raise MediumError(
                f"{self.tier}: {where} has no room for a {nbytes:,} B chunk"
                f" ({_first_line(exc)}): {fix}"
            ) from None

    def put(self, key: str, data: bytes | memoryview) -> None:
        """Keep a copy of ``data`` with its CRC-32; MediumError when the pool has no room."""
        view = memoryview(data).cast("B")
        crc = zlib.crc32(view)
        self.delete(key)  # an older copy's slot is free for this one
        if self._torch is None:
            self._store[key] = _Held(bytes(view), len(view), crc, None)
            return
        tensor, slot = self._place(len(view))
        if self.kind == "cuda":  # pageable host to device: the bytes path (a put from Python)
            torch = self._torch
            tensor.copy_(torch.frombuffer(bytearray(view), dtype=torch.uint8))
        elif len(view):
            memoryview(tensor.numpy()).cast("B")[:] = view
        self._store[key] = _Held(tensor, len(view), crc, slot)

    def get(self, key: str) -> bytes | None:
        """The chunk's bytes, checked against the CRC-32 it came with; None when absent. A
        mismatch deletes the chunk and raises CorruptChunk."""
        held = self._store.get(key)
        if held is None:
            return None
        if self._torch is None:
            data = held.data
        else:
            tensor = held.data.cpu() if self.kind == "cuda" else held.data
            data = tensor.numpy().tobytes()
        if zlib.crc32(data) != held.crc:
            self.delete(key)
            raise CorruptChunk(f"{self.tier}: checksum mismatch in memory; the chunk is deleted")
        return bytes(data)

    def delete(self, key: str) -> None:
        held = self._store.pop(key, None)
        if held is not None and held.slot is not None and self._pool is not None:
            self._pool.give(held.slot)

    def contains(self, key: str) -> bool:
        return key in self._store

    def clear(self) -> None:
        """Everything gone at once (a node lost); a pool's allocation stays for reuse."""
        for key in list(self._store):
            self.delete(key)

    def close(self) -> None:
        self.clear()
        if self._pool is not None:
            self._pool.close()

    def _side_stream(self) -> Any:
        """The CUDA stream this (device) medium's DMA runs on, made on first use."""
        if self._stream is None:
            self._stream = self._torch.cuda.Stream(device=self._device)
        return self._stream


def out_of_memory(torch: Any, exc: BaseException) -> bool:
    """``exc`` says an allocation found no room: Python's MemoryError, torch's
    ``cuda.OutOfMemoryError``, or a CUDA error that says "out of memory" (cudaHostAlloc)."""
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if isinstance(exc, MemoryError) or (isinstance(oom, type) and isinstance(exc, oom)):
        return True
    return "out of memory" in str(exc).lower()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _no_gpu(torch: Any) -> str:
    """Why torch sees no GPU, in a few words."""
    version = getattr(torch, "__version__", "?")
    if getattr(getattr(torch, "version", None), "cuda", None) is None:
        return f"torch {version} is a CPU-only build"
    return f"torch {version} finds no CUDA device"


def dma_pair(src: MemoryMedium, dst: MemoryMedium) -> bool:
    """True when a chunk can go from ``src`` to ``dst`` by DMA (``transfer``): one torch, one
    medium holding tensors on a CUDA device and the other pinned host memory."""
    return src._torch is dst._torch and {src.kind, dst.kind} == {"cuda", "pinned"}


def transfer(src: MemoryMedium, dst: MemoryMedium, key: str) -> int | None:
    """Copy chunk ``key`` from ``src`` into ``dst`` tensor to tensor (``dma_pair``): an
    asynchronous ``copy_(non_blocking=True)`` on the device medium's side stream, which first
    waits for the work queued on the device's current stream (the copy reads what it wrote),
    then an event waited on, so the bytes have landed before the caller frees the source or
    reads the copy. The chunk keeps the CRC-32 it came with (checked when ``get`` reads it
    out). The bytes copied, or None when ``src`` does not hold the chunk; MediumError when
    ``dst`` has no room (the chunk stays in ``src``)."""
    if not dma_pair(src, dst):
        raise ValueError(f"no DMA from {src.description} to {dst.description}")
    held = src._store.get(key)
    if held is None:
        return None
    torch = src._torch
    device = src if src.kind == "cuda" else dst
    dst.delete(key)
    target, slot = dst._place(held.nbytes)
    stream = device._side_stream()
    stream.wait_stream(torch.cuda.current_stream(device._device))
    with torch.cuda.stream(stream):
        target.copy_(held.data, non_blocking=True)
    done = torch.cuda.Event()
    done.record(stream)
    done.synchronize()
    dst._store[key] = _Held(target, held.nbytes, held.crc, slot)
    return held.nbytes

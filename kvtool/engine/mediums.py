"""Mediums move bytes; they decide nothing. One per tier:

* ``MemoryMedium``: T1 as torch tensors on the GPU (CPU tensors when there is none, and it
  says so), T2 as host memory (pinned when CUDA is present) in a ``SlotPool`` of chunk-sized
  slots; plain ``bytes`` without torch. Between a GPU T1 and a pinned T2 a chunk moves tensor
  to tensor by asynchronous DMA on a side stream (``transfer``), never through Python bytes.
* ``FolderMedium``: T3, a folder on a shared file system (also T4 as ``file://``): one file per
  chunk under a fanned-out content-addressed path (``chunkfile``), written to a temporary name
  in the same folder, flushed, and renamed over the final name, so a reader sees a whole file
  or none; O_DIRECT with page-aligned buffers where the file system takes it; a pool of I/O
  threads for batches, started on first use.
* ``S3Medium``: T4 through a boto3 client made on first use (``AWS_ENDPOINT_URL`` and the
  credential chain apply), retried, with the same checked format.

Reads verify every byte: a corrupt or truncated chunk raises ``CorruptChunk`` after it is moved
aside (``quarantine/`` in a folder, deleted in S3 and in memory), so it is never served twice.
In memory the check is the CRC-32 a chunk got when it first entered (``put``), carried along by
DMA and checked whenever the chunk is read out as bytes (``get``). Constructors start no
thread, open no client and allocate no pool.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from kvtool.engine.chunkfile import (
    ALIGN,
    HEADER_BYTES,
    CorruptChunk,
    aligned,
    decode,
    header,
    relative_path,
    stored_length,
)
from kvtool.errors import InputError, has_control_character

DEFAULT_IO_THREADS = 32  # the brief's FSx checklist: 32 or more I/O threads per node
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class _DirectRefused(Exception):
    """This file system refused an O_DIRECT open or read: read the file buffered."""


class MediumError(Exception):
    """A medium could not do what was asked (full, read-only, unreachable): the chunk stays
    where it was, and the engine reports the fault."""


class Medium(Protocol):
    """What the engine asks of a tier's storage."""

    tier: str

    @property
    def description(self) -> str:
        """What the medium is, in words (``torch CPU tensors standing in for HBM``)."""
        ...

    def put(self, key: str, data: bytes | memoryview) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The chunk's bytes; None when absent; CorruptChunk when it fails its checks."""
        ...

    def delete(self, key: str) -> None: ...

    def contains(self, key: str) -> bool: ...

    def close(self) -> None: ...


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


class FolderMedium:
    """Chunk files in ``root/chunks/ab/cd/<key>.kv``; corrupt ones go to ``root/quarantine``."""

    def __init__(self, tier: str, root: Path, *, io_threads: int = DEFAULT_IO_THREADS) -> None:
        self.tier = tier
        self.root = root
        self.io_threads = io_threads
        self.direct: bool | None = None  # found out on the first write
        self.quarantined = 0
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()  # each I/O thread's reusable aligned buffer

    @property
    def description(self) -> str:
        mode = {None: "O_DIRECT untried", True: "O_DIRECT", False: "buffered (no O_DIRECT)"}
        return f"files under {self.root} ({mode[self.direct]}, {self.io_threads} I/O threads)"

    def path(self, key: str) -> Path:
        """Where ``key`` lives; only ever inside ``root`` (keys are hex digests)."""
        return self.root / "chunks" / relative_path(key)

    def _buffer(self, size: int) -> mmap.mmap:
        """This thread's page-aligned I/O buffer, at least ``size`` bytes: reused, so its pages
        are faulted in once rather than on every chunk."""
        buffer: mmap.mmap | None = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < size:
            if buffer is not None:
                buffer.close()
            buffer = self._local.buffer = mmap.mmap(-1, max(aligned(size), ALIGN))
        return buffer

    def _folder(self, parts: Sequence[str], *, create: bool) -> int:
        """A descriptor of ``root/parts...``, walked one name at a time without following a
        link below ``root`` (a link there could send chunks outside it). FileNotFoundError
        when a part is missing and ``create`` is False; MediumError for a link or a file where
        a folder should be."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            raise MediumError(
                f"{self.tier}: {self.root}/{'/'.join(parts)} is not a folder of kvtool's (a link"
                f" or a file there?): {exc.strerror or exc}"
            ) from None
        return fd

    @staticmethod
    def _parts(key: str) -> tuple[tuple[str, ...], str]:
        folder_a, folder_b, name = relative_path(key).split("/")
        return ("chunks", folder_a, folder_b), name

    def put(self, key: str, data: bytes | memoryview) -> None:
        parts, name = self._parts(key)
        head = header(key, data)
        end = HEADER_BYTES + len(data)
        size = HEADER_BYTES + aligned(len(data))
        buffer = self._buffer(size)
        buffer[:HEADER_BYTES] = head
        buffer[HEADER_BYTES:end] = data
        buffer[end:size] = bytes(size - end)  # the padding is zero, as readers check
        tmp = f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            folder = self._folder(parts, create=True)
        except OSError as exc:
            raise MediumError(f"{self.tier} write of {name}: {exc.strerror or exc}") from None
        try:
            self._write(folder, tmp, buffer, size)
            # atomic: readers see the old file, the new, or none
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            raise MediumError(
                f"{self.tier} write to {self.path(key)}: {exc.strerror or exc}"
            ) from None
        finally:
            os.close(folder)

    def _write(self, folder: int, tmp: str, buffer: mmap.mmap, size: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = None
        if self.direct is not False:
            try:
                fd = os.open(tmp, flags | os.O_DIRECT, 0o644, dir_fd=folder)
                self.direct = True
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # some file systems create the file, then refuse O_DIRECT
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                self.direct = False
        if fd is None:
            fd = os.open(tmp, flags, 0o644, dir_fd=folder)
        try:
            written = 0
            while written < size:  # views are temporaries: none outlives a failed call
                written += os.write(fd, memoryview(buffer)[written:size])
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, key: str) -> bytes | None:
        """The chunk's checked bytes, or None when it is not there. Anything at its name that
        is not a valid chunk of this key (damaged, truncated, extended, a link, a folder) is
        moved to ``quarantine/`` and raises CorruptChunk; the read is bounded by the header's
        length, so a huge file is judged from its first 4 KiB."""
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except FileNotFoundError:
            return None
        try:
            return self._get(key, folder, name)
        finally:
            os.close(folder)

    def _get(self, key: str, folder: int, name: str) -> bytes | None:
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        ident = (found.st_dev, found.st_ino)
        if not stat.S_ISREG(found.st_mode):
            self._quarantine(folder, name, ident)
            raise CorruptChunk("not a regular file (a link or a folder at the chunk's name)")
        corrupt = ""
        try:
            data = self._read(key, folder, name, ident, direct=bool(self.direct))
        except _DirectRefused:
            data = self._read(key, folder, name, ident, direct=False)
        except CorruptChunk as exc:
            corrupt = str(exc)
        except FileNotFoundError:
            return None  # removed since the stat: absent
        except OSError as exc:
            raise MediumError(f"{self.tier} read of {name}: {exc.strerror or exc}") from None
        if corrupt:
            self._quarantine(folder, name, ident)
            raise CorruptChunk(corrupt)
        return data

    def _read(
        self, key: str, folder: int, name: str, ident: tuple[int, int], *, direct: bool
    ) -> bytes | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECT if direct else 0)
        try:
            fd = os.open(name, flags, dir_fd=folder)
        except OSError as exc:
            if direct and exc.errno == errno.EINVAL:
                raise _DirectRefused from None
            raise
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != ident:
                raise FileNotFoundError(name)  # replaced since the stat: read it next time
            size = st.st_size
            if size < HEADER_BYTES:
                raise CorruptChunk(f"{size} bytes: shorter than the header")
            buffer = self._buffer(HEADER_BYTES)
            self._fill(fd, buffer, 0, HEADER_BYTES, direct)
            whole = stored_length(key, memoryview(buffer)[:HEADER_BYTES])
            if size != aligned(whole):
                raise CorruptChunk(
                    f"{size:,} bytes on disk; the header says {aligned(whole):,}"
                    " (truncated or extended)"
                )
            buffer = self._buffer(size)
            self._fill(fd, buffer, 0, size, direct)
            try:
                return bytes(decode(key, memoryview(buffer)[:size]))  # checked, one copy
            except CorruptChunk as exc:
                raise CorruptChunk(str(exc)) from None  # no view of the buffer outlives this
        finally:
            os.close(fd)

    @staticmethod
    def _fill(fd: int, buffer: mmap.mmap, start: int, end: int, direct: bool) -> None:
        """Read ``[start, end)`` of the file into ``buffer``; a short file is CorruptChunk."""
        got = start
        while got < end:
            try:
                n = os.preadv(fd, [memoryview(buffer)[got:end]], got)
            except OSError as exc:
                if direct and exc.errno == errno.EINVAL:
                    raise _DirectRefused from None
                raise
            if n == 0:
                raise CorruptChunk(f"ends at {got:,} bytes of {end:,}")
            got += n

    def _quarantine(self, folder: int, name: str, ident: tuple[int, int]) -> None:
        """Move aside what was judged, and only that: another process may have renamed a good
        chunk into place since (its inode differs), and that one stays."""
        try:
            now = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return
        if (now.st_dev, now.st_ino) != ident:
            return
        try:
            target = self._folder(("quarantine",), create=True)
        except (OSError, MediumError):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
            return
        try:
            os.rename(name, f"{name}.{time.time_ns()}", src_dir_fd=folder, dst_dir_fd=target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(target)
        self.quarantined += 1

    def delete(self, key: str) -> None:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return
        try:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
        finally:
            os.close(folder)

    def contains(self, key: str) -> bool:
        parts, name = self._parts(key)
        try:
            folder = self._folder(parts, create=False)
        except (FileNotFoundError, MediumError):
            return False
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(folder)
        return stat.S_ISREG(found.st_mode)

    def put_many(self, items: Sequence[tuple[str, bytes | memoryview]]) -> list[Exception | None]:
        """Write chunks on the I/O threads; one outcome per item (None: written)."""
        return self._map(lambda item: self.put(*item), items)

    def get_many(self, keys: Sequence[str]) -> list[bytes | Exception | None]:
        """Read chunks on the I/O threads; bytes, None (absent) or the exception per key."""
        return self._map(self.get, keys)

    def _map(self, call: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="kvtool-io")

        def safe(item: Any) -> Any:
            try:
                return call(item)
            except (MediumError, CorruptChunk, ValueError) as exc:
                return exc

        return list(self._pool.map(safe, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class S3Medium:
    """Chunk objects under ``s3://bucket/prefix/ab/cd/<key>.kv``, through boto3."""

    def __init__(
        self,
        tier: str,
        url: str,
        *,
        client_factory: Callable[[], Any],
        attempts: int = 3,
        backoff_s: float = 0.2,
        deadline_s: float = 30.0,
    ) -> None:
        if not url.startswith("s3://") or not url[5:].split("/")[0]:
            raise ValueError(f"not an s3://bucket/prefix URL: {url!r}")
        self.tier = tier
        self.bucket, _, prefix = url[5:].partition("/")
        self.prefix = prefix.strip("/")
        self.description = f"S3 objects under {url} (boto3)"
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.deadline_s = deadline_s  # one operation's whole time, retries included
        self._factory = client_factory
        self._client: Any = None
        self.deleted_corrupt = 0

    def object_key(self, key: str) -> str:
        """The object key for a chunk: under the prefix, hex only."""
        return "/".join(p for p in (self.prefix, relative_path(key)) if p)

    def _call(self, operation: str, **params: Any) -> Any:
        """One S3 operation, retried up to ``attempts`` times with backoff but never past
        ``deadline_s`` in all, then MediumError."""
        if self._client is None:
            self._client = self._factory()
        last: Exception | None = None
        deadline = time.monotonic() + self.deadline_s
        tried = 0
        for attempt in range(self.attempts):
            tried += 1
            try:
                return getattr(self._client, operation)(**params)
            except Exception as exc:  # botocore's errors, connection failures
                if _not_found(exc):
                    raise
                last = exc
            pause = self.backoff_s * 2**attempt
            if attempt + 1 == self.attempts or time.monotonic() + pause >= deadline:
                break  # no sleep after the last try
            time.sleep(pause)
        raise MediumError(f"{self.tier} S3 {operation} failed {tried} times: {last}")

    def put(self, key: str, data: bytes | memoryview) -> None:
        body = header(key, data) + bytes(data)
        self._call("put_object", Bucket=self.bucket, Key=self.object_key(key), Body=body)

    def get(self, key: str) -> bytes | None:
        try:
            response = self._call("get_object", Bucket=self.bucket, Key=self.object_key(key))
        except MediumError:
            raise
        except Exception as exc:
            if _not_found(exc):
                return None
            raise
        body = response["Body"].read()
        try:
            return bytes(decode(key, body))
        except CorruptChunk:
            self.delete(key)
            self.deleted_corrupt += 1
            raise

    def delete(self, key: str) -> None:
        self._call("delete_object", Bucket=self.bucket, Key=self.object_key(key))

    def contains(self, key: str) -> bool:
        try:
            self._call("head_object", Bucket=self.bucket, Key=self.object_key(key))
        except MediumError:
            raise
        except Exception as exc:
            if _not_found(exc):
                return False
            raise
        return True

    def delete_prefix(self) -> int:
        """Delete every object under the prefix (the smoke's own); the count deleted."""
        deleted = 0
        token: dict[str, str] = {}
        while True:
            listing = self._call(
                "list_objects_v2", Bucket=self.bucket, Prefix=self.prefix + "/", **token
            )
            keys = [{"Key": o["Key"]} for o in listing.get("Contents", [])]
            if keys:
                self._call("delete_objects", Bucket=self.bucket, Delete={"Objects": keys})
                deleted += len(keys)
            if not listing.get("IsTruncated"):
                return deleted
            token = {"ContinuationToken": listing["NextContinuationToken"]}

    def close(self) -> None:
        pass


def _not_found(exc: Exception) -> bool:
    error = (getattr(exc, "response", None) or {}).get("Error") or {}
    return str(error.get("Code")) in ("404", "NoSuchKey", "NotFound")


def local_mediums(
    torch: Any,
    *,
    chunk_bytes: int | None = None,
    t2_slots: int | None = None,
    no_gpu: str | None = None,
) -> dict[str, Medium]:
    """T1 and T2 in this process's memory (torch tensors when ``torch`` is given; T2 a pool of
    ``t2_slots`` chunks of ``chunk_bytes``, see ``pool_slots``, when both are given).
    ``no_gpu`` is why torch has no CUDA device (``bench.gpu.cuda_reason``), said in T1's
    description when T1 stands in for HBM on the CPU."""
    slots = t2_slots if torch is not None and chunk_bytes is not None else None
    return {
        "T1": MemoryMedium("T1", torch=torch, no_gpu=no_gpu),
        "T2": MemoryMedium("T2", torch=torch, slots=slots or None, chunk_bytes=chunk_bytes),
    }


def check_t4_url(url: str) -> str:
    """``--t4-url`` as given, checked: ``s3://bucket/prefix`` (a bucket name S3 accepts) or
    ``file:///path`` (an absolute path to an existing folder); no control characters, which
    would reach object keys and file names. InputError naming what is wrong otherwise."""
    import re

    if has_control_character(url):
        raise InputError(f"--t4-url {url!r} holds a control character", "type the URL again")
    if url.startswith("file://"):
        folder = url[len("file://") :]
        if not folder.startswith("/"):
            raise InputError(
                f"--t4-url {url!r} names no absolute folder", "give file:///path/to/folder"
            )
        if not Path(folder).is_dir():
            raise InputError(f"--t4-url {url}: {folder} is not a folder", "create it first")
        return url
    if url.startswith("s3://"):
        bucket = url[5:].split("/")[0]
        if re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            return url
        if bucket:
            raise InputError(
                f"--t4-url {url!r}: {bucket!r} is not an S3 bucket name",
                "3 to 63 lowercase letters, digits, dots and hyphens",
            )
    raise InputError(f"--t4-url {url!r} is not s3://bucket/prefix or file:///path")


def t4_medium(
    url: str, name: str, *, io_threads: int, client_factory: Callable[[], Any]
) -> FolderMedium | S3Medium:
    """T4 from ``--t4-url`` (``check_t4_url``): ``s3://bucket/prefix`` (objects under
    ``prefix/name``) or ``file:///path`` (a folder ``name`` inside an existing ``/path``)."""
    check_t4_url(url)
    if url.startswith("file://"):
        return FolderMedium("T4", Path(url[len("file://") :]) / name, io_threads=io_threads)
    return S3Medium("T4", url.rstrip("/") + "/" + name, client_factory=client_factory)

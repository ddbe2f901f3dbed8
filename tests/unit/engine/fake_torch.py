"""A fake of the torch calls ``kvtool.engine.mediums`` makes on a CUDA machine, so its DMA
path, its pinned pool and its checksums are tested without a GPU.

Tensors hold real bytes (numpy arrays; a slice shares its parent's, as in torch). Every copy is
recorded (source and destination device, whether the host side is pinned, ``non_blocking``,
the stream). A ``non_blocking`` copy on a side stream lands only when that stream's work is
waited on (an event recorded on it and synchronized, or the stream synchronized), so code that
reads the bytes or frees the source before waiting finds them missing. Conversions between
tensors and Python bytes (``frombuffer``, ``numpy``, ``cpu`` of a device tensor) are counted,
so a test can tell the DMA path from the bytes path. ``cudaHostRegister`` marks a range pinned.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np


class Copy(NamedTuple):
    """One ``dst.copy_(src)``: the devices, whether the host side was pinned, whether it was
    asynchronous, and the stream it was queued on."""

    src: str
    dst: str
    pinned: bool
    non_blocking: bool
    stream: str
    nbytes: int


class FakeTensor:
    """A uint8 tensor: a numpy array (its bytes), a device and (host memory) pinned or not."""

    def __init__(self, fake: FakeTorch, array: np.ndarray[Any, Any], device: str, pinned: bool):
        self.fake = fake
        self.array = array
        self.device = device
        self._pinned = pinned

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index: slice) -> FakeTensor:
        return FakeTensor(self.fake, self.array[index], self.device, self._pinned)

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def is_pinned(self) -> bool:
        ptr = self.data_ptr()
        return self._pinned or any(
            start <= ptr < start + size for start, size in self.fake.registered.items()
        )

    def numpy(self) -> np.ndarray[Any, Any]:
        if self.device != "cpu":
            raise TypeError(f"can't convert {self.device} device type tensor to numpy")
        self.fake.conversions.append("numpy")
        return self.array

    def cpu(self) -> FakeTensor:
        if self.device == "cpu":
            return self
        self.fake.conversions.append("cpu")
        return FakeTensor(self.fake, self.array.copy(), "cpu", False)

    def copy_(self, src: FakeTensor, non_blocking: bool = False) -> FakeTensor:
        if len(src) != len(self):
            raise RuntimeError(f"size mismatch: {len(src)} into {len(self)}")
        fake = self.fake
        host = self if self.device == "cpu" else src
        stream = fake.cuda.current
        fake.copies.append(
            Copy(src.device, self.device, host.is_pinned(), non_blocking, stream.name, len(src))
        )
        source = src.array.copy() if stream is fake.cuda.default else src.array
        if non_blocking and stream is not fake.cuda.default:
            stream.pending.append((self.array, source))  # lands when the stream is waited on
        else:
            np.copyto(self.array, source)
        return self


class FakeStream:
    """``torch.cuda.Stream``: the copies queued on it, run when it is waited on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pending: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
        self.waited_on: list[str] = []

    def wait_stream(self, other: FakeStream) -> None:
        self.waited_on.append(other.name)

    def synchronize(self) -> None:
        for dst, src in self.pending:
            np.copyto(dst, src)
        self.pending.clear()


class FakeEvent:
    """``torch.cuda.Event``: recorded on a stream; ``synchronize`` waits for its work."""

    def __init__(self, fake: FakeTorch) -> None:
        self.fake = fake
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        self.stream = stream or self.fake.cuda.current

    def synchronize(self) -> None:
        if self.stream is None:
            raise RuntimeError("synchronize on an event never recorded")
        self.stream.synchronize()
        self.fake.synchronized += 1


class FakeCudart:
    """``torch.cuda.cudart()``: host registration, answering ``error`` (0: success)."""

    def __init__(self, fake: FakeTorch) -> None:
        self.fake = fake
        self.error = 0

    def cudaHostRegister(self, ptr: int, size: int, flags: int) -> int:  # torch's names
        if not self.error:
            self.fake.registered[ptr] = size
        self.fake.register_calls.append((ptr, size, flags))
        return self.error

    def cudaHostUnregister(self, ptr: int) -> int:
        self.fake.registered.pop(ptr)
        return 0


class FakeCuda:
    """``torch.cuda`` with ``devices`` CUDA devices (0: not available)."""

    OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})

    def __init__(self, fake: FakeTorch, devices: int) -> None:
        self.fake = fake
        self.devices = devices
        self.default = FakeStream("default")
        self.current = self.default
        self.streams: list[FakeStream] = []
        self._cudart = FakeCudart(fake)

    def is_available(self) -> bool:
        return self.devices > 0

    def Stream(self, device: str | None = None) -> FakeStream:  # torch's name
        stream = FakeStream(f"side{len(self.streams)}")
        self.streams.append(stream)
        return stream

    def current_stream(self, device: str | None = None) -> FakeStream:
        return self.current

    @contextlib.contextmanager
    def stream(self, stream: FakeStream) -> Iterator[None]:
        before, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = before

    def Event(self) -> FakeEvent:  # torch's name
        return FakeEvent(self.fake)

    def cudart(self) -> FakeCudart:
        return self._cudart


class FakeTorch:
    """The torch calls the memory mediums make, with ``devices`` CUDA devices."""

    __version__ = "9.9.9+fake"
    uint8 = "uint8"

    def __init__(self, devices: int = 1, *, gpu_bytes: int | None = None) -> None:
        """``gpu_bytes``: what the CUDA devices can allocate in all (None: no limit); past it
        an allocation raises torch's out-of-memory error (nothing is ever given back)."""
        self.gpu_bytes = gpu_bytes
        self.version = types.SimpleNamespace(cuda="12.8" if devices else None)
        self.cuda = FakeCuda(self, devices)
        self.copies: list[Copy] = []
        self.conversions: list[str] = []
        self.registered: dict[int, int] = {}
        self.register_calls: list[tuple[int, int, int]] = []
        self.synchronized = 0
        self.allocations: list[tuple[int, str, bool]] = []  # (bytes, device, pin_memory)

    def empty(
        self, size: int, *, dtype: str, device: str = "cpu", pin_memory: bool = False
    ) -> FakeTensor:
        if dtype is not self.uint8:
            raise TypeError(f"expected torch.uint8, got {dtype!r}")
        if pin_memory and not self.cuda.devices:
            raise RuntimeError("pinned memory needs a CUDA device")
        if device.startswith("cuda") and self.gpu_bytes is not None:
            if size > self.gpu_bytes:  # torch's message, shortened
                raise self.cuda.OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate {size / 2**20:.2f} MiB. GPU 0 has"
                    " a total capacity of 139.80 GiB of which 2.00 MiB is free.\nmore"
                )
            self.gpu_bytes -= size
        self.allocations.append((size, device, pin_memory))
        # garbage, as torch.empty's would be: a test cannot pass on zeros left in place
        return FakeTensor(self, np.full(size, 0xA5, dtype=np.uint8), device, pin_memory)

    def frombuffer(self, buffer: bytearray, *, dtype: str) -> FakeTensor:
        self.conversions.append("frombuffer")
        return FakeTensor(self, np.frombuffer(buffer, dtype=np.uint8), "cpu", False)

    def held(self, medium: Any, key: str) -> np.ndarray[Any, Any]:
        """The array behind ``key`` in a memory medium (to check or damage its bytes)."""
        return medium._store[key].data.array  # type: ignore[no-any-return]

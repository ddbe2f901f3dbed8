"""A fake of the torch calls ``kvtool.bench.gpu`` makes, on a simulated GPU clock.

Each device has streams with clocks in milliseconds. An operation enqueued on a device that no
spin kernel holds waits ``launch_gap_ms`` first (the host's launch gap, as on a real GPU whose
queue ran dry); behind a spin operations run back to back once the host synchronizes. A copy
costs ``cost_ms(copy)``, where ``Copy`` says what it moved and on how many GPUs copies ran at
once, so a test can model a shared PCIe switch; an SM copy (``torch.bitwise_or(src, 0, out=dst)``,
a kernel) is a ``Copy`` whose ``engine`` is ``sm``. Streams are independent (PCIe is full duplex);
``wait_event`` joins them. Every allocation, fill and copy is kept for the test to check;
tensors hold no bytes.
"""

from __future__ import annotations

import contextlib
import os
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

MiB = 2**20


class Copy(NamedTuple):
    """One ``dst.copy_(src)``: its kind (d2d, h2d, d2h), bytes, devices, whether host memory
    was pinned, the device current at the time, whether it was asynchronous, which stream it
    ran on, on how many devices copies ran at the same time (``together``), and what copied
    (``engine``: ``ce`` the copy engine, ``sm`` a kernel), with the element type it used."""

    kind: str
    nbytes: int
    dst: str
    src: str
    pinned: bool
    current: int | None
    non_blocking: bool
    stream: FakeStream
    together: int = 1
    engine: str = "ce"
    dtype: str = "uint8"


ITEMSIZE = {"uint8": 1, "int32": 4}


class FakeTensor:
    """A uint8 tensor (or an int32 view of one): its length, where it lives, whether it is
    pinned and what was written."""

    def __init__(
        self, fake: FakeTorch, nbytes: int, device: str, pinned: bool, dtype: str = "uint8"
    ) -> None:
        self.fake, self.nbytes, self.device, self.pinned = fake, nbytes, device, pinned
        self.dtype = dtype
        self.filled: int | None = None
        self.cpus = frozenset(os.sched_getaffinity(0))  # where this thread ran at allocation

    def numel(self) -> int:
        return self.nbytes // ITEMSIZE[self.dtype]

    def view(self, dtype: str) -> FakeTensor:
        """The same bytes as ``dtype``; as torch, the size must divide into its elements."""
        if self.nbytes % ITEMSIZE[dtype]:
            raise RuntimeError(f"{self.nbytes} bytes do not divide into {dtype} elements")
        view = FakeTensor(self.fake, self.nbytes, self.device, self.pinned, dtype)
        view.cpus = self.cpus
        return view

    def fill_(self, value: int) -> FakeTensor:
        self.filled = value
        return self

    def copy_(self, src: FakeTensor, non_blocking: bool = False) -> FakeTensor:
        if src.nbytes != self.nbytes:
            raise RuntimeError(f"size mismatch: {src.nbytes} into {self.nbytes}")
        self.fake.copied(self, src, non_blocking)
        return self


class FakeStream:
    """A CUDA stream on ``device``: its clock (ms) and the work still queued behind a spin."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.clock = 0.0
        self.pending: list[tuple[str, Any]] = []

    def wait_event(self, event: FakeEvent) -> None:
        self.device_cuda.enqueue(self, ("wait", event))

    device_cuda: FakeCuda  # set by FakeCuda when it makes the stream


class FakeEvent:
    """``torch.cuda.Event``: ``record`` marks its stream's clock when the work before it has
    run; ``elapsed_time`` (ms) only once both completed and the host synchronized, as in
    torch."""

    def __init__(self, fake: FakeTorch, enable_timing: bool) -> None:
        if not enable_timing:
            raise AssertionError("an event made without enable_timing=True cannot be timed")
        self.fake = fake
        self.at: float | None = None
        self.completed = False

    def record(self, stream: FakeStream | None = None) -> None:
        cuda = self.fake.cuda
        cuda.enqueue(stream or cuda.current_stream(), ("event", self))

    def synchronize(self) -> None:
        self.fake.cuda.host_waits()

    def elapsed_time(self, end: FakeEvent) -> float:
        if self.at is None or end.at is None or not (self.completed and end.completed):
            raise RuntimeError("elapsed_time before both events were recorded and completed")
        return end.at - self.at


class FakeCuda:
    """``torch.cuda`` with ``names`` as the visible devices (none: CUDA is not available).

    A spin kernel (``_sleep``) holds its device: what is enqueued there next waits, without
    launch gaps, until the host synchronizes; then every held device's work runs, and copies
    count as ``together`` on the devices that had copies queued. On a device no spin holds,
    each operation first waits ``launch_gap_ms``."""

    OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})

    def __init__(self, fake: FakeTorch, names: Sequence[str], sleep: bool) -> None:
        self.fake = fake
        self.names = list(names)
        self.current: int | None = None
        self.synchronized = 0
        self.emptied = 0
        self.sleeps = 0
        self.held: set[int] = set()
        self.all_streams: list[FakeStream] = []
        self.streams = {d: self._stream(d) for d in range(len(names))}
        self._override: dict[int, FakeStream] = {}
        self.free = {d: 80 * 2**30 for d in range(len(names))}
        self.warning = ""
        self.events: list[FakeEvent] = []
        self.cycles: list[int] = []
        if sleep:
            self._sleep = self._spin

    def _stream(self, device: int) -> FakeStream:
        stream = FakeStream(device)
        stream.device_cuda = self
        self.all_streams.append(stream)
        return stream

    def is_available(self) -> bool:
        if self.warning:
            warnings.warn(self.warning, UserWarning, stacklevel=2)
        return bool(self.names)

    def device_count(self) -> int:
        return len(self.names)

    def get_device_name(self, device: int) -> str:
        return self.names[device]

    def get_device_properties(self, device: int) -> Any:
        return types.SimpleNamespace(
            name=self.names[device],
            uuid=f"{device:08x}-aaaa-bbbb-cccc-dddddddddddd",
            pci_domain_id=0,
            pci_bus_id=0x18 + 0x10 * device,
            pci_device_id=0,
            total_memory=80 * 2**30,
        )

    def mem_get_info(self, device: int) -> tuple[int, int]:
        return self.free[device], 80 * 2**30

    @contextlib.contextmanager
    def device(self, device: int) -> Iterator[None]:
        before, self.current = self.current, device
        try:
            yield
        finally:
            self.current = before

    def current_stream(self) -> FakeStream:
        assert self.current is not None, "a CUDA call with no current device"
        return self._override.get(self.current) or self.streams[self.current]

    def Stream(self) -> FakeStream:  # torch's name for it
        assert self.current is not None
        return self._stream(self.current)

    @contextlib.contextmanager
    def stream(self, stream: FakeStream) -> Iterator[None]:
        before = self._override.get(stream.device)
        self._override[stream.device] = stream
        try:
            yield
        finally:
            if before is None:
                del self._override[stream.device]
            else:
                self._override[stream.device] = before

    def _spin(self, cycles: int) -> None:
        self.sleeps += 1
        self.cycles.append(cycles)
        stream = self.current_stream()
        self.held.add(stream.device)
        self.enqueue(stream, ("cost", cycles / 2e6))  # the spin itself, at 2 GHz

    def enqueue(self, stream: FakeStream, op: tuple[str, Any]) -> None:
        if op[0] == "event":
            self.events.append(op[1])
        if stream.device in self.held or stream.pending:
            stream.pending.append(op)
            return
        stream.clock += self.fake.launch_gap_ms
        stream.pending.append(op)
        self._run(stream, together=1)

    def _run(self, stream: FakeStream, together: int) -> bool:
        """Run ``stream``'s queued work until it waits on an event not yet reached."""
        while stream.pending:
            kind, what = stream.pending[0]
            if kind == "wait":
                if what.at is None:
                    return False
                stream.clock = max(stream.clock, what.at)
            elif kind == "event":
                what.at = stream.clock
            elif kind == "cost":
                stream.clock += what
            else:
                stream.clock += self.fake.cost_ms(what._replace(together=together))
            stream.pending.pop(0)
        return True

    def host_waits(self) -> None:
        """The host synchronized: every spin has ended; all queued work runs."""
        self.held.clear()
        busy = {s.device for s in self.all_streams if any(k == "copy" for k, _ in s.pending)}
        waiting = [s for s in self.all_streams if s.pending]
        while waiting:
            left = [s for s in waiting if not self._run(s, together=max(len(busy), 1))]
            assert len(left) < len(waiting), "streams wait on events that are never recorded"
            waiting = left
        for event in self.events:
            if event.at is not None:
                event.completed = True

    def synchronize(self) -> None:
        self.synchronized += 1
        self.host_waits()

    def empty_cache(self) -> None:
        self.emptied += 1

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # torch's name for it
        return FakeEvent(self.fake, enable_timing)


class FakeTorch:
    """The parts of torch that ``kvtool.bench.gpu`` calls. ``cuda_version`` None is a CPU
    build; ``sleep`` False a torch without ``torch.cuda._sleep``; ``fail`` maps a device to
    the exception its first allocation raises."""

    __version__ = "9.9.9+fake"
    uint8 = "uint8"
    int32 = "int32"

    def __init__(
        self,
        devices: Sequence[str] = (),
        *,
        cost_ms: Callable[[Copy], float] = lambda c: 1.0,
        launch_gap_ms: float = 0.0,
        cuda_version: str | None = "13.0",
        sleep: bool = True,
        fail: dict[int, BaseException] | None = None,
    ) -> None:
        self.version = types.SimpleNamespace(cuda=cuda_version)
        self.cuda = FakeCuda(self, devices, sleep)
        self.cost_ms = cost_ms
        self.launch_gap_ms = launch_gap_ms
        self.fail = dict(fail or {})
        self.copies: list[Copy] = []
        self.allocations: list[FakeTensor] = []
        self.host_cache_emptied = 0
        self._C = types.SimpleNamespace(_host_emptyCache=self._empty_host_cache)

    def _empty_host_cache(self) -> None:
        self.host_cache_emptied += 1

    def empty(
        self, size: int, *, dtype: str, device: str = "cpu", pin_memory: bool = False
    ) -> FakeTensor:
        if dtype is not self.uint8:
            raise TypeError(f"expected torch.uint8, got {dtype!r}")
        if device.startswith("cuda:"):
            index = int(device[5:])
            if index >= len(self.cuda.names):
                raise RuntimeError(f"invalid device ordinal: {device}")
            if index in self.fail:
                raise self.fail.pop(index)
        if pin_memory and not self.cuda.names:
            raise RuntimeError("pinned memory needs a CUDA device")
        tensor = FakeTensor(self, size, device, pin_memory)
        self.allocations.append(tensor)
        return tensor

    def empty_like(self, tensor: FakeTensor) -> FakeTensor:
        return self.empty(tensor.nbytes, dtype=self.uint8, device=tensor.device)

    def copied(self, dst: FakeTensor, src: FakeTensor, non_blocking: bool) -> None:
        to, source = (("d" if t.device.startswith("cuda") else "h") for t in (dst, src))
        host = dst if to == "h" else src
        gpu = dst if to == "d" else src
        stream = self.cuda.current_stream()
        assert stream.device == int(gpu.device[5:]), "a copy enqueued on another GPU's stream"
        copy = Copy(
            f"{source}2{to}", dst.nbytes, dst.device, src.device, host.pinned,
            self.cuda.current, non_blocking, stream,
        )  # fmt: skip
        self.copies.append(copy)
        self.cuda.enqueue(stream, ("copy", copy))

    def bitwise_or(self, src: FakeTensor, other: int, *, out: FakeTensor) -> FakeTensor:
        """An elementwise kernel on the GPU that holds both tensors: an SM copy when
        ``other`` is 0."""
        if other != 0 or src.dtype != out.dtype or src.nbytes != out.nbytes:
            raise AssertionError(f"not an identity copy: {src.dtype} | {other} into {out.dtype}")
        if not (src.device == out.device and src.device.startswith("cuda:")):
            raise RuntimeError(f"a kernel on {src.device} writing {out.device}")
        stream = self.cuda.current_stream()
        assert stream.device == int(src.device[5:]), "a kernel launched on another GPU's stream"
        copy = Copy(
            "d2d", out.nbytes, out.device, src.device, False, self.cuda.current, True, stream,
            engine="sm", dtype=src.dtype,
        )  # fmt: skip
        self.copies.append(copy)
        self.cuda.enqueue(stream, ("copy", copy))
        return out


def scripted(ms: Sequence[float]) -> Callable[[Copy], float]:
    """A cost that takes each copy's milliseconds from ``ms`` in turn."""
    it = iter(ms)
    return lambda _copy: next(it)


class SysfsHost:
    """A ``Host`` whose ``read`` answers from ``files`` (path -> text) and records the keys."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.keys: list[str] = []

    def read(self, key: str, path: str) -> str | None:
        self.keys.append(key)
        return self.files.get(path)


def gpu_sysfs(
    pci: str, *, numa: str = "0\n", cpus: str = "0-1\n", now: str = "32.0 GT/s PCIe\n",
    width: str = "16\n", top: str = "32.0 GT/s PCIe\n", top_width: str = "16\n",
) -> dict[str, str]:  # fmt: skip
    """One GPU's sysfs files in the kernel's formats (``32.0 GT/s PCIe``, ``16``, ``0-47``)."""
    base = f"/sys/bus/pci/devices/{pci}"
    return {
        f"{base}/numa_node": numa,
        f"{base}/local_cpulist": cpus,
        f"{base}/current_link_speed": now,
        f"{base}/current_link_width": width,
        f"{base}/max_link_speed": top,
        f"{base}/max_link_width": top_width,
    }

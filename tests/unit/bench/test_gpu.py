"""T1 and T2 (``kvtool.bench.gpu``): finding torch, the SKIP without it or without CUDA, the
CUDA paths (per-device loops, CUDA-event timing with the warm-up left out, pinned and pageable
host memory, read+write bytes for device-to-device) through a fake ``torch`` whose CUDA events
run on a scripted GPU clock, and the host-only copy beside numpy's, timed on a scripted host
clock and with the real CPU torch."""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest

from kvtool.bench import gpu
from kvtool.bench.result import BenchResult, latency_of

MiB = 2**20


class Copy(NamedTuple):
    """One ``dst.copy_(src)`` as the fake saw it: the kind, the bytes, the devices, whether
    host memory was pinned, the device current at the time and whether it was asynchronous."""

    kind: str  # d2d, h2d, d2h or h2h
    nbytes: int
    dst: str
    src: str
    pinned: bool
    current: int | None
    non_blocking: bool


class FakeTensor:
    """A uint8 tensor that holds no bytes: its length, where it lives and whether it is pinned."""

    def __init__(self, fake: FakeTorch, nbytes: int, device: str, pinned: bool) -> None:
        self.fake = fake
        self.nbytes = nbytes
        self.device = device
        self.pinned = pinned

    def copy_(self, src: FakeTensor, non_blocking: bool = False) -> FakeTensor:
        if src.nbytes != self.nbytes:
            raise RuntimeError(f"size mismatch: {src.nbytes} into {self.nbytes}")
        self.fake.copied(self, src, non_blocking)
        return self


class FakeEvent:
    """``torch.cuda.Event``: ``record`` reads the fake GPU clock; ``elapsed_time`` is in ms and,
    as in torch, only valid once both were recorded and the end was synchronized."""

    def __init__(self, fake: FakeTorch, enable_timing: bool) -> None:
        if not enable_timing:
            raise AssertionError("an event made without enable_timing=True cannot be timed")
        self.fake = fake
        self.at: float | None = None
        self.synchronized = False

    def record(self) -> None:
        self.at = self.fake.gpu_ms

    def synchronize(self) -> None:
        self.synchronized = True

    def elapsed_time(self, end: FakeEvent) -> float:
        if self.at is None or end.at is None or not end.synchronized:
            raise RuntimeError("elapsed_time before both events were recorded and completed")
        return end.at - self.at


class FakeCuda:
    """``torch.cuda`` with ``names`` as the visible devices (none: CUDA is not available)."""

    def __init__(self, fake: FakeTorch, names: Sequence[str]) -> None:
        self.fake = fake
        self.names = list(names)
        self.current: int | None = None
        self.synchronized = 0

    def is_available(self) -> bool:
        return bool(self.names)

    def device_count(self) -> int:
        return len(self.names)

    def get_device_name(self, device: int) -> str:
        return self.names[device]

    @contextlib.contextmanager
    def device(self, device: int) -> Iterator[None]:
        before, self.current = self.current, device
        try:
            yield
        finally:
            self.current = before

    def synchronize(self) -> None:
        self.synchronized += 1

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # torch's name for it
        return FakeEvent(self.fake, enable_timing)


class FakeTorch:
    """The parts of torch that ``kvtool.bench.gpu`` calls. Each copy advances the GPU clock by
    ``cost_ms(copy)``; every allocation and copy is kept for the test to check."""

    __version__ = "9.9.9+fake"
    uint8 = "uint8"

    def __init__(
        self, devices: Sequence[str] = (), *, cost_ms: Callable[[Copy], float] = lambda c: 1.0
    ) -> None:
        self.cuda = FakeCuda(self, devices)
        self.cost_ms = cost_ms
        self.gpu_ms = 0.0
        self.copies: list[Copy] = []
        self.allocations: list[FakeTensor] = []

    def empty(
        self, size: int, *, dtype: str, device: str = "cpu", pin_memory: bool = False
    ) -> FakeTensor:
        if dtype is not self.uint8:
            raise TypeError(f"expected torch.uint8, got {dtype!r}")
        if device.startswith("cuda:") and int(device[5:]) >= len(self.cuda.names):
            raise RuntimeError(f"invalid device ordinal: {device}")
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
        copy = Copy(
            f"{source}2{to}", dst.nbytes, dst.device, src.device, host.pinned,
            self.cuda.current, non_blocking,
        )  # fmt: skip
        self.copies.append(copy)
        self.gpu_ms += self.cost_ms(copy)


def _scripted(ms: Sequence[float]) -> Callable[[Copy], float]:
    """A cost that takes each copy's milliseconds from ``ms`` in turn."""
    it = iter(ms)
    return lambda _copy: next(it)


class SteppedClock:
    """``time.perf_counter`` for ``_cpu_timed``: calls come in (start, end) pairs, and each
    pair is ``durations`` apart, in turn."""

    def __init__(self, durations: Sequence[float]) -> None:
        self.durations = iter(durations)
        self.now = 100.0
        self.started = False

    def perf_counter(self) -> float:
        if self.started:
            self.now += next(self.durations)
        self.started = not self.started
        return self.now


class CpuTorch:
    """torch without CUDA for ``host_copy``: ``from_numpy``, ``empty_like`` and ``copy_`` on
    numpy arrays, so a test can see what the torch copy wrote."""

    __version__ = "9.9.9+cpu-fake"

    class Tensor:
        def __init__(self, array: np.ndarray[Any, Any]) -> None:
            self.array = array

        def copy_(self, src: CpuTorch.Tensor) -> CpuTorch.Tensor:
            np.copyto(self.array, src.array)
            return self

    def __init__(self) -> None:
        self.cuda = types.SimpleNamespace(is_available=lambda: False)
        self.made: list[CpuTorch.Tensor] = []

    def from_numpy(self, array: np.ndarray[Any, Any]) -> CpuTorch.Tensor:
        tensor = self.Tensor(array)  # shares the array, as torch.from_numpy does
        self.made.append(tensor)
        return tensor

    def empty_like(self, tensor: CpuTorch.Tensor) -> CpuTorch.Tensor:
        made = self.Tensor(np.zeros_like(tensor.array))
        self.made.append(made)
        return made


def _small_host_copy(monkeypatch: pytest.MonkeyPatch, size: int = MiB) -> list[dict[str, Any]]:
    """Make ``run_t2``'s host-only fallback copy ``size`` bytes instead of 256 MiB (the real
    ``host_copy`` still runs); returns the keyword arguments of each call."""
    calls: list[dict[str, Any]] = []
    real = gpu.host_copy

    @functools.wraps(real)
    def small(**kwargs: Any) -> list[BenchResult]:
        calls.append(kwargs)
        return real(**{**kwargs, "size": size})

    monkeypatch.setattr(gpu, "host_copy", small)
    return calls


# --- finding torch ------------------------------------------------------------------------------


def test_torch_or_none_is_none_when_torch_cannot_be_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert gpu.torch_or_none() is None


@pytest.mark.torch
def test_torch_or_none_returns_the_installed_torch() -> None:
    import torch

    assert gpu.torch_or_none() is torch


# --- without torch, or without CUDA -------------------------------------------------------------


def test_without_torch_t1_is_one_skip_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "torch_or_none", lambda: None)
    (result,) = gpu.run_t1()
    assert (result.tier, result.op, result.status) == ("t1", "d2d", "skip")
    assert result.reason == gpu.NO_TORCH
    assert "pip install torch==2.13.0" in result.reason
    assert result.bytes_per_s is None
    assert result.latency_us is None


def test_without_torch_t2_is_numpys_host_copy_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "torch_or_none", lambda: None)
    calls = _small_host_copy(monkeypatch)
    (result,) = gpu.run_t2(repeats=3)
    assert calls[0]["torch"] is None
    assert calls[0]["repeats"] == 3
    assert (result.tier, result.op, result.status, result.variant) == ("t2", "copy", "ok",
                                                                       "reference")  # fmt: skip
    assert result.tool == f"numpy {np.__version__} (reference)"
    assert result.block_bytes == MiB
    assert result.bytes_per_s is not None
    assert result.bytes_per_s > 0


def test_t1_skips_when_cuda_is_not_available_and_allocates_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(devices=())
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    (result,) = gpu.run_t1(sizes=(MiB,))
    assert result.status == "skip"
    assert result.reason == (
        "no CUDA device (torch.cuda.is_available() is False): HBM cannot be measured here"
    )
    assert result.bytes_per_s is None
    assert fake.allocations == []
    assert fake.copies == []


def test_t2_without_cuda_hands_torch_to_the_host_only_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = CpuTorch()
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    calls = _small_host_copy(monkeypatch)
    results = gpu.run_t2(repeats=2)
    assert calls[0]["torch"] is fake
    assert [(r.variant, r.tool) for r in results] == [
        ("host-only", "torch 9.9.9+cpu-fake (CPU)"),
        ("reference", f"numpy {np.__version__} (reference)"),
    ]


@pytest.mark.torch
@pytest.mark.no_gpu
def test_t1_with_the_cpu_torch_skips_because_there_is_no_cuda_device() -> None:
    (result,) = gpu.run_t1(sizes=(MiB,))
    assert result.status == "skip"
    assert result.reason.startswith("no CUDA device (torch.cuda.is_available() is False)")
    assert result.bytes_per_s is None


@pytest.mark.torch
@pytest.mark.no_gpu
def test_t2_with_the_cpu_torch_is_a_host_only_copy_beside_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    calls = _small_host_copy(monkeypatch)
    messages: list[str] = []
    host, reference = gpu.run_t2(repeats=3, progress=messages.append)
    assert calls[0]["torch"] is torch
    assert messages == ["T2 host-only copy, 1 MiB (no CUDA device)"]
    assert (host.variant, reference.variant) == ("host-only", "reference")
    assert host.tool == f"torch {torch.__version__} (CPU)"
    assert reference.tool == f"numpy {np.__version__} (reference)"
    for result in (host, reference):
        assert (result.tier, result.op, result.status) == ("t2", "copy", "ok")
        assert result.block_bytes == MiB
        assert result.threads == 1
        assert result.bytes_per_s is not None
        assert result.bytes_per_s > 0
        assert result.latency_us is not None
        assert 0 < result.latency_us.p50 <= result.latency_us.p99 <= result.latency_us.p999
    assert host.bytes_per_s is not None
    assert reference.bytes_per_s is not None
    ratio = host.bytes_per_s / reference.bytes_per_s
    assert f"({ratio:.2f}x numpy's in the same run); not the host-to-GPU link" in host.note


# --- the host-only copy on a scripted clock -----------------------------------------------------


def test_host_copy_reports_medians_and_the_ratio_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # numpy's three copies, then torch's: medians 2 ms and 4 ms, so torch runs at 0.50x numpy
    clock = SteppedClock([0.004, 0.001, 0.002, 0.008, 0.003, 0.004])
    monkeypatch.setattr(gpu, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    fake = CpuTorch()
    messages: list[str] = []
    host, reference = gpu.host_copy(repeats=3, torch=fake, size=MiB, progress=messages.append)
    assert messages == ["T2 host-only copy, 1 MiB (no CUDA device)"]
    assert reference.bytes_per_s == pytest.approx(MiB / 0.002)
    assert host.bytes_per_s == pytest.approx(MiB / 0.004)
    assert host.latency_us == pytest.approx(latency_of([0.008, 0.003, 0.004]))
    assert host.latency_us is not None
    assert host.latency_us.p50 == pytest.approx(4000)
    assert host.latency_us.p99 == pytest.approx(7920)  # 4 ms + 0.98 x (8 ms - 4 ms)
    assert reference.latency_us == pytest.approx(latency_of([0.004, 0.001, 0.002]))
    assert "(0.50x numpy's in the same run)" in host.note
    assert host.tool == "torch 9.9.9+cpu-fake (CPU)"
    assert reference.note == "host-only reference: numpy.copyto of the same buffer size, same run"
    _src, dst = fake.made
    assert dst.array.nbytes == MiB
    assert bool((dst.array == 1).all())  # torch's copy_ really copied the source's ones


def test_host_copy_without_torch_is_only_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SteppedClock([0.001, 0.003, 0.002])
    monkeypatch.setattr(gpu, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    (reference,) = gpu.host_copy(repeats=3, size=2 * MiB)
    assert reference.variant == "reference"
    assert reference.block_bytes == 2 * MiB
    assert reference.bytes_per_s == pytest.approx(2 * MiB / 0.002)


# --- T1 on fake GPUs ----------------------------------------------------------------------------


def _per_mib(ms: dict[str, float]) -> Callable[[Copy], float]:
    """Each copy costs ``ms[device]`` milliseconds per MiB on the device it targets."""
    return lambda copy: copy.nbytes / MiB * ms[copy.dst]


def test_t1_copies_on_every_device_at_every_size_timed_by_cuda_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["FakeGPU-A", "FakeGPU-B"],
                     cost_ms=_per_mib({"cuda:0": 0.5, "cuda:1": 0.25}))  # fmt: skip
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    messages: list[str] = []
    results = gpu.run_t1(repeats=3, sizes=(MiB, 4 * MiB), progress=messages.append)
    assert messages == [
        "T1 d2d on GPU 0 (FakeGPU-A), 1 MiB",
        "T1 d2d on GPU 0 (FakeGPU-A), 4 MiB",
        "T1 d2d on GPU 1 (FakeGPU-B), 1 MiB",
        "T1 d2d on GPU 1 (FakeGPU-B), 4 MiB",
    ]
    assert [(r.note.split(":")[0], r.block_bytes) for r in results] == [
        ("GPU 0 FakeGPU-A", MiB),
        ("GPU 0 FakeGPU-A", 4 * MiB),
        ("GPU 1 FakeGPU-B", MiB),
        ("GPU 1 FakeGPU-B", 4 * MiB),
    ]
    for result, ms_per_mib in zip(results, (0.5, 0.5, 0.25, 0.25), strict=True):
        assert (result.tier, result.op, result.status) == ("t1", "d2d", "ok")
        assert result.tool == "torch 9.9.9+fake"
        assert result.threads == 1
        seconds = result.block_bytes / MiB * ms_per_mib / 1000
        # a copy reads and writes every byte: 2 x size / time
        assert result.bytes_per_s == pytest.approx(2 * result.block_bytes / seconds)
        assert result.latency_us == pytest.approx((seconds * 1e6,) * 3)
    assert results[0].note == (
        "GPU 0 FakeGPU-A: copy_ of 1 MiB, CUDA events, 3 repeats, read+write bytes"
    )
    # a warm-up copy and 3 timed ones per device and size, each on its own device, async
    assert len(fake.copies) == 4 * 4
    assert all(c.kind == "d2d" and c.dst == c.src for c in fake.copies)
    assert all(c.current == int(c.dst[5:]) for c in fake.copies)
    assert all(c.non_blocking for c in fake.copies)
    assert fake.cuda.synchronized == 4  # after each warm-up
    assert {(t.device, t.nbytes) for t in fake.allocations} == {
        (f"cuda:{d}", n) for d in (0, 1) for n in (MiB, 4 * MiB)
    }


def test_t1_reports_the_median_repeat_and_leaves_the_warm_up_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["FakeGPU"], cost_ms=_scripted([100.0, 5.0, 1.0, 4.0, 2.0, 3.0]))
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    (result,) = gpu.run_t1(repeats=5, sizes=(8 * MiB,))
    assert result.bytes_per_s == pytest.approx(2 * 8 * MiB / 0.003)  # the median: 3 ms
    assert result.latency_us == pytest.approx(latency_of([0.005, 0.001, 0.004, 0.002, 0.003]))
    assert result.latency_us is not None
    assert result.latency_us.p999 < 5000.1  # the 100 ms warm-up is not a sample
    assert result.note.endswith("5 repeats, read+write bytes")


# --- T2 on fake GPUs ----------------------------------------------------------------------------

LINK = {("h2d", True): 50e9, ("d2h", True): 40e9, ("h2d", False): 20e9, ("d2h", False): 10e9}


def _link(copy: Copy) -> float:
    """Milliseconds for a copy over a link as fast as ``LINK`` says for its direction and
    host memory."""
    return copy.nbytes / LINK[(copy.kind, copy.pinned)] * 1000


def test_t2_measures_pinned_and_pageable_both_ways_on_every_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["FakeGPU-A", "FakeGPU-B"], cost_ms=_link)
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    messages: list[str] = []
    results = gpu.run_t2(repeats=3, progress=messages.append)
    expected = [
        (device, op, kind)
        for device in (0, 1)
        for kind in ("pinned", "pageable")
        for op in ("h2d", "d2h")
    ]
    assert [(r.note.split(",")[0], r.op, r.variant) for r in results] == [
        (f"GPU {d}", op, kind) for d, op, kind in expected
    ]
    assert messages == [f"T2 {op} {kind} on GPU {d}, 256 MiB" for d, op, kind in expected]
    for result in results:
        assert (result.tier, result.status) == ("t2", "ok")
        assert result.tool == "torch 9.9.9+fake"
        assert result.block_bytes == gpu.T2_SIZE == 256 * MiB
        assert result.threads == 1
        # host<->device bytes cross the link once: size / time
        assert result.bytes_per_s == pytest.approx(LINK[(result.op, result.variant == "pinned")])
    assert results[-1].note == "GPU 1, pageable host memory, CUDA events, 3 repeats"
    assert "host-only" not in {r.variant for r in results}
    # one GPU buffer per device, one pinned and one pageable host buffer per device
    placed = [(t.device, t.pinned) for t in fake.allocations]
    assert placed == [
        (where, pinned)
        for device in ("cuda:0", "cuda:1")
        for where, pinned in ((device, False), ("cpu", True), ("cpu", False))
    ]
    assert all(t.nbytes == gpu.T2_SIZE for t in fake.allocations)
    # per device and buffer: (1 warm-up + 3) x h2d and d2h, with that device current
    assert len(fake.copies) == 2 * 2 * 2 * 4
    for copy in fake.copies:
        gpu_side = copy.dst if copy.kind == "h2d" else copy.src
        assert copy.current == int(gpu_side[5:])
        assert copy.non_blocking

"""T1 and T2 (``kvtool.bench.gpu``): finding torch, the cause when there is no CUDA, which GPU
each row ran on, and the CUDA paths through ``fake_cuda``'s fake torch on a simulated GPU clock:
nvbandwidth's timing (a spin kernel holding the stream, warm-up, loops between events, median of
three), read+write bytes for T1, pinned copies each way and both at once at each size on the
GPU's own NUMA node, pageable copies of written memory, all GPUs at once, and a full, busy or
failing GPU as its own row while the others run. The host-only copy beside numpy's runs on a
scripted host clock and with the real CPU torch."""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from kvtool.bench import gpu
from kvtool.bench.measured import measured_tiers
from kvtool.bench.result import BenchResult, GpuId, PcieLink, latency_of
from kvtool.probe.host import LocalHost
from tests.unit.bench.fake_cuda import Copy, FakeTorch, SysfsHost, gpu_sysfs, scripted

MiB = 2**20
PCI = ["0000:18:00.0", "0000:28:00.0"]  # the fake's GPUs 0 and 1
DRIVER = "/proc/driver/nvidia/version"
OPEN_580 = (  # /proc/driver/nvidia/version of an open kernel module (a public log, verbatim)
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build "
    " (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04.2) \n"
)
PROPRIETARY_550 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  Fri Jan 10 20:00:00 UTC 2025\n"
)


def node(*sysfs: dict[str, str], driver: str = OPEN_580) -> SysfsHost:
    """A host with the NVIDIA driver loaded and the GPUs' sysfs files."""
    files = {DRIVER: driver}
    for one in sysfs:
        files.update(one)
    return SysfsHost(files)


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


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
    """Make the host-only fallback copy ``size`` bytes instead of 256 MiB (the real
    ``host_copy`` still runs); returns the keyword arguments of each call."""
    calls: list[dict[str, Any]] = []
    real = gpu.host_copy

    @functools.wraps(real)
    def small(**kwargs: Any) -> list[BenchResult]:
        calls.append(kwargs)
        return real(**{**kwargs, "size": size})

    monkeypatch.setattr(gpu, "host_copy", small)
    return calls


def _use(monkeypatch: pytest.MonkeyPatch, fake: Any) -> None:
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# --- finding torch, and why there is no CUDA ---------------------------------------------------


def test_torch_or_none_is_none_when_torch_cannot_be_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert gpu.torch_or_none() is None


@pytest.mark.torch
def test_torch_or_none_returns_the_installed_torch() -> None:
    import torch

    assert gpu.torch_or_none() is torch


def _reason(**given: Any) -> str:
    fields = {"torch_version": "2.13.0", "cuda_version": "13.0", "driver": "580.95.05",
              "visible": None, **given}  # fmt: skip
    return gpu.no_cuda_reason(**fields)


def test_a_cpu_build_of_torch_is_named_with_or_without_a_driver() -> None:
    assert _reason(torch_version="2.13.0+cpu", cuda_version=None, driver=None) == (
        "no CUDA: torch 2.13.0+cpu is a CPU build (torch.version.cuda is None) and no NVIDIA"
        " driver is loaded here"
    )
    on_gpu = _reason(torch_version="2.13.0+cpu", cuda_version=None, driver="580.95.05")
    assert "is a CPU build (torch.version.cuda is None) on a node with NVIDIA driver 580.95.05"
    assert "pip install torch==2.13.0" in on_gpu
    assert "driver R580 or newer" in on_gpu


def test_a_driver_too_old_for_torchs_cuda_is_named_with_what_it_needs() -> None:
    old = _reason(driver="575.57.08")
    assert old.startswith("no CUDA: NVIDIA driver 575.57.08 is too old for torch 2.13.0")
    assert "built for CUDA 13.0 (it needs 580.65.06 or newer)" in old
    assert "needs 525.60.13" in _reason(cuda_version="12.8", driver="520.61.05")
    # new enough: not blamed on the driver
    assert "too old" not in _reason(cuda_version="12.8", driver="550.135")
    # a CUDA major kvtool has no table for: torch's own warning decides
    said = "CUDA initialization: The NVIDIA driver on your system is too old (found version 13000)"
    assert _reason(cuda_version="14.0", warning=said) == (
        f"no CUDA: the NVIDIA driver 580.95.05 is too old for torch 2.13.0: {said}"
    )


def test_no_driver_and_hidden_gpus_are_named() -> None:
    assert _reason(driver=None).startswith(
        "no CUDA: no NVIDIA driver is loaded (/proc/driver/nvidia/version is missing)"
    )
    for hidden in ("", "-1", "-1,0", " "):
        assert f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU" in _reason(visible=hidden)
    assert "hides" not in _reason(visible="0,1")
    generic = _reason(visible="0", warning="CUDA initialization: no CUDA-capable device")
    assert generic == (
        "no CUDA device: torch 2.13.0 (CUDA 13.0) with driver 580.95.05 sees no GPU"
        " (torch.cuda.is_available() is False): CUDA initialization: no CUDA-capable device"
    )


def test_cuda_reason_reads_the_driver_and_torchs_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTorch(devices=(), cuda_version="13.0")
    fake.cuda.warning = "CUDA initialization: The NVIDIA driver on your system is too old"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    host = node(driver=PROPRIETARY_550)
    assert gpu.cuda_reason(fake, host) == (
        "no CUDA: NVIDIA driver 550.135 is too old for torch 9.9.9+fake, built for CUDA 13.0 (it"
        " needs 580.65.06 or newer); update the driver, or install a torch built for an older"
        " CUDA"
    )
    assert host.keys == ["nvidia_driver_version"]
    fake.cuda.warning = ""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in str(gpu.cuda_reason(fake, node()))
    assert gpu.cuda_reason(FakeTorch(["G"]), SysfsHost()) is None


def test_without_torch_t1_is_one_skip_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "torch_or_none", lambda: None)
    (result,) = gpu.run_t1(SysfsHost())
    assert (result.tier, result.op, result.status) == ("t1", "d2d", "skip")
    assert result.reason == gpu.NO_TORCH
    assert result.bytes_per_s is None


def test_without_torch_t2_is_numpys_host_copy_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "torch_or_none", lambda: None)
    calls = _small_host_copy(monkeypatch)
    (result,) = gpu.run_t2(SysfsHost(), repeats=3)
    assert calls[0]["torch"] is None
    assert calls[0]["why"] == gpu.NO_TORCH
    assert (result.variant, result.tool) == ("reference", f"numpy {np.__version__} (reference)")
    assert result.bytes_per_s is not None
    assert result.bytes_per_s > 0


def test_t1_without_cuda_says_why_and_allocates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTorch(devices=(), cuda_version=None)
    _use(monkeypatch, fake)
    (result,) = gpu.run_t1(SysfsHost(), sizes=(MiB,))
    assert result.status == "skip"
    assert result.reason == (
        "no CUDA: torch 9.9.9+fake is a CPU build (torch.version.cuda is None) and no NVIDIA"
        " driver is loaded here; HBM cannot be measured"
    )
    assert fake.allocations == []
    assert fake.copies == []


def test_t2_without_cuda_copies_each_size_it_announces(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench --tier t2 --model llama-3.1-70b --tp 8`` announces a 10 MiB chunk: the
    host-only copy copies 10 MiB, then the 256 MiB buffer, not 256 MiB alone."""
    monkeypatch.setattr(gpu, "torch_or_none", lambda: None)
    calls: list[int] = []
    real = gpu.host_copy

    def recorded(**kwargs: Any) -> list[BenchResult]:
        calls.append(kwargs["size"])
        return real(**{**kwargs, "size": kwargs["size"] // 64})  # the real copy, smaller

    monkeypatch.setattr(gpu, "host_copy", recorded)
    rows = gpu.run_t2(SysfsHost(), sizes=(10 * MiB, gpu.T2_LARGE, 10 * MiB), repeats=2)
    assert calls == [10 * MiB, gpu.T2_LARGE]
    assert [r.block_bytes for r in rows] == [10 * MiB // 64, gpu.T2_LARGE // 64]


def test_t2_without_cuda_is_host_only_and_its_note_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = CpuTorch()
    monkeypatch.setattr(gpu, "torch_or_none", lambda: fake)
    _small_host_copy(monkeypatch)
    host, reference = gpu.run_t2(SysfsHost(), repeats=2)
    assert (host.variant, reference.variant) == ("host-only", "reference")
    assert host.note.endswith(
        "not the host-to-GPU link (no CUDA: torch 9.9.9+cpu-fake is a CPU build"
        " (torch.version.cuda is None) and no NVIDIA driver is loaded here)"
    )


@pytest.mark.torch
@pytest.mark.no_gpu
def test_t1_with_the_cpu_torch_names_the_cpu_build() -> None:
    import torch

    (result,) = gpu.run_t1(LocalHost(), sizes=(MiB,))
    assert result.status == "skip"
    if torch.version.cuda is None:
        assert f"torch {torch.__version__} is a CPU build" in result.reason
    assert result.bytes_per_s is None


@pytest.mark.torch
@pytest.mark.no_gpu
def test_t2_with_the_cpu_torch_is_a_host_only_copy_beside_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    calls = _small_host_copy(monkeypatch)
    messages: list[str] = []
    host, reference = gpu.run_t2(LocalHost(), repeats=3, progress=messages.append)
    assert calls[0]["torch"] is torch
    assert messages == ["T2 host-only copy, 1 MiB (no CUDA device)"]
    assert host.tool == f"torch {torch.__version__} (CPU)"
    for result in (host, reference):
        assert (result.tier, result.op, result.status) == ("t2", "copy", "ok")
        assert result.block_bytes == MiB
        assert result.bytes_per_s is not None
        assert result.bytes_per_s > 0
        assert result.latency_us is not None
        assert 0 < result.latency_us.p50 <= result.latency_us.p99 <= result.latency_us.p999
    assert host.bytes_per_s is not None
    assert reference.bytes_per_s is not None
    ratio = host.bytes_per_s / reference.bytes_per_s
    assert f"({ratio:.2f}x numpy's in the same run); not the host-to-GPU link" in host.note


# --- which GPU ----------------------------------------------------------------------------------


def test_each_gpu_is_named_from_torch_and_sysfs() -> None:
    fake = FakeTorch(["NVIDIA H200", "NVIDIA H200"])
    host = node(
        gpu_sysfs(PCI[0], numa="0\n", cpus="0-47,96-143\n"),
        gpu_sysfs(PCI[1], numa="1\n", now="2.5 GT/s PCIe\n", width="8\n"),
    )
    first, cpus = gpu.gpu_place(fake, host, 0)
    assert first == GpuId(
        device=0, name="NVIDIA H200", uuid="GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
        pci=PCI[0], numa_node=0, link_now=PcieLink(5, 16), link_max=PcieLink(5, 16),
    )  # fmt: skip
    assert cpus == frozenset(range(48)) | frozenset(range(96, 144))
    second, _ = gpu.gpu_place(fake, host, 1)
    assert (second.link_now, second.link_max, second.downtrained) == (
        PcieLink(1, 8), PcieLink(5, 16), True,
    )  # fmt: skip
    assert str(second) == (
        "GPU 1 NVIDIA H200 (PCI 0000:28:00.0, NUMA 1, PCIe Gen1 x8 (max Gen5 x16))"
    )
    # each device's files under keys of their own, so a capture keeps all eight GPUs'
    assert "pci_0000_28_00.0_max_link_speed" in host.keys
    assert len(set(host.keys)) == len(host.keys)


def test_a_gpu_sysfs_does_not_describe_is_named_by_torch_alone() -> None:
    fake = FakeTorch(["NVIDIA GB200"])
    gid, cpus = gpu.gpu_place(fake, node(gpu_sysfs(PCI[0], numa="-1\n", now="Unknown\n")), 0)
    assert (gid.numa_node, gid.link_now, gid.link_max) == (None, None, PcieLink(5, 16))
    assert not gid.downtrained
    props = fake.cuda.get_device_properties(0)
    del props.pci_bus_id  # an older torch: no PCI address, so nothing to look up in sysfs
    fake.cuda.get_device_properties = lambda _d: props  # type: ignore[method-assign]
    host = node()
    gid, cpus = gpu.gpu_place(fake, host, 0)
    assert (gid.pci, gid.numa_node, gid.link_max, cpus) == ("", None, None, frozenset())
    assert host.keys == []


# --- T1 on fake GPUs ---------------------------------------------------------------------------


def _per_mib(ms: dict[str, float]) -> Callable[[Copy], float]:
    """Each copy costs ``ms[device]`` milliseconds per MiB on the device it targets."""
    return lambda copy: copy.nbytes / MiB * ms[copy.dst if copy.kind != "d2h" else copy.src]


def test_t1_is_timed_behind_a_spin_kernel_so_launch_gaps_do_not_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a 64 MiB copy of 0.2 ms with a 0.05 ms launch gap: timed one at a time (the old way)
    # it reads 20% low; held, exactly the copy
    fake = FakeTorch(["G"], cost_ms=lambda c: 0.2, launch_gap_ms=0.05)
    _use(monkeypatch, fake)
    result, sm = gpu.run_t1(node(gpu_sysfs(PCI[0])), sizes=(64 * MiB,), repeats=5)
    assert (result.variant, sm.variant) == ("ce", "sm")
    for row in (result, sm):
        assert row.bytes_per_s == pytest.approx(2 * 64 * MiB / 0.2e-3)
        assert "behind a spin kernel" in row.note
    # latency is one copy per event pair: the gaps are part of it (the copy engine's row)
    assert result.latency_us is not None
    assert result.latency_us.p50 == pytest.approx((0.2 + 2 * 0.05) * 1000)
    assert sm.latency_us is None
    assert fake.cuda.sleeps == 2 * gpu.SAMPLES
    # without torch.cuda._sleep the gaps count, and the note says so
    unheld = FakeTorch(["G"], cost_ms=lambda c: 0.2, launch_gap_ms=0.05, sleep=False)
    _use(monkeypatch, unheld)
    for slow, fast in zip(
        gpu.run_t1(node(gpu_sysfs(PCI[0])), sizes=(64 * MiB,), repeats=5), (result, sm), strict=True
    ):
        assert slow.bytes_per_s is not None
        assert fast.bytes_per_s is not None
        assert slow.bytes_per_s < 0.85 * fast.bytes_per_s
        assert "no spin kernel (this torch has no torch.cuda._sleep: launch gaps count)" in (
            slow.note
        )


def test_t1_loops_copies_between_events_and_takes_the_median_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    size = 2 * 10**9 // 256 * 16  # 125,000,000 B: loops of 64 copies make one sample's 8 GB
    loops = 64
    # the copy engine: warm-up copies cost 50 ms; the samples' copies 3, 1 and 2 ms; the
    # latency copies 9 ms; then the SM copy: warm-up 50 ms, samples 4, 6 and 5 ms
    costs = [50.0] * gpu.WARMUP + [3.0] * loops + [1.0] * loops + [2.0] * loops + [9.0] * 4
    costs += [50.0] * gpu.WARMUP + [4.0] * loops + [6.0] * loops + [5.0] * loops
    fake = FakeTorch(["G"], cost_ms=scripted(costs))
    _use(monkeypatch, fake)
    result, sm = gpu.run_t1(node(gpu_sysfs(PCI[0])), sizes=(size,), repeats=3)
    assert result.bytes_per_s == pytest.approx(2 * size / 2e-3)  # the median sample: 2 ms
    assert result.latency_us == pytest.approx(latency_of([9e-3] * 3))
    assert sm.bytes_per_s == pytest.approx(2 * size / 5e-3)  # its median sample: 5 ms
    ce_copies = gpu.WARMUP + 3 * loops + 1 + 3
    assert len(fake.copies) == ce_copies + gpu.WARMUP + 3 * loops
    assert all(c.kind == "d2d" and c.non_blocking and c.current == 0 for c in fake.copies)
    assert {c.engine for c in fake.copies[:ce_copies]} == {"ce"}
    assert {(c.engine, c.dtype) for c in fake.copies[ce_copies:]} == {("sm", "int32")}
    for row in (result, sm):
        assert "a loop of copies of at least 8.0 GB between two CUDA events" in row.note
        assert "read+write bytes (2 x size / time" in row.note
        assert "nvbandwidth counts once: half" in row.note
    assert result.note.startswith("copy_ (cudaMemcpyAsync, copy engine); ")
    assert sm.note.startswith("an SM copy (torch.bitwise_or(src, 0, out=dst) on int32 views")
    assert "no latency (the copy engine's row has it)" in sm.note


def test_t1_sm_copy_of_a_size_not_whole_int32s_copies_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    size = 10 * MiB + 2  # a KV chunk need not be whole 4-byte words
    fake = FakeTorch(["G"], cost_ms=lambda c: 1.0 if c.engine == "ce" else 0.5)
    _use(monkeypatch, fake)
    ce, sm = gpu.run_t1(node(gpu_sysfs(PCI[0])), sizes=(size,))
    assert {(c.engine, c.dtype) for c in fake.copies} == {("ce", "uint8"), ("sm", "uint8")}
    assert "on uint8 views" in sm.note
    assert sm.bytes_per_s == pytest.approx(2 * (ce.bytes_per_s or 0))  # each its own engine's


def test_t1_measures_every_gpu_at_every_size_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    per_mib = _per_mib({"cuda:0": 0.5, "cuda:1": 0.25})
    fake = FakeTorch(["FakeGPU-A", "FakeGPU-B"],
                     cost_ms=lambda c: per_mib(c) * (0.8 if c.engine == "sm" else 1))  # fmt: skip
    _use(monkeypatch, fake)
    messages: list[str] = []
    host = node(gpu_sysfs(PCI[0]), gpu_sysfs(PCI[1], numa="1\n"))
    results = gpu.run_t1(host, sizes=(MiB, 4 * MiB, MiB), progress=messages.append)
    assert messages == [
        "T1 d2d on GPU 0 (FakeGPU-A), 1 MiB",
        "T1 d2d on GPU 0 (FakeGPU-A), 4 MiB",
        "T1 d2d on GPU 1 (FakeGPU-B), 1 MiB",
        "T1 d2d on GPU 1 (FakeGPU-B), 4 MiB",
    ]
    assert [(r.gpu.device if r.gpu else None, r.block_bytes, r.variant) for r in results] == [
        (0, MiB, "ce"), (0, MiB, "sm"), (0, 4 * MiB, "ce"), (0, 4 * MiB, "sm"),
        (1, MiB, "ce"), (1, MiB, "sm"), (1, 4 * MiB, "ce"), (1, 4 * MiB, "sm"),
    ]  # fmt: skip
    for result in results:
        assert (result.tier, result.op, result.status, result.gpus) == ("t1", "d2d", "ok", 1)
        assert result.gpu is not None
        ms_per_mib = (0.5, 0.25)[result.gpu.device] * (0.8 if result.variant == "sm" else 1)
        seconds = result.block_bytes / MiB * ms_per_mib / 1000
        assert result.bytes_per_s == pytest.approx(2 * result.block_bytes / seconds)
    assert results[4].gpu is not None
    assert results[4].gpu.numa_node == 1
    assert all(c.current == int(c.dst[5:]) for c in fake.copies)
    assert fake.cuda.emptied == 2  # each GPU's buffers given back before the next


def test_a_full_gpu_is_skipped_with_its_free_memory_and_the_others_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["A", "B"])
    fake.cuda.free[0] = 1536 * MiB  # a server holds the rest
    _use(monkeypatch, fake)
    full, *ok = gpu.run_t1(node(gpu_sysfs(PCI[1])), sizes=(2**30,))
    assert full.status == "skip"
    assert full.reason.startswith("GPU 0 has 1.5 GiB free of 80.0 GiB; this measurement needs")
    assert "another process holds the memory?" in full.reason
    assert [(r.status, r.variant, r.gpu and r.gpu.device) for r in ok] == [
        ("ok", "ce", 1), ("ok", "sm", 1),
    ]  # fmt: skip
    assert {t.device for t in fake.allocations} == {"cuda:1"}


def test_a_busy_or_failing_gpu_is_its_own_row_and_the_others_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable\nmore")
    fake = FakeTorch(["A", "B", "C"], fail={0: busy, 1: ValueError("odd\nsecond line")})
    _use(monkeypatch, fake)
    first, second, third, _sm = gpu.run_t1(node(), sizes=(MiB,))
    assert first.status == "skip"
    assert first.reason.startswith(
        "GPU 0 is busy or unavailable (CUDA error: CUDA-capable device(s) is/are busy or"
        " unavailable): its compute mode lets one process use it (EXCLUSIVE_PROCESS)"
    )
    assert (second.status, second.reason) == ("error", "GPU 1: ValueError: odd")
    assert third.status == "ok"
    oom = FakeTorch(["A"], fail={0: FakeTorch().cuda.OutOfMemoryError("CUDA out of memory.")})
    _use(monkeypatch, oom)
    (row,) = gpu.run_t1(node(), sizes=(MiB,))
    assert (row.status, row.reason) == ("skip", "GPU 0 ran out of memory: CUDA out of memory.")


# --- T2 on fake GPUs ---------------------------------------------------------------------------

LINK = {("h2d", True): 50e9, ("d2h", True): 40e9, ("h2d", False): 20e9, ("d2h", False): 10e9}


def _link(copy: Copy) -> float:
    """Milliseconds for a copy over a link as fast as ``LINK`` says, shared by the GPUs that
    copy at once (one PCIe switch for all of them)."""
    return copy.nbytes / (LINK[(copy.kind, copy.pinned)] / copy.together) * 1000


def _t2(
    monkeypatch: pytest.MonkeyPatch, fake: FakeTorch, host: Any, **kw: Any
) -> list[BenchResult]:
    _use(monkeypatch, fake)
    monkeypatch.setattr(gpu, "time", types.SimpleNamespace(perf_counter=HostClock(fake)))
    return gpu.run_t2(host, **kw)


class HostClock:
    """``time.perf_counter`` that follows the current GPU's default stream (pageable copies are
    timed by the host, up to the synchronize that waits for the GPU)."""

    def __init__(self, fake: FakeTorch) -> None:
        self.fake = fake

    def __call__(self) -> float:
        cuda = self.fake.cuda
        return cuda.streams[cuda.current or 0].clock / 1000


def _key(r: BenchResult) -> tuple[Any, ...]:
    return (r.op, r.variant, r.block_bytes, r.gpu.device if r.gpu else None, r.gpus)


def test_t2_on_each_gpu_then_all_at_once_at_the_chunk_and_a_large_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["A", "B"], cost_ms=_link)
    chunk, large = 10 * MiB, gpu.T2_LARGE
    host = node(gpu_sysfs(PCI[0]), gpu_sysfs(PCI[1], numa="1\n"))
    messages: list[str] = []
    results = _t2(monkeypatch, fake, host, sizes=(chunk, large), repeats=3,
                  progress=messages.append)  # fmt: skip
    alone = [
        (op, variant, size, device, 1)
        for device in (0, 1)
        for size, ops in ((chunk, ("h2d", "d2h", "bidir")), (large, ("h2d", "d2h", "bidir")))
        for op, variant in ((o, "pinned") for o in ops)
    ]
    expected = []
    for device in (0, 1):
        expected += [k for k in alone if k[3] == device]
        expected += [("h2d", "pageable", large, device, 1), ("d2h", "pageable", large, device, 1)]
    for size in (chunk, large):
        for op in ("h2d", "d2h"):
            expected += [(op, "pinned", size, 0, 2), (op, "pinned", size, 1, 2),
                         (op, "pinned", size, None, 2)]  # fmt: skip
    assert [_key(r) for r in results] == expected
    by = {_key(r): r for r in results}
    for device in (0, 1):
        for size in (chunk, large):
            assert by[("h2d", "pinned", size, device, 1)].bytes_per_s == pytest.approx(50e9)
            assert by[("d2h", "pinned", size, device, 1)].bytes_per_s == pytest.approx(40e9)
            bidir = by[("bidir", "pinned", size, device, 1)]
            # both directions at once: full duplex, each at its own speed; the row counts
            # both directions' bytes over the slower one's time
            assert bidir.bytes_per_s == pytest.approx(2 * 40e9)
            assert "h2d 50.0 GB/s while d2h 40.0 GB/s; both directions' bytes" in bidir.note
        assert by[("h2d", "pageable", large, device, 1)].bytes_per_s == pytest.approx(20e9)
        assert by[("d2h", "pageable", large, device, 1)].bytes_per_s == pytest.approx(10e9)
    # at once, the two GPUs share the switch: each gets half, the node the link's 50 GB/s
    for size in (chunk, large):
        assert by[("h2d", "pinned", size, 0, 2)].bytes_per_s == pytest.approx(25e9)
        total = by[("h2d", "pinned", size, None, 2)]
        assert total.bytes_per_s == pytest.approx(50e9)
        assert total.note.startswith("the sum over all 2 GPUs at once, each held by a spin kernel")
    (t2,) = measured_tiers(results, chips=2)
    assert t2.bytes_per_s == pytest.approx(50e9)  # not one GPU's 50 GB/s x 2 chips
    # the spin lasts until every GPU's copies are enqueued: 2 x 191 loops of 10 MiB is more
    # than one spin's 256, so those holds are twice as long
    assert gpu.HOLD_CYCLES * 2 in fake.cuda.cycles
    assert set(fake.cuda.cycles) == {gpu.HOLD_CYCLES, gpu.HOLD_CYCLES * 2}
    assert "on 2 GPU(s) at once" in t2.source
    assert "10.00 MiB copies" in t2.source
    assert messages[:3] == ["T2 h2d pinned on GPU 0, 10 MiB", "T2 d2h pinned on GPU 0, 10 MiB",
                            "T2 h2d and d2h at once on GPU 0, 10 MiB"]  # fmt: skip
    assert "T2 h2d pinned on all 2 GPUs at once, 256 MiB" in messages
    for copy in fake.copies:
        gpu_side = copy.dst if copy.kind == "h2d" else copy.src
        assert copy.current == int(gpu_side[5:])
        assert copy.non_blocking


def test_t2_host_buffers_are_written_and_pinned_on_the_gpus_numa_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local = _cpus()[-1]
    fake = FakeTorch(["A"], cost_ms=_link)
    host = node(gpu_sysfs(PCI[0], numa="1\n", cpus=f"{local}\n"))
    results = _t2(monkeypatch, fake, host, sizes=(MiB,), repeats=2)
    pinned = [t for t in fake.allocations if t.pinned]
    assert len(pinned) == 2  # one each way for the run in both directions at once
    assert all(t.cpus == {local} for t in pinned)  # allocated while running on the GPU's CPUs
    assert all(t.filled is not None for t in pinned)
    pageable = [t for t in fake.allocations if t.device == "cpu" and not t.pinned]
    assert [t.filled for t in pageable] == [3]  # written before it is timed
    assert os.sched_getaffinity(0) == set(_cpus())  # and the affinity is given back
    assert fake.host_cache_emptied == 1
    assert all(r.note.startswith("pinned host memory on the GPU's NUMA node 1") for r in results
               if r.variant == "pinned")  # fmt: skip
    assert all(r.gpus == 1 for r in results)  # one GPU: no all-at-once rows
    (t2,) = measured_tiers(results, chips=8)
    assert t2.bytes_per_s == pytest.approx(50e9 * 8)
    assert "on 1 GPU" in t2.source
    assert "(an estimate: 1 of 8 chips measured)" in t2.source


def test_t2_with_cpus_sysfs_does_not_name_says_where_the_memory_may_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["A"], cost_ms=_link)
    results = _t2(monkeypatch, fake, node(), sizes=(MiB,), repeats=2)
    pinned = [r for r in results if r.variant == "pinned"]
    assert all("wherever the kernel put it (the GPU's NUMA node is unknown)" in r.note
               for r in pinned)  # fmt: skip


def test_t2_a_gpu_that_fails_is_its_row_and_the_rest_still_run_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeTorch(["A", "B", "C"], cost_ms=_link, fail={1: RuntimeError("CUDA error: boom")})
    results = _t2(monkeypatch, fake, node(), sizes=(MiB,), repeats=2)
    failed = [r for r in results if r.status != "ok"]
    assert [(r.status, r.reason) for r in failed] == [
        ("error", "GPU 1: RuntimeError: CUDA error: boom")
    ]
    sums = [r for r in results if r.gpu is None and r.status == "ok"]
    assert {r.gpus for r in sums} == {2}  # GPUs 0 and 2 at once


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

"""T1 (HBM) and T2 (host memory <-> accelerator) with torch, timed with CUDA events.

torch is an optional extra and is imported inside the functions. Without a CUDA device T1 says
SKIP with the reason (never a made-up number), and T2 measures what can be measured on the
host: a host-memory copy with torch, labelled host-only, beside numpy's copy of the same size in
the same run as the reference.

Bytes counted: a device-to-device copy moves each byte twice through HBM (a read and a write),
so T1's ``bytes_per_s`` is 2 x size / time, comparable with the HBM peak; host<->device copies
count the bytes that cross the link once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kvtool.bench.result import BenchResult, latency_of, skipped

T1_SIZES = (64 * 2**20, 256 * 2**20, 1024 * 2**20)
T2_SIZE = 256 * 2**20
HOST_SIZE = 256 * 2**20
NO_TORCH = "torch is not installed (pip install torch==2.13.0, then pip install 'kvtool[gpu]')"


def torch_or_none() -> Any:
    """The torch module, or None when the optional extra is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def run_t1(
    *,
    repeats: int = 10,
    sizes: Sequence[int] = T1_SIZES,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BenchResult]:
    """Device-to-device copies on every visible GPU at each size, timed with CUDA events."""
    torch = torch_or_none()
    if torch is None:
        return [skipped("t1", "d2d", NO_TORCH)]
    if not torch.cuda.is_available():
        return [
            skipped(
                "t1",
                "d2d",
                "no CUDA device (torch.cuda.is_available() is False): HBM cannot be measured here",
            )
        ]
    results = []
    for device in range(torch.cuda.device_count()):
        name = torch.cuda.get_device_name(device)
        for size in sizes:
            progress(f"T1 d2d on GPU {device} ({name}), {size // 2**20} MiB")
            src = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device}")
            dst = torch.empty_like(src)
            seconds = _cuda_timed(torch, device, _copier(dst, src), repeats)
            results.append(
                BenchResult(
                    tier="t1",
                    op="d2d",
                    status="ok",
                    tool=f"torch {torch.__version__}",
                    block_bytes=size,
                    threads=1,
                    bytes_per_s=2 * size / _median(seconds),
                    latency_us=latency_of(seconds),
                    note=f"GPU {device} {name}: copy_ of {size // 2**20} MiB, CUDA events,"
                    f" {repeats} repeats, read+write bytes",
                )
            )
            del src, dst
    return results


def run_t2(
    *, repeats: int = 10, progress: Callable[[str], None] = lambda _: None
) -> list[BenchResult]:
    """Pinned and pageable host-to-device and device-to-host copies per GPU; host-only
    copies (torch beside numpy) without a CUDA device."""
    torch = torch_or_none()
    if torch is None or not torch.cuda.is_available():
        return host_copy(repeats=repeats, progress=progress, torch=torch)
    results = []
    for device in range(torch.cuda.device_count()):
        gpu = torch.empty(T2_SIZE, dtype=torch.uint8, device=f"cuda:{device}")
        for pinned in (True, False):
            host = torch.empty(T2_SIZE, dtype=torch.uint8, pin_memory=pinned)
            for op, copy in (("h2d", _copier(gpu, host)), ("d2h", _copier(host, gpu))):
                kind = "pinned" if pinned else "pageable"
                progress(f"T2 {op} {kind} on GPU {device}, {T2_SIZE // 2**20} MiB")
                seconds = _cuda_timed(torch, device, copy, repeats)
                results.append(
                    BenchResult(
                        tier="t2",
                        op=op,
                        status="ok",
                        tool=f"torch {torch.__version__}",
                        block_bytes=T2_SIZE,
                        threads=1,
                        variant=kind,
                        bytes_per_s=T2_SIZE / _median(seconds),
                        latency_us=latency_of(seconds),
                        note=f"GPU {device}, {kind} host memory, CUDA events, {repeats} repeats",
                    )
                )
    return results


def host_copy(
    *,
    repeats: int = 10,
    progress: Callable[[str], None] = lambda _: None,
    torch: Any = None,
    size: int = HOST_SIZE,
) -> list[BenchResult]:
    """Host memory copy bandwidth, labelled host-only: torch's CPU ``copy_`` (what an engine
    stages KV with) and numpy's ``copyto`` of the same size, in the same run."""
    import numpy as np

    progress(f"T2 host-only copy, {size // 2**20} MiB (no CUDA device)")
    src = np.ones(size, dtype=np.uint8)
    dst = np.empty_like(src)
    results = []
    np_seconds = _cpu_timed(lambda: np.copyto(dst, src), repeats)
    reference = size / _median(np_seconds)
    if torch is not None:
        t_src = torch.from_numpy(src)
        t_dst = torch.empty_like(t_src)
        t_seconds = _cpu_timed(lambda: t_dst.copy_(t_src), repeats)
        bandwidth = size / _median(t_seconds)
        results.append(
            BenchResult(
                tier="t2",
                op="copy",
                status="ok",
                tool=f"torch {torch.__version__} (CPU)",
                block_bytes=size,
                threads=1,
                variant="host-only",
                bytes_per_s=bandwidth,
                latency_us=latency_of(t_seconds),
                note=f"host-only: no CUDA device, a host memory copy ({bandwidth / reference:.2f}x"
                f" numpy's in the same run); not the host-to-GPU link",
            )
        )
    results.append(
        BenchResult(
            tier="t2",
            op="copy",
            status="ok",
            tool=f"numpy {np.__version__} (reference)",
            block_bytes=size,
            threads=1,
            variant="reference",
            bytes_per_s=reference,
            latency_us=latency_of(np_seconds),
            note="host-only reference: numpy.copyto of the same buffer size, same run",
        )
    )
    return results


def _copier(dst: Any, src: Any) -> Callable[[], object]:
    """One asynchronous ``dst.copy_(src)``, timed by the caller's CUDA events."""

    def copy() -> object:
        return dst.copy_(src, non_blocking=True)

    return copy


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _cpu_timed(step: Callable[[], object], repeats: int) -> list[float]:
    step()  # warm the pages and caches once
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return seconds


def _cuda_timed(torch: Any, device: int, step: Callable[[], object], repeats: int) -> list[float]:
    """Per-repeat seconds from CUDA events: the GPU's own clock, not the host's."""
    with torch.cuda.device(device):
        step()
        torch.cuda.synchronize()
        seconds = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1000)
    return seconds

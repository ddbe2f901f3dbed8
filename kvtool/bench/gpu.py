"""T1 (HBM) and T2 (host memory <-> GPU) with torch, measured the way NVIDIA's nvbandwidth does.

torch is an optional extra and is imported inside the functions. Without a usable CUDA device
T1 says SKIP with the cause, named (a CPU build of torch, no NVIDIA driver, a driver too old for
torch's CUDA, ``CUDA_VISIBLE_DEVICES`` hiding the GPUs), never a made-up number, and T2 measures
what can be measured on the host: a host-memory copy, labelled host-only, beside numpy's.

How a bandwidth is timed (``_held``), after nvbandwidth (``testcase.cpp``, ``memcpy.cpp``):
warm-up copies; then a spin kernel (``torch.cuda._sleep``) holds the stream while the start
event, a loop of copies and the end event are enqueued, so the host's launch gaps fall inside
the spin and not between the events; the median of 3 such samples. Latency is the other
question, one copy per event pair, and is timed that way.

Two engines move bytes on a GPU, and nvbandwidth measures both (its ``*_ce`` and ``*_sm``
cases). T1 measures both: variant ``ce`` is the copy engine (``copy_``: ``cudaMemcpyAsync``),
what an engine's block copies get (vLLM's ``swap_blocks`` is one ``cudaMemcpyAsync`` per
block); variant ``sm`` is a kernel on the SMs reading and writing every byte
(``torch.bitwise_or(src, 0, out=dst)`` on int32 views: an identity, one vectorized elementwise
kernel), what kernels that read KV get (attention, LMCache's gather kernels). T2's copies are
the copy engine's only: an SM copy across PCIe needs a kernel that reads host memory by its
device address (zero-copy), which torch does not expose, so nvbandwidth's
``host_to_device_memcpy_sm`` has no counterpart here.

Bytes counted: a device-to-device copy reads and writes every byte, so T1's ``bytes_per_s`` is
2 x size / time, as bandwidthTest and STREAM copy count it and as the HBM datasheet peak is
given (nvbandwidth counts each byte once: half the figure). Host<->device copies count the
bytes that cross the link once; a bidirectional row counts both directions.

Each row names its GPU (``BenchResult.gpu``: index, UUID, PCI address, NUMA node, PCIe link
now and at most, from torch and sysfs through the probe). T2's host buffers are allocated on
the GPU's own NUMA node (the thread runs on the GPU's ``local_cpulist`` while they are
allocated and first written). With several GPUs, T2 is measured one GPU at a time and then on
all at once, and the all-at-once sum is the node's figure (``bench/measured.py``): GPUs share
PCIe switches, and a GB200's C2C link serves two GPUs.

A GPU that is full, busy (another process holds it in EXCLUSIVE_PROCESS mode) or fails is a
SKIP or error row with the reason; the other GPUs and tiers still run.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kvtool.bench.result import BenchResult, GpuId, PcieLink, latency_of, skipped
from kvtool.probe.host import Host, environment, on_cpus
from kvtool.probe.parse import (
    parse_cpulist,
    parse_nvidia_driver_version,
    parse_pcie_speed,
    parse_whole,
)

MiB = 2**20
T1_LARGE = 2**30
T2_LARGE = 256 * MiB
HOST_SIZE = 256 * MiB
T1_SAMPLE_BYTES = 8 * 10**9  # bytes copied between one sample's events (nvbandwidth: ~8 GB)
T2_SAMPLE_BYTES = 2 * 10**9
MIN_LOOPS, MAX_LOOPS = 4, 256  # 256 enqueues take about 1-2 ms: well inside the spin
HOLD_CYCLES = 20_000_000  # the spin kernel's clock cycles: about 10 ms at 2 GHz
WARMUP, SAMPLES = 4, 3
MEMORY_MARGIN = 256 * MiB  # left free on a GPU beside the test buffers
NO_TORCH = "torch is not installed (pip install torch==2.13.0, then pip install 'kvtool[gpu]')"
NVIDIA_VERSION = "/proc/driver/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"
# the oldest Linux driver each CUDA major version runs on (NVIDIA's CUDA Toolkit release notes,
# "minor version compatibility": 11.x 450.80.02, 12.x 525.60.13, 13.x 580.65.06)
DRIVER_FOR_CUDA = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def torch_or_none() -> Any:
    """The torch module, or None when the optional extra is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_and_why(host: Host) -> tuple[Any, str | None]:
    """torch (None when not installed) and, when it has no usable CUDA device, why not: for
    the engine's mediums, which then keep T1 on the CPU and say so."""
    torch = torch_or_none()
    return torch, None if torch is None else cuda_reason(torch, host)


# --- why there is no CUDA -------------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def no_cuda_reason(
    *,
    torch_version: str,
    cuda_version: str | None,
    driver: str | None,
    visible: str | None,
    warning: str = "",
) -> str:
    """Why torch sees no CUDA device, naming the cause. Pure: from torch's version and CUDA
    build, the driver's version (``/proc/driver/nvidia/version``), ``CUDA_VISIBLE_DEVICES``
    and the warning torch gave while it looked."""
    torch_name = f"torch {torch_version}"
    if cuda_version is None:
        if driver is None:
            return (
                f"no CUDA: {torch_name} is a CPU build (torch.version.cuda is None) and no NVIDIA"
                " driver is loaded here"
            )
        return (
            f"no CUDA: {torch_name} is a CPU build (torch.version.cuda is None) on a node with"
            f" NVIDIA driver {driver}; install a CUDA build (pip install torch==2.13.0 from PyPI"
            " is built for CUDA 13.0 and needs driver R580 or newer)"
        )
    if driver is None:
        return (
            f"no CUDA: no NVIDIA driver is loaded ({NVIDIA_VERSION} is missing), so {torch_name}"
            f" (CUDA {cuda_version}) has no GPU to use"
        )
    needed = DRIVER_FOR_CUDA.get((_version(cuda_version) or (0,))[0])
    if needed is not None and _version(driver) < _version(needed):
        wanted = needed
        return (
            f"no CUDA: NVIDIA driver {driver} is too old for {torch_name}, built for CUDA"
            f" {cuda_version} (it needs {wanted} or newer); update the driver, or install a torch"
            " built for an older CUDA"
        )
    if "too old" in warning.lower():
        return f"no CUDA: the NVIDIA driver {driver} is too old for {torch_name}: {warning}"
    if visible is not None and visible.split(",")[0].strip() in ("", "-1"):
        return (
            f"no CUDA: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from {torch_name}"
            " (unset it, or name the GPUs to use)"
        )
    tail = f": {warning}" if warning else ""
    return (
        f"no CUDA device: {torch_name} (CUDA {cuda_version}) with driver {driver} sees no GPU"
        f" (torch.cuda.is_available() is False){tail}"
    )


def cuda_reason(torch: Any, host: Host) -> str | None:
    """None when torch can use a CUDA device here; else why not (``no_cuda_reason``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
    if available:
        return None
    text = host.read("nvidia_driver_version", NVIDIA_VERSION)
    said = " ".join(str(w.message).strip() for w in caught if "CUDA" in str(w.message))
    return no_cuda_reason(
        torch_version=str(torch.__version__),
        cuda_version=getattr(getattr(torch, "version", None), "cuda", None),
        driver=parse_nvidia_driver_version(text) if text else None,
        visible=environment("CUDA_VISIBLE_DEVICES"),
        warning=said.splitlines()[0][:300] if said else "",
    )


# --- which GPU ------------------------------------------------------------------------------------


def _pci_address(props: Any) -> str:
    """The GPU's PCI address in sysfs's form (``0000:18:00.0``) from torch's properties."""
    parts = [
        getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")
    ]
    if not all(isinstance(p, int) for p in parts):
        return ""
    domain, bus, device = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def _uuid(props: Any) -> str:
    text = str(getattr(props, "uuid", "") or "")
    return text if not text or text.startswith("GPU-") else f"GPU-{text}"


def _sysfs(host: Host, pci: str, name: str) -> str | None:
    """``/sys/bus/pci/devices/<pci>/<name>``, under a key of its own per device (a capture
    of an 8-GPU node keeps eight of each)."""
    return host.read(f"pci_{pci.replace(':', '_')}_{name}", f"{PCI_DEVICES}/{pci}/{name}")


def _link(host: Host, pci: str, which: str) -> PcieLink | None:
    speed = _sysfs(host, pci, f"{which}_link_speed")
    width = _sysfs(host, pci, f"{which}_link_width")
    gen = None if speed is None else parse_pcie_speed(speed)
    lanes = None if width is None else parse_whole(width)
    if gen is None or lanes is None or not 1 <= lanes <= 32:
        return None
    return PcieLink(gen, lanes)


def gpu_place(torch: Any, host: Host, index: int) -> tuple[GpuId, frozenset[int]]:
    """GPU ``index``'s identity, and the CPUs local to it (empty when sysfs does not say)."""
    props = torch.cuda.get_device_properties(index)
    pci = _pci_address(props)
    gid = GpuId(device=index, name=str(getattr(props, "name", "")), uuid=_uuid(props), pci=pci)
    if not pci:
        return gid, frozenset()
    numa = _sysfs(host, pci, "numa_node")
    node = None if numa is None else parse_whole(numa)
    cpus = _sysfs(host, pci, "local_cpulist")
    return (
        gid._replace(
            numa_node=node if node is not None and node >= 0 else None,
            link_now=_link(host, pci, "current"),
            link_max=_link(host, pci, "max"),
        ),
        parse_cpulist(cpus) if cpus else frozenset(),
    )


# --- timing ---------------------------------------------------------------------------------------


def _loops(size: int, sample_bytes: int) -> int:
    return max(MIN_LOOPS, min(MAX_LOOPS, -(-sample_bytes // max(size, 1))))


def _hold(torch: Any, enqueues: int = MAX_LOOPS) -> bool:
    """A spin kernel on the current stream, so what is enqueued next waits for the host to
    finish enqueuing; long enough for ``enqueues`` copies (HOLD_CYCLES covers MAX_LOOPS of
    them). False when this torch has none."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return False
    sleep(HOLD_CYCLES * max(1, -(-enqueues // MAX_LOOPS)))
    return True


def _held(torch: Any, step: Callable[[], object], loops: int) -> tuple[list[float], bool]:
    """Seconds per ``step`` on the current device, nvbandwidth's way (the module docstring),
    one figure per sample; and whether a spin kernel held the stream."""
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    seconds, held = [], True
    for _ in range(SAMPLES):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        held = _hold(torch) and held
        start.record()
        for _ in range(loops):
            step()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1000 / loops)
    return seconds, held


def _one_at_a_time(torch: Any, step: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each single ``step`` between its own pair of CUDA events (a latency)."""
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


def _host_timed(torch: Any, step: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each ``step`` by the host's clock up to its synchronize (pageable copies:
    the driver stages them through its own pinned buffer, as bandwidthTest times them)."""
    step()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return seconds


def _copier(dst: Any, src: Any) -> Callable[[], object]:
    """One asynchronous ``dst.copy_(src)`` on the current stream."""

    def copy() -> object:
        return dst.copy_(src, non_blocking=True)

    return copy


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _size(size: int) -> str:
    return f"{size / MiB:,.0f} MiB" if size % MiB == 0 else f"{size / MiB:,.2f} MiB"


def _total(size: int, sample_bytes: int) -> str:
    return f"{size * _loops(size, sample_bytes) / 1e9:,.1f} GB"


COPY_ENGINE = "copy_ (cudaMemcpyAsync, copy engine)"


def _how(held: bool, size: int, sample_bytes: int, engine: str = COPY_ENGINE) -> str:
    """How a bandwidth row was timed, in words; ``engine`` says what copied."""
    hold = (
        "behind a spin kernel"
        if held
        else "no spin kernel (this torch has no torch.cuda._sleep: launch gaps count)"
    )
    return (
        f"{engine}; a loop of copies of at least"
        f" {_total(size, sample_bytes)} between two CUDA events {hold}, after {WARMUP} warm-up"
        f" copies, median of {SAMPLES}"
    )


def _sm_copier(torch: Any, dst: Any, src: Any) -> tuple[Callable[[], object], str]:
    """A copy of ``src`` into ``dst`` (uint8, one GPU) by a kernel on the SMs, and how it is
    done in words: ``bitwise_or`` with 0 is an identity, one elementwise kernel that reads
    each element once and writes it once; on int32 views (16-byte vector loads) when the size
    allows, else on the bytes."""
    dtype, name = (torch.int32, "int32") if src.numel() % 4 == 0 else (torch.uint8, "uint8")
    source, target = src.view(dtype), dst.view(dtype)

    def copy() -> object:
        return torch.bitwise_or(source, 0, out=target)

    return copy, (
        f"an SM copy (torch.bitwise_or(src, 0, out=dst) on {name} views: one elementwise"
        " kernel reading and writing every byte, as nvbandwidth's *_sm cases copy with SMs"
        " rather than the copy engine)"
    )


# --- a GPU that cannot take part ------------------------------------------------------------------


def _free_enough(torch: Any, index: int, needed: int) -> str | None:
    """None when GPU ``index`` has ``needed`` bytes free (and a margin); else the reason."""
    info = getattr(torch.cuda, "mem_get_info", None)
    if info is None:
        return None
    free, total = info(index)
    if free >= needed + MEMORY_MARGIN:
        return None
    return (
        f"GPU {index} has {free / 2**30:,.1f} GiB free of {total / 2**30:,.1f} GiB; this"
        f" measurement needs {(needed + MEMORY_MARGIN) / 2**30:,.1f} GiB (another process holds"
        " the memory? nvidia-smi lists it)"
    )


def _failed(tier: str, op: str, where: str, exc: BaseException, torch: Any) -> BenchResult:
    """A measurement on ``where`` (``GPU 3``) that raised: SKIP when the GPU is full or held
    by another process, an error row otherwise; the cache is emptied (whatever that raises:
    the failure is the news) so the next GPU starts clean."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    with contextlib.suppress(Exception):
        torch.cuda.empty_cache()
    if (isinstance(oom, type) and isinstance(exc, oom)) or "out of memory" in text.lower():
        return skipped(tier, op, f"{where} ran out of memory: {text}")
    if "busy or unavailable" in text.lower():
        return skipped(
            tier,
            op,
            f"{where} is busy or unavailable ({text}): its compute mode lets one process use"
            " it (EXCLUSIVE_PROCESS) and another holds it, or it is prohibited"
            " (nvidia-smi -q -d COMPUTE)",
        )
    return BenchResult(
        tier=tier, op=op, status="error", reason=f"{where}: {type(exc).__name__}: {text}"
    )


# --- T1 -------------------------------------------------------------------------------------------


def run_t1(
    host: Host,
    *,
    sizes: Sequence[int] = (T1_LARGE,),
    repeats: int = 10,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BenchResult]:
    """Device-to-device copies on every visible GPU at each size."""
    torch = torch_or_none()
    if torch is None:
        return [skipped("t1", "d2d", NO_TORCH)]
    reason = cuda_reason(torch, host)
    if reason is not None:
        return [skipped("t1", "d2d", f"{reason}; HBM cannot be measured")]
    sizes = tuple(dict.fromkeys(sizes))
    results = []
    for index in range(torch.cuda.device_count()):
        lack = _free_enough(torch, index, 2 * max(sizes))
        if lack is not None:
            results.append(skipped("t1", "d2d", lack))
            continue
        try:
            results += _t1_on(torch, host, index, sizes, repeats, progress)
        except Exception as exc:  # one GPU's failure is its row; the others still run
            results.append(_failed("t1", "d2d", f"GPU {index}", exc, torch))
    return results


def _t1_on(
    torch: Any,
    host: Host,
    index: int,
    sizes: Sequence[int],
    repeats: int,
    progress: Callable[[str], None],
) -> list[BenchResult]:
    name = torch.cuda.get_device_name(index)
    measured: list[tuple[str, int, float, bool, list[float] | None, str]] = []
    with torch.cuda.device(index):
        for size in sizes:
            progress(f"T1 d2d on GPU {index} ({name}), {_size(size)}")
            src = torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}")
            dst = torch.empty_like(src)
            loops = _loops(size, T1_SAMPLE_BYTES)
            step = _copier(dst, src)
            seconds, held = _held(torch, step, loops)
            one_by_one = _one_at_a_time(torch, step, repeats)
            measured.append(("ce", size, _median(seconds), held, one_by_one, COPY_ENGINE))
            sm, engine = _sm_copier(torch, dst, src)
            seconds, held = _held(torch, sm, loops)
            measured.append(("sm", size, _median(seconds), held, None, engine))
            del src, dst, step, sm
        torch.cuda.empty_cache()
    gid, _cpus = gpu_place(torch, host, index)
    results = []
    for variant, size, per_copy, held, latency, engine in measured:
        how = _how(held, size, T1_SAMPLE_BYTES, engine)
        timed = (
            f"; latency: one copy per event pair, {repeats} repeats"
            if latency is not None
            else "; no latency (the copy engine's row has it)"
        )
        results.append(
            BenchResult(
                tier="t1",
                op="d2d",
                status="ok",
                tool=f"torch {torch.__version__}",
                block_bytes=size,
                threads=1,
                variant=variant,
                bytes_per_s=2 * size / per_copy,
                latency_us=None if latency is None else latency_of(latency),
                note=f"{how}; read+write bytes (2 x size / time, as bandwidthTest and STREAM"
                f" copy count and the HBM peak is quoted; nvbandwidth counts once: half){timed}",
                gpu=gid,
                gpus=1,
            )
        )
    return results


# --- T2 -------------------------------------------------------------------------------------------


class _Rig:
    """One GPU's T2 buffers: for each size a device buffer and two pinned host buffers on the
    GPU's own NUMA node (two for the bidirectional run), written before any copy."""

    def __init__(self, torch: Any, host: Host, index: int, sizes: Sequence[int]) -> None:
        self.torch, self.index, self.sizes = torch, index, tuple(sizes)
        self.gpu, cpus = gpu_place(torch, host, index)
        empty = getattr(torch._C, "_host_emptyCache", None) if hasattr(torch, "_C") else None
        if empty is not None:  # cached pinned blocks may sit on another node
            torch.cuda.synchronize()
            empty()
        self.local = False
        self.device: dict[int, Any] = {}
        self.pinned: dict[int, tuple[Any, Any]] = {}
        with on_cpus(cpus) as self.local:
            for size in self.sizes:
                self.device[size] = torch.empty(size, dtype=torch.uint8, device=f"cuda:{index}")
                self.pinned[size] = (
                    torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1),
                    torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(2),
                )

    @property
    def placement(self) -> str:
        if self.local:
            return f"pinned host memory on the GPU's NUMA node {self.gpu.numa_node}"
        return "pinned host memory wherever the kernel put it (the GPU's NUMA node is unknown)"

    def pairs(self, size: int) -> Iterator[tuple[str, Callable[[], object]]]:
        host, _ = self.pinned[size]
        device = self.device[size]
        yield "h2d", _copier(device, host)
        yield "d2h", _copier(host, device)


def run_t2(
    host: Host,
    *,
    sizes: Sequence[int] = (T2_LARGE,),
    repeats: int = 10,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BenchResult]:
    """Pinned host-to-device, device-to-host and both at once on each GPU, pageable copies of
    written memory, then pinned copies on all GPUs at once; host-only copies (torch beside
    numpy) without a usable CUDA device."""
    sizes = tuple(dict.fromkeys(sizes))
    torch = torch_or_none()
    reason = NO_TORCH if torch is None else cuda_reason(torch, host)
    if reason is not None:  # each size announced (a KV chunk's, then 256 MiB), host-only
        return [r for size in sizes for r in host_copy(
            repeats=repeats, progress=progress, torch=torch, why=reason, size=size)]  # fmt: skip
    results: list[BenchResult] = []
    rigs: list[_Rig] = []
    for index in range(torch.cuda.device_count()):
        lack = _free_enough(torch, index, sum(sizes) + max(sizes))  # + bidir's second buffer
        if lack is not None:
            results.append(skipped("t2", "h2d", lack))
            continue
        try:
            rig = _Rig(torch, host, index, sizes)
            alone = _t2_alone(rig, repeats, progress)
            rig.gpu, _cpus = gpu_place(torch, host, index)  # the link as it ran under load
            results += [r._replace(gpu=rig.gpu) for r in alone]
            rigs.append(rig)
        except Exception as exc:
            results.append(_failed("t2", "h2d", f"GPU {index}", exc, torch))
    if len(rigs) > 1:
        try:
            results += _t2_together(torch, rigs, progress)
        except Exception as exc:
            where = f"all {len(rigs)} GPUs at once"
            results.append(_failed("t2", "h2d", where, exc, torch)._replace(gpus=len(rigs)))
    del rigs
    torch.cuda.empty_cache()
    return results


def _t2_row(
    rig: _Rig, op: str, size: int, bytes_per_s: float, note: str, **extra: Any
) -> BenchResult:
    return BenchResult(
        tier="t2",
        op=op,
        status="ok",
        tool=f"torch {rig.torch.__version__}",
        block_bytes=size,
        threads=1,
        variant="pinned",
        bytes_per_s=bytes_per_s,
        note=note,
        gpu=rig.gpu,
        gpus=1,
    )._replace(**extra)


def _t2_alone(rig: _Rig, repeats: int, progress: Callable[[str], None]) -> list[BenchResult]:
    torch, index = rig.torch, rig.index
    results = []
    with torch.cuda.device(index):
        for size in rig.sizes:
            for op, step in rig.pairs(size):
                progress(f"T2 {op} pinned on GPU {index}, {_size(size)}")
                seconds, held = _held(torch, step, _loops(size, T2_SAMPLE_BYTES))
                how = _how(held, size, T2_SAMPLE_BYTES)
                latency = _one_at_a_time(torch, step, repeats)
                results.append(
                    _t2_row(
                        rig,
                        op,
                        size,
                        size / _median(seconds),
                        f"{rig.placement}; {how}; latency: one copy per event pair,"
                        f" {repeats} repeats",
                        latency_us=latency_of(latency),
                    )
                )
            progress(f"T2 h2d and d2h at once on GPU {index}, {_size(size)}")
            results.append(_bidirectional(rig, size))
        large = max(rig.sizes)
        pageable = torch.empty(large, dtype=torch.uint8).fill_(3)  # written: its pages exist
        device = rig.device[large]
        for op, step in (("h2d", _copier(device, pageable)), ("d2h", _copier(pageable, device))):
            progress(f"T2 {op} pageable on GPU {index}, {_size(large)}")
            seconds = _host_timed(torch, step, repeats)
            results.append(
                _t2_row(
                    rig,
                    op,
                    large,
                    large / _median(seconds),
                    "pageable host memory, written before timing; the host's clock from the"
                    f" copy to its synchronize (the driver stages it), median of {repeats}",
                    variant="pageable",
                    latency_us=latency_of(seconds),
                )
            )
        del pageable
    return results


def _bidirectional(rig: _Rig, size: int) -> BenchResult:
    """Host-to-device on one stream and device-to-host on another at once (nvbandwidth's
    ``host_to_device_bidirectional_memcpy_ce``): both start at one event behind a spin kernel;
    the row counts the bytes of both directions."""
    torch = rig.torch
    (host_a, host_b), device_a = rig.pinned[size], rig.device[size]
    device_b = torch.empty_like(device_a)
    up, down = torch.cuda.Stream(), torch.cuda.Stream()
    loops = _loops(size, T2_SAMPLE_BYTES)
    samples = []
    for sample in range(SAMPLES + 1):  # the first is the warm-up
        torch.cuda.synchronize()
        start, up_done, down_done, end = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        with torch.cuda.stream(up):
            _hold(torch)
            start.record(up)
        down.wait_event(start)
        with torch.cuda.stream(up):
            for _ in range(loops):
                device_a.copy_(host_a, non_blocking=True)
            up_done.record(up)
        with torch.cuda.stream(down):
            for _ in range(loops):
                host_b.copy_(device_b, non_blocking=True)
            down_done.record(down)
        up.wait_event(down_done)
        end.record(up)
        end.synchronize()
        if sample:
            ms = [start.elapsed_time(e) / 1000 for e in (up_done, down_done, end)]
            samples.append((size * loops / ms[0], size * loops / ms[1], 2 * size * loops / ms[2]))
    h2d, d2h, both = (_median([s[i] for s in samples]) for i in range(3))
    del device_b
    return _t2_row(
        rig,
        "bidir",
        size,
        both,
        f"{rig.placement}; h2d and d2h on two streams at once, {_total(size, T2_SAMPLE_BYTES)}"
        f" each way from one event behind a spin kernel, median of {SAMPLES}: h2d"
        f" {h2d / 1e9:,.1f} GB/s while d2h {d2h / 1e9:,.1f} GB/s; both directions' bytes",
    )


def _t2_together(
    torch: Any, rigs: Sequence[_Rig], progress: Callable[[str], None]
) -> list[BenchResult]:
    """Pinned copies on every GPU at once (nvbandwidth's ``host_to_all_memcpy_ce`` and
    ``all_to_host_memcpy_ce``): each GPU's stream is held by a spin kernel until every GPU's
    copies are enqueued, each GPU is timed by its own events, and the sum is the node's."""
    results = []
    for size in rigs[0].sizes:
        loops = _loops(size, T2_SAMPLE_BYTES)
        for op in ("h2d", "d2h"):
            progress(f"T2 {op} pinned on all {len(rigs)} GPUs at once, {_size(size)}")
            steps = [dict(rig.pairs(size))[op] for rig in rigs]
            for rig, step in zip(rigs, steps, strict=True):
                with torch.cuda.device(rig.index):
                    for _ in range(WARMUP):
                        step()
            samples: list[list[float]] = [[] for _ in rigs]
            for _ in range(SAMPLES):
                events = []
                for rig in rigs:
                    with torch.cuda.device(rig.index):
                        torch.cuda.synchronize()
                for rig, step in zip(rigs, steps, strict=True):
                    with torch.cuda.device(rig.index):
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        _hold(torch, loops * len(rigs))  # until every GPU's are enqueued
                        start.record()
                        for _ in range(loops):
                            step()
                        end.record()
                        events.append((start, end))
                for seconds, (start, end) in zip(samples, events, strict=True):
                    end.synchronize()
                    seconds.append(start.elapsed_time(end) / 1000)
            each = [size * loops / _median(s) for s in samples]
            how = (
                f"all {len(rigs)} GPUs at once, each held by a spin kernel until all were"
                f" enqueued and timed by its own CUDA events, {_total(size, T2_SAMPLE_BYTES)}"
                f" per GPU, median of {SAMPLES}"
            )
            for rig, bandwidth in zip(rigs, each, strict=True):
                results.append(
                    _t2_row(rig, op, size, bandwidth, f"{rig.placement}; {how}", gpus=len(rigs))
                )
            results.append(
                _t2_row(
                    rigs[0], op, size, sum(each), f"the sum over {how}", gpu=None, gpus=len(rigs)
                )
            )
    return results


# --- without a GPU --------------------------------------------------------------------------------


def host_copy(
    *,
    repeats: int = 10,
    progress: Callable[[str], None] = lambda _: None,
    torch: Any = None,
    size: int = HOST_SIZE,
    why: str = "no CUDA device",
) -> list[BenchResult]:
    """Host memory copy bandwidth, labelled host-only: torch's CPU ``copy_`` (what an engine
    stages KV with) and numpy's ``copyto`` of the same size, in the same run. ``why`` says why
    the link itself could not be measured."""
    import numpy as np

    progress(f"T2 host-only copy, {size // MiB} MiB (no CUDA device)")
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
                note=f"host-only: a host memory copy ({bandwidth / reference:.2f}x numpy's in"
                f" the same run); not the host-to-GPU link ({why})",
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


def _cpu_timed(step: Callable[[], object], repeats: int) -> list[float]:
    step()  # warm the pages and caches once
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return seconds

"""GPUDirect Storage reads: the libcufile job, the direct/compat verdict from nvidia-fs counters
(the recorded idle stats of a real node, and the same after a read), and the SKIP reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.bench import gds
from kvtool.bench.fio import FioJob, job_file
from kvtool.probe.host import LocalHost
from kvtool.probe.parse import parse_nvidia_fs_stats

PROBE = Path(__file__).parents[2] / "fixtures" / "probe"
FIO = Path(__file__).parents[2] / "fixtures" / "fio"
IDLE = (PROBE / "proc_driver_nvidia-fs_stats_idle_ver4.txt").read_text()


def _after(mib: int) -> str:
    """The idle sample after ``mib`` MiB went through nvidia-fs (counters as the driver keeps)."""
    return IDLE.replace(
        "Reads\t\t\t\t: n=0 ok=0 err=0 readMiB=0",
        f"Reads\t\t\t\t: n={mib} ok={mib} err=0 readMiB={mib}",
    )


def test_the_fixture_edit_really_moves_the_counter() -> None:
    after = parse_nvidia_fs_stats(_after(512))
    assert after is not None
    assert after.read_mib == 512


@pytest.mark.parametrize(
    ("direct_mib", "verdict"),
    [(1024, "direct (GPUDirect)"), (300, "partly direct: 29%"), (0, "compat mode")],
)
def test_verdict_from_the_counters(direct_mib: int, verdict: str) -> None:
    before = parse_nvidia_fs_stats(IDLE)
    after = parse_nvidia_fs_stats(_after(direct_mib))
    assert gds.direct_verdict(before, after, 1024 * 2**20).startswith(verdict)


def test_no_stats_or_disabled_stats_cannot_tell() -> None:
    assert gds.direct_verdict(None, None, 2**30).startswith("unknown")
    disabled = parse_nvidia_fs_stats(IDLE.replace("IO stats: Enabled", "IO stats: Disabled"))
    before = parse_nvidia_fs_stats(IDLE)
    assert "disabled" in gds.direct_verdict(before, disabled, 2**30)


def test_the_libcufile_job_reads_into_gpu_0_with_o_direct() -> None:
    job = FioJob(
        ops=("seq_write", "seq_read"),
        directory="/fsx/kv/s",
        block_bytes=2**20,
        numjobs=4,
        iodepth=1,
        file_bytes=2**26,
        runtime_s=5,
        direct=True,
    )
    text = job_file(gds.gds_job(job))
    for line in ("ioengine=libcufile", "cuda_io=cufile", "gpu_dev_ids=0", "direct=1", "rw=read"):
        assert line in text
    assert "rw=write" not in text  # reads only, of the files the write run laid out


def test_skip_reasons_without_a_reader(tmp_path: Path) -> None:
    job = FioJob(("seq_read",), str(tmp_path), 2**20, 1, 1, 2**20, 1, True)
    enghelp = (FIO / "fio_3.33_debian_enghelp_no_libcufile.txt").read_text()
    no_direct = gds.run_gds_read(LocalHost(), job._replace(direct=False), fio_engines=lambda: "",
                                 tool="")  # fmt: skip
    assert no_direct.status == "skip"
    assert "O_DIRECT" in no_direct.reason
    gpu_node = NvfsNode(IDLE)
    none = gds.run_gds_read(gpu_node, job, fio_engines=lambda: enghelp, tool="")
    assert none.status == "skip"
    assert none.variant == "gds"
    assert "no libcufile engine" in none.reason or "no CUDA device" in none.reason
    no_nvfs = gds.run_gds_read(NvfsNode(None), job, fio_engines=lambda: enghelp, tool="")
    assert "nvidia-fs is not loaded" in no_nvfs.reason


class NvfsNode(LocalHost):
    """This machine, with /proc/driver/nvidia-fs/stats as a GPU node with nvidia-fs has it
    (the recorded idle sample) or, with None, missing."""

    def __init__(self, stats: str | None) -> None:
        super().__init__()
        self.stats = stats

    def read(self, key: str, path: str) -> str | None:
        return self.stats if path == gds.NVFS_STATS else super().read(key, path)

"""GPUDirect Storage reads: the libcufile job, the direct/compat verdict from nvidia-fs counters
(the recorded idle stats of a real node, and the same after a read), the per-GPU shares from
fio's per-job JSON (a real fio-3.33 run), the fio and KvikIO runs through fakes of the host,
kvikio and torch, and the SKIP reasons."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvtool.bench import gds
from kvtool.bench.fio import FioJob, job_file
from kvtool.probe.host import CommandResult, LocalHost
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


def _job(**changes: Any) -> FioJob:
    job = FioJob(
        ops=("seq_write", "seq_read"),
        directory="/fsx/kv/s",
        block_bytes=2**20,
        numjobs=8,
        iodepth=1,
        file_bytes=2**26,
        runtime_s=5,
        direct=True,
    )
    return job._replace(**changes)


def test_the_libcufile_job_runs_threads_over_every_gpu_with_o_direct() -> None:
    lines = job_file(gds.gds_job(_job(), 4)).splitlines()
    for line in ("ioengine=libcufile", "cuda_io=cufile", "gpu_dev_ids=0:1:2:3", "direct=1"):
        assert line in lines
    assert "thread" in lines  # one process, one CUDA context per GPU
    assert "group_reporting=1" not in lines  # one JSON entry per job, to sum by GPU
    assert "rw=read" in lines
    assert "rw=write" not in lines  # reads only, of the files the write run laid out
    assert "gpu_dev_ids=0" in job_file(gds.gds_job(_job(), 1)).splitlines()


def test_the_baseline_is_the_same_job_into_host_memory() -> None:
    cufile = gds.gds_job(_job(), 4)
    base = gds.baseline_job(_job())
    assert base.ioengine == "libaio"
    assert base.extra == ()
    assert base._replace(ioengine="libcufile", extra=cufile.extra) == cufile


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_the_job_files_parse_with_the_real_fio(tmp_path: Path) -> None:
    """Debian's fio has no libcufile, so its three lines are what it cannot parse: every other
    line of the GDS job file (``thread`` too) is checked by fio itself, and the baseline's
    job file whole."""
    job = _job(directory=str(tmp_path))
    engine_only = {"ioengine=libcufile", "cuda_io=cufile", "gpu_dev_ids=0:1:2:3"}
    cufile = job_file(gds.gds_job(job, 4)).splitlines()
    assert engine_only <= set(cufile)
    for name, text in (
        ("gds.fio", "\n".join(line for line in cufile if line not in engine_only)),
        ("base.fio", job_file(gds.baseline_job(job))),
    ):
        (tmp_path / name).write_text(text)
        done = subprocess.run(
            ["fio", "--parse-only", str(tmp_path / name)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    (tmp_path / "bad.fio").write_text(job_file(job) + "\nthreads_typo\n")
    bad = subprocess.run(["fio", "--parse-only", str(tmp_path / "bad.fio")], capture_output=True)
    assert bad.returncode != 0  # fio does refuse what it cannot parse


PER_JOB = json.loads((FIO / "fio_json_local_seqread_numjobs8_thread_per_job.json").read_text())
MiB = 2**20


def test_fio_reports_a_sections_clones_counting_down() -> None:
    """The recorded run: subjob k read its own file of k+1 MiB, so each entry's bytes say
    which subjob it is."""
    read = [e["read"]["io_bytes"] // MiB - 1 for e in PER_JOB["jobs"]]
    assert read == gds.subjob_numbers(8) == [0, 7, 6, 5, 4, 3, 2, 1]


def test_each_gpu_sums_the_jobs_libcufile_gave_it() -> None:
    shares = gds.fio_shares(PER_JOB, "seq_read", 8, 4)
    # GPU g has subjobs g and g+4: files of g+1 and g+5 MiB
    assert [s.bytes_read // MiB for s in shares] == [6, 8, 10, 12]
    assert [s.jobs for s in shares] == [2, 2, 2, 2]
    by_subjob = dict(zip(gds.subjob_numbers(8), PER_JOB["jobs"], strict=True))
    for share in shares:
        mine = [by_subjob[share.gpu]["read"], by_subjob[share.gpu + 4]["read"]]
        assert share.bytes_per_s == sum(side["bw_bytes"] for side in mine)
        assert share.latency_us is not None
    assert sum(s.bytes_per_s for s in shares) == sum(e["read"]["bw_bytes"] for e in PER_JOB["jobs"])
    # numbering the entries in JSON order would have put other jobs on GPUs 1 and 3
    naive = [sum(e["read"]["io_bytes"] for e in PER_JOB["jobs"][g::4]) // MiB for g in range(4)]
    assert naive != [6, 8, 10, 12]


def test_entries_that_do_not_match_the_jobs_give_no_shares() -> None:
    assert gds.fio_shares(PER_JOB, "seq_read", 16, 4) == []
    assert gds.fio_shares(PER_JOB, "rand_read", 8, 4) == []


def test_a_gpu_well_below_the_median_is_named() -> None:
    even = copy.deepcopy(PER_JOB)
    for entry in even["jobs"]:
        entry["read"]["bw_bytes"] = 10**9
    assert gds.slow_gpus(gds.fio_shares(even, "seq_read", 8, 4)) == []
    for entry in even["jobs"][:1]:  # subjob 0: GPU 0 at half speed on one of its two jobs
        entry["read"]["bw_bytes"] = 10**8
    assert gds.slow_gpus(gds.fio_shares(even, "seq_read", 8, 4)) == [0]


def test_uneven_jobs_are_said() -> None:
    assert gds.spread_note(32, 8) == ""
    assert "11 on GPUs 0-1, 10 on the rest" in gds.spread_note(32, 3)
    assert "GPUs 4-7 read nothing" in gds.spread_note(4, 8)


ENGHELP = (FIO / "fio_3.33_debian_enghelp_no_libcufile.txt").read_text()
WITH_LIBCUFILE = ENGHELP.replace("\tlibaio\n", "\tlibaio\n\tlibcufile\n")
BASELINE = json.loads((FIO / "fio_json_local_seqread_numjobs2_group_reporting.json").read_text())
for _entry in BASELINE["jobs"]:
    _entry["jobname"] = "seq_read"  # kvtool names its sections after its ops


class GpuNode(LocalHost):
    """A GPU node with nvidia-fs: the recorded idle counters until fio's GDS read (or
    ``read_hook``) runs, then ``direct_mib`` more read MiB; fio's recorded JSON for the
    baseline and the GDS read. The job files written are kept."""

    def __init__(self, direct_mib: int) -> None:
        super().__init__()
        self.direct_mib = direct_mib
        self.read_done = False
        self.ran: list[str] = []
        self.job_files: dict[str, str] = {}

    def read(self, key: str, path: str) -> str | None:
        if path == gds.NVFS_STATS:
            return _after(self.direct_mib) if self.read_done else IDLE
        return super().read(key, path)

    def run(self, key: str, argv: Any, timeout_s: float | None = None) -> CommandResult:
        self.ran.append(key)
        self.job_files[key] = Path(argv[-1]).read_text()
        document = BASELINE if key == "fio_gds_baseline" else PER_JOB
        self.read_done = self.read_done or key == "fio_gds"
        return CommandResult(0, json.dumps(document), "")


def test_the_fio_read_gives_baseline_node_and_per_gpu_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gds, "torch_or_none", lambda: FakeTorch(2))  # torch sees 2 of the 4
    node = GpuNode(direct_mib=36)  # the recorded run read 36 MiB
    rows = gds.run_gds_read(
        node, _job(directory=str(tmp_path)), fio_engines=lambda: WITH_LIBCUFILE, tool="fio-x",
        gpus=4,
    )  # fmt: skip
    assert node.ran == ["fio_gds_baseline", "fio_gds"]  # the baseline right before
    assert "gpu_dev_ids=0:1:2:3" in node.job_files["fio_gds"].splitlines()
    assert "thread" in node.job_files["fio_gds_baseline"].splitlines()
    assert "ioengine=libaio" in node.job_files["fio_gds_baseline"].splitlines()
    base, total, *gpus = rows
    assert base.variant == "posix-baseline"
    assert base.bytes_per_s == BASELINE["jobs"][0]["read"]["bw_bytes"]
    assert total.variant == "gds"
    assert total.bytes_per_s == sum(e["read"]["bw_bytes"] for e in PER_JOB["jobs"])
    assert "into 4 GPU(s) 0:1:2:3" in total.note
    assert "POSIX baseline" in total.note
    assert total.note.endswith("direct (GPUDirect): nvidia-fs readMiB +36 of 36 MiB read")
    assert [r.variant for r in gpus] == ["gds-gpu"] * 4
    assert [r.note.split(":")[0] for r in gpus] == [f"GPU {g} of 4" for g in range(4)]
    assert sum(r.bytes_per_s or 0 for r in gpus) == total.bytes_per_s
    assert all(r.threads == 2 for r in gpus)
    assert all("direct (GPUDirect)" in r.note for r in gpus)
    # each GPU's row names it in its own field, as T1 and T2 rows do; the node's is their sum
    assert [(r.gpu and (r.gpu.device, r.gpu.name, r.gpu.pci), r.gpus) for r in gpus] == [
        ((0, "Fake GPU 0", "0000:18:00.0"), 4), ((1, "Fake GPU 1", "0000:28:00.0"), 4),
        ((2, "", ""), 4), ((3, "", ""), 4),
    ]  # fmt: skip
    assert (total.gpu, total.gpus) == (None, 4)
    assert (base.gpu, base.gpus) == (None, 0)  # into host memory: no GPU copied


def test_a_compat_mode_fio_read_is_marked_on_every_row(tmp_path: Path) -> None:
    rows = gds.run_gds_read(
        GpuNode(direct_mib=0), _job(directory=str(tmp_path)), fio_engines=lambda: WITH_LIBCUFILE,
        tool="fio-x", gpus=4,
    )  # fmt: skip
    assert [r.variant for r in rows] == ["posix-baseline", "gds-compat", *["gds-compat-gpu"] * 4]
    assert all("compat mode" in r.note for r in rows[1:])


class FakeKvikio:
    """kvikio's surface that the reader uses: CuFile(path, "r") with pread(buffer, size,
    offset).get(), and defaults with get/set by name (KvikIO 25.x) or, with ``old_api``,
    get_num_threads/num_threads_reset (24.x). Each pread reads the file's real bytes."""

    __version__ = "25.99"

    def __init__(self, compat: str, *, old_api: bool = False) -> None:
        self.reads: list[tuple[str, int, int]] = []  # path, offset, device
        self.lock = threading.Lock()
        self.settings: dict[str, Any] = {"num_threads": 1, "compat_mode": compat}
        self.threads_during: list[int] = []
        self.node: GpuNode | None = None
        fake = self

        class Handle:
            def __init__(self, path: str, mode: str) -> None:
                assert mode == "r"
                self.path = path

            def __enter__(self) -> Handle:
                return self

            def __exit__(self, *_: object) -> None:
                return None

            def pread(self, buffer: Any, size: int, offset: int) -> Any:
                with open(self.path, "rb") as f:
                    f.seek(offset)
                    got = len(f.read(size))
                with fake.lock:
                    fake.reads.append((self.path, offset, buffer.device))
                    fake.threads_during.append(fake.settings["num_threads"])
                    if fake.node is not None:
                        fake.node.read_done = True
                return SimpleNamespace(get=lambda: got)

        self.CuFile = Handle
        if old_api:
            self.defaults = SimpleNamespace(
                get_num_threads=lambda: self.settings["num_threads"],
                num_threads_reset=lambda n: self.settings.__setitem__("num_threads", n),
                compat_mode=lambda: self.settings["compat_mode"],
            )
        else:
            self.defaults = SimpleNamespace(
                get=lambda name: self.settings[name],
                set=lambda name, value: self.settings.__setitem__(name, value),
            )


class FakeTorch:
    """torch's CUDA surface the reader uses, with ``gpus`` devices: buffers record theirs, and
    each device has a name, UUID and PCI address as torch's properties give them."""

    uint8 = "uint8"

    def __init__(self, gpus: int) -> None:
        self.cuda = SimpleNamespace(
            is_available=lambda: True,
            device_count=lambda: gpus,
            get_device_properties=lambda d: SimpleNamespace(
                name=f"Fake GPU {d}",
                uuid=f"{d:08x}-1111-2222-3333-444444444444",
                pci_domain_id=0,
                pci_bus_id=0x18 + 0x10 * d,
                pci_device_id=0,
            ),
        )

    def empty(self, size: int, *, dtype: str, device: str) -> Any:
        return SimpleNamespace(size=size, dtype=dtype, device=device)


def _lay_out(folder: Path, files: int, size: int) -> None:
    for k in range(files):
        (folder / f"kvtool.{k}.0").write_bytes(b"\0" * size)


def _kvikio_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kvikio: FakeKvikio, direct_mib: int
) -> list[Any]:
    """The KvikIO reader over 8 files of 4 MiB on 2 fake GPUs, with 60 s to run."""
    _lay_out(tmp_path, 8, 4 * MiB)
    monkeypatch.setattr(gds, "_kvikio_and_torch", lambda: (kvikio, FakeTorch(2)))
    kvikio.node = node = GpuNode(direct_mib)  # its counters move once a pread ran
    job = _job(directory=str(tmp_path), file_bytes=4 * MiB, runtime_s=60)
    return gds.run_gds_read(node, job, fio_engines=lambda: ENGHELP, tool="fio-x")


def test_kvikio_reads_every_byte_once_over_the_gpus_with_its_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kvikio = FakeKvikio("CompatMode.OFF")
    rows = _kvikio_run(tmp_path, monkeypatch, kvikio, direct_mib=32)
    expected = {(str(tmp_path / f"kvtool.{k}.0"), o * MiB) for k in range(8) for o in range(4)}
    assert len(kvikio.reads) == len(expected)  # nothing read twice, though runtime_s is 60
    assert {(path, offset) for path, offset, _ in kvikio.reads} == expected
    assert {device for *_, device in kvikio.reads} == {"cuda:0", "cuda:1"}
    assert set(kvikio.threads_during) == {8}  # KvikIO's pool had a thread per worker
    assert kvikio.settings["num_threads"] == 1  # and was put back
    base, total, gpu0, gpu1 = rows
    assert base.variant == "posix-baseline"
    assert total.variant == "gds"
    assert total.threads == 8
    assert "every file read once" in total.note
    assert "direct (GPUDirect)" in total.note
    assert [gpu0.variant, gpu1.variant] == ["gds-gpu", "gds-gpu"]
    assert gpu0.bytes_per_s == gpu1.bytes_per_s  # 4 files each
    assert [(r.gpu and r.gpu.uuid, r.gpus) for r in (gpu0, gpu1)] == [
        ("GPU-00000000-1111-2222-3333-444444444444", 2),
        ("GPU-00000001-1111-2222-3333-444444444444", 2),
    ]
    assert (total.gpu, total.gpus) == (None, 2)


def test_kvikio_in_compat_mode_is_marked_whatever_the_counters_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kvikio = FakeKvikio("True", old_api=True)  # KvikIO 24.x reports a bool
    rows = _kvikio_run(tmp_path, monkeypatch, kvikio, direct_mib=32)
    assert [r.variant for r in rows] == [
        "posix-baseline",
        "gds-compat",
        "gds-compat-gpu",
        "gds-compat-gpu",
    ]
    assert set(kvikio.threads_during) == {8}
    assert kvikio.settings["num_threads"] == 1


def test_kvikio_with_untouched_counters_is_compat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _kvikio_run(tmp_path, monkeypatch, FakeKvikio("CompatMode.OFF"), direct_mib=0)
    assert rows[1].variant == "gds-compat"
    assert "compat mode: no read went through nvidia-fs" in rows[1].note


@pytest.mark.parametrize(
    ("value", "preferred", "on"),
    [("CompatMode.OFF", None, False), ("False", None, False), ("CompatMode.ON", None, True),
     ("True", None, True), ("CompatMode.AUTO", True, True), ("AUTO", False, False),
     ("CompatMode.AUTO", None, True), ("unknown", None, True)],
)  # fmt: skip
def test_kvikio_compat_values(value: str, preferred: bool | None, on: bool) -> None:
    assert gds.kvikio_compat_on(value, preferred=preferred) is on


def test_skip_reasons_without_a_reader(tmp_path: Path) -> None:
    job = FioJob(("seq_read",), str(tmp_path), 2**20, 1, 1, 2**20, 1, True)
    enghelp = (FIO / "fio_3.33_debian_enghelp_no_libcufile.txt").read_text()
    (no_direct,) = gds.run_gds_read(LocalHost(), job._replace(direct=False),
                                    fio_engines=lambda: "", tool="")  # fmt: skip
    assert no_direct.status == "skip"
    assert "O_DIRECT" in no_direct.reason
    gpu_node = NvfsNode(IDLE)
    (none,) = gds.run_gds_read(gpu_node, job, fio_engines=lambda: enghelp, tool="")
    assert none.status == "skip"
    assert none.variant == "gds"
    assert "no libcufile engine" in none.reason or "no CUDA device" in none.reason
    (no_nvfs,) = gds.run_gds_read(NvfsNode(None), job, fio_engines=lambda: enghelp, tool="")
    assert "nvidia-fs is not loaded" in no_nvfs.reason


class NvfsNode(LocalHost):
    """This machine, with /proc/driver/nvidia-fs/stats as a GPU node with nvidia-fs has it
    (the recorded idle sample) or, with None, missing."""

    def __init__(self, stats: str | None) -> None:
        super().__init__()
        self.stats = stats

    def read(self, key: str, path: str) -> str | None:
        return self.stats if path == gds.NVFS_STATS else super().read(key, path)

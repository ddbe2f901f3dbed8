"""run_t3's checks before any I/O: what the folder's facts must be, and the space it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.bench.t3 import T3Options, plan_files, run_t3
from kvtool.errors import InputError
from kvtool.probe.host import LocalHost


class ReadOnlyMount(LocalHost):
    """This machine, except that the folder sits on a read-only mount (os.access says so)."""

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        return {**super().path_info(key, path), "writable": False}


def test_a_read_only_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not writable"):
        run_t3(ReadOnlyMount(), str(tmp_path), T3Options(block_bytes=2**20))
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    with pytest.raises(InputError, match="is not a folder"):
        run_t3(LocalHost(), str(target), T3Options(block_bytes=2**20))


def test_space_is_per_job_files_for_every_node() -> None:
    options = T3Options(block_bytes=2**20, threads=4, size_bytes=2**30, hosts=("a", "b"))
    assert plan_files("/fsx", options, free_bytes=None) == 2**28
    with pytest.raises(InputError, match="x 2 nodes"):
        plan_files("/fsx", options, free_bytes=2**31)  # needs 2 GiB of 2 GiB free: over 90%


def test_each_job_gets_at_least_one_aligned_block() -> None:
    options = T3Options(block_bytes=10 * 2**20, threads=32, size_bytes=2**20)
    assert plan_files("/fsx", options, free_bytes=None) == 10 * 2**20


def test_the_reads_run_first_on_files_fio_lays_out_and_the_results_keep_the_order_asked() -> None:
    from kvtool.bench.t3 import run_order

    assert run_order(("seq_write", "seq_read", "rand_read")) == (
        "seq_read", "rand_read", "seq_write",
    )  # fmt: skip
    assert run_order(("rand_read", "seq_write")) == ("rand_read", "seq_write")
    assert run_order(("seq_write",)) == ("seq_write",)


class JobFiles(LocalHost):
    """This machine, keeping the text of every fio job file it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[str] = []

    def run(self, key: str, argv: Any, timeout_s: float | None = None) -> Any:
        self.jobs += [Path(a).read_text() for a in argv if str(a).endswith(".fio")]
        return super().run(key, argv, timeout_s)


@pytest.mark.fio
def test_fio_reads_before_it_writes_and_kvtool_reports_in_the_order_asked(tmp_path: Path) -> None:
    host = JobFiles()
    options = T3Options(block_bytes=2**20, threads=2, duration_s=1, size_bytes=8 * 2**20, gds=False)
    results = run_t3(host, str(tmp_path), options)
    assert [r.op for r in results][:3] == ["seq_write", "seq_read", "rand_read"]
    assert all(r.status == "ok" and r.bytes_per_s for r in results[:3])
    job, *small = host.jobs  # then the queue-depth-1 reads, one fio run each
    assert len(small) == 2
    sections = [line for line in job.splitlines() if line.startswith("[") and line != "[global]"]
    assert sections == ["[seq_read]", "[rand_read]", "[seq_write]"]
    # the write makes new files of its own; the reads share the ones fio laid out
    write = job.split("[seq_write]")[1]
    assert "filename_format=kvtool-write.$jobnum.$filenum" in write
    assert job.count("filename_format=") == 2


@pytest.mark.fio
def test_every_t3_run_measures_small_reads_at_queue_depth_1_and_per_file_operations(
    tmp_path: Path,
) -> None:
    """The AWS article's 100-500 us T3 latency is checked in every run: 4 KiB and 64 KiB
    random reads one at a time (psync: the read's whole time) on the files the big reads laid
    out, and open + stat + close of each file, as an engine does per chunk."""
    host = JobFiles()
    options = T3Options(block_bytes=2**20, threads=2, duration_s=1, size_bytes=8 * 2**20,
                        gds=False, ops=("seq_read",))  # fmt: skip
    results = run_t3(host, str(tmp_path), options)
    seq, four, sixty_four, files = results
    assert (seq.op, seq.variant) == ("seq_read", "")
    for row, block in ((four, 4096), (sixty_four, 65536)):
        assert (row.op, row.variant, row.block_bytes, row.threads) == ("rand_read", "qd1", block, 1)
        assert row.latency_us is not None
        assert 0 < row.latency_us.p50 <= row.latency_us.p99 <= row.latency_us.p999
        assert "fio psync" in row.note
    for job, block in zip(host.jobs[1:], (4096, 65536), strict=True):
        assert f"bs={block}" in job
        assert "ioengine=psync" in job
        assert "numjobs=1" in job
        assert "iodepth=1" in job
        assert "filename_format=kvtool.$jobnum.$filenum" in job  # the laid-out files
    assert (files.op, files.variant, files.block_bytes) == ("open_stat_close", "metadata", 0)
    assert files.latency_us is not None
    assert files.iops
    assert "2,000 times over" in files.note
    assert list(tmp_path.iterdir()) == []
    writes = run_t3(JobFiles(), str(tmp_path), options._replace(ops=("seq_write",)))
    assert [r.op for r in writes] == ["seq_write"]  # nothing laid out to read one at a time


def test_a_small_read_is_set_beside_the_article_s_t3_latency() -> None:
    from kvtool.bench.result import BenchResult, Latency
    from kvtool.bench.run import with_spec
    from kvtool.profiles.load import load_node_profile as load_node
    from kvtool.profiles.load import load_storage_profile as load_storage

    row = BenchResult("t3", "rand_read", "ok", variant="qd1", filesystem="lustre",
                      latency_us=Latency(240.0, 900.0, 2000.0))  # fmt: skip
    t3 = load_storage("fsx-lustre-persistent2")
    spec = with_spec(row, node=load_node("p5en"), t3=t3, t4=None)
    assert spec.limit.endswith("100-500 us a request (the AWS article's T3 latency); p50 240 us,"
                               " within it")  # fmt: skip
    assert spec.spec_bytes_per_s is None  # no bandwidth spec for a latency row
    slow = with_spec(row._replace(latency_us=Latency(800.0, 900.0, 2000.0)), node=load_node(
        "p5en"), t3=t3, t4=None)  # fmt: skip
    assert slow.limit.endswith("p50 800 us, above it")


def test_a_run_that_reads_and_writes_needs_room_for_both_sets_of_files() -> None:
    both = T3Options(block_bytes=2**20, threads=4, size_bytes=2**30)
    assert plan_files("/fsx", both, free_bytes=None) == 2**28
    with pytest.raises(InputError, match=r"needs 2\.00 GiB \(4 jobs x 256 MiB x 2: the reads'"):
        plan_files("/fsx", both, free_bytes=2 * 2**30)
    reads = both._replace(ops=("seq_read", "rand_read"))
    assert plan_files("/fsx", reads, free_bytes=2 * 2**30) == 2**28  # one set: 1 of 2 GiB


@pytest.mark.fio
def test_on_a_terminal_fio_s_running_figures_reach_the_status_line(tmp_path: Path) -> None:
    """``live``: fio runs with --status-interval=1 through ``LocalHost.stream``, each dump
    becomes a status line (the job, its seconds, its GB/s), and the results are fio's final
    document's, as without it."""
    shown: list[str] = []
    options = T3Options(block_bytes=2**20, threads=1, duration_s=2, size_bytes=8 * 2**20,
                        gds=False, ops=("seq_read",), small_blocks=(), file_ops=False)  # fmt: skip
    results = run_t3(LocalHost(), str(tmp_path), options, progress=shown.append, live=True)
    assert [r.op for r in results] == ["seq_read"]
    assert results[0].status == "ok"
    assert results[0].bytes_per_s
    running = [s for s in shown if s.startswith("T3 seq_read: ") and "GB/s (fio)" in s]
    assert running, shown  # at least one dump came while fio ran
    quiet: list[str] = []
    run_t3(LocalHost(), str(tmp_path), options, progress=quiet.append)  # not a terminal
    assert not any("(fio)" in s for s in quiet)


def test_the_final_document_is_fios_last_and_the_status_its_newest_dump() -> None:
    from kvtool.bench.fio import json_document, live_status

    def dump(ms: int, rate: float, later: int = 0) -> str:
        """seq_read running (``ms`` so far), seq_write waiting its turn (unless ``later``)."""
        return json.dumps({"jobs": [
            {"jobname": "seq_read", "elapsed": 9, "job_runtime": ms,
             "read": {"bw_bytes": rate, "io_bytes": 1}, "write": {}},
            {"jobname": "seq_write", "elapsed": 9, "job_runtime": later,
             "read": {}, "write": {"bw_bytes": later * 1e6, "io_bytes": later}},
        ]})  # fmt: skip

    stdout = "fio: note\n" + dump(1000, 2e9) + "\n" + dump(2000, 3e9) + "\n" + dump(3000, 4e9)
    assert json_document(stdout)["jobs"][0]["job_runtime"] == 3000
    assert live_status(stdout) == "seq_read: 3 s, 4.00 GB/s (fio)"  # not the waiting write
    assert live_status(stdout[:-5]) == "seq_read: 2 s, 3.00 GB/s (fio)"  # the last still coming
    assert live_status(stdout + "\n" + dump(3000, 4e9, later=1500)) == (
        "seq_write: 2 s, 1.50 GB/s (fio)"
    )
    assert live_status("fio: starting\n") is None

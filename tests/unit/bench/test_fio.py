"""fio job files and fio's JSON, on outputs recorded from the real fio 3.33."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.bench.fio import (
    ALIGN,
    FioError,
    FioJob,
    aligned,
    job_file,
    json_document,
    parse_engines,
    result_from_fio,
)
from kvtool.bench.t3 import parse_hosts
from kvtool.errors import InputError

FIO = Path(__file__).parents[2] / "fixtures" / "fio"


def _load(name: str, section: str) -> dict[str, object]:
    """A recorded fio JSON whose job section ``section`` is renamed to kvtool's ``seq_read``
    (kvtool names its sections after its ops)."""
    document = json.loads((FIO / name).read_text())
    for entry in document.get("jobs") or document.get("client_stats"):
        if entry["jobname"] == section:
            entry["jobname"] = "seq_read"
    return document


def _job(ops: tuple[str, ...] = ("seq_read",), **changes: object) -> FioJob:
    job = FioJob(
        ops=ops,
        directory="/fsx/kv/kvtool-bench-1-abc",
        block_bytes=2**20,
        numjobs=2,
        iodepth=8,
        file_bytes=16 * 2**20,
        runtime_s=2,
        direct=True,
    )
    return job._replace(**changes)


def test_local_json_reads_bandwidth_iops_and_percentiles() -> None:
    document = _load("fio_json_local_seqread_numjobs2_group_reporting.json", "seqread")
    side = document["jobs"][0]["read"]  # type: ignore[index]
    result = result_from_fio(document, _job(), "seq_read", tool="fio-3.33")
    assert result.bytes_per_s == side["bw_bytes"]
    assert result.iops == pytest.approx(side["iops"])
    pct = side["clat_ns"]["percentile"]
    assert result.latency_us is not None
    assert result.latency_us.p50 == pct["50.000000"] / 1000
    assert result.latency_us.p99 == pct["99.000000"] / 1000
    assert result.latency_us.p999 == pct["99.900000"] / 1000
    assert result.threads == 2 * 8
    assert result.direct is True
    assert result.clients == 1


def test_one_fio_run_of_three_sections_gives_one_result_each() -> None:
    document = json.loads((FIO / "fio_json_local_3ops_stonewall_group_reporting.json").read_text())
    job = _job(ops=("seq_write", "seq_read", "rand_read"))
    by_op = {op: result_from_fio(document, job, op, tool="fio-3.33") for op in job.ops}
    jobs = {j["jobname"]: j for j in document["jobs"]}
    assert by_op["seq_write"].bytes_per_s == jobs["seq_write"]["write"]["bw_bytes"]
    assert by_op["seq_read"].bytes_per_s == jobs["seq_read"]["read"]["bw_bytes"]
    assert by_op["rand_read"].bytes_per_s == jobs["rand_read"]["read"]["bw_bytes"]
    assert all(r.bytes_per_s and r.bytes_per_s > 0 for r in by_op.values())


def test_client_server_uses_the_all_clients_sum_and_the_worst_hosts_latency() -> None:
    document = _load("fio_json_client_server_2hosts_client_stats.json", "csread")
    entries = document["client_stats"]
    hosts = [e for e in entries if e["jobname"] != "All clients"]  # type: ignore[attr-defined]
    total = next(e for e in entries if e["jobname"] == "All clients")  # type: ignore[attr-defined]
    result = result_from_fio(document, _job(), "seq_read", tool="fio-3.33")
    assert result.bytes_per_s == total["read"]["bw_bytes"]
    assert result.clients == 2
    worst_p99 = max(h["read"]["clat_ns"]["percentile"]["99.000000"] for h in hosts) / 1000
    assert result.latency_us is not None
    assert result.latency_us.p99 == worst_p99
    assert "2 fio client(s)" in result.note


def test_client_server_with_one_host() -> None:
    document = _load("fio_json_client_server_1host_client_stats.json", "csread")
    entry = document["client_stats"][0]  # type: ignore[index]
    result = result_from_fio(document, _job(), "seq_read", tool="fio-3.33")
    assert result.bytes_per_s == entry["read"]["bw_bytes"]
    assert result.clients == 1


def test_all_clients_of_a_multi_section_run_is_not_used_for_one_op() -> None:
    """fio's single "All clients" entry sums every section: reads of two groups here."""
    document = json_document((FIO / "fio_stdout_client_server_2hosts_3groups.txt").read_text())
    job = _job(ops=("seq_write", "seq_read", "rand_read"))
    result = result_from_fio(document, job, "seq_read", tool="fio-3.33")
    per_host = [
        e["read"]["bw_bytes"] for e in document["client_stats"] if e["jobname"] == "seq_read"
    ]
    assert result.bytes_per_s == sum(per_host)
    total = next(e for e in document["client_stats"] if e["jobname"] == "All clients")
    assert result.bytes_per_s < total["read"]["bw_bytes"]


def test_json_after_server_lines_and_error_lines() -> None:
    text = (FIO / "fio_stdout_client_server_2hosts_3groups.txt").read_text()
    assert text.startswith("<")  # the servers' job lines come first
    assert "client_stats" in json_document(text)
    with pytest.raises(ValueError, match="no JSON"):
        json_document("fio: failed to connect to 127.0.0.1:8799\n")


def test_no_odirect_is_error_22_after_a_leading_error_line() -> None:
    text = FIO / "fio_odirect_unsupported_ramfs_einval_json_stdout_with_leading_error_line.txt"
    document = json_document(text.read_text())
    with pytest.raises(FioError) as caught:
        result_from_fio(document, _job(), "seq_read", tool="fio-3.33")
    assert caught.value.errno == 22


def test_job_file_sections_stonewall_and_share_file_names() -> None:
    text = job_file(_job(ops=("seq_write", "seq_read", "rand_read")))
    recorded = (FIO / "fio_jobfile_kvtool_3ops.fio").read_text()
    for line in ("time_based=1", "group_reporting=1", "filename_format=kvtool.$jobnum.$filenum"):
        assert line in text
        assert line in recorded
    sections = text.split("\n[")[1:]
    assert [s.split("]")[0] for s in sections] == ["seq_write", "seq_read", "rand_read"]
    assert "stonewall" not in sections[0]
    assert all("stonewall" in s for s in sections[1:])
    assert "rw=write" in sections[0]
    assert "rw=randread" in sections[2]
    assert "direct=1" in text
    assert "ioengine=libaio" in text
    assert "iodepth=8" in text


def test_a_write_beside_reads_writes_files_of_its_own() -> None:
    from kvtool.bench.fio import WRITE_FILES, fresh_writes

    text = job_file(_job(ops=("seq_read", "rand_read", "seq_write")))
    reads, write = text.split("[seq_write]")
    assert f"filename_format={WRITE_FILES}" in write
    assert WRITE_FILES not in reads
    assert fresh_writes(("seq_read", "seq_write"))
    assert not fresh_writes(("seq_write",))
    assert not fresh_writes(("seq_read", "rand_read"))
    assert WRITE_FILES not in job_file(_job(ops=("seq_write",)))


def test_job_file_refuses_an_unknown_op() -> None:
    with pytest.raises(InputError, match="unknown fio op"):
        job_file(_job(ops=("seq_trim",)))


@given(st.integers(min_value=1, max_value=2**34))
def test_aligned_blocks_are_the_next_4k_multiple(block: int) -> None:
    out = aligned(block)
    assert out % ALIGN == 0
    assert block <= out < block + ALIGN


def test_a_kv_chunk_that_is_already_aligned_stays() -> None:
    assert aligned(10 * 2**20) == 10 * 2**20
    assert aligned(1000) == 4096


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
            st.one_of(st.none(), st.integers(min_value=1, max_value=65535)),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_hosts_become_fio_client_addresses(hosts: list[tuple[str, int | None]]) -> None:
    text = ",".join(name if port is None else f"{name}:{port}" for name, port in hosts)
    expected = tuple(name if port is None else f"{name},{port}" for name, port in hosts)
    assert parse_hosts(text) == expected


@pytest.mark.parametrize(
    "bad", ["", "a,,b", "node1:http", ":8765", "h:1:2", "n\udcff", "nöde", "a b", "h:８７"]
)
def test_bad_hosts_are_one_clear_error(bad: str) -> None:
    with pytest.raises(InputError, match="--hosts"):
        parse_hosts(bad)


def test_engines_are_the_listed_names_not_the_error_lines() -> None:
    text = (FIO / "fio_3.33_debian_enghelp_no_libcufile.txt").read_text()
    engines = parse_engines(text)
    assert {"libaio", "io_uring", "psync"} <= engines
    assert "libcufile" not in engines  # named only in "fio: engine libcufile not loadable"
    assert "libcufile" in text
    assert "libcufile" in parse_engines("Available IO engines:\n\tlibaio\n\tlibcufile\n")


def test_a_folder_path_cannot_inject_fio_options(tmp_path: Path) -> None:
    """A newline in --t3-dir wrote a new fio option (exec_prerun runs a shell command); ':'
    split the directory list; ';' and '#' started comments."""
    from kvtool.bench.fio import FioJob, fio_path, job_file
    from kvtool.errors import InputError

    assert fio_path("/fsx/a:b") == "/fsx/a\\:b"  # fio's escape for its directory separator
    for bad in ("/fsx/a\nexec_prerun=touch /tmp/pwned", "/fsx/a;b", "/fsx/a#b", "/fsx/${HOME}",
                "/fsx/a\rb", "/fsx/\x00"):  # fmt: skip
        with pytest.raises(InputError, match="fio's job files read as syntax"):
            fio_path(bad)
    job = FioJob(ops=("seq_read",), directory="/fsx/x:y", block_bytes=4096, numjobs=1,
                 iodepth=1, file_bytes=4096, runtime_s=1, direct=True)  # fmt: skip
    text = job_file(job)
    assert "directory=/fsx/x\\:y\n" in text
    assert text.count("\n[") == 1  # one section: nothing injected


def test_threads_and_per_job_reports_only_when_asked() -> None:
    plain = job_file(_job()).splitlines()
    assert "group_reporting=1" in plain
    assert "thread" not in plain
    both = job_file(_job(thread=True, per_job=True)).splitlines()
    assert "thread" in both
    assert "group_reporting=1" not in both


def test_fleet_jobs_lay_out_once_then_read_the_same_files_time_based(tmp_path: Path) -> None:
    """The real fio: the layout run writes FLEET_FILES files whole, the read run reads them as
    they are (no file grows or is rewritten) with numjobs readers for its runtime."""
    import shutil
    import subprocess

    from kvtool.bench.fio import FLEET_FILES, fleet_job

    if shutil.which("fio") is None:
        pytest.skip("fio is not installed: apt-get install -y fio")
    size = 256 * 1024
    layout = tmp_path / "layout.fio"
    layout.write_text(fleet_job(str(tmp_path / "d"), file_bytes=size, numjobs=4, layout=True,
                                block_bytes=65536, runtime_s=1, direct=False))  # fmt: skip
    (tmp_path / "d").mkdir()
    ran = subprocess.run(["fio", "--output-format=json", str(layout)], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    files = sorted((tmp_path / "d").iterdir())
    assert [f.name for f in files] == sorted(f"kvtool-fleet.{i}" for i in range(FLEET_FILES))
    assert {f.stat().st_size for f in files} == {size}
    written = {f.name: f.stat().st_mtime_ns for f in files}
    text = fleet_job(str(tmp_path / "d"), file_bytes=size, numjobs=3, block_bytes=65536,
                     runtime_s=1, direct=False)  # fmt: skip
    assert {"numjobs=3", "time_based=1", "rw=read"} <= set(text.splitlines())
    read = tmp_path / "read.fio"
    read.write_text(text)
    ran = subprocess.run(["fio", "--output-format=json", str(read)], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    job = json_document(ran.stdout)["jobs"][0]
    assert job["jobname"] == "seq_read"
    assert job["read"]["bw_bytes"] > 0
    assert job["write"]["io_bytes"] == 0
    assert {f.name: f.stat().st_mtime_ns for f in (tmp_path / "d").iterdir()} == written

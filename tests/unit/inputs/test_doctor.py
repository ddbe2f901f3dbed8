"""The front door's doctor options: the host to read (live, a snapshot, or live and captured),
what to gather, and the checks' options from the model's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.doctor import read_reports, resolve_doctor
from kvtool.probe.host import CapturingHost, LocalHost, SnapshotHost

ROOT = Path(__file__).parents[3]


def test_a_live_folder_with_a_model_sizes_chunks_and_planned_files(tmp_path: Path) -> None:
    inputs = resolve_doctor(
        str(tmp_path), nodes="16", model="llama-3.1-70b", tp="8", sessions="100", ctx="128k"
    )
    assert isinstance(inputs.host, LocalHost)
    assert inputs.path == str(tmp_path)
    assert inputs.options.nodes == 16
    assert inputs.options.chunk_bytes == 10_485_760  # one rank's 256-token chunk at tp 8
    # 100 sessions x ceil(128,000 / 256) chunks x 8 ranks, each rank writing its own file
    assert inputs.options.planned_chunk_files == 100 * 500 * 8
    assert inputs.gather.probe_mib == 64


def test_an_mla_model_is_written_from_one_rank(tmp_path: Path) -> None:
    inputs = resolve_doctor(
        str(tmp_path), model="deepseek-r1", tp="8", sessions="10", ctx="8k", write=False
    )
    assert inputs.options.planned_chunk_files == 10 * -(-8000 // 256) * 1
    assert inputs.gather.write_probe is False


def test_capture_wraps_the_live_host_and_snapshot_replaces_it(tmp_path: Path) -> None:
    captured = resolve_doctor(str(tmp_path), capture=tmp_path / "snap")
    assert isinstance(captured.host, CapturingHost)
    assert (tmp_path / "snap").is_dir()
    snapshot = resolve_doctor("/mnt/lustre/kvcache", snapshot=ROOT / "examples" / "doctor-snapshot")
    assert isinstance(snapshot.host, SnapshotHost)


@pytest.mark.parametrize(
    ("path", "options", "message"),
    [
        ("{tmp}/nope", {}, "does not exist"),
        ("{tmp}/file", {}, "is not a folder"),
        ("{tmp}", {"gds": "maybe"}, "unknown --gds 'maybe'"),
        ("{tmp}", {"sessions": "10"}, "--sessions and --ctx need --model"),
        ("{tmp}", {"snapshot": "{tmp}/empty"}, "is empty"),
        ("{tmp}", {"probe_mib": "lots"}, "--probe-mib"),
        ("{tmp}", {"cap": "lots"}, "--max-size"),
        ("{tmp}", {"cap": "1TiB", "contents": False}, "drop --no-contents"),
    ],
)
def test_each_mistake_names_its_option(
    tmp_path: Path, path: str, options: dict[str, str], message: str
) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    resolved = {
        k: (Path(v.format(tmp=tmp_path)) if k == "snapshot" else v) for k, v in options.items()
    }
    with pytest.raises(InputError, match=message):
        resolve_doctor(path.format(tmp=tmp_path), **resolved)  # type: ignore[arg-type]


def test_merge_reads_each_report_and_needs_one() -> None:
    reports = read_reports(
        [str(ROOT / "examples" / "check" / n) for n in ("doctor-node-a.json", "doctor-node-b.json")]
    )
    assert len(reports) == 2
    assert all(r.findings for r in reports)
    with pytest.raises(InputError, match="--merge needs doctor --json reports"):
        read_reports([])


def test_the_probe_is_capped_and_must_fit_the_free_space(tmp_path: Path) -> None:
    """--probe-mib 100000 used to fill the disk (on a shared mount, for every node)."""
    with pytest.raises(InputError, match="--probe-mib 100,000 is more than a probe needs"):
        resolve_doctor(str(tmp_path), probe_mib="100000")
    assert resolve_doctor(str(tmp_path), probe_mib="100000", write=False).gather.probe_mib == 100000
    assert resolve_doctor(str(tmp_path), probe_mib="1024").gather.probe_mib == 1024


def test_a_snapshot_answers_only_for_the_path_it_recorded(tmp_path: Path) -> None:
    snapshot = ROOT / "examples" / "doctor-snapshot"
    assert resolve_doctor(None, snapshot=snapshot).path == "/mnt/lustre/kvcache"  # the default
    assert resolve_doctor("/mnt/lustre/kvcache/", snapshot=snapshot).path == "/mnt/lustre/kvcache"
    with pytest.raises(InputError, match="recorded /mnt/lustre/kvcache, not /some/other/path"):
        resolve_doctor("/some/other/path", snapshot=snapshot)  # used to PASS path.writable
    (tmp_path / "notes.txt").write_text("not a capture")
    with pytest.raises(InputError, match="is not a kvtool doctor --capture folder"):
        resolve_doctor(None, snapshot=tmp_path)  # used to report 15 SKIPs and exit 0
    with pytest.raises(InputError, match="doctor checks one PATH"):
        resolve_doctor(None)


@pytest.mark.parametrize("fsx_id", ["abc", "fs-", "FS-0123456789ABCDEF0", "fs-0123\n"])
def test_an_fsx_id_not_shaped_as_aws_writes_them_is_refused(tmp_path: Path, fsx_id: str) -> None:
    with pytest.raises(InputError, match="is not an FSx file system id"):
        resolve_doctor(str(tmp_path), fsx_id=fsx_id)
    assert resolve_doctor(str(tmp_path), fsx_id="fs-0123456789abcdef0").gather.file_system_id


def test_capture_with_snapshot_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--capture records this node; --snapshot checks"):
        resolve_doctor(None, snapshot=ROOT / "examples" / "doctor-snapshot", capture=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_the_folder_is_judged_by_the_models_hub_names_and_the_tp_given(tmp_path: Path) -> None:
    inputs = resolve_doctor(str(tmp_path), model="llama-3.1-70b", tp="8", cap="20TiB")
    assert inputs.folder is not None
    assert inputs.folder.models[:2] == ("llama-3.1-70b", "meta-llama/Llama-3.1-70B")
    assert inputs.folder.mla is False
    assert "meta-llama/Llama-3.1-70B-Instruct" in inputs.folder.models
    assert (inputs.folder.world, inputs.folder.cap) == (8, 20 * 2**40)
    untold = resolve_doctor(str(tmp_path), model="llama-3.1-70b")
    assert untold.folder is not None
    assert untold.folder.world is None  # tp 1 is a default, not the deployment's world size
    assert resolve_doctor(str(tmp_path), contents=False).folder is None


def test_a_config_file_names_no_model_and_says_so(tmp_path: Path) -> None:
    config = ROOT / "profiles" / "models" / "llama-3.1-8b" / "config.json"
    inputs = resolve_doctor(str(tmp_path), model=str(config), tp="2")
    assert inputs.folder is not None
    assert (inputs.folder.models, inputs.folder.world) == ((), 2)
    assert any("orphans are judged by world size only" in n for n in inputs.notes)

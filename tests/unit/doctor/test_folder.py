"""doctor's and check's folder reader: SGLang's own recorded listing walked for real, the same
facts through a capture and its snapshot, and the names a model's files carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.doctor.checks import DoctorOptions
from kvtool.doctor.folder import KEY, FolderAsk, folder_facts
from kvtool.doctor.run import run_doctor
from kvtool.errors import InputError
from kvtool.inputs.folders import model_names
from kvtool.plan.folder_rules import FolderFacts
from kvtool.probe.gather import GatherOptions
from kvtool.probe.host import CapturingHost, LocalHost, SnapshotHost
from kvtool.probe.recorded import SHAPES
from kvtool.profiles.resolve import resolve_model
from tests.unit.folders.conftest import build

LLAMA_8B = FolderAsk(models=("meta-llama/Llama-3.1-8B-Instruct",), world=2)


@pytest.fixture
def sglang(tmp_path: Path) -> Path:
    root = tmp_path / "kv"
    build(root, "sglang-0.5.23.json")
    return root


def test_the_walk_sums_every_file_and_marks_the_other_models_as_orphans(sglang: Path) -> None:
    facts, why = folder_facts(LocalHost(), str(sglang), LLAMA_8B)
    assert why == ""
    assert facts is not None
    assert (facts.chunk_files, facts.temp_files, facts.unknown_files) == (63, 1, 0)
    assert facts.chunk_bytes + facts.temp_bytes == 258_148  # the recording's sizes
    assert facts.engines == ("SGLang HiCacheFile",)
    assert facts.layouts == 6
    assert facts.orphan_files == 63 - 6  # all but Llama 3.1 8B's six files
    assert facts.orphans[0].startswith("SGLang HiCacheFile deepseek-ai-DeepSeek-V3.2")
    assert facts.orphans[0].endswith("another model (24 files)")
    assert (facts.model, facts.world) == ("meta-llama/Llama-3.1-8B-Instruct", 2)
    assert (facts.busiest_folder, facts.busiest_files) == (".", 64)


def test_a_model_known_by_several_names_owns_the_files_of_each(sglang: Path) -> None:
    resolved = resolve_model("llama-3.1-8b")
    names = model_names("llama-3.1-8b", resolved=resolved)  # the one rule inspect uses too
    assert names is not None
    assert names[:2] == ("llama-3.1-8b", "meta-llama/Llama-3.1-8B")
    assert "meta-llama/Llama-3.1-8B-Instruct" in names  # an alias of the bundled profile
    assert names == model_names("llama-3.1-8b")  # resolved or not: the same names
    facts, _ = folder_facts(LocalHost(), str(sglang), FolderAsk(models=names))
    assert facts is not None
    assert facts.orphan_files == 63 - 6
    assert facts.model == f"llama-3.1-8b (or {len(names) - 1} other names)"


def test_a_capture_replays_as_the_same_facts_on_any_machine(sglang: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    live, _ = folder_facts(CapturingHost(LocalHost(), snap), str(sglang), LLAMA_8B)
    assert (snap / f"{KEY}.json").is_file()
    for child in sglang.iterdir():  # the folder is gone: only the snapshot answers
        child.unlink()
    replayed, why = folder_facts(SnapshotHost(snap), str(sglang), FolderAsk())
    assert why == ""
    assert replayed == live


def test_a_snapshot_without_the_record_says_so(tmp_path: Path) -> None:
    facts, why = folder_facts(SnapshotHost(tmp_path), "/fsx/kv", FolderAsk())
    assert facts is None
    assert why == f"this snapshot holds no {KEY}.json (captured with --no-contents?)"


def test_a_record_of_the_wrong_shape_is_refused_naming_the_field(tmp_path: Path) -> None:
    record = FolderFacts(path="/fsx/kv")._asdict()
    record["chunk_bytes"] = "90 GiB"
    (tmp_path / f"{KEY}.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match="chunk_bytes must be a whole number"):
        folder_facts(SnapshotHost(tmp_path), "/fsx/kv", FolderAsk())


def test_the_recorded_shape_names_every_fact() -> None:
    assert {name.removesuffix("!") for name in SHAPES[KEY]} == set(FolderFacts._fields)


def test_a_folder_that_cannot_be_listed_is_a_reason_not_an_exit(tmp_path: Path) -> None:
    facts, why = folder_facts(LocalHost(), str(tmp_path / "gone"), FolderAsk())
    assert facts is None
    assert why.startswith(f"cannot read {tmp_path / 'gone'}")


def test_run_doctor_reads_the_folder_unless_told_not_to(sglang: Path) -> None:
    def folder_statuses(**kwargs: object) -> dict[str, str]:
        report = run_doctor(
            LocalHost(),
            str(sglang),
            gather_options=GatherOptions(write_probe=False, gds=False, aws=False),
            options=DoctorOptions(),
            **kwargs,  # type: ignore[arg-type]
        )
        return {f.id: f.status for f in report.findings if f.area == "folder"}

    assert set(folder_statuses().values()) == {"SKIP"}  # no FolderAsk: --no-contents
    found = folder_statuses(folder=LLAMA_8B._replace(cap=100_000))
    assert found == {
        "folder.contents": "PASS",
        "folder.orphans": "WARN",
        "folder.cap": "FAIL",  # 258,148 bytes past 100,000
        "folder.files_per_dir": "PASS",
    }

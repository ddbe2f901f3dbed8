"""``kvtool.engine.smoke``: what is refused before anything is written (exit 2), what a T3
that cannot take the smoke fails (exit 1: too little free, read-only, full or gone under the
run), a bad T4 and S3 down for the whole run, and the footprint the smoke checks room for.
The scenario itself is in test_smoke.py; what both share is in smoke_helpers.py."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from kvtool.engine import smoke
from kvtool.engine.smoke import SMOKE_FOLDER, SmokeOptions, SmokeTargets, smoke_command
from kvtool.errors import InputError
from tests.unit.engine.smoke_helpers import (
    SMALL,
    _failed,
    _no_s3,
    _run,
    _tree,
)

pytestmark = pytest.mark.usefixtures("tmpdir_here")  # TMPDIR inside each test's folder

# --- errors before anything is written -----------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "message"),
    [
        ("both", "unknown --phase 'both'"),
        ("write", "--phase write needs the shared folder"),
        ("read", "--phase read needs the shared folder"),
    ],
)
def test_a_phase_that_cannot_run_is_refused(phase: str, message: str, tmpdir_here: Path) -> None:
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(phase=phase))
    assert caught.value.message == message
    assert list(tmpdir_here.iterdir()) == []


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_t3_dir_that_is_not_a_folder_is_refused(
    kind: str, tmp_path: Path, tmpdir_here: Path
) -> None:
    target = tmp_path / "fsx"
    if kind == "file":
        target.write_text("not a folder")
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(t3_dir=target))
    assert caught.value.message == f"--t3-dir {target} is not a folder"
    assert target.exists() == (kind == "file")
    assert list(tmpdir_here.iterdir()) == []


def test_a_read_without_a_manifest_is_refused_and_makes_nothing(t3_dir: Path) -> None:
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(t3_dir=t3_dir, phase="read"), None)
    assert caught.value.message == f"no smoke manifest in {t3_dir / SMOKE_FOLDER}"
    assert caught.value.hint == "run --phase write with the same --t3-dir first"
    assert list(t3_dir.iterdir()) == []


def test_a_folder_that_cannot_be_made_is_an_input_error(t3_dir: Path) -> None:
    (t3_dir / "afile").write_text("x")
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(t3_dir=t3_dir, folder_name="afile/smoke"))
    assert caught.value.message == f"cannot write {t3_dir / 'afile' / 'smoke'}: Not a directory"
    assert _tree(t3_dir) == {"afile": b"x"}


# A T3 that cannot take the smoke is the tier's finding, a FAIL (exit 1), not bad usage
# (exit 2), as it was (issue 53): too little free, read-only, or gone under the run.


def test_a_t3_without_room_is_one_failed_step_and_nothing_is_made(t3_dir: Path) -> None:
    why = "this smoke may write about 1.62 GiB; only 2.00 MiB free"
    outcome = smoke_command(
        SMALL, SmokeTargets(t3_dir=t3_dir), torch=None, s3_client=_no_s3, t3_fault=why
    )
    assert _failed(outcome) == [(smoke.T3_ROOM, why)]
    assert not outcome.report.passed
    assert list(t3_dir.iterdir()) == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_a_read_only_or_full_t3_is_a_failed_step_not_bad_usage(
    code: int, t3_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The smoke's folder cannot be made (injected at mkdir, as a read-only mount answers)."""
    real = Path.mkdir

    def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.parent == t3_dir:
            raise OSError(code, os.strerror(code))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    outcome = _run(SmokeTargets(t3_dir=t3_dir))
    ((name, detail),) = _failed(outcome)
    assert name == smoke.T3_ROOM
    assert detail == f"cannot write in {t3_dir}: {os.strerror(code)}"
    assert list(t3_dir.iterdir()) == []


def test_a_t3_gone_under_the_run_fails_its_steps_and_the_manifest_one(t3_dir: Path) -> None:
    """T3's folder replaced by a file after the node loss: the manifest write raised an
    InputError, exit 2 and no report; now a FAIL step, the second node not started."""
    import shutil

    def replace(step: str) -> None:
        if step == "node loss, recovery from T3":
            t3 = next(t3_dir.iterdir()) / "t3"
            shutil.rmtree(t3)
            t3.write_text("not a folder")

    started: list[str] = []

    def second(base: Path, name: str) -> smoke.Step:
        started.append(name)
        raise AssertionError("a second node without a manifest")

    outcome = _run(SmokeTargets(t3_dir=t3_dir), progress=replace, second_node=second)
    failed = dict(_failed(outcome))
    assert failed["manifest for a second node"].startswith("T3 took no manifest: cannot write")
    assert "second node reads T3" not in [s.name for s in outcome.report.steps]
    assert started == []
    assert list(t3_dir.iterdir()) == []  # removed all the same


@pytest.mark.parametrize("shared", [True, False])
def test_a_bad_t4_url_is_refused_and_the_folder_removed(
    shared: bool, t3_dir: Path, tmpdir_here: Path
) -> None:
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(t3_dir=t3_dir if shared else None, t4_url="ftp://x"))
    assert caught.value.message == "--t4-url 'ftp://x' is not s3://bucket/prefix or file:///path"
    assert list(t3_dir.iterdir()) == []
    assert list(tmpdir_here.iterdir()) == []


def test_a_file_t4_url_to_a_missing_folder_is_refused(tmp_path: Path, t3_dir: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(InputError) as caught:
        _run(SmokeTargets(t3_dir=t3_dir, t4_url=f"file://{missing}"))
    assert caught.value.message == f"--t4-url file://{missing}: {missing} is not a folder"
    assert not missing.exists()
    assert list(t3_dir.iterdir()) == []


@pytest.mark.server
def test_s3_down_for_the_whole_smoke_is_a_report_not_a_traceback(
    t3_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete_prefix raised inside the clean-up: a traceback, no report, T3 left behind."""
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens here: every S3 call is refused at once
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    from kvtool.probe.host import engine_s3_client

    outcome = smoke_command(
        SMALL,
        SmokeTargets(t3_dir=t3_dir, t4_url="s3://kv-down/down", io_threads=2),
        torch=None,
        s3_client=engine_s3_client,
    )
    assert not outcome.report.passed  # T4's steps fail, and say so
    assert outcome.report.faults
    assert outcome.cleanup_failures  # the prefix could not be listed: said, not raised
    assert list(t3_dir.iterdir()) == []  # T3 removed all the same


def test_the_footprint_counts_t1_off_gpu_and_t2_as_its_pool() -> None:
    """T2 and (off a GPU) T1 are host memory. T2 is a pool of T2's capacity in chunks and one
    session's chunks (what one call may push from T1 before T2's own evictions leave), each
    slot the chunk rounded up to 4 KiB:
    a 10 MiB chunk takes 10 MiB, not the 16 MiB torch's pinned allocator would round it to."""
    from kvtool.engine.smoke import CHUNK_OVERHEAD, smoke_footprint, t2_pool_bytes

    options = SmokeOptions(chunk_bytes=10 * 2**20, chunk_tokens=256, fingerprint="f" * 16)
    unique = 1 + 4 * 3
    index = 2 * CHUNK_OVERHEAD * unique
    t1 = 10 * 2**20 * (unique // 2)
    assert t2_pool_bytes(options) == 10 * 2**20 * (unique + 4)
    on_cpu = smoke_footprint(options, t1_on_gpu=False, t4_beside_t3=True)
    assert on_cpu.unique_chunks == unique
    assert on_cpu.memory_bytes == t1 + t2_pool_bytes(options) + index
    assert on_cpu.disk_bytes == 4 * unique * 10 * 2**20  # T3 and T4, chunks and a burst
    on_gpu = smoke_footprint(options, t1_on_gpu=True, t4_beside_t3=False)
    assert on_gpu.memory_bytes == t2_pool_bytes(options) + index
    assert on_gpu.disk_bytes == 2 * unique * 10 * 2**20
    odd = options._replace(chunk_bytes=17_989_632 + 1)  # one byte past a 4 KiB multiple
    assert t2_pool_bytes(odd) == (unique + 4) * (17_989_632 + 4096)


@pytest.mark.torch
@pytest.mark.no_gpu
def test_the_pool_t2_takes_in_the_scenario_is_what_the_footprint_counts(t3_dir: Path) -> None:
    import torch

    from kvtool.engine.mediums import FolderMedium, local_mediums, pool_slots
    from kvtool.engine.smoke import Scenario, smoke_capacity, t2_pool_bytes

    slots = pool_slots(smoke_capacity(SMALL), SMALL.chunk_bytes, batch=SMALL.chunks_per_session)
    mediums = local_mediums(torch, chunk_bytes=SMALL.chunk_bytes, t2_slots=slots)
    mediums["T3"] = FolderMedium("T3", t3_dir / "t3", io_threads=2)
    scenario = Scenario(SMALL, mediums)
    for name, run in (("prefill", scenario.prefill), ("pressure", scenario.pressure)):
        assert scenario.step(name, run).status == "PASS"
    assert scenario.engine.faults.summary() == []  # the pool never ran out
    assert mediums["T2"].held_bytes == t2_pool_bytes(SMALL) == 17 * SMALL.chunk_bytes  # type: ignore[attr-defined]
    scenario.engine.close()


def test_check_room_leaves_unknown_availability_unchecked() -> None:
    from kvtool.engine.smoke import SmokeFootprint
    from kvtool.inputs.smoke import check_room

    check_room(SmokeFootprint(10, 2**60, 2**60), memory_available=None)
    with pytest.raises(InputError, match="host memory"):
        check_room(SmokeFootprint(10, 2, 1), memory_available=1)

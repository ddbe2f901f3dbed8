"""``gc --release --emit fsx-task`` (folders/fsx_task.py): the request is one botocore's own
FSx service model and parameter validator accept (no network), its paths relative to the
file system, its age in whole days, and what FSx cannot do is refused or said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.folders.fsx_task import file_system_path, release_task
from kvtool.folders.select import Limits
from kvtool.probe.parse import Mount, parse_proc_mounts

FIXTURES = Path(__file__).parents[2] / "fixtures" / "probe"
FS_ID = "fs-0a0a63dea8324225b"
DAY = 86400.0


def _mount() -> Mount:
    """The recorded FSx client's mount (wsi-cloud proof run, /proc/mounts)."""
    text = (FIXTURES / "proc_mounts_fsx_lustre_efa_client_al2023.txt").read_text()
    (lustre,) = [m for m in parse_proc_mounts(text) if m.fstype == "lustre"]
    return lustre


def validate(request: dict[str, Any]) -> None:
    """botocore's ParamValidator over FSx's CreateDataRepositoryTask input shape."""
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("fsx")
    shape = model.operation_model("CreateDataRepositoryTask").input_shape
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()


def test_the_request_is_valid_by_botocores_fsx_model() -> None:
    mount = _mount()
    root = Path(mount.mountpoint) / "kv" / "lmcache"
    request, notes = release_task(FS_ID, root, mount, Limits(max_age=7 * DAY))
    validate(request)
    assert request == {
        "FileSystemId": FS_ID,
        "Type": "RELEASE_DATA_FROM_FILESYSTEM",
        "Paths": ["kv/lmcache"],
        "ReleaseConfiguration": {"DurationSinceLastAccess": {"Unit": "DAYS", "Value": 7}},
        "Report": {"Enabled": False},
    }
    assert len(notes) == 1  # what FSx selects by; 7 days are whole: nothing rounded
    assert "by path and age alone" in notes[0]


def test_the_validator_would_catch_a_wrong_request() -> None:
    """The check can fail: botocore refuses what FSx would (a missing Report, a negative age)."""
    mount = _mount()
    request, _ = release_task(FS_ID, Path(mount.mountpoint), mount, Limits(max_age=DAY))
    broken = {k: v for k, v in request.items() if k != "Report"}
    with pytest.raises(AssertionError, match="Report"):
        validate(broken)
    request["ReleaseConfiguration"]["DurationSinceLastAccess"]["Value"] = -1
    with pytest.raises(AssertionError, match="Value"):
        validate(request)


@pytest.mark.parametrize(
    ("max_age", "grace", "days", "said"),
    [
        (36 * 3600, 600, 2, "--max-age 36h is sent as 2 days"),
        (2 * 3600, 600, 1, "--max-age 2h is sent as 1 day"),
        (0, 600, 1, "--max-age 0 (within --grace 10m) is sent as 1 day"),
        (0, 0, 0, None),
        (3 * DAY, 600, 3, None),
    ],
)
def test_days_are_rounded_up_and_said(max_age: float, grace: float, days: int, said: str) -> None:
    """DAYS is FSx's only unit: less than asked is released, never a file used more recently."""
    mount = _mount()
    limits = Limits(max_age=max_age, grace=grace)
    request, notes = release_task(FS_ID, Path(mount.mountpoint) / "kv", mount, limits)
    validate(request)
    assert request["ReleaseConfiguration"]["DurationSinceLastAccess"]["Value"] == days
    if said is None:
        assert len(notes) == 1
    else:
        assert said in notes[1]
        assert "whole DAYS only" in notes[1]


def test_paths_are_relative_to_the_file_system() -> None:
    mount = Mount("10.0.1.5@tcp:/abcdefgh", "/fsx", "lustre", ("rw",))
    assert file_system_path(Path("/fsx"), mount) == "/"
    assert file_system_path(Path("/fsx/kv"), mount) == "kv"
    sub = Mount("10.0.1.5@tcp:/abcdefgh/team-a", "/mnt/team", "lustre", ("rw",))
    assert file_system_path(Path("/mnt/team/kv"), sub) == "team-a/kv"
    with pytest.raises(InputError, match="line break"):
        file_system_path(Path("/fsx/a\nb"), mount)


@pytest.mark.parametrize(
    ("fsx_id", "limits", "message"),
    [
        (None, Limits(max_age=DAY), "needs --fsx-id"),
        ("fs-XYZ", Limits(max_age=DAY), "not an FSx file system id"),
        (FS_ID, Limits(max_age=DAY, max_size=1), "no size limit"),
        (FS_ID, Limits(keep_free=1), "no size limit"),
        (FS_ID, Limits(), "needs --max-age"),
    ],
)
def test_what_fsx_cannot_do_is_refused(fsx_id: str | None, limits: Limits, message: str) -> None:
    mount = _mount()
    with pytest.raises(InputError, match=message):
        release_task(fsx_id, Path(mount.mountpoint), mount, limits)

"""Lustre's ``lfs`` through the probe door: the HSM parsers on recorded real outputs, and the
``Lfs`` client against a fake ``lfs`` on PATH that records its calls (tests/fake_lfs.py) and
answers in lfs.c's own formats (held here to the same recorded outputs)."""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kvtool.probe.host import LocalHost
from kvtool.probe.lfs import RELEASE_BATCH, File, Lfs, nameable
from kvtool.probe.parse import (
    HS_ARCHIVED,
    HS_DIRTY,
    HS_EXISTS,
    HS_LOST,
    HS_NORELEASE,
    HS_RELEASED,
    HsmState,
    parse_lfs_hsm_state,
    parse_lfs_path2fid,
)
from tests.fake_lfs import ARCHIVED, DIRTY, EXISTS, RELEASED, FakeLfs

FIXTURES = Path(__file__).parents[2] / "fixtures" / "probe"


def drain(generator: Generator[Any, None, Any]) -> tuple[list[Any], Any]:
    """What a generator yields, and what it returns."""
    got = []
    while True:
        try:
            got.append(next(generator))
        except StopIteration as stop:
            return got, stop.value


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("name", "path", "flags", "kind", "archive_id"),
    [
        ("lfs_hsm_state_dkf_released_exists_archived.txt", "testfile5", 0x0D, "released", 1),
        ("lfs_hsm_state_dkf_not_archived.txt", "ubuntu-25.04-desktop-amd64.iso", 0, "none", 0),
        ("lfs_hsm_state_manpage_exists_dirty_archived.txt", "/mnt/lustre/foo", 0x0B, "dirty", 1),
        ("lfs_hsm_state_fsx_awsdoc_exists_archived_PARTIAL.txt", "states", 0x09, "archived", 0),
    ],
)
def test_recorded_hsm_states(name: str, path: str, flags: int, kind: str, archive_id: int) -> None:
    states = parse_lfs_hsm_state(_fixture(name))
    assert states == {path: HsmState(flags, archive_id)}
    assert states[path].kind == kind
    assert states[path].releasable == (kind == "archived")


def test_only_archived_clean_files_may_be_released() -> None:
    """The MDT's rule (mdt_open.c mdt_hsm_release_allow), and released once is enough."""
    archived = HS_EXISTS | HS_ARCHIVED
    assert HsmState(archived).releasable
    for extra in (HS_DIRTY, HS_NORELEASE, HS_LOST, HS_RELEASED):
        assert not HsmState(archived | extra).releasable
    assert not HsmState(HS_EXISTS).releasable  # assigned to an archive, not yet copied
    assert HsmState(archived | HS_LOST).kind == "lost"


def test_a_name_with_a_colon_and_parenthesis_is_read_whole() -> None:
    text = "/proc/self/fd/7/a: (0x00000001) b.bin: (0x00000009) exists archived, archive_id:2\n"
    assert parse_lfs_hsm_state(text) == {"/proc/self/fd/7/a: (0x00000001) b.bin": HsmState(9, 2)}


def test_path2fid_one_file_and_several() -> None:
    assert parse_lfs_path2fid(_fixture("lfs_path2fid_manpage_one_file.txt"), ["x"]) == {
        "x": "[0x200000403:0x11f:0x0]"
    }
    two = ["/proc/self/fd/7/a.bin", "/proc/self/fd/8/b.bin"]
    assert parse_lfs_path2fid(_fixture("CONSTRUCTED_lfs_path2fid_two_files.txt"), two) == {
        two[0]: "[0x200000403:0x11f:0x0]",
        two[1]: "[0x280000bd1:0x2a:0x0]",
    }


@pytest.fixture
def fake(fake_lfs: FakeLfs) -> FakeLfs:
    return fake_lfs


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[int]:
    kv = tmp_path / "kv"
    kv.mkdir()
    fd = os.open(kv, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def test_the_fake_prints_what_lfs_prints(fake: FakeLfs, tmp_path: Path, folder: int) -> None:
    """The fake is held to the recorded formats: the parser reads its lines as it reads the
    real ones, flag by flag."""
    for flags in (0, EXISTS | ARCHIVED, EXISTS | DIRTY | ARCHIVED, EXISTS | ARCHIVED | RELEASED):
        (tmp_path / "kv" / "f.bin").write_bytes(b"x")
        fake.set(tmp_path / "kv" / "f.bin", flags)
        found = Lfs(LocalHost()).hsm_state([File(folder, "f.bin")])
        assert found == {File(folder, "f.bin"): HsmState(flags, 1 if flags else 0)}


def test_files_are_named_through_the_folders_handle(
    fake: FakeLfs, tmp_path: Path, folder: int
) -> None:
    """lfs is given /proc/self/fd/N/name with N passed to it: the folder kvtool holds, even
    when its path now leads elsewhere."""
    kv = tmp_path / "kv"
    (kv / "a.bin").write_bytes(b"a")
    fake.set(kv / "a.bin", EXISTS | ARCHIVED)
    kv.rename(tmp_path / "moved")
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "a.bin").write_bytes(b"other")  # the old path's new file: never asked
    lfs = Lfs(LocalHost())
    assert lfs.hsm_state([File(folder, "a.bin")])[File(folder, "a.bin")].kind == "archived"
    (call,) = fake.calls()
    assert call == ["hsm_state", f"/proc/self/fd/{folder}/a.bin"]


def test_release_is_by_fid_in_batches_the_kernel_takes(
    fake: FakeLfs, tmp_path: Path, folder: int
) -> None:
    kv = tmp_path / "kv"
    files = []
    for i in range(3):
        (kv / f"{i}.bin").write_bytes(b"k")
        fake.set(kv / f"{i}.bin", EXISTS | ARCHIVED)
        files.append(File(folder, f"{i}.bin"))
    lfs = Lfs(LocalHost())
    fids = lfs.path2fid(files)
    assert len(fids) == 3
    done = lfs.hsm_release(folder, list(fids.values()))
    assert done.ok, done.stderr
    assert all(fake.flags(kv / f"{i}.bin") & RELEASED for i in range(3))
    release = fake.calls()[-1]
    assert release[:3] == ["hsm_release", "--mntpath", f"/proc/self/fd/{folder}"]
    assert release[3:] == list(fids.values())
    with pytest.raises(ValueError, match="at most 50"):
        lfs.hsm_release(folder, ["[0x200000400:0x1:0x0]"] * (RELEASE_BATCH + 1))


def test_a_refused_release_stops_there_as_the_kernel_does(
    fake: FakeLfs, tmp_path: Path, folder: int
) -> None:
    kv = tmp_path / "kv"
    for name, flags in (("a", EXISTS | ARCHIVED), ("b", EXISTS | DIRTY | ARCHIVED), ("c", 9)):
        (kv / name).write_bytes(b"k")
        fake.set(kv / name, flags)
    lfs = Lfs(LocalHost())
    fids = lfs.path2fid([File(folder, n) for n in "abc"])
    done = lfs.hsm_release(folder, [fids[File(folder, n)] for n in "abc"])
    assert not done.ok
    assert "Operation not permitted" in done.stderr
    assert [bool(fake.flags(kv / n) & RELEASED) for n in "abc"] == [True, False, False]


def test_lfs_missing_is_none_and_newlines_are_not_nameable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no lfs here
    assert Lfs(LocalHost()).version() is None
    assert not nameable("a\nb.bin")
    assert nameable("a b: (0x1).bin")


def test_find_lists_files_older_than_asked_below_the_handle(
    fake: FakeLfs, tmp_path: Path, folder: int
) -> None:
    kv = tmp_path / "kv"
    (kv / "sub").mkdir()
    old, new = time.time() - 3 * 86400, time.time()
    for name, when in (("sub/old.bin", old), ("old.bin", old), ("new.bin", new)):
        (kv / name).write_bytes(b"k")
        os.utime(kv / name, (when, when))
    listing = Lfs(LocalHost()).find(folder, older_s=86400, times=("atime", "mtime"))
    found, done = drain(listing)
    assert done.ok
    assert sorted(found) == [((), "old.bin"), (("sub",), "old.bin")]
    (call,) = fake.calls()
    assert call[:4] == ["find", f"/proc/self/fd/{folder}", "--type", "f"]
    assert call[4:] == ["--atime", "+86400s", "--mtime", "+86400s", "--print0"]


def test_records_streams_and_reports_the_exit(tmp_path: Path) -> None:
    host = LocalHost()
    got, result = drain(host.records("t", ["printf", "a\\0b\\0c"], sep=b"\0"))
    assert got == [b"a", b"b", b"c"]
    assert result.ok
    missing = host.records("t", [str(tmp_path / "no-such-program")])
    with pytest.raises(StopIteration) as stop:
        next(missing)
    assert stop.value.value.returncode == 127


def test_records_keep_the_whole_call_deadline_and_the_stderr() -> None:
    """A child that writes a record and then hangs: what came is yielded, then 124 at the
    deadline (the child stopped); a child that fails says its stderr."""
    import sys

    code = "import sys, time; sys.stdout.write('a\\0'); sys.stdout.flush(); time.sleep(30)"
    started = time.monotonic()
    got, result = drain(LocalHost().records("t", [sys.executable, "-c", code], timeout_s=1))
    assert (got, result.returncode) == ([b"a"], 124)
    assert time.monotonic() - started < 15
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('no such folder'); sys.exit(3)"]
    got, result = drain(LocalHost().records("t", failing))
    assert (got, result.returncode, result.stderr) == ([], 3, "no such folder")

import os

import pytest

from kvtool.errors import InputError
from kvtool.folders.walk import LOCK_NAME, Walk, atime_mode


def test_every_file_once_links_never_followed(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "one").write_bytes(b"x" * 10)
    (tmp_path / "two").write_bytes(b"y" * 3)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"z")
    try:
        (tmp_path / "link-dir").symlink_to(outside)
        (tmp_path / "link-file").symlink_to(outside / "secret")
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / LOCK_NAME).write_text("{}")
        walk = Walk(tmp_path)
        seen = sorted(("/".join((*s.folder, s.name)), s.size) for s in walk)
    finally:
        (outside / "secret").unlink()
        outside.rmdir()
    assert seen == [("a/b/one", 10), ("two", 3)]
    assert walk.link_count == 2
    assert sorted(walk.links) == ["link-dir", "link-file"]
    assert walk.other == 1
    assert walk.folders == 3
    assert sorted(walk.per_folder) == [(0, "a"), (1, "."), (1, "a/b")]  # regular files only


def test_a_names_only_walk_finds_the_same_files_without_a_stat_each(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "one").write_bytes(b"x" * 10)
    (tmp_path / "two").write_bytes(b"y" * 3)
    (tmp_path / "link-file").symlink_to(tmp_path / "two")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / LOCK_NAME).write_text("{}")
    full = Walk(tmp_path)
    every = sorted((s.folder, s.name) for s in full)
    names = Walk(tmp_path, names_only=True)
    found = sorted((s.folder, s.name) for s in names)
    assert found == every == [((), "two"), (("a", "b"), "one")]
    assert (names.link_count, names.other, names.folders) == (1, 1, 3)
    assert all(s.size == 0 and s.ino == 0 for s in Walk(tmp_path, names_only=True))  # no stat


def test_largest_folders_kept_and_progress_reported(tmp_path):
    for i, n in enumerate((5, 1, 3)):
        folder = tmp_path / f"d{i}"
        folder.mkdir()
        for j in range(n):
            (folder / f"f{j}").write_bytes(b"")
    calls = []
    walk = Walk(tmp_path, progress=lambda files, size: calls.append(files), every=4, top_folders=2)
    assert len(list(walk)) == 9
    assert walk.per_folder == [(5, "d0"), (3, "d2")]
    assert calls[0] == 4
    assert calls[-1] == 9


def test_an_unreadable_subfolder_is_reported_and_the_root_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "f").write_bytes(b"")
    (tmp_path / "locked").mkdir()
    real = os.scandir

    def scandir(path):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    walk = Walk(tmp_path)
    assert [s.name for s in walk] == ["f"]
    assert walk.unreadable == ["locked"]
    with pytest.raises(InputError, match="cannot read"):
        list(Walk(tmp_path / "locked"))


MOUNTS = """\
/dev/nvme0n1p1 / ext4 rw,relatime 0 0
10.0.0.5@tcp:/abcdefgh {fsx} lustre rw,noatime,flock,lazystatfs 0 0
/dev/nvme1n1 {scratch} xfs rw,strictatime 0 0
"""


def test_how_the_mount_records_access(tmp_path):
    assert atime_mode(tmp_path, None) == ("unknown", "")
    fake = tmp_path / "fsx"
    fake.mkdir()
    # (formatted, not replaced: a temporary folder's own path may hold "/scratch")
    mounts = MOUNTS.format(fsx=fake, scratch=tmp_path / "scratch")
    assert atime_mode(fake, mounts) == ("noatime", str(fake))
    assert atime_mode(tmp_path, mounts) == ("relatime", "/")
    (tmp_path / "scratch").mkdir()
    assert atime_mode(tmp_path / "scratch", mounts)[0] == "strictatime"

import os

import pytest

from kvtool.errors import InputError
from kvtool.folders.walk import LOCK_NAME, Root, Walk, atime_mode


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
    real = os.open

    def open_(path, flags, *args, **kw):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", open_)
    walk = Walk(tmp_path)
    assert [s.name for s in walk] == ["f"]
    assert walk.unreadable == ["locked"]
    assert walk.unreadable_count == 1
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


def _mount(*args: str) -> bool:
    import subprocess

    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def test_a_folder_swapped_for_a_link_mid_walk_is_never_followed(tmp_path):
    from kvtool.folders.walk import Handles, Root

    root_path = tmp_path / "kv"
    (root_path / "sub" / "deeper").mkdir(parents=True)
    for i in range(3):
        (root_path / "sub" / f"in-{i}").write_bytes(b"x")
    (root_path / "sub" / "deeper" / "leaf").write_bytes(b"x")
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret").write_bytes(b"s")
    (outside / "deeper" / "secret2").write_bytes(b"s")
    with Root(root_path) as root, Handles(root) as handles:
        walk = Walk(root)
        seen = []
        for one in walk:
            seen.append((one.folder, one.name))
            if len(seen) == 1:  # the walk is inside sub now: swap it for a link outside
                os.rename(root_path / "sub", root_path / "sub.real")
                (root_path / "sub").symlink_to(outside)
                assert handles.get(("sub",)) is None  # a later open by name meets the link
                assert handles.get(("sub", "deeper")) is None
        names = {name for _folder, name in seen}
        assert "secret" not in names
        assert "secret2" not in names
        assert names == {"in-0", "in-1", "in-2", "leaf"}  # the folder it held, as it was
    assert (outside / "secret").exists()


def test_mount_points_below_the_folder_are_not_entered(tmp_path):
    from kvtool.folders.walk import Root

    (tmp_path / "tmpfs").mkdir()
    (tmp_path / "bound").mkdir()
    source = tmp_path.parent / f"{tmp_path.name}-source"
    source.mkdir()
    (source / "theirs").write_bytes(b"x")
    (tmp_path / "mine").write_bytes(b"x")
    if not _mount("-t", "tmpfs", "none", str(tmp_path / "tmpfs")):
        pytest.skip("this user cannot mount")
    try:
        (tmp_path / "tmpfs" / "on-tmpfs").write_bytes(b"x")
        assert _mount("--bind", str(source), str(tmp_path / "bound"))
        try:
            with Root(tmp_path) as root:
                walk = Walk(root)
                assert [s.name for s in walk] == ["mine"]
            assert sorted(walk.mounts) == ["bound", "tmpfs"]  # the bind mount: same device
        finally:
            _mount_undo(tmp_path / "bound")
    finally:
        _mount_undo(tmp_path / "tmpfs")


def _mount_undo(path):
    import subprocess

    subprocess.run(["umount", str(path)], check=True)


def test_folders_too_deep_are_reported_not_entered_and_hard_links_counted(tmp_path):
    from kvtool.folders.walk import MAX_DEPTH

    deep = tmp_path
    for i in range(MAX_DEPTH + 5):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "bottom").write_bytes(b"x")
    (tmp_path / "one").write_bytes(b"x")
    os.link(tmp_path / "one", tmp_path / "two")
    walk = Walk(tmp_path)
    seen = {s.name: s for s in walk}
    assert set(seen) == {"one", "two"}
    assert seen["one"].links == seen["two"].links == 2
    assert len(walk.too_deep) == 1
    assert walk.too_deep[0].count("/") == MAX_DEPTH


def test_a_folder_moved_out_or_replaced_is_no_longer_inside(tmp_path):
    from kvtool.folders.walk import Handles

    (tmp_path / "kv" / "a" / "b").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    with Root(tmp_path / "kv") as root, Handles(root) as handles:
        held = handles.get(("a", "b"))
        assert held is not None
        assert handles.inside(("a", "b"))
        os.rename(tmp_path / "kv" / "a", tmp_path / "elsewhere" / "a")  # an ancestor moved out
        assert not handles.inside(("a", "b"))
        assert handles.get(("a", "b")) is None  # forgotten, and nothing of that name is left
        (tmp_path / "kv" / "a" / "b").mkdir(parents=True)  # a new folder takes the name
        assert handles.inside(("a", "b"))  # the new one, opened afresh
        assert (
            os.fstat(handles.get(("a", "b"))).st_ino
            != os.stat(tmp_path / "elsewhere" / "a" / "b").st_ino
        )

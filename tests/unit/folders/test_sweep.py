"""gc's second walk (folders/sweep.py) on its own: it yields exactly the files the plan chose,
counts what each frees as the plan counted it (apparent bytes, or under --release the bytes
the file system holds), and hands a subclass its last say while the folders are still held
(``_done``: ``--release`` flushes its last batch there). Its attacks are in test_gc.py."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvtool.folders.gc_plan import Removal, plan
from kvtool.folders.scope import Scope
from kvtool.folders.select import Limits
from kvtool.folders.sweep import Sweep
from kvtool.folders.walk import Handles, Root

pytestmark = pytest.mark.usefixtures("ctime_as_mtime")
SCOPE = Scope(None, None, False)


def _folder(root: Path) -> list[Path]:
    root.mkdir()
    when = time.time() - 3 * 86400
    made = []
    for i in range(6):
        path = root / f"{i:064x}_m-x_0_1.bin"
        with open(path, "wb") as f:
            f.write(b"k" * 5000)  # 5,000 bytes, held in whole blocks
        os.utime(path, (when + i, when + i))
        made.append(path)
    return made


@pytest.mark.parametrize("held", [False, True])
def test_a_dry_sweep_yields_the_chosen_files_with_their_bytes(tmp_path: Path, held: bool) -> None:
    made = _folder(tmp_path / "kv")
    with Root(tmp_path / "kv") as root:
        planned = plan(
            root, scope=SCOPE, limits=Limits(max_age=86400), mode="strictatime",
            free_bytes=1 << 40, held=held,
        )  # fmt: skip
        got = list(Sweep(root, planned, scope=SCOPE, mode="strictatime", dry_run=True))
    assert sorted(r.path for r in got) == sorted(p.name for p in made)
    expected = [p.stat().st_blocks * 512 if held else 5000 for p in made]
    assert sorted(r.bytes for r in got) == sorted(expected)
    assert planned.folder_bytes == sum(expected)


def test_done_is_called_once_with_the_folders_still_held(tmp_path: Path) -> None:
    _folder(tmp_path / "kv")
    calls: list[bool] = []

    class Last(Sweep):
        def _done(self, handles: Handles) -> Iterator[Removal]:
            calls.append(handles.get(()) == self.root.fd)
            return iter(())

    with Root(tmp_path / "kv") as root:
        planned = plan(
            root, scope=SCOPE, limits=Limits(max_age=86400), mode="strictatime",
            free_bytes=1 << 40,
        )  # fmt: skip
        assert len(list(Last(root, planned, scope=SCOPE, mode="strictatime", dry_run=True))) == 6
    assert calls == [True]


def test_a_file_whose_folder_leaves_between_its_rename_and_unlink_gets_its_name_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder moves out of DIR after gc renamed a file to its private name and before the
    unlink: the file goes back under its own name, in the folder where it now is. Finding the
    folder gone closed its handle before the put-back, which then failed (EBADF) and left the
    file under the private name (1 in ~6 runs of the mid-run move attack)."""
    (tmp_path / "kv").mkdir()
    made = _folder(tmp_path / "kv" / "s")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = Handles.inside
    calls = []

    def move_first(self: Handles, folder: tuple[str, ...], **keep: bool) -> bool:
        calls.append(folder)  # 1: before the chunk; 2: after the rename, before the unlink
        if len(calls) == 2:
            os.rename(tmp_path / "kv" / "s", elsewhere / "s")
        return real(self, folder, **keep)

    monkeypatch.setattr(Handles, "inside", move_first)
    with Root(tmp_path / "kv") as root:
        planned = plan(
            root, scope=SCOPE, limits=Limits(max_age=86400), mode="strictatime",
            free_bytes=1 << 40,
        )  # fmt: skip
        sweep = Sweep(root, planned, scope=SCOPE, mode="strictatime", dry_run=False)
        assert list(sweep) == []
    assert sorted(os.listdir(elsewhere / "s")) == sorted(p.name for p in made)
    assert sweep.outcome().left == ("s",)

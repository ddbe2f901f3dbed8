"""``gc --release`` (folders/release.py) against a fake ``lfs`` that records its calls and
keeps each file's HSM flags by inode (tests/fake_lfs.py): only archived, clean files are
released; nothing is ever removed; a file replaced since the plan, or while its state was
read, is not released; a batch the kernel stops part way is finished file by file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kvtool.folders import gc_plan
from kvtool.folders.gc import Scope, run_gc
from kvtool.folders.release import ReleaseSweep
from kvtool.folders.select import Limits
from kvtool.folders.walk import Root
from kvtool.probe.host import LocalHost
from kvtool.probe.lfs import Lfs
from tests.fake_lfs import ARCHIVED, DIRTY, EXISTS, NORELEASE, RELEASED, FakeLfs

pytestmark = pytest.mark.usefixtures("ctime_as_mtime")
AGED = 5 * 86400
CLEAN = EXISTS | ARCHIVED


@pytest.fixture
def fake(fake_lfs: FakeLfs) -> FakeLfs:
    return fake_lfs


def _chunks(root: Path, count: int, *, ranks: int = 2, size: int = 8192) -> list[list[Path]]:
    """SGLang pages of ``ranks`` files each, with data (a release frees held bytes), the
    oldest first, five days old and more."""
    root.mkdir(exist_ok=True)
    when = time.time() - AGED
    pages = []
    for i in range(count):
        files = []
        for rank in range(ranks):
            path = root / f"{i:064x}_m-x_{rank}_{ranks}.bin"
            path.write_bytes(os.urandom(size))
            os.utime(path, (when + i, when + i))
            files.append(path)
        pages.append(files)
    return pages


def _release(root: Path, *, dry_run: bool = False, **limits: float) -> tuple:  # type: ignore[type-arg]
    return run_gc(
        root, scope=Scope(None, None, False), limits=Limits(**limits), mode="strictatime",
        free_bytes=1 << 50, dry_run=dry_run, release=Lfs(LocalHost()),
    )  # fmt: skip


def test_only_archived_clean_files_are_released_and_none_removed(
    fake: FakeLfs, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    pages = _chunks(kv, 60)  # 120 files: three batches of lfs calls
    flags = [CLEAN, 0, EXISTS | DIRTY | ARCHIVED, EXISTS, CLEAN | NORELEASE, CLEAN | RELEASED]
    for n, path in enumerate(p for page in pages for p in page):
        fake.set(path, flags[n % len(flags)])
    before = {path: fake.flags(path) for page in pages for path in page}
    planned, outcome = _release(kv, max_age=86400)
    released = [p for p, f in before.items() if not f & RELEASED and fake.flags(p) & RELEASED]
    assert released == [p for p, f in before.items() if f == CLEAN]  # 0 not archived released
    assert all(p.exists() for p in before)  # 0 removed under --release
    assert outcome.released
    assert outcome.removed_files == len(released)
    assert outcome.removed_bytes == sum(p.stat().st_blocks * 512 for p in released)
    kept = planned.groups.kept[("sglang", "m-x")]
    assert kept[gc_plan.NOT_EXPORTED_WHY].files == sum(
        1 for f in before.values() if f in (0, EXISTS | DIRTY | ARCHIVED, EXISTS, CLEAN | NORELEASE)
    )
    assert kept[gc_plan.RELEASED_WHY].files == sum(1 for f in before.values() if f & RELEASED)
    assert any("changed since its export" in why for _path, why in outcome.not_exported)
    releases = [c for c in fake.calls() if c[0] == "hsm_release"]
    assert releases
    assert all(len(c) - 3 <= 50 for c in releases)
    assert all(c[3].startswith("[0x") for c in releases)


def test_a_dry_run_reads_states_and_releases_nothing(fake: FakeLfs, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    pages = _chunks(kv, 4)
    for page in pages:
        for path in page:
            fake.set(path, CLEAN)
    fake.set(pages[0][0], 0)
    _planned, outcome = _release(kv, dry_run=True, max_age=86400)
    assert outcome.removed_files == 7  # would release
    assert not any(fake.flags(p) & RELEASED for page in pages for p in page)
    assert {c[0] for c in fake.calls()} <= {"hsm_state", "--version"}


def test_a_file_replaced_since_the_plan_is_not_released(fake: FakeLfs, tmp_path: Path) -> None:
    """An archived file renamed over a chosen one after the plan (a writer putting back an
    exported copy, say) is another inode: its chunk is changed, and nothing of it goes."""
    kv = tmp_path / "kv"
    pages = _chunks(kv, 3)
    for page in pages:
        for path in page:
            fake.set(path, CLEAN)
    with Root(kv) as root:
        planned = gc_plan.plan(
            root, scope=Scope(None, None, False), limits=Limits(max_age=86400),
            mode="strictatime", free_bytes=1 << 50, held=True,
        )  # fmt: skip
        intruder = kv / "new.tmp-not-a-chunk"
        intruder.write_bytes(b"n" * 8192)
        fake.set(intruder, CLEAN)
        os.rename(intruder, pages[1][0])
        sweep = ReleaseSweep(
            root, planned, lfs=Lfs(LocalHost()), scope=Scope(None, None, False),
            mode="strictatime", dry_run=False,
        )  # fmt: skip
        released = list(sweep)
    assert not fake.flags(pages[1][0]) & RELEASED
    assert not fake.flags(pages[1][1]) & RELEASED  # the chunk stays whole
    assert {r.path for r in released} == {p.name for i in (0, 2) for p in pages[i]}
    assert sweep.outcome().skipped_chunks == 1


def test_a_file_replaced_while_its_state_is_read_is_not_released(
    fake: FakeLfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between gc's two looks at a file (stat, lfs hsm_state and path2fid, stat) a writer
    renames an archived file over it: the second look sees another inode, and the file whose
    state and FID were read is not released, nor the one put there."""
    kv = tmp_path / "kv"
    pages = _chunks(kv, 2)
    for page in pages:
        for path in page:
            fake.set(path, CLEAN)
    target = pages[0][0]
    old_inode = target.stat().st_ino
    real = Lfs.path2fid

    def swap_then_read(self: Lfs, files: list) -> dict:  # type: ignore[type-arg]
        found = real(self, files)
        if target.exists() and target.stat().st_ino == old_inode:
            other = kv / "other"
            other.write_bytes(b"o" * 8192)
            fake.set(other, CLEAN)
            os.rename(other, target)
        return found

    monkeypatch.setattr(Lfs, "path2fid", swap_then_read)
    _planned, outcome = _release(kv, max_age=86400)
    assert not fake.flags(target) & RELEASED  # the file now there
    states = json.loads(fake.db.read_text())
    assert states[f"{target.stat().st_dev}:{old_inode}"] == CLEAN  # the file read: not released
    assert outcome.removed_files == 3


def test_a_busy_file_stops_the_batch_and_the_rest_still_go(
    fake: FakeLfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kv = tmp_path / "kv"
    pages = _chunks(kv, 10)
    files = [p for page in pages for p in page]
    for path in files:
        fake.set(path, CLEAN)
    busy = files[3]
    monkeypatch.setenv("FAKE_LFS_BUSY", f"{busy.stat().st_dev}:{busy.stat().st_ino}")
    _planned, outcome = _release(kv, max_age=86400)
    assert [bool(fake.flags(p) & RELEASED) for p in files] == [p != busy for p in files]
    (failure,) = outcome.failed
    assert busy.name in failure
    assert "Device or resource busy" in failure


def test_released_bytes_meet_a_size_limit_and_unexported_ones_miss_it(
    fake: FakeLfs, tmp_path: Path
) -> None:
    """--max-size counts what the file system holds: released files are freed space."""
    kv = tmp_path / "kv"
    pages = _chunks(kv, 10)
    held = sum(p.stat().st_blocks * 512 for page in pages for p in page)
    for page in pages:
        for path in page:
            fake.set(path, CLEAN)
    fake.set(pages[0][0], 0)  # the oldest chunk's first file is not exported
    planned, outcome = _release(kv, max_size=held // 2)
    assert planned.held
    assert planned.choice.bytes >= held - held // 2
    assert outcome.removed_bytes == planned.choice.bytes - pages[0][0].stat().st_blocks * 512

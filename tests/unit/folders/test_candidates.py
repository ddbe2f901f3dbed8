"""``gc --candidates lfs-find`` (folders/candidates.py): on the same folder, candidates from
``lfs find`` (a fake lfs that runs GNU find with lfs's filter, tests/fake_lfs.py) select the
same files as gc's own walk, read only the files lfs listed, and keep a chunk with a file
lfs did not list whole."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.folders import gc_plan
from kvtool.folders.candidates import SLACK_S, cut_age, lfs_find
from kvtool.folders.gc import Scope, Sweep
from kvtool.folders.select import Limits
from kvtool.folders.walk import Root
from kvtool.probe.host import LocalHost
from kvtool.probe.lfs import Lfs
from tests.fake_lfs import FakeLfs
from tests.fixtures.folders import scaled

pytestmark = pytest.mark.usefixtures("ctime_as_mtime")
SCOPE = Scope(None, None, False)


@pytest.fixture
def fake(fake_lfs: FakeLfs) -> FakeLfs:
    return fake_lfs


def _chosen(root: Path, limits: Limits, *, lfs: bool, mode: str = "strictatime") -> tuple:  # type: ignore[type-arg]
    with Root(root) as handle:
        found = lfs_find(Lfs(LocalHost()), handle, limits=limits, mode=mode) if lfs else None
        planned = gc_plan.plan(
            handle, scope=SCOPE, limits=limits, mode=mode, free_bytes=1 << 50, candidates=found
        )
        sweep = Sweep(handle, planned, scope=SCOPE, mode=mode, dry_run=True)
        return {r.path for r in sweep}, planned


def test_both_sources_choose_the_same_files(fake: FakeLfs, tmp_path: Path) -> None:
    root = tmp_path / "kv"
    scaled.make(root, 6000)
    # a chunk with one old and one young file: old by lfs's filter, young as a whole
    page = next(root.glob("*_2_0_cp0_2.bin"))
    sibling = page.with_name(page.name.replace("_cp0_2", "_cp1_2"))
    old = time.time() - 40 * 86400
    os.utime(page, (old, old))
    os.utime(sibling, (time.time(), time.time()))
    for mode in ("strictatime", "noatime"):
        limits = Limits(max_age=10 * 86400)
        walked, by_walk = _chosen(root, limits, lfs=False, mode=mode)
        found, by_lfs = _chosen(root, limits, lfs=True, mode=mode)
        assert walked
        assert found == walked
        assert page.name not in found
        assert by_walk.listed is None
        assert 0 < by_lfs.listed < 6000  # lfs listed the older files only
        assert by_lfs.unlisted > 0  # the younger ones were never read
    finds = [c for c in fake.calls() if c[0] == "find"]
    assert finds[0][4:] == ["--atime", f"+{10 * 86400 - SLACK_S}s", "--mtime",
                            f"+{10 * 86400 - SLACK_S}s", "--print0"]  # fmt: skip
    assert finds[1][4:] == ["--mtime", f"+{10 * 86400 - SLACK_S}s", "--print0"]  # noatime


def test_the_cut_is_never_inside_the_grace() -> None:
    assert cut_age(Limits(max_age=60, grace=600)) == 600
    with pytest.raises(ValueError, match="--max-age"):
        cut_age(Limits(max_size=1))


def test_a_failing_lfs_find_is_one_line(
    fake: FakeLfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kv"
    root.mkdir()
    (fake.bin / "lfs").write_text(
        "#!/bin/sh\necho \"lfs find: bad time string '+5s'\" >&2\nexit 22\n"
    )
    with Root(root) as handle, pytest.raises(InputError, match=r"lfs find failed: .*bad time"):
        lfs_find(Lfs(LocalHost()), handle, limits=Limits(max_age=86400), mode="relatime")

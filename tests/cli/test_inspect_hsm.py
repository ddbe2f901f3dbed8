"""``kvtool inspect`` reads HSM states on FSx for Lustre (a fake ``lfs`` on PATH,
tests/fake_lfs.py, and the folder's mount read as Lustre): each group's files and bytes
archived, released (in S3), dirty and not exported; nothing asked of lfs off Lustre; a note
where lfs is missing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_gc_release import _on_lustre, _pages
from tests.conftest import CliResult
from tests.fake_lfs import ARCHIVED, DIRTY, EXISTS, RELEASED, FakeLfs
from tests.fixtures.folders import scaled

Kvtool = Callable[..., CliResult]


def test_inspect_counts_each_groups_hsm_states(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lfs: FakeLfs
) -> None:
    kv = tmp_path / "kv"
    files = _pages(kv, 300)  # 600 files: two batches of lfs hsm_state
    kinds = [EXISTS | ARCHIVED, EXISTS | ARCHIVED | RELEASED, EXISTS | DIRTY | ARCHIVED, 0]
    for n, path in enumerate(files):
        fake_lfs.set(path, kinds[n % 4])
    _on_lustre(monkeypatch, kv)
    done = kvtool("inspect", str(kv), "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["hsm_states"] == {"read": True, "note": None}
    (layout,) = data["layouts"]
    size = files[0].stat().st_size
    assert layout["hsm"] == {
        kind: {"files": 150, "bytes": 150 * size}
        for kind in ("archived", "released", "dirty", "none")
    }
    assert [c[0] for c in fake_lfs.calls()].count("hsm_state") == 2
    text = kvtool("inspect", str(kv))
    assert "released (in S3)" in text.stdout
    assert "150 (1.17 MiB)" in text.stdout


def test_inspect_asks_lfs_nothing_off_lustre_and_says_when_lfs_is_missing(
    kvtool: Kvtool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lfs: FakeLfs
) -> None:
    kv = tmp_path / "kv"
    scaled.make(kv, 400)
    done = kvtool("inspect", str(kv), "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["hsm_states"] == {"read": False, "note": None}
    assert all(layout["hsm"] is None for layout in data["layouts"])
    assert fake_lfs.calls() == []
    _on_lustre(monkeypatch, kv)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    text = kvtool("inspect", str(kv))
    assert text.exit_code == 0, text.stderr
    assert "lfs is not installed here" in " ".join(text.stdout.split())

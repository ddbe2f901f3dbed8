"""run_t3's checks before any I/O: what the folder's facts must be, and the space it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvtool.bench.t3 import T3Options, plan_files, run_t3
from kvtool.errors import InputError
from kvtool.probe.host import LocalHost


class ReadOnlyMount(LocalHost):
    """This machine, except that the folder sits on a read-only mount (os.access says so)."""

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        return {**super().path_info(key, path), "writable": False}


def test_a_read_only_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not writable"):
        run_t3(ReadOnlyMount(), str(tmp_path), T3Options(block_bytes=2**20))
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("x")
    with pytest.raises(InputError, match="is not a folder"):
        run_t3(LocalHost(), str(target), T3Options(block_bytes=2**20))


def test_space_is_per_job_files_for_every_node() -> None:
    options = T3Options(block_bytes=2**20, threads=4, size_bytes=2**30, hosts=("a", "b"))
    assert plan_files("/fsx", options, free_bytes=None) == 2**28
    with pytest.raises(InputError, match="x 2 nodes"):
        plan_files("/fsx", options, free_bytes=2**31)  # needs 2 GiB of 2 GiB free: over 90%


def test_each_job_gets_at_least_one_aligned_block() -> None:
    options = T3Options(block_bytes=10 * 2**20, threads=32, size_bytes=2**20)
    assert plan_files("/fsx", options, free_bytes=None) == 10 * 2**20

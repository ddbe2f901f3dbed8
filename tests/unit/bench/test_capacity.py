"""kvtool capacity's harness on real files: sessions restore and write real chunk files in a
scratch folder, the raw-fio check runs the real fio, and nothing is left behind."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kvtool.bench.capacity import (
    CapacityOptions,
    level_rows,
    room_for,
    run_capacity,
)
from kvtool.bench.sessions import Turn, Workload
from kvtool.errors import InputError
from kvtool.probe.host import LocalHost

SMALL = Workload(ctx_tokens=2048, chunk_tokens=256, chunk_bytes=64 * 1024, restore_parallel=4)


class Roomy(LocalHost):
    """This machine, with the free space a test says."""

    def __init__(self, free_bytes: int | None) -> None:
        super().__init__()
        self.free_bytes = free_bytes

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        info = super().path_info(key, path)
        info["free_bytes"] = self.free_bytes
        return info


def test_fixed_levels_restore_real_chunk_files_and_leave_nothing(tmp_path: Path) -> None:
    steps: list[str] = []
    result = run_capacity(
        LocalHost(), str(tmp_path), SMALL,
        CapacityOptions(slo_s=5.0, duration_s=1.0, levels=(1, 3), fio_check=False),
        progress=steps.append,
    )  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # the scratch folder is gone
    one, three = result.found.levels
    assert (one.sessions, three.sessions) == (1, 3)
    for level in (one, three):
        assert level.restores >= level.sessions  # every session restored at least once
        files = level.files_per_s * level.seconds
        assert files == pytest.approx(level.restores * SMALL.chunks)  # whole contexts read
        assert level.bytes_per_s == pytest.approx(level.files_per_s * 64 * 1024)
        assert level.write_bytes_per_s > 0  # each restore was followed by a turn
        assert level.restore_p50_s <= level.restore_p95_s <= level.restore_p99_s
    assert result.found.max_sessions == 3
    assert any("writing 2 more sessions' contexts" in s for s in steps)
    rows = level_rows(result.found.levels)
    assert [r["sessions"] for r in rows] == [1, 3]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (.ci/setup)")
def test_the_search_and_the_raw_fio_check(tmp_path: Path) -> None:
    result = run_capacity(
        LocalHost(), str(tmp_path), SMALL,
        CapacityOptions(slo_s=1e-9, duration_s=1.0),  # nothing holds: 1 level, then the check
    )  # fmt: skip
    assert result.found.max_sessions == 0
    assert [lv.sessions for lv in result.found.levels] == [1]
    check = result.fio
    assert check is not None
    assert (check.concurrency, check.block_bytes) == (4, 64 * 1024)
    assert check.fio_bytes_per_s > 0
    assert check.harness_bytes_per_s > 0
    assert list(tmp_path.iterdir()) == []


def test_turns_with_pauses_spread_the_restores(tmp_path: Path) -> None:
    paced = SMALL._replace(turns=(Turn(300, 0.3), Turn(700, 0.2)))
    result = run_capacity(
        LocalHost(), str(tmp_path), paced,
        CapacityOptions(slo_s=5.0, duration_s=1.0, levels=(2,), fio_check=False),
    )  # fmt: skip
    (level,) = result.found.levels
    closed = run_capacity(
        LocalHost(), str(tmp_path), SMALL,
        CapacityOptions(slo_s=5.0, duration_s=1.0, levels=(2,), fio_check=False),
    ).found.levels[0]  # fmt: skip
    assert 2 <= level.restores < closed.restores  # pauses between restores: fewer of them
    assert not any("closed loop" in n for n in result.notes)


def test_room_bounds_the_levels(tmp_path: Path) -> None:
    per_session = (SMALL.chunks + SMALL.turn_chunks(SMALL.turn(0)) + 1) * 64 * 1024
    assert room_for(SMALL, per_session * 10, limit=1000) == 8  # 80% of the free space
    assert room_for(SMALL, None, limit=7) == 7
    with pytest.raises(InputError, match="no room for one session"):
        run_capacity(Roomy(per_session), str(tmp_path), SMALL, CapacityOptions(levels=(1,)))
    with pytest.raises(InputError, match="has room for 8 sessions' contexts; --sessions asks"):
        run_capacity(Roomy(per_session * 10), str(tmp_path), SMALL, CapacityOptions(levels=(9,)))
    with pytest.raises(InputError, match="does not exist"):
        run_capacity(LocalHost(), str(tmp_path / "nowhere"), SMALL, CapacityOptions())
    assert list(tmp_path.iterdir()) == []


def test_a_chunk_not_4k_aligned_is_rounded_up_and_said(tmp_path: Path) -> None:
    odd = SMALL._replace(chunk_bytes=10_000)
    result = run_capacity(
        LocalHost(), str(tmp_path), odd,
        CapacityOptions(slo_s=5.0, duration_s=1.0, levels=(1,), fio_check=False),
    )  # fmt: skip
    assert result.file_bytes == 12_288
    assert any("rounded up to O_DIRECT's 4 KiB" in n for n in result.notes)


def test_levels_with_few_restores_are_listed_in_ascending_order() -> None:
    """The search runs 1, 2, 4, then 3: the note listed "1, 2, 4, 3 session(s)" (issue 54)."""
    from kvtool.bench.capacity import CapacityOptions, search_notes
    from kvtool.bench.sessions import Level, Search

    levels = tuple(Level(n, 5, 0.1, 0.1, 0.1, 1e9, 1.0, 1.0, 1.0) for n in (1, 2, 4, 3))
    notes = search_notes(Search(levels, 3, ""), SMALL, CapacityOptions(), room=1024)
    assert "fewer than 20 restores at 1, 2, 3, 4 session(s)" in notes[0]

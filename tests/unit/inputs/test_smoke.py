"""The front door's smoke options: the scenario, ``--io-threads``, what ``--phase read``
ignores, and the check, before anything is written, that the scenario fits this machine's
memory and the T3 folder's disk (the real /proc/meminfo and statvfs, and a host that reports
less)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kvtool.engine.smoke import MAX_SMOKE_CHUNKS, SmokeTargets
from kvtool.errors import InputError
from kvtool.inputs.smoke import parse_io_threads, resolve_smoke
from kvtool.probe.host import LocalHost

GIB = 2**30


class SmallHost(LocalHost):
    """This machine, reporting ``memory`` bytes available and ``free`` bytes on disk."""

    def __init__(self, memory: int, free: int) -> None:
        self.memory, self.free = memory, free

    def read(self, key: str, path: str) -> str | None:
        return f"MemTotal: 99999999 kB\nMemAvailable: {self.memory // 1024} kB\n"

    def path_info(self, key: str, path: str) -> dict[str, Any]:
        return {"path": path, "is_dir": True, "free_bytes": self.free}


def _resolve(host: Any = None, targets: SmokeTargets | None = None, **given: str) -> Any:
    options = {"model": "llama-3.1-8b", "engine": "vllm", "kv_dtype": "auto", "tp": None,
               "chunk_tokens": "256", "sessions": "4", "chunks": "4", "posture": "lazy",
               "policy": "lru", "io_threads": "32"}  # fmt: skip
    options.update(given)
    return resolve_smoke(
        **options, targets=targets or SmokeTargets(), torch=None, host=host or LocalHost()
    )


def test_the_default_scenario_fits_this_machine(tmp_path: Path) -> None:
    inputs = _resolve(targets=SmokeTargets(t3_dir=tmp_path))
    assert inputs.options.sessions == 4
    assert inputs.options.chunks_per_session == 4
    assert inputs.options.chunk_bytes == 256 * 131072  # llama-3.1-8b: 128 KiB per token, bf16
    assert inputs.targets.io_threads == 32
    assert inputs.notes == []


def test_more_memory_than_the_host_has_is_refused_before_anything_runs() -> None:
    # 100,000 sessions x 3 own chunks of 32 MiB: T2 alone would hold 9.2 TiB
    with pytest.raises(InputError, match=r"needs about 13\.\d+ TiB of host memory .*only 24"):
        _resolve(SmallHost(24 * GIB, 10**15), sessions="100000")


def test_more_than_the_disk_has_free_is_t3s_finding_with_the_folder_named(tmp_path: Path) -> None:
    """Not bad usage (exit 2, as it was): T3 cannot take the smoke, a FAIL (issue 53)."""
    fault = _resolve(SmallHost(100 * GIB, GIB), SmokeTargets(t3_dir=tmp_path)).t3_fault
    assert re.match(rf"this smoke may write about 1\.6\d GiB to {tmp_path}; only 1\.00 GiB", fault)
    assert _resolve(SmallHost(100 * GIB, 100 * GIB), SmokeTargets(t3_dir=tmp_path)).t3_fault is None


def test_a_million_chunks_is_a_load_test_not_a_smoke() -> None:
    with pytest.raises(InputError, match=r"1,999,999,001 unique chunks: .* at most 1,000,000"):
        _resolve(SmallHost(2**60, 2**60), sessions="1000", chunks="2000000", chunk_tokens="1")
    assert MAX_SMOKE_CHUNKS == 1_000_000


@pytest.mark.parametrize("text", ["0", "1025", "100000", "-1", "abc"])
def test_io_threads_out_of_range_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="--io-threads"):
        parse_io_threads(text)
    assert parse_io_threads("1") == 1
    assert parse_io_threads("1024") == 1024


def test_phase_read_notes_the_options_the_manifest_overrides(tmp_path: Path) -> None:
    inputs = _resolve(
        targets=SmokeTargets(t3_dir=tmp_path, phase="read"), sessions="9", tp="2",
        model="llama-3.1-70b",
    )  # fmt: skip
    assert inputs.options is None
    assert inputs.notes == [
        "--tp has no effect with --phase read (the manifest written by --phase write has the"
        " shape)",
        "--model has no effect with --phase read (the manifest names it)",
        "--sessions has no effect with --phase read (the manifest has it)",
    ]
    with pytest.raises(InputError, match="--sessions"):
        _resolve(targets=SmokeTargets(t3_dir=tmp_path, phase="read"), sessions="nan")


def test_a_t4_url_that_cannot_work_is_refused_before_the_smoke_folder(tmp_path: Path) -> None:
    for url in ("file://", "s3://bucket/a\nb"):
        with pytest.raises(InputError, match="--t4-url"):
            _resolve(targets=SmokeTargets(t3_dir=tmp_path, t4_url=url))
    assert list(tmp_path.iterdir()) == []

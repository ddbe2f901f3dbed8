"""``--real``: the replay with real bytes through memory and folders. Every hit is read back
from T1 and compared, the counts match the counting replay, the scratch folder is removed
afterwards, and a folder without room (or no folder at all) is refused before anything is
written. Memory tiers hold plain bytes here (``torch=None``); blocks are 4 KiB."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from kvtool.engine.mediums import FolderMedium, Medium, MediumError, MemoryMedium, local_mediums
from kvtool.errors import InputError
from kvtool.replay import real
from kvtool.replay.real import RealStats, hex_key, real_replay, replay_in_folder
from kvtool.replay.run import ReplayConfig, ReplayResult, replay
from kvtool.replay.trace import Request, Trace

B = 512  # tokens per block
BLOCK = 4096  # bytes per block
# six 4-block conversations, then each again, newest first: with T1 and T2 of 8 blocks the
# second pass hits two conversations in each of T1, T2 and T3
_FIRST = [Request(float(i), 4 * B, 1, tuple(f"s{i}-{j}" for j in range(4))) for i in range(6)]
_AGAIN = [Request(10.0 + i, 4 * B - 100, 1, r.blocks) for i, r in enumerate(reversed(_FIRST))]
TRACE = Trace(_FIRST + _AGAIN, B, "jsonl", 0, "hand-made")
CONFIG = ReplayConfig(
    capacity={"T1": 8 * BLOCK, "T2": 8 * BLOCK, "T3": None, "T4": 0},
    block_units=BLOCK,
    unit="bytes",
)
UNIQUE = 24  # distinct blocks in TRACE


def _mediums(root: Path, **replace: Medium) -> dict[str, Medium]:
    mediums = local_mediums(None)
    mediums["T3"] = FolderMedium("T3", root / "t3", io_threads=2)
    mediums["T4"] = FolderMedium("T4", root / "t4", io_threads=2)
    mediums.update(replace)
    return mediums


def _real(root: Path, **replace: Medium) -> tuple[ReplayResult, RealStats]:
    return real_replay(
        TRACE.requests, B, CONFIG, block_bytes=BLOCK, mediums=_mediums(root, **replace)
    )


def test_a_block_id_becomes_its_blake2b_256_hex_digest() -> None:
    assert hex_key("17") == hashlib.blake2b(b"17", digest_size=32).hexdigest()
    assert re.fullmatch("[0-9a-f]{64}", hex_key("../../etc/passwd"))
    lone = json.loads('"\\udc80"')  # JSON's "\udc80": a lone surrogate, legal in a trace
    assert re.fullmatch("[0-9a-f]{64}", hex_key(lone))
    assert hex_key(lone) != hex_key(json.loads('"\\udc81"'))
    assert len({hex_key(str(i)) for i in range(1000)}) == 1000


def test_every_hit_is_read_back_equal_and_the_counts_match_the_counting_replay(
    tmp_path: Path,
) -> None:
    result, stats = _real(tmp_path)
    counted = replay(TRACE.requests, B, CONFIG)
    assert result == counted  # the same replay, now with bytes
    assert [(t.tier, t.hit_blocks) for t in result.tiers] == [("T1", 8), ("T2", 8), ("T3", 8)]
    assert stats.checked == 24  # every hit block: each request's own hits stay in T1
    assert stats.mismatched == 0
    assert stats.faults == []


def test_the_bytes_moved_per_tier_are_the_replays_counts(tmp_path: Path) -> None:
    result, stats = _real(tmp_path)
    assert set(stats.io) == {"T1", "T2", "T3"}  # T4 is off: it saw no traffic
    for tier, io in stats.io.items():
        assert io["read_bytes"] == result.counters[f"bytes_read_{tier}"]
        assert io["write_bytes"] == result.counters[f"bytes_written_{tier}"]
        assert io["seconds"] > 0
        assert io["bytes_per_s"] == pytest.approx(
            (io["read_bytes"] + io["write_bytes"]) / io["seconds"]
        )
    assert stats.io["T1"]["write_bytes"] == (UNIQUE + 16) * BLOCK  # 24 computed, 16 promoted
    assert stats.io["T3"] == {**stats.io["T3"], "read_bytes": 8 * BLOCK, "write_bytes": 16 * BLOCK}


def test_t3_holds_one_checked_file_per_block_named_by_its_hex_key(tmp_path: Path) -> None:
    _real(tmp_path)
    files = sorted((tmp_path / "t3" / "chunks").glob("*/*/*.kv"))
    assert len(files) == 16  # what T2 let go to T3
    keys = {hex_key(b) for r in TRACE.requests for b in r.blocks}
    assert {f.stem for f in files} <= keys
    assert not (tmp_path / "t4").exists()


def test_the_mediums_are_described(tmp_path: Path) -> None:
    _, stats = _real(tmp_path)
    assert stats.mediums["T1"] == "host bytes (torch is not installed)"
    assert stats.mediums["T3"].startswith(f"files under {tmp_path / 't3'} (")
    assert set(stats.mediums) == {"T1", "T2", "T3", "T4"}


class _Garbling(MemoryMedium):
    """T2 that hands back its blocks with the first byte changed."""

    def get(self, key: str) -> bytes | None:
        data = super().get(key)
        return None if data is None else bytes([data[0] ^ 0xFF]) + data[1:]


def test_a_block_that_reads_back_wrong_is_counted(tmp_path: Path) -> None:
    result, stats = _real(tmp_path, T2=_Garbling("T2"))
    assert result == replay(TRACE.requests, B, CONFIG)  # nothing failed: the same moves
    assert stats.checked == 24
    # the 8 hits from T2 and the 8 from T3 (which T2 fed) came through T2; T1's 8 did not
    assert stats.mismatched == 16
    assert stats.faults == []


class _Refusing(FolderMedium):
    """T3 on a full file system: every write fails."""

    def put(self, key: str, data: bytes | memoryview) -> None:
        raise MediumError(f"T3 write of {key[:12]}: No space left on device")


def test_a_medium_that_fails_is_a_fault_and_the_rest_goes_on(tmp_path: Path) -> None:
    result, stats = _real(tmp_path, T3=_Refusing("T3", tmp_path / "t3"))
    # each move T2 -> T3 reverted (the block stays in T2), and each block a full T2 then
    # dropped because T3 refused it (T4 is off): summarised, a count per kind, then messages
    refused, dropped, *examples = stats.faults
    assert re.fullmatch(r"move T2->T3: [1-9][\d,]*", refused)
    assert re.fullmatch(r"dropped, no shared copy: [1-9][\d,]*", dropped)
    counts = [int(line.split(": ")[1].replace(",", "")) for line in (refused, dropped)]
    assert sum(counts) == stats.fault_count
    assert examples
    assert all(
        (f.startswith("move T2->T3 ") and f.endswith("No space left on device"))
        or re.fullmatch(r"[0-9a-f]{12}: dropped from T2 \(full\) with no shared copy: (T3"
                        r" refused writes|move T2->T3: .*No space left on device)", f)
        for f in examples
    ), examples  # fmt: skip
    assert result.counters["faults"] == counts[0]  # the manager counts the moves that failed
    assert "T3" not in stats.io  # nothing reached it
    assert stats.mismatched == 0
    assert stats.checked == sum(t.hit_blocks for t in result.tiers)
    assert {t.tier: t.hit_blocks for t in result.tiers}["T3"] == 0


def test_an_empty_trace_moves_nothing(tmp_path: Path) -> None:
    result, stats = real_replay([], B, CONFIG, block_bytes=BLOCK, mediums=_mediums(tmp_path))
    assert result.requests == 0
    assert stats == RealStats({}, 0, 0, [], stats.mediums)


# --- replay_in_folder -------------------------------------------------------------------------


def test_the_replay_runs_in_a_scratch_folder_that_is_removed_afterwards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    original = real.real_replay

    def watched(*args: Any, **kwargs: Any) -> tuple[ReplayResult, RealStats]:
        out = original(*args, **kwargs)
        mediums = kwargs["mediums"]
        seen["roots"] = {t: mediums[t].root for t in ("T3", "T4")}
        seen["files"] = sorted(p.stem for p in mediums["T3"].root.glob("chunks/*/*/*.kv"))
        seen["t1"] = mediums["T1"].description
        return out

    monkeypatch.setattr(real, "real_replay", watched)
    result, stats = replay_in_folder(TRACE, CONFIG, tmp_path, torch=None)
    scratch = seen["roots"]["T3"].parent
    assert scratch.parent == tmp_path
    assert re.fullmatch(r"kvtool-replay-\d+-[0-9a-f]{6}", scratch.name)
    assert seen["roots"] == {"T3": scratch / "t3", "T4": scratch / "t4"}
    assert len(seen["files"]) == 16  # T3's files were there during the replay
    assert seen["t1"] == "host bytes (torch is not installed)"
    assert list(tmp_path.iterdir()) == []  # and are gone now
    assert stats.checked == 24
    assert stats.mismatched == 0
    assert result == replay(TRACE.requests, B, CONFIG)


def test_the_scratch_folder_is_removed_when_the_replay_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []

    def broken(*args: Any, **kwargs: Any) -> tuple[ReplayResult, RealStats]:
        made.append(kwargs["mediums"]["T3"].root.parent)
        assert made[0].is_dir()
        raise RuntimeError("a medium broke")

    monkeypatch.setattr(real, "real_replay", broken)
    with pytest.raises(RuntimeError, match="a medium broke"):
        replay_in_folder(TRACE, CONFIG, tmp_path, torch=None)
    assert len(made) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_not_there_or_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "trace.jsonl"
    afile.write_text("{}\n")
    for path in (tmp_path / "nope", afile):
        with pytest.raises(InputError) as caught:
            replay_in_folder(TRACE, CONFIG, path, torch=None)
        assert caught.value.message == f"--real {path} is not a folder"
        assert caught.value.hint == "pass a folder on T3, e.g. /fsx/kvtool"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.jsonl"]


Usage = namedtuple("Usage", "total used free")


def _free(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(free * 2, free, free))


def test_a_folder_without_room_for_every_block_twice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CONFIG._replace(block_units=2**30 - 4096)  # each block a GiB with its header
    _free(monkeypatch, 20 * 2**30)
    with pytest.raises(InputError) as caught:
        replay_in_folder(TRACE, config, tmp_path, torch=None)
    # 24 blocks x 1 GiB, in T3 and in T4
    assert caught.value.message == f"--real needs up to 48.0 GiB in {tmp_path}; 20.0 GiB free"
    assert caught.value.hint == "replay a smaller trace, or lower --block-bytes"
    assert list(tmp_path.iterdir()) == []  # refused before the scratch folder was made


def test_the_room_needed_may_be_up_to_90_percent_of_what_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need = UNIQUE * (BLOCK + 4096) * 2  # 393,216 B
    _free(monkeypatch, 436_906)  # 90% is 393,215.4: a byte short
    with pytest.raises(InputError, match="--real needs up to"):
        replay_in_folder(TRACE, CONFIG, tmp_path, torch=None)
    _free(monkeypatch, 436_907)  # 90% is 393,216.3: enough
    assert need <= 436_907 * 0.9
    _, stats = replay_in_folder(TRACE, CONFIG, tmp_path, torch=None)
    assert stats.checked == 24
    assert list(tmp_path.iterdir()) == []


def test_real_carries_out_the_idle_demotions_and_the_index_matches_the_media(
    tmp_path: Path,
) -> None:
    """tick()'s moves were dropped: the index drifted from what was stored (T4 'hits' and bytes
    'written to T4' with no T4 I/O) and the run still said 0 differed."""
    capacity = {**CONFIG.capacity, "T4": None}
    idle = CONFIG._replace(capacity=capacity, t2_idle_s=1.0, t3_idle_s=2.0)
    spread = [r._replace(t_s=r.t_s * 10) for r in TRACE.requests]  # seconds apart: idle passes
    result, stats = real_replay(spread, B, idle, block_bytes=BLOCK, mediums=_mediums(tmp_path))
    assert result.counters["demotions"] > 0
    assert stats.io["T4"]["write_bytes"] > 0  # the demotions to T4 really wrote
    assert stats.index_mismatches == 0
    assert stats.mismatched == 0
    assert stats.ok

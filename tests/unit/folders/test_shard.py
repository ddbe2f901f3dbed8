"""``gc --shard K/N`` (folders/shard.py): every file of a chunk in one shard, and the union
of N shards' choices equal to one unsharded run's, with no file chosen by two shards: under
``--max-age`` alone, and under ``--max-size`` through the shards' agreed cut-off, on a folder
of 200,000 files in the engines' recorded layouts (tests/fixtures/folders/scaled.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kvtool.errors import InputError
from kvtool.folders import gc_plan
from kvtool.folders.gc import Scope, Sweep
from kvtool.folders.layouts import classify
from kvtool.folders.select import Limits, Ranked
from kvtool.folders.shard import (
    Exchange,
    Shard,
    ShardWait,
    Summary,
    decode,
    encode,
    parse_shard,
)
from kvtool.folders.walk import Root
from tests.fixtures.folders import scaled

pytestmark = pytest.mark.usefixtures("ctime_as_mtime")
SCOPE = Scope(None, None, False)


def _chosen(root: Path, limits: Limits, shard: Shard | None = None, run: str = "") -> set[str]:
    """The files a dry run would remove (the plan, then the second walk's checks)."""
    with Root(root) as handle:
        exchange = None
        if shard is not None and (limits.max_size, limits.keep_free) != (None, None):
            exchange = Exchange(handle, shard, run, wait_s=120)
        planned = gc_plan.plan(
            handle, scope=SCOPE, limits=limits, mode="strictatime", free_bytes=1 << 50,
            shard=shard, exchange=exchange,
        )  # fmt: skip
        sweep = Sweep(handle, planned, scope=SCOPE, mode="strictatime", dry_run=True)
        return {r.path for r in sweep}


def _shards(root: Path, limits: Limits, n: int, run: str) -> list[set[str]]:
    """N shards at once (threads: each waits for the others' summaries)."""
    out: list[Any] = [None] * n

    def one(k: int) -> None:
        try:
            out[k] = _chosen(root, limits, Shard(k, n), run)
        except BaseException as exc:
            out[k] = exc

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert all(isinstance(o, set) for o in out), out
    return out


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shards") / "kv"
    assert scaled.make(root, 200_000) == 200_000
    return root


def test_four_shards_choose_what_one_run_does_on_200k_files(big: Path) -> None:
    """--max-size: the shards agree on one cut-off over the whole folder."""
    limits = Limits(max_size=300 << 20)  # about a third of the 200,000 files' bytes
    whole = _chosen(big, limits)
    parts = _shards(big, limits, 4, "size")
    assert whole
    assert all(parts)
    assert set().union(*parts) == whole
    assert sum(map(len, parts)) == len(whole)  # no file chosen by two shards


def test_under_max_age_alone_the_shards_need_not_meet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut is the age: the same in every shard (one clock here: runs minutes apart would
    each cut at their own now, as one run later would)."""
    root = tmp_path / "kv"
    scaled.make(root, 20_000)
    monkeypatch.setattr(gc_plan, "time", SimpleNamespace(time=lambda: time.time() // 1000 * 1000))
    limits = Limits(max_age=12 * 86400)
    whole = _chosen(root, limits)
    parts = [_chosen(root, limits, Shard(k, 4)) for k in range(4)]
    assert set().union(*parts) == whole
    assert sum(map(len, parts)) == len(whole)
    assert not (root / ".kvtool-gc.shards").exists()


def test_a_chunks_files_are_in_one_shard_wherever_they_lie(tmp_path: Path) -> None:
    """vLLM's ranks lie in folders of their own, SGLang's pools beside each other: each
    chunk's files all go to one shard (the key is the chunk's, as its layout defines it)."""
    root = tmp_path / "kv"
    scaled.make(root, 5000)
    shard = Shard(1, 3)
    by_chunk: dict[int, set[bool]] = {}
    for path in root.rglob("*"):
        if path.is_file():
            rel = path.relative_to(root)
            match = classify(rel.parts[:-1], rel.name)
            if match is not None and match.chunk:
                key = gc_plan.shard_key(rel.parts[:-1], rel.name, match)
                by_chunk.setdefault(key, set()).add(shard.owns(key))
    assert len(by_chunk) > 1000
    assert all(len(sides) == 1 for sides in by_chunk.values())
    shares = Counter(next(iter(s)) for s in by_chunk.values())
    assert 0.25 < shares[True] / len(by_chunk) < 0.42  # a third, by a stable hash


def test_a_shard_that_never_reports_stops_the_run(tmp_path: Path) -> None:
    root = tmp_path / "kv"
    scaled.make(root, 300)
    with Root(root) as handle:
        exchange = Exchange(handle, Shard(0, 2), "lonely", wait_s=0.5)
        with pytest.raises(ShardWait, match=r"shards 1 did not report"):
            gc_plan.plan(
                handle, scope=SCOPE, limits=Limits(max_size=0), mode="strictatime",
                free_bytes=1 << 50, shard=Shard(0, 2), exchange=exchange,
            )  # fmt: skip


def test_shards_given_other_limits_do_not_agree(tmp_path: Path) -> None:
    root = tmp_path / "kv"
    root.mkdir()
    none = np.zeros(0, np.int64)
    theirs = Summary(
        Shard(1, 2), 1.0, 0, Limits(max_size=5), Ranked(none + 0.0, none, none, none, 0)
    )
    with Root(root) as handle:
        exchange = Exchange(handle, Shard(0, 2), "r", wait_s=5)
        folder = exchange._folder()
        exchange._write(folder, "1-of-2", encode(theirs))
        mine = theirs._replace(shard=Shard(0, 2), limits=Limits(max_size=6))
        with pytest.raises(ShardWait, match="other limits"):
            exchange.agree(mine)


def test_summaries_round_trip_and_garbage_is_refused() -> None:
    ranked = Ranked(np.array([1.5, 2.5]), np.array([-7, 9]), np.array([10, 20]),
                    np.array([4096, 8192]), 1234)  # fmt: skip
    summary = Summary(Shard(2, 4), 99.0, 5, Limits(max_size=7, grace=0.0), ranked)
    back = decode(encode(summary), where="x")
    assert back.shard == summary.shard
    assert back.limits == summary.limits
    assert back.ranked.total == 1234
    assert back.ranked.ids.tolist() == [-7, 9]
    with pytest.raises(ShardWait, match="not a shard summary"):
        decode(encode(summary)[:-3], where="x")
    with pytest.raises(ShardWait):
        decode(b"\xff" * 40, where="x")


@pytest.mark.parametrize("text", ["4/4", "1", "a/b", "-1/3", "0/0"])
def test_bad_shards_are_one_line(text: str) -> None:
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)
    assert parse_shard(" 3 / 8 ") == Shard(3, 8)

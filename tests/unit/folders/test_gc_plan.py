"""gc's plan, its first walk: every file once, each chunk whole, the oldest chosen until the
limits hold; what stays is tallied by why; the chosen files are a bitmap and their inodes,
and the folders the second walk must enter are those holding them and every one above."""

from __future__ import annotations

import os
import time

import pytest

from kvtool.folders.gc_plan import (
    NOT_NEEDED_WHY,
    TEMPORARY_WHY,
    Chosen,
    chunk_id,
    needed_folders,
    plan,
)
from kvtool.folders.scope import Scope
from kvtool.folders.select import Limits
from kvtool.folders.walk import Root

KEY = "a" * 64


@pytest.mark.usefixtures("ctime_as_mtime")
def test_the_plan_chooses_whole_chunks_oldest_first_and_tallies_what_stays(tmp_path):
    """Three LMCache chunks of 8 KiB, used 3, 2 and 1 days ago, and a temporary: a 17,000-byte
    cap removes the oldest only; the newest two stay as not needed, the temporary as
    temporary; nothing is removed by a plan."""
    now = time.time()
    for age, key in ((3, "a"), (2, "b"), (1, "c")):
        path = tmp_path / f"vllm@m@1@0@{key * 64}@bfloat16.pt"
        path.write_bytes(b"x" * 8192)
        os.utime(path, (now - age * 86400,) * 2)
    (tmp_path / f".{'d' * 32}.tmp").write_bytes(b"y" * 10)  # SGLang's in-flight write
    with Root(tmp_path) as root:
        planned = plan(root, scope=Scope(), limits=Limits(max_size=17_000, grace=60),
                       mode="relatime", free_bytes=0)  # fmt: skip
    assert planned.choice.files == 1
    assert planned.choice.bytes == 8192
    assert (planned.known_files, planned.unknown_files, planned.temp_files) == (4, 0, 1)
    assert planned.chosen_files is not None
    assert hash(((), f"vllm@m@1@0@{'a' * 64}@bfloat16.pt")) in planned.chosen_files
    assert planned.groups is not None
    kept = {why: tally.files for group in planned.groups.kept.values()
            for why, tally in group.items()}  # fmt: skip
    assert kept == {NOT_NEEDED_WHY: 2, TEMPORARY_WHY: 1}
    assert len(list(tmp_path.iterdir())) == 4


def test_a_chunks_id_is_the_same_in_every_process():
    assert chunk_id(KEY) == chunk_id(KEY)
    assert chunk_id(KEY) != chunk_id("b" * 64)
    assert -(2**63) <= chunk_id(KEY) < 2**63


def test_the_name_filter_is_a_bitmap_that_keeps_every_hash_put_in():
    hashes = [0, 7, 8, -1, 2**62 + 12345, -(2**40) - 3]
    names = Chosen(hashes, [10, 11, 12, 13, 14, 15])
    assert all(h in names for h in hashes)
    assert len(names.table) == 2**22  # 4 MiB however many files
    assert (1 << 25) + 7 in names  # the same low 25 bits: a collision, let through
    assert 1 not in names
    assert 9 not in names
    assert 2**62 + 1 not in names
    assert names.inodes_of([8, -1, 1, 2**63 - 1]) == [12, 13, -1, -1]


def test_needed_folders_climbs_to_the_top():
    import numpy as np

    tree = [("a",), ("a", "b"), ("a", "b", "c"), ("x",), ("x", "y")]
    folders = np.array([hash(f) for f in tree], np.int64)
    parents = np.array([hash(f[:-1]) for f in tree], np.int64)
    bits = needed_folders(np.array([hash(("a", "b", "c"))] * 2, np.int64), folders, parents)
    assert all(hash(f) in bits for f in tree[:3])
    assert hash(("x",)) not in bits
    assert hash(("x", "y")) not in bits
    empty = needed_folders(np.zeros(0, np.int64), folders, parents)
    assert not any(hash(f) in empty for f in tree)

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.folders.select import Limits, choose

NOW = 1_000_000.0


def _choose(rows, *, pinned=(), free=0, **limits):
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    used = np.array([r[1] for r in rows], dtype=np.float64)
    sizes = np.array([r[2] for r in rows], dtype=np.int64)
    return choose(
        ids, used, sizes, sizes.copy(), np.array(pinned, dtype=np.int64), now=NOW,
        limits=Limits(**limits), free_bytes=free,
    )  # fmt: skip


def test_oldest_whole_chunks_first_until_the_size_holds():
    rows = [(1, NOW - 5000, 10), (1, NOW - 100, 10), (2, NOW - 4000, 10), (3, NOW - 3000, 10)]
    c = _choose(rows, max_size=30, grace=0)
    # chunk 1 is as recent as its newest file (100 s): 2 and 3 are older and go first
    assert c.chunks == {2: 1}
    assert c.bytes == 10
    assert c.total_bytes == 40
    assert _choose(rows, max_size=25, grace=0).chunks == {2: 1, 3: 1}
    c = _choose(rows, max_size=15, grace=0)
    assert c.chunks == {2: 1, 3: 1, 1: 2}
    assert c.bytes == 40
    assert c.files == 4


def test_grace_and_pinned_chunks_are_kept_and_the_shortfall_said():
    rows = [(1, NOW - 30, 10), (2, NOW - 5000, 10), (3, NOW - 5000, 10)]
    c = _choose(rows, pinned=[3], max_size=0, grace=60)
    assert c.chunks == {2: 1}
    assert c.protected_bytes == 20
    assert c.short_bytes == 20


def test_max_age_and_keep_free():
    rows = [(1, NOW - 10 * 86400, 100), (2, NOW - 2 * 86400, 100), (3, NOW - 3600, 100)]
    assert set(_choose(rows, max_age=7 * 86400, grace=0).chunks) == {1}
    assert set(_choose(rows, max_age=86400, grace=0).chunks) == {1, 2}
    assert set(_choose(rows, keep_free=150, free=0, grace=0).chunks) == {1, 2}
    assert _choose(rows, keep_free=150, free=200, grace=0).chunks == {}
    both = _choose(rows, max_age=7 * 86400, max_size=250, grace=0)
    assert set(both.chunks) == {1}
    assert _choose([], max_size=0).chunks == {}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.floats(0, 10_000), st.integers(0, 1000)),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 20_000),
    st.floats(0, 5000),
    st.lists(st.integers(0, 30), max_size=5),
)
def test_whole_chunks_oldest_first_never_young_never_pinned(rows, max_size, grace, pinned):
    rows = [(i, NOW - age, size) for i, age, size in rows]
    c = _choose(rows, pinned=pinned, max_size=max_size, grace=grace)
    newest: dict[int, float] = {}
    total: dict[int, int] = {}
    files: dict[int, int] = {}
    for i, used, size in rows:
        newest[i] = max(newest.get(i, 0.0), used)
        total[i] = total.get(i, 0) + size
        files[i] = files.get(i, 0) + 1
    removable = [i for i in newest if newest[i] < NOW - grace and i not in pinned]
    assert set(c.chunks) <= set(removable)
    assert all(c.chunks[i] == files[i] for i in c.chunks)  # whole chunks
    assert c.bytes == sum(total[i] for i in c.chunks)
    # rows: every file of a chosen chunk, each once (gc's second walk looks for these)
    assert sorted(c.rows.tolist()) == [n for n, row in enumerate(rows) if row[0] in c.chunks]
    # a prefix of the removable chunks by age: none left behind is older than one taken
    if c.chunks:
        taken = max(newest[i] for i in c.chunks)
        assert all(newest[i] >= taken for i in removable if i not in c.chunks)
    left = sum(total.values()) - c.bytes
    if c.short_bytes == 0:
        assert left <= max_size or sum(total.values()) <= max_size
        # and no more than needed: without the last chunk taken the size would not hold
        if c.chunks:
            last = max(c.chunks, key=lambda i: (newest[i], i))
            assert left + total[last] > max_size
    else:
        assert set(c.chunks) == set(removable)

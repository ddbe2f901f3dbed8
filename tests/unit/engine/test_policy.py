"""Eviction policies decide only: orders, pins skipped, S3-FIFO's early exit for one-hit keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.engine.policy import LRU, POLICIES, S3FIFO, AgeQueue, make_policy


def test_lru_evicts_the_least_recent_and_skips_pinned() -> None:
    lru = LRU()
    for when, key in enumerate("abcd"):
        lru.add(key, when)
    lru.touch("a", 10)
    assert lru.evict(lambda k: True) == "b"
    assert lru.evict(lambda k: k != "c") == "d"
    assert lru.evict(lambda k: False) is None
    assert len(lru) == 2


def test_s3fifo_lets_one_hit_keys_go_before_reused_ones() -> None:
    policy = S3FIFO()
    for key in ("hot1", "hot2"):
        policy.add(key, 0.0)
        policy.touch(key, 0.0)
        policy.touch(key, 0.0)
    for index in range(20):
        policy.add(f"once{index}", 0.0)
    victims = [policy.evict(lambda k: True) for _ in range(20)]
    assert "hot1" not in victims
    assert "hot2" not in victims
    assert len(policy) == 2


def test_s3fifo_ghost_sends_a_returning_key_to_main() -> None:
    policy = S3FIFO()
    policy.add("a", 0.0)
    assert policy.evict(lambda k: True) == "a"  # a one-hit key, remembered in the ghost
    policy.add("a", 0.0)
    for index in range(9):
        policy.add(f"n{index}", 0.0)
    # main holds "a"; the small FIFO's one-hit keys go first
    assert [policy.evict(lambda k: True) for _ in range(9)] == [f"n{i}" for i in range(9)]
    assert policy.evict(lambda k: True) == "a"


def test_s3fifo_passes_over_a_queue_whose_keys_are_all_pinned() -> None:
    policy = S3FIFO()
    for key in ("p1", "p2", "free"):
        policy.add(key, 0.0)
        policy.touch(key, 0.0)
        policy.touch(key, 0.0)
    assert policy.evict(lambda k: k == "free") == "free"
    assert policy.evict(lambda k: False) is None


def test_unknown_policy_names_the_choices() -> None:
    with pytest.raises(KeyError, match="lru, s3fifo"):
        make_policy("clock")


operations = st.lists(
    st.tuples(st.sampled_from(["add", "touch", "remove", "evict"]), st.integers(0, 15)),
    max_size=200,
)


@pytest.mark.parametrize("name", sorted(POLICIES))
@given(ops=operations)
def test_a_policy_tracks_exactly_the_resident_keys(name: str, ops: list[tuple[str, int]]) -> None:
    policy = make_policy(name)
    resident: set[str] = set()
    for op, number in ops:
        key = f"k{number}"
        if op == "add":
            policy.add(key, 0.0)
            resident.add(key)
        elif op == "touch":
            policy.touch(key, 0.0)
        elif op == "remove":
            policy.remove(key)
            resident.discard(key)
        else:
            pinned = {f"k{number}"}
            victim = policy.evict(lambda k, pinned=pinned: k not in pinned)
            if victim is None:
                assert resident <= pinned
            else:
                assert victim in resident
                assert victim not in pinned
                resident.discard(victim)
        assert len(policy) == len(resident)


def test_s3fifo_finds_an_unpinned_key_behind_pinned_ones_in_main() -> None:
    """Counting pops of pinned keys closed the main queue on its second pass, with two
    evictable keys still in it: T1 stayed over capacity (found by tests/unit/engine/test_faults)."""
    from collections import OrderedDict

    policy = S3FIFO()
    order = ["p0", "p1", "u0", "u1", "p2", "p3"]  # main, oldest first; u0 and u1 seen once more
    policy._main = OrderedDict.fromkeys(order)
    policy._freq = {key: 1 if key.startswith("u") else 0 for key in order}
    assert policy.evict(lambda key: key.startswith("u")) == "u0"


def test_removing_the_newest_lets_the_next_arrival_join_the_fifo() -> None:
    """A chunk used (put at the newest use) and moved out at once, as a T2 hit is, no longer
    sends every later arrival to the heap."""

    queue = AgeQueue()
    for use, key in enumerate("abc", 1):
        queue.put(key, use)
    queue.put("hit", 10)
    queue.remove("hit")
    queue.put("d", 4)  # used before the chunk that left, after every chunk still here
    assert not queue._late
    assert list(queue.in_order()) == ["a", "b", "c", "d"]


def snapshot(queue: AgeQueue) -> tuple[list[str], str | None, int]:
    return list(queue.in_order()), queue.oldest(), len(queue)


@given(
    before=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 30)), max_size=20),
    start=st.integers(0, 40),
    run=st.lists(st.integers(0, 3), max_size=12),
)
def test_a_run_put_at_once_is_the_same_queue_as_one_put_each(
    before: list[tuple[int, int]], start: int, run: list[int]
) -> None:
    """``put_run`` (a run of keys new to the tier, in order of use, sometimes older than the
    FIFO's newest) leaves the queue as putting them one by one does."""
    one, each = AgeQueue(), AgeQueue()
    for number, use in before:
        one.put(f"k{number}", use)
        each.put(f"k{number}", use)
    use = start
    items = []
    for index, step in enumerate(run):
        use += step
        items.append((f"new{index}", float(use)))
    one.put_run(items)
    for key, last_use in items:
        each.put(key, last_use)
    assert snapshot(one) == snapshot(each)


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "touch", "remove"]), st.integers(0, 7)), max_size=60
    )
)
def test_lru_touch_is_put_for_a_key_the_tier_holds(ops: list[tuple[str, int]]) -> None:
    """LRU's inline touch is ``put`` when the key is resident and nothing otherwise, at the
    manager's newest use and at an old one, late keys included (old uses make them late)."""
    lru, reference = LRU(), AgeQueue()
    use = 100
    for op, number in ops:
        key = f"k{number}"
        use += 1
        if op == "put":  # an old use half the time: the key comes late
            last_use = use if number % 2 else number
            lru.put(key, last_use)
            reference.put(key, last_use)
        elif op == "touch":
            last_use = use if number % 3 else number
            lru.touch(key, last_use)
            if key in reference:
                reference.put(key, last_use)
        else:
            lru.remove(key)
            reference.remove(key)
        assert snapshot(lru) == snapshot(reference)


def test_the_fifo_is_handed_out_only_while_it_holds_the_whole_order() -> None:
    queue = LRU()
    queue.add("a", 1)
    queue.add("b", 2)
    fifo = queue.ordered_fifo()
    assert fifo is not None
    assert list(fifo) == ["a", "b"]
    queue.put("late", 0)  # older than the FIFO's newest: the heap
    assert queue.ordered_fifo() is None
    assert queue.oldest() == "late"
    queue.remove("late")
    assert queue.ordered_fifo() is fifo


def test_an_emptied_fifo_takes_an_arrival_older_than_its_last_newest() -> None:
    """The front popped to empty (as the manager's eviction does) leaves the old newest use
    behind; the next arrival still joins the FIFO, not the heap."""
    queue = LRU()
    queue.put("a", 5)
    fifo = queue.ordered_fifo()
    assert fifo is not None
    fifo.popitem(last=False)
    queue.put("b", 3)
    assert queue.ordered_fifo() is fifo
    assert list(fifo) == ["b"]

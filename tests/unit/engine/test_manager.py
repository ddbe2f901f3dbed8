"""The manager's rules on a virtual clock: pressure, idle demotion, postures, hits and
promotion, recompute by the plan's crossover, TTL, node loss, faults. No bytes move here."""

from __future__ import annotations

import random

import pytest

from kvtool.engine.keys import chain_keys, model_fingerprint
from kvtool.engine.manager import Manager
from kvtool.engine.records import TIERS, EngineConfig, Lookup

FP = model_fingerprint("m", "bf16", "tp1")
MB = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _manager(**config: object) -> tuple[Manager, Clock]:
    clock = Clock()
    base: dict[str, object] = {
        "capacity_bytes": {"T1": 10 * MB, "T2": 20 * MB, "T3": None, "T4": None},
        "t2_idle_s": 10.0,
        "t3_idle_s": 100.0,
    }
    base.update(config)
    return Manager(EngineConfig(**base), clock), clock  # type: ignore[arg-type]


def _keys(session: int, chunks: int = 4) -> list[str]:
    return chain_keys([0] * 4 + [session * 1000 + i for i in range(4 * (chunks - 1))], 4, FP)


def _fill(m: Manager, sessions: int) -> list[list[str]]:
    out = []
    for s in range(sessions):
        keys = _keys(s)
        hit = m.lookup(keys)
        for key in keys[len(hit.hits) :]:
            m.insert(key, MB, 4)
        out.append(keys)
    return out


def test_t1_stays_under_its_pressure_line_and_evicts_to_t2() -> None:
    m, _ = _manager()
    _fill(m, 4)  # 13 chunks of 1 MB into a 10 MB T1
    assert m.used["T1"] <= 0.85 * 10 * MB
    assert m.used["T2"] == 13 * MB - m.used["T1"]
    assert m.counters["evictions"] == 13 - m.used["T1"] // MB


def test_the_shared_prefix_is_stored_once_and_hit_by_the_others() -> None:
    m, _ = _manager()
    _fill(m, 4)
    assert m.counters["inserts"] == 13
    assert m.counters["hits_T1"] == 3
    assert m.counters["hit_tokens_T1"] == 12


def test_lazy_writes_t3_only_when_pushed_and_eager_at_insert() -> None:
    lazy, _ = _manager(posture="lazy")
    _fill(lazy, 1)
    assert lazy.used["T3"] == 0
    eager, _ = _manager(posture="eager")
    _fill(eager, 1)
    assert eager.used["T3"] == 4 * MB
    assert eager.counters["bytes_written_T3"] == 4 * MB


def test_idle_demotion_follows_the_clock() -> None:
    m, clock = _manager()
    _fill(m, 4)
    in_t2 = m.used["T2"]
    clock.now = 9.0
    assert m.tick() == []
    clock.now = 11.0
    moves = m.tick()
    assert {(mv.kind, mv.src, mv.dst) for mv in moves} == {("move", "T2", "T3")}
    assert m.used["T2"] == 0
    assert m.used["T3"] == in_t2
    clock.now = 111.0
    m.tick()
    assert m.used["T3"] == 0
    assert m.used["T4"] == in_t2
    assert m.counters["demotions"] == 2 * in_t2 // MB


def test_idle_chunks_go_past_a_shared_tier_that_refuses_writes() -> None:
    """T3 refused a write: T2's idle chunks go on to T4 (the next tier down taking writes)
    rather than wait on the node for T3; with T4 refusing too they wait, and tick comes
    back when the first refusal lapses."""
    m, clock = _manager()
    _fill(m, 4)
    in_t2 = m.used["T2"]
    m.mark_unavailable("T3")
    m.mark_unavailable("T4")
    clock.now = 11.0
    assert m.tick() == []  # both refuse: nothing can leave the node
    assert m.used["T2"] == in_t2
    assert m._next_due == Manager.UNAVAILABLE_S
    m.mark_unavailable("T3")  # at 11 s: T3 refuses until 41 s, T4 until 30 s
    clock.now = 30.0
    moves = m.tick()
    assert {(mv.src, mv.dst, mv.why) for mv in moves} == {
        ("T2", "T4", "idle 10 s, T3 refused writes")
    }
    assert m.used["T2"] == m.used["T3"] == 0
    assert m.used["T4"] == in_t2


def test_a_tier_that_failed_a_read_keeps_its_idle_chunks_a_while() -> None:
    m, clock = _manager()
    _fill(m, 4)
    m.mark_unavailable("T2", reads=True)  # T2's reads fail: demoting would fail too
    clock.now = 11.0
    assert m.tick() == []
    assert not m.readable("T2")
    clock.now = Manager.UNAVAILABLE_S
    assert {(mv.src, mv.dst) for mv in m.tick()} == {("T2", "T3")}


def test_a_chunk_already_below_is_dropped_not_written_again() -> None:
    m, clock = _manager(posture="eager")
    _fill(m, 4)
    clock.now = 11.0
    moves = m.tick()
    assert moves
    assert all(mv.kind == "drop" and mv.src == "T2" for mv in moves)


def test_a_hit_in_t2_moves_up_into_t1() -> None:
    m, _ = _manager(capacity_bytes={"T1": 3 * MB, "T2": None, "T3": None, "T4": None})
    keys = _keys(0)
    for key in keys:
        m.insert(key, MB, 4)
    assert [m.where(k) for k in keys] == ["T2", "T2", "T1", "T1"]
    found = m.lookup(keys)
    assert [t for _, t in found.hits] == ["T2", "T2", "T1", "T1"]
    promotions = [(mv.kind, mv.src, mv.dst) for mv in found.moves if mv.dst == "T1"]
    assert promotions == [("move", "T2", "T1"), ("move", "T2", "T1")]
    assert m.counters["hits_T2"] == 2
    assert m.counters["promotions"] == 2


def test_a_hit_in_t3_is_copied_up_and_t3_keeps_it_for_other_nodes() -> None:
    m, clock = _manager(capacity_bytes={"T1": 3 * MB, "T2": None, "T3": None, "T4": None})
    keys = _keys(0)
    for key in keys:
        m.insert(key, MB, 4)
    clock.now = 11.0
    m.tick()  # the two in T2 go to T3
    m.drop_local()  # the two in T1 are lost (lazy posture: never written below)
    found = m.lookup(keys)
    assert [t for _, t in found.hits] == ["T3", "T3"]
    assert [(mv.kind, mv.src) for mv in found.moves] == [("copy", "T3"), ("copy", "T3")]
    assert all(m.chunks[k].tiers == {"T1", "T3"} for k in keys[:2])


def test_recompute_when_the_plan_says_it_is_faster() -> None:
    m, _clock = _manager(posture="eager", reload_from_tokens={"T3": 12, "T4": None})
    keys = _keys(0)
    for key in keys:
        m.insert(key, MB, 4)
    m.drop_local()
    short = m.lookup(keys[:2])  # 8 tokens from T3: under the 12-token crossover
    assert short.recompute
    assert short.moves == []
    assert m.counters["recomputes"] == 2
    full = m.lookup(keys)  # 16 tokens: reload wins
    assert not full.recompute
    assert len(full.moves) == 4


def test_shared_chunks_expire_after_their_ttl_everywhere() -> None:
    m, clock = _manager(posture="eager", shared_ttl_s=50.0)
    keys = _keys(0)
    m.insert(keys[0], MB, 4, shared=True)
    m.insert(keys[1], MB, 4)
    clock.now = 49.0
    assert len(m.lookup(keys[:2]).hits) == 2
    clock.now = 50.0
    found = m.lookup(keys[:2])
    assert found.hits == []
    assert {(mv.kind, mv.src) for mv in found.moves} == {("drop", "T1"), ("drop", "T3")}
    assert m.counters["expired"] == 1
    assert keys[0] not in m.chunks


def test_pinned_chunks_stay_in_t1_under_pressure() -> None:
    m, _ = _manager(capacity_bytes={"T1": 4 * MB, "T2": None, "T3": None, "T4": None})
    keys = _keys(0, chunks=6)
    m.insert(keys[0], MB, 4)
    m.pin([keys[0]])
    for key in keys[1:]:
        m.insert(key, MB, 4)
    assert m.where(keys[0]) == "T1"
    m.unpin([keys[0]])


def test_revert_puts_the_index_back_and_counts_a_fault() -> None:
    m, clock = _manager()
    _fill(m, 4)
    clock.now = 11.0
    move = next(mv for mv in m.tick() if mv.dst == "T3")
    m.revert(move)
    assert m.where(move.key) == "T2"
    assert m.counters["faults"] == 1


def test_a_corrupt_copy_leaves_the_index() -> None:
    m, _ = _manager(posture="eager")
    keys = _keys(0)
    m.insert(keys[0], MB, 4)
    m.drop_local()
    m.corrupt(keys[0], "T3")
    assert keys[0] not in m.chunks
    assert m.counters["corrupt"] == 1


def test_a_tier_that_is_off_is_skipped() -> None:
    m, _ = _manager(capacity_bytes={"T1": 2 * MB, "T2": 0, "T3": None, "T4": None})
    _fill(m, 1)
    assert m.used["T2"] == 0
    assert m.used["T3"] > 0


def test_without_lower_tiers_pressure_drops_chunks() -> None:
    m, _ = _manager(capacity_bytes={"T1": 2 * MB, "T2": 0, "T3": 0, "T4": 0})
    keys = _fill(m, 1)[0]
    assert sum(m.where(k) is not None for k in keys) == 1
    assert m.counters["evictions"] == 3


def test_a_request_inserted_then_settled_evicts_once_and_keeps_its_own_chunks() -> None:
    m, _ = _manager(capacity_bytes={"T1": 6 * MB, "T2": None, "T3": None, "T4": None})
    first = _keys(0)
    for key in first:
        m.insert(key, MB, 4)
    second = _keys(1, chunks=4)[1:]  # the shared chunk is already in
    for key in second:
        assert [mv.kind for mv in m.insert(key, MB, 4, settle=False)] == ["put"]
    assert m.used["T1"] == 7 * MB  # over the 5.1 MB line until settled
    moves = m.settle(second)
    assert m.used["T1"] <= 0.85 * 6 * MB
    assert all(m.where(k) == "T1" for k in second)
    assert {mv.key for mv in moves} <= set(first)


def test_a_replay_access_follows_the_same_recompute_rule_as_lookup() -> None:
    """One hit path: ``access`` (replay) and ``lookup`` (smoke, engine) share the prefix walk
    and the reload-vs-recompute decision."""
    m, _ = _manager(posture="eager", reload_from_tokens={"T3": 12, "T4": None})
    keys = _keys(0)
    m.access(keys, MB, 4)
    m.drop_local()
    hit_tiers, moves = m.access(keys[:2], MB, 4)  # 8 tokens held only in T3: recompute
    assert hit_tiers == []
    assert m.counters["recomputes"] == 2
    assert {(mv.kind, mv.why) for mv in moves} == {("put", "recomputed")}
    m.drop_local()
    hit_tiers, moves = m.access(keys, MB, 4)  # 16 tokens: reloading wins, as lookup says
    assert hit_tiers == ["T3"] * 4
    assert [mv.kind for mv in moves] == ["copy"] * 4


def test_a_replay_access_honours_the_shared_ttl() -> None:
    m, clock = _manager(shared_ttl_s=50.0)
    keys = _keys(0, chunks=2)
    m.access(keys, MB, 4, shared=True)
    clock.now = 49.0
    assert m.access(keys, MB, 4)[0] == ["T1", "T1"]
    clock.now = 50.0
    hit_tiers, moves = m.access(keys, MB, 4)
    assert hit_tiers == []
    assert m.counters["expired"] == 1
    assert ("drop", "shared TTL expired") in {(mv.kind, mv.why) for mv in moves}


def test_t3_demotes_what_has_been_idle_longest_whatever_order_it_arrived_in() -> None:
    """T3's age queue was in order of arrival: a chunk demoted from T2 with an old last
    access sat behind a chunk another node wrote to T3 later, and ``tick`` stopped at the
    younger one, so the older one stayed in T3 past its idle time."""
    m, clock = _manager(
        capacity_bytes={"T1": 1 * MB, "T2": 20 * MB, "T3": None, "T4": None},
        t2_idle_s=100.0,
        t3_idle_s=200.0,
    )
    old, filler, adopted = _keys(1, chunks=3)
    m.insert(old, MB, 4)  # t = 0
    m.insert(filler, MB, 4)  # T1 holds one chunk: ``old`` goes to T2
    assert m.where(old) == "T2"
    clock.now = 50.0
    m.adopt(adopted, MB, 4, "T3")  # another node wrote it: in T3, last used at 50
    clock.now = 100.0
    m.tick()  # ``old`` idle 100 s: T2 -> T3, behind ``adopted`` in arrival order
    assert m.where(old) == "T3"
    clock.now = 210.0
    m.tick()  # ``old`` idle 210 s, ``adopted`` 160 s: only ``old`` is due for T4
    assert m.where(old) == "T4"
    assert m.where(adopted) == "T3"


def test_the_age_queue_always_names_the_least_recently_used_live_key() -> None:
    import random

    from kvtool.engine.policy import AgeQueue

    rng = random.Random(7)
    queue, live = AgeQueue(), {}
    for step in range(5000):
        key = f"k{rng.randrange(200)}"
        if rng.random() < 0.3:
            queue.remove(key)
            live.pop(key, None)
        else:
            when = rng.uniform(0, step)  # arrivals with any last access, as demotions bring
            queue.put(key, when)
            live[key] = when
        oldest = queue.oldest()
        assert len(queue) == len(live)
        assert (oldest is None) == (not live)
        if live:
            assert live[oldest] == min(live.values())
    assert len(queue._late) <= 2 * len(live) + 65  # stale entries do not pile up


def test_lru_in_a_lower_tier_is_by_last_use_not_by_arrival() -> None:
    """``x`` was hit in T3 at t=10 (copied up, T3 keeps it); ``y``, last used at t=1, reaches
    T3 after that. T3 holds one chunk: ``y`` goes on to T4, as the least recently used. (By
    arrival in T3, ``x`` would have gone: the order before this rule.)"""
    m, clock = _manager(capacity_bytes={"T1": MB, "T2": 0, "T3": MB, "T4": None}, pressure=1.0)
    m.insert("x", MB, 4)
    clock.now = 1.0
    m.insert("y", MB, 4)  # x -> T3
    assert m.where("x") == "T3"
    clock.now = 10.0
    m.lookup(["x"])  # x copied up into T1; y leaves T1 for T3, which is then over
    assert m.where("x") == "T1"
    assert "T3" in m.chunks["x"].tiers
    assert m.where("y") == "T4"


def test_a_pinned_oldest_chunk_is_passed_over_in_age_order() -> None:
    from kvtool.engine.policy import LRU

    lru = LRU()
    lru.add("new", 5.0)
    lru.add("late", 1.0)  # arrives after "new" but was used before it: the heap
    lru.add("newest", 7.0)
    assert list(lru.in_order()) == ["late", "new", "newest"]
    assert lru.evict(lambda key: key != "late") == "new"
    assert lru.evict(lambda key: True) == "late"


def _reference_lookup(m: Manager, keys: list[str]) -> Lookup:
    """``lookup`` as the rules compose it, one helper per rule (the hot path inlines them)."""
    now = m.clock()
    found, tiers_hit, drops = m._prefix(keys, now)
    hits = [(chunk.key, tier) for chunk, tier in zip(found, tiers_hit, strict=True)]
    if not hits:
        return Lookup([], drops, recompute=False)
    if m._recompute(found, tiers_hit):
        return Lookup(hits, drops, recompute=True)
    m._credit(found, tiers_hit)
    moves = drops
    for chunk, tier in zip(found, tiers_hit, strict=True):
        m._touch(chunk, now)
        if tier != "T1":
            moves.append(m._promote(chunk, tier))
    if m.used["T1"] > m._limits["T1"]:
        for chunk in found:
            chunk.pins += 1
        m._make_room("T1", moves)
        for chunk in found:
            chunk.pins -= 1
    return Lookup(hits, moves, recompute=False)


@pytest.mark.parametrize("seed", range(120))
def test_the_fast_paths_are_the_rules_one_helper_at_a_time(seed: int) -> None:
    """LRU's eviction from the FIFO's front (``_evict_front``), the inlined lookup and
    ``insert_many`` give the same moves, counters, placement and LRU order (every tier's
    FIFO, uses included) as the policy's own ``evict`` and the helpers one at a time, on
    random sizes, postures, crossovers, pins, a TTL and idle times."""
    rng = random.Random(seed)
    size = rng.choice([1, 3, 5])
    capacity = {t: rng.choice([None, 0, 4 * size, 7 * size, 15 * size]) for t in TIERS}
    capacity["T1"] = rng.choice([None, 3 * size, 6 * size, 10 * size])
    config = EngineConfig(
        capacity_bytes=capacity,
        pressure=rng.choice([1.0, 0.85]),
        t2_idle_s=rng.choice([2.0, 10.0]),
        t3_idle_s=rng.choice([5.0, 40.0]),
        posture=rng.choice(["lazy", "eager"]),
        shared_ttl_s=rng.choice([None, 30.0]),
        reload_from_tokens=rng.choice([{}, {"T3": 8, "T4": 20}]),
    )
    clock = Clock()
    fast, slow = Manager(config, clock), Manager(config, clock)
    slow._lru = {}  # every eviction by the policy's own evict()
    sessions = [[f"s{s}-{i}" for i in range(rng.randint(1, 8))] for s in range(12)]
    for _ in range(150):
        clock.now += rng.choice([0.0, 0.5, 3.0, 12.0])
        keys = rng.choice(sessions)[: rng.randint(1, 8)]
        op = rng.random()
        if op < 0.45:
            got, want = fast.lookup(keys), _reference_lookup(slow, keys)
            assert got == want
            shared = rng.random() < 0.3
            if rng.random() < 0.5:  # a request's chunks at once: each inserted unsettled
                rest = keys[len(got.hits) - rng.randint(0, len(got.hits)) :]  # some known
                assert fast.insert_many(rest, size, 4, shared=shared) == [
                    move for key in rest for move in slow.insert(key, size, 4, shared=shared,
                                                                 settle=False)
                ]  # fmt: skip
            else:
                for key in keys[len(got.hits) :]:
                    settle = rng.random() < 0.3
                    assert fast.insert(key, size, 4, shared=shared, settle=settle) == slow.insert(
                        key, size, 4, shared=shared, settle=settle
                    )
            assert fast.settle(keys) == slow.settle(keys)
        elif op < 0.6:
            assert fast.access(keys, size, 4) == slow.access(keys, size, 4)
        elif op < 0.75:
            fast.pin(keys)
            slow.pin(keys)
        elif op < 0.85:
            fast.unpin(keys)
            slow.unpin(keys)
        else:
            assert fast.tick() == slow.tick()
        assert fast.counters == slow.counters
        assert fast.used == slow.used
        for tier in TIERS:
            queue, reference = fast.policies[tier], slow.policies[tier]
            assert list(queue.fifo.items()) == list(reference.fifo.items())  # type: ignore[attr-defined]
        assert {k: c.tiers for k, c in fast.chunks.items()} == {
            k: c.tiers for k, c in slow.chunks.items()
        }

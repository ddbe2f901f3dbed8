"""The counting core against the manager's replay: on random traces and random rules (every
tier bounded, tiers off, short idle times, both postures, pressure, recompute crossovers, a
TTL, hybrid rounding, equal timestamps, a block twice in one request), and on the conversation
trace, every field of the result is the same, exactly: ratios, per-tier hits, peaks, the
engine's counters (evictions, demotions, promotions, bytes), occupancy and TTFT."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.replay.count import blocks_within, count_replay
from kvtool.replay.run import ReplayConfig, ReplayResult, TtftModel, manager_replay, replay
from kvtool.replay.trace import Request, parse_trace

B = 16
HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"
SHARED = Path(__file__).parents[4] / "shared" / "traces" / "conversation_trace.jsonl"
TTFT = TtftModel(
    prefill_s=lambda n: n * 1e-4,
    reload_block_s={"T1": 0.0, "T2": 1e-4, "T3": 5e-4, "T4": 2e-3},
    latency_s={"T1": 0.0, "T2": 1e-5, "T3": 1e-3, "T4": 2e-2},
    source="test",
)


def random_trace(rng: random.Random, requests: int, *, numbers: bool = False) -> list[Request]:
    """Conversations that grow (a request extends an earlier one's blocks), fresh prompts,
    repeats; clock steps from 0 (equal timestamps) to long gaps (idle demotions). ``numbers``:
    ids are whole numbers from 0, as Mooncake's (the core's array), else text."""
    made: list[tuple[str, ...]] = []
    out = []
    t = 0.0
    for number in range(requests):
        t += rng.choice([0.0, 0.0, 0.5, 1.0, 3.0, 7.0, 20.0, 60.0])
        if made and rng.random() < 0.7:
            base = list(rng.choice(made))
            keep = rng.randint(0, len(base))
            blocks = base[:keep] + [f"r{number}-{i}" for i in range(rng.randint(0, 4))]
        else:
            blocks = [f"r{number}-{i}" for i in range(rng.randint(1, 6))]
        if blocks and rng.random() < 0.05:  # a block twice in one request
            blocks.append(rng.choice(blocks))
        if not blocks:
            blocks = [f"r{number}-0"]
        made.append(tuple(blocks))
        tokens = len(blocks) * B - rng.randint(0, B - 1)
        out.append(Request(t, tokens, rng.randint(0, 50), tuple(blocks)))
    if numbers:
        ids: dict[str, int] = {}
        out = [r._replace(blocks=tuple(ids.setdefault(b, len(ids)) for b in r.blocks))
               for r in out]  # fmt: skip
    return out


def random_config(rng: random.Random) -> ReplayConfig:
    def size() -> int | None:
        return rng.choice([None, 0, 0, B, 2 * B, 3 * B + 5, 5 * B, 9 * B, 20 * B])

    capacity = {"T1": rng.choice([None, 0, B, 2 * B, 4 * B - 1, 6 * B, 12 * B])}
    capacity.update({tier: size() for tier in ("T2", "T3", "T4")})
    reload = {}
    if rng.random() < 0.2:
        reload = {tier: rng.choice([None, 0, B, 3 * B, 10 * B]) for tier in ("T1", "T2", "T3")}
    return ReplayConfig(
        capacity=capacity,
        block_units=B,
        unit="tokens",
        posture=rng.choice(["lazy", "eager"]),
        pressure=rng.choice([1.0, 1.0, 0.85, 0.5]),
        t2_idle_s=rng.choice([0.5, 2.0, 10.0, 300.0]),
        t3_idle_s=rng.choice([1.0, 5.0, 30.0, 3600.0]),
        reload_from_tokens=reload,
        shared_ttl_s=rng.choice([None, None, 5.0]),  # a trace marks nothing shared: no effect
        hit_granularity=rng.choice([1, 1, 1, 24, 40]),
    )


def assert_same(core: ReplayResult, manager: ReplayResult) -> None:
    for name in ReplayResult._fields:
        assert getattr(core, name) == getattr(manager, name), name


@pytest.mark.parametrize("seed", range(300))
def test_the_core_is_the_manager_on_random_traces_and_rules(seed: int) -> None:
    rng = random.Random(seed)
    requests = random_trace(rng, rng.choice([5, 30, 80, 200]), numbers=seed % 2 == 0)
    config = random_config(rng)
    ttft = TTFT if seed % 3 == 0 else None
    core = count_replay(requests, B, config, ttft=ttft, samples=17)
    assert_same(core, manager_replay(requests, B, config, ttft=ttft, samples=17))


@pytest.mark.parametrize("seed", range(40))
def test_dropping_stale_queue_entries_changes_nothing(seed: int, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import kvtool.replay.count as count

    monkeypatch.setattr(count, "COMPACT_SLACK", 2)  # compact at every chance
    monkeypatch.setattr(count, "COMPACT_EVERY", 1)
    rng = random.Random(1000 + seed)
    requests = random_trace(rng, 200, numbers=seed % 2 == 0)
    config = random_config(rng)
    assert_same(count_replay(requests, B, config), manager_replay(requests, B, config))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), requests=st.integers(1, 120))
def test_the_core_is_the_manager_for_any_seed(seed: int, requests: int) -> None:
    rng = random.Random(seed)
    trace, config = random_trace(rng, requests, numbers=seed % 2 == 0), random_config(rng)
    assert_same(count_replay(trace, B, config), manager_replay(trace, B, config))


@pytest.mark.parametrize(
    "capacity",
    [
        {"T1": 3000, "T2": 0, "T3": 0, "T4": 0},
        {"T1": 3000, "T2": 10_000, "T3": 100_000, "T4": None},
        {"T1": 3000, "T2": 10_000, "T3": 20_000, "T4": 30_000},  # every tier overflows
        {"T1": 0, "T2": 4000, "T3": None, "T4": 0},
        {"T1": 2000, "T2": 0, "T3": 8000, "T4": 16_000},
    ],
)
@pytest.mark.parametrize("posture", ["lazy", "eager"])
def test_the_core_is_the_manager_on_the_conversation_trace_head(
    capacity: dict[str, int | None], posture: str
) -> None:
    trace = parse_trace(HEAD.read_text().splitlines())
    config = ReplayConfig(capacity={t: None if c is None else c * 512 for t, c in capacity.items()},
                          block_units=512, unit="tokens", posture=posture,
                          t2_idle_s=30.0, t3_idle_s=120.0)  # fmt: skip
    assert_same(count_replay(trace.requests, 512, config, ttft=TTFT),
                manager_replay(trace.requests, 512, config, ttft=TTFT))  # fmt: skip


@pytest.mark.skipif(not SHARED.is_file(), reason="the shared traces are not here")
def test_the_core_is_the_manager_on_the_whole_conversation_trace() -> None:
    """The benchmark's four tiers (benchmarks/replay), with T3 small enough to overflow."""
    trace = parse_trace(SHARED.read_text().splitlines())
    mega = 2**20
    config = ReplayConfig(capacity={"T1": 3 * mega, "T2": 10 * mega, "T3": 40 * mega,
                                    "T4": None}, block_units=512, unit="tokens")  # fmt: skip
    assert_same(count_replay(trace.requests, 512, config),
                manager_replay(trace.requests, 512, config))  # fmt: skip


def test_replay_counts_with_the_core_and_carries_with_the_manager(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import kvtool.replay.count as count

    requests = random_trace(random.Random(1), 20)
    config = ReplayConfig(capacity={"T1": 2 * B, "T2": 4 * B}, block_units=B, unit="tokens")
    expected = manager_replay(requests, B, config)

    def refuse(*args: object, **kwargs: object) -> ReplayResult:
        raise AssertionError("the core ran")

    assert_same(replay(requests, B, config), expected)
    monkeypatch.setattr(count, "count_replay", refuse)
    with pytest.raises(AssertionError, match="the core ran"):
        replay(requests, B, config)
    moves: list[object] = []
    carried = replay(requests, B, config, carry=lambda m, h, b: moves.extend(m))
    assert_same(carried, expected)
    assert moves  # the manager's steps reached the carrier
    s3fifo = config._replace(policy="s3fifo")  # the engine's own policy object: the manager
    assert replay(requests, B, s3fifo) == manager_replay(requests, B, s3fifo)


def test_the_core_indexes_whole_number_ids_and_hashes_the_rest() -> None:
    from array import array

    from kvtool.replay.count import fit_table

    table = fit_table(array("q"), (0, 5, 2), 3)
    assert isinstance(table, array)
    assert len(table) >= 6
    table[5] = 7 << 4 | 1
    grown = fit_table(table, (40,), 4)
    assert grown is table
    assert len(table) > 40
    assert table[5] == 7 << 4 | 1
    for ids in (("a", "b"), (1, "a"), (-1, 2), (10**9, 1), (1.0, 2.0), (10**6,)):
        moved = fit_table(table, ids, 5)
        assert not isinstance(moved, array), ids
        assert moved[5] == 7 << 4 | 1  # what the array held
        assert moved[ids[0]] == 0  # never seen reads 0
        assert fit_table(moved, (1, 2), 9) is moved  # a dictionary stays one


def test_the_state_is_a_list_then_an_array_past_list_max(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from array import array

    from kvtool.replay import count

    monkeypatch.setattr(count, "LIST_MAX", 64)
    table = count.fit_table([], (0, 5, 2), 3)
    assert isinstance(table, list)
    table[5] = 7 << 4 | 1
    assert count.fit_table(table, (40,), 4) is table  # grown in place, still a list
    grown = count.fit_table(table, (100,), 5)  # past LIST_MAX: an array, the states kept
    assert isinstance(grown, array)
    assert len(grown) > 100
    assert grown[5] == 7 << 4 | 1
    assert count.fit_table(table, (-1, 2), 5)[5] == 7 << 4 | 1  # a list moves to a dictionary
    rng = random.Random(11)  # and the replay is the manager's through the change
    requests = random_trace(rng, 80, numbers=True)
    config = ReplayConfig(capacity={"T1": 6 * B, "T2": 9 * B, "T3": 20 * B, "T4": None},
                          block_units=B, unit="tokens")  # fmt: skip
    assert replay(requests, B, config) == manager_replay(requests, B, config)


def test_a_trace_that_turns_to_text_ids_midway_is_the_manager_too() -> None:
    rng = random.Random(5)
    numbers = random_trace(rng, 60, numbers=True)
    texts = [r._replace(t_s=r.t_s + 1000, blocks=tuple(f"t{b}" for b in r.blocks))
             for r in random_trace(rng, 60)]  # fmt: skip
    requests = numbers + texts + [r._replace(t_s=r.t_s + 2000) for r in numbers]
    config = ReplayConfig(capacity={"T1": 6 * B, "T2": 9 * B, "T3": 20 * B, "T4": None},
                          block_units=B, unit="tokens", t2_idle_s=10.0, t3_idle_s=30.0)  # fmt: skip
    assert_same(count_replay(requests, B, config), manager_replay(requests, B, config))


def test_requests_read_as_they_go_with_their_total() -> None:
    requests = random_trace(random.Random(9), 50, numbers=True)
    config = ReplayConfig(capacity={"T1": 3 * B, "T2": 5 * B}, block_units=B, unit="tokens")
    streamed = count_replay(iter(requests), B, config, total=len(requests), samples=7)
    assert_same(streamed, manager_replay(requests, B, config, samples=7))


def test_the_core_is_lrus_only() -> None:
    config = ReplayConfig(capacity={"T1": B}, block_units=B, unit="tokens", policy="s3fifo")
    with pytest.raises(ValueError, match="LRU"):
        count_replay([Request(0.0, B, 1, ("a",))], B, config)


@pytest.mark.parametrize(
    ("limit", "unit", "blocks"),
    [(float("inf"), 7, None), (0.0, 7, 0), (6.9, 7, 0), (7.0, 7, 1), (20.0, 7, 2),
     (3e6 * 0.85, 512, 4980), (1e18, 3, 333333333333333333)],
)  # fmt: skip
def test_blocks_within_a_limit_is_the_managers_over_test(
    limit: float, unit: int, blocks: int | None
) -> None:
    n = blocks_within(limit, unit)
    if blocks is None:
        assert n > 2**60
    else:
        assert n == blocks
        assert n * unit <= limit < (n + 1) * unit

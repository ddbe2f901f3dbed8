"""What-if sweeps: the grid of tier sizes, one replay per configuration in this process or in
forked workers (the same results either way), and the JSON of the points."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.replay import sweep
from kvtool.replay.run import ReplayConfig, replay
from kvtool.replay.sweep import SweepPoint, grid, run_sweep, sweep_json
from kvtool.replay.trace import Request, Trace

B = 512
# six 4-block conversations, then each again, newest first: T1 of 8 blocks keeps the last two,
# T2 of 8 blocks the two before them, an unbounded T1 all six
_FIRST = [Request(float(i), 4 * B, 1, tuple(f"s{i}-{j}" for j in range(4))) for i in range(6)]
_AGAIN = [Request(10.0 + i, 4 * B - 100, 1, r.blocks) for i, r in enumerate(reversed(_FIRST))]
TRACE = Trace(_FIRST + _AGAIN, B, "jsonl", 0, "hand-made")
BASE = ReplayConfig(
    capacity={"T1": 64 * B, "T2": 0, "T3": 0, "T4": 0},
    block_units=B,
    unit="tokens",
    t2_idle_s=30.0,
)


def test_grid_is_every_combination_in_order_and_keeps_the_rest() -> None:
    configs = grid({"T1": [B, 2 * B], "T2": [0, None, 4 * B]}, BASE)
    assert [(c.capacity["T1"], c.capacity["T2"]) for c in configs] == [
        (B, 0),
        (B, None),
        (B, 4 * B),
        (2 * B, 0),
        (2 * B, None),
        (2 * B, 4 * B),
    ]
    for c in configs:
        assert (c.capacity["T3"], c.capacity["T4"]) == (0, 0)
        assert c._replace(capacity=BASE.capacity) == BASE  # every other field as in the base
    assert BASE.capacity == {"T1": 64 * B, "T2": 0, "T3": 0, "T4": 0}  # not changed
    assert len({id(c.capacity) for c in configs}) == 6  # each its own dict


def test_grid_of_nothing_is_the_base_alone() -> None:
    assert grid({}, BASE) == [BASE]
    assert grid({"T1": []}, BASE) == []


@given(
    st.dictionaries(
        st.sampled_from(["T1", "T2", "T3", "T4"]), st.lists(st.integers(0, 9), max_size=4)
    )
)
def test_grid_has_the_product_of_the_list_lengths(sizes: dict[str, list[int]]) -> None:
    configs = grid(sizes, BASE)
    assert len(configs) == math.prod(len(v) for v in sizes.values())
    for config in configs:
        for tier in ("T1", "T2", "T3", "T4"):
            if tier in sizes:
                assert config.capacity[tier] in sizes[tier]
            else:
                assert config.capacity[tier] == BASE.capacity[tier]


CONFIGS = grid({"T1": [8 * B, 16 * B, None], "T2": [0, 8 * B]}, BASE)


def test_one_point_per_config_each_the_replay_of_that_config() -> None:
    points = run_sweep(TRACE, CONFIGS, processes=1)
    assert len(points) == 6
    for config, point in zip(CONFIGS, points, strict=True):
        assert point.capacity == config.capacity
        alone = replay(TRACE.requests, TRACE.block_tokens, config, samples=0)
        assert point.result == alone._replace(occupancy=[])
        assert point.result.occupancy == []
    # the second pass hits 2, 4 and 6 of its conversations (1,948 tokens each) as T1 grows,
    # and T2 adds two more while T1 is bounded
    total = 6 * 4 * B + 6 * (4 * B - 100)
    hits = [2, 4, 4, 6, 6, 6]
    assert [p.result.token_hit_ratio for p in points] == [h * (4 * B - 100) / total for h in hits]
    assert [[t.hit_blocks for t in p.result.tiers] for p in points] == [
        [8],
        [8, 8],
        [16],
        [16, 8],
        [24],
        [24, 0],
    ]


def test_forked_workers_give_the_same_points_as_one_process() -> None:
    alone = run_sweep(TRACE, CONFIGS, processes=1)
    forked = run_sweep(TRACE, CONFIGS, processes=2)
    assert forked == alone
    assert sweep_json(forked) == sweep_json(alone)


def test_a_process_with_threads_spawns_its_workers_and_gets_the_same_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The suite hung: a sweep forked from a process whose other threads held locks, and a
    worker waited on one for ever. With another thread alive, workers are spawned."""
    import multiprocessing
    import threading

    asked: list[str] = []
    real = multiprocessing.get_context

    def get_context(method: str | None = None) -> Any:
        asked.append(str(method))
        return real(method)

    monkeypatch.setattr(multiprocessing, "get_context", get_context)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        spawned = run_sweep(TRACE, CONFIGS, processes=2)
    finally:
        stop.set()
        other.join()
    assert asked == ["spawn"]
    assert spawned == run_sweep(TRACE, CONFIGS, processes=1)


def test_the_trace_is_let_go_after_a_sweep_even_a_failed_one() -> None:
    run_sweep(TRACE, CONFIGS[:1], processes=1)
    assert sweep._TRACE is None
    with pytest.raises(InputError, match="unknown --policy 'clock'"):
        run_sweep(TRACE, [BASE._replace(policy="clock")], processes=1)
    assert sweep._TRACE is None


def test_no_configs_no_points() -> None:
    assert run_sweep(TRACE, [], processes=2) == []


def test_sweep_json_has_the_sizes_the_ratios_and_each_tier() -> None:
    points = run_sweep(TRACE, CONFIGS[2:4], processes=1)  # T1 16 blocks; T2 off, then 8
    data = json.loads(json.dumps(sweep_json(points)))
    assert len(data) == 2
    for entry, point in zip(data, points, strict=True):
        assert set(entry) == {
            "capacity",
            "token_hit_ratio",
            "block_hit_ratio",
            "full_block_hit_ratio",
            "tiers",
        }
        assert entry["capacity"] == point.capacity
        assert entry["token_hit_ratio"] == point.result.token_hit_ratio
        assert entry["block_hit_ratio"] == point.result.block_hit_ratio
        assert entry["full_block_hit_ratio"] == point.result.full_block_hit_ratio
        assert entry["tiers"] == [
            {"tier": t.tier, "token_hit_ratio": t.token_hit_ratio, "peak": t.peak}
            for t in point.result.tiers
        ]
    assert [t["tier"] for t in data[0]["tiers"]] == ["T1"]  # the tiers that are off are left out
    assert [t["tier"] for t in data[1]["tiers"]] == ["T1", "T2"]
    assert [t["peak"] for t in data[1]["tiers"]] == [16 * B, 8 * B]


def test_sweep_json_writes_an_unbounded_tier_as_null() -> None:
    result = replay(TRACE.requests, B, BASE._replace(capacity={"T1": None, "T2": 0}), samples=0)
    (entry,) = sweep_json([SweepPoint({"T1": None, "T2": 0}, result)])
    assert json.dumps(entry["capacity"]) == '{"T1": null, "T2": 0}'


def test_a_worker_takes_the_default_signal_handling() -> None:
    """Workers forked from the CLI inherited its clean-up handlers, so the pool's SIGTERM at
    the end printed an ``Interrupted: SIGTERM`` traceback (seen in a README run)."""
    import signal

    from kvtool.replay.sweep import _worker_start

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        for signum in saved:
            signal.signal(signum, lambda *_: None)
        _worker_start()
        assert all(signal.getsignal(s) == signal.SIG_DFL for s in saved)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)

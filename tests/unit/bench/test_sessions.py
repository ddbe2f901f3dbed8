"""kvtool capacity's pure core: follow-up turns from real traces, percentiles, the search for
the most sessions within a target, and the verdict beside the plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.bench.sessions import (
    DEFAULT_TURN_TOKENS,
    Level,
    PlanSide,
    Search,
    Turn,
    Workload,
    fixed,
    level_near,
    level_of,
    percentile,
    search,
    turns_from_requests,
    verdict,
)
from kvtool.inputs.trace import read_trace
from kvtool.replay.trace import Request

ROOT = Path(__file__).parents[3]


def test_follow_up_turns_from_the_mooncake_conversation_trace() -> None:
    """Mooncake's hash ids name a prefix; a follow-up turn repeats the earlier request's ids
    but for its last, partly filled block (hashed again once it fills)."""
    trace = read_trace(ROOT / "tests" / "fixtures" / "traces" / "conversation_trace_head.jsonl")
    turns = turns_from_requests(trace.requests)
    assert len(turns) == 7
    assert all(t.tokens > 0 and t.think_s >= 0 for t in turns)


def test_a_follow_up_is_found_by_its_prefix_and_a_shared_system_prompt_is_not_one() -> None:
    first = Request(0.0, 1100, 50, (10, 11, 12))  # system block 10, then the user's
    other = Request(1.0, 1200, 50, (10, 20, 21))  # another user, the same system prompt
    follow = Request(30.0, 1900, 50, (10, 11, 30, 31))  # first's blocks but its last
    whole = Request(70.0, 2600, 50, (10, 11, 30, 31, 40))  # follow's, all of them
    turns = turns_from_requests([whole, other, first, follow])  # any order: by arrival
    assert turns == [Turn(800, 30.0), Turn(700, 40.0)]


def test_the_examples_trace_has_follow_ups() -> None:
    turns = turns_from_requests(read_trace(ROOT / "examples" / "traces" / "small.jsonl").requests)
    assert len(turns) > 100
    assert sorted(t.think_s for t in turns)[len(turns) // 2] > 1


def test_a_workload_counts_every_rank_s_chunk_files() -> None:
    w = Workload(ctx_tokens=4000, chunk_tokens=256, chunk_bytes=1 << 20, files_per_chunk=8)
    assert w.chunks == 16 * 8
    assert w.session_bytes == 128 << 20
    assert w.turn(5) == Turn(DEFAULT_TURN_TOKENS, 0.0)
    assert w.turn_chunks(Turn(1, 0.0)) == 8
    assert w.turn_chunks(Turn(600, 0.0)) == 3 * 8
    traced = w._replace(turns=(Turn(100, 1.0), Turn(300, 2.0)))
    assert [traced.turn(i).tokens for i in range(3)] == [100, 300, 100]


@given(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=1, max_size=50),
       st.sampled_from([0.5, 0.95, 0.99]))  # fmt: skip
def test_percentiles_are_numpy_s(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(np.quantile(values, q)), abs=1e-9)


def test_no_restores_is_no_percentile() -> None:
    assert percentile([], 0.95) is None
    level = level_of(4, [], bytes_read=0, files_read=0, bytes_written=0, seconds=2.0)
    assert (level.restores, level.restore_p95_s, level.bytes_per_s) == (0, None, 0.0)


def _fake(knee: int, calls: list[int]):  # type: ignore[no-untyped-def]
    """A T3 whose p95 restore grows with the sessions: within 0.5 s up to ``knee``."""

    def measure(n: int) -> Level:
        calls.append(n)
        p95 = 0.5 * n / knee if knee else 1.0
        return Level(n, 10 * n, p95 / 2, p95, p95 * 1.1, 1e9, 100.0, 1e8, 10.0)

    return measure


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3000))
def test_the_search_finds_the_knee_within_its_resolution(knee: int) -> None:
    calls: list[int] = []
    found = search(_fake(knee, calls), slo_s=0.5, resolution=0.125, limit=4096)
    got = found.max_sessions
    assert got is not None
    assert got <= knee  # never above the truth
    assert knee - got <= max(1, int(got * 0.125))  # within the resolution
    assert len(calls) == len(set(calls))  # no level measured twice
    assert len(calls) <= 2 * 13  # doubling, then bisection: logarithmic
    if knee == 0:
        assert "even 1 session missed" in found.stopped


def test_the_search_stops_at_the_room_the_folder_has() -> None:
    calls: list[int] = []
    found = search(_fake(10_000, calls), slo_s=0.5, limit=40)
    assert (found.max_sessions, calls) == (40, [1, 2, 4, 8, 16, 32, 40])
    assert "the most the folder has room for" in found.stopped


def test_fixed_levels_are_run_as_given() -> None:
    calls: list[int] = []
    found = fixed(_fake(20, calls), [32, 8, 16], slo_s=0.5)
    assert calls == [32, 8, 16]
    assert found.max_sessions == 16
    assert fixed(_fake(4, []), [8, 16], slo_s=0.5).max_sessions is None


def test_the_verdict_sets_the_answer_beside_the_plan() -> None:
    levels = tuple(_fake(31, [])(n) for n in (16, 31, 32))
    found = Search(levels, 31, "held at 31 sessions, missed at 32")
    plan = PlanSide(16, 0.42, "kvtool plan llama-3.1-8b --hardware p5en --ctx 32,000")
    assert verdict(found, slo_s=0.5, at="p95", plan=plan) == (
        "T3 holds the plan: 31 concurrent restores within 500 ms at p95; the plan needs 16"
    )
    short = PlanSide(64, 0.42, "")
    assert verdict(found, slo_s=0.5, at="p95", plan=short).startswith("T3 does not hold the plan")
    assert verdict(found, slo_s=0.5, at="p95", plan=None, closed=False) == (
        "T3 holds 31 sessions (with the trace's pauses), restoring within 500 ms at p95"
    )
    none = Search(levels[:0], 0, "even 1 session missed the target (p95)")
    assert verdict(none, slo_s=0.5, at="p95", plan=plan).startswith("T3 does not hold the plan:")
    assert level_near(found, 16) == levels[0]
    assert level_near(found, 20) == levels[1]
    assert level_near(found, 99) == levels[2]

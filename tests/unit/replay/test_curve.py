"""The one-pass LRU curve against the manager's own replay: for every T1 size tried, on the
conversation trace's head, on random traces (hypothesis) and with hybrid rounding, the token
hit ratio is the same number, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.replay.curve import curve_applies, lru_curve
from kvtool.replay.run import ReplayConfig, replay
from kvtool.replay.trace import Request, parse_trace

HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"
B = 512


def _replayed(requests: list[Request], blocks: int | None, granularity: int = 1) -> float:
    config = ReplayConfig(capacity={"T1": None if blocks is None else blocks * B},
                          block_units=B, unit="tokens", hit_granularity=granularity)  # fmt: skip
    return replay(requests, B, config, samples=0).token_hit_ratio


@pytest.mark.parametrize("granularity", [1, 544])
def test_the_curve_is_the_replay_at_every_size_on_the_conversation_trace(
    granularity: int,
) -> None:
    trace = parse_trace(HEAD.read_text().splitlines())
    curve = lru_curve(trace.requests, B, granularity=granularity)
    requests = list(trace.requests)
    for blocks in [1, 2, 3, 5, 8, 13, 40, 100, 300, 1000, curve.distinct_blocks, None]:
        assert curve.token_hit_ratio(blocks) == _replayed(requests, blocks, granularity), blocks


REQUESTS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 12), min_size=1, max_size=6),  # a chain: ids name prefixes
        st.integers(0, B - 1),  # tokens short of the last block
    ),
    min_size=1,
    max_size=40,
)


def _chains(drawn: list[tuple[list[int], int]]) -> list[Request]:
    out = []
    for t, (ids, short) in enumerate(drawn):
        blocks = tuple("-".join(map(str, ids[: i + 1])) for i in range(len(ids)))
        out.append(Request(float(t), len(ids) * B - short, 1, blocks))
    return out


def test_the_curve_never_falls_and_ends_at_the_reuse_ratio() -> None:
    trace = parse_trace(HEAD.read_text().splitlines())
    curve = lru_curve(trace.requests, B)
    ratios = [r for _, r in curve.points(20)]
    assert ratios == sorted(ratios)
    assert curve.points(20)[-1] == (curve.distinct_blocks, curve.token_hit_ratio(None))


def test_the_curve_says_when_it_does_not_apply() -> None:
    base = ReplayConfig(capacity={"T1": 10}, block_units=B, unit="tokens")
    assert curve_applies(base) is None
    assert curve_applies(base._replace(capacity={"T1": 10, "T2": 5})) == (
        "T2 on (the one-pass curve is for T1 alone)"
    )
    assert curve_applies(base._replace(capacity={"T1": 0})) == "T1 off"
    assert curve_applies(base._replace(policy="s3fifo")) == (
        "policy s3fifo (the one-pass curve is LRU's)"
    )


def _same(a: object, b: object) -> None:
    from kvtool.replay.run import ReplayResult

    assert isinstance(a, ReplayResult)
    assert isinstance(b, ReplayResult)
    for field in ("requests", "mean_input_tokens", "mean_output_tokens", "block_tokens", "unit",
                  "token_hit_ratio", "block_hit_ratio", "full_block_hit_ratio",
                  "reuse_ratio_unbounded", "tiers"):  # fmt: skip
        assert getattr(a, field) == getattr(b, field), field


@settings(max_examples=200, deadline=None)
@given(drawn=REQUESTS, blocks=st.integers(1, 30), granularity=st.sampled_from([1, 300, 700]))
def test_the_curves_result_is_the_replays_on_any_trace(
    drawn: list[tuple[list[int], int]], blocks: int, granularity: int
) -> None:
    """Every field a sweep prints, and T1's hit blocks, bytes written and peak."""
    requests = _chains(drawn)
    ratio = lru_curve(requests, B, granularity=granularity).token_hit_ratio(blocks)
    assert ratio == _replayed(requests, blocks, granularity)
    config = ReplayConfig(capacity={"T1": blocks * 1000}, block_units=1000, unit="bytes",
                          hit_granularity=granularity)  # fmt: skip
    curve = lru_curve(requests, B, granularity=granularity)
    _same(curve.result(config, B), replay(requests, B, config, samples=0))


def test_the_curves_result_is_the_replays_on_the_conversation_trace() -> None:
    trace = parse_trace(HEAD.read_text().splitlines())
    curve = lru_curve(trace.requests, B)
    for t1 in (B, 7 * B, 100 * B, 10**9, None):
        config = ReplayConfig(capacity={"T1": t1}, block_units=B, unit="tokens")
        _same(curve.result(config, B), replay(trace.requests, B, config, samples=0))

"""Replay semantics (docs/replay.md) on small hand-made traces, properties over random prefix
trees, and the whole Mooncake conversation trace against an independent count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.replay.run import ReplayConfig, replay
from kvtool.replay.trace import Request, parse_trace

B = 512
SHARED = Path(__file__).parents[4] / "shared" / "traces" / "conversation_trace.jsonl"


def _req(t: float, blocks: list[str], tokens: int | None = None) -> Request:
    return Request(t, tokens if tokens is not None else len(blocks) * B, 1, tuple(blocks))


def _config(
    t1: int | None, t2: int | None = 0, t3: int | None = 0, t4: int | None = 0
) -> ReplayConfig:
    return ReplayConfig(
        capacity={"T1": t1, "T2": t2, "T3": t3, "T4": t4}, block_units=B, unit="tokens"
    )


def test_prefix_semantics_and_the_three_ratios() -> None:
    trace = [
        _req(0, ["a", "b", "c"], tokens=3 * B - 100),  # last block partial
        _req(1, ["a", "b", "x"]),  # shares a, b
        _req(2, ["y", "b", "c"]),  # b and c exist, but not after y: no hit
    ]
    result = replay(trace, B, _config(None))
    total = (3 * B - 100) + 3 * B + 3 * B
    assert result.token_hit_ratio == 2 * B / total
    assert result.block_hit_ratio == 2 / 9
    assert result.full_block_hit_ratio == 2 / (2 + 3 + 3)
    assert result.reuse_ratio_unbounded == result.token_hit_ratio


def test_a_hit_on_a_partial_last_block_counts_only_its_tokens() -> None:
    trace = [_req(0, ["a", "b"], tokens=B + 10), _req(1, ["a", "b"], tokens=B + 10)]
    result = replay(trace, B, _config(None))
    assert result.token_hit_ratio == (B + 10) / (2 * (B + 10))


def test_a_capacity_in_tokens_holds_whole_blocks_only() -> None:
    trace = [_req(0, ["a", "b"]), _req(1, ["a", "b"])]
    one_block = (2 * B - 1) // B * B  # what the CLI makes of --t1 1023: one block
    result = replay(trace, B, _config(one_block))
    assert result.block_hit_ratio == 1 / 4


def test_the_last_block_is_touched_first_so_a_prefix_outlives_its_suffixes() -> None:
    # a 2-block T1: after [a, b, c], the least recent is c, then b; a survives
    trace = [_req(0, ["a", "b", "c"]), _req(1, ["a", "d"])]
    result = replay(trace, B, _config(2 * B))
    assert result.block_hit_ratio == 1 / 5


def test_eviction_waits_until_the_whole_request_is_in() -> None:
    # T1 holds 3 blocks: [a, b, c, d] goes in whole, then its least recent (d) leaves; the
    # next request finds its prefix a, b, c
    trace = [_req(0, ["a", "b", "c", "d"]), _req(1, ["a", "b", "c", "e"])]
    result = replay(trace, B, _config(3 * B))
    assert result.block_hit_ratio == 3 / 8
    assert result.counters["evictions"] == 2  # d, then e


def test_lower_tiers_catch_what_t1_lets_go_and_shares_add_up() -> None:
    trace = [_req(i, [f"s{i}-{j}" for j in range(4)]) for i in range(6)]
    # again, newest first: the last two from T1, the two before from T2, the first from T3
    trace += [_req(10 + i, [f"s{5 - i}-{j}" for j in range(4)]) for i in range(6)]
    result = replay(trace, B, _config(8 * B, t2=8 * B, t3=None))
    by_tier = {t.tier: t for t in result.tiers}
    assert by_tier["T1"].hit_blocks > 0
    assert by_tier["T2"].hit_blocks > 0
    assert by_tier["T3"].hit_blocks > 0
    assert sum(t.token_hit_ratio for t in result.tiers) == pytest.approx(result.token_hit_ratio)
    assert result.token_hit_ratio == result.reuse_ratio_unbounded  # nothing fell off the end


@st.composite
def prefix_trees(draw: st.DrawFn) -> list[Request]:
    """Requests whose ids form a prefix tree (an id always follows the same parent)."""
    paths: list[list[str]] = [[]]
    out = []
    for t in range(draw(st.integers(1, 40))):
        base = draw(st.sampled_from(paths))
        keep = draw(st.integers(0, len(base)))
        grow = draw(st.integers(1 if keep == 0 else 0, 4))
        blocks = base[:keep] + [f"n{t}-{i}" for i in range(grow)]
        paths.append(blocks)
        out.append(_req(t, blocks))
    return out


@settings(max_examples=60, deadline=None)
@given(prefix_trees(), st.integers(1, 12), st.integers(1, 12))
def test_lru_hits_never_fall_as_t1_grows_and_never_pass_the_reuse_ratio(
    trace: list[Request], small: int, extra: int
) -> None:
    low = replay(trace, B, _config(small * B))
    high = replay(trace, B, _config((small + extra) * B))
    assert low.token_hit_ratio <= high.token_hit_ratio
    assert high.token_hit_ratio <= high.reuse_ratio_unbounded


@settings(max_examples=40, deadline=None)
@given(prefix_trees(), st.integers(1, 8), st.integers(0, 8))
def test_a_second_tier_only_adds_hits(trace: list[Request], t1: int, t2: int) -> None:
    alone = replay(trace, B, _config(t1 * B))
    with_t2 = replay(trace, B, _config(t1 * B, t2=t2 * B))
    assert with_t2.token_hit_ratio >= alone.token_hit_ratio


@pytest.mark.skipif(not SHARED.is_file(), reason="the Mooncake traces are not alongside")
def test_the_conversation_trace_against_an_independent_count() -> None:
    with SHARED.open() as f:
        trace = parse_trace(f)
    seen: set[str] = set()
    hit = total = 0
    for r in trace.requests:
        reused = 0
        for block in r.blocks:
            if block not in seen:
                break
            reused += 1
        seen.update(r.blocks)
        hit += min(reused * 512, r.input_tokens)
        total += r.input_tokens
    result = replay(trace.requests, 512, _config(None))
    assert len(trace.requests) == 12_031
    assert sum(len(r.blocks) for r in trace.requests) == 288_500
    assert result.token_hit_ratio == hit / total
    assert result.reuse_ratio_unbounded == hit / total
    assert json.dumps(result.to_json())  # serialisable


def test_a_tier_left_out_of_the_capacities_is_off_in_the_report_too() -> None:
    """The manager treats a tier missing from the capacities as off; the report used to list
    it as unbounded."""
    requests = [Request(t_s=0.0, input_tokens=8, output_tokens=1, blocks=("a", "b"))]
    result = replay(requests, 4, ReplayConfig(capacity={"T1": 4}, block_units=4, unit="tokens"))
    assert [t.tier for t in result.tiers] == ["T1"]


def test_a_hybrid_models_hits_stop_at_its_last_whole_engine_block() -> None:
    """vLLM caches a hybrid model's prefixes only at whole hybrid blocks (544 tokens for
    qwen3-next): 3 trace blocks (1,536 tokens) of hit serve 1,088 tokens, 2 whole blocks and
    64 tokens of the third; a prompt shorter than one engine block never hits."""
    trace = [
        _req(0, ["a", "b", "c", "d"]),
        _req(1, ["a", "b", "c", "x"]),  # 3 blocks = 1,536 tokens shared
        _req(2, ["a"], tokens=500),  # shorter than one engine block
    ]
    plain = replay(trace, B, _config(None))
    hybrid = replay(trace, B, _config(None)._replace(hit_granularity=544))
    assert plain.tiers[0].hit_tokens == 3 * B + 500
    assert hybrid.tiers[0].hit_tokens == 2 * 544  # 1,088; the 500-token prompt: nothing
    assert hybrid.tiers[0].hit_blocks == 2  # whole trace blocks served
    assert hybrid.token_hit_ratio == 2 * 544 / (4 * B + 4 * B + 500)
    assert hybrid.block_hit_ratio == 2 / 9

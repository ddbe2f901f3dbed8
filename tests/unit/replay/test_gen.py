"""Synthetic traces: seeded and reproducible, readable as kvtool traces, ids with Mooncake's
prefix semantics (shared prompts give shared leading ids, a conversation keeps its history),
and ``Workload.checked`` naming the option that is out of range."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.replay.gen import Workload, generate, write_lines
from kvtool.replay.trace import parse_trace

SMALL = Workload(
    requests=300,
    arrival_rate=5.0,
    turns=3.0,
    think_s=5.0,
    system_prompts=3,
    system_tokens=700,
    rag_preambles=4,
    rag_share=0.5,
    rag_tokens=900,
    user_tokens=200,
    output_tokens=100,
    block_tokens=256,
)


def _records(w: Workload) -> list[dict[str, Any]]:
    return list(generate(w))[1:]


def test_the_same_workload_gives_the_same_bytes_and_another_seed_others() -> None:
    first = "".join(write_lines(SMALL))
    assert "".join(write_lines(SMALL)) == first
    assert "".join(write_lines(SMALL._replace(seed=2))) != first


def test_the_header_says_the_block_size_and_the_whole_workload() -> None:
    header = next(generate(SMALL))
    assert header == {
        "kvtool_trace": 1,
        "block_tokens": 256,
        "generator": "kvtool engine gen",
        "workload": SMALL._asdict(),
    }


def test_write_lines_is_one_compact_json_object_per_line() -> None:
    lines = list(write_lines(SMALL._replace(requests=20)))
    assert len(lines) == 21
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert all(", " not in line and ": " not in line for line in lines)  # compact separators
    assert [json.loads(line) for line in lines] == list(generate(SMALL._replace(requests=20)))


def test_the_output_is_a_kvtool_trace_with_the_requested_count_in_arrival_order() -> None:
    trace = parse_trace(write_lines(SMALL), fmt="jsonl")
    assert trace.format == "jsonl"
    assert trace.block_tokens == 256
    assert len(trace.requests) == 300
    times = [r.t_s for r in trace.requests]
    assert times == sorted(times)
    assert times[0] == 0.0
    assert all(r.input_tokens >= 700 + 1 for r in trace.requests)  # the system prompt, a message


def _prefix_problems(records: list[dict[str, Any]]) -> list[str]:
    """What breaks the prefix semantics: an id seen at another position or after another id,
    or a new id that is not the next in order of first appearance."""
    problems = []
    parent: dict[int, tuple[int, int]] = {}
    next_id = 0
    for number, record in enumerate(records):
        before = -1
        for position, block in enumerate(record["hash_ids"]):
            if block >= next_id:
                if block != next_id:
                    problems.append(f"request {number}: new id {block}, expected {next_id}")
                next_id = block + 1
            if parent.setdefault(block, (position, before)) != (position, before):
                problems.append(f"request {number}: id {block} after another prefix")
            before = block
    return problems


def test_an_id_stands_for_its_block_and_everything_before_it() -> None:
    records = _records(SMALL)
    assert _prefix_problems(records) == []
    # ids are 0, 1, 2, ... in order of first appearance: the largest is the count less one
    ids = {b for r in records for b in r["hash_ids"]}
    assert ids == set(range(len(ids)))


def test_every_session_starts_with_its_shared_system_prompt() -> None:
    # 2 prompts of 3 whole blocks each: every request starts with one of two 3-id runs
    w = SMALL._replace(system_prompts=2, system_tokens=3 * 256, rag_share=0.0)
    heads = Counter(tuple(r["hash_ids"][:3]) for r in _records(w))
    assert len(heads) == 2
    assert sum(heads.values()) == 300
    # a block that mixes the prompt's end with a message is the session's own
    mixed = SMALL._replace(system_prompts=1, system_tokens=300, rag_share=0.0)
    records = _records(mixed)
    assert {r["hash_ids"][0] for r in records} == {0}
    assert len({r["hash_ids"][1] for r in records}) > 50


def test_the_rag_preamble_is_shared_after_the_system_prompt() -> None:
    # one prompt (2 blocks) and always the one document (3 blocks): 5 ids every request shares
    w = SMALL._replace(
        system_prompts=1, system_tokens=512, rag_preambles=1, rag_share=1.0, rag_tokens=768
    )
    records = _records(w)
    assert {tuple(r["hash_ids"][:5]) for r in records} == {(0, 1, 2, 3, 4)}
    # without documents the third block already belongs to the session
    alone = _records(w._replace(rag_share=0.0))
    assert len({r["hash_ids"][2] for r in alone}) > 50


def test_more_distinct_prompts_share_less() -> None:
    few = _records(SMALL._replace(system_prompts=1, rag_share=0.0, system_tokens=1024))
    many = _records(SMALL._replace(system_prompts=1000, rag_share=0.0, system_tokens=1024))
    assert len({r["hash_ids"][0] for r in few}) == 1
    assert len({r["hash_ids"][0] for r in many}) > 100


def test_a_conversation_sends_its_history_again_with_each_turn() -> None:
    # sessions arrive a million seconds apart, turns a second apart: one session at a time
    w = Workload(
        requests=12, arrival_rate=1e-6, think_s=1.0, turns=1000.0, system_prompts=1,
        rag_share=0.0, system_tokens=600, user_tokens=150, output_tokens=200, block_tokens=128,
        seed=5,
    )  # fmt: skip
    records = _records(w)
    for earlier, later in itertools.pairwise(records):
        history = earlier["input_length"] + earlier["output_length"]
        assert later["input_length"] > history  # the history plus a new message
        assert later["timestamp"] > earlier["timestamp"]
        full = earlier["input_length"] // 128
        assert later["hash_ids"][:full] == earlier["hash_ids"][:full]
        assert len(later["hash_ids"]) == -(-later["input_length"] // 128)


def test_a_partial_last_block_is_named_afresh_each_turn() -> None:
    records = _records(SMALL)
    counts = Counter(b for r in records for b in r["hash_ids"])
    partial = [r["hash_ids"][-1] for r in records if r["input_length"] % 256]
    assert len(partial) > 250
    assert all(counts[block] == 1 for block in partial)


def test_one_turn_sessions_never_repeat_a_conversation_block() -> None:
    w = SMALL._replace(turns=1.0, system_prompts=1, system_tokens=512, rag_share=0.0)
    records = _records(w)
    counts = Counter(b for r in records for b in r["hash_ids"][2:])
    assert set(counts.values()) == {1}


def test_a_tiny_max_context_ends_sessions_after_one_turn() -> None:
    # a session goes on only while context + answer + a mean message stays below max_context:
    # 2,048 tokens of prompt, a message and an answer pass 2,100, so every session ends after
    # its first turn and no conversation block (past the prompt's 8) is sent twice
    w = SMALL._replace(system_prompts=1, system_tokens=2048, rag_share=0.0, max_context=2100)
    records = _records(w)
    counts = Counter(b for r in records for b in r["hash_ids"][8:])
    assert set(counts.values()) == {1}


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 60),
    st.integers(1, 4),
    st.integers(1, 1500),
    st.integers(1, 3),
    st.floats(0.0, 1.0),
    st.integers(1, 800),
    st.integers(1, 400),
    st.sampled_from([16, 64, 256, 512]),
    st.integers(0, 2**32),
)
def test_any_workload_gives_a_valid_trace_with_prefix_ids(
    requests: int,
    system_prompts: int,
    system_tokens: int,
    rag_preambles: int,
    rag_share: float,
    user_tokens: int,
    output_tokens: int,
    block_tokens: int,
    seed: int,
) -> None:
    w = Workload(
        requests=requests, system_prompts=system_prompts, system_tokens=system_tokens,
        rag_preambles=rag_preambles, rag_share=rag_share, rag_tokens=700,
        user_tokens=user_tokens, output_tokens=output_tokens, block_tokens=block_tokens,
        think_s=2.0, seed=seed,
    ).checked()  # fmt: skip
    trace = parse_trace(write_lines(w), fmt="jsonl")  # counts and order checked as it reads
    assert len(trace.requests) == requests
    assert trace.block_tokens == block_tokens
    assert _prefix_problems(_records(w)) == []


# --- Workload.checked -------------------------------------------------------------------------

AT_LEAST_ONE = {
    "system_prompts": "--system-prompts",
    "rag_preambles": "--rag-preambles",
    "system_tokens": "--system-tokens",
    "rag_tokens": "--rag-tokens",
    "user_tokens": "--user-tokens",
    "output_tokens": "--output-tokens",
    "block_tokens": "--block-tokens",
    "requests": "--requests",
    "max_context": "--max-context",
}
POSITIVE = {"arrival_rate": "--arrival-rate", "think_s": "--think", "turns": "--turns"}


def test_a_workload_in_range_is_returned_as_it_is() -> None:
    w = Workload()
    assert w.checked() is w
    edge = Workload(rag_share=0.0, turns=0.5, requests=1, block_tokens=1)
    assert edge.checked() == edge
    assert Workload(rag_share=1.0).checked().rag_share == 1.0


@pytest.mark.parametrize("field", AT_LEAST_ONE)
@pytest.mark.parametrize("value", [0, -3])
def test_a_count_below_one_names_its_option(field: str, value: int) -> None:
    with pytest.raises(InputError) as caught:
        Workload()._replace(**{field: value}).checked()
    assert caught.value.message == f"{AT_LEAST_ONE[field]} must be at least 1, got {value}"


@pytest.mark.parametrize("share", [-0.01, 1.5, 2, math.nan])
def test_a_rag_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(InputError) as caught:
        Workload(rag_share=share).checked()
    assert caught.value.message == f"--rag-share must be between 0 and 1, got {share}"


@pytest.mark.parametrize("field", POSITIVE)
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_a_rate_or_time_that_is_not_positive_names_its_option(field: str, value: float) -> None:
    """NaN and inf included: they used to pass the check and crash the generator."""
    with pytest.raises(InputError) as caught:
        Workload()._replace(**{field: value}).checked()
    assert caught.value.message == f"{POSITIVE[field]} must be a positive number, got {value}"


def test_the_first_option_out_of_range_is_the_one_named() -> None:
    bad = Workload(system_prompts=0, arrival_rate=0.0, rag_share=3.0)
    with pytest.raises(InputError, match=r"^--system-prompts must be at least 1, got 0$"):
        bad.checked()


def test_max_context_caps_every_request() -> None:
    """--max-context 100 used to give 8,204-token inputs."""
    w = Workload(requests=300, system_tokens=40, rag_share=0.0, user_tokens=300, max_context=100)
    lengths = [r["input_length"] for r in generate(w.checked()) if "input_length" in r]
    assert len(lengths) == 300
    assert max(lengths) <= 100
    assert max(lengths) == 100  # messages are cut to the room left, not dropped


def test_shared_prefixes_past_the_cap_are_refused() -> None:
    with pytest.raises(InputError, match="leave no room for a message under --max-context 100"):
        Workload(max_context=100).checked()
    with pytest.raises(InputError, match=r"--system-tokens 50 \+ --rag-tokens 60"):
        Workload(max_context=100, system_tokens=50, rag_tokens=60, rag_share=0.5).checked()


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("turns", 1e30, "--turns"),
        ("think_s", 1e30, "--think"),
        ("arrival_rate", 1e7, "--arrival-rate"),
    ],
)
def test_a_mean_no_trace_can_have_is_refused(field: str, value: float, option: str) -> None:
    """``--turns 1e30`` and ``--think 1e30`` wrote a trace with exit 0."""
    with pytest.raises(InputError, match=rf"^{option} .* is over"):
        Workload()._replace(**{field: value}).checked()

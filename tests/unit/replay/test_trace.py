"""Reading traces: Mooncake's lines as published, kvtool's header, and every bad input named
by its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtool.replay.trace import TraceError, parse_trace

TRACES = Path(__file__).parents[3] / "tests" / "fixtures" / "traces"
HEAD = (TRACES / "conversation_trace_head.jsonl").read_text().splitlines()


def test_mooncake_lines_as_published() -> None:
    trace = parse_trace(HEAD, source="head")
    assert trace.format == "mooncake"
    assert trace.block_tokens == 512
    assert len(trace.requests) == len(HEAD)
    first = json.loads(HEAD[0])
    r = trace.requests[0]
    assert r.t_s == first["timestamp"] / 1000
    assert r.input_tokens == first["input_length"]
    assert r.blocks == tuple(first["hash_ids"])  # whole numbers stay whole numbers


def test_kvtool_header_sets_the_block_size() -> None:
    lines = [
        json.dumps({"kvtool_trace": 1, "block_tokens": 256}),
        json.dumps(
            {"timestamp": 5, "input_length": 600, "output_length": 2, "hash_ids": ["a", "b", "c"]}
        ),
    ]
    trace = parse_trace(lines)
    assert trace.format == "jsonl"
    assert trace.block_tokens == 256
    assert trace.requests[0].blocks == ("a", "b", "c")


def test_a_text_id_that_spells_a_number_is_that_number() -> None:
    """1 and "1" name one block whichever line comes first (two ids are one block exactly
    when their text is equal); "01" and "x" stay text; a trace of numbers stays numbers."""
    header = json.dumps({"kvtool_trace": 1, "block_tokens": 4})

    def line(t: int, ids: list[object]) -> str:
        return json.dumps({"timestamp": t, "input_length": 4 * len(ids), "output_length": 1,
                           "hash_ids": ids})  # fmt: skip

    numbers = parse_trace([header, line(0, [1, 2]), line(1, [1, 3])])
    assert [r.blocks for r in numbers.requests] == [(1, 2), (1, 3)]
    for lines in ([line(0, [1, 2]), line(1, ["1", "x"])], [line(0, ["1"]), line(1, [1, 2])],
                  [line(0, [1, "x"]), line(1, [1])]):  # fmt: skip
        trace = parse_trace([header, *lines])
        assert trace.requests[0].blocks[0] == trace.requests[1].blocks[0] == 1
    odd = parse_trace([header, line(0, ["01", "-7", "x", "١", "10" * 30])])
    assert odd.requests[0].blocks == ("01", -7, "x", "١", int("10" * 30))


def _line(**fields: object) -> str:
    base: dict[str, object] = {
        "timestamp": 0,
        "input_length": 600,
        "output_length": 1,
        "hash_ids": [1, 2],
    }
    base.update(fields)
    return json.dumps(base)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (_line(timestamp=-1), "timestamp must be milliseconds"),
        (_line(input_length="600"), "input_length must be a whole number"),
        (_line(hash_ids=[1]), "1 hash_ids for 600 tokens; 512-token blocks need 2"),
        (_line(hash_ids=[1, "x"]), "Mooncake hash_ids are whole numbers"),
        (_line(hash_ids="1,2"), "hash_ids must be a list"),
    ],
)
def test_a_bad_line_names_its_number(bad: str, message: str) -> None:
    with pytest.raises(TraceError, match=f"t.jsonl:3: .*{message}"):
        parse_trace([_line(), _line(), bad], source="t.jsonl")


def test_skip_bad_counts_and_goes_on() -> None:
    trace = parse_trace([_line(), "{not json", _line(timestamp=10)], skip_bad=True)
    assert trace.skipped == 1
    assert len(trace.requests) == 2


def test_timestamps_that_go_back_are_refused() -> None:
    with pytest.raises(TraceError, match="t:2: timestamp 5 ms goes back from 10 ms"):
        parse_trace([_line(timestamp=10), _line(timestamp=5)], source="t")


def test_format_mismatches_and_empty_traces() -> None:
    with pytest.raises(TraceError, match="no kvtool trace header"):
        parse_trace([_line()], fmt="jsonl")
    header = json.dumps({"kvtool_trace": 1, "block_tokens": 512})
    with pytest.raises(TraceError, match="not Mooncake's"):
        parse_trace([header, _line()], fmt="mooncake")
    with pytest.raises(TraceError, match="empty"):
        parse_trace(["", "  "])
    with pytest.raises(Exception, match="unknown trace format"):
        parse_trace([_line()], fmt="csv")

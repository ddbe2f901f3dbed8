"""The front door's trace: a file into a Trace, and every way a file can be wrong as one
InputError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.trace import read_trace

HEAD = Path(__file__).parents[2] / "fixtures" / "traces" / "conversation_trace_head.jsonl"


def test_mooncakes_head_reads_as_mooncake_with_512_token_blocks() -> None:
    trace = read_trace(HEAD)
    assert trace.format == "mooncake"
    assert trace.block_tokens == 512
    assert len(trace.requests) == 200
    first = trace.requests[0]
    assert (first.input_tokens, first.output_tokens, len(first.blocks)) == (6758, 500, 14)
    assert trace.source == str(HEAD)


def test_missing_folder_and_binary_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a file"):
        read_trace(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is not a file"):
        read_trace(tmp_path)
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(InputError, match="is not text"):
        read_trace(binary)


def test_a_bad_line_names_its_number_unless_skipped(tmp_path: Path) -> None:
    lines = HEAD.read_text().splitlines()[:3]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not JSON"):
        read_trace(bad)
    skipped = read_trace(bad, skip_bad=True)
    assert (len(skipped.requests), skipped.skipped) == (2, 1)


def test_an_explicit_format_is_honoured(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no kvtool trace header"):
        read_trace(HEAD, fmt="jsonl")


def test_a_streamed_trace_is_the_read_one_and_walks_again(tmp_path: Path) -> None:
    from kvtool.inputs.trace import stream_trace

    held = read_trace(HEAD)
    streamed = stream_trace(HEAD)
    assert (streamed.block_tokens, streamed.format) == (held.block_tokens, held.format)
    assert len(streamed.requests) == len(held.requests)
    assert list(streamed.requests) == held.requests
    assert list(streamed.requests) == held.requests  # a second walk reads the file again
    broken = tmp_path / "late.jsonl"
    broken.write_bytes(HEAD.read_bytes() + b"\xff\n")
    with pytest.raises(InputError, match="is not text"):  # the counting pass finds it first
        stream_trace(broken)
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text(HEAD.read_text() + "{not json\n")
    late = stream_trace(bad_line)  # counted fine: the line is found when it is read
    with pytest.raises(InputError, match=":201: not JSON"):
        list(late.requests)


def test_an_error_of_the_reader_is_not_called_the_files(tmp_path: Path) -> None:
    """A pipe that breaks while the replay draws its progress is not "cannot read the trace"."""
    from kvtool.inputs.trace import stream_trace

    def draw_progress(request: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    requests = iter(stream_trace(HEAD).requests)
    with pytest.raises(BrokenPipeError):
        draw_progress(next(requests))
    requests.close()  # (nothing left open)

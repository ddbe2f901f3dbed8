"""Request traces: Mooncake's JSONL (FAST'25 release) and kvtool's own JSONL (``engine gen``).

One request per line: ``timestamp`` (ms from the start, never decreasing), ``input_length`` and
``output_length`` (tokens), ``hash_ids`` (one id per block of the prompt; an id stands for the
block together with everything before it, so two requests share exactly their longest common
leading run of ids). Mooncake's blocks are 512 tokens. kvtool's format starts with a header
line ``{"kvtool_trace": 1, "block_tokens": N, ...}`` and may use whole numbers or strings as ids.

Ids that are whole numbers stay whole numbers (Mooncake's always are: a replay looks them up
about twice as fast as the same ids as text, and in an array when they count from 0), and a
text id that spells one the way Python writes it (``"17"``, not ``"017"``) is that number: so
``1`` and ``"1"`` name one block, as two ids name one block exactly when their text is equal,
whichever comes first in the trace.

Pure: text in, records out; a malformed line is a ``TraceError`` naming its line, or is counted
and skipped with ``skip_bad``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from kvtool.errors import InputError

MOONCAKE_BLOCK_TOKENS = 512
FORMATS = ("auto", "mooncake", "jsonl")


class TraceError(InputError):
    """A line of a trace that cannot be read; the message names the line."""


class Request(NamedTuple):
    """One request: arrival in seconds, prompt and output tokens, and its block ids."""

    t_s: float
    input_tokens: int
    output_tokens: int
    blocks: tuple[Any, ...]


class Trace(NamedTuple):
    """A whole trace: its requests, block size, format and how many bad lines were skipped."""

    requests: list[Request]
    block_tokens: int
    format: str
    skipped: int
    source: str


def _int(record: dict[str, Any], name: str) -> int:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return value


class Lines(NamedTuple):
    """A trace's first line read: its block size and format, and the request lines (numbered,
    blank ones left out) still to read."""

    block_tokens: int
    format: str
    rows: Iterator[tuple[int, str]]


def open_trace(lines: Iterable[str], *, fmt: str = "auto", source: str = "trace") -> Lines:
    """The header step of reading a trace: ``fmt`` ``auto`` takes kvtool's format when the
    first line is its header, else Mooncake's. TraceError for an unknown format, an empty
    trace, or a header the format contradicts."""
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r}", "choose " + ", ".join(FORMATS))
    numbered: Iterator[tuple[int, str]] = (
        (n, line) for n, line in enumerate(lines, 1) if line.strip()
    )
    first = next(numbered, None)
    if first is None:
        raise TraceError(f"{source}: the trace is empty")
    header = _header(first[1])
    if fmt == "jsonl" and header is None:
        raise TraceError(
            f"{source}:{first[0]}: no kvtool trace header",
            'kvtool traces start with {"kvtool_trace": 1, "block_tokens": N};'
            " use --format mooncake",
        )
    if fmt == "mooncake" and header is not None:
        raise TraceError(
            f"{source}:1: this is a kvtool trace, not Mooncake's", "use --format jsonl"
        )
    if header is not None:
        return Lines(int(header["block_tokens"]), "jsonl", numbered)
    return Lines(MOONCAKE_BLOCK_TOKENS, "mooncake", _chain(first, numbered))


def iter_requests(
    lines: Lines, *, skip_bad: bool = False, source: str = "trace", skipped: list[int] | None = None
) -> Iterator[Request]:
    """The requests of ``lines``, one at a time (a replay reads a trace of any length in
    little memory). TraceError for a bad line (``skip_bad``: it is counted in
    ``skipped[0]`` and passed over), a timestamp that goes backwards, or no request at all."""
    counted = skipped if skipped is not None else [0]
    block_tokens, mooncake = lines.block_tokens, lines.format == "mooncake"
    last_t = 0.0
    any_read = False
    for number, line in lines.rows:
        try:
            request = _request(line, block_tokens, mooncake=mooncake)
        except ValueError as exc:
            if skip_bad:
                counted[0] += 1
                continue
            raise TraceError(
                f"{source}:{number}: {exc}", "fix the line or pass --skip-bad"
            ) from None
        if request.t_s < last_t:
            raise TraceError(
                f"{source}:{number}: timestamp {request.t_s * 1000:g} ms goes back from"
                f" {last_t * 1000:g} ms",
                "a trace must be in arrival order: sort it by timestamp",
            )
        last_t = request.t_s
        any_read = True
        yield request
    if not any_read:
        raise TraceError(f"{source}: no request could be read", "check the --format")


class TraceFile:
    """A trace's requests, read from its lines each time they are walked and never held: a
    replay of a million requests needs no more memory than one of a thousand. ``opener``
    gives the lines afresh (a file, opened and closed by the caller's context manager);
    ``count`` is how many requests there are (the lines that are not blank, less the header:
    a bad line stops the walk, or with ``skip_bad`` is counted in ``skipped``)."""

    def __init__(
        self,
        opener: Callable[[], AbstractContextManager[Iterable[str]]],
        *,
        count: int,
        fmt: str,
        skip_bad: bool,
        source: str,
    ) -> None:
        self.opener = opener
        self.count = count
        self.fmt = fmt
        self.skip_bad = skip_bad
        self.source = source
        self.skipped = 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Request]:
        skipped = [0]
        with self.opener() as lines:
            opened = open_trace(lines, fmt=self.fmt, source=self.source)
            yield from iter_requests(
                opened, skip_bad=self.skip_bad, source=self.source, skipped=skipped
            )
        self.skipped = skipped[0]


class StreamedTrace(NamedTuple):
    """A trace read as it goes (``TraceFile``): what ``Trace`` says, but its requests are
    walked rather than held, and the bad lines skipped are known once they have been."""

    requests: TraceFile
    block_tokens: int
    format: str
    source: str

    @property
    def skipped(self) -> int:
        return self.requests.skipped


def parse_trace(
    lines: Iterable[str], *, fmt: str = "auto", skip_bad: bool = False, source: str = "trace"
) -> Trace:
    """Read a whole trace into memory (``open_trace``, then ``iter_requests``)."""
    opened = open_trace(lines, fmt=fmt, source=source)
    skipped = [0]
    requests = list(iter_requests(opened, skip_bad=skip_bad, source=source, skipped=skipped))
    return Trace(requests, opened.block_tokens, opened.format, skipped[0], source)


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def _header(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or "kvtool_trace" not in data:
        return None
    tokens = data.get("block_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise TraceError(f"the kvtool trace header's block_tokens must be >= 1, got {tokens!r}")
    return data


_decode = json.JSONDecoder().raw_decode  # no per-line wrapper: the checked way has one
_NUMBERS = (int, float)
_INTS = {int}


def _request(line: str, block_tokens: int, *, mooncake: bool) -> Request:
    """One line as a request: a well-formed line takes the short way; anything else the
    checks of ``_checked_request``, which name what is wrong."""
    try:
        record, end = _decode(line)
        if end < len(line) and line[end:].strip():
            raise ValueError("more after the object")
        t_ms = record["timestamp"]
        input_tokens = record["input_length"]
        output_tokens = record["output_length"]
        blocks = record["hash_ids"]
    except Exception:  # the checked way says what it was
        return _checked_request(line, block_tokens, mooncake=mooncake)
    if (
        type(t_ms) in _NUMBERS
        and 0 <= t_ms < 1e300
        and type(input_tokens) is int
        and input_tokens >= 0
        and type(output_tokens) is int
        and output_tokens >= 0
        and type(blocks) is list
        and len(blocks) == -(-input_tokens // block_tokens)
        and set(map(type, blocks)) <= _INTS
    ):
        return Request(t_ms / 1000, input_tokens, output_tokens, tuple(blocks))
    return _checked_request(line, block_tokens, mooncake=mooncake)


def _as_number(block: int | str) -> int | str:
    """A text id that spells a whole number as Python writes it is that number."""
    if type(block) is str and block[-1:].isdigit():
        try:
            number = int(block)
        except ValueError:
            return block
        if str(number) == block:
            return number
    return block


def _checked_request(line: str, block_tokens: int, *, mooncake: bool) -> Request:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to be a request") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    t_ms = record.get("timestamp")
    if isinstance(t_ms, bool) or not isinstance(t_ms, int | float) or not 0 <= t_ms < 1e300:
        # NaN and Infinity are JSON to Python: NaN passed every order check after it
        raise ValueError(f"timestamp must be milliseconds >= 0, got {t_ms!r:.40}")
    input_tokens = _int(record, "input_length")
    output_tokens = _int(record, "output_length")
    blocks = record.get("hash_ids")
    if not isinstance(blocks, list):
        raise ValueError("hash_ids must be a list")
    kinds = set(map(type, blocks))
    if mooncake and not kinds <= {int}:
        raise ValueError("Mooncake hash_ids are whole numbers")
    if not kinds <= {int, str}:
        raise ValueError("hash_ids must be whole numbers or strings")
    if str in kinds:
        blocks = [_as_number(b) for b in blocks]
    expected = -(-input_tokens // block_tokens)
    if len(blocks) != expected:
        raise ValueError(
            f"{len(blocks)} hash_ids for {input_tokens} tokens; {block_tokens}-token blocks"
            f" need {expected}"
        )
    return Request(t_ms / 1000, input_tokens, output_tokens, tuple(blocks))

"""Request traces: Mooncake's JSONL (FAST'25 release) and kvtool's own JSONL (``engine gen``).

One request per line: ``timestamp`` (ms from the start, never decreasing), ``input_length`` and
``output_length`` (tokens), ``hash_ids`` (one id per block of the prompt; an id stands for the
block together with everything before it, so two requests share exactly their longest common
leading run of ids). Mooncake's blocks are 512 tokens. kvtool's format starts with a header
line ``{"kvtool_trace": 1, "block_tokens": N, ...}`` and may use whole numbers or strings as ids.

Ids stay whole numbers when every id of the trace is one (Mooncake's always are: a replay
looks them up about twice as fast as the same ids as text); a trace that mixes the two has all
of its ids as text, so ``1`` and ``"1"`` name one block either way.

Pure: text in, records out; a malformed line is a ``TraceError`` naming its line, or is counted
and skipped with ``skip_bad``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
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


def parse_trace(
    lines: Iterable[str], *, fmt: str = "auto", skip_bad: bool = False, source: str = "trace"
) -> Trace:
    """Read a trace. ``fmt`` ``auto`` takes kvtool's format when the first line is its header,
    else Mooncake's. Raises TraceError for a bad line (``skip_bad``: counts it and goes on), a
    timestamp that goes backwards, an unknown format or an empty trace."""
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
    block_tokens = MOONCAKE_BLOCK_TOKENS
    rows: Iterable[tuple[int, str]] = numbered
    if header is not None:
        block_tokens = int(header["block_tokens"])
        fmt = "jsonl"
    else:
        fmt = "mooncake"
        rows = _chain(first, numbered)
    requests: list[Request] = []
    skipped = 0
    texts = False  # some id is a string: all become strings
    last_t = 0.0
    for number, line in rows:
        try:
            request = _request(line, block_tokens, mooncake=fmt == "mooncake")
        except ValueError as exc:
            if skip_bad:
                skipped += 1
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
        requests.append(request)
        if not texts and request.blocks and type(request.blocks[-1]) is str:
            texts = True
    if not requests:
        raise TraceError(f"{source}: no request could be read", "check the --format")
    if texts:
        requests = [r._replace(blocks=tuple(map(str, r.blocks))) for r in requests]
    return Trace(requests, block_tokens, fmt, skipped, source)


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
_TEXTS = {str}


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
    ):
        kinds = set(map(type, blocks))
        if kinds <= _INTS or (not mooncake and kinds == _TEXTS):
            return Request(t_ms / 1000, input_tokens, output_tokens, tuple(blocks))
    return _checked_request(line, block_tokens, mooncake=mooncake)


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
    if len(kinds) > 1:  # mixed: text (the trace's other ids follow, parse_trace)
        blocks = [str(b) for b in blocks]
    expected = -(-input_tokens // block_tokens)
    if len(blocks) != expected:
        raise ValueError(
            f"{len(blocks)} hash_ids for {input_tokens} tokens; {block_tokens}-token blocks"
            f" need {expected}"
        )
    return Request(t_ms / 1000, input_tokens, output_tokens, tuple(blocks))

"""A request trace file into a ``Trace`` (``kvtool engine replay`` and ``sweep``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from kvtool.errors import InputError

if TYPE_CHECKING:
    from kvtool.replay.trace import StreamedTrace, Trace


def read_trace(path: Path, *, fmt: str = "auto", skip_bad: bool = False) -> Trace:
    """Parse the trace at ``path`` (``auto``, ``mooncake`` or ``jsonl``); a missing, binary or
    malformed file is one InputError naming it (and the line, for a bad line)."""
    from kvtool.replay.trace import parse_trace

    if not path.is_file():
        raise InputError(f"{path} is not a file", "pass a trace (JSONL, one request per line)")
    try:
        with path.open(encoding="utf-8") as f:
            return parse_trace(f, fmt=fmt, skip_bad=skip_bad, source=str(path))
    except UnicodeDecodeError:
        raise InputError(f"{path} is not text", "pass a JSONL trace") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def stream_trace(path: Path, *, fmt: str = "auto", skip_bad: bool = False) -> StreamedTrace:
    """The trace at ``path``, to be read as it is replayed (``replay.trace.TraceFile``): its
    header and format are checked now, its requests counted (a quick pass over the lines),
    and a bad line later stops the replay with the same InputError ``read_trace`` gives."""
    import contextlib
    from collections.abc import Iterator

    from kvtool.replay.trace import StreamedTrace, TraceFile, open_trace

    if not path.is_file():
        raise InputError(f"{path} is not a file", "pass a trace (JSONL, one request per line)")

    def reading(f: TextIO) -> Iterator[str]:
        """The file's lines; what goes wrong reading them is an InputError naming the file
        (and only that: an error of the replay's own is its own)."""
        try:
            yield from f
        except UnicodeDecodeError:
            raise InputError(f"{path} is not text", "pass a JSONL trace") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None

    @contextlib.contextmanager
    def lines() -> Iterator[Iterator[str]]:
        try:
            f = path.open(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        with f:
            yield reading(f)

    with lines() as first:
        opened = open_trace(first, fmt=fmt, source=str(path))
        count = sum(1 for _, _ in opened.rows)
    requests = TraceFile(lines, count=count, fmt=fmt, skip_bad=skip_bad, source=str(path))
    return StreamedTrace(requests, opened.block_tokens, opened.format, str(path))

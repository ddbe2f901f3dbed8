"""The Prometheus text exposition format (version 0.0.4), read into samples. Pure.

One sample per line ``name{label="value",...} value [timestamp]``; ``#`` lines are comments
(``# HELP`` and ``# TYPE`` among them). Label values escape ``\\``, ``"`` and newlines with a
backslash. Values are floats, ``NaN`` and ``+Inf``/``-Inf`` included. A line that is neither
is a ``ValueError`` naming its number, so a file that is not a scrape is refused whole.

Read in time linear in the text and memory within a small multiple of it, whatever the text
(an engine's ``/metrics`` is not trusted): every pattern is possessive, so none backtracks; at
most ``MAX_LINES`` lines; a sample kept is at most ``MAX_LINE`` characters with at most
``MAX_LABELS`` labels, and at most ``MAX_SAMPLES`` samples and ``MAX_LABEL_PAIRS`` labels are
kept. The whole text is checked by one pattern (in C), and only the samples kept are taken
apart in Python. A series (a name and its labels) given twice is kept once, its first value,
and counted in ``repeated``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import chain
from typing import NamedTuple

MAX_LINES = 1_000_000  # in one text (one vLLM engine core exports ~700 with its comments)
MAX_LINE = 64 * 1024  # characters of one sample kept (vLLM's cache_config_info: ~1,100)
MAX_LABELS = 128  # on one sample (vLLM's cache_config_info has 38)
MAX_SAMPLES = 200_000  # kept from one text, repeated series included
MAX_LABEL_PAIRS = 1_000_000  # labels over all samples kept

_SPACE = r"[ \t]"
_NAME_RE = r"[a-zA-Z_:][a-zA-Z0-9_:]*+"


def _label_re(group: str) -> str:
    """One label, ``name="value"`` (escapes in the value), blanks around; ``group`` opens its
    two groups: ``(`` to capture them, ``(?:`` not to."""
    name, value = r"[a-zA-Z_][a-zA-Z0-9_]*+", r'[^"\\\n]*+(?:\\.[^"\\\n]*+)*+'
    return rf'{_SPACE}*+{group}{name}){_SPACE}*+={_SPACE}*+"{group}{value})"{_SPACE}*+'


_LABELS_RE = rf"(?:{_label_re('(?:')}(?:,{_label_re('(?:')}){{0,{MAX_LABELS - 1}}}+,?+)?+"
_NUMBER_RE = (
    r"[+-]?+(?:(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+"
    r"|(?i:inf(?:inity)?+|nan))"
)
_STAMP_RE = r"-?+[0-9]++(?:\.[0-9]*+)?+"
_END = rf"{_SPACE}*+\r?+(?=\n|\Z)"
_SAMPLE_RE = (
    rf"{_SPACE}*+{_NAME_RE}(?:{_SPACE}*+\{{{_LABELS_RE}{_SPACE}*+\}}{_SPACE}*+|{_SPACE}++)"
    rf"{_NUMBER_RE}(?:{_SPACE}++{_STAMP_RE})?+{_END}"
)
# each line a sample, a comment or blank; nothing captures, so a match keeps no state a line
_LINE = rf"(?:{_SAMPLE_RE}|{_SPACE}*+#[^\n]*+|{_SPACE}*+\r?+)"
_WHOLE = re.compile(rf"(?:{_LINE}\n)*+(?:{_LINE})?+")
_LABEL = re.compile(_label_re("("))  # (a label _WHOLE passed has no blank before it)

_NAME = re.compile(rf"{_SPACE}*+({_NAME_RE}){_SPACE}*+")
_COMMA = re.compile(rf",{_SPACE}*+")
_CLOSE = re.compile(rf"{_SPACE}*+\}}{_SPACE}*+")
_NUMBER = re.compile(_NUMBER_RE)
_STAMP = re.compile(_STAMP_RE)
_ESCAPE = re.compile(r'\\[\\"n]')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class Sample(NamedTuple):
    """One line of a scrape: the metric's name, its labels, its value."""

    name: str
    labels: dict[str, str]
    value: float


class Exposition(NamedTuple):
    """A scrape's samples, each series once, and the samples of a series already given (by
    metric name, how many): Prometheus keeps one value a series a scrape."""

    samples: list[Sample]
    repeated: dict[str, int]


def parse(text: str) -> list[Sample]:
    """Every sample of a scrape, in order, each series once."""
    return exposition(text).samples


def exposition(text: str, *, keep: tuple[str, ...] | None = None) -> Exposition:
    """The samples of ``text`` whose names start with one of ``keep`` (None: all), every line
    checked; ValueError naming the first line that is not one of a scrape, or a limit passed."""
    lines = text.count("\n") + (not text.endswith("\n"))
    if lines > MAX_LINES:
        raise ValueError(f"{lines:,} lines, more than the {MAX_LINES:,} kvtool reads from one"
                         " scrape")  # fmt: skip
    whole = _WHOLE.match(text)
    checked = 0 if whole is None else whole.end()  # (it matches nothing at worst)
    if checked != len(text):
        start = text.rfind("\n", 0, checked) + 1
        end = text.find("\n", start)
        _explain(text, start, len(text) if end < 0 else end)
    samples: list[Sample] = []
    repeated: dict[str, int] = {}
    seen: set[tuple[str, ...]] = set()
    names: dict[str, str] = {}  # one string for each name and label name
    pairs = 0
    for count, (start, end) in enumerate(_lines(text, keep)):
        if count == MAX_SAMPLES:
            raise _wrong(text, start, start, f"is past the {MAX_SAMPLES:,} samples kvtool reads")
        sample = _sample(text, start, end, names)
        if sample is None:
            continue
        key = (sample.name, *chain.from_iterable(sorted(sample.labels.items())))
        if key in seen:
            repeated[sample.name] = repeated.get(sample.name, 0) + 1
            continue
        seen.add(key)
        pairs += len(sample.labels)
        if pairs > MAX_LABEL_PAIRS:
            raise _wrong(text, start, start, f"is past the {MAX_LABEL_PAIRS:,} labels kvtool reads")
        samples.append(sample)
    return Exposition(samples, repeated)


def _wrong(text: str, start: int, end: int, what: str) -> ValueError:
    """ValueError for the line at ``start``, with its first characters when ``end``."""
    said = f"line {text.count(chr(10), 0, start) + 1} {what}"
    return ValueError(f"{said}: {text[start : min(end, start + 60)]!r}" if end > start else said)


def _lines(text: str, keep: tuple[str, ...] | None) -> Iterator[tuple[int, int]]:
    """(start, end) of each line that may be a sample kept: all, or those whose name (after
    any blanks) starts with one of ``keep``."""
    if keep is None:
        pattern = re.compile(r"^[ \t]*+[^#\s]", re.M)
    else:
        pattern = re.compile(r"^[ \t]*+(?:" + "|".join(map(re.escape, keep)) + ")", re.M)
    for found in pattern.finditer(text):
        start = found.start()
        end = text.find("\n", start)
        yield start, len(text) if end < 0 else end


def _sample(text: str, start: int, end: int, names: dict[str, str]) -> Sample | None:
    """The sample on ``text[start:end]``, a line ``_WHOLE`` passed (None for a comment or a
    blank line); ValueError naming the line for a limit. ``names`` keeps one string for each
    name and label name."""
    if end - start > MAX_LINE:
        raise _wrong(
            text, start, end, f"is longer than {MAX_LINE // 1024} KiB, the most kvtool reads"
        )
    brace = text.find("{", start, end)  # (no name, value or timestamp holds a brace)
    if brace < 0:
        words = text[start:end].split()
        if not words or words[0].startswith("#"):
            return None
        return Sample(names.setdefault(words[0], words[0]), {}, float(words[1]))
    close = text.rfind("}", brace, end)
    labels: dict[str, str] = {}
    for key, value in _LABEL.findall(text, brace + 1, close):
        key = names.setdefault(key, key)
        if key in labels:
            raise _wrong(text, start, end, f"has the label {key} twice")
        labels[key] = value if "\\" not in value else _ESCAPE.sub(_unescape, value)
    name = text[start:brace].strip()
    return Sample(names.setdefault(name, name), labels, float(text[close + 1 : end].split()[0]))


def _unescape(escape: re.Match[str]) -> str:
    return _ESCAPES[escape[0]]


def _explain(text: str, start: int, end: int) -> None:
    """ValueError saying what is wrong with a line that is not a sample, part by part."""
    if end - start > MAX_LINE:
        raise _wrong(
            text, start, end, f"is longer than {MAX_LINE // 1024} KiB, the most kvtool reads"
        )
    head = _NAME.match(text, start, end)
    if head is None:
        raise _wrong(text, start, end, "is not a metric sample")
    at = head.end()
    if at < end and text[at] == "{":
        at += 1
        closed = _CLOSE.match(text, at, end)
        for _ in range(MAX_LABELS + 1):
            if closed is not None:
                break
            label = _LABEL.match(text, at, end)
            if label is None:
                raise _wrong(text, start, end, "has a malformed label")
            at = label.end()
            comma = _COMMA.match(text, at, end)
            closed = _CLOSE.match(text, at, end)
            if comma is None and closed is None:
                raise _wrong(text, start, end, "has a malformed label")
            if comma is not None:
                at = comma.end()
                closed = _CLOSE.match(text, at, end)
        else:
            raise _wrong(
                text, start, end, f"has more than {MAX_LABELS} labels, the most kvtool reads"
            )
        at = closed.end()
    words = text[at:end].split()
    if not 1 <= len(words) <= 2:
        raise _wrong(text, start, end, "has no value")
    if not _NUMBER.fullmatch(words[0]):  # (after the colon: a page that is no scrape is not shown)
        raise _wrong(text, start, start, f"has a value that is not a number: {words[0][:60]!r}")
    if len(words) == 2 and not _STAMP.fullmatch(words[1]):
        raise _wrong(text, start, start, f"has a timestamp that is not a number: {words[1][:60]!r}")
    raise _wrong(text, start, start, "is not a metric sample")  # (each part reads alone)

"""The Prometheus text exposition format (version 0.0.4), read into samples. Pure.

One sample per line ``name{label="value",...} value [timestamp]``; ``#`` lines are comments
(``# HELP`` and ``# TYPE`` among them). Label values escape ``\\``, ``"`` and newlines with a
backslash. Values are floats, ``NaN`` and ``+Inf``/``-Inf`` included. A line that is neither
is a ``ValueError`` naming its number, so a file that is not a scrape is refused whole.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|(?=\}))')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class Sample(NamedTuple):
    """One line of a scrape: the metric's name, its labels, its value."""

    name: str
    labels: dict[str, str]
    value: float


def _unescape(text: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m[0]], text)


def _value(text: str) -> float:
    word = text.strip()
    if word in ("+Inf", "Inf"):
        return math.inf
    if word == "-Inf":
        return -math.inf
    return float(word)  # "NaN" included


def parse(text: str) -> list[Sample]:
    """Every sample of a scrape, in order."""
    samples = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME.match(line)
        if match is None:
            raise ValueError(f"line {number} is not a metric sample: {raw[:60]!r}")
        name, rest = match[0], line[match.end() :]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            rest = rest[1:]
            while not rest.lstrip().startswith("}"):
                label = _LABEL.match(rest)
                if label is None:
                    raise ValueError(f"line {number} has a malformed label: {raw[:60]!r}")
                labels[label[1]] = _unescape(label[2])
                rest = rest[label.end() :]
            rest = rest.lstrip()[1:]
        parts = rest.split()
        if not 1 <= len(parts) <= 2:
            raise ValueError(f"line {number} has no value: {raw[:60]!r}")
        try:
            samples.append(Sample(name, labels, _value(parts[0])))
        except ValueError:
            raise ValueError(
                f"line {number} has a value that is not a number: {parts[0]!r}"
            ) from None
    return samples

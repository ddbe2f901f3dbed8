"""The pieces every command's output shares: a plain table, JSON, notes, units of time.

Hand-rolled rather than rich's Table: importing rich.console and rich.table costs about 20 ms,
a fifth of kvtool's whole start-up budget, and these tables need no styling.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kvtool.files import REPORT_SCHEMA_VERSION as SCHEMA_VERSION  # docs/json/; raised on a break
from kvtool.units import plural as plural  # re-exported: renderers say counts one way

QUIET = [False]  # --quiet: the answer only (set by app.reports_errors for the command run)


def note(text: str) -> None:
    """``kvtool: note: ...`` on stderr (not with --quiet)."""
    if not QUIET[0]:
        sys.stderr.write(f"kvtool: note: {printable(text)}\n")


_COLOURS = {"PASS": "32", "WARN": "33", "FAIL": "31;1", "SKIP": "2"}  # ANSI SGR codes


def coloured(status: str, shown: str | None = None) -> str:
    """``shown`` (default ``status``) in its status's colour: only on a terminal, never with
    NO_COLOR set (https://no-color.org) or TERM=dumb."""
    import os

    text = status if shown is None else shown
    code = _COLOURS.get(status)
    if (
        code is None
        or "NO_COLOR" in os.environ
        or os.environ.get("TERM") == "dumb"
        or not sys.stdout.isatty()
    ):
        return text
    return f"\033[{code}m{text}\033[0m"


def echo(text: str = "") -> None:
    """One line on stdout; a name that is not UTF-8 (a file name's stray byte, which Python
    carries as a lone surrogate) is shown with U+FFFD in its place rather than ending the run."""
    sys.stdout.write(printable(text) + "\n")


def printable(text: str) -> str:
    """``text`` with any lone surrogate (a byte that was not UTF-8) shown as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def envelope(command: str, data: Any) -> dict[str, Any]:
    """The one shape of every ``--json``: ``{"schema_version": 1, "command": "gc", ...}``, a
    list of records under ``results``, and every number JSON can carry: a float rounded to 12
    significant digits (no ``0.09999999999999999``), an infinite or undefined one as null
    (the schema says what null means there: unbounded, not measured)."""
    body = {"results": data} if isinstance(data, list | tuple) else dict(data)
    ready: dict[str, Any] = json_ready(
        {"schema_version": SCHEMA_VERSION, "command": command, **body}
    )
    return ready


def json_ready(value: Any) -> Any:
    """``value`` with every float made plain (see ``envelope``), recursively."""
    import math

    if isinstance(value, float):
        return float(f"{value:.12g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    return value


def print_json(data: Any, *, command: str) -> None:
    """``command``'s ``--json``: the envelope, pretty, on stdout, keys in the order built."""
    sys.stdout.write(json.dumps(envelope(command, data), indent=2, allow_nan=False) + "\n")


def print_notes(notes: list[str] | tuple[str, ...], *, blank_line: bool = True) -> None:
    """``note: ...`` lines, each once, after a blank line when there are any."""
    unique = [] if QUIET[0] else list(dict.fromkeys(notes))
    if unique and blank_line:
        echo()
    for note in unique:
        echo(f"note: {note}")


def seconds(value: float) -> str:
    """``300 us``, ``12.5 ms``, ``3.44 s``."""
    if value < 1e-3:
        return f"{value * 1e6:,.0f} us"
    if value < 1:
        return f"{value * 1e3:,.1f} ms"
    return f"{value:,.2f} s"


class Table:
    """A plain fixed-width text table; columns in ``left`` are left-aligned, others right."""

    def __init__(self, *columns: str, left: tuple[int, ...] = (0,)) -> None:
        self.columns = columns
        self.left = left
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        """Append one row; it must have one cell per column."""
        self.rows.append(cells)

    def render(self) -> str:
        """The header, a rule and the rows, two spaces between columns."""
        widths = [
            max(len(cell) for cell in column)
            for column in zip(self.columns, *self.rows, strict=True)
        ]

        def line(cells: tuple[str, ...]) -> str:
            parts = [
                cell.ljust(width) if index in self.left else cell.rjust(width)
                for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
            ]
            return "  ".join(parts).rstrip()

        rule = "  ".join("-" * width for width in widths)
        return "\n".join([line(self.columns), rule, *(line(row) for row in self.rows)])


class Progress:
    """``label: N of M what`` on stderr, rewritten in place at most every ``every_s``, only on
    a terminal (nothing when piped or with --json), cleared at the end. No thread: a sweep
    that forks its workers must find this process alone."""

    def __init__(self, enabled: bool, label: str, what: str, *, every_s: float = 0.2) -> None:
        self.label, self.what, self.every_s = label, what, every_s
        self.enabled = enabled and not QUIET[0] and sys.stderr.isatty()
        self._last = 0.0
        self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` so far."""
        if not self.enabled:
            return
        import time

        now = time.monotonic()
        if now - self._last < self.every_s and done < total:
            return
        self._last = now
        share = done / total if total else 1.0
        sys.stderr.write(f"\r\033[K{self.label}: {done:,} of {total:,} {self.what} ({share:.0%})")
        sys.stderr.flush()
        self._shown = True


class StatusLine:
    """What is running now, on stderr, only on a terminal (nothing when piped or --json)."""

    def __init__(self, enabled: bool, label: str = "kvtool") -> None:
        self.label = label
        self._status: Any = None
        if enabled and not QUIET[0] and sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status(f"{label}: starting")

    def __enter__(self) -> StatusLine:
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._status is not None:
            self._status.stop()

    @property
    def live(self) -> bool:
        """Shown on a terminal (so running figures are worth passing to ``update``)."""
        return self._status is not None

    def update(self, text: str) -> None:
        """Show ``text`` as the current step."""
        if self._status is not None:
            self._status.update(f"{self.label}: {text}")


class Counter(Progress):
    """``label: N files, X so far`` on stderr for a walk whose total is not known; shown and
    cleared as ``Progress`` is."""

    def __init__(self, enabled: bool, label: str, *, every_s: float = 0.2) -> None:
        super().__init__(enabled, label, "files", every_s=every_s)

    def __enter__(self) -> Counter:
        return self

    def __call__(self, files: int, size: int) -> None:
        self.step("", files, size)

    def step(self, name: str, files: int, size: int) -> None:
        """``files`` and ``size`` bytes so far in the step ``name`` ("reading", "removing")."""
        if not self.enabled:
            return
        import time

        from kvtool.units import format_bytes

        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        what = f"{name} " if name else ""
        sys.stderr.write(f"\r\033[K{self.label}: {what}{files:,} files, {format_bytes(size)}")
        sys.stderr.flush()
        self._shown = True

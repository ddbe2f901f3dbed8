"""The pieces every command's output shares: a plain table, JSON, notes, units of time.

Hand-rolled rather than rich's Table: importing rich.console and rich.table costs about 20 ms,
a fifth of kvtool's whole start-up budget, and these tables need no styling.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from kvtool.files import REPORT_SCHEMA_VERSION as SCHEMA_VERSION  # docs/json/; raised on a break
from kvtool.units import plural as plural  # re-exported: renderers say counts one way

QUIET = [False]  # --quiet: the answer only (set by app.reports_errors for the command run)


MIN_WIDTH = 40  # narrower than this, lines are laid out for 40 columns and may wrap


def width() -> int:
    """The columns output is laid out for: ``COLUMNS`` when set, else the terminal's, else 80
    (a pipe or a file: what a terminal shows it in by default)."""
    import shutil

    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


class Block(str):
    """Text already laid out to the width (a table): ``echo`` prints it as it is."""

    __slots__ = ()


# a line's label, under whose end its wrapped lines go: "note: ", "  fix: ", "  - ", "T3: "
_LABEL = (  # compiled on first use (re's cache): not at start-up
    r"(\s*)((?:kvtool: )?(?:note|warning|evidence|measured|fix|limit): "
    r"|[-*] |[A-Za-z0-9_.]{1,12}: )?"
)


def wrapped(text: str, *, hang: int | None = None, columns: int | None = None) -> list[str]:
    """``text`` (one line) as lines of at most ``columns`` (default ``width()``), broken at
    spaces, never inside a word (a word longer than a line stays whole); the lines after the
    first are indented by ``hang`` or, by default, to the end of the line's label (its indent
    and ``note: ``, ``fix: ``, ``- ``, ``T3: `` ...)."""
    import textwrap

    limit = columns or width()
    if len(text) <= limit:
        return [text]
    label = re.match(_LABEL, text)
    indent = hang if hang is not None else (label.end() if label else 0)
    if indent > limit // 2:
        indent = len(label.group(1)) + 4 if label else 4
    lead = len(text) - len(text.lstrip(" "))
    lines = textwrap.wrap(
        text[lead:],
        width=limit,
        initial_indent=" " * lead,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
    )
    return lines or [text]


def note(text: str) -> None:
    """``kvtool: note: ...`` on stderr (not with --quiet), wrapped at words to the width."""
    if not QUIET[0]:
        lines = wrapped(f"kvtool: note: {printable(text)}", hang=4)
        sys.stderr.write("\n".join(lines) + "\n")


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


def status_lines(
    status: str, text: str, *, indent: str = "  ", hang: int | None = None
) -> list[str]:
    """``  PASS  text`` laid out to the width (wrapped under ``text``'s start, or at ``hang``),
    then the status coloured: colour codes take no column on a terminal, so they are added
    once the line is laid out."""
    head = f"{indent}{status:<4}  "
    first, *more = wrapped(head + text, hang=len(head) if hang is None else hang)
    start = len(indent)
    return [
        Block(first[:start] + coloured(status, first[start : start + 4]) + first[start + 4 :]),
        *(Block(line) for line in more),
    ]


def echo(text: str = "", *, hang: int | None = None) -> None:
    """A line on stdout, wrapped at words to the width (``wrapped``; a ``Block`` as it is); a
    name that is not UTF-8 (a file name's stray byte, which Python carries as a lone
    surrogate) is shown with U+FFFD in its place rather than ending the run."""
    shown = printable(text)
    if isinstance(text, Block) or len(shown) <= MIN_WIDTH:
        sys.stdout.write(shown + "\n")
        return
    columns = width()
    lines = [
        part for line in shown.split("\n") for part in wrapped(line, hang=hang, columns=columns)
    ]
    sys.stdout.write("\n".join(lines) + "\n")


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
    import json  # here, not at the top: kvtool size without --json never loads it

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
    """A plain fixed-width text table; columns in ``left`` are left-aligned, others right.

    It fits the width (``width()``): when its rows are wider, the columns with room to give
    fold their cells onto more lines, at spaces (a number stays with its unit: ``19.4 TB
    (17.6 TiB)`` folds only before its parenthesis); when even that is too wide, the columns
    are split into tables that each repeat the first column."""

    def __init__(
        self, *columns: str, left: tuple[int, ...] = (0,), statuses: tuple[int, ...] = ()
    ) -> None:
        self.columns = columns
        self.left = left
        self.statuses = statuses  # columns of PASS/WARN/FAIL/SKIP: coloured on a terminal
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        """Append one row; it must have one cell per column."""
        self.rows.append(cells)

    def render(self, columns: int | None = None) -> Block:
        """The header, a rule and the rows, two spaces between columns, within ``columns``
        (default ``width()``)."""
        limit = columns or width()
        natural = [
            max(len(cell) for cell in column)
            for column in zip(self.columns, *self.rows, strict=True)
        ]
        least = [
            max(max(len(u) for u in _units(cell)) for cell in column)
            for column in zip(self.columns, *self.rows, strict=True)
        ]
        if sum(least) + 2 * (len(least) - 1) > limit and len(self.columns) > 2:
            return self._split(least, limit)
        widths = list(natural)
        while sum(widths) + 2 * (len(widths) - 1) > limit:
            room = [w - m for w, m in zip(widths, least, strict=True)]
            # the widest column with room gives a column; the first (the row's name) last
            widest = max(range(len(widths)), key=lambda i: (room[i] > 0, i > 0, widths[i]))
            if room[widest] <= 0:
                break
            widths[widest] -= 1
        rule = "  ".join("-" * w for w in widths)
        lines = [*self._lines(self.columns, widths, header=True), rule]
        for row in self.rows:
            lines += self._lines(row, widths)
        return Block("\n".join(lines))

    def _lines(self, cells: tuple[str, ...], widths: list[int], header: bool = False) -> list[str]:
        """One row as the lines its folded cells take (a status coloured once laid out)."""
        folded = [_fold(cell, w) for cell, w in zip(cells, widths, strict=True)]
        height = max(len(parts) for parts in folded)
        out = []
        for n in range(height):
            parts = [
                (f[n] if n < len(f) else "").ljust(w) if i in self.left
                else (f[n] if n < len(f) else "").rjust(w)
                for i, (f, w) in enumerate(zip(folded, widths, strict=True))
            ]  # fmt: skip
            if not header:  # the word coloured, its padding not
                parts = [part.replace(word, coloured(word), 1)
                         if i in self.statuses and (word := part.strip()) else part
                         for i, part in enumerate(parts)]  # fmt: skip
            out.append("  ".join(parts).rstrip())
        return out

    def _split(self, least: list[int], limit: int) -> Block:
        """The table as several, each the first column and as many others as fit."""
        groups: list[list[int]] = []
        for index in range(1, len(self.columns)):
            used = least[0] + sum(least[i] + 2 for i in groups[-1]) if groups else limit + 1
            if used + 2 + least[index] > limit:
                groups.append([index])
            else:
                groups[-1].append(index)
        parts = []
        for group in groups:
            chosen = (0, *group)
            kept = dict(enumerate(chosen))
            part = Table(
                *(self.columns[i] for i in chosen),
                left=tuple(n for n, i in kept.items() if i in self.left),
                statuses=tuple(n for n, i in kept.items() if i in self.statuses),
            )
            for row in self.rows:
                part.add_row(*(row[i] for i in chosen))
            parts.append(part.render(limit))
        return Block("\n\n".join(parts))


_NUMBER = r"\(?[-+~]?[\d,.]+[%x]?"  # compiled on first use


def _units(cell: str) -> list[str]:
    """The pieces a cell may fold between: its words, a number kept with the unit after it
    (``19.4 TB`` and ``(17.6 TiB)``, ``452,037 tokens``), and the parts of a ``+`` list
    (``full+`` and ``gated_deltanet``)."""
    units: list[str] = []
    for word in cell.split(" "):
        if units and re.fullmatch(_NUMBER, units[-1]):
            units[-1] += " " + word
        else:
            units += re.findall(r"[^+]*\+|[^+]+", word) or [word]
    return units


def _fold(cell: str, columns: int) -> list[str]:
    """``cell`` as lines of at most ``columns`` (a piece longer than that stays whole)."""
    if len(cell) <= columns:
        return [cell]
    lines: list[str] = []
    pieces = _units(cell)
    for index, unit in enumerate(pieces):
        joint = "" if index and pieces[index - 1].endswith("+") else " "  # "full+" "mamba2"
        if lines and len(lines[-1]) + len(joint) + len(unit) <= columns:
            lines[-1] += joint + unit
        else:
            lines.append(unit)
    return lines


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

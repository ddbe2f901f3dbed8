"""``--help`` that reads at any width: paragraphs wrap at words, examples stay copyable,
option names stay whole.

typer hands a docstring's paragraphs to rich with their line breaks, and rich wraps each line
again at the terminal's width: at 80 columns a sentence broke in the middle ("failed (a GPU" /
"error: ..."), an example broke mid-command ("... # " / "on FSx"), and the options table
shortened a long name to ``--max-num-batched-toke…``. Here, at the width rich will use:

* a paragraph of prose is one line, which rich wraps at words;
* an example wider than the line is cut at spaces into shell continuation lines (`` \\``, the
  next line indented), never inside a quoted word, its ``# comment`` on the last line or,
  when it does not fit, on a line of its own before the command: pasted, it runs as written;
* in the options and commands tables only the help column wraps: names and metavars are whole.

A closed pipe while printing help (``kvtool plan --help | head``) ends as any output does
(exit 141, silently; ``output.output_failed``).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from typer.core import TyperCommand, TyperGroup

EXAMPLE_INDENT = "    "  # a continuation line's indent beyond the example's own
# a shell word, quotes kept whole (compiled by re on first use: every command imports this)
_WORD = r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+"""


def reflow(text: str, width: int) -> str:
    """``text`` (a docstring) with each prose paragraph on one line and each example fitted
    to ``width`` columns (see the module docstring). Indented blocks other than examples
    keep their lines."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if lines and all(line.startswith(" ") for line in lines):
            if lines[0].strip().startswith("kvtool "):
                out.append(_fit_example(lines, width))
            else:
                out.append(paragraph)
        elif paragraph.startswith("\b"):
            out.append(paragraph)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return _kept_indent("\n\n".join(out))


def _kept_indent(text: str) -> str:
    """``text`` with its indents surviving typer, which dedents what follows the first
    paragraph by the indent all of its lines but the first share (``inspect.cleandoc``): where
    every one of them is indented (``Examples:``, then only examples), the first indented line
    starts with an empty rich markup pair, unindented to cleandoc and nothing once rendered."""
    first, _, rest = text.partition("\n\n")
    lines = rest.splitlines()
    body = [index for index, line in enumerate(lines) if index and line.strip()]
    if not body or not all(lines[index].startswith(" ") for index in body):
        return text
    lines[body[0]] = "[b][/b]" + lines[body[0]]
    return first + "\n\n" + "\n".join(lines)


def _fit_example(lines: list[str], width: int) -> str:
    """One example (its ``\\`` continuations joined) as lines of at most ``width`` columns,
    where its words allow."""
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    joined = " ".join(line.strip().removesuffix("\\").strip() for line in lines)
    command, marker, comment = joined.partition("  #")
    command = command.strip()
    comment = f"# {comment.strip()}" if marker else ""
    whole = indent + command + (f"  {comment}" if comment else "")
    if len(whole) <= width:
        return whole
    words: list[str] = []  # the units a line may end after
    for word in re.findall(_WORD, command):
        last = words[-1].split() if words else [""]
        if last[-1] in (">", ">>", "<", "|") or (
            len(last) == 1 and last[0].startswith("-") and not word.startswith(("-", ">"))
        ):  # an option stays with its value, a redirection with its file: "--ctx 32k"
            words[-1] += f" {word}"
        else:
            words.append(word)
    wrapped, line = [], indent
    for word in words:
        candidate = word if line.strip() == "" else f"{line} {word}"
        if line.strip() and len(candidate) + 2 > width:  # room for " \\"
            wrapped.append(line + " \\")
            line = f"{indent}{EXAMPLE_INDENT}{word}"
        else:
            line = candidate if line.strip() else indent + word
    if comment and len(f"{line}  {comment}") <= width:
        wrapped.append(f"{line}  {comment}")
    else:
        wrapped.append(line)
        if comment:
            wrapped.insert(0, indent + comment)
    return "\n".join(wrapped)


class _Fitted:
    """What kvtool's commands and groups add to typer's: help fitted to the width rich uses."""

    help: str | None

    def format_help(self, ctx: Any, formatter: Any) -> None:
        import errno

        import typer
        from rich.console import Console
        from rich.table import Table
        from typer import rich_utils

        class WholeNames(Table):  # the options and commands tables: only the help column wraps
            def __rich_console__(self, console: Any, options: Any) -> Any:
                for column in self.columns[:-1]:
                    column.no_wrap = True
                yield from super().__rich_console__(console, options)

        class PipeError(Console):  # a closed pipe: an OSError, as any output's (rich exits 1)
            def on_broken_pipe(self) -> None:
                raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        width = Console(width=getattr(rich_utils, "MAX_WIDTH", None)).width
        original = self.help
        kept = {name: getattr(rich_utils, name) for name in ("Table", "Console")}
        self.help = reflow(original or "", width - 2)  # rich pads the help text by 1 each side
        for name, replaced in (("Table", WholeNames), ("Console", PipeError)):
            setattr(rich_utils, name, replaced)  # (neither is in rich_utils' exports)
        try:
            super().format_help(ctx, formatter)  # type: ignore[misc]
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            from kvtool.cli.output import output_failed

            raise typer.Exit(output_failed(exc)) from None
        finally:
            self.help = original
            for name, value in kept.items():
                setattr(rich_utils, name, value)


class FittedCommand(_Fitted, TyperCommand):
    """A kvtool command (``cls=`` for typer)."""


class FittedGroup(_Fitted, TyperGroup):
    """``kvtool`` and ``kvtool engine`` (``cls=`` for typer)."""

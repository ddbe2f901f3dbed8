"""``--help`` at 80 columns (``cli/helptext.py``): every line fits, option names stay whole,
prose breaks only where the next word would not fit, examples fit as continuation lines."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.cli.helptext import reflow

ROOT = get_command(app)


def _commands() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [()]
    for name, command in ROOT.commands.items():  # type: ignore[attr-defined]
        found.append((name,))
        found += [(name, sub) for sub in getattr(command, "commands", {})]
    return found


def _command(names: tuple[str, ...]) -> Any:
    command: Any = ROOT
    for name in names:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("names", _commands(), ids=lambda names: " ".join(names) or "kvtool")
def test_help_at_80_columns_fits_keeps_names_whole_and_breaks_prose_at_words(
    names: tuple[str, ...],
) -> None:
    """At 80 columns ``--max-num-batched-toke…`` lost its end and a docstring's hard line
    breaks survived rich's re-wrapping (issues 48, 54: "failed (a GPU" / "error: ...")."""
    width = 80
    done = CliRunner().invoke(app, [*names, "--help"], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert done.exit_code == 0, done.stdout
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in done.stdout
    words = set(done.stdout.replace("│", " ").replace(",", " ").split())
    for param in _command(names).params:
        if param.param_type_name == "option" and not getattr(param, "hidden", False):
            for option in (*param.opts, *param.secondary_opts):
                assert option in words, option  # whole, never "--max-num-batched-toke…"
    body = done.stdout.partition("╭")[0].splitlines()
    for line, below in itertools.pairwise(body):
        prose = line.startswith(" ") and not line.startswith("  ") and line.strip()
        if prose and below.startswith(" ") and not below.startswith("  ") and below.strip():
            # rich pads the text by a column each side: the line broke only if the next word
            # would not have fitted
            text, word = line[1:].rstrip(), below.split()[0]
            assert len(text) + 1 + len(word) > width - 2, (line, below)


def test_every_option_name_is_whole_in_the_table() -> None:
    """The longest option kvtool has, in the command that has it."""
    done = CliRunner().invoke(app, ["size", "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert "--max-num-batched-tokens " in done.stdout


def test_reflow_joins_prose_and_cuts_long_examples_into_continuations() -> None:
    doc = """Summary line.

    A paragraph written with hard breaks
    in the middle of a sentence.

    Examples:

      kvtool bench --tier t3 --t3-dir /fsx/kvcache --hosts node1,node2 --json > t3.json  # on FSx

      kvtool size deepseek-r1 --ctx 200k
    """
    text = reflow(doc, 60)
    assert "A paragraph written with hard breaks in the middle of a sentence." in text
    assert "  kvtool size deepseek-r1 --ctx 200k" in text  # it fits: left alone
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "kvtool bench" in line)
    cut = lines[start : start + 2]
    assert all(len(line) <= 60 for line in cut)
    assert cut[0].endswith(" \\")
    assert cut[1].startswith("      --hosts node1,node2")  # an option with its value
    assert cut[1].endswith("> t3.json  # on FSx")  # a redirection with its file
    joined = cut[0].removesuffix("\\").strip() + " " + cut[1].strip()
    assert joined == (
        "kvtool bench --tier t3 --t3-dir /fsx/kvcache --hosts node1,node2 --json > t3.json"
        "  # on FSx"
    )


def test_help_into_a_closed_pipe_is_141_silently() -> None:
    """``kvtool plan --help | head`` exited 1, as a FAIL does (issue 54, item 12)."""
    import subprocess
    import sys

    run = subprocess.Popen([sys.executable, "-m", "kvtool", "plan", "--help"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert run.stdout is not None
    assert run.stderr is not None
    run.stdout.close()
    assert run.wait(60) == 141
    assert run.stderr.read() == b""

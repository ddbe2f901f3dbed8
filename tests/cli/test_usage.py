"""Usage mistakes said with their fix (``cli/usage.py``), through ``python -m kvtool`` as a
user runs it: one rule names the inputs (a command's argument is what it answers about; the
model is otherwise ``--model``; ``-n`` is always ``--sessions``)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest


def kvtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvtool", *args], capture_output=True,
                          text=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("size", "--model", "deepseek-r1", "--ctx", "200k"),
         "no option --model: the model is size's argument: kvtool size deepseek-r1 --ctx 200k"),
        (("plan", "-m", "deepseek-r1", "--hardware", "p5en"),
         "no option -m: the model is plan's argument: kvtool plan deepseek-r1 --hardware p5en"),
        (("size", "--model=deepseek-r1"),
         "no option --model: the model is size's argument: kvtool size deepseek-r1"),
        (("bench", "deepseek-r1", "--tier", "t3"),
         "deepseek-r1 is a model: bench takes it as --model: kvtool bench --model deepseek-r1"
         " --tier t3"),
        (("engine", "smoke", "llama-3.1-8b"),
         "llama-3.1-8b is a model: engine smoke takes it as --model: kvtool engine smoke"
         " --model llama-3.1-8b"),
        (("size", "deepseek-r1", "--sesions", "4"),
         "no option --sesions: did you mean --sessions?"),
        (("size", "deepseek-r1", "--requests", "4"), "no option --requests"),
    ],
)  # fmt: skip
def test_a_usage_mistake_says_what_was_meant(args: tuple[str, ...], line: str) -> None:
    """``size --model X`` said "Possible options: --help, --nodes" (issue 54)."""
    done = kvtool(*args)
    assert done.returncode == 2
    where = " ".join(args[:2] if args[0] == "engine" else args[:1])
    assert done.stderr == f"kvtool: error: {line} (see kvtool {where} --help)\n"
    assert done.stdout == ""


def _short_options(command: Any) -> dict[str, str]:
    """A command's shown one-letter options and the long option each is."""
    return {
        o: p.opts[0]
        for p in command.params
        if not getattr(p, "hidden", False)
        for o in p.opts
        if len(o) == 2
    }


def test_n_is_sessions_everywhere_and_gens_old_n_still_works_with_a_note() -> None:
    """``-n`` was --sessions in size, plan, advise and smoke but --requests in engine gen."""
    from typer.main import get_command

    from kvtool.cli.app import app

    meanings = set()
    for name, command in get_command(app).commands.items():  # type: ignore[attr-defined]
        for sub in getattr(command, "commands", {name: command}).values():
            meanings.add(_short_options(sub).get("-n"))
    assert meanings == {None, "--sessions"}
    old = kvtool("engine", "gen", "-n", "3")
    assert old.returncode == 0
    assert old.stdout == kvtool("engine", "gen", "--requests", "3").stdout
    assert (
        old.stderr == "kvtool: note: -n is now --requests; the old name goes in the next release\n"
    )

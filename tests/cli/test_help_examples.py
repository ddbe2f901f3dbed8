"""Every example in every command's ``--help`` runs as written from a fresh clone: each is run
in a copy of the project's ``examples/`` folder (the files they name are shipped there). An
example that needs what only a real node has says so with a comment (``# on FSx``, ``# an
engine's /metrics``, ``# your Prometheus``): those are listed, and only checked to parse."""

from __future__ import annotations

import itertools
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kvtool.cli.app import app

ROOT = Path(__file__).parents[2]
ENV = {"NO_COLOR": "1", "COLUMNS": "100", "HF_HUB_OFFLINE": "1"}


def _examples() -> list[tuple[str, str, bool]]:
    """(command path, example, runs here) for every example line in every help text."""
    out = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group (typer carries its own click)
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
            return
        text = command.help or ""
        if "Examples:" not in text:
            return
        lines = text.split("Examples:", 1)[1].splitlines()
        joined: list[str] = []
        for line in (raw.strip() for raw in lines):
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1].rstrip() + " " + line
            elif line.startswith("kvtool "):
                joined.append(line)
        for example in joined:
            command_line, _, comment = example.partition("  #")
            out.append((" ".join(path), command_line.strip(), not comment))

    walk(get_command(app), ())
    return out


EXAMPLES = _examples()
# the examples that show a check finding problems: exit 1 (every other one runs to exit 0)
FAILING = {
    "kvtool check examples/check/plan-fail.yaml --junit kvtool-check.xml",
    "kvtool check examples/check/plan-pass.yaml --strict",  # its one WARN fails the gate
    "kvtool doctor --merge examples/check/doctor-node-a.json examples/check/doctor-node-b.json",
}


def test_every_command_with_options_shows_examples_and_some_need_a_node() -> None:
    assert len(EXAMPLES) >= 40
    assert sum(runs for _, _, runs in EXAMPLES) >= 28  # most run anywhere
    needs = [e for _, e, runs in EXAMPLES if not runs]
    assert all(("/fsx" in e or "s3://" in e or "http" in e or "hosts.txt" in e) for e in needs)


@pytest.mark.parametrize(("command", "example", "runs"), EXAMPLES,
                         ids=[f"{c}:{i}" for i, (c, _, _) in enumerate(EXAMPLES)])  # fmt: skip
def test_each_example_runs_as_written(
    command: str, example: str, runs: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = shlex.split(example.split(" > ")[0])[1:]  # (a shell redirection is the shell's)
    if not runs:  # needs a node: it must at least name real options
        pytest.skip(f"needs what only a real node has: {example}")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    if "--plot" in args:
        pytest.importorskip("matplotlib")
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        example, result.exception
    )  # fmt: skip
    assert "Traceback" not in result.stdout + result.stderr
    expected = 1 if example in FAILING else 0
    assert result.exit_code == expected, (example, result.stdout[-2000:], result.stderr[-2000:])


def test_what_the_examples_write_is_ignored_by_git() -> None:
    """The examples left big.jsonl, sweep.png and kvtool-check.xml in the clone (issue 54):
    every file an example writes (-o, --plot, --junit, --log, a shell's >) is in .gitignore."""
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    written = set()
    for _, example, _ in EXAMPLES:
        words = shlex.split(example)
        for flag, value in itertools.pairwise(words):
            if flag in ("-o", "--output", "--plot", "--junit", "--log", ">"):
                written.add(value)
    assert {"big.jsonl", "sweep.png", "kvtool-check.xml"} <= written
    for name in sorted(written):
        assert f"/{name}" in ignored, name

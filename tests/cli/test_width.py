"""Output fits the terminal (``COLUMNS``): tables fold or split their columns, notes and prose
wrap at words (never inside one), at 80 columns as at 100. Machine output is exempt: ``--json``,
``--emit``'s configuration, ``engine gen``'s trace, and ``kvtool: error:`` (one line, to grep)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app
from kvtool.cli.render.text import Table, wrapped

ROOT = Path(__file__).parents[2]
BLOCK = re.compile(r"```console\n\$ (kvtool [^\n]*)\n")
PAGES = [ROOT / "README.md", ROOT / "docs" / "commands.md"]
COMMANDS = sorted({m[1] for page in PAGES for m in BLOCK.finditer(page.read_text())})


def too_wide(args: list[str], stdout: str, stderr: str, columns: int) -> list[str]:
    """The lines wider than ``columns`` that are not exempt (see the module docstring), and
    not one word too long for any line (a path, a list without spaces)."""
    machine = "--json" in args or "--emit" in args or args[:2] == ["engine", "gen"]
    lines = stderr.splitlines() + ([] if machine else stdout.splitlines())
    return [
        line for line in lines
        if len(line) > columns and not line.startswith("kvtool: error:")
        and max(len(word) for word in line.split()) <= columns // 2
    ]  # fmt: skip


def run(command: str, columns: int, folder: Path) -> tuple[list[str], str, str]:
    args = shlex.split(command)[1:]
    env = {"NO_COLOR": "1", "COLUMNS": str(columns), "HF_HUB_OFFLINE": "1"}
    done = CliRunner().invoke(app, args, env=env)
    return args, done.stdout, done.stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the pages' examples read, for those that write beside it."""
    here = tmp_path_factory.mktemp("width")
    shutil.copytree(ROOT / "examples", here / "examples")
    shutil.copytree(ROOT / "tests" / "fixtures" / "traces", here / "tests" / "fixtures" / "traces")
    shutil.copytree(
        ROOT / "tests" / "fixtures" / "metrics", here / "tests" / "fixtures" / "metrics"
    )
    return here


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_page_example_fits_the_terminal(
    command: str, columns: int, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """plan's lines reached 279 characters, size a,b's 185, check's 129; at 80 columns a
    terminal broke rows mid-word ("ses" / "sions") and notes inside words (issue 54)."""
    monkeypatch.chdir(folder)
    args, stdout, stderr = run(command, columns, folder)
    assert too_wide(args, stdout, stderr, columns) == []


def test_a_note_wraps_at_words_under_its_label() -> None:
    text = "note: " + " ".join(f"word{i}" for i in range(40))
    lines = wrapped(text, columns=50)
    assert all(len(line) <= 50 for line in lines)
    assert all(line.startswith("      word") for line in lines[1:])  # under "note: "
    assert " ".join(" ".join(lines).split()) == text  # no word cut, none lost
    long = "note: see " + "x" * 70
    assert wrapped(long, columns=50) == ["note: see", "      " + "x" * 70]  # a word stays whole


def test_a_table_folds_cells_keeping_figures_with_their_units_then_splits() -> None:
    table = Table("tier", "medium", "capacity", "used", left=(0, 1))
    table.add_row("T1", "HBM (1 x 144 x AWS Trainium3)", "19.4 TB (17.6 TiB)", "10.3 TB (9.39 TiB)")
    wide = table.render(200).splitlines()
    assert len(wide) == 3  # fits: one line a row, as before
    narrow = table.render(50).splitlines()
    assert max(len(line) for line in narrow) <= 50
    assert any("19.4 TB" in line for line in narrow)  # a figure stays with its unit
    assert not any(line.rstrip().endswith(("19.4", "10.3")) for line in narrow)
    many = Table("name", *(f"column {i}" for i in range(12)))
    many.add_row("row", *(f"{i * 1000:,} tokens" for i in range(12)))
    split = many.render(60)
    assert max(len(line) for line in split.splitlines()) <= 60
    assert split.count("name") >= 2  # each part repeats the first column

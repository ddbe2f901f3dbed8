"""docs/planning.md's "The article's decisions, case by case": every row's command is run as a
user types it, and the text in its last column must be in what it prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

DOC = (Path(__file__).parents[3] / "docs" / "planning.md").read_text()
TABLE = DOC.split("<!-- article-cases -->")[1].split("<!-- /article-cases -->")[0]
ROWS = [
    re.findall(r"`([^`]+)`", line)
    for line in TABLE.strip().splitlines()[2:]
]  # fmt: skip


def test_the_table_has_the_cases_the_issue_names() -> None:
    assert len(ROWS) == 6
    assert all(len(row) == 2 and row[0].startswith("kvtool ") for row in ROWS)


@pytest.mark.parametrize(("command", "printed"), ROWS, ids=[f"row{i}" for i in range(len(ROWS))])
def test_each_case_prints_the_articles_decision(command: str, printed: str) -> None:
    env = {"NO_COLOR": "1", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    result = CliRunner().invoke(app, shlex.split(command)[1:], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert printed in result.stdout, (command, result.stdout[-3000:])

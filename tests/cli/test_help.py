"""Every command has help text with an example, and the README shows every command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.cli.app import app
from tests.conftest import CliResult

COMMANDS = sorted(
    [command.name or "" for command in app.registered_commands]
    + [group.name or "" for group in app.registered_groups]
)
README = (Path(__file__).parents[2] / "README.md").read_text()


def test_root_help_lists_commands(kvtool: Callable[..., CliResult]) -> None:
    result = kvtool("--help")
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help_has_an_example(kvtool: Callable[..., CliResult], name: str) -> None:
    result = kvtool(name, "--help")
    assert result.exit_code == 0
    assert f"kvtool {name}" in result.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_readme_shows_each_command(name: str) -> None:
    assert f"$ kvtool {name}" in README

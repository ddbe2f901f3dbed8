"""Shared fixtures: the CLI runner with a pinned terminal, and markers for optional extras."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from kvtool.cli.app import app

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_hf = pytest.mark.skip(reason="transformers is not installed (pip install 'kvtool[hf]')")
    for item in items:
        if "hf" in item.keywords and not HAS_TRANSFORMERS:
            item.add_marker(skip_hf)


@dataclass(frozen=True)
class CliResult:
    """What one kvtool invocation printed and returned."""

    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def kvtool() -> Callable[..., CliResult]:
    """Run ``kvtool ARGS`` in-process with NO_COLOR and a 100-column terminal."""
    runner = CliRunner()

    def run(*args: str) -> CliResult:
        result = runner.invoke(
            app,
            list(args),
            env={"NO_COLOR": "1", "COLUMNS": "100", "HF_HUB_OFFLINE": "1"},
            catch_exceptions=False,
        )
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-readme",
        action="store_true",
        help="rewrite the outputs of README.md's $ kvtool examples instead of checking them",
    )

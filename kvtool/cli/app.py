"""The ``kvtool`` command: global wiring, and the mapping of errors to exit codes.

Exit codes: 0 success; 1 a check or benchmark found a failure; 2 bad input (an unknown model,
a malformed config, an option value that makes no sense). Library errors arrive as
``KvtoolError`` and leave as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from kvtool.cli import advise as advise_cmd
from kvtool.cli import hardware as hardware_cmd
from kvtool.cli import models as models_cmd
from kvtool.cli import size as size_cmd
from kvtool.errors import KvtoolError

EXIT_INPUT_ERROR = 2

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(command: F) -> F:
    """Wrap a command so KvtoolError prints one line on stderr and exits with status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KvtoolError as exc:
            message = f"kvtool: error: {exc.message}"
            if exc.hint:
                message += f" ({exc.hint})"
            print(message, file=sys.stderr)
            raise typer.Exit(EXIT_INPUT_ERROR) from None

    return wrapper  # type: ignore[return-value]


app = typer.Typer(
    name="kvtool",
    help="Size, place, benchmark and check KV-cache tiers for LLM serving.\n\n"
    "Example: kvtool size deepseek-r1 --ctx 200k --sessions 100",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("size", no_args_is_help=True)(reports_errors(size_cmd.size))
app.command("models")(reports_errors(models_cmd.models))
app.command("hardware")(reports_errors(hardware_cmd.hardware))
app.command("advise", no_args_is_help=True)(reports_errors(advise_cmd.advise))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="kvtool")

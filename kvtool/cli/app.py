"""The ``kvtool`` command: global wiring, and the one mapping of outcomes to exit codes.

Commands return nothing (success) or a status from ``kvtool.cli.status``; library errors
arrive as ``KvtoolError`` and leave as one line on stderr with status 2, never a traceback.
"""

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from kvtool.cli import advise as advise_cmd
from kvtool.cli import check as check_cmd
from kvtool.cli import doctor as doctor_cmd
from kvtool.cli import hardware as hardware_cmd
from kvtool.cli import models as models_cmd
from kvtool.cli import size as size_cmd
from kvtool.cli import status
from kvtool.errors import KvtoolError

F = TypeVar("F", bound=Callable[..., Any])


def error_line(exc: KvtoolError) -> str:
    """``kvtool: error: <what is wrong> (<how to fix it>)``."""
    return f"kvtool: error: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")


def reports_errors(command: F) -> F:
    """Wrap a command: its returned status becomes the exit code; KvtoolError prints one line
    on stderr and exits 2; Ctrl-C exits 130 without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            outcome = command(*args, **kwargs)
        except KvtoolError as exc:
            print(error_line(exc), file=sys.stderr)
            raise typer.Exit(status.USAGE) from None
        except KeyboardInterrupt:
            print("kvtool: interrupted", file=sys.stderr)
            raise typer.Exit(status.INTERRUPTED) from None
        if outcome:
            raise typer.Exit(int(outcome))

    return wrapper  # type: ignore[return-value]


app = typer.Typer(
    name="kvtool",
    help="Size the KV cache of an LLM deployment, plan where it lives (GPU HBM, host DRAM,"
    " FSx for Lustre, S3), emit the serving engine's configuration, and verify that a node and"
    " its shared mount are ready for it.\n\n"
    "Example: kvtool size deepseek-r1 --ctx 200k --sessions 100",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from kvtool import __version__

        print(f"kvtool {__version__}")
        raise typer.Exit(status.OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print kvtool's version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Size the KV cache of an LLM deployment, plan where it lives (GPU HBM, host DRAM, FSx for
    Lustre, S3), emit the serving engine's configuration, and verify that a node and its shared
    mount are ready for it.

    Example: kvtool size deepseek-r1 --ctx 200k --sessions 100
    """


app.command("size", no_args_is_help=True)(reports_errors(size_cmd.size))
app.command("models")(reports_errors(models_cmd.models))
app.command("hardware")(reports_errors(hardware_cmd.hardware))
app.command("advise", no_args_is_help=True)(reports_errors(advise_cmd.advise))
app.command("doctor", no_args_is_help=True)(reports_errors(doctor_cmd.doctor))
app.command("check", no_args_is_help=True)(reports_errors(check_cmd.check))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="kvtool")

"""The ``kvtool`` command: global wiring, and the one mapping of outcomes to exit codes.

Commands return nothing (success) or a status from ``kvtool.cli.status``; library errors
arrive as ``KvtoolError`` (or an OSError only a path as typed can cause) and leave as one
line on stderr with status 2, never a traceback.
"""

import errno
import functools
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Annotated, Any, TypeVar

import typer

from kvtool.cli import status
from kvtool.cli.output import OUTPUT_ERRNOS, is_output_error, output_failed
from kvtool.errors import InputError, KvtoolError

# name -> (module in kvtool.cli, function, shows help when run without arguments). Only the
# command being run is imported and turned into a click command: typer builds every registered
# command at start-up, about 1.5 ms each, which `kvtool size` should not pay for the others.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "size": ("size_forwarded", "size", True),
    "plan": ("plan", "plan", True),
    "models": ("models", "models", False),
    "hardware": ("hardware", "hardware", False),
    "advise": ("advise", "advise", True),
    "doctor": ("doctor", "doctor", True),
    "check": ("check", "check", True),
    "bench": ("bench", "bench", True),
    "capacity": ("capacity", "capacity", True),
    "inspect": ("inspect", "inspect", True),
    "gc": ("gc", "gc", True),
    "metrics": ("metrics", "metrics", True),
    "engine": ("engine", "HELP", True),  # a group: its commands are GROUPS["engine"]
}
# command -> the module whose ``command_for(argv)`` names a leaner (module, function) that
# answers that command line alike (kvtool size without its 24 hidden forwarded options)
LEAN: dict[str, str] = {"size": "size"}
# group -> its commands, as COMMANDS: built only when the group is run
GROUPS: dict[str, dict[str, tuple[str, str, bool]]] = {
    "engine": {
        "smoke": ("engine.smoke", "smoke", False),
        "replay": ("engine.replay", "replay", True),
        "sweep": ("engine.sweep", "sweep", True),
        "gen": ("engine.gen", "gen", False),
    },
}
# what each command answers, in one line of kvtool --help (a docstring says the rest)
SUMMARIES: dict[str, str] = {  # at most 62 characters: one line at 80 columns
    "size": "KV bytes per token, per session and in total.",
    "plan": "Where the KV lives on a cluster, and what that costs.",
    "models": "The bundled models and their KV bytes per token.",
    "hardware": "The bundled node and storage profiles, with sources.",
    "advise": "Which tiers and write posture a workload needs, and why.",
    "doctor": "Is this node and its mount ready to be T3? Each check graded.",
    "check": "A deployment plan's checklist, for CI (exit status, JUnit).",
    "bench": "Each tier's bandwidth and latency, beside its spec.",
    "capacity": "How many returning sessions T3 restores within a target.",
    "inspect": "What the engines' KV files in a shared folder hold.",
    "gc": "Cap a shared KV folder, oldest chunks first, never outside it.",
    "metrics": "What running engines report of their KV cache.",
    "engine": "The tiering engine: smoke test, replay, sweep, trace gen.",
    "engine smoke": "Every tier's moves end to end on real media, bytes checked.",
    "engine replay": "Replay a request trace through the tiers: hits, moves, TTFT.",
    "engine sweep": "Replay a trace at many tier sizes: the hit-ratio curve.",
    "engine gen": "Write a synthetic multi-turn trace.",
}

F = TypeVar("F", bound=Callable[..., Any])


def error_line(exc: KvtoolError) -> str:
    """``kvtool: error: <what is wrong> (<how to fix it>)``, credentials in URLs redacted."""
    from kvtool.errors import redact

    return redact(f"kvtool: error: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))


def path_error_line(exc: OSError) -> str | None:
    """The error line for an OSError that only a path as typed can cause (longer than the
    system takes, or a loop of links), wherever a check met it; None for any other."""

    if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP):
        return None
    name = str(exc.filename)
    shown = name if len(name) <= 80 else f"{name[:40]}...{name[-20:]} ({len(name):,} characters)"
    hint = "use a shorter path" if exc.errno == errno.ENAMETOOLONG else "fix the links"
    return error_line(InputError(f"{shown}: {exc.strerror}", hint))


def reports_errors(command: F) -> F:
    """Wrap a command: its returned status becomes the exit code; KvtoolError prints one line
    on stderr and exits 2; SIGINT, SIGTERM and SIGHUP run every clean-up (``kvtool.scratch``)
    and exit 130, 143 and 129 without a traceback. Every command also takes ``--quiet``: its
    answer only (no notes, no progress); errors and the exit status stay."""
    import inspect

    @functools.wraps(command)
    def wrapper(*args: Any, quiet: bool = False, **kwargs: Any) -> None:
        from kvtool.cli.options import RENAMED, print_renamed
        from kvtool.cli.render import text
        from kvtool.scratch import Interrupted, interrupts

        text.QUIET[0] = quiet
        RENAMED.clear()
        try:
            with interrupts():  # SIGINT, SIGTERM, SIGHUP: every clean-up runs, then exit
                outcome = command(*args, **kwargs)
        except KvtoolError as exc:
            RENAMED.clear()  # the mistake, alone on its line
            print(error_line(exc), file=sys.stderr)
            raise typer.Exit(status.USAGE) from None
        except Interrupted as exc:
            print(f"kvtool: interrupted ({exc}), scratch removed", file=sys.stderr)
            raise typer.Exit(exc.exit_status) from None
        except KeyboardInterrupt:
            print("kvtool: interrupted", file=sys.stderr)
            raise typer.Exit(status.INTERRUPTED) from None
        except OSError as exc:
            if exc.errno in OUTPUT_ERRNOS and is_output_error(exc):
                # before click's own handling, which makes a closed pipe exit 1
                raise typer.Exit(output_failed(exc)) from None
            line = path_error_line(exc)
            if line is None:
                raise
            print(line, file=sys.stderr)
            raise typer.Exit(status.USAGE) from None
        if not quiet:
            print_renamed()  # the command ran: old spellings it was given, once each
        if outcome:
            raise typer.Exit(int(outcome))

    signature = inspect.signature(command)
    quiet_option = inspect.Parameter(
        "quiet",
        inspect.Parameter.KEYWORD_ONLY,
        default=False,
        annotation=Annotated[
            bool,
            typer.Option("--quiet", "-q", help="Print the answer only: no notes, no progress."),
        ],
    )
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), quiet_option]
    )
    return wrapper  # type: ignore[return-value]


def _typer() -> typer.Typer:
    from kvtool.cli.helptext import FittedGroup

    return typer.Typer(
        name="kvtool",
        cls=FittedGroup,
        help="Size the KV cache of an LLM deployment, plan where it lives (T1 GPU HBM, T2 host"
        " DRAM, T3 FSx for Lustre, T4 S3), emit the serving engine's configuration, verify that a"
        " node and its shared mount are ready for it, and benchmark each tier.\n\n"
        "Example: kvtool size deepseek-r1 --ctx 200k --sessions 100",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_show_locals=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def _print_version(value: bool) -> None:
    if value:
        from kvtool import __version__

        print(f"kvtool {__version__}")
        raise typer.Exit(status.OK)


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
    """Size the KV cache of an LLM deployment, plan where it lives (T1 GPU HBM, T2 host DRAM, T3
    FSx for Lustre, T4 S3), emit the serving engine's configuration, verify that a node and its
    shared mount are ready for it, and benchmark each tier.

    Example: kvtool size deepseek-r1 --ctx 200k --sessions 100
    """


def build_app(
    names: Sequence[str] = tuple(COMMANDS), argv: Sequence[str] | None = None
) -> typer.Typer:
    """The ``kvtool`` app with the named commands (all by default, for help and tests); with
    ``argv`` (what follows the one command named), that command as ``LEAN`` says it is
    answered."""
    from kvtool.cli.helptext import FittedCommand, FittedGroup

    built = _typer()
    built.callback()(_root)
    for name in names:
        module, function, bare_help = COMMANDS[name]
        if argv is not None and name in LEAN:
            module, function = import_module(f"kvtool.cli.{LEAN[name]}").command_for(argv)
        target = getattr(import_module(f"kvtool.cli.{module}"), function)
        if name in GROUPS:  # the group's help text; its commands are built here
            group = typer.Typer(
                cls=FittedGroup,
                help=target,
                no_args_is_help=True,
                context_settings={"help_option_names": ["-h", "--help"]},
            )
            for sub, (sub_module, sub_function, sub_bare) in GROUPS[name].items():
                command = getattr(import_module(f"kvtool.cli.{sub_module}"), sub_function)
                summary = SUMMARIES[f"{name} {sub}"]
                group.command(sub, cls=FittedCommand, no_args_is_help=sub_bare,
                              short_help=summary)(reports_errors(command))  # fmt: skip
            built.add_typer(group, name=name, no_args_is_help=bare_help, short_help=SUMMARIES[name])
        else:
            built.command(name, cls=FittedCommand, no_args_is_help=bare_help,
                          short_help=SUMMARIES[name])(reports_errors(target))  # fmt: skip
    return built


def __getattr__(name: str) -> Any:
    """``app``, the whole ``kvtool`` app, built on first use (tests, ``typer`` tooling)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point: builds only the command asked for (root help and unknown
    names get the whole app, so its listing is typer's own). A usage mistake (an unknown
    option, a missing argument) is one line and exit 2, in the same style as every other
    error, not a framed box."""
    # typer re-exports click's errors (its own vendored copy in 0.2x): found by name on the
    # class it exports, so this works whichever click typer carries
    errors = {c.__name__: c for c in typer.BadParameter.__mro__}
    usage_error: type[Exception] = errors["UsageError"]

    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 prints as its bytes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    app = build_app([first], argv=sys.argv[2:]) if first in COMMANDS else build_app()
    try:
        code = app(prog_name="kvtool", standalone_mode=False)
    except usage_error as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command: its help, as before
            from typer import rich_utils

            rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
            bare_kvtool = len(sys.argv) <= 1  # `kvtool` alone asks what it does: exit 0
            sys.exit(status.OK if bare_kvtool else getattr(exc, "exit_code", status.USAGE))
        from kvtool.cli.usage import usage_message

        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "kvtool"
        message = usage_message(exc, sys.argv[1:])
        print(f"kvtool: error: {message} (see {where} --help)", file=sys.stderr)
        sys.exit(status.USAGE)
    except typer.Abort:
        print("kvtool: interrupted", file=sys.stderr)
        sys.exit(status.INTERRUPTED)
    except OSError as exc:
        sys.exit(output_failed(exc))
    try:
        sys.stdout.flush()  # what is still buffered: a full disk shows here
    except OSError as exc:
        sys.exit(output_failed(exc))
    sys.exit(code if isinstance(code, int) else status.OK)

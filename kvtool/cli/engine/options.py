"""The options ``kvtool engine replay`` and ``sweep`` share: the trace, its format, the tier
sizes and the engine's rules (the options every command shares are in ``cli/options.py``)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from kvtool.cli.options import TOKENS_RULE, engine_rule_options

PANEL_RULES = "Engine rules"
TIER_HELP = (
    f"tokens ({TOKENS_RULE}: 10m = 10,000,000, 10M = 10,485,760), bytes (80GiB, 20GB: need"
    " --model), 0 (off) or inf"
)
POLICY, POSTURE = engine_rule_options()

TraceArg = Annotated[
    Path, typer.Argument(metavar="TRACE", help="A Mooncake or kvtool JSONL trace.")
]
FormatOpt = Annotated[
    str, typer.Option("--format", metavar="FORMAT", help="auto, mooncake or jsonl.")
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad", help="Count and skip malformed lines instead of stopping.")
]
PolicyOpt = Annotated[str, POLICY]
PostureOpt = Annotated[str, POSTURE]
T2IdleOpt = Annotated[
    str,
    typer.Option(
        "--t2-idle",
        metavar="DURATION",
        help="T2 -> T3 after this idle (30s, 5m).",
        rich_help_panel=PANEL_RULES,
    ),
]
T3IdleOpt = Annotated[
    str,
    typer.Option(
        "--t3-idle",
        metavar="DURATION",
        help="T3 -> T4 after this idle (10m, 1h).",
        rich_help_panel=PANEL_RULES,
    ),
]


def tier_option(tier: str, many: bool = False) -> Any:
    help_text = f"{tier} size: {TIER_HELP}" + (", or a comma-separated list" if many else "")
    return typer.Option(
        f"--{tier.lower()}", metavar="SIZE" + ("[,SIZE]" if many else ""), help=help_text
    )

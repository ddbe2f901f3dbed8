"""``kvtool engine``: the built-in tiering engine's commands, one module each (``smoke``,
``replay``, ``sweep``, ``gen``); ``cli/app.py`` builds the group from ``GROUPS``."""

HELP = (
    "The built-in tiering engine: T1 (HBM) -> T2 (host) -> T3 (shared files) -> T4 (S3).\n\n"
    "Example: kvtool engine smoke"
)

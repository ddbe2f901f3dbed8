"""Output that cannot be written: the output's failure, not kvtool's, said in one line (or,
for a closed pipe, not at all) with the exit status a shell expects."""

import contextlib
import errno
import sys

from kvtool.cli import status

# the ways writing the output fails that are the output's, not kvtool's: said in one line
OUTPUT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EPIPE", "ENOSPC", "EDQUOT", "EIO", "EFBIG", "EBADF", "EROFS")
    if hasattr(errno, name)
)


def is_output_error(exc: OSError) -> bool:
    """Whether ``exc`` came from writing stdout (a file kvtool writes says its name in
    ``filename``; a write to stdout has none)."""
    return exc.filename is None and exc.filename2 is None


def output_failed(exc: OSError) -> int:
    """A write to the output that failed: a closed pipe (``kvtool check | head``) is exit 141,
    silently, as for a program SIGPIPE ended (0 would let a FAIL piped into ``head`` pass a
    gate, 1 would read as a FAIL); a full disk or a broken device is one line and exit 1.
    Any other error is kvtool's own and keeps its traceback."""
    import os

    if exc.errno not in OUTPUT_ERRNOS:
        raise exc
    try:  # nothing more reaches the broken output, not even Python's flush at exit
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass
    if exc.errno == errno.EPIPE:
        return status.CLOSED_PIPE
    with contextlib.suppress(OSError):
        print(f"kvtool: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
    return status.PROBLEMS

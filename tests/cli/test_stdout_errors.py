"""What kvtool does when its output cannot be written: real processes, a real closed pipe and
a real full device (``/dev/full``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
COMMANDS = [
    ["size", "deepseek-r1", "--ctx", "200k", "--sessions", "100"],
    ["models"],
    ["models", "--json"],
    ["check", str(REPO / "examples" / "check" / "plan-fail.yaml")],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_closed_pipe_is_exit_141_silently(args: list[str]) -> None:
    """``kvtool check | head`` exited 1, as a FAIL does; 0 would let a FAIL piped into head
    pass a gate. 141 is what a shell reports for a program SIGPIPE ended."""
    run = subprocess.Popen([sys.executable, "-m", "kvtool", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=ENV)  # fmt: skip
    assert run.stdout is not None
    assert run.stderr is not None
    run.stdout.close()  # the reader is gone before the first byte
    assert run.wait(60) == 141
    assert run.stderr.read() == b""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_full_device_is_one_line_and_exit_1(args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run([sys.executable, "-m", "kvtool", *args], stdout=full,
                              stderr=subprocess.PIPE, env=ENV, timeout=60)  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.decode().strip().splitlines()
    assert lines == ["kvtool: error: cannot write the output: No space left on device"]

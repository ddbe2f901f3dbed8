"""Every command has help text with an example, and docs/commands.md (the README's "more")
shows every command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvtool.cli.app import app
from tests.conftest import CliResult

COMMANDS = sorted(
    [command.name or "" for command in app.registered_commands]
    + [group.name or "" for group in app.registered_groups]
)
COMMANDS_PAGE = (Path(__file__).parents[2] / "docs" / "commands.md").read_text()


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
def test_the_commands_page_shows_each_command(name: str) -> None:
    assert f"$ kvtool {name}" in COMMANDS_PAGE


def test_root_help_lists_each_command_in_one_line() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "kvtool", "--help"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0
    listed = done.stdout.split("Commands")[1].splitlines()[1:]
    rows = [line for line in listed if line.startswith("│ ")]
    names = [row.split()[1] for row in rows if row.split()[1] in COMMANDS]
    assert sorted(names) == COMMANDS  # each name on its own row
    assert len(rows) == len(COMMANDS)  # and nothing wraps onto a second row


def test_bare_kvtool_prints_help_and_exits_0() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "kvtool"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "Usage: kvtool" in done.stdout + done.stderr
    bare = subprocess.run([sys.executable, "-m", "kvtool", "size"], capture_output=True, text=True)
    assert bare.returncode == 2  # a command without what it needs stays a usage mistake


def test_quiet_prints_the_answer_only(kvtool: Callable[..., CliResult]) -> None:
    loud = kvtool("size", "deepseek-r1", "--ctx", "200k", "--sessions", "100")
    quiet = kvtool("size", "deepseek-r1", "--ctx", "200k", "--sessions", "100", "--quiet")
    assert "note:" in loud.stdout
    assert "note:" not in quiet.stdout
    assert quiet.stdout.strip() in loud.stdout
    assert "1.41 TB" in quiet.stdout
    old = kvtool("inspect", "/nonexistent-kv", "-q")  # bad input still says so
    assert old.exit_code == 2
    assert "does not exist" in old.stderr
    renamed = kvtool("size", "deepseek-r1", "--block-size", "64", "-q")
    assert renamed.stderr == ""


def _leaves() -> list[str]:
    from kvtool.cli.app import GROUPS

    return [
        *(f"{group} {sub}" for group, subs in GROUPS.items() for sub in subs),
        *(name for name in COMMANDS if name not in GROUPS),
    ]


@pytest.mark.parametrize("name", _leaves())
def test_every_command_takes_quiet(kvtool: Callable[..., CliResult], name: str) -> None:
    assert "--quiet" in kvtool(*name.split(), "--help").stdout


def test_statuses_are_coloured_on_a_terminal_only(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    plan = Path(__file__).parents[2] / "examples" / "check" / "plan-pass.yaml"
    argv = [sys.executable, "-m", "kvtool", "check", str(plan)]

    def on_a_terminal(env: dict[str, str]) -> str:
        leader, follower = pty.openpty()
        done = subprocess.run(argv, stdout=follower, stderr=subprocess.DEVNULL, env=env)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.close(leader)
        assert done.returncode == 0
        return out.decode()

    base = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[32mPASS\x1b[0m" in on_a_terminal({**base, "TERM": "xterm"})
    assert "\x1b[" not in on_a_terminal({**base, "TERM": "xterm", "NO_COLOR": "1"})
    piped = subprocess.run(argv, capture_output=True, text=True, env=base)
    assert "PASS" in piped.stdout
    assert "\x1b[" not in piped.stdout


def test_every_status_is_coloured_on_a_terminal_and_laid_out_as_if_plain(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PASS/WARN/FAIL/SKIP were coloured in doctor and check only: engine smoke's table and
    lines and bench's SKIP/FAIL lines were plain on a terminal (issue 54). The colour comes
    after the layout, so a coloured line takes the columns a plain one does."""
    import re
    import sys

    from kvtool.cli.render import text

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    table = text.Table("step", "status", "detail", left=(0, 1, 2), statuses=(1,))
    table.add_row("prefill", "PASS", "13 chunks " * 8)
    table.add_row("corrupt chunk", "FAIL", "read back wrong")
    rendered = table.render()
    assert "\x1b[32mPASS\x1b[0m" in rendered
    assert "\x1b[31;1mFAIL\x1b[0m" in rendered
    plain = re.sub("\x1b\\[[0-9;]*m", "", rendered)
    assert max(len(line) for line in plain.splitlines()) <= 60
    assert "status" in plain.splitlines()[0]  # the header is not a status
    lines = text.status_lines("WARN", "fsx.stripe " + "stripe count below the nodes " * 4)
    assert lines[0].startswith("  \x1b[33mWARN\x1b[0m  fsx.stripe")
    assert max(len(re.sub("\x1b\\[[0-9;]*m", "", line)) for line in lines) <= 60
    from kvtool.bench.result import skipped
    from kvtool.cli.render.bench import print_bench

    print_bench([skipped("t1", "d2d", "no CUDA here")], notes=[], header="kvtool bench")
    assert "T1 d2d: \x1b[2mSKIP\x1b[0m, no CUDA here" in capsys.readouterr().out


def test_shell_completion_is_on(kvtool: Callable[..., CliResult]) -> None:
    assert "--install-completion" in kvtool("--help").stdout


def test_every_token_option_states_the_one_rule_of_token_counts() -> None:
    """``--ctx 10M`` was 10 x 2^20 tokens and ``--t2 10M`` 10^7 (issue 54): one rule for every
    token count (units.parse_count), said in the help of each option that takes tokens."""
    from typer.main import get_command

    from kvtool.cli.options import TOKENS_RULE

    found: list[str] = []

    def walk(command: Any, path: str) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())
            return
        for param in command.params:
            tokens = str(getattr(param, "metavar", "")).startswith("TOKENS")
            tier = path in ("engine replay", "engine sweep") and param.opts[0] in (
                "--t1", "--t2", "--t3", "--t4")  # fmt: skip
            if (tokens or tier) and param.opts[0] != "--block-tokens":  # a plain number
                found.append(f"{path} {param.opts[0]}")
                assert TOKENS_RULE in (param.help or ""), f"{path} {param.opts[0]}"

    walk(get_command(app), "")
    assert {"size --ctx", "engine replay --t2", "engine sweep --t2", "capacity --ctx"} <= set(found)

"""Every file kvtool writes goes through one door, and its target is checked before any work:
each command with an output option against each kind of bad target ends in one line and exit
2, with no traceback and nothing written or left behind; a good target gets exactly the file
the output names."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult

Kvtool = Callable[..., CliResult]
ROOT = Path(__file__).parents[2]
HEAD = ROOT / "tests" / "fixtures" / "traces" / "conversation_trace_head.jsonl"
SNAPSHOT = ROOT / "examples" / "doctor-snapshot"
PLAN = ROOT / "examples" / "check" / "plan-pass.yaml"

# (command, the option, the arguments before it): each writes one file (or, --capture, a folder)
WRITERS: dict[str, tuple[str, list[str]]] = {
    "check --junit": ("--junit", ["check", str(PLAN)]),
    "doctor --junit": ("--junit", ["doctor", "--snapshot", str(SNAPSHOT), "/mnt/lustre/kvcache"]),
    "doctor --merge --junit": (
        "--junit",
        [
            "doctor",
            "--merge",
            *(str(ROOT / "examples" / "check" / f"doctor-node-{n}.json") for n in "ab"),
        ],
    ),
    "engine gen -o": ("--output", ["engine", "gen", "--requests", "50"]),
    "engine replay --plot": ("--plot", ["engine", "replay", str(HEAD), "--t1", "1M"]),
    "engine sweep --plot": ("--plot", ["engine", "sweep", str(HEAD), "--t1", "1M,2M", "-j", "1"]),
}


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """A read-only folder: a tmpfs mounted ro (root writes through mode bits, not through a
    read-only mount). None where mounting is not permitted."""
    folder = tmp_path_factory.mktemp("ro")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def _bad_targets(tmp: Path, read_only: Path | None, option: str) -> dict[str, tuple[Path, str]]:
    """Bad target -> (path, what the one line must say)."""
    suffix = ".png" if option == "--plot" else ".xml"
    (tmp / "a-folder").mkdir()
    os.mkfifo(tmp / f"a-pipe{suffix}")  # never /dev/null: a rename over it would replace it
    targets = {
        "missing folder": (tmp / "no" / "such" / f"out{suffix}", "does not exist"),
        "a folder": (tmp / "a-folder", "is a folder"),
        "a device": (tmp / f"a-pipe{suffix}", "is a FIFO, not a regular file"),
        "a dangling link": (tmp / f"a-link{suffix}", "is a symbolic link"),
    }
    (tmp / f"a-link{suffix}").symlink_to(tmp / "gone" / f"out{suffix}")
    if read_only is not None:
        targets["read-only folder"] = (read_only / f"out{suffix}", "read-only mount")
    if option == "--plot":
        targets["unknown extension"] = (tmp / "chart.txt", "'.txt' is not a format")
        targets["no extension"] = (tmp / "chart", "no extension is not a format")
    return targets


CASES = [(name, bad) for name in WRITERS for bad in (
    "missing folder", "a folder", "a device", "a dangling link", "read-only folder",
    "unknown extension",
    "no extension",
) if WRITERS[name][0] == "--plot" or bad not in ("unknown extension", "no extension")]  # fmt: skip


@pytest.mark.parametrize(("name", "bad"), CASES, ids=[f"{n}: {b}" for n, b in CASES])
def test_a_bad_output_target_is_one_line_before_any_work(
    kvtool: Kvtool, tmp_path: Path, read_only: Path | None, name: str, bad: str
) -> None:
    option, before = WRITERS[name]
    targets = _bad_targets(tmp_path, read_only, option)
    if bad not in targets:
        pytest.skip("mounting a read-only tmpfs is not permitted here")
    path, message = targets[bad]
    listing = sorted(tmp_path.rglob("*"))
    done = kvtool(*before, option, str(path))
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"kvtool: error: {option} {path}")
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(tmp_path.rglob("*")) == listing  # nothing written, nothing left
    if read_only is not None:
        assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_good_target_gets_exactly_the_named_file(
    kvtool: Kvtool, tmp_path: Path, name: str
) -> None:
    option, before = WRITERS[name]
    path = tmp_path / ("chart.svg" if option == "--plot" else "out.xml")
    done = kvtool(*before, option, str(path))
    assert done.exit_code in (0, 1), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left
    head = path.read_bytes()[:200]
    assert (b"<svg" in head) if option == "--plot" else path.stat().st_size > 0
    if option == "--plot":
        assert f"written to {path}" in done.stdout  # the path printed is the path written


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_link_at_the_target_is_refused_in_one_line(
    kvtool: Kvtool, tmp_path: Path, name: str
) -> None:
    """Every writer wrote through a link at its target (a link another user left in a shared
    folder had its target overwritten): now exit 2, one line, the file it names untouched."""
    option, before = WRITERS[name]
    real = tmp_path / "real" / ("chart.svg" if option == "--plot" else "out.xml")
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / real.name
    link.symlink_to(real)
    done = kvtool(*before, option, str(link))
    assert done.exit_code == 2, done.stdout + done.stderr
    assert "is a symbolic link" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert link.is_symlink()
    assert real.read_text() == "old"
    assert sorted(p.name for p in real.parent.iterdir()) == [real.name]


def test_capture_refuses_a_file_a_busy_folder_and_a_missing_parent(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    kv.mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    for target, message in (
        (a_file, "is a file"),
        (busy, "is not empty"),
        (tmp_path / "no" / "snap", "does not exist"),
    ):
        done = kvtool("doctor", str(kv), "--no-aws", "--no-write", "--capture", str(target))
        assert done.exit_code == 2, done.stderr
        assert message in done.stderr
        assert done.stderr.count("\n") == 1
    assert a_file.read_text() == "mine"
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_no_command_prints_a_traceback_for_a_bad_target(tmp_path: Path) -> None:
    """The same, through real processes (what a user's shell sees): one case per command."""
    for option, before in WRITERS.values():
        done = subprocess.run(
            [sys.executable, "-m", "kvtool", *before, option, str(tmp_path / "no" / "out.png")],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []

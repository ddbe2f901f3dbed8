"""``kvtool gc`` attacked as a user or a process on the same file system can (docs/gc.md): real
gc processes on real folders, with real processes racing them, each bounded in time. What
must hold: no file outside DIR is removed (a folder swapped for a link mid-run, hard links,
a bind mount or a tmpfs below DIR, a second gc); /, $HOME and the folders above it are
refused; no lock file hangs gc or makes it print a traceback; no name prints a raw control
character or forges a line; the log names every removal even after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.errors import has_control_character
from kvtool.folders.gc import PRIVATE_PREFIX
from kvtool.folders.walk import LOCK_NAME
from tests.conftest import CliResult

Kvtool = Callable[..., CliResult]
REPO = Path(__file__).parents[2]
OLD = 5 * 86400


def _chunk(i: int, model: str = "m-x") -> str:
    return f"{i:064x}_{model}_0_1.bin"  # SGLang HiCacheFile, TP 1


def _fill(folder: Path, count: int, *, start: int = 0, size: int = 16) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    when = time.time() - OLD
    paths = []
    for i in range(start, start + count):
        path = folder / _chunk(i)
        path.write_bytes(b"k" * size)
        os.utime(path, (when, when))
        paths.append(path)
    return paths


def _gc(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> CliResult:
    """A real ``kvtool gc`` process."""
    done = subprocess.run(
        [sys.executable, "-m", "kvtool", "gc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def _start_gc(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kvtool", "gc", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _clean(result: CliResult) -> None:
    """No traceback, no raw control character (a newline ends a line, nothing else)."""
    for text in (result.stdout, result.stderr):
        assert "Traceback" not in text, text[-2000:]
        for line in text.splitlines():
            assert not has_control_character(line), repr(line)


SWAPPER = """
import os, sys, time
sub, aside, outside, stop = sys.argv[1:5]
swaps = 0
while not os.path.exists(stop):
    try:
        os.rename(sub, aside)
        os.symlink(outside, sub)
        time.sleep(0.0005)
        os.unlink(sub)
        os.rename(aside, sub)
        swaps += 1
    except OSError:
        pass
print(swaps)
"""


@pytest.mark.slow
@pytest.mark.parametrize("unknown", [False, True], ids=["engine-files", "include-unknown"])
def test_a_folder_swapped_for_a_link_while_gc_runs_costs_nothing_outside(tmp_path, unknown):
    root = tmp_path / "kv"
    outside = tmp_path / "home" / "victim"
    _fill(root / "sub", 3000)
    _fill(root / "other", 1000, start=5000)
    theirs = _fill(outside, 3000)  # the same engine names: gc would take them if it went there
    (outside / ".bashrc").write_text("keep me")
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root / "sub"), str(root / "sub.x"), str(outside),
         str(stop)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(0.2)
        args = [str(root), "--max-size", "0", "--grace", "0s"]
        done = _gc(*args, *(["--include-unknown"] if unknown else []))
    finally:
        stop.touch()
        swaps = int(swapper.communicate(timeout=30)[0] or 0)
    _clean(done)
    assert done.exit_code in (0, 1), done.stderr
    assert swaps > 10  # the race really ran while gc did
    assert all(path.exists() for path in theirs), "gc removed files outside its folder"
    assert (outside / ".bashrc").read_text() == "keep me"
    # its own files elsewhere went (sub's went or not, as the race fell: either is right)
    assert not any((root / "other").iterdir())


@pytest.mark.slow
def test_hard_links_to_outside_files_are_kept_and_the_outside_files_whole(tmp_path):
    root = tmp_path / "kv"
    outside = tmp_path / "secrets"
    theirs = _fill(outside, 50)
    root.mkdir()
    for i, path in enumerate(theirs):
        os.link(path, root / _chunk(100 + i))
    mine = _fill(root, 20, start=1000)
    done = _gc(str(root), "--max-size", "0", "--grace", "0s")
    _clean(done)
    assert done.exit_code == 1  # the limit is out of reach: what is left is hard-linked
    assert "hard-linked" in done.stdout
    assert all(path.read_bytes() == b"k" * 16 for path in theirs)
    assert all(os.stat(path).st_nlink == 2 for path in theirs)  # the names in DIR stayed too
    assert not any(path.exists() for path in mine)


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_bind_mount_and_a_tmpfs_below_the_folder_are_not_entered(tmp_path):
    root = tmp_path / "kv"
    mine = _fill(root, 30)
    source = tmp_path / "elsewhere"
    theirs = _fill(source, 30, start=100)
    (root / "bound").mkdir()
    (root / "tmpfs").mkdir()
    if not _mount("-t", "tmpfs", "none", str(root / "tmpfs")):
        pytest.skip("this user cannot mount (the other attacks still run)")
    try:
        on_tmpfs = _fill(root / "tmpfs", 30, start=200)
        assert _mount("--bind", str(source), str(root / "bound"))
        try:
            done = _gc(str(root), "--max-size", "0", "--grace", "0s")
        finally:
            subprocess.run(["umount", str(root / "bound")], check=True)
        assert all(path.exists() for path in on_tmpfs)
    finally:
        subprocess.run(["umount", str(root / "tmpfs")], check=True)
    _clean(done)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert all(path.exists() for path in theirs)
    assert not any(path.exists() for path in mine)
    assert "mount points below the folder were not entered" in done.stdout
    assert "bound" in done.stdout
    assert "tmpfs" in done.stdout


@pytest.mark.slow
def test_gc_runs_racing_one_another_remove_what_one_would(tmp_path):
    root = tmp_path / "kv"
    _fill(root, 600, size=1000)
    # real processes age the files by their real ctime: --grace 0s lets the just-made files go
    runs = [_start_gc(str(root), "--max-size", "100kB", "--grace", "0s", "--json")
            for _ in range(4)]  # fmt: skip
    results = [(run.wait(120), *run.communicate()) for run in runs]
    for code, out, err in results:
        assert code in (0, 1), err
        _clean(CliResult(code, out, err))
    removed = sum(json.loads(out).get("removed_files", 0) for _code, out, _err in results)
    assert removed == 500
    assert len(list(root.iterdir())) == 100
    assert not (root / LOCK_NAME).exists()


def test_root_home_and_the_folders_above_home_are_refused(kvtool: Kvtool, tmp_path, monkeypatch):
    home = tmp_path / "home" / "user"
    _fill(home / "kv", 3)
    (home / ".bashrc").write_text("keep me")
    (tmp_path / "to-root").symlink_to("/")
    monkeypatch.setenv("HOME", str(home))
    tried: list[str] = []

    def never(path, *args, **kw):  # should the guard ever break, this test deletes nothing
        tried.append(str(path))
        raise AssertionError(f"gc tried to remove {path!r} under a folder it must refuse")

    real_unlink = os.unlink
    for name in ("unlink", "remove", "rmdir", "rename", "link"):
        monkeypatch.setattr(os, name, never)
    for folder in ("/", str(home), str(home.parent), str(tmp_path), str(tmp_path / "to-root")):
        for extra in ((), ("--dry-run",), ("--include-unknown",)):
            done = kvtool("gc", folder, "--max-size", "0", "--grace", "0s", *extra)
            assert done.exit_code == 2, (folder, done.stdout)
            assert "kvtool gc never cleans it" in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
            assert done.stdout == ""
    assert tried == []
    assert (home / ".bashrc").read_text() == "keep me"
    assert len(list((home / "kv").iterdir())) == 3
    monkeypatch.setattr(os, "unlink", real_unlink)
    done = kvtool("gc", str(home / "kv"), "--max-size", "0", "--grace", "0s", "--dry-run")
    assert done.exit_code == 0, done.stderr  # a folder below a home is a folder like any other
    assert "would remove: 3 chunks" in done.stdout


SYSTEM = ("/etc", "/usr/lib", "/var/log", "/var", "/opt", "/tmp", "/var/tmp", "/proc", "/sys",
          "/dev", "/run", "/boot", "/usr/share/..")  # fmt: skip


def test_system_folders_below_them_and_pseudo_file_systems_are_refused(kvtool: Kvtool, monkeypatch):
    """As root, with every limit at zero and --include-unknown: exit 2, one line, nothing read
    on stdout, nothing removed (any removal attempt fails the test)."""

    def never(path, *args, **kw):
        raise AssertionError(f"gc tried to remove {path!r} under a folder it must refuse")

    for name in ("unlink", "remove", "rmdir", "rename", "link"):
        monkeypatch.setattr(os, name, never)
    refused = 0
    for folder in SYSTEM:
        if not os.path.isdir(folder):
            continue
        for extra in (("--dry-run",), ("--include-unknown",), ("--include-unknown", "--dry-run")):
            done = kvtool("gc", folder, "--max-size", "0B", "--grace", "0s", *extra)
            assert done.exit_code == 2, (folder, done.stdout, done.stderr)
            assert "kvtool gc never cleans it" in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
            assert done.stdout == ""
        refused += 1
    assert refused >= 10


REPLACER = """
import os, sys
folder, out = sys.argv[1:3]
done = []
for name in os.listdir(folder):  # in the order gc walks it; as an engine rewrites: write, rename
    if not name.endswith(".bin"):
        continue
    tmp = os.path.join(folder, ".rewrite.tmp")
    with open(tmp, "wb") as f:
        f.write(b"NEW")
    os.rename(tmp, os.path.join(folder, name))
    done.append(name)
with open(out, "w") as f:
    f.write("\\n".join(done))
"""


def _wait_for_removals(log: Path, count: int, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b'"remove"') >= count:
            return
        time.sleep(0.002)
    raise AssertionError(f"gc logged fewer than {count} removals in {deadline_s} s")


@pytest.mark.slow
def test_a_file_renamed_over_a_chosen_one_mid_run_is_never_removed(tmp_path):
    """A writer renames a new file over each chunk while gc removes them (20,000 files): the
    check-then-unlink window lost 49 of them; rename-then-verify loses none."""
    root = tmp_path / "kv"
    _fill(root, 20_000, size=1)
    log, out = tmp_path / "gc.jsonl", tmp_path / "replaced.txt"
    run = _start_gc(str(root), "--max-size", "0", "--grace", "0s", "--log", str(log))
    _wait_for_removals(log, 1)  # the plan is made: what the writer writes now is new
    writer = subprocess.run([sys.executable, "-c", REPLACER, str(root), str(out)], timeout=120,
                            capture_output=True, text=True)  # fmt: skip
    _out, err = run.communicate(timeout=120)
    assert writer.returncode == 0, writer.stderr
    assert "Traceback" not in err
    replaced = out.read_text().split()
    assert len(replaced) > 1000, "the writer did not race gc"
    lost = [name for name in replaced if not (root / name).exists()]
    assert lost == [], f"{len(lost)} of {len(replaced)} rewritten chunks removed"
    assert all((root / name).read_bytes() == b"NEW" for name in replaced)
    assert not [p for p in root.iterdir() if p.name.startswith(".kvtool-gc-removing.")]


@pytest.mark.slow
def test_a_subfolder_moved_out_of_the_folder_mid_run_is_left_alone(tmp_path):
    """``mv DIR/s /elsewhere/s`` while gc removes in it: it kept removing through its open
    handle (all 20,000 gone); now it stops in a folder that left DIR, and says so."""
    root, elsewhere = tmp_path / "kv", tmp_path / "elsewhere"
    _fill(root / "s", 20_000, size=1)
    elsewhere.mkdir()
    log = tmp_path / "gc.jsonl"
    run = _start_gc(str(root), "--max-size", "0", "--grace", "0s", "--log", str(log))
    _wait_for_removals(log, 500)
    os.rename(root / "s", elsewhere / "s")
    moved = {n for n in os.listdir(elsewhere / "s") if not n.startswith(".kvtool-gc-removing.")}
    out, err = run.communicate(timeout=120)
    _clean(CliResult(run.returncode, out, err))
    assert 0 < len(moved) < 20_000, f"the move did not land mid-run ({len(moved)} moved)"
    left = set(os.listdir(elsewhere / "s"))
    assert moved <= left, f"{len(moved - left)} files removed from the folder after it left DIR"
    assert "1 folder left the folder while gc removed in it" in " ".join(out.split())


def test_a_chunk_moved_in_later_goes_after_one_placed_before_it_whatever_its_mtime(tmp_path):
    """The order chunks go in counts their ctime too (docs/gc.md, 3b): a chunk moved in with a
    10-day-old mtime a second after another was aged 5 days in place is the newer of the two,
    and the other goes first; by mtime alone the one just moved in would go."""
    root, elsewhere = tmp_path / "kv", tmp_path / "elsewhere"
    (placed,) = _fill(root, 1, start=1)  # aged 5 days in place: its ctime is now
    time.sleep(1.2)
    (moved,) = _fill(elsewhere, 1, start=2)
    os.utime(moved, (time.time() - 2 * OLD,) * 2)  # 10 days
    os.rename(moved, root / moved.name)  # mv keeps the mtime; the ctime is now, after placed's
    done = _gc(str(root), "--max-size", "16B", "--grace", "0s")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert sorted(os.listdir(root)) == [moved.name]
    assert not placed.exists()


LOCKS: dict[str, Callable[[Path], None]] = {
    "fifo": lambda p: os.mkfifo(p),
    "dangling-link": lambda p: p.symlink_to(p.parent / "gone"),
    "link-to-a-file": lambda p: p.symlink_to("/etc/hostname"),
    "folder": lambda p: p.mkdir(),
    "large-file": lambda p: p.write_bytes(b" " * 100_000),
}
CONTENTS = {
    "pid-1e20": b'{"host": "node-1", "pid": 1e20, "started": 1e9}',
    "nan": b'{"host": "node-1", "pid": NaN, "started": NaN}',
    "nested": b"[" * 2040 + b"]" * 2040,
    "escapes": b'{"host": "\\u001b]2;owned\\u0007\\u001b[2Jnode\\nfake line", "pid": 3}',
    "binary": bytes(range(256)),
}


@pytest.mark.parametrize("kind", list(LOCKS))
def test_a_lock_that_is_not_a_lock_is_named_without_a_hang(tmp_path, kind):
    root = tmp_path / "kv"
    mine = _fill(root, 5)
    LOCKS[kind](root / LOCK_NAME)
    done = _gc(str(root), "--max-size", "0", "--grace", "0s", timeout=30)
    _clean(done)
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "not a lock kvtool gc made" in done.stdout
    assert all(path.exists() for path in mine)
    assert os.path.lexists(root / LOCK_NAME)


@pytest.mark.parametrize("kind", list(CONTENTS))
def test_hostile_lock_contents_read_busy_then_stale_never_a_traceback(tmp_path, kind):
    root = tmp_path / "kv"
    mine = _fill(root, 5)
    lock = root / LOCK_NAME
    lock.write_bytes(CONTENTS[kind])
    done = _gc(str(root), "--max-size", "0", "--grace", "0s", timeout=30)
    _clean(done)
    assert done.exit_code == 1
    assert "another kvtool gc holds" in done.stdout
    assert all(path.exists() for path in mine)
    os.utime(lock, (time.time() - 3600,) * 2)  # unrefreshed for an hour: stale
    done = _gc(str(root), "--max-size", "0", "--grace", "0s", "--json", timeout=30)
    _clean(done)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["removed_files"] == 5
    assert not lock.exists()


def test_names_cannot_forge_lines_or_reach_the_terminal_raw(tmp_path):
    root = tmp_path / "kv"
    _fill(root, 2)
    when = time.time() - OLD
    hostile = [
        "x\nwould remove etc-passwd  (1 B)",
        "\x1b[2J\x1b]0;owned\x07title",
        "tab\there",
        "rtl\u202egnp.exe",
        "line\u2028separator",
    ]
    for name in hostile:
        path = root / name
        path.write_bytes(b"u")
        os.utime(path, (when, when))
    with open(os.fsencode(root) + b"/bad-\xff-utf8", "wb") as f:
        f.write(b"u")
    os.utime(os.fsencode(root) + b"/bad-\xff-utf8", (when, when))
    done = _gc(
        str(root), "--max-size", "0", "--grace", "0s", "--dry-run", "--list", "--include-unknown"
    )
    _clean(done)
    assert done.exit_code == 0
    lines = [line for line in done.stdout.splitlines() if line.startswith("would remove ")]
    assert len(lines) == 2 + len(hostile) + 1  # one line a file, however it is named
    assert not any(line.startswith("would remove etc-passwd") for line in lines)
    assert any("x\\nwould\\ remove\\ etc-passwd\\ \\ (1\\ B)" in line for line in lines)
    assert any("\\033[2J\\033]0;owned\\atitle" in line for line in lines)
    assert any("bad-\\377-utf8" in line for line in lines)
    plain = _gc(str(root), "--max-size", "0", "--grace", "0s", "--dry-run")  # the summary
    _clean(plain)


@pytest.mark.slow
def test_the_log_names_every_removal_after_a_sigkill(tmp_path):
    root = tmp_path / "kv"
    before = {p.name for p in _fill(root, 20_000, size=1)}
    log = tmp_path / "gc.jsonl"
    run = _start_gc(str(root), "--max-size", "0", "--grace", "0s", "--log", str(log))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b'"remove"') >= 2000:
            break
        time.sleep(0.005)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    left = {p.name for p in root.iterdir()}
    removed = before - left
    assert 0 < len(removed) < len(before), "the kill did not land mid-run"
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # whole lines only
    logged = {entry["path"] for entry in lines if entry["action"] == "remove"}
    assert lines[0]["action"] == "start"
    assert removed <= logged  # every removal is in the log
    assert len(logged - removed) <= 1  # at most the chunk being removed when it was killed
    # the next run appends to the same log, after the killed one's lines
    done = _gc(str(root), "--max-size", "0", "--grace", "0s", "--log", str(log))
    assert done.exit_code == 0, done.stdout + done.stderr
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert again[: len(lines)] == lines
    assert again[-1]["action"] == "end"
    # a kill between a file's rename and its unlink leaves it under gc's private name (its own
    # name already logged as removed): the next run removes it under that name
    paths = {e["path"] for e in again if e["action"] == "remove"}
    leftovers = {p for p in paths if p.startswith(PRIVATE_PREFIX)}
    assert len(leftovers) <= 1, leftovers
    assert paths - leftovers == before
    assert os.listdir(root) == []


def test_an_unreadable_subfolder_is_reported_and_is_exit_1(kvtool: Kvtool, tmp_path, monkeypatch):
    root = tmp_path / "kv"
    _fill(root, 3)
    hidden = _fill(root / "locked", 3, start=10)
    if os.geteuid() == 0:  # root reads any folder: the kernel's refusal is played here
        real = os.open

        def refuse(path, flags, *args, **kw):
            if str(path) == "locked":
                raise PermissionError(13, "Permission denied")
            return real(path, flags, *args, **kw)

        monkeypatch.setattr(os, "open", refuse)
    else:
        (root / "locked").chmod(0)
    try:
        done = kvtool("gc", str(root), "--max-size", "0", "--grace", "0s")
    finally:
        (root / "locked").chmod(0o755)
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "could not read 1 folder (locked)" in done.stdout
    assert "left 0 B and what the unreadable folders hold" in done.stdout
    assert all(path.exists() for path in hidden)


def test_a_dry_run_in_another_process_chooses_what_the_real_run_removes(tmp_path):
    root = tmp_path / "kv"
    _fill(root, 200)  # all last used in the same second, as on a mount that keeps seconds
    when = int(time.time() - OLD)
    for path in root.iterdir():
        os.utime(path, (when, when))
    args = [str(root), "--max-size", "1600B", "--grace", "0s", "--list", "--json"]
    dry = subprocess.run(
        [sys.executable, "-m", "kvtool", "gc", *args, "--dry-run"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "1"},
    )  # fmt: skip
    real = subprocess.run(
        [sys.executable, "-m", "kvtool", "gc", *args],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "2"},
    )  # fmt: skip
    assert dry.returncode == real.returncode == 0, dry.stderr + real.stderr
    listed = {f["path"] for f in json.loads(dry.stdout)["files"]}
    removed = {f["path"] for f in json.loads(real.stdout)["files"]}
    assert len(listed) == 100
    assert listed == removed
    left = {p.name for p in root.iterdir()}
    assert len(left) == 100
    assert not left & removed

"""gc's lock, attacked: whatever lies at its name (a FIFO, a link, a folder, a large file,
hostile contents) is refused or goes stale without a hang or a traceback; of several
processes racing to take a stale lock over, exactly one wins; a run keeps its lock by
refreshing it and stops when it has lost it."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import has_control_character
from kvtool.folders import lock as lock_module
from kvtool.folders.lock import STALE_S, TAKE_S, Busy, Lock, Lost, NotOurs, describe, parse_holder
from kvtool.folders.walk import LOCK_NAME, Root

HOSTILE = [
    b'{"host": "node-1", "pid": 1e20, "started": 1.5e9}',
    b'{"host": "node-1", "pid": NaN, "started": NaN}',
    b'{"host": "node-1", "pid": -4, "started": Infinity}',
    b'{"host": "node-1", "pid": true, "started": -1e308}',
    b'{"host": "\x1b]0;owned\x07\x1b[2J\nforged line", "pid": 7}',
    b"[" * 2040 + b"]" * 2040,  # deeper than json's recursion limit, within the 4 KiB read
    b'{"a":' * 600 + b"1" + b"}" * 600,
    b"\xff\xfe\x00garbage",
    b"",
    b'"just a string"',
    b'{"host": 12, "pid": "12", "started": "yesterday"}',
]


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lock_contents_parse_to_facts_that_print_safely(data):
    holder = parse_holder(data)
    assert isinstance(holder, dict)
    shown = describe(holder)
    assert not has_control_character(shown)
    assert "1e20" not in shown
    assert "100000000000000000000" not in shown


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_no_lock_contents_raise(data):
    holder = parse_holder(data)
    assert not has_control_character(describe(holder))
    if "pid" in holder:
        assert 0 < holder["pid"] < 2**31


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_a_fresh_hostile_lock_is_busy_and_an_old_one_stale(tmp_path, data):
    path = tmp_path / LOCK_NAME
    path.write_bytes(data)
    with Root(tmp_path) as root:
        with pytest.raises(Busy) as busy:
            Lock(root).acquire()
        assert not has_control_character(str(busy.value))
        os.utime(path, (time.time() - STALE_S - 60,) * 2)
        lock = Lock(root)
        lock.acquire()
        assert json.loads(path.read_text())["pid"] == os.getpid()
        lock.release()
    assert not path.exists()


def _alarm(seconds: int):
    def ring(_signum, _frame):
        raise TimeoutError("the lock hung")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    return previous


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: os.mkfifo(p), "a FIFO"),
        (lambda p: p.symlink_to(p.parent / "nowhere"), "a symbolic link"),
        (lambda p: p.symlink_to("/etc/hostname"), "a symbolic link"),
        (lambda p: p.mkdir(), "a folder"),
        (lambda p: p.write_bytes(b"{" + b" " * 5000 + b"}"), "a file of 5,002 bytes"),
    ],
)
def test_anything_but_a_small_regular_file_is_not_ours_without_a_hang(tmp_path, make, kind):
    path = tmp_path / LOCK_NAME
    make(path)
    previous = _alarm(10)
    try:
        with Root(tmp_path) as root, pytest.raises(NotOurs, match=kind):
            Lock(root).acquire()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert os.path.lexists(path)  # never removed, never replaced
    assert sorted(os.listdir(tmp_path)) == [LOCK_NAME]  # no attempt left behind


def test_a_damaged_lock_goes_stale_by_its_age(tmp_path):
    path = tmp_path / LOCK_NAME
    path.write_text("{not json")
    with Root(tmp_path) as root, pytest.raises(Busy):
        Lock(root).acquire()
    os.utime(path, (time.time() - STALE_S - 60,) * 2)
    with Root(tmp_path) as root:
        lock = Lock(root)
        lock.acquire()
        assert json.loads(path.read_text())["pid"] == os.getpid()
        lock.release()
    assert not path.exists()


def test_the_lock_is_one_holder_at_a_time(tmp_path):
    with Root(tmp_path) as root:
        first = Lock(root)
        first.acquire()
        with pytest.raises(Busy):
            Lock(root).acquire()
        assert (tmp_path / LOCK_NAME).exists()
        first.release()
    assert not (tmp_path / LOCK_NAME).exists()


def _taker(folder: str, start: float, hold: float, results) -> None:
    """One racing process: wait for the start, try to take the lock, hold it a while; says
    when it held it (CLOCK_MONOTONIC, one clock for every process of the machine)."""
    with Root(Path(folder)) as root:
        lock = Lock(root)
        while time.time() < start:
            pass
        try:
            lock.acquire()
        except Busy:
            results.put(("busy", 0.0, 0.0))
            return
        won = time.monotonic()
        time.sleep(hold)
        mine = os.stat(LOCK_NAME, dir_fd=root.fd, follow_symlinks=False).st_ino == lock._ino
        results.put(("won" if mine else "lost", won, time.monotonic()))
        lock.release()


def _race(folder: Path, takers: int) -> list[tuple[str, float, float]]:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start = time.time() + 0.3
    procs = [
        context.Process(target=_taker, args=(str(folder), start, 1.0, results))
        for _ in range(takers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return sorted(results.get(timeout=5) for _ in procs)


def _one_holder_at_a_time(outcome: list[tuple[str, float, float]]) -> None:
    """No two takers held the lock at once, and exactly one won the race: a taker the
    machine slowed past the winner's release finds the lock free and may take it then, which
    is no second winner of the race."""
    assert all(result != "lost" for result, _, _ in outcome), outcome  # taken while held
    held = sorted((won, released) for result, won, released in outcome if result == "won")
    assert held, outcome
    for (_, released), (won, _) in itertools.pairwise(held):
        assert won >= released, f"two holders at once: {held}"
    assert sum(won < held[0][1] for won, _ in held) == 1, held


def _stale_lock(folder: Path) -> None:
    path = folder / LOCK_NAME
    path.write_text(json.dumps({"host": "node-9", "pid": 77, "started": 1.0}))
    os.utime(path, (time.time() - STALE_S - 60,) * 2)


@pytest.mark.parametrize("round_", range(4))
def test_exactly_one_of_eight_racing_takers_wins_a_stale_lock(tmp_path, round_):
    _stale_lock(tmp_path)
    _one_holder_at_a_time(_race(tmp_path, 8))
    assert not (tmp_path / LOCK_NAME).exists()
    assert os.listdir(tmp_path) == []  # markers and set-aside locks all gone


def test_a_taker_that_died_mid_takeover_does_not_wedge_the_lock(tmp_path):
    _stale_lock(tmp_path)
    info = os.stat(tmp_path / LOCK_NAME)
    marker = tmp_path / f"{LOCK_NAME}.take-{info.st_ino}-{info.st_mtime_ns}-0"
    marker.write_text("")
    with Root(tmp_path) as root, pytest.raises(Busy):  # a taker may be at it: wait
        Lock(root).acquire()
    os.utime(marker, (time.time() - TAKE_S - 5,) * 2)  # it died: the next level decides
    _one_holder_at_a_time(_race(tmp_path, 6))


def test_a_holder_refreshes_its_lock_and_stops_when_it_lost_it(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_module, "REFRESH_S", 0.0)
    path = tmp_path / LOCK_NAME
    with Root(tmp_path) as root:
        lock = Lock(root)
        lock.acquire()
        os.utime(path, (time.time() - STALE_S + 5,) * 2)  # about to look stale
        lock.refresh()
        assert time.time() - path.stat().st_mtime < 5
        # another run took it over (it had looked stale to it): this one stops
        path.unlink()
        path.write_text(json.dumps({"host": "node-2", "pid": 5, "started": time.time()}))
        with pytest.raises(Lost):
            lock.refresh()
        lock.release()  # not this run's any more: left alone
        assert json.loads(path.read_text())["host"] == "node-2"


def test_a_dead_process_of_this_machine_holds_no_lock_and_a_live_one_does(tmp_path):
    import socket
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    path = tmp_path / LOCK_NAME
    here = lock_module._machine()
    path.write_text(json.dumps({**here, "pid": int(dead.stdout), "started": time.time()}))
    with Root(tmp_path) as root:
        lock = Lock(root)
        lock.acquire()
        lock.release()
        # a live process (this one's parent), written as this machine's: busy
        path.write_text(json.dumps({**here, "pid": os.getppid(), "started": time.time()}))
        with pytest.raises(Busy, match=f"host {socket.gethostname()}"):
            Lock(root).acquire()
        # the same pid on another machine (another boot): not judged by this one's processes
        other = {**here, "boot_id": "another-boot", "pid": int(dead.stdout)}
        path.write_text(json.dumps(other))
        with pytest.raises(Busy):
            Lock(root).acquire()

"""The clean-up door: clean-ups run last first whatever the way out, a folder is registered
before it exists, signals become Interrupted with the shell's exit status, and signals wait
while clean-ups run."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from kvtool.scratch import Interrupted, Scratch, interrupts, remove_tree, signals_held, unique_name


def test_clean_ups_run_last_first_and_a_failing_one_does_not_stop_the_rest() -> None:
    ran: list[str] = []

    def boom() -> None:
        raise OSError("disk gone")

    with Scratch() as scratch:
        scratch.on_exit(ran.append, "first registered")
        scratch.on_exit(boom)
        scratch.on_exit(ran.append, "last registered")
    assert ran == ["last registered", "first registered"]
    assert scratch.failures == ["boom: disk gone"]


def _failing_work(parent: Path, made: list[Path]) -> None:
    with Scratch() as scratch:
        folder = scratch.folder(parent, "kvtool-test-")
        made.append(folder)
        (folder / "sub").mkdir()
        (folder / "sub" / "file").write_bytes(b"x" * 100)
        raise RuntimeError("the work failed")


def test_a_folder_goes_with_its_contents_on_an_error(tmp_path: Path) -> None:
    made: list[Path] = []
    with pytest.raises(RuntimeError):
        _failing_work(tmp_path, made)
    assert made[0].name.startswith(f"kvtool-test-{os.getpid()}-")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_is_registered_before_it_is_made(tmp_path: Path) -> None:
    """Even when making it fails, the clean-up is in place (and finds nothing to remove)."""
    scratch = Scratch()
    with pytest.raises(FileNotFoundError):
        scratch.folder(tmp_path / "missing", "kvtool-test-")
    assert len(scratch._undo) == 1
    scratch.close()
    assert scratch.failures == []


def test_temporary_folders_live_under_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with Scratch() as scratch:
        folder = scratch.temporary_folder("kvtool-test-")
        assert folder.parent == tmp_path
    assert not folder.exists()


def test_remove_tree_removes_a_link_not_what_it_points_to(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.mkdir()
    (target / "data").write_text("keep me")
    link = tmp_path / "link"
    link.symlink_to(target)
    remove_tree(link)
    assert not link.exists()
    assert (target / "data").read_text() == "keep me"
    remove_tree(tmp_path / "nothing")  # nothing there is fine


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_each_signal_is_interrupted_with_the_shells_status(signum: int, status: int) -> None:
    with pytest.raises(Interrupted) as caught:
        _signalled(lambda: os.kill(os.getpid(), signum))
    assert caught.value.exit_status == status
    assert isinstance(caught.value, KeyboardInterrupt)
    assert str(caught.value) == signal.Signals(signum).name


def _signalled(work: Callable[[], object]) -> None:
    """``work`` under ``interrupts()``, with time for a pending handler to run."""
    with interrupts():
        work()
        for _ in range(1000):  # the handler runs between bytecodes
            pass


def test_the_previous_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_during_the_clean_ups_waits_until_they_are_done(tmp_path: Path) -> None:
    ran: list[str] = []

    def second_signal() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # held: the next clean-up still runs
        ran.append("after the signal")

    def work() -> None:
        with Scratch() as scratch:
            scratch.on_exit(ran.append, "still ran")
            scratch.on_exit(second_signal)

    with pytest.raises(Interrupted):
        _signalled(work)
    assert ran == ["after the signal", "still ran"]


def test_signals_held_delivers_afterwards() -> None:
    steps: list[str] = []

    def work() -> None:
        with signals_held():
            os.kill(os.getpid(), signal.SIGHUP)
            steps.append("went on while held")

    with pytest.raises(Interrupted):
        _signalled(work)
    assert steps == ["went on while held"]


def test_unique_names_differ() -> None:
    assert len({unique_name("p-") for _ in range(100)}) == 100


def test_signals_are_held_while_other_threads_run() -> None:
    """With another thread alive the kernel may deliver a process signal to it; the hold must
    still keep the handler from raising in the middle of the clean-ups."""
    import threading

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()
    ran: list[str] = []

    def work() -> None:
        with Scratch() as scratch:
            scratch.on_exit(ran.append, "still ran")
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                scratch.on_exit(os.kill, os.getpid(), signum)

    try:
        for _ in range(20):
            ran.clear()
            with pytest.raises(Interrupted):
                _signalled(work)
            assert ran == ["still ran"]
    finally:
        stop.set()


def test_a_sigkilled_runs_folder_is_swept_by_the_next_and_a_live_ones_is_not(
    tmp_path: Path,
) -> None:
    """SIGKILL runs no clean-up: its folder (and the temporaries in it) stayed for ever. The
    next run with the same prefix removes it; a live run's folder, one without an owner file
    and one another host owns are left alone."""
    import signal
    import socket
    import subprocess
    import sys

    from kvtool.scratch import OWNER, Scratch

    code = (
        "import sys, time; from pathlib import Path; from kvtool.scratch import Scratch\n"
        "with Scratch() as s:\n"
        "    f = s.folder(Path(sys.argv[1]), 'kvtool-bench-')\n"
        "    (f / '.chunk.tmp').write_bytes(b'x' * 4096)\n"
        "    print(f, flush=True); time.sleep(60)\n"
    )
    killed = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    live = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert killed.stdout is not None
        assert live.stdout is not None
        dead_folder = Path(killed.stdout.readline().strip())
        live_folder = Path(live.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert (dead_folder / ".chunk.tmp").exists()  # what SIGKILL leaves
        other = tmp_path / "kvtool-bench-1-aaaaaa"  # another node's run on a shared folder
        other.mkdir()
        (other / OWNER).write_text(f"not-{socket.gethostname()} 1 1\n")
        old = tmp_path / "kvtool-bench-2-bbbbbb"  # no owner file: an older kvtool's
        old.mkdir()
        with Scratch() as scratch:
            mine = scratch.folder(tmp_path, "kvtool-bench-")
            assert scratch.swept == [dead_folder]
            assert scratch.swept_bytes >= 4096  # what it held, for the command to say
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
                [live_folder.name, other.name, old.name, mine.name]
            )
    finally:
        live.kill()
        live.wait()

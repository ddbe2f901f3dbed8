"""The one clean-up door: every scratch file, folder or object kvtool makes is registered here
before it exists, and removed when the work ends: normally, on an error, or on SIGINT, SIGTERM
(what Slurm and Kubernetes send on preemption) or SIGHUP (a closed terminal) alike.

* ``interrupts()`` (installed by ``cli/app.py`` around every command) turns the three signals
  into ``Interrupted``, a ``KeyboardInterrupt``, so every ``finally`` and ``with`` runs; the
  command then exits 128 + the signal (130, 143, 129).
* ``Scratch`` is a stack of clean-ups, run last in, first out. A folder or file is registered
  *before* it is made, so a signal between making it and registering it cannot leak it; while
  the clean-ups run, the signals are held (``signals_held``), so a second Ctrl-C cannot cut
  them short, and delivered once they are done.
* SIGKILL runs nothing: a ``Scratch.folder`` therefore holds an owner file (host, pid and the
  process's start time), and the next ``Scratch.folder`` with the same prefix in the same
  place removes the folders whose owner is a process of this host that is gone
  (``sweep_stale``), and counts them and their bytes in ``swept`` and ``swept_bytes`` for the
  command to say so. Folders another host owns are never touched here (``kvtool gc`` is for
  a shared folder's leftovers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A signal asked kvtool to stop; ``exit_status`` is what a shell reports for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` in the main thread while this is
    entered (elsewhere, or off the main thread, it changes nothing); the previous handlers come
    back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for clean-ups that must finish: one that arrives now is
    recorded and delivered to the handler that was in place when this ends. (Handlers, not a
    thread's signal mask: with other threads running, the kernel may hand the signal to any
    of them, and Python still runs the handler in the main thread at once.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            handler = previous[signal.Signals(pending[0])]
            if callable(handler):
                handler(pending[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), pending[0])  # what it would have done


def remove_tree(path: Path) -> None:
    """Remove a folder and what it holds, or a file; nothing there is fine. Symlinks are
    removed, never followed."""
    import shutil

    if path.is_symlink() or path.is_file():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


OWNER = ".kvtool-owner"


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or
    None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None


def _owner_line(pid: int) -> str:
    import socket

    return f"{socket.gethostname()} {pid} {process_start(pid) or '?'}\n"


def sweep_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove the ``<prefix>*`` folders in ``parent`` whose owner file names a process of
    this host that no longer runs (SIGKILLed, or the node rebooted: its pid now names
    another process, started at another time). Returns what was removed. A folder without
    an owner file, or owned by another host, is left alone."""
    return [path for path, _ in _sweep(parent, prefix)]


def tree_bytes(path: Path) -> int:
    """The disk space a folder and what it holds take (``du``'s count; links not followed)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def _sweep(parent: Path, prefix: str) -> list[tuple[Path, int]]:
    """``sweep_stale``, each folder removed with the bytes it took."""
    import socket

    host = socket.gethostname()
    removed: list[tuple[Path, int]] = []
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            owner = Path(entry.path, OWNER).read_text(encoding="utf-8").split()
        except (OSError, UnicodeDecodeError):
            continue
        if len(owner) != 3 or owner[0] != host or not owner[1].isdigit():
            continue
        started = process_start(int(owner[1]))
        if started is not None and owner[2] in (started, "?"):
            continue  # that process still runs
        size = tree_bytes(Path(entry.path))
        remove_tree(Path(entry.path))
        removed.append((Path(entry.path), size))
    return removed


def unique_name(prefix: str) -> str:
    """``<prefix><pid>-<random>``: no two runs, on one node or many, share a scratch name."""
    import secrets  # here, not at the top: every command imports this module at start-up

    return f"{prefix}{os.getpid()}-{secrets.token_hex(3)}"


class Scratch:
    """Clean-ups for what one piece of work makes; ``with Scratch() as scratch:`` runs them
    on the way out, whatever the way out is."""

    def __init__(self) -> None:
        self._undo: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.failures: list[str] = []
        self.swept: list[Path] = []  # stale folders of killed runs removed on the way in
        self.swept_bytes = 0  # and the disk space they took

    def __enter__(self) -> Scratch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def on_exit(self, undo: Callable[..., Any], *args: Any) -> None:
        """Run ``undo(*args)`` when the work ends (after everything registered later)."""
        self._undo.append((undo, args))

    def folder(self, parent: Path, prefix: str) -> Path:
        """A new folder ``parent/<prefix><pid>-<random>``, removed with all it holds; what
        SIGKILLed runs of this host left beside it under the same prefix goes first."""
        for swept, size in _sweep(parent, prefix):
            self.swept.append(swept)
            self.swept_bytes += size
        path = parent / unique_name(prefix)
        self.on_exit(remove_tree, path)  # registered first: a signal now still removes it
        path.mkdir()
        (path / OWNER).write_text(_owner_line(os.getpid()))
        return path

    def temporary_folder(self, prefix: str) -> Path:
        """A new folder under the system's temporary folder (``$TMPDIR``), removed after."""
        import tempfile

        return self.folder(Path(tempfile.gettempdir()), prefix)

    def path(self, path: Path) -> Path:
        """``path``, removed when the work ends (the caller makes it)."""
        self.on_exit(remove_tree, path)
        return path

    def close(self) -> None:
        """Run the clean-ups, last first, with the signals held until all have run. A
        clean-up that fails is recorded in ``failures`` and the rest still run."""
        with signals_held():
            while self._undo:
                undo, args = self._undo.pop()
                try:
                    undo(*args)
                except Exception as exc:  # a clean-up must not hide the others
                    self.failures.append(f"{getattr(undo, '__name__', undo)}: {exc}")

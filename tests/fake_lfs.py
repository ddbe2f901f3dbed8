"""A fake ``lfs`` for the tests of ``kvtool gc --release``, ``--candidates lfs-find`` and
``kvtool inspect``'s HSM states: put on PATH, it records every call and answers as Lustre's
``lfs`` does (the formats of lfs.c @c881f8eb, held to the recorded outputs in
tests/fixtures/probe by tests/unit/probe/test_lfs.py), keeping each file's HSM flags in a
JSON file by device and inode (a file's state follows the file, not its name, as on Lustre).

* ``hsm_state FILE...``: ``FILE: (0x%08x) <names>[, archive_id:1]``; a file it cannot open is
  on stderr, exit status non-zero, as lfs does;
* ``path2fid FILE...``: a FID made of the inode number (``[0x2000004xx:0x<ino>:0x0]``);
* ``hsm_release --mntpath MNT FID...``: the MDT's rule (archived, and neither dirty,
  never_release nor lost; else EPERM) one FID after another, stopping at the first it cannot
  release; a file whose ``dev:ino`` is listed in ``$FAKE_LFS_BUSY`` is open for writing
  (EBUSY); each released file gets the released flag;
* ``find TOP --type f [--atime +Ns] [--mtime +Ns] --print0``: runs GNU ``find -H`` with the
  same filter (``! -newerat @T``, ``! -newermt @T``, T = now - N - 1 as lfs's margin of a
  second has it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

EXISTS, DIRTY, RELEASED, ARCHIVED = 0x1, 0x2, 0x4, 0x8
NORELEASE, NOARCHIVE, LOST = 0x10, 0x20, 0x40
_NAMES = (
    (RELEASED, "released"), (EXISTS, "exists"), (DIRTY, "dirty"), (ARCHIVED, "archived"),
    (NORELEASE, "never_release"), (NOARCHIVE, "never_archive"), (LOST, "lost_from_hsm"),
)  # fmt: skip
_SEQ = 0x200000400


class FakeLfs:
    """The fake installed in ``bin`` (put it first on PATH); ``db`` holds the flags, ``log``
    the calls (one JSON list of arguments a line)."""

    def __init__(self, folder: Path) -> None:
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.db = folder / "hsm.json"
        self.log = folder / "calls.jsonl"
        self.db.write_text("{}")
        self.log.write_text("")
        lfs = self.bin / "lfs"
        lfs.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{__file__}" "$@"\n')
        lfs.chmod(0o755)

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKE_LFS_DB": str(self.db),
            "FAKE_LFS_LOG": str(self.log),
        }

    def set(self, path: Path, flags: int) -> None:
        data = json.loads(self.db.read_text())
        data[_key(os.stat(path))] = flags
        self.db.write_text(json.dumps(data))

    def flags(self, path: Path) -> int:
        return int(json.loads(self.db.read_text()).get(_key(os.stat(path)), 0))

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def _key(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}"


def _fid(ino: int) -> str:
    return f"[0x{_SEQ + (ino >> 32):x}:0x{ino & 0xFFFFFFFF:x}:0x0]"


def _ino(fid: str) -> int:
    seq, oid, _ver = (int(part, 16) for part in fid.strip("[]").split(":"))
    return ((seq - _SEQ) << 32) | oid


@contextlib.contextmanager
def _db() -> Any:
    path = os.environ["FAKE_LFS_DB"]
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(Path(path).read_text())
        yield data
        Path(path).write_text(json.dumps(data))


def _state(argv: list[str]) -> int:
    rc = 0
    with _db() as data:
        for path in argv:
            try:
                info = os.stat(path)  # lfs opens it (O_RDONLY | O_NONBLOCK): follows a link
            except OSError as exc:
                print(f"lfs hsm_state: get HSM state for '{path}' failed: {exc.strerror}",
                      file=sys.stderr)  # fmt: skip
                rc = rc or exc.errno or 1
                continue
            flags = int(data.get(_key(info), 0))
            names = "".join(f" {name}" for bit, name in _NAMES if flags & bit)
            archive = ", archive_id:1" if flags else ""
            sys.stdout.buffer.write(
                os.fsencode(path) + f": (0x{flags:08x}){names}{archive}\n".encode()
            )
    return rc


def _path2fid(argv: list[str]) -> int:
    rc = 0
    for path in argv:
        try:
            info = os.lstat(path)
        except OSError as exc:
            print(f"lfs path2fid: cannot get fid for '{path}': {exc.strerror}", file=sys.stderr)
            rc = exc.errno or 1
            continue
        head = os.fsencode(path) + b": " if len(argv) > 1 else b""
        sys.stdout.buffer.write(head + _fid(info.st_ino).encode() + b"\n")
    return rc


def _release(argv: list[str]) -> int:
    mount = argv[argv.index("--mntpath") + 1]
    dev = os.stat(mount).st_dev
    fids = [a for a in argv if a.startswith("[")]
    busy = set(filter(None, os.environ.get("FAKE_LFS_BUSY", "").split(",")))
    with _db() as data:
        for fid in fids:
            key = f"{dev}:{_ino(fid)}"
            flags = int(data.get(key, 0))
            if key in busy:
                why = errno.EBUSY
            elif flags & (DIRTY | NORELEASE | LOST) or not flags & ARCHIVED:
                why = errno.EPERM
            else:
                data[key] = flags | RELEASED
                continue
            print(f"Cannot send HSM request (use of {mount}): {os.strerror(why)}", file=sys.stderr)
            return why
    return 0


def _find(argv: list[str]) -> int:
    top = argv[0]
    now = time.time()
    args = ["find", "-H", top, "-type", "f"]
    for option, test in (("--atime", "-newerat"), ("--mtime", "-newermt")):
        if option in argv:
            older = int(argv[argv.index(option) + 1].strip("+s"))
            args += ["!", test, f"@{int(now) - older - 1}"]
    fds = [int(top.split("/")[4])] if top.startswith("/proc/self/fd/") else []
    return subprocess.run([*args, "-print0"], pass_fds=fds).returncode


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_LFS_LOG"], "a") as log:
        log.write(json.dumps([os.fsdecode(a) for a in argv]) + "\n")
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "--version":
        print("lfs 2.15.6 (a fake: tests/fake_lfs.py)")
        return 0
    handlers = {"hsm_state": _state, "path2fid": _path2fid, "hsm_release": _release,
                "find": _find}  # fmt: skip
    if command not in handlers:
        print(f"lfs: unknown command '{command}'", file=sys.stderr)
        return 22
    return handlers[command](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

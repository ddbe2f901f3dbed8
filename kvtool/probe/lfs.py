"""Lustre's ``lfs``, for ``kvtool gc --release`` and ``kvtool inspect``: HSM state, FIDs,
release, and the MDS-side ``lfs find``. Every call goes through the host (``LocalHost``), and
every file is named ``/proc/self/fd/N/name``: ``N`` is a folder kvtool holds open (passed to
``lfs`` under its number), so ``lfs`` looks the name up in that very folder, as gc's own
``dir_fd`` calls do, never through a path a writer could swap for a link.

What ``lfs`` prints and refuses was read in lustre-release (lfs.c, llite/dir.c, mdt_open.c
@c881f8eb; tests/fixtures/probe/README.md lists the recorded outputs the parsers are tested on):

* ``lfs hsm_state FILE...`` prints ``FILE: (0x%08x) <flag names>[, archive_id:N]`` per file;
* ``lfs path2fid FILE...`` prints the FID (``[0x200000403:0x11f:0x0]``), ``FILE: FID`` each
  when given several;
* ``lfs hsm_release --mntpath MNT FID...`` releases by FID (no name is looked up: the very
  files whose FIDs were read), in the kernel one FID after another, stopping at the first it
  cannot release; it prints nothing on success. The kernel refuses a request of
  ``MDS_MAXREQSIZE / 3`` = 1,706 bytes or more (``E2BIG``): 24 bytes of header and 32 a file,
  so at most 52 files a call (``RELEASE_BATCH`` is 50). The MDT releases only a file that is
  archived and neither dirty, never_release nor lost (``mdt_hsm_release_allow``: else
  ``EPERM``), whose data version is the archived one, and that no one has open (a lease);
* ``lfs find DIR --type f --atime +Ns --mtime +Ns --print0`` filters on the metadata server;
  time units (``s``) came with Lustre 2.13 (LU-12027).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from typing import NamedTuple

from kvtool.probe.host import NOT_INSTALLED, CommandResult, LocalHost
from kvtool.probe.parse import HsmState, parse_lfs_hsm_state, parse_lfs_path2fid

RELEASE_BATCH = 50  # files a `lfs hsm_release` call; the kernel's limit is 52
STATE_BATCH = 500  # files a `lfs hsm_state` or `lfs path2fid` call (argv stays small)
FIND_TIMEOUT_S = 6 * 3600.0  # `lfs find` over 100M files takes a while
CALL_TIMEOUT_S = 300.0


class File(NamedTuple):
    """A file as ``lfs`` is given it: the handle of its folder and its name there."""

    folder_fd: int
    name: str

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.folder_fd}/{self.name}"


def nameable(name: str) -> bool:
    """Whether ``lfs`` can be given the name and its answer read back: its output is one line
    a file, so a name with a newline cannot be told apart (such a file is left alone)."""
    return "\n" not in name and "\r" not in name


class Lfs:
    """``lfs`` through ``host`` (a ``LocalHost``: it passes folder handles to ``lfs``)."""

    def __init__(self, host: LocalHost, *, program: str = "lfs") -> None:
        self.host = host
        self.program = program

    def version(self) -> str | None:
        """``lfs --version``'s answer (``lfs 2.15.6``), or None when lfs is not installed."""
        done = self.host.run("lfs_version", [self.program, "--version"], timeout_s=30)
        if done.returncode == NOT_INSTALLED:
            return None
        return (done.stdout or done.stderr).strip() or self.program

    def hsm_state(self, files: Sequence[File]) -> dict[File, HsmState]:
        """Each file's HSM state; a file lfs could not read (gone, not Lustre) is left out."""
        found: dict[File, HsmState] = {}
        for batch in _batches(files, STATE_BATCH):
            done = self._run("lfs_hsm_state", ["hsm_state"], batch)
            states = parse_lfs_hsm_state(done.stdout)
            for file in batch:
                state = states.get(file.path)
                if state is not None:
                    found[file] = state
        return found

    def path2fid(self, files: Sequence[File]) -> dict[File, str]:
        """Each file's FID; a file lfs could not read is left out."""
        found: dict[File, str] = {}
        for batch in _batches(files, STATE_BATCH):
            done = self._run("lfs_path2fid", ["path2fid"], batch)
            fids = parse_lfs_path2fid(done.stdout, [f.path for f in batch])
            for file in batch:
                fid = fids.get(file.path)
                if fid is not None:
                    found[file] = fid
        return found

    def hsm_release(self, mount_fd: int, fids: Sequence[str]) -> CommandResult:
        """Release the files of ``fids`` (at most ``RELEASE_BATCH``) on the file system that
        holds the open folder ``mount_fd``. The caller reads each file's state afterwards:
        a failure stops the kernel at that file, and those after it stay as they were."""
        if len(fids) > RELEASE_BATCH:
            raise ValueError(f"at most {RELEASE_BATCH} files a release, not {len(fids)}")
        argv = [self.program, "hsm_release", "--mntpath", f"/proc/self/fd/{mount_fd}", *fids]
        return self.host.run_in_folders("lfs_hsm_release", argv, [mount_fd], CALL_TIMEOUT_S)

    def find(
        self, root_fd: int, *, older_s: int, times: Sequence[str]
    ) -> Generator[tuple[tuple[str, ...], str], None, CommandResult]:
        """``lfs find`` below the open folder ``root_fd``: the regular files whose ``times``
        (``atime``, ``mtime``) are all more than ``older_s`` seconds old, as (folder parts
        below the root, name), as they come. Returns the finished command."""
        top = f"/proc/self/fd/{root_fd}"
        argv = [self.program, "find", top, "--type", "f"]
        for kind in times:
            argv += [f"--{kind}", f"+{max(0, older_s)}s"]
        argv.append("--print0")
        listing = self.host.records("lfs_find", argv, [root_fd], timeout_s=FIND_TIMEOUT_S)
        prefix = (top + "/").encode()
        while True:
            try:
                record = next(listing)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if not record.startswith(prefix):
                continue  # the folder itself, or a path lfs did not start from ours
            parts = record[len(prefix) :].decode("utf-8", "surrogateescape").split("/")
            if all(parts):
                yield tuple(parts[:-1]), parts[-1]

    def _run(self, key: str, command: list[str], batch: Sequence[File]) -> CommandResult:
        folders = sorted({f.folder_fd for f in batch})
        argv = [self.program, *command, *(f.path for f in batch)]
        return self.host.run_in_folders(key, argv, folders, CALL_TIMEOUT_S)


def _batches(files: Sequence[File], size: int) -> Iterator[Sequence[File]]:
    for start in range(0, len(files), size):
        yield files[start : start + size]

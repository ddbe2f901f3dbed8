"""Folders gc refuses to clean, whatever limits it is given: ``/``, a home folder and every
folder above one, and a folder that holds a system's own folders (``etc``, ``usr``, ``var``:
the root of a system image or a container). A KV folder is never one of these, so a path
like one of them is a mistake (a variable that was empty, a tab-completed ``/``), and gc is
the one command that deletes.

Folders are compared by identity (device and inode), not by spelling, so ``/fsx/..``, a link
to ``/`` or a bind mount of a home folder are refused as well.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kvtool.errors import InputError
from kvtool.folders.walk import Root

SYSTEM_FOLDERS = ("etc", "usr", "var")
_PASSWD_LIMIT = 1 << 20  # bytes of /etc/passwd read for home folders


def home_folders(env: dict[str, str] | None = None, passwd: str | None = None) -> list[str]:
    """The home folders of this machine's users: ``$HOME``, the invoking user's (and with
    sudo, ``$SUDO_USER``'s), and every home in ``/etc/passwd`` (the local file, read
    directly: enumerating a directory service could take minutes)."""
    env = dict(os.environ) if env is None else env
    homes = [env.get("HOME", "")]
    if passwd is None:
        try:
            with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
                passwd = f.read(_PASSWD_LIMIT)
        except OSError:
            passwd = ""
    try:
        import pwd

        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
        if env.get("SUDO_USER"):
            homes.append(pwd.getpwnam(env["SUDO_USER"]).pw_dir)
    except (ImportError, KeyError):
        pass
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) >= 7:
            homes.append(fields[5])
    return [home for home in dict.fromkeys(homes) if home.startswith("/")]


def protected(homes: list[str]) -> dict[tuple[int, int], str]:
    """(device, inode) of every folder gc refuses by identity, with why in words."""
    found: dict[tuple[int, int], str] = {}

    def add(path: Path, why: str) -> None:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return
        found.setdefault((info.st_dev, info.st_ino), why)

    add(Path("/"), "the root folder /")
    for home in homes:
        path = Path(home)
        add(path, f"the home folder {home}")
        for parent in path.parents:
            add(parent, f"a folder that holds the home folder {home}")
    return found


def refuse_system_folder(root: Root, *, homes: list[str] | None = None) -> None:
    """InputError (exit 2, nothing touched) when ``root`` is a folder gc never cleans."""
    refused = protected(home_folders() if homes is None else homes)
    why = refused.get((root.dev, root.ino))
    if why is None:
        for name in SYSTEM_FOLDERS:
            try:
                info = os.stat(name, dir_fd=root.fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                why = f"a system's root folder (it holds {name}/)"
                break
    if why is not None:
        raise InputError(
            f"{root.path} is {why}: kvtool gc never cleans it",
            "point gc at the engines' KV folder itself, e.g. /fsx/kv",
        )

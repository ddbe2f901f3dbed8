"""Folders gc refuses to clean, whatever limits it is given, by identity (device and inode, so
``/fsx/..``, a link or a bind mount are caught too):

* ``/``, a home folder and every folder above one;
* the system's own folders and everything below them (``/etc``, ``/usr``, ``/boot``, ``/bin``,
  ``/sbin``, ``/lib*``, ``/dev``, ``/run``, ``/proc``, ``/sys``, ``/var`` but below
  ``/var/tmp``), found by walking up from the folder's handle through ``..``;
* the shared folders themselves (``/tmp``, ``/var/tmp``, ``/opt``, ``/srv``, ``/mnt``,
  ``/media``: a KV folder may lie below one, never be one);
* a folder on a pseudo file system (proc, sysfs, cgroup, debugfs, ...: ``fstatfs`` of the
  handle);
* a folder that holds a system's own folders (``etc``, ``usr``, ``var``: the root of a system
  image or a container).

A KV folder is never one of these, so a path like one of them is a mistake (a variable that was
empty, a tab-completed ``/``), and gc is the one command that deletes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kvtool.errors import InputError
from kvtool.folders.walk import O_FOLDER, Root

SYSTEM_FOLDERS = ("etc", "usr", "var")
# the system's own trees: refused with everything below them
SYSTEM_TREES = (
    "/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/dev",
    "/run", "/proc", "/sys", "/var",
)  # fmt: skip
OPEN_TREES = ("/var/tmp",)  # below a system tree, a tree whose folders gc may clean
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/opt", "/srv", "/mnt", "/media")  # refused themselves
# f_type of the pseudo file systems (linux/magic.h): no KV folder lies on one
PSEUDO_FS = {
    0x9FA0: "proc", 0x62656572: "sysfs", 0x1CD1: "devpts", 0x27E0EB: "cgroup",
    0x63677270: "cgroup2", 0x64626720: "debugfs", 0x74726163: "tracefs",
    0x73636673: "securityfs", 0x6165676C: "pstore", 0xCAFE4A11: "bpf", 0x62656570: "configfs",
    0x65735543: "fusectl", 0x19800202: "mqueue", 0x0187: "autofs", 0x42494E4D: "binfmt_misc",
    0xDE5E81E4: "efivarfs", 0xF97CFF8C: "selinuxfs", 0x6E736673: "nsfs",
    0x67596969: "rpc_pipefs", 0x958458F6: "hugetlbfs",
}  # fmt: skip
_MAX_UP = 4096  # folders walked up from DIR to / at most
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


def _identities(paths: tuple[str, ...]) -> dict[tuple[int, int], str]:
    found: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        found.setdefault((info.st_dev, info.st_ino), os.path.realpath(path))
    return found


def ancestors(fd: int) -> list[tuple[int, int]] | None:
    """(device, inode) of the open folder ``fd`` and of every folder above it up to ``/``,
    itself first, walked through ``..`` from the handle (never by path); None where a folder
    on the way cannot be opened."""
    info = os.fstat(fd)
    chain = [(info.st_dev, info.st_ino)]
    current = fd
    try:
        for _ in range(_MAX_UP):
            parent = os.open("..", O_FOLDER, dir_fd=current)
            if current != fd:
                os.close(current)
            current = parent
            up = os.fstat(parent)
            if (up.st_dev, up.st_ino) == chain[-1]:  # / is its own parent
                return chain
            chain.append((up.st_dev, up.st_ino))
    except OSError:
        return None
    finally:
        if current != fd:
            os.close(current)
    return None


def system_tree(fd: int) -> str | None:
    """Why the open folder ``fd`` is a system folder, one below one, or a shared folder
    itself; None when it is none of these."""
    chain = ancestors(fd)
    if chain is None:
        return None
    shared = _identities(SHARED_FOLDERS)
    if chain[0] in shared:
        return f"the shared folder {shared[chain[0]]} (a KV folder may lie below it, not be it)"
    trees = _identities(SYSTEM_TREES)
    allowed = _identities(OPEN_TREES)
    for depth, identity in enumerate(chain):
        if identity in allowed:
            return None
        if identity in trees:
            if depth == 0:
                return f"the system folder {trees[identity]}"
            return f"below the system folder {trees[identity]}"
    return None


def pseudo_file_system(fd: int) -> str | None:
    """The name of the pseudo file system the open folder ``fd`` lies on (``fstatfs``'s
    f_type, read through glibc), or None (a real one, or where it cannot be told)."""
    import ctypes

    try:
        fstatfs = ctypes.CDLL(None, use_errno=True).fstatfs
    except (OSError, AttributeError):
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is its first word
    if fstatfs(fd, buf) != 0:
        return None
    f_type = int.from_bytes(buf.raw[: ctypes.sizeof(ctypes.c_long)], "little", signed=True)
    return PSEUDO_FS.get(f_type & 0xFFFFFFFF)


def refuse_system_folder(root: Root, *, homes: list[str] | None = None) -> None:
    """InputError (exit 2, nothing touched) when ``root`` is a folder gc never cleans."""
    refused = protected(home_folders() if homes is None else homes)
    why = refused.get((root.dev, root.ino))
    if why is None:
        fs = pseudo_file_system(root.fd)
        if fs is not None:
            why = f"on the pseudo file system {fs}"
    if why is None:
        why = system_tree(root.fd)
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

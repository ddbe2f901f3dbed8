"""``kvtool gc DIR --release --emit fsx-task``: the FSx side of a release, for day-scale ages.
Rather than releasing from a client, FSx runs a data repository task of type
``RELEASE_DATA_FROM_FILESYSTEM``: it releases every file below its paths that is exported to
S3 and whose last access, MAX(atime, ctime, mtime), is more than
``ReleaseConfiguration.DurationSinceLastAccess`` ago, a whole number of DAYS, the only unit
FSx accepts (FSx API ``CreateDataRepositoryTask``, ``DurationSinceLastAccess``; FSx for
Lustre User Guide, "Releasing files"). Paths are relative to the file system's mount point
(``/fsx/kv`` mounted at ``/fsx`` is ``kv``; the file system's root is ``/``).

Pure: the request is built from the folder, its mount and the limits. What FSx cannot do is
said: it selects by path and age alone (no size limit, no layout or model, and it releases
configs and files of no known layout too); an age that is not a whole number of days is
rounded up (FSx then releases less than asked, never a file used more recently).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from kvtool.errors import InputError
from kvtool.folders.select import Limits
from kvtool.probe.parse import Mount, lustre_mount_name

DAY_S = 86400.0
_FS_ID = re.compile(r"^fs-[0-9a-f]{8,18}$")
_BAD_PATH = re.compile("[\u0000\u0085\u2028\u2029\r\n]")  # the API's pattern refuses these


def release_task(
    fsx_id: str | None, root: Path, mount: Mount, limits: Limits
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ``create-data-repository-task`` request for ``root`` on the Lustre ``mount``, and
    the notes that say what it does differently from ``gc --release``."""
    if fsx_id is None:
        raise InputError(
            "--emit fsx-task needs --fsx-id: the file system's id",
            "aws fsx describe-file-systems names it (fs-0123456789abcdef0)",
        )
    if not _FS_ID.match(fsx_id):
        raise InputError(f"--fsx-id {fsx_id!r} is not an FSx file system id", "it reads fs-<hex>")
    if limits.max_size is not None or limits.keep_free is not None:
        raise InputError(
            "--emit fsx-task selects by age alone: FSx's release task has no size limit",
            "give --max-age alone, or run gc --release on a node for --max-size or --keep-free",
        )
    if limits.max_age is None:
        raise InputError("--emit fsx-task needs --max-age", "e.g. --max-age 7d")
    path = file_system_path(root, mount)
    age = max(limits.max_age, limits.grace)
    days = math.ceil(age / DAY_S - 1e-9)
    notes = [
        f"FSx releases every file below {path} that is exported to S3 and unused for more than"
        f" {days} day{'s' if days != 1 else ''} (MAX(atime, ctime, mtime)): engines' configs"
        " and files of no known layout too; FSx selects by path and age alone",
    ]
    if days * DAY_S > age + 1e-6:
        asked = f"--max-age {_duration(limits.max_age)}"
        if limits.grace > limits.max_age:
            asked += f" (within --grace {_duration(limits.grace)})"
        notes.append(
            f"{asked} is sent as {days} day{'s' if days != 1 else ''}: DurationSinceLastAccess"
            " counts whole DAYS only (its one unit), so files unused for less stay; run gc"
            " --release on a node to release at finer ages"
        )
    request: dict[str, Any] = {
        "FileSystemId": fsx_id,
        "Type": "RELEASE_DATA_FROM_FILESYSTEM",
        "Paths": [path],
        "ReleaseConfiguration": {"DurationSinceLastAccess": {"Unit": "DAYS", "Value": days}},
        "Report": {"Enabled": False},
    }
    return request, tuple(notes)


def file_system_path(root: Path, mount: Mount) -> str:
    """``root`` as FSx names it: relative to the mount point (``kv``), with the file system's
    own subfolder when a subfolder was mounted (``10.0.0.1@tcp:/fsname/sub`` at ``/fsx``:
    ``sub/kv``); ``/`` for the root of the file system."""
    point = mount.mountpoint.rstrip("/") or "/"
    text = str(root)
    below = "" if text == point else text[len(point) :].lstrip("/")
    name = lustre_mount_name(mount.source) or ""
    sub = name.split("/", 1)[1].strip("/") if "/" in name else ""
    path = "/".join(p for p in (sub, below) if p) or "/"
    if _BAD_PATH.search(path) or len(path) > 4096:
        raise InputError(
            f"{root}: FSx takes no path with a line break or over 4,096 characters",
            "release it with gc --release on a node",
        )
    return path


def _duration(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds % DAY_S == 0:
        return f"{seconds / DAY_S:g}d"
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"

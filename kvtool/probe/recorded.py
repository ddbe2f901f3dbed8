"""The shapes of the structured observations a snapshot holds (``<key>.json``), checked before
any doctor check reads one. Pure.

A live host builds these dicts itself (the O_DIRECT probe, ``path_info``) or gets them from
boto3, so their types are known; a ``--snapshot`` folder comes from a customer and may hold
anything. Each shape names the fields the checks read, with their types as the live host and
the AWS APIs give them (the FSx and EC2 API references: ``StorageCapacity`` an integer,
``SubnetIds`` a list of strings...). Fields not named are left alone (AWS adds fields); a
named one of the wrong type makes the whole file refused, with its path in the file, so no
check ever meets a string where it counts.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from kvtool.errors import InputError

# scalar kinds
TEXT = "a string"
COUNT = "a whole number >= 0"
SIGNED = "a whole number"
SECONDS = "a number of seconds >= 0"
FLAG = "true or false"


class Nullable(NamedTuple):
    """A field that may be null (``errno`` of a probe that worked)."""

    spec: Any


FOLDER_COUNTS = (
    "chunk_files", "chunk_bytes", "temp_files", "temp_bytes", "unknown_files", "unknown_bytes",
    "layouts", "orphan_files", "orphan_bytes", "world", "busiest_files", "unreadable_folders",
    "folders",
)  # fmt: skip

# A field name ending in "!" must be present (the code indexes it).
_ERROR = {"error": TEXT}
SHAPES: dict[str, dict[str, Any]] = {
    "path": {
        "path": TEXT,
        "exists": FLAG,
        "is_dir": FLAG,
        "writable": FLAG,
        "realpath": TEXT,
        "entries": SIGNED,  # -1: the folder could not be listed
        "files": COUNT,
        "files_free": COUNT,
        "free_bytes": COUNT,
        "captured": FLAG,
    },
    "odirect": {
        "ok": FLAG,
        "errno": Nullable(SIGNED),
        "error": TEXT,
        "bytes": COUNT,
        "write_s": SECONDS,
        "read_s": SECONDS,
        "path": TEXT,
        "cleanup_error": TEXT,
        "captured": FLAG,
    },
    "cufile_read": {
        "ran": FLAG,
        "rc": SIGNED,
        "nvfs_before": Nullable(TEXT),
        "nvfs_after": Nullable(TEXT),
        "output": TEXT,
        "reason": TEXT,
    },
    "folder_contents": {  # plan/folder_rules.FolderFacts, as doctor/folder.py records it
        "path!": TEXT,
        **{f"{name}!": COUNT for name in FOLDER_COUNTS},
        "engines!": [TEXT],
        "orphans!": [TEXT],
        "model!": TEXT,
        "busiest_folder!": TEXT,
    },
    "aws_fsx": {
        **_ERROR,
        "FileSystems": [
            {
                "FileSystemId!": TEXT,
                "FileSystemType": TEXT,
                "Lifecycle": TEXT,
                "StorageCapacity": COUNT,
                "StorageType": TEXT,
                "SubnetIds": [TEXT],
                "NetworkInterfaceIds": [TEXT],
                "LustreConfiguration": {
                    "DeploymentType": TEXT,
                    "PerUnitStorageThroughput": COUNT,
                    "MountName": TEXT,
                    "DataCompressionType": TEXT,
                    "EfaEnabled": FLAG,
                },
            }
        ],
    },
    "aws_dra": {
        **_ERROR,
        "Associations": [
            {
                "AssociationId": TEXT,
                "FileSystemId": TEXT,
                "Lifecycle": TEXT,
                "FileSystemPath": TEXT,
                "DataRepositoryPath": TEXT,
                "S3": {
                    "AutoImportPolicy": {"Events": [TEXT]},
                    "AutoExportPolicy": {"Events": [TEXT]},
                },
            }
        ],
    },
    "aws_subnet": {
        **_ERROR,
        "Subnets": [{"SubnetId": TEXT, "AvailabilityZone": TEXT, "AvailabilityZoneId": TEXT}],
    },
    "aws_enis": {
        **_ERROR,
        "NetworkInterfaces": [{"NetworkInterfaceId": TEXT, "Groups": [{"GroupId!": TEXT}]}],
    },
    "aws_security_groups": {
        **_ERROR,
        "SecurityGroups": [
            {
                "GroupId!": TEXT,
                "IpPermissions": [{"IpProtocol": TEXT, "UserIdGroupPairs": [{"GroupId": TEXT}]}],
            }
        ],
    },
}
_BOUND = 2**63  # past any count a node or AWS reports


def check_recorded(key: str, data: Any, *, source: str) -> dict[str, Any]:
    """``data`` as read from ``<key>.json``, if it has ``SHAPES[key]``'s shape (keys with no
    shape pass as they are); InputError naming ``source`` and the field otherwise."""
    if not isinstance(data, dict):
        raise _refused(source, "", "a JSON object", data)
    shape = SHAPES.get(key)
    if shape is not None:
        _check(shape, data, source, "")
    return data


def _check(spec: Any, value: Any, source: str, where: str) -> None:
    if isinstance(spec, Nullable):
        if value is not None:
            _check(spec.spec, value, source, where)
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise _refused(source, where, "a JSON object", value)
        for name, field in spec.items():
            required = name.endswith("!")
            name = name.removesuffix("!")
            if name in value:
                _check(field, value[name], source, f"{where}.{name}" if where else name)
            elif required:
                raise InputError(
                    f"{source}: {where or 'the object'} has no {name!r}",
                    "capture the snapshot again with kvtool doctor --capture",
                )
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise _refused(source, where, "a JSON list", value)
        for index, item in enumerate(value):
            _check(spec[0], item, source, f"{where}[{index}]")
        return
    if not _is(spec, value):
        raise _refused(source, where, spec, value)


def _is(kind: str, value: Any) -> bool:
    if kind == TEXT:
        return isinstance(value, str)
    if kind == FLAG:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind in (COUNT, SIGNED):
        low = 0 if kind == COUNT else -_BOUND
        return isinstance(value, int) and low <= value < _BOUND
    # SECONDS: JSON numbers only, finite (Python reads NaN and Infinity as JSON)
    return isinstance(value, int | float) and 0 <= value < _BOUND and not math.isnan(value)


def _refused(source: str, where: str, wanted: str, value: Any) -> InputError:
    shown = (
        repr(value) if len(repr(value)) <= 40 else f"{type(value).__name__} {repr(value)[:30]}..."
    )
    return InputError(
        f"{source}: {where or 'the file'} must be {wanted}, got {shown}",
        "capture the snapshot again with kvtool doctor --capture",
    )

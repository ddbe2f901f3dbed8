"""``probe.recorded``: the shapes of a snapshot's JSON observations, on the bundled example
snapshot, on what the live host records, and on every wrong value put into each field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.probe.host import LocalHost
from kvtool.probe.recorded import SHAPES, check_recorded
from tests.mutation import WRONG, leaves, replaced

EXAMPLE = Path(__file__).parents[3] / "examples" / "doctor-snapshot"
JSON_KEYS = sorted(p.stem for p in EXAMPLE.glob("*.json"))


def test_every_json_observation_kvtool_records_has_a_shape() -> None:
    assert set(JSON_KEYS) <= set(SHAPES), "a recorded key without a shape is read unchecked"


@pytest.mark.parametrize("key", JSON_KEYS)
def test_the_example_snapshot_has_the_shapes(key: str) -> None:
    data = json.loads((EXAMPLE / f"{key}.json").read_text())
    assert check_recorded(key, data, source=key) == data


def test_what_the_live_host_records_has_the_shapes(tmp_path: Path) -> None:
    host = LocalHost()
    check_recorded("path", host.path_info("path", str(tmp_path)), source="live")
    check_recorded("path", host.path_info("path", str(tmp_path / "absent")), source="live")
    check_recorded("odirect", host.odirect_probe("odirect", str(tmp_path), 1), source="live")
    check_recorded("odirect", host.odirect_probe("odirect", "/proc", 1), source="live")  # fails


@pytest.mark.parametrize(
    ("key", "data", "message"),
    [
        ("odirect", {"ok": True, "bytes": "64"}, "bytes must be a whole number >= 0, got '64'"),
        ("odirect", {"ok": True, "write_s": float("nan")}, "write_s must be a number of seconds"),
        ("odirect", {"ok": 1}, "ok must be true or false, got 1"),
        ("path", {"entries": []}, "entries must be a whole number, got []"),
        ("aws_fsx", {"FileSystems": None}, "FileSystems must be a JSON list, got None"),
        ("aws_fsx", {"FileSystems": [{}]}, "FileSystems[0] has no 'FileSystemId'"),
        (
            "aws_fsx",
            {"FileSystems": [{"FileSystemId": "fs-1", "StorageCapacity": 10**400}]},
            "FileSystems[0].StorageCapacity must be a whole number >= 0, got int 1000",
        ),
        (
            "aws_enis",
            {"NetworkInterfaces": [{"Groups": [{"GroupId": ["sg-1"]}]}]},
            "NetworkInterfaces[0].Groups[0].GroupId must be a string, got ['sg-1']",
        ),
        (
            "aws_dra",
            {"Associations": [{"S3": {"AutoExportPolicy": "x"}}]},
            "Associations[0].S3.AutoExportPolicy must be a JSON object, got 'x'",
        ),
        ("aws_subnet", [1], "the file must be a JSON object, got [1]"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_field(key: str, data: Any, message: str) -> None:
    with pytest.raises(InputError) as caught:
        check_recorded(key, data, source=f"snap/{key}.json")
    assert f"snap/{key}.json: {message}" in caught.value.message


def test_null_is_taken_only_where_the_live_host_writes_it() -> None:
    assert check_recorded("odirect", {"ok": False, "errno": None}, source="s")
    with pytest.raises(InputError, match="bytes must be"):
        check_recorded("odirect", {"ok": True, "bytes": None}, source="s")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_value_anywhere_is_taken_or_refused_in_one_line(data: st.DataObject) -> None:
    """The hostile-snapshot corpus in small: a wrong value at any field of any example
    observation is either of the live host's shape or an InputError, nothing else."""
    key = data.draw(st.sampled_from(JSON_KEYS))
    example = json.loads((EXAMPLE / f"{key}.json").read_text())
    path = data.draw(st.sampled_from(list(leaves(example))))
    mutated = replaced(example, path, data.draw(WRONG))
    try:
        check_recorded(key, mutated, source="s")
    except InputError as exc:
        message = exc.message
    else:
        return  # taken: of the live host's shape
    assert message.startswith("s: ")

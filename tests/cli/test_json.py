"""One JSON envelope: every ``--json`` is one object with ``schema_version`` and ``command``,
lists under ``results``, numbers as numbers (no display strings, no NaN or Infinity, no float
artefacts), held to its command's schema in docs/json/ (tests/conftest.py checks every
``--json`` any test prints)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.cli.app import COMMANDS, GROUPS
from kvtool.cli.render.text import envelope, json_ready
from tests.conftest import JSON_SCHEMAS, CliResult

JSON_COMMANDS = sorted(
    {name for name in COMMANDS if name not in GROUPS}
    | {f"{group}-{sub}" for group, subs in GROUPS.items() for sub in subs if sub != "gen"}
)


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_every_command_has_a_valid_schema(name: str) -> None:
    schema = json.loads((JSON_SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": 1}
    assert schema["properties"]["command"] == {"const": name.replace("-", " ")}
    assert {"schema_version", "command"} <= set(schema["required"])


def test_the_schema_catches_a_display_string_where_a_number_belongs(kvtool) -> None:
    done = kvtool("size", "deepseek-r1", "--ctx", "200k", "--sessions", "100", "--json")
    data = json.loads(done.stdout)
    assert (data["schema_version"], data["command"]) == (1, "size")
    assert data["results"][0]["kv_bytes_total"] == 1_405_440_000_000
    schema = json.loads((JSON_SCHEMAS / "size.schema.json").read_text())
    data["results"][0]["kv_bytes_total"] = "1.41 TB"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)
    del data["results"][0]["kv_bytes_total"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_the_envelope_wraps_lists_and_makes_every_number_plain() -> None:
    wrapped = envelope("size", [{"a": 0.1 + 0.2, "b": float("inf"), "c": float("nan"), "d": 3}])
    assert wrapped == {
        "schema_version": 1,
        "command": "size",
        "results": [{"a": 0.3, "b": None, "c": None, "d": 3}],
    }
    assert envelope("gc", {"x": (1.0000000000000002,)}) == {
        "schema_version": 1,
        "command": "gc",
        "x": [1.0],
    }


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_survives_strict_json(value: float) -> None:
    ready = json_ready(value)
    text = json.dumps(ready, allow_nan=False)
    if math.isfinite(value):
        assert math.isclose(json.loads(text), value, rel_tol=1e-11, abs_tol=0)
    else:
        assert ready is None


@pytest.mark.parametrize("command", [["models"], ["hardware"], ["size", "deepseek-r1"]])
def test_a_list_of_records_is_under_results(kvtool, command: list[str]) -> None:
    """``hardware --json`` put its profiles beside the envelope as ``nodes`` and ``storage``
    (issue 54): every command that answers with a list puts it under ``results``."""
    data = json.loads(kvtool(*command, "--json").stdout)
    assert list(data) == ["schema_version", "command", "results"]
    assert data["results"]
    if command == ["hardware"]:
        kinds = [r["kind"] for r in data["results"]]
        assert kinds == sorted(kinds)  # the nodes, then the storage
        assert {"node", "storage"} == set(kinds)


def test_advise_criteria_are_numbers_with_their_unit(kvtool) -> None:
    done = kvtool("advise", "-m", "llama-3.1-70b", "--hardware", "p5en", "--sessions", "200",
                  "--ctx", "100k", "--json")  # fmt: skip
    criteria = {c["name"]: c for c in json.loads(done.stdout)["criteria"]}
    working = criteria["working set exceeds HBM"]
    assert working["unit"] == "bytes"
    assert isinstance(working["value"], int)
    assert working["value"] > working["threshold"] > 0
    assert criteria["shared prefixes"]["threshold"] == 0.3
    assert criteria["disaggregated prefill/decode"]["value"] is False


def test_reports_from_another_command_or_a_newer_kvtool_are_refused(kvtool, tmp_path: Path) -> None:
    examples = Path(__file__).parents[2] / "examples" / "check"
    report = json.loads((examples / "bench-t3.json").read_text())
    newer = tmp_path / "bench.json"
    newer.write_text(json.dumps({**report, "schema_version": 2}))
    done: CliResult = kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--bench", str(newer))
    assert done.exit_code == 2
    assert "written by a newer kvtool (schema_version 2" in done.stderr
    other = tmp_path / "doctor.json"
    other.write_text(json.dumps({**report, "schema_version": 1, "command": "doctor"}))
    done = kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--bench", str(other))
    assert done.exit_code == 2
    assert "is kvtool doctor's report, not kvtool bench's" in done.stderr
    enveloped = tmp_path / "ok.json"
    enveloped.write_text(json.dumps({"schema_version": 1, "command": "bench", **report}))
    assert (
        kvtool("size", "llama-3.1-8b", "--hardware", "p5", "--bench", str(enveloped)).exit_code == 0
    )


def test_the_json_readme_names_only_options_that_help_shows() -> None:
    """docs/json/README.md named a ``size --bench`` (hidden: plan's, forwarded for a release)
    (issue 54): each ```command --option``` it names is one the command's --help shows."""
    import re

    from typer.main import get_command

    from kvtool.cli.app import app

    root = get_command(app)
    text = (JSON_SCHEMAS / "README.md").read_text()
    named = re.findall(r"`(?:kvtool )?([a-z]+) (--[a-z-]+)", text)
    assert ("plan", "--bench") in named
    for name, option in named:
        command = root.commands[name]  # type: ignore[attr-defined]
        shown = {o for p in command.params if not getattr(p, "hidden", False) for o in p.opts}
        assert option in shown, f"`{name} {option}`"

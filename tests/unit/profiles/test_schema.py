"""The shape of a model profile's ``profile.json``: what validates, what each error names, and
the round trip back to the dict."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.profiles.load import builtin_root
from kvtool.profiles.schema import (
    SCHEMA_VERSION,
    ModelProfile,
    ModelSource,
    model_profile_from_dict,
    model_profile_to_dict,
)

FILE = "profiles/models/deepseek-r1/profile.json"
R1: dict[str, Any] = json.loads(
    (builtin_root() / "models" / "deepseek-r1" / "profile.json").read_text()
)


def parsed(**changes: Any) -> ModelProfile:
    data = copy.deepcopy(R1)
    data.update(changes)
    return model_profile_from_dict(data, file=FILE)


def error(data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as info:
        model_profile_from_dict(data, file=FILE)
    return info.value


def without(key: str, *, in_source: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(R1)
    (data["source"] if in_source else data).pop(key)
    return data


def test_the_bundled_deepseek_r1_profile() -> None:
    assert model_profile_from_dict(R1, file=FILE) == ModelProfile(
        name="deepseek-r1",
        hf_id="deepseek-ai/DeepSeek-R1",
        family="DeepSeek",
        aliases=("r1", "deepseek-ai/DeepSeek-R1-0528"),
        source=ModelSource(
            repository="github.com/ai-dynamo/aiconfigurator",
            path="aic-core/src/aiconfigurator_core/model_configs/deepseek-ai--DeepSeek-R1_config.json",
            commit="095f58a51c4ca8e61b66ec108d86f223f8d559ce",
            note="verbatim copy",
        ),
    )


def test_names_are_the_name_hf_id_and_aliases_lower_cased() -> None:
    assert parsed().names() == (
        "deepseek-r1",
        "deepseek-ai/deepseek-r1",
        "r1",
        "deepseek-ai/deepseek-r1-0528",
    )


def test_to_dict_is_the_inverse_of_from_dict() -> None:
    assert model_profile_to_dict(parsed()) == R1
    assert model_profile_to_dict(parsed())["schema_version"] == SCHEMA_VERSION == 1


def test_aliases_and_note_are_optional() -> None:
    data = without("aliases")
    data["source"].pop("note")
    profile = model_profile_from_dict(data, file=FILE)
    assert profile.aliases == ()
    assert profile.source.note == ""
    assert profile.names() == ("deepseek-r1", "deepseek-ai/deepseek-r1")


def test_a_null_note_is_no_note_not_the_word_none() -> None:
    data = without("aliases")
    data["source"]["note"] = None
    assert model_profile_from_dict(data, file=FILE).source.note == ""


def test_an_unknown_top_level_key_is_named_with_the_allowed_ones() -> None:
    e = error({**R1, "num_layers": 61, "config": {}})
    assert e.message == f"{FILE}: unknown key 'config'"  # the first, alphabetically
    assert e.hint == "allowed keys: aliases, family, hf_id, name, schema_version, source"


def test_an_unknown_source_key_says_it_is_in_source() -> None:
    e = error({**R1, "source": {**R1["source"], "url": "https://example.org"}})
    assert e.message == f"{FILE}: unknown key 'url' in [source]"
    assert e.hint == "allowed keys: commit, note, path, repository"


@pytest.mark.parametrize("version", [None, 0, 2, "1", 1.5])
def test_only_schema_version_1_is_read(version: Any) -> None:
    data = copy.deepcopy(R1)
    if version is None:
        data.pop("schema_version")
    else:
        data["schema_version"] = version
    assert error(data).message == f"{FILE}: schema_version must be 1, got {version!r}"


@pytest.mark.parametrize("source", [None, "github.com/ai-dynamo/aiconfigurator", ["a"]])
def test_the_source_table_is_required(source: Any) -> None:
    data = copy.deepcopy(R1)
    if source is None:
        data.pop("source")
    else:
        data["source"] = source
    assert error(data).message == f"{FILE}: missing [source] table"


@pytest.mark.parametrize("aliases", ["r1", ["r1", 1], {"r1": True}, None])
def test_aliases_must_be_a_list_of_strings(aliases: Any) -> None:
    assert error({**R1, "aliases": aliases}).message == f"{FILE}: aliases must be a list of strings"


@pytest.mark.parametrize("key", ["name", "hf_id", "family"])
def test_a_missing_or_empty_name_is_named(key: str) -> None:
    expected = f"{FILE}: key {key!r} is missing or not a string"
    assert error(without(key)).message == expected
    assert error({**R1, key: ""}).message == expected
    assert error({**R1, key: 42}).message == expected


@pytest.mark.parametrize("key", ["repository", "path", "commit"])
def test_a_missing_source_field_is_named(key: str) -> None:
    assert (
        error(without(key, in_source=True)).message
        == f"{FILE}: key {key!r} is missing or not a string"
    )


def test_the_file_named_in_errors_is_the_one_given() -> None:
    with pytest.raises(InputError) as info:
        model_profile_from_dict({**R1, "x": 1}, file="/elsewhere/profile.json")
    assert info.value.message == "/elsewhere/profile.json: unknown key 'x'"


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@given(
    name=TEXT,
    hf_id=TEXT,
    family=TEXT,
    aliases=st.lists(TEXT, max_size=4),
    repository=TEXT,
    path=TEXT,
    commit=st.text("0123456789abcdef", min_size=40, max_size=40),
    note=st.text(max_size=40),
)
def test_any_valid_profile_round_trips(
    name: str,
    hf_id: str,
    family: str,
    aliases: list[str],
    repository: str,
    path: str,
    commit: str,
    note: str,
) -> None:
    profile = ModelProfile(
        name, hf_id, family, tuple(aliases), ModelSource(repository, path, commit, note)
    )
    data = model_profile_to_dict(profile)
    assert model_profile_from_dict(data, file="p.json") == profile
    assert model_profile_from_dict(json.loads(json.dumps(data)), file="p.json") == profile
    assert len(profile.names()) == 2 + len(aliases)
    assert profile.names()[:2] == (name.lower(), hf_id.lower())

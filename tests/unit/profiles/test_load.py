"""Every bundled model profile loads, validates, round-trips, and means the same to transformers.

The AutoConfig test is the evidence that kvtool's own reading of a raw config.json matches
what transformers derives from it (layer types, Falcon heads, Gemma defaults).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.model.config import spec_from_config
from kvtool.profiles.load import model_profiles, read_config_json, read_model_profile
from kvtool.profiles.schema import model_profile_from_dict, model_profile_to_dict

PROFILES = model_profiles()
IDS = [profile.name for profile, _ in PROFILES]

# Configs transformers 5.24 cannot load as they are; kvtool reads them as plain JSON.
NOT_LOADABLE_BY_AUTOCONFIG = {
    "falcon-7b": "RefinedWebModel needs the repository's own code (trust_remote_code)",
    "falcon-40b": "RefinedWeb needs the repository's own code (trust_remote_code)",
    "kimi-k2": "kimi_k2 needs trust_remote_code (see the DeepseekV3Config test below)",
    "phi-3-mini-128k": "this early revision's rope_scaling type 'su' lacks fields 5.24 requires",
    "minimax-m1": "transformers 5.24 has no minimax_m1 config class (remote code)",
    "kimi-k3": "kimi_k3 is vLLM's own config class (transformers_utils/configs/kimi_k3.py)",
}
REMOTE_CODE_ONLY = set(NOT_LOADABLE_BY_AUTOCONFIG)


def test_at_least_twenty_models_across_families() -> None:
    assert len(PROFILES) >= 20
    families = {profile.family for profile, _ in PROFILES}
    for family in (
        "Llama",
        "Qwen",
        "DeepSeek",
        "Kimi",
        "Mistral",
        "Gemma",
        "gpt-oss",
        "Phi",
        "GLM",
        "Falcon",
        "MiniMax",
    ):
        assert family in families


@pytest.mark.parametrize(("profile", "folder"), PROFILES, ids=IDS)
def test_profile_validates_and_round_trips(profile: Any, folder: Path) -> None:
    raw = json.loads((folder / "profile.json").read_text())
    assert model_profile_to_dict(profile) == raw
    assert model_profile_from_dict(raw, file="x") == profile
    assert folder.name == profile.name
    assert len(profile.source.commit) == 40


@pytest.mark.parametrize(("profile", "folder"), PROFILES, ids=IDS)
def test_config_builds_a_spec(profile: Any, folder: Path) -> None:
    spec = spec_from_config(read_config_json(folder / "config.json"), name=profile.name)
    assert spec.groups
    assert spec.num_layers > 0


def test_names_and_aliases_are_unique() -> None:
    seen: dict[str, str] = {}
    for profile, _ in PROFILES:
        for name in profile.names():
            assert seen.setdefault(name, profile.name) == profile.name, name


@pytest.mark.hf
@pytest.mark.parametrize(
    ("profile", "folder"),
    [p for p in PROFILES if p[0].name not in REMOTE_CODE_ONLY],
    ids=[i for i in IDS if i not in REMOTE_CODE_ONLY],
)
def test_autoconfig_and_raw_dict_give_the_same_spec(
    profile: Any, folder: Path, tmp_path: Path
) -> None:
    from transformers import AutoConfig

    shutil.copy(folder / "config.json", tmp_path / "config.json")
    via_transformers = AutoConfig.from_pretrained(tmp_path).to_dict()
    raw = spec_from_config(read_config_json(folder / "config.json"), name=profile.name)
    loaded = spec_from_config(via_transformers, name=profile.name)
    assert loaded.groups == raw.groups
    assert loaded.dtype == raw.dtype


@pytest.mark.hf
def test_kimi_k2_matches_the_deepseek_v3_config_class_it_names(tmp_path: Path) -> None:
    """Kimi K2's auto_map points at a DeepseekV3Config copy; transformers ships that class."""
    from transformers import DeepseekV3Config

    (folder,) = [f for p, f in PROFILES if p.name == "kimi-k2"]
    raw_config = read_config_json(folder / "config.json")
    via_class = DeepseekV3Config.from_dict(raw_config).to_dict()
    assert (
        spec_from_config(via_class, name="k").groups
        == spec_from_config(raw_config, name="k").groups
    )


def write_profile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(text)
    return path


GOOD = """{"schema_version": 1, "name": "m", "hf_id": "org/m", "family": "F", "aliases": [],
"source": {"repository": "github.com/o/r", "path": "config.json",
"commit": "0000000000000000000000000000000000000000", "note": ""}}
"""


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = write_profile(tmp_path, GOOD.replace('"family": "F"', '"family": "F", "layers": 3'))
    with pytest.raises(InputError, match=r"profile.json: unknown key 'layers'"):
        read_model_profile(path)


def test_missing_key_is_named(tmp_path: Path) -> None:
    path = write_profile(tmp_path, GOOD.replace('"hf_id": "org/m", ', ""))
    with pytest.raises(InputError, match="'hf_id' is missing"):
        read_model_profile(path)


def test_malformed_json_config_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096,,\n}')
    with pytest.raises(InputError, match=r"config.json: malformed JSON at line 3, column 23"):
        read_config_json(path)


def test_config_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(InputError, match="must be a JSON object"):
        read_config_json(path)

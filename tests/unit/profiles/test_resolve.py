"""Model resolution: bundled names, config paths, and HF repo ids through AutoConfig offline.

The hub route runs ``python -m kvtool`` in a subprocess with ``HF_HOME`` pointing at a
Hugging Face cache laid out in a temp dir (the layout huggingface_hub writes:
``hub/models--ORG--NAME/{refs/main,snapshots/REV/config.json}``) and ``HF_HUB_OFFLINE=1``,
so transformers.AutoConfig really loads it and nothing touches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.profiles.resolve import resolve_model

ROOT = Path(__file__).parents[3]


def test_bundled_names_aliases_and_hf_ids_any_case() -> None:
    for ref in ("deepseek-r1", "DeepSeek-R1", "deepseek-ai/DeepSeek-R1", "R1"):
        resolved = resolve_model(ref)
        assert resolved.origin == "bundled"
        assert resolved.spec.name == "deepseek-r1"


def test_unknown_name_suggests_closest() -> None:
    with pytest.raises(InputError) as info:
        resolve_model("llama-3.1-7b")
    assert "did you mean" in info.value.hint
    assert "llama-3.1-8b" in info.value.hint


def test_folder_without_config_is_reported(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"holds no config\.json"):
        resolve_model(str(tmp_path))


def write_hub_cache(home: Path, repo_id: str, config: dict[str, object]) -> None:
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))


@pytest.mark.hf
def test_hub_repo_id_goes_through_autoconfig_offline(tmp_path: Path) -> None:
    config = json.loads((ROOT / "profiles/models/qwen3-32b/config.json").read_text())
    write_hub_cache(tmp_path, "acme/private-qwen", config)
    env = dict(os.environ, HF_HOME=str(tmp_path), HF_HUB_OFFLINE="1", NO_COLOR="1")
    result = subprocess.run(
        [sys.executable, "-m", "kvtool", "size", "acme/private-qwen", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [data] = json.loads(result.stdout)["results"]
    assert data["model_source"] == "acme/private-qwen"
    assert data["kv_bytes_per_token"] == 64 * 8 * 128 * 2 * 2
    assert result.stderr == ""  # transformers' own warnings are kept quiet


@pytest.mark.hf
def test_hub_repo_id_missing_offline_is_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, HF_HOME=str(tmp_path), HF_HUB_OFFLINE="1", NO_COLOR="1")
    result = subprocess.run(
        [sys.executable, "-m", "kvtool", "size", "acme/not-cached"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "'acme/not-cached' is not in the local Hugging Face cache" in result.stderr


@pytest.mark.hf
def test_unreachable_hub_answers_in_one_line_without_retrying(tmp_path: Path) -> None:
    """A closed port on 127.0.0.1 stands in for a machine without network: kvtool must not
    spend half a minute in huggingface_hub's retries. Nothing leaves the machine."""
    import time

    env = dict(os.environ, HF_HOME=str(tmp_path), HF_ENDPOINT="http://127.0.0.1:9", NO_COLOR="1")
    env.pop("HF_HUB_OFFLINE", None)
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kvtool", "size", "acme/not-cached"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert time.monotonic() - start < 10
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "the hub cannot be reached" in result.stderr


def test_a_config_json_is_named_by_its_folder_and_another_file_by_itself(tmp_path: Path) -> None:
    source = Path(__file__).parents[2] / "fixtures" / "models" / "deepseek-v4-flash.json"
    folder = tmp_path / "My-Model"
    folder.mkdir()
    (folder / "config.json").write_text(source.read_text())
    (folder / "other-name.json").write_text(source.read_text())
    assert resolve_model(str(folder)).spec.name == "My-Model"
    assert resolve_model(str(folder / "config.json")).spec.name == "My-Model"
    assert resolve_model(str(folder / "other-name.json")).spec.name == "other-name"

"""inspect and gc on a folder vLLM's own file-system tier wrote (fs_tier_files.py: its
FileSystemTierManager storing four chunks of each of two models into one folder, as two
engines sharing an FSx folder do): inspect names each model from the tier's config.json, and
``gc --model A`` never touches model B's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.real_engine.conftest import run_engine_script

CHUNKS = 4  # fs_tier_files.CHUNKS


@pytest.fixture(scope="module")
def shared(models: Path, engine_env: dict[str, str], scratch: Path) -> Path:
    root = scratch / "fsx"
    run_engine_script("fs_tier_files.py", [str(root), str(models / "llama"),
                      str(models / "qwen3")], engine_env, scratch / "fs-tier.log")  # fmt: skip
    return root


def _files(root: Path, model: str) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*.bin") if f"_{model}_" in p.name
            or f"_{model}_" in str(p.relative_to(root)).split("/")[0]}  # fmt: skip


def test_inspect_names_each_model_vllm_wrote(shared: Path, models: Path, kvtool: Any) -> None:
    result = kvtool("inspect", str(shared), "--json")
    assert result.exit_code in (0, 1), result.stderr
    text = json.dumps(json.loads(result.stdout))
    assert str(models / "llama") in text
    assert str(models / "qwen3") in text


def test_gc_under_model_a_never_touches_model_b(shared: Path, models: Path, kvtool: Any) -> None:
    b_before = _files(shared, "qwen3")
    assert len(b_before) == CHUNKS
    assert len(_files(shared, "llama")) == CHUNKS
    result = kvtool("gc", str(shared), "--model", str(models / "llama"), "--max-size", "1MiB",
                    "--grace", "0s", "--json")  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    assert json.loads(result.stdout)["removed_files"] > 0
    assert _files(shared, "qwen3") == b_before  # model B: every file, every byte
    assert len(_files(shared, "llama")) < CHUNKS

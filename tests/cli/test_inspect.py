"""``kvtool inspect`` end to end on folders the engines' writers made."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.unit.folders.conftest import build

Kvtool = Callable[..., CliResult]


def test_inspect_reports_each_layout(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path / "sglang", "sglang-0.5.23.json", age_s=3 * 86400)
    build(tmp_path / "vllm", "vllm-0.33.0.json")
    done = kvtool(
        "inspect", str(tmp_path), "--model", "meta-llama/Llama-3.1-8B-Instruct", "--tp", "2"
    )
    assert done.exit_code == 0, done.stderr
    out = done.stdout
    assert "SGLang HiCacheFile" in out
    assert "vLLM FS offload" in out
    assert "meta-llama/Llama-3.1-8B-Instruct" in out
    assert "another model" in out
    assert "in-flight temporaries: 2 files" in out
    assert "under the 100,000 AWS advises" in out


def test_inspect_json(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path, "vllm-0.33.0.json")
    done = kvtool("inspect", str(tmp_path), "--json")
    assert done.exit_code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["chunks"] == {"files": 10, "bytes": 10 * 8192}
    assert {g["model"] for g in data["layouts"]} == {
        "meta-llama/Llama-3.1-8B-Instruct",
        "google/gemma-3-27b-it",
    }
    assert data["temporaries"]["files"] == 1
    assert data["configs"] == 2
    assert all(g["orphan"] is None for g in data["layouts"])


def test_inspect_bad_input_is_one_line_and_exit_2(kvtool: Kvtool, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for args, match in [
        ((str(tmp_path / "nope"),), "does not exist"),
        ((str(tmp_path / "file"),), "is a file, not a folder"),
        ((str(tmp_path),), "no file of a layout kvtool knows (1 other files: file)"),
        ((str(tmp_path), "--tp", "x"), "--tp"),
        ((str(tmp_path), "--world", "2", "--tp", "2"), "--world is tp x pp"),
    ]:
        done = kvtool("inspect", *args)
        assert done.exit_code == 2, (args, done.stdout)
        assert match in done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_names_from_disk_are_printed_escaped(kvtool: Kvtool, tmp_path: Path) -> None:
    build(tmp_path, "sglang-0.5.23.json")
    (tmp_path / "\x1b[2Jx\nfake line").write_bytes(b"x")
    (tmp_path / "link\x1b[31m").symlink_to(tmp_path)
    done = kvtool("inspect", str(tmp_path))
    assert done.exit_code == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert "\\033[2Jx\\nfake\\ line" in done.stdout
    assert "link\\033[31m" in done.stdout
    assert not any(line.startswith("fake line") for line in done.stdout.splitlines())


def test_kvtools_own_labels_are_not_escaped_and_a_model_name_from_disk_is(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    """inspect printed its own layout label as ``world\\ 8`` (issue 54): only what was read
    from disk is escaped; the label kvtool composes from the numbers it parsed is not."""
    import shutil

    shutil.copytree(Path(__file__).parents[2] / "examples" / "check" / "kvcache", tmp_path / "kv")
    done = kvtool("inspect", str(tmp_path / "kv"))
    assert done.exit_code == 0, done.stderr
    assert "  world 8  " in done.stdout
    assert "\\" not in done.stdout
    for chunk in (tmp_path / "kv").iterdir():
        chunk.rename(chunk.with_name(chunk.name.replace("meta-llama", "meta llama")))
    spaced = kvtool("inspect", str(tmp_path / "kv"))
    assert "meta\\ llama" in spaced.stdout  # a name from disk: escaped as ls -b does
    assert "  world 8  " in spaced.stdout


def test_an_alias_finds_the_files_its_hub_id_names_and_world_still_works(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    build(tmp_path, "sglang-0.5.23.json")
    by_alias = kvtool("inspect", str(tmp_path), "--model", "llama-3.1-8b", "--tp", "2", "--json")
    by_id = kvtool(
        "inspect", str(tmp_path), "--model", "meta-llama/Llama-3.1-8B-Instruct", "--tp", "2",
        "--json",
    )  # fmt: skip
    orphans = {g["model"]: g["orphan"] for g in json.loads(by_alias.stdout)["layouts"]}
    assert orphans == {g["model"]: g["orphan"] for g in json.loads(by_id.stdout)["layouts"]}
    assert orphans["meta-llama-Llama-3.1-8B-Instruct"] is None
    old = kvtool("inspect", str(tmp_path), "--model", "llama-3.1-8b", "--world", "2", "--json")
    assert "--world is now --tp and --pp" in old.stderr
    assert json.loads(old.stdout)["layouts"] == json.loads(by_alias.stdout)["layouts"]


def test_lmcache_mla_files_saved_as_world_1_are_no_orphans_of_a_tp_8_deployment(
    kvtool: Kvtool, tmp_path: Path
) -> None:
    """LMCache saves an MLA latent from rank 0 only, keyed world 1 (0.5.6
    ``v1/token_database.py:238-243``): ``inspect --model deepseek-v3 --tp 8`` called them
    orphans, because the folder's inputs never said the model is MLA."""
    import pytest

    torch = pytest.importorskip("torch")
    pytest.importorskip("cachetools")
    utils = pytest.importorskip("lmcache.utils")
    for digest in (0xAB12, 0xCD34):
        key = utils.CacheEngineKey("deepseek-ai/DeepSeek-V3", 1, 0, digest, torch.bfloat16)
        (tmp_path / (key.to_string().replace("/", "-") + ".pt")).write_bytes(b"x" * 64)
    done = kvtool("inspect", str(tmp_path), "--model", "deepseek-v3", "--tp", "8", "--json")
    assert done.exit_code == 0, done.stderr
    layouts = json.loads(done.stdout)["layouts"]
    assert [g["orphan"] for g in layouts] == [None], layouts
    other = kvtool("inspect", str(tmp_path), "--model", "llama-3.1-70b", "--tp", "8", "--json")
    assert [g["orphan"] for g in json.loads(other.stdout)["layouts"]] == ["another model"]


def test_an_empty_folder_is_an_answer_exit_0(kvtool: Kvtool, tmp_path: Path) -> None:
    done = kvtool("inspect", str(tmp_path))
    assert done.exit_code == 0, done.stderr
    assert "empty: no files yet" in done.stdout
    doc = json.loads(kvtool("inspect", str(tmp_path), "--json").stdout)
    assert doc["layouts"] == []
    assert doc["chunks"] == {"files": 0, "bytes": 0}

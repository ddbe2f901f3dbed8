"""gc's scope under ``--model`` on the folders vLLM's own FileMapper wrote (recorded in
tests/fixtures/folders/vllm-0.33.0.json): the model is its folder's config.json's, and a folder
whose model cannot be told is out of scope."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from kvtool.folders.gc import run_gc
from kvtool.folders.layouts import model_matches
from kvtool.folders.scope import Scope, folder_model
from kvtool.folders.select import Limits
from kvtool.inputs.folders import model_names

OLD = 5 * 86400
LLAMA = "meta-llama_Llama-3.1-8B-Instruct_2036acf6c38c"
GEMMA = "google_gemma-3-27b-it_dd9fa7979fb5"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _gc(root: Path, *models: str) -> None:
    run_gc(root, scope=Scope(models=models or None), limits=Limits(max_size=0, grace=0),
           mode="relatime", free_bytes=0, dry_run=False)  # fmt: skip


def test_gc_model_a_never_touches_model_b_on_a_folder_vllm_wrote(tmp_path, made):
    made(tmp_path, "vllm-0.33.0.json", age_s=OLD)
    before = _files(tmp_path)
    _gc(tmp_path, "meta-llama/Llama-3.1-8B-Instruct")
    left = _files(tmp_path)
    gone = before - left
    assert gone, "model A's chunks were to go"
    assert all(p.startswith(LLAMA + "_r") and p.endswith(".bin") for p in gone)
    assert {p for p in before if p.startswith(GEMMA)} <= left  # model B whole
    assert not {p for p in left if p.startswith(LLAMA + "_r")}  # every chunk of A went


def test_a_bundled_alias_a_path_and_its_last_part_name_the_model(tmp_path, made):
    made(tmp_path, "vllm-0.33.0.json", age_s=OLD)
    before = _files(tmp_path)
    _gc(tmp_path, *model_names("gemma-3-27b") or ())  # a bundled alias: its Hub id is the config's
    gone = before - _files(tmp_path)
    assert gone
    assert all(p.startswith(GEMMA + "_r") for p in gone)
    assert model_matches("/models/Llama-3.1-8B", ("llama-3.1-8b",))
    assert model_matches("/models/Llama-3.1-8B", ("/models/Llama-3.1-8B",))
    assert not model_matches("meta-llama/Llama-3.1-8B", ("Llama-3.1-8B",))  # a Hub id whole
    assert not model_matches("/models/Llama-3.1-8B", ("Llama-3.1-70B",))


def test_a_folder_whose_model_cannot_be_told_is_out_of_scope_under_model(tmp_path, made):
    made(tmp_path, "vllm-0.33.0.json", age_s=OLD)
    (tmp_path / GEMMA / "config.json").unlink()  # no config: whose files these are is unknown
    config = tmp_path / LLAMA / "config.json"
    forged = json.loads(config.read_text())
    forged["model_name"] = "google/gemma-3-27b-it"  # not the model the folder's name carries
    config.write_text(json.dumps(forged))
    now = time.time()
    for path in tmp_path.rglob("*.bin"):
        os.utime(path, (now - OLD, now - OLD))
    before = _files(tmp_path)
    _gc(tmp_path, "google/gemma-3-27b-it")
    assert _files(tmp_path) == before  # neither folder is told to be Gemma's
    _gc(tmp_path)  # without --model, every folder is in scope
    assert {p for p in _files(tmp_path) if p.endswith(".bin")} < {
        p for p in before if p.endswith(".bin")
    }


def test_the_config_must_be_the_folders_own():
    config = {"model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    assert folder_model(LLAMA, config) == "meta-llama/Llama-3.1-8B-Instruct"
    assert folder_model(GEMMA, config) is None
    assert folder_model(LLAMA, {"model_name": 7}) is None
    assert folder_model("meta-llama_Llama-3.1-8B-Instruct", config) is None


def test_include_unknown_removes_a_stray_beside_chunks_never_a_folder_of_strangers(tmp_path):
    now = time.time()
    chunk = tmp_path / "kv" / f"{'a' * 64}_m-x_0_1.bin"
    stray = tmp_path / "kv" / "core.1234"
    strangers = [tmp_path / "notes" / f"n{i}.txt" for i in range(3)]
    for path in (chunk, stray, *strangers):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 10)
        os.utime(path, (now - OLD, now - OLD))
    planned, _ = run_gc(tmp_path, scope=Scope(include_unknown=True),
                        limits=Limits(max_size=0, grace=0), mode="relatime", free_bytes=0,
                        dry_run=False)  # fmt: skip
    assert not chunk.exists()
    assert not stray.exists()
    assert all(p.exists() for p in strangers)
    assert planned.unknown_kept_bytes == 30

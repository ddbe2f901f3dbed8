"""Each engine's naming, on folders its own writer made: LMCache's live (its key writer and its
C++ fs_native client install without a GPU), SGLang's and vLLM's from listings their writers
made (tests/fixtures/folders/record.py says how), llm-d's from its file_mapper.py, kvtool's
from its own FolderMedium."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kvtool.folders.layouts import CHUNK, CONFIG, TEMP, Match, classify, model_key, vllm_description

FIXTURES = Path(__file__).parents[2] / "fixtures" / "folders"


def _recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _of(path: str) -> Match | None:
    parts = path.split("/")
    return classify(tuple(parts[:-1]), parts[-1])


def test_sglang_hicachefile_names_as_its_writer_wrote_them():
    recorded = _recorded("sglang-0.5.23.json")
    matches = {path: _of(path) for path, _size in recorded["files"]}
    assert all(m is not None and m.engine == "sglang" for m in matches.values())
    temps = [p for p, m in matches.items() if m and m.kind == TEMP]
    assert temps == [p for p, _ in recorded["files"] if p.endswith(".tmp")]
    assert len(temps) == 1
    chunks = {p: m for p, m in matches.items() if m and m.kind == CHUNK}
    layouts = {(m.model, m.layout) for m in chunks.values()}
    assert layouts == {
        ("meta-llama-Llama-3.1-8B-Instruct", "tp 2"),
        ("deepseek-ai-DeepSeek-R1", "MLA (one copy for every TP rank)"),
        ("Qwen-Qwen3-Next-80B-A3B-Instruct", "tp 2"),
        ("meta-llama-Llama-3.1-70B-Instruct", "tp 2, pp 2"),
        ("deepseek-ai-DeepSeek-V3.2", "MLA (one copy for every TP rank), pp 2, cp 2"),
        ("google-gemma-3-27b-it", "tp 1"),
    }
    # one page of Qwen3-Next: KV and mamba state, on both TP ranks, is one chunk
    key = "4a715ec13f624275bd974bbfde37a3da6cf0e49d28ce3615412ad66d2d673846"
    qwen = [p for p, m in chunks.items() if p.startswith(key) and "Qwen3-Next" in p]
    assert len(qwen) == 4
    assert len({chunks[p].chunk for p in qwen}) == 1
    assert {chunks[p].rank for p in qwen} == {0, 1}
    # MLA keeps one file for all four TP ranks: no rank is named
    r1 = [m for p, m in chunks.items() if "DeepSeek-R1" in p]
    assert len(r1) == 3
    assert all(m.rank == -1 and m.world == 0 for m in r1)
    # 70B on tp 2 x pp 2: the world is four ranks
    assert {m.world for p, m in chunks.items() if "70B" in p} == {4}
    # different pages are different chunks
    assert len({m.chunk for m in chunks.values()}) == 3 * 6


def test_vllm_fs_tier_names_and_config_as_its_file_mapper_wrote_them():
    recorded = _recorded("vllm-0.33.0.json")
    matches = {path: _of(path) for path, _size in recorded["files"]}
    assert all(m is not None and m.engine == "vllm" for m in matches.values())
    configs = [p for p, m in matches.items() if m and m.kind == CONFIG]
    assert sorted(configs) == sorted(recorded["configs"])
    temps = [p for p, m in matches.items() if m and m.kind == TEMP]
    assert len(temps) == 1
    assert temps[0].endswith("_4242424242424242.tmp")
    chunks = {p: m for p, m in matches.items() if m and m.kind == CHUNK}
    assert len(chunks) == 10
    # each chunk names the folder whose config.json describes it
    for m in chunks.values():
        assert f"{m.base}/config.json" in recorded["configs"]
    # a block on rank 0 and rank 1, or in KV cache group 0 and 1, is one chunk
    llama = [m for p, m in chunks.items() if p.startswith("meta-llama")]
    assert len(llama) == 6
    assert len({m.chunk for m in llama}) == 3
    assert {m.rank for m in llama} == {0, 1}
    gemma = [m for p, m in chunks.items() if p.startswith("google")]
    assert len(gemma) == 4
    assert len({m.chunk for m in gemma}) == 2
    model, dtype, layout, world = vllm_description(
        recorded["configs"]["google_gemma-3-27b-it_dd9fa7979fb5/config.json"]
    )
    assert (model, dtype, layout, world) == (
        "google/gemma-3-27b-it",
        "bfloat16",
        "tp 1, 2 KV cache groups",
        1,
    )
    # the temporary pins the chunk it is rewriting
    assert _of(temps[0]).chunk in {m.chunk for m in gemma}


def test_lmcache_local_disk_names_from_its_own_key_writer():
    torch = pytest.importorskip("torch")
    pytest.importorskip("cachetools")
    utils = pytest.importorskip("lmcache.utils")
    key = utils.CacheEngineKey(
        "meta-llama/Llama-3.1-70B-Instruct", 8, 3, 0xDEADBEEF1234, torch.bfloat16
    )
    # local_disk_backend.py:224: key.to_string().replace("/", "-") + ".pt"
    name = key.to_string().replace("/", "-") + ".pt"
    m = classify((), name)
    assert m == Match(
        "lmcache-disk",
        CHUNK,
        "meta-llama-Llama-3.1-70B-Instruct",
        "bfloat16",
        "world 8",
        8,
        3,
        m.chunk,
    )
    other_worker = utils.CacheEngineKey(
        "meta-llama/Llama-3.1-70B-Instruct", 8, 5, 0xDEADBEEF1234, torch.bfloat16
    )
    assert classify((), other_worker.to_string().replace("/", "-") + ".pt").chunk == m.chunk
    tagged = utils.CacheEngineKey(
        "m/x", 1, 0, 0xAB, torch.float16, request_configs={"lmcache.tag.user": "alice"}
    )
    t = classify((), tagged.to_string().replace("/", "-") + ".pt")
    assert t is not None
    assert t.dtype == "half"
    assert t.chunk != m.chunk
    layers = [classify((), k.to_string().replace("/", "-") + ".pt") for k in key.split_layers(3)]
    assert all(x is not None and x.engine == "lmcache-disk" for x in layers)
    assert len({x.chunk for x in layers}) == 1  # every layer of a layerwise key is one chunk


def test_lmcache_older_key_without_dtype():
    m = classify((), "vllm@meta-llama-Llama-3.1-8B@4@1@ab12cd.pt")
    assert m is not None
    assert (m.model, m.world, m.rank, m.dtype) == ("meta-llama-Llama-3.1-8B", 4, 1, "")


def test_lmcache_fs_native_names_from_its_own_cpp_client(tmp_path):
    fs = pytest.importorskip("lmcache.lmcache_fs")
    client = fs.LMCacheFSClient(str(tmp_path), 1, "", False, 0)
    # the MP-mode wire key (native_connector_l2_adapter.py _object_key_to_string):
    # model@<kv_rank:08x>@<group:x>@<chunk hash hex>; kv_rank = ws<<24 | rank<<16 | lws<<8 | lr
    kv_rank = 8 << 24 | 3 << 16 | 8 << 8 | 3
    keys = [
        f"meta-llama/Llama-3.1-8B@{kv_rank:08x}@0@{'ab' * 16}",
        f"meta-llama/Llama-3.1-8B@{kv_rank:08x}@0@{'cd' * 16}@salt1",
    ]
    client.submit_batch_set(keys, [memoryview(bytearray(4096)) for _ in keys])
    deadline = time.monotonic() + 10
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    client.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2
    found = [classify((), n) for n in names]
    assert all(m is not None and m.engine == "lmcache-fs" and m.kind == CHUNK for m in found)
    assert {(m.model, m.world, m.rank) for m in found} == {("meta-llama/Llama-3.1-8B", 8, 3)}
    assert found[0].chunk != found[1].chunk
    # its temporaries: the name with .tmp (fs adapter: with_suffix(".tmp")), or .data.tmp
    stem = names[0].removesuffix(".data")
    assert classify((), stem + ".tmp").kind == TEMP
    assert classify((), names[0] + ".tmp").kind == TEMP


def test_llmd_fs_backend_names_from_its_file_mapper():
    # llm-d-kv-cache llmd_fs_backend/file_mapper.py @04ef2db: base path, then <hhh>/<hh>/<hash>.bin
    digest = "0123456789abcdef" * 2
    folder = (
        "meta-llama", "Llama-3.1-70B-Instruct", "block_size_16_blocks_per_file_4",
        "tp_4_pp_size_2_pcp_size_1", "rank_5", "bfloat16", digest[:3], digest[3:5],
    )  # fmt: skip
    m = classify(folder, f"{digest}.bin")
    assert m is not None
    assert m.engine == "llm-d"
    assert m.kind == CHUNK
    assert (m.model, m.dtype, m.world, m.rank) == (
        "meta-llama/Llama-3.1-70B-Instruct",
        "bfloat16",
        8,
        5,
    )
    assert m.layout == "tp 4, pp 2, block 16 x 4 per file"
    other_rank = (*folder[:4], "rank_0", *folder[5:])
    assert classify(other_rank, f"{digest}.bin").chunk == m.chunk
    # file_io.cpp: <target>_<random>.tmp
    assert classify(folder, f"{digest}.bin_3141592653.tmp").kind == TEMP
    # a hash that does not belong in its fan-out folder is not llm-d's
    assert classify(folder, f"{'f' * 32}.bin") is None


def test_kvtool_t3_names_from_its_own_folder_medium(tmp_path):
    from kvtool.engine.mediums import FolderMedium

    medium = FolderMedium("T3", tmp_path)
    key = "ab" * 32
    medium.put(key, b"x" * 5000)
    medium.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1
    rel = files[0].relative_to(tmp_path).parts
    m = classify(rel[:-1], rel[-1])
    assert m is not None
    assert (m.engine, m.kind) == ("kvtool", CHUNK)
    assert classify(rel[:-1], f".{key}.1234.0badc0de.tmp").kind == TEMP
    assert classify(("quarantine",), f"{key}.kv.1796150000000000000").engine == "kvtool"
    assert classify(("cd", "ef"), f"{key}.kv") is None  # not in its fan-out folder


@pytest.mark.parametrize(
    "name",
    [
        "README", "notes.txt", "x.pt", "a@b@c@d@e.pt", "model@8@3@nothex@bfloat16.pt",
        "model@8@3@ab@notadtype.pt", "m@0x0801@0@ab.data", "m@08030001@0@ab.data",
        "abc_model.bin", f"{'a' * 64}.nopool_model_0_2.bin", "random.tmp", f"{'a' * 64}_.bin",
    ],
)  # fmt: skip
def test_names_no_layout_writes_are_unknown(name):
    assert classify((), name) is None


def test_model_names_compare_across_engines():
    assert model_key("meta-llama/Llama-3.1-8B") == model_key("meta-llama-Llama-3.1-8B")
    assert model_key("meta-llama-SEP-Llama-3.1-8B") == model_key("meta-llama_Llama-3.1-8B")
    assert model_key("meta-llama/Llama-3.1-8B") != model_key("meta-llama/Llama-3.1-70B")


# --- the layouts the issue "inspect and gc read every engine's real files" added ---------------


def _builtin_hashes(seeds: range) -> list[int]:
    """Chunk hashes as LMCache 0.5.6 makes them by default: Python's builtin ``hash`` of the
    (prefix, tokens, extra) tuple (``v1/token_database.py`` ``_hash_tokens``, with
    ``pre_caching_hash_algorithm: builtin``, ``v1/config.py:131-133``), one per process seed."""
    import subprocess
    import sys

    code = "print(hash((None, (1, 2, 3, 4), None)))"
    return [
        int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": str(seed)}, check=True).stdout)
        for seed in seeds
    ]  # fmt: skip


def _lmcache_method(relative: str, cls: str, name: str):
    """One method of LMCache 0.5.6's own source, as shipped (its module imports the GPU
    stack; the method needs none of it)."""
    import ast
    import os
    import urllib.parse

    lmcache = pytest.importorskip("lmcache")
    path = Path(lmcache.__file__).parent / relative
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    item.decorator_list = []
                    module = ast.Module(body=[item], type_ignores=[])
                    namespace = {"os": os, "urllib": urllib, "Path": Path, "Tuple": tuple,
                                 "Optional": object, "CacheEngineKey": object}  # fmt: skip
                    exec(compile(module, str(path), "exec"), namespace)
                    return namespace[name]
    raise AssertionError(f"{cls}.{name} not in {path}")


def test_lmcache_keys_with_the_default_builtin_hash_read_whatever_its_sign():
    torch = pytest.importorskip("torch")
    pytest.importorskip("cachetools")
    utils = pytest.importorskip("lmcache.utils")
    hashes = _builtin_hashes(range(12))
    assert any(h < 0 for h in hashes)
    assert any(h > 0 for h in hashes)
    file_name = _lmcache_method(
        "v1/storage_backend/connector/fs_connector.py", "FSConnector", "_get_file_name"
    )
    key_to_path = _lmcache_method("v1/storage_backend/gds_backend.py", "GdsBackend", "_key_to_path")
    gds = type("Gds", (), {"gds_path": "/g", "data_suffix": ".kvcache.safetensors"})()
    for digest in hashes:
        chunks = set()
        for worker in range(2):
            key = utils.CacheEngineKey("meta-llama/Llama-3.1-8B", 2, worker, digest, torch.float16)
            disk = classify((), key.to_string().replace("/", "-") + ".pt")  # local_disk:224
            connector = classify((), file_name(None, key))
            gds_path = key_to_path(gds, key)[0].removeprefix("/g/").split("/")
            data = classify(tuple(gds_path[:-1]), gds_path[-1])
            metadata = classify(tuple(gds_path[:-1]), gds_path[-1] + ".metadata")
            temp = classify(tuple(gds_path[:-1]), gds_path[-1] + ".tmp0a1b2c3d")
            for found, engine in ((disk, "lmcache-disk"), (connector, "lmcache-fs"),
                                  (data, "lmcache-gds"), (metadata, "lmcache-gds")):  # fmt: skip
                assert found is not None, (engine, digest)
                assert (found.engine, found.kind, found.world, found.rank) == (
                    engine,
                    CHUNK,
                    2,
                    worker,
                )
                chunks.add((engine, found.chunk))
            assert connector.model == "meta-llama/Llama-3.1-8B"
            assert temp is not None
            assert temp.kind == TEMP
        assert len(chunks) == 3  # each backend's files of one hash, every worker: one chunk
        assert classify((), file_name(None, key).removesuffix(".data") + ".tmp").kind == TEMP


def test_lmcache_0312_keys_as_its_writer_wrote_them():
    recorded = _recorded("lmcache-0.3.12.json")
    found = [_of(path) for path, _size in recorded["files"]]
    assert all(m is not None and m.engine == "lmcache-disk" for m in found)
    assert {m.model for m in found} == {"meta-llama-Llama-3.1-8B-Instruct", "m-x"}
    llama = [m for m in found if m.model.startswith("meta")]
    assert {m.world for m in llama} == {2}
    assert len({m.chunk for m in llama}) == 3  # three hashes (one negative), two workers each
    layered = [m for m in found if m.model == "m-x"]
    assert len({m.chunk for m in layered}) == 1  # both layers of one key: one chunk


def test_every_sglang_pool_as_its_writer_wrote_it():
    recorded = _recorded("sglang-0.5.23-pools.json")
    from kvtool.folders.layouts import SGLANG_POOLS

    assert set(SGLANG_POOLS) == set(recorded["pools"])  # the whole enum, no more
    found = [_of(path) for path, _size in recorded["files"]]
    assert all(m is not None and m.engine == "sglang" for m in found)
    assert len({m.chunk for m in found}) == 2  # two pages, every pool of each: one chunk


def test_llmd_since_pr_585_is_named_by_its_config_and_claims_no_agnosticism():
    from kvtool.folders.layouts import folder_config_engine

    recorded = _recorded("llm-d-7be76e1.json")
    found = [_of(path) for path, _size in recorded["files"]]
    assert all(m is not None for m in found)
    configs = recorded["configs"]
    assert {folder_config_engine(c) for c in configs.values()} == {"llm-d"}
    tp2 = next(c for c in configs.values() if c["tp_size"] == 2)
    agnostic = next(c for c in configs.values() if c["model_name"] == "Qwen/Qwen3-32B")
    assert vllm_description(tp2)[2:] == ("tp 2", 2)
    layout, world = vllm_description(agnostic)[2:]
    assert world == 0  # never judged an orphan: it may be every layout's
    assert "llm-d's config does not say" in layout
    vllm_config = _recorded("vllm-0.33.0.json")["configs"]
    assert {folder_config_engine(c) for c in vllm_config.values()} == {"vllm"}

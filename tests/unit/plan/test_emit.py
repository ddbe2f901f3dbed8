"""Engine configurations parse, and use only the key and flag names the engines define.

The allowed names are those verified in each project's code or docs (docs/planning.md lists
file and commit); a renamed or misspelt key makes these tests fail.
"""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from kvtool.errors import InputError
from kvtool.plan.emit import EmitInputs, emit

LMCACHE_KEYS = {
    "chunk_size",
    "local_cpu",
    "max_local_cpu_size",
    "max_local_disk_size",
    "remote_serde",
    "save_decode_cache",
    "gds_path",
    "gds_buffer_size",
    "remote_storage_plugins",
    "extra_config",
}
LMCACHE_EXTRA_KEYS = {"remote_storage_plugin.fs.base_path", "fs_connector_use_odirect"}
VLLM_FLAGS = {
    "--tensor-parallel-size",
    "--max-model-len",
    "--kv-cache-dtype",
    "--gpu-memory-utilization",
    "--kv-offloading-backend",
    "--kv-offloading-size",
    "--kv-transfer-config",
}
VLLM_KV_DTYPES = {
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_per_token_head",
    "int8_per_token_head",
    "int4_per_token_head",
    "nvfp4",
}
SGLANG_FLAGS = {
    "--model-path",
    "--tp-size",
    "--context-length",
    "--kv-cache-dtype",
    "--page-size",
    "--enable-hierarchical-cache",
    "--hicache-ratio",
    "--hicache-write-policy",
    "--hicache-io-backend",
    "--hicache-mem-layout",
    "--hicache-storage-backend",
    "--hicache-storage-prefetch-policy",
}
DYNAMO_ENV = {
    "DYN_KVBM_CPU_CACHE_GB",
    "DYN_KVBM_DISK_CACHE_GB",
    "DYN_KVBM_DISK_CACHE_DIR",
    "DYN_KVBM_DISK_ZEROFILL_FALLBACK",
    "DYN_KVBM_LEADER_WORKER_INIT_TIMEOUT_SECS",
}


def inputs(**change: object) -> EmitInputs:
    base = {
        "model_id": "meta-llama/Llama-3.1-70B",
        "node_name": "p5en.48xlarge",
        "chips": 8,
        "max_model_len": 131_072,
        "kv_dtype": "fp8_e4m3",
        "model_dtype": "bf16",
        "gpu_memory_utilization": 0.9,
        "t2_bytes_per_node": 1_759 * 10**9,
        "kv_space_bytes_per_node": 933 * 10**9,
        "t3_bytes_per_node": 2 * 10**12,
        "t3_dir": "/fsx/kv cache",
        "use_gds": False,
        "eager": True,
        "kvtool_version": "0.1.0",
    }
    base.update(change)
    return EmitInputs(**base)  # type: ignore[arg-type]


def command_flags(text: str) -> tuple[dict[str, str], list[str]]:
    line = [ln for ln in text.splitlines() if ln and not ln.startswith("#")][-1]
    words = shlex.split(line)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


@pytest.mark.parametrize("use_gds", [False, True])
def test_lmcache_yaml_parses_with_known_keys(use_gds: bool) -> None:
    data = yaml.safe_load(emit("lmcache", inputs(use_gds=use_gds)))
    assert set(data) <= LMCACHE_KEYS
    assert data["max_local_cpu_size"] == pytest.approx(1759 / 8, abs=0.1)
    if use_gds:
        assert data["gds_path"] == "/fsx/kv cache"
        assert data["gds_buffer_size"] == 8192
    else:
        assert data["remote_storage_plugins"] == ["fs"]
        assert set(data["extra_config"]) <= LMCACHE_EXTRA_KEYS


def test_vllm_with_t3_uses_the_lmcache_connector() -> None:
    env, words = command_flags(emit("vllm", inputs()))
    assert env == {"LMCACHE_CONFIG_FILE": "lmcache.yaml"}
    assert words[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]
    flags = {w for w in words if w.startswith("--")}
    assert flags <= VLLM_FLAGS
    config = json.loads(words[words.index("--kv-transfer-config") + 1])
    assert config == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert words[words.index("--kv-cache-dtype") + 1] in VLLM_KV_DTYPES


def test_vllm_without_t3_uses_native_cpu_offload_in_gib() -> None:
    _, words = command_flags(emit("vllm", inputs(t3_bytes_per_node=0, kv_dtype="bf16")))
    assert words[words.index("--kv-offloading-backend") + 1] == "native"
    assert words[words.index("--kv-offloading-size") + 1] == str(round(1_759e9 / 2**30))
    assert words[words.index("--kv-cache-dtype") + 1] == "auto"


def test_sglang_hicache_flags_and_storage_dir() -> None:
    env, words = command_flags(emit("sglang", inputs()))
    assert env == {"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": "/fsx/kv cache"}
    assert {w for w in words if w.startswith("--")} <= SGLANG_FLAGS
    assert words[words.index("--hicache-write-policy") + 1] == "write_through"  # eager
    assert float(words[words.index("--hicache-ratio") + 1]) == pytest.approx(1759 / 933, abs=0.05)
    assert words[words.index("--kv-cache-dtype") + 1] == "fp8_e4m3"  # SGLang has no plain fp8


def test_dynamo_env_lines_use_known_names() -> None:
    text = emit("dynamo", inputs())
    exports = [ln.split()[1].split("=", 1) for ln in text.splitlines() if ln.startswith("export")]
    assert {name for name, _ in exports} <= DYNAMO_ENV
    assert dict(exports)["DYN_KVBM_CPU_CACHE_GB"] == "1759"
    assert shlex.split(text.splitlines()[-1])[-2:] == ["--connector", "kvbm"]


def test_sglang_refuses_a_dtype_it_lacks() -> None:
    with pytest.raises(InputError, match="SGLang has no --kv-cache-dtype for int4"):
        emit("sglang", inputs(kv_dtype="int4"))


def test_unknown_target() -> None:
    with pytest.raises(InputError, match="unknown --emit 'trtllm'"):
        emit("trtllm", inputs())

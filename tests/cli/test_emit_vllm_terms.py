"""``plan --emit vllm`` in vLLM's own terms (issues 47, 52): the folder vLLM serves (not its
config.json), ``--dtype float32`` for fp32 KV, ``--kv-cache-memory-bytes`` where the plan fixes
the budget, and vLLM's CPU build (no share of host memory, no T2 offload). Every flag is one
vLLM 0.33.0's own parser defines (tests/fixtures/engines/vllm-0.33.0.json)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from tests.cli.test_kv_budget import RECORDED

VLLM = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "engines" / "vllm-0.33.0.json").read_text()
)


def _serve(tmp_path: Path, kvtool: Any, model: str, *args: str) -> list[str]:
    folder = tmp_path / model
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(RECORDED["models"][model]))
    result = kvtool("plan", str(folder), "--hardware", "p5en", "--ctx", "2048", "--tp", "1",
                    "--emit", "vllm", *args)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("vllm serve")]
    words = shlex.split(line)
    assert {w for w in words if w.startswith("--")} <= set(VLLM["flags"])
    assert words[2] == str(folder)  # the folder: vllm serve rejects <folder>/config.json
    return words


def _value(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words else None


def test_fp32_kv_is_the_model_run_in_float32(tmp_path: Path, kvtool: Any) -> None:
    words = _serve(tmp_path, kvtool, "llama-fp32", "--kv-dtype", "fp32")
    assert (_value(words, "--dtype"), _value(words, "--kv-cache-dtype")) == ("float32", "auto")


def test_a_fixed_budget_is_emitted_in_place_of_the_share(tmp_path: Path, kvtool: Any) -> None:
    words = _serve(tmp_path, kvtool, "llama", "--set", "kv_cache_memory_bytes=100000000")
    assert _value(words, "--kv-cache-memory-bytes") == "100000000"
    assert "--gpu-memory-utilization" not in words  # (vLLM ignores it then; config/cache.py)


def test_the_cpu_build_gets_its_budget_and_no_offload(tmp_path: Path, kvtool: Any) -> None:
    words = _serve(tmp_path, kvtool, "llama", "--engine", "vllm-cpu",
                   "--set", "kv_cache_memory_bytes=100000000")  # fmt: skip
    assert _value(words, "--block-size") == "128"
    assert _value(words, "--max-num-batched-tokens") == "2048"
    assert _value(words, "--kv-cache-memory-bytes") == "100000000"
    assert "--kv-offloading-size" not in words
    assert "--gpu-memory-utilization" not in words


def test_the_cpu_build_without_a_budget_is_refused(tmp_path: Path, kvtool: Any) -> None:
    result = kvtool("plan", "llama-3.1-8b", "--hardware", "p5en", "--ctx", "8k", "--emit", "vllm",
                    "--engine", "vllm-cpu")  # fmt: skip
    assert result.exit_code == 2
    assert "--gpu-memory-utilization is a share of the host's memory" in result.stderr


def test_vllm_032_emits_its_release(kvtool: Any) -> None:
    result = kvtool("plan", "llama-3.1-8b", "--hardware", "p5en", "--ctx", "8k", "--emit", "vllm",
                    "--engine", "vllm==0.32")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# vLLM 0.32.0 command for meta-llama/Llama-3.1-8B")


def test_vllm_t3_is_lmcache_or_fs(kvtool: Any) -> None:
    plan = ("plan", "llama-3.1-70b", "--hardware", "p5en", "--ctx", "128K", "--sessions", "500")
    bad = kvtool(*plan, "--emit", "vllm", "--set", "vllm_t3=nfs")
    assert bad.exit_code == 2
    assert "--set vllm_t3='nfs' is not a T3 for vLLM" in bad.stderr
    fs = kvtool(*plan, "--emit", "vllm", "--set", "vllm_t3=fs", "--t3-dir", "/fsx/kv")
    assert '"secondary_tiers":[{"type":"fs","root_dir":"/fsx/kv"}]' in fs.stdout
    assert "LMCACHE_CONFIG_FILE" not in fs.stdout
    unused = kvtool(*plan, "--emit", "sglang", "--engine", "sglang", "--set", "vllm_t3=fs")
    assert "--set vllm_t3 has no effect without --emit vllm" in unused.stderr

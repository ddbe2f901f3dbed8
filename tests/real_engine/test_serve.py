"""The command ``kvtool plan --emit vllm`` writes for vLLM's CPU build, started for real on
127.0.0.1: it must start, hold the pool kvtool size computed, and ``kvtool metrics`` must read
its counters exactly. Eight prompts of 300 tokens sharing their first 299 are sent one after
another: the first computes all 300, each later one finds two whole 128-token blocks cached,
so the engine counts 2,400 tokens looked up and 7 x 256 = 1,792 hit."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from tests.real_engine.cases import BUDGET

PROMPTS, SHARED, LENGTH, BLOCK = 8, 299, 300, 128


def _emitted(kvtool: Any, model: Path) -> list[str]:
    result = kvtool("plan", str(model), "--hardware", "p5en", "--ctx", "2048", "--tp", "1",
                    "--engine", "vllm-cpu", "--emit", "vllm",
                    "--set", f"kv_cache_memory_bytes={BUDGET}")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("vllm serve")]
    return shlex.split(line)


def test_the_emitted_command_starts_and_metrics_reads_it_exactly(
    kvtool: Any, models: Path, engine_env: dict[str, str], scratch: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from serve import serve

    words = _emitted(kvtool, models / "llama")
    assert words[2] == str(models / "llama")
    scrape = scratch / "live.prom"
    with serve(words[1:], engine_env, scratch / "serve.log") as server:
        for i in range(PROMPTS):
            prompt = [*range(1, SHARED + 1), 400 + i]
            body = {"model": str(models / "llama"), "prompt": prompt, "max_tokens": 2}
            answer = server.post("/v1/completions", body)
            assert answer["usage"]["prompt_tokens"] == LENGTH
        scrape.write_text(server.get("/metrics"))
    size = kvtool("size", str(models / "llama"), "--engine", "vllm-cpu", "--ctx", "2048",
                  "--kv-cache-memory-bytes", str(BUDGET), "--json")  # fmt: skip
    pool = json.loads(size.stdout)["results"][0]["pool"]
    result = kvtool("metrics", str(scrape), "--json")
    assert result.exit_code == 0, result.stderr
    (reading,) = json.loads(result.stdout)["sources"][0]["readings"]
    assert (reading["num_gpu_blocks"], reading["capacity_tokens"], reading["max_concurrency"]) == (
        pool["num_blocks"], pool["kv_cache_size_tokens"], pool["max_concurrency"]
    )  # fmt: skip
    assert (pool["num_blocks"], pool["kv_cache_size_tokens"]) == (381, 48_768)
    assert reading["kv_cache_memory_bytes"] == BUDGET
    assert reading["block_size"] == BLOCK
    assert reading["queried_tokens"] == PROMPTS * LENGTH
    hit = (PROMPTS - 1) * (SHARED // BLOCK) * BLOCK
    assert reading["hit_tokens"] == {"device": hit}
    assert reading["events"]["prompt_tokens_local_cache_hit"] == hit
    assert reading["events"]["prompt_tokens_local_compute"] == PROMPTS * LENGTH - hit
    assert reading["events"]["preemptions"] == 0
    assert not [m for m in reading["missing"] if m.startswith("kv_offload")]

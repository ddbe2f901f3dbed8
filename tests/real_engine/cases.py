"""The 22 configurations the real-engine tier sizes twice: by vLLM 0.32.0's CPU engine
(``engine_sizes.py``) and by ``kvtool size --engine vllm-cpu`` (``test_sizes.py``), each at a
100,000,000-byte KV budget (``--kv-cache-memory-bytes``). Plain data, imported by both sides.

Two are refused by vLLM, and kvtool must say why: fp8 KV on a CPU without AVX-512 or AMX
(``v1/attention/backends/cpu_attn.py:539-543``; kvtool warns), and Qwen3 at 32,768 tokens, one
request past the budget (kvtool refuses with the same longest --max-model-len). Head size 48 is
not in CPU_ATTN's list (``cpu_attn.py:68-70``) yet runs (its vec16 kernel, ``:526-531``); an MLA
latent of 320 starts and fails its first request (the decode kernel takes 576 only,
``mla/cpu_mla.py:61-64``; kvtool warns).
"""

from __future__ import annotations

from typing import Any, NamedTuple

BUDGET = 100_000_000  # bytes of KV: vLLM's --kv-cache-memory-bytes


class Case(NamedTuple):
    """One configuration: the model (``models.MODELS``), vLLM's --max-model-len, and what else
    it is started with (None: vLLM's default). ``kv_dtype`` is kvtool's --kv-dtype; the engine
    gets ``cache_dtype`` and ``dtype`` (its --kv-cache-dtype and --dtype)."""

    name: str
    model: str
    ctx: int
    batched: int | None = None  # --max-num-batched-tokens
    block: int | None = None  # --block-size
    kv_dtype: str | None = None  # kvtool --kv-dtype
    cache_dtype: str | None = None  # vLLM --kv-cache-dtype
    dtype: str | None = None  # vLLM --dtype


CASES: tuple[Case, ...] = (
    Case("llama-2k", "llama", 2048),
    Case("llama-32k", "llama", 32768),
    Case("llama-block32", "llama", 4096, block=32),
    Case("llama-block256", "llama", 4096, block=256),
    Case("llama-fp8", "llama", 4096, kv_dtype="fp8", cache_dtype="fp8"),
    Case("llama-fp32-auto", "llama-fp32", 4096),
    Case("llama-fp32-kv", "llama-fp32", 4096, kv_dtype="fp32", dtype="float32"),
    Case("llama-mha", "llama-mha", 8192),
    Case("llama-head48", "llama-head48", 4096),
    Case("qwen3-4k", "qwen3", 4096),
    Case("qwen3-32k", "qwen3", 32768),
    Case("mistral-swa-4k-512", "mistral-swa", 4096, batched=512),
    Case("mistral-swa-32k-512", "mistral-swa", 32768, batched=512),
    Case("mistral-swa-4k", "mistral-swa", 4096),
    Case("mistral-swa-1k", "mistral-swa", 1024),
    Case("gemma2-4k-512", "gemma2", 4096, batched=512),
    Case("gemma2-32k", "gemma2", 32768),
    Case("gemma3-4k-512", "gemma3", 4096, batched=512),
    Case("gemma3-32k-1024", "gemma3", 32768, batched=1024),
    Case("deepseek-v2-2k", "deepseek-v2", 2048),
    Case("deepseek-v3-16k", "deepseek-v3", 16384),
    Case("deepseek-v2-r256", "deepseek-v2-r256", 2048),
)


def kvtool_figures(record: dict[str, Any]) -> dict[str, Any]:
    """What ``kvtool size --json`` says of the pool (one result record), by vLLM's names."""
    pool = record["pool"]
    return {
        "num_blocks": pool["num_blocks"],
        "block_size": pool["block_size"],
        "groups": pool["kv_cache_groups"],
        "max_concurrency": pool["max_concurrency"],
        "tokens": pool["kv_cache_size_tokens"],
        "concurrent_batches": record["concurrent_batches"],
    }


def engine_figures(engine: dict[str, Any]) -> dict[str, Any]:
    """The same figures from ``engine_sizes.py``'s record of vLLM's own configuration; the
    max concurrency to kvtool's JSON precision (12 significant digits)."""
    return {
        "num_blocks": engine["num_blocks"],
        "block_size": engine["block_size"],
        "groups": len(engine["groups"]),
        "max_concurrency": float(f"{engine['max_concurrency']:.12g}"),
        "tokens": engine["tokens"],
        "concurrent_batches": engine["max_concurrent_batches"],
    }

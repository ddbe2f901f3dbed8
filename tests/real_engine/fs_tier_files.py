"""Files written by vLLM's own file-system tier (``FileSystemTierManager``, the ``fs`` tier of
its tiered offload) for each model given, all into one folder: run under the real-engine tier's
vLLM (``install.py``), never in the test environment itself.

For each model this builds the engine's own configuration (``EngineArgs`` with the tiered
offload ``plan --emit vllm --set vllm_t3=fs`` writes), its KV cache configuration
(``EngineCore._initialize_kv_caches``, as ``engine_sizes.py``), the ``TieringOffloadingSpec``
vLLM's connector would build from them (``build_offloading_config``), and the fs tier itself,
which stores ``CHUNKS`` chunks from a host buffer through its own thread pool: its config.json
and its block files, as a running engine writes them after a GPU-to-host copy (the copy is the
only part that needs a GPU: vLLM 0.32.0's CPU build refuses CPU offloading at start-up).

    python fs_tier_files.py ROOT MODEL_DIR [MODEL_DIR ...]
"""

from __future__ import annotations

import hashlib
import mmap
import os
import sys
import time
import types

CHUNKS = 4
BUDGET = 100_000_000


def write(model: str, root: str) -> int:
    import numpy as np
    from vllm.config import KVTransferConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import (
        build_offloading_config,
    )
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.executor.uniproc_executor import UniProcExecutor
    from vllm.v1.kv_offload.base import ReqContext, make_offload_key
    from vllm.v1.kv_offload.tiering.base import TransferJob
    from vllm.v1.kv_offload.tiering.fs.manager import FileSystemTierManager
    from vllm.v1.kv_offload.tiering.spec import TieringOffloadingSpec

    args = EngineArgs(model=model, max_model_len=2048, kv_cache_memory_bytes=BUDGET,
                      enforce_eager=True)  # fmt: skip
    config = args.create_engine_config(UsageContext.OPENAI_API_SERVER)
    executor = UniProcExecutor(config)
    try:
        core = types.SimpleNamespace(
            model_executor=executor, collective_rpc=executor.collective_rpc, vllm_config=config
        )
        kv = EngineCore._initialize_kv_caches(core, config)
    finally:
        executor.shutdown()
    config.kv_transfer_config = KVTransferConfig(
        kv_connector="OffloadingConnector",
        kv_role="kv_both",
        kv_connector_extra_config={
            "spec_name": "TieringOffloadingSpec",
            "cpu_bytes_to_use": 1 << 28,
            "secondary_tiers": [{"type": "fs", "root_dir": root}],
        },
    )
    spec = TieringOffloadingSpec(build_offloading_config(config, kv))
    chunk = spec.kv_bytes_per_chunk
    # a page-aligned host buffer, as the engine's own (the tier writes it with O_DIRECT)
    view = memoryview(mmap.mmap(-1, CHUNKS * chunk)).cast("B", [CHUNKS, chunk])
    tier = FileSystemTierManager(spec, view, "fs", root)
    keys = [make_offload_key(hashlib.sha256(f"{model}:{i}".encode()).digest(), 0)
            for i in range(CHUNKS)]  # fmt: skip
    job = TransferJob(
        job_id=1,
        keys=keys,
        chunk_ids=np.arange(CHUNKS),
        is_promotion=False,
        req_context=ReqContext(req_id="kvtool"),
    )
    tier.submit_store(job)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = [r for r in tier.get_finished_jobs() if r.job_id == 1]
        if done:
            assert done[0].success, done[0]
            return chunk
        time.sleep(0.05)
    raise TimeoutError("the fs tier did not finish its store in 60 s")


def main() -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()  # (see engine_sizes.py)
    root = sys.argv[1]
    for model in sys.argv[2:]:
        print(f"WROTE {model} {CHUNKS} x {write(model, root)} B", flush=True)
    os._exit(0)  # (the tier's thread pool and shared memory need no orderly exit here)


if __name__ == "__main__":
    main()

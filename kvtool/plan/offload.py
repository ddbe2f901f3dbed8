"""How each serving stack stores offloaded KV: copies per session in host memory (T2) and in the
file tier (T3), whether that file tier is shared, and what it takes from HBM. Pure.

A session's KV in HBM under tensor parallelism is every rank's share, replicas included (an MLA
latent is held whole by every rank). What the offload tiers hold differs by stack, read in the
released wheels (docs/planning.md cites file and line):

* ``vllm`` (vLLM 0.33.0 native CPU offload for T2, LMCache as the connector for T3): for MLA,
  one copy in host memory (``replicated_layout``, single-node tensor parallelism;
  ``vllm/v1/kv_offload/cpu/spec.py``) and one on the file tier (LMCache saves MLA from the first
  rank only). ``replicated_layout`` needs one pipeline stage on one node
  (``distributed/kv_transfer/kv_connector/v1/offloading/config.py:196-209``): else a copy per
  rank.
* ``lmcache`` (LMCache 0.5.6): MLA is saved from the first rank only (``save_only_first_rank``
  defaults to ``use_mla``, ``lmcache/v1/cache_engine.py``), in CPU memory and on the file tier;
  the GDS path pins ``gds_buffer_size`` MiB of GPU memory per worker. Under pipeline
  parallelism on one node the first rank is worker 0 (``v1/metadata.py:58, 75-77``,
  ``integration/vllm/utils.py:524-555``), which holds the first stage's layers only, so
  ``--emit`` turns ``save_only_first_rank`` off there and every rank keeps its copy.
* ``sglang`` (SGLang 0.5.23 HiCache): every rank builds its own host pool, a full MLA copy each
  (``MLATokenToKVPoolHost``); the file backend has one writer for MLA
  (``is_storage_writer``).
* ``trtllm`` (TensorRT-LLM 1.2.1): every rank's ``KVCacheManager`` keeps its own secondary
  (host) pool of ``host_cache_size`` bytes (``calculate_max_num_blocks``,
  ``_torch/pyexecutor/resource_manager.py``), an MLA latent in each; it has no file tier of its
  own (a KV connector, LMCache or Dynamo KVBM, would serve one).
* ``dynamo`` (Dynamo KVBM 1.6.1): per-rank host and disk pools; the disk tier is a private file
  per worker, deleted on exit, so it is not a shared T3.

For models without MLA every rank stores its own shard, so the offload tiers hold what HBM holds.
"""

from __future__ import annotations

from typing import NamedTuple

from kvtool.errors import InputError

# LMCache's GDS bounce buffer: gds_buffer_size MiB of GPU memory per worker (what --emit writes)
GDS_BUFFER_MIB = 8192


class OffloadLayout(NamedTuple):
    """One stack's offload rules; ``mla_*_single_copy`` say whether an MLA session is stored
    once (True) or once per tensor-parallel rank (False) in that tier."""

    name: str
    source: str
    mla_t2_single_copy: bool
    mla_t3_single_copy: bool
    t3_shared: bool
    gpu_reserve_mib_with_gds: int = 0
    host_pool_per_rank: bool = False  # every tensor-parallel rank builds its own host pool
    # the single MLA copy holds only for an engine of one pipeline stage (and, for T2, on one
    # host): else every rank keeps its own
    mla_single_copy_one_stage: bool = False
    mla_t2_single_copy_one_host: bool = False


LAYOUTS: dict[str, OffloadLayout] = {
    layout.name: layout
    for layout in (
        OffloadLayout(
            "vllm",
            "vLLM 0.33.0 native CPU offload + LMCache 0.5.6 file tier",
            mla_t2_single_copy=True,
            mla_t3_single_copy=True,
            t3_shared=True,
            gpu_reserve_mib_with_gds=GDS_BUFFER_MIB,  # its T3 is LMCache's
            mla_single_copy_one_stage=True,
            mla_t2_single_copy_one_host=True,
        ),
        OffloadLayout(
            "lmcache",
            "LMCache 0.5.6",
            mla_t2_single_copy=True,
            mla_t3_single_copy=True,
            t3_shared=True,
            gpu_reserve_mib_with_gds=GDS_BUFFER_MIB,
            mla_single_copy_one_stage=True,
        ),
        OffloadLayout(
            "sglang",
            "SGLang 0.5.23 HiCache",
            mla_t2_single_copy=False,
            mla_t3_single_copy=True,
            t3_shared=True,
            host_pool_per_rank=True,
        ),
        OffloadLayout(
            "dynamo",
            "Dynamo KVBM 1.6.1",
            mla_t2_single_copy=False,
            mla_t3_single_copy=False,
            t3_shared=False,
            host_pool_per_rank=True,
        ),
        OffloadLayout(
            "trtllm",
            "TensorRT-LLM 1.2.1 host cache (kv_cache_config.host_cache_size)",
            mla_t2_single_copy=False,
            mla_t3_single_copy=False,
            t3_shared=False,
            host_pool_per_rank=True,
        ),
    )
}


def get_layout(name: str) -> OffloadLayout:
    """A layout by name (the ``--emit`` targets); unknown names raise InputError listing the
    valid ones."""
    if name not in LAYOUTS:
        raise InputError(f"unknown --emit {name!r}", "choose one of " + ", ".join(LAYOUTS))
    return LAYOUTS[name]


def copies_divisor(
    layout: OffloadLayout, tier: str, *, is_mla: bool, tp: int, pp: int = 1, hosts: int = 1
) -> int:
    """How many times smaller a session is in ``tier`` ("T2" or "T3") than in HBM: ``tp`` for
    an MLA model stored once, else 1 (an engine of ``pp`` stages over ``hosts`` instances)."""
    if not is_mla or tp <= 1:
        return 1
    single = layout.mla_t2_single_copy if tier == "T2" else layout.mla_t3_single_copy
    if pp > 1 and layout.mla_single_copy_one_stage:
        single = False
    if hosts > 1 and tier == "T2" and layout.mla_t2_single_copy_one_host:
        single = False
    return tp if single else 1

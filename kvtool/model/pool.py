"""vLLM's KV pool in its own terms: the blocks a request is charged when it is admitted, and
what a fixed KV budget (``--kv-cache-memory-bytes``) holds. Pure.

The figures are those vLLM logs at start-up ("CPU KV cache size: 48,768 tokens, Maximum
concurrency for 2,048 tokens per request: 23.81x") and exports in ``vllm:cache_config_info``
(``num_gpu_blocks``, ``kv_cache_size_tokens``, ``kv_cache_max_concurrency``), computed as
vLLM 0.32.0 computes them (v1/core/kv_cache_utils.py):

* blocks: the budget floored to whole blocks, one block being one page of every KV cache
  group (``num_blocks = available_memory // bytes_per_block``, :1627;
  ``_get_kv_cache_bytes_per_block``, :1520-1551);
* max concurrency: blocks over the blocks one request of max_model_len takes from every
  group (``get_max_concurrency_for_kv_cache_config``, :1195-1228), as a float;
* tokens: ``int(max_concurrency * max_model_len)`` (``get_kv_cache_capacity``, :2300-2308);
* whether it starts: one request's blocks must fit the budget less the null block the pool
  holds back (``check_memory``, :2626-2646, ``_check_enough_kv_cache_memory``, :1003-1040),
  and where they do not, the longest max_model_len that would (``_estimate_max_model_len_
  from_groups``, :2369-2411, a binary search).

The budget is a rank's (each worker gets --kv-cache-memory-bytes); so are the blocks. The
tests/real_engine/ tier holds these figures to a running vLLM 0.32.0 CPU engine.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kvtool.model.kv import SizeResult


class Pool(NamedTuple):
    """What a fixed KV budget holds, a rank's, as vLLM computes it (see the module text)."""

    budget_bytes: int
    bytes_per_block: int
    num_blocks: int
    block_size: int
    blocks_per_request: int
    groups: int  # vLLM's KV cache groups
    max_model_len: int
    max_concurrency: float
    tokens: int
    starts: bool  # one request of max_model_len fits: vLLM starts
    longest_fit: int  # where it does not: the longest max_model_len that fits (0: none)


def vllm_pool(budget: int, size_at: "Callable[[int], SizeResult]", max_model_len: int) -> Pool:
    """``budget`` bytes of KV a rank (vLLM's ``--kv-cache-memory-bytes``) for requests of
    ``max_model_len`` tokens; ``size_at(L)`` sizes one request of L tokens under the engine's
    rules. ValueError where the result carries no pool in blocks (its layers' pages differ)."""
    size = size_at(max_model_len)
    per_block, per_request = _blocks(size)
    groups = size.kv_cache_groups or 0
    num_blocks = budget // per_block
    concurrency = num_blocks / per_request
    usable = budget - per_block  # the null block, held back (check_memory)

    def fits(length: int) -> bool:
        return per_block * _blocks(size_at(length))[1] <= usable

    starts = per_block * per_request <= usable
    longest = max_model_len
    if not starts:
        longest, left, right = 0, 1, max_model_len
        if fits(1):
            while left <= right:
                mid = (left + right) // 2
                if fits(mid):
                    longest, left = mid, mid + 1
                else:
                    right = mid - 1
    return Pool(
        budget_bytes=budget,
        bytes_per_block=per_block,
        num_blocks=num_blocks,
        block_size=size.block_size,
        blocks_per_request=per_request,
        groups=groups,
        max_model_len=max_model_len,
        max_concurrency=concurrency,
        tokens=int(concurrency * max_model_len),
        starts=starts,
        longest_fit=longest,
    )


def _blocks(size: "SizeResult") -> tuple[int, int]:
    if size.block_bytes_per_rank is None or size.blocks_per_request is None:
        raise ValueError(f"{size.model}: no pool in blocks under {size.engine_source}")
    return size.block_bytes_per_rank, size.blocks_per_request

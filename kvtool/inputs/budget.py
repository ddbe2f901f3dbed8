"""A fixed KV budget, as vLLM takes it (``--kv-cache-memory-bytes``: bytes of KV a rank, which
vLLM honours over ``--gpu-memory-utilization``, config/cache.py): ``kvtool size
--kv-cache-memory-bytes N`` and ``kvtool plan --set kv_cache_memory_bytes=N`` answer in
vLLM's terms (``model.pool``: blocks, tokens in the pool, max concurrency), and a plan takes
the pool as its T1 (as ``--calibrate`` takes a running engine's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvtool.errors import InputError
from kvtool.units import parse_bytes

if TYPE_CHECKING:
    from kvtool.model.pool import Pool
    from kvtool.model.shape import KvShape
    from kvtool.plan.cluster import Hardware
    from kvtool.plan.deployment import ContextPlans

OPTION = "--kv-cache-memory-bytes"


def parse_budget(text: str | None, shape: KvShape) -> int | None:
    """``--kv-cache-memory-bytes`` (bytes a rank, e.g. 100000000 or 20GiB); None when not
    given. InputError for a value that is not a size, or under an engine with no such budget."""
    if text is None:
        return None
    plain = text.strip().replace(",", "").replace("_", "")
    if len(plain) > 30:  # (past any memory; int() of thousands of digits raises)
        raise InputError(f"{OPTION} {text[:20]!r}... is past any memory", "give bytes a rank")
    budget = int(plain) if plain.isdigit() else parse_bytes(text, what=OPTION)  # (vLLM: bytes)
    if budget < 1:
        raise InputError(f"{OPTION} {text!r} is no budget", "give bytes a rank, e.g. 20GiB")
    if not shape.rules.charges_admission:
        raise InputError(
            f"{OPTION} is vLLM's KV budget; --engine {shape.rules.name} has none kvtool models",
            "use --engine vllm or vllm-cpu",
        )
    return budget


def pools(
    shape: KvShape, contexts: list[int], budget: int, batched: int | None
) -> tuple[Pool, ...]:
    """What ``budget`` holds at each context (``KvShape.pool``); InputError where kvtool has
    no pool in blocks for the model (its layers' pages differ)."""
    try:
        return tuple(shape.pool(ctx, budget, max_num_batched_tokens=batched) for ctx in contexts)
    except ValueError:
        raise InputError(
            f"{OPTION}: kvtool has no pool in blocks for {shape.spec.name} under"
            f" {shape.rules.source}: its layers' pages differ, and how vLLM unifies them is"
            " not modelled",
            f"size it without {OPTION}",
        ) from None


def budget_notes(found: tuple[Pool, ...], shape: KvShape) -> list[str]:
    """What the pools say beyond the table: a context vLLM would refuse to start with."""
    out = []
    for pool in found:
        if pool.starts:
            continue
        longest = (
            f"the longest --max-model-len that fits is {pool.longest_fit:,}"
            if pool.longest_fit
            else "not one token fits"
        )
        out.append(
            f"{pool.max_model_len:,} tokens: vLLM refuses to start with {pool.budget_bytes:,} B"
            f" of KV a rank: one request takes {pool.blocks_per_request:,} blocks of"
            f" {pool.bytes_per_block:,} B ({pool.blocks_per_request * pool.bytes_per_block:,} B),"
            f" more than the budget less the pool's null block"
            f" ({pool.budget_bytes - pool.bytes_per_block:,} B, kv_cache_utils.py:2626-2646);"
            f" {longest} (kv_cache_utils.py:2369-2411)"
        )
    return out


def budgeted_plan(
    shape: KvShape,
    hardware: Hardware,
    budget: int,
    contexts: list[int],
    plan: Callable[[KvShape, Hardware, int | None], ContextPlans],
    notes: list[str],
) -> tuple[ContextPlans, tuple[Pool, ...], Hardware]:
    """The plan with a fixed budget: planned once for the serving layout (tp, pp), then again
    with that layout and its pool (the budget in blocks, vLLM's tokens) as T1 in place of
    kvtool's estimate from HBM and ``gpu_memory_utilization`` (which vLLM ignores then)."""
    from dataclasses import replace  # (plan only: size stays lean, benchmarks/startup)

    first = plan(shape, hardware, None)
    serving = first.serving
    laid = shape.serving_tp(serving.tp)._replace(tp_given=True, pp=serving.pp)
    found = pools(laid, contexts, budget, first.batched.value)
    longest = max(found, key=lambda p: p.max_model_len)
    if not longest.starts:
        raise InputError(budget_notes((longest,), laid)[0], f"raise {OPTION}, or lower --ctx")
    pooled = replace(hardware, kv_pool_tokens_per_instance=longest.tokens)
    notes.append(
        f"{OPTION} {budget:,}: T1 is vLLM's pool of {longest.num_blocks:,} blocks of"
        f" {longest.block_size} tokens a rank ({longest.tokens:,} tokens, max concurrency"
        f" {longest.max_concurrency:.2f} at {longest.max_model_len:,} tokens), in place of"
        " kvtool's estimate from HBM; gpu_memory_utilization does not change it"
        " (config/cache.py)"
    )
    return plan(laid, pooled, serving.pp), found, pooled

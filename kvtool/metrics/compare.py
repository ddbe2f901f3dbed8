"""An engine's reading beside what kvtool's plan predicts for the same model and node. Pure.

The plan's device pool per engine instance is ``kv_space_bytes_per_node`` over the instances
per node (HBM x gpu_memory_utilization, less weights and the activation reserve:
``plan/placement.py``); in tokens, that over the KV bytes a token takes on all of an
instance's ranks. Tokens are compared only where every layer holds every token (no sliding
window, chunk or state layer, whose pools vLLM does not count linearly). A figure more than
``TOLERANCE`` away is a gap, with the likeliest reason when the engine's own settings say one
(its gpu_memory_utilization, block size, KV dtype).
"""

from __future__ import annotations

from typing import NamedTuple

from kvtool.metrics.engines import Reading
from kvtool.model.kv import SizeResult
from kvtool.plan.deployment import DeploymentPlan

TOLERANCE = 0.03  # vLLM's profiling run moves its pool by a percent or two between starts


class Gap(NamedTuple):
    """One figure, the engine's and the plan's, and what may explain a difference."""

    what: str
    engine: str
    plan: str
    gap: bool
    why: str = ""


def against_plan(reading: Reading, size: SizeResult, plan: DeploymentPlan) -> list[Gap]:
    """The engine's capacity, sessions, block size and KV dtype beside the plan's."""
    out: list[Gap] = []
    instances = plan.serving.instances
    assumed = plan.hardware.gpu_memory_utilization
    engine_util = reading.gpu_memory_utilization
    pool = plan.tiers.kv_space_bytes_per_node / instances
    linear = not size.fixed_bytes_per_session and all(g.window is None for g in size.groups)
    per_token = size.kv_bytes_per_token_unbounded
    if reading.capacity_tokens is not None and linear and per_token:
        engine_tokens = reading.capacity_tokens / reading.instances
        plan_tokens = pool / per_token
        off = abs(engine_tokens - plan_tokens) > TOLERANCE * plan_tokens
        why = []
        budget = reading.kv_cache_memory_bytes
        if budget is not None:  # (vLLM then ignores gpu_memory_utilization)
            why.append(f"the engine's KV is a fixed kv_cache_memory_bytes {budget:,} a rank:"
                       f" plan --set kv_cache_memory_bytes={budget} plans it")  # fmt: skip
        elif engine_util is not None and abs(engine_util - assumed) > 1e-9:
            hbm = plan.hardware.node.hbm_gib_per_chip * 2**30 * plan.serving.tp
            at_engine = (pool + (engine_util - assumed) * hbm) / per_token
            why.append(f"gpu_memory_utilization {engine_util:.2f} here, {assumed:.2f} assumed:"
                       f" at {engine_util:.2f} the plan says {at_engine:,.0f}")  # fmt: skip
            if abs(engine_tokens - at_engine) > TOLERANCE * at_engine:
                why.append(f"the plan runs tp {plan.serving.tp}, {instances} engine(s) a node:"
                           " pass --tp as the engine runs")  # fmt: skip
        elif off:
            why.append(f"the plan runs tp {plan.serving.tp}, {instances} engine(s) a node, and"
                       " reserves 2 GB a chip for activations; check --tp")  # fmt: skip
        out.append(Gap("KV pool, tokens per engine", f"{engine_tokens:,.0f}", f"{plan_tokens:,.0f}",
                       off, "; ".join(why)))  # fmt: skip
        ctx = size.ctx_tokens
        block = reading.block_size or size.block_size or 1
        per_session = -(-ctx // block) * block  # whole blocks
        engine_sessions = int(engine_tokens // per_session)
        admit = size.admission_bytes_per_session or size.kv_bytes_per_session
        plan_sessions = int(pool // admit)
        differs = engine_sessions != plan_sessions
        out.append(Gap(f"sessions of {ctx:,} tokens per engine", f"{engine_sessions:,}",
                       f"{plan_sessions:,}", differs,
                       "the pool's gap, in whole sessions" if differs else ""))  # fmt: skip
    elif reading.capacity_tokens is not None:
        tokens = f"{reading.capacity_tokens / reading.instances:,.0f}"
        out.append(Gap("KV pool, tokens per engine", tokens, "-", False,
                       "not compared: windowed or state layers"))  # fmt: skip
    if reading.block_size is not None and size.block_size:
        differs = reading.block_size != size.block_size
        out.append(Gap("block size, tokens", str(reading.block_size), str(size.block_size), differs,
                       "the plan's block is the backend's for this GPU; kvtool plan --set"
                       f" block_tokens={reading.block_size} plans the engine's"
                       if differs else ""))  # fmt: skip
    if reading.cache_dtype is not None:
        engine_dtype = reading.cache_dtype
        plan_dtype = size.kv_dtype
        differs = engine_dtype not in ("auto", plan_dtype) and not plan_dtype.startswith(
            engine_dtype
        )
        out.append(Gap("KV dtype", engine_dtype, plan_dtype, differs,
                       "pass --kv-dtype as the engine runs" if differs else ""))  # fmt: skip
    return out

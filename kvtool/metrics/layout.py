"""Which serving layout to hold an engine's metrics against. Pure.

The layout compared is, in order: the user's ``--tp``/``--pp``; else the one the scrape shows,
inferred from the engine's own KV pool (the tensor-parallel size whose planned pool per engine
instance is nearest it, within a factor of 1.5), and said to be inferred; else the plan's own
choice. Without this the comparison is a gap by construction: kvtool plans Llama 3.1 8B on a
p5 at tp 8 (4,578,851 tokens a pool) while the engine runs tp 1 (454,896).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from kvtool.errors import InputError
from kvtool.metrics.engines import Reading
from kvtool.plan.deployment import ContextPlans

NEAR = 1.5  # a planned pool further than this factor from the engine's is not its layout


class Chosen(NamedTuple):
    """The plans to compare with, and how their layout was chosen (``given``, ``inferred``
    or ``planned``), in words."""

    planned: ContextPlans
    source: str
    why: str


def engine_pool(readings: Sequence[Reading]) -> float | None:
    """The first reading's KV pool per engine instance, in tokens (None: none reported)."""
    for reading in readings:
        if reading.capacity_tokens:
            return reading.capacity_tokens / max(reading.instances, 1)
    return None


def choose_layout(
    plan_at: Callable[[int | None], ContextPlans],
    *,
    tp_given: bool,
    candidates: Sequence[int],
    readings: Sequence[Reading],
) -> Chosen:
    """``plan_at(tp)`` (None: the plan's own layout) for the layout to compare with."""
    if tp_given:
        return Chosen(plan_at(None), "given", "--tp as given")
    pool = engine_pool(readings)
    if pool:
        best: tuple[float, int, ContextPlans] | None = None
        for tp in candidates:
            try:
                planned = plan_at(tp)
            except InputError:
                continue  # a tp the engine or the node cannot run
            plan, size = planned.plans[0], planned.sizes[0]
            per_token = size.kv_bytes_per_token_unbounded
            if not per_token:
                continue
            tokens = plan.tiers.kv_space_bytes_per_node / plan.serving.instances / per_token
            if not tokens:
                continue
            off = max(tokens, pool) / min(tokens, pool)
            if off <= NEAR and (best is None or off < best[0]):
                best = (off, tp, planned)
        if best is not None:
            _, tp, planned = best
            return Chosen(planned, "inferred", (
                f"tp {tp} inferred from the engine's KV pool ({pool:,.0f} tokens an instance);"
                " --tp sets it"
            ))  # fmt: skip
    planned = plan_at(None)
    return Chosen(planned, "planned", f"tp {planned.serving.tp}, the plan's own layout (the"
                  " scrape shows no pool to infer one from); --tp sets it")  # fmt: skip

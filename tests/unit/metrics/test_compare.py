"""The engine's figures beside the plan's for the same model, node and layout."""

from __future__ import annotations

from pathlib import Path

from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.metrics.compare import against_plan
from kvtool.metrics.engines import read
from kvtool.metrics.prom import parse
from kvtool.plan.deployment import plan_contexts

SCRAPE = Path(__file__).parents[2] / "fixtures" / "metrics" / "vllm-0.33.0-llama-3.1-8b-t60.prom"


def gaps(tp: int, utilization: str | None = None):  # type: ignore[no-untyped-def]
    (reading,) = read(parse(SCRAPE.read_text()))
    shape = resolve_shape("llama-3.1-8b", tp=tp)
    node = resolve_hardware("p5", gpu_memory_utilization=utilization)
    planned = plan_contexts(shape, contexts=[131_072], sessions=1, hardware=node)
    return {g.what: g for g in against_plan(reading, planned.sizes[0], planned.plans[0])}


def test_the_engine_matches_the_plan_at_its_layout_and_says_why_it_differs() -> None:
    g = gaps(1)
    pool = g["KV pool, tokens per engine"]
    assert not pool.gap
    assert pool.engine == "454,896"
    assert "gpu_memory_utilization 0.90 here, 0.92 assumed: at 0.90 the plan says" in pool.why
    assert not g["sessions of 131,072 tokens per engine"].gap
    assert not g["block size, tokens"].gap
    assert not g["KV dtype"].gap


def test_at_the_engines_utilization_the_plan_comes_within_one_percent() -> None:
    pool = gaps(1, "0.90")["KV pool, tokens per engine"]
    engine, plan = (float(x.replace(",", "")) for x in (pool.engine, pool.plan))
    assert abs(engine - plan) < 0.01 * plan
    assert pool.why == ""


def test_a_layout_the_engine_does_not_run_is_a_gap_that_names_tp() -> None:
    pool = gaps(8)["KV pool, tokens per engine"]
    assert pool.gap
    assert "the plan runs tp 8" in pool.why


def test_a_fixed_budget_is_named_not_gpu_memory_utilization() -> None:
    """An engine that pins KV (kv_cache_memory_bytes) runs no gpu_memory_utilization: the gap
    names the budget and how to plan with it, not the unused label; a block the plan does
    not run is said with plan's own setting (metrics has no --block-tokens)."""
    text = SCRAPE.read_text().replace('kv_cache_memory_bytes="None"',
                                      'kv_cache_memory_bytes="60000000000"')  # fmt: skip
    text = text.replace('block_size="16"', 'block_size="32"')
    (reading,) = read(parse(text))
    shape = resolve_shape("llama-3.1-8b", tp=1)
    planned = plan_contexts(shape, contexts=[131_072], sessions=1, hardware=resolve_hardware("p5"))
    g = {x.what: x for x in against_plan(reading, planned.sizes[0], planned.plans[0])}
    why = g["KV pool, tokens per engine"].why
    assert "kv_cache_memory_bytes 60,000,000,000 a rank" in why
    assert "plan --set kv_cache_memory_bytes=60000000000" in why
    assert "gpu_memory_utilization" not in why
    assert "--set block_tokens=32" in g["block size, tokens"].why

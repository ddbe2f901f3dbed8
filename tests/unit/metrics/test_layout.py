"""The layout an engine's metrics are held against: given, else inferred from its pool, else
the plan's own."""

from __future__ import annotations

from pathlib import Path

from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.shape import resolve_shape
from kvtool.metrics.engines import read
from kvtool.metrics.layout import choose_layout
from kvtool.metrics.prom import parse
from kvtool.plan.deployment import ContextPlans, plan_contexts

FIXTURES = Path(__file__).parents[2] / "fixtures" / "metrics"
SHAPE = resolve_shape("llama-3.1-8b")
NODE = resolve_hardware("p5")


def plan_at(tp: int | None) -> ContextPlans:
    shape = SHAPE if tp is None else SHAPE._replace(tp=tp, tp_given=True)
    return plan_contexts(shape, contexts=[131_072], sessions=1, hardware=NODE, verdicts=False)


def test_the_engines_pool_names_its_tp_and_a_given_one_rules() -> None:
    readings = read(parse((FIXTURES / "vllm-0.33.0-llama-3.1-8b-t60.prom").read_text()))
    inferred = choose_layout(plan_at, tp_given=False, candidates=[1, 2, 4, 8], readings=readings)
    assert (inferred.source, inferred.planned.serving.tp) == ("inferred", 1)
    assert "tp 1 inferred from the engine's KV pool (454,896 tokens an instance)" in inferred.why
    given = choose_layout(plan_at, tp_given=True, candidates=[1, 2, 4, 8], readings=readings)
    assert given.source == "given"


def test_without_a_pool_or_near_one_the_plans_own_layout_is_said() -> None:
    own = plan_at(None).serving.tp
    for readings in ([], [read(parse("vllm:cache_config_info{num_gpu_blocks=\"1\","
                                     "block_size=\"16\"} 1\n"))[0]]):  # fmt: skip
        chosen = choose_layout(plan_at, tp_given=False, candidates=[1, 2, 4, 8],
                               readings=readings)  # fmt: skip
        assert (chosen.source, chosen.planned.serving.tp) == ("planned", own)
        assert "the plan's own layout" in chosen.why

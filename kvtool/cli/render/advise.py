"""``kvtool advise``: the criteria, the recommended tiers and posture, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural
from kvtool.units import format_bytes

if TYPE_CHECKING:
    from kvtool.plan.advise import AdviceResult


def advice_json(result: AdviceResult) -> dict[str, Any]:
    """``kvtool advise --json``."""
    advice = result.advice
    return {
        "model": result.model,
        "hardware": result.node,
        "nodes": result.workload.nodes,
        "sessions": result.workload.sessions,
        "tp": result.serving.tp,
        "pp": result.serving.pp,
        "weights_dtype": result.serving.weights_dtype,
        "contexts": {str(k): v for k, v in result.workload.contexts.items()},
        "session_bytes": {str(k): v for k, v in result.session_bytes.items()},
        "working_set_bytes": advice.working_set_bytes,
        "peak_working_set_bytes": advice.peak_working_set_bytes,
        "nodes_for_peak_in_t1": advice.nodes_for_peak_in_t1,
        "criteria": [
            {
                "name": c.name,
                "met": c.met,
                "value": c.amount,
                "threshold": c.bound,
                "unit": c.unit,
                "value_text": c.value,
                "threshold_text": c.threshold,
                "reason": c.reason,
            }
            for c in advice.criteria
        ],
        "criteria_met": sum(c.met for c in advice.criteria),
        "tiers": list(advice.tiers),
        "posture": advice.posture,
        "reasons": list(advice.reasons),
    }


def print_advice(result: AdviceResult) -> None:
    """``kvtool advise``: the criteria, then the recommendation and its reasons."""
    advice = result.advice
    echo(
        f"{result.model} on {result.workload.nodes} x {result.node},"
        f" {plural(result.workload.sessions, 'session')} (peak x{result.workload.peak_to_mean:g})"
    )
    echo(
        f"working set {format_bytes(advice.working_set_bytes)}, at peak"
        f" {format_bytes(advice.peak_working_set_bytes)}"
    )
    echo()
    table = Table("criterion", "met", "value", "threshold", left=(0, 1, 2, 3))
    for c in advice.criteria:
        table.add_row(c.name, "yes" if c.met else "no", c.value, c.threshold)
    echo(table.render())
    echo()
    echo(f"recommended tiers: {' + '.join(advice.tiers)}    write posture: {advice.posture}")
    for reason in advice.reasons:
        echo(f"  - {reason}")

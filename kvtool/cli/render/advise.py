"""``kvtool advise``: the criteria, the recommended tiers and posture, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural, print_notes
from kvtool.plan.t3_size import sized_why
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
        "placement": _placement_json(result),
    }


def _placement_json(result: AdviceResult) -> dict[str, Any] | None:
    """Where the peak's sessions live, the FSx for what stays on T3, and the T4 release."""
    from kvtool.cli.render.plan import release_json

    placed = result.placed
    if placed is None:
        return None
    t3, release = result.t3_size, placed.release
    return {
        "peak_sessions": placed.peak_sessions,
        "tiers": [
            {"tier": t.name, "medium": t.medium, "sessions": t.sessions, "used_bytes": t.used_bytes}
            for t in placed.tiers.tiers
        ],
        "t3_capacity_gib": None if t3 is None else t3.file_system.capacity_gib,
        "t3_capacity_source": None if t3 is None else t3.source,
        "t3_capacity_to_hold_gib": None if t3 is None else t3.capacity_gib,
        "t3_goal_text": None if t3 is None else t3.goal,
        "t3_goal_met": None if t3 is None else t3.goal_met,
        "t4_release": None if release is None else release_json(release),
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
    placed, t3 = result.placed, result.t3_size
    if placed is None or t3 is None:
        return
    fs = t3.file_system
    by_name = {t.name: t for t in placed.tiers.tiers}
    release = placed.release
    released = release.released_sessions if release is not None else 0
    kept = f"{by_name['T3'].sessions:,} on FSx (T3)"
    if released:
        kept += f", {released:,} released to S3 (T4)"
    echo()
    echo(
        f"at peak: {plural(by_name['T1'].sessions, 'session')} in T1,"
        f" {by_name['T2'].sessions:,} in T2, {kept}; FSx {fs.capacity_gib:,} GiB holds "
        + ("the hot share" if released else "them")
        + f" ({sized_why(t3)})",
        hang=2,
    )
    if release is not None and release.spilled_sessions:
        print_notes([release.summary(sessions=placed.peak_sessions)], blank_line=False)

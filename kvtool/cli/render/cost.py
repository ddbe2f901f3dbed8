"""``--cost``: a plan's monthly cost by line, per served session-hour, beside all in HBM."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, print_notes

if TYPE_CHECKING:
    from kvtool.plan.cost import Cost


def cost_json(cost: Cost) -> dict[str, Any]:
    p = cost.prices
    return {
        "prices": {"source": p.source, "date": p.date, "region": p.region, "example": p.example},
        "lines": [
            {**line._asdict(), "usd_per_month": round(line.usd_per_month, 2)} for line in cost.lines
        ],
        "usd_per_month": round(cost.usd_per_month, 2),
        "usd_per_session_hour": round(cost.usd_per_session_hour, 4),
        "all_in_hbm_nodes": cost.all_in_hbm_nodes,
        "all_in_hbm_usd_per_month": round(cost.all_in_hbm_usd_per_month, 2),
        "t4_usd_per_session_written": None
        if cost.t4_usd_per_session_written is None
        else round(cost.t4_usd_per_session_written, 6),
        "t4_usd_per_session_read": None
        if cost.t4_usd_per_session_read is None
        else round(cost.t4_usd_per_session_read, 6),
        "notes": list(cost.notes),
    }


def print_cost(title: str, cost: Cost) -> None:
    """One cost table under ``title``, with the prices' source and date, and its notes."""
    echo()
    echo(f"{title} ({cost.prices.source}, {cost.prices.date})")
    table = Table("tier", "what", "$ a month", "basis")
    for line in cost.lines:
        table.add_row(line.tier, line.what, f"{line.usd_per_month:,.0f}", line.basis)
    table.add_row("total", "", f"{cost.usd_per_month:,.0f}",
                  f"${cost.usd_per_session_hour:,.3f} per served session-hour")  # fmt: skip
    table.add_row("all in HBM", f"{cost.all_in_hbm_nodes:,} node(s)",
                  f"{cost.all_in_hbm_usd_per_month:,.0f}", "every session in T1")  # fmt: skip
    echo(table.render())
    print_notes(list(cost.notes), blank_line=False)

"""``--cost``: a plan's monthly cost by line, per served session-hour, beside all in HBM."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, print_notes

if TYPE_CHECKING:
    from kvtool.plan.cost import Cost


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def cost_json(cost: Cost) -> dict[str, Any]:
    p = cost.prices
    return {
        "prices": {"source": p.source, "date": p.date, "region": p.region, "example": p.example},
        "lines": [
            {**line._asdict(), "usd_per_month": _round(line.usd_per_month, 2)}
            for line in cost.lines
        ],
        "usd_per_month": _round(cost.usd_per_month, 2),
        "usd_per_session_hour": _round(cost.usd_per_session_hour, 4),
        "all_in_hbm_nodes": cost.all_in_hbm_nodes,
        "all_in_hbm_usd_per_month": _round(cost.all_in_hbm_usd_per_month, 2),
        "t4_usd_per_session_written": _round(cost.t4_usd_per_session_written, 6),
        "t4_usd_per_session_read": _round(cost.t4_usd_per_session_read, 6),
        "missing_prices": list(cost.missing),
        "storage_usd_per_month": _round(cost.storage_usd_per_month, 2),
        "all_fsx_gib": cost.all_fsx_gib,
        "all_fsx_usd_per_month": _round(cost.all_fsx_usd_per_month, 2),
        "intelligent_tiering": _tiering_json(cost),
        "notes": list(cost.notes),
    }


def _tiering_json(cost: Cost) -> dict[str, Any] | None:
    it = cost.intelligent_tiering
    if it is None:
        return None
    return {
        "lines": [{**line._asdict(), "usd_per_month": _round(line.usd_per_month, 2)}
                  for line in it.lines],
        "usd_per_month": _round(it.usd_per_month, 2),
        "storage_usd_per_month": _round(it.storage_usd_per_month, 2),
        "fit": it.fit,
        "sizing": it.sizing,
        "missing_prices": list(it.missing),
    }  # fmt: skip


def _usd(value: float | None) -> str:
    return "no price" if value is None else f"{value:,.0f}"


def print_cost(title: str, cost: Cost) -> None:
    """One cost table under ``title``, with the prices' source and date, and its notes; a line
    whose price is missing says so (its basis names the price and how to give it)."""
    echo()
    echo(f"{title} ({cost.prices.source}, {cost.prices.date})")
    table = Table("tier", "what", "$ a month", "basis")
    for line in cost.lines:
        table.add_row(line.tier, line.what, _usd(line.usd_per_month), line.basis)
    per_hour = (
        "a price is missing"
        if cost.usd_per_session_hour is None
        else f"${cost.usd_per_session_hour:,.3f} per served session-hour"
    )
    table.add_row("total", "", _usd(cost.usd_per_month), per_hour)
    table.add_row("all in HBM", f"{cost.all_in_hbm_nodes:,} node(s)",
                  _usd(cost.all_in_hbm_usd_per_month), "every session in T1")  # fmt: skip
    if cost.all_fsx_gib is not None:
        table.add_row("T3 + T4", "FSx hot + S3", _usd(cost.storage_usd_per_month),
                      "this plan's storage: idle sessions released to S3")  # fmt: skip
        table.add_row("all on FSx", f"{cost.all_fsx_gib:,} GiB", _usd(cost.all_fsx_usd_per_month),
                      "every spilled session on FSx, none released")  # fmt: skip
    it = cost.intelligent_tiering
    if it is not None:
        table.add_row("T3 + FSx IT", "FSx hot + Intelligent-Tiering",
                      _usd(it.storage_usd_per_month),
                      "the released sessions on FSx Intelligent-Tiering, not S3 (see the"
                      " note)")  # fmt: skip
    notes = list(cost.notes)
    if it is not None:
        own = "no price" if it.usd_per_month is None else f"${it.usd_per_month:,.0f}"
        notes.append(
            "FSx Intelligent-Tiering for the released sessions, in place of S3: "
            + "; ".join(
                f"{line.what} "
                + ("no price" if line.usd_per_month is None else f"${line.usd_per_month:,.0f}")
                + f": {line.basis}"
                for line in it.lines
            )
            + f"; {own} a month; {it.sizing}; {it.fit}; not planned: FSx moves no file between"
            " file systems"
            " (a mover and a second folder for the engine), and its per-request costs need a"
            " request rate the plan has no figure for"
        )
    echo(table.render())
    print_notes(notes, blank_line=False)

"""Every byte kvtool prints goes through here: rich tables for people, JSON for programs.

``--json`` output is built from the same result objects as the tables, so both always agree.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kvtool.model.kv import SizeResult
from kvtool.model.spec import ModelSpec, group_kind
from kvtool.profiles.resolve import ResolvedModel
from kvtool.profiles.schema import ModelProfile
from kvtool.units import format_bytes, format_bytes_decimal


def _bytes_and_decimal(num_bytes: int) -> str:
    return f"{num_bytes:,} B ({format_bytes_decimal(num_bytes)})"


def _source_line(profile: ModelProfile) -> str:
    source = profile.source
    return f"{source.repository}/{source.path}@{source.commit[:12]}"


def print_json(data: Any) -> None:
    """Pretty JSON on stdout, keys in the order built."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


class _Table:
    """A plain fixed-width text table.

    Hand-rolled rather than rich's Table: importing rich.console and rich.table costs about
    20 ms, a fifth of kvtool's whole start-up budget, and these tables need no styling.
    """

    def __init__(self, *columns: str, left: tuple[int, ...] = (0,)) -> None:
        self.columns = columns
        self.left = left
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def render(self) -> str:
        widths = [
            max(len(cell) for cell in column)
            for column in zip(self.columns, *self.rows, strict=True)
        ]

        def line(cells: tuple[str, ...]) -> str:
            parts = [
                cell.ljust(width) if index in self.left else cell.rjust(width)
                for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
            ]
            return "  ".join(parts).rstrip()

        rule = "  ".join("-" * width for width in widths)
        return "\n".join([line(self.columns), rule, *(line(row) for row in self.rows)])


def _table(*columns: str, left: tuple[int, ...] = (0,)) -> _Table:
    return _Table(*columns, left=left)


def _print(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _group_json(result: SizeResult) -> list[dict[str, Any]]:
    return [
        {
            "kind": g.kind,
            "layers": g.num_layers,
            "window": g.window,
            "bytes_per_token": g.bytes_per_token,
            "tokens_held": g.tokens_held,
            "bytes_per_session": g.bytes_per_session,
            "fixed_bytes_per_session": g.fixed_bytes_per_session,
        }
        for g in result.groups
    ]


def size_json(
    resolved: ResolvedModel, results: list[SizeResult], *, contexts_typed: str
) -> dict[str, Any] | list[dict[str, Any]]:
    """One object per context (a list when several were asked for)."""
    objects = [
        {
            "model": r.model,
            "model_source": resolved.location,
            "engine": r.engine,
            "engine_source": r.engine_source,
            "kv_dtype": r.kv_dtype,
            "ctx_tokens": r.ctx_tokens,
            "sessions": r.sessions,
            "tp": r.tp,
            "block_size": r.block_size,
            "kv_bytes_per_token": r.kv_bytes_per_token,
            "kv_bytes_per_token_unbounded": r.kv_bytes_per_token_unbounded,
            "kv_bytes_per_session": r.kv_bytes_per_session,
            "kv_bytes_per_rank_per_session": r.kv_bytes_per_rank_per_session,
            "kv_bytes_total": r.kv_bytes_total,
            "fixed_bytes_per_session": r.fixed_bytes_per_session,
            "layer_groups": _group_json(r),
            "notes": list(r.notes),
        }
        for r in results
    ]
    return objects[0] if len(objects) == 1 else objects


def print_size(resolved: ResolvedModel, results: list[SizeResult]) -> None:
    """The human view of ``kvtool size``: header, layer groups, one row per context."""
    first = results[0]
    _print(f"{first.model}  {resolved.location} ({resolved.origin})")
    _print(
        f"engine {first.engine} ({first.engine_source})  kv dtype {first.kv_dtype}"
        + (f"  block {first.block_size} tokens" if first.block_size > 1 else "")
        + (f"  tp {first.tp}" if first.tp > 1 else "")
    )
    _print()
    groups = _table("layer group", "layers", "window", "bytes/token", "state/session")
    for g in first.groups:
        groups.add_row(
            g.kind,
            str(g.num_layers),
            f"{g.window:,}" if g.window else "-",
            f"{g.bytes_per_token:,} B" if g.bytes_per_token else "-",
            format_bytes(g.fixed_bytes_per_session) if g.fixed_bytes_per_session else "-",
        )
    groups.add_row(
        "all layers",
        str(sum(g.num_layers for g in first.groups)),
        "",
        _bytes_and_decimal(first.kv_bytes_per_token_unbounded),
        format_bytes(first.fixed_bytes_per_session) if first.fixed_bytes_per_session else "-",
    )
    _print(groups.render())
    _print()
    columns = ["context", "B/token at ctx", "per session"]
    if first.tp > 1:
        columns.append("per session, one rank")
    plural = "s" if first.sessions > 1 else ""
    columns.append(f"total ({first.sessions:,} session{plural})")
    totals = _table(*columns)
    for r in results:
        row = [
            f"{r.ctx_tokens:,} tokens",
            f"{r.kv_bytes_per_token:,} B",
            format_bytes(r.kv_bytes_per_session),
        ]
        if first.tp > 1:
            row.append(format_bytes(r.kv_bytes_per_rank_per_session))
        row.append(format_bytes(r.kv_bytes_total))
        totals.add_row(*row)
    _print(totals.render())
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    if notes:
        _print()
    for note in notes:
        _print(f"note: {note}")


def models_json(rows: list[tuple[ModelProfile, ModelSpec, int]]) -> list[dict[str, Any]]:
    """``kvtool models --json``: one object per bundled model."""
    return [
        {
            "name": profile.name,
            "hf_id": profile.hf_id,
            "family": profile.family,
            "aliases": list(profile.aliases),
            "model_type": spec.model_type,
            "layers": spec.num_layers,
            "attention": "+".join(dict.fromkeys(group_kind(g) for g in spec.groups)),
            "dtype": spec.dtype,
            "kv_bytes_per_token": per_token,
            "source": _source_line(profile),
        }
        for profile, spec, per_token in rows
    ]


def print_models(rows: list[tuple[ModelProfile, ModelSpec, int]]) -> None:
    """``kvtool models``: a table of bundled models with bytes per token."""
    table = _table("name", "hf id", "KV bytes/token", "layer groups", left=(0, 1, 3))
    for item in models_json(rows):
        table.add_row(
            item["name"],
            item["hf_id"],
            f"{item['kv_bytes_per_token']:,}",
            item["attention"],
        )
    _print(table.render())
    _print()
    _print(
        f"{len(rows)} bundled models; KV bytes per token by the textbook formula in the model"
        " dtype.\nAny other model: pass a config.json path or a Hugging Face repo id."
    )

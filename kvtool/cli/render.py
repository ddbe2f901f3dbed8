"""Every byte kvtool prints goes through here: rich tables for people, JSON for programs.

``--json`` output is built from the same result objects as the tables, so both always agree.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from kvtool.model.spec import group_kind
from kvtool.units import format_bytes, format_bytes_decimal

if TYPE_CHECKING:  # types only: importing the planners here would slow `kvtool size`
    from kvtool.cli.advising import AdviceResult
    from kvtool.model.kv import SizeResult
    from kvtool.model.spec import ModelSpec
    from kvtool.plan.deployment import DeploymentPlan
    from kvtool.profiles.resolve import ResolvedModel
    from kvtool.profiles.schema import ModelProfile, NodeProfile, StorageProfile


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
    resolved: ResolvedModel, results: list[SizeResult], plans: list[DeploymentPlan] | None = None
) -> dict[str, Any] | list[dict[str, Any]]:
    """One object per context (a list when several were asked for), with the tier plan when
    ``--hardware`` was given."""
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
    for obj, plan in zip(objects, plans or [], strict=False):
        obj.update(plan_json(plan))
    return objects[0] if len(objects) == 1 else objects


def plan_json(plan: DeploymentPlan) -> dict[str, Any]:
    """The ``tiers``, ``plan``, ``reload`` and ``fan_in`` keys of ``kvtool size --json``."""
    tiers = plan.tiers
    a = plan.assumptions
    return {
        "tiers": [
            {
                "name": t.name,
                "medium": t.medium,
                "capacity_bytes": t.capacity_bytes,
                "used_bytes": t.used_bytes,
                "sessions": t.sessions,
                "utilization": None if t.utilization is None else round(t.utilization, 4),
            }
            for t in tiers.tiers
        ],
        "plan": {
            "weights_dtype": plan.weights_dtype,
            "weights_bytes_per_node": tiers.weights_bytes_per_node,
            "kv_space_bytes_per_node": tiers.kv_space_bytes_per_node,
            "pressure_line_bytes_per_node": tiers.pressure_bytes_per_node,
            "sessions_per_node_in_t1": tiers.sessions_per_node_in_t1,
            "nodes_for_all_in_t1": tiers.nodes_for_all_in_t1,
            "total_kv_bytes": tiers.total_kv_bytes,
            "t3_bytes_needed": tiers.t3_bytes_needed,
            "fits_in_t1": tiers.fits_in_t1,
            "notes": list(tiers.notes),
        },
        "reload": {
            "assumptions": {
                "mfu": a.mfu,
                "concurrent_loads": a.concurrent_loads,
                "t3_path": a.t3_path,
                "compute": "fp8" if a.use_fp8_compute else "bf16",
            },
            "paths": [
                {
                    "tier": p.tier,
                    "description": p.description,
                    "latency_s": p.latency_s,
                    "node_bytes_per_s": p.node_bytes_per_s,
                    "reload_wins_from_tokens": plan.crossovers[p.tier],
                }
                for p in plan.paths
            ],
            "break_even": [
                {
                    "ctx_tokens": row.ctx_tokens,
                    "session_bytes": row.session_bytes,
                    "recompute_s": row.recompute_s,
                    "reload_s": row.reload_s,
                }
                for row in plan.break_even
            ],
        },
        "fan_in": [
            {
                "path": f.path,
                "link_gbps": f.link_gbps,
                "bytes_per_s": f.bytes_per_s,
                "sessions_per_s": f.sessions_per_s,
                "seconds_per_session": f.seconds_per_session,
            }
            for f in plan.fan_in
        ],
    }


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


def _seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:,.0f} us"
    if value < 1:
        return f"{value * 1e3:,.1f} ms"
    return f"{value:,.2f} s"


def _crossover(tokens: int | None) -> str:
    if tokens is None:
        return "never (up to 10M tokens)"
    if tokens <= 1:
        return "always"
    return f"from {tokens:,} tokens"


def print_plans(plans: list[DeploymentPlan]) -> None:
    """The tier plan, reload-vs-recompute and fan-in sections of ``kvtool size --hardware``."""
    for plan in plans:
        tiers = plan.tiers
        _print()
        _print(f"Tier plan at {plan.ctx_tokens:,} tokens")
        _print(
            f"weights {format_bytes(tiers.weights_bytes_per_node)} per node ({plan.weights_dtype});"
            f" KV space {format_bytes(tiers.kv_space_bytes_per_node)} per node, 85% line"
            f" {format_bytes(tiers.pressure_bytes_per_node)} = {tiers.sessions_per_node_in_t1:,}"
            " sessions"
        )
        table = _table("tier", "medium", "capacity", "used", "sessions", "use", left=(0, 1))
        for t in tiers.tiers:
            table.add_row(
                t.name,
                t.medium,
                "-" if t.capacity_bytes is None else format_bytes(t.capacity_bytes),
                format_bytes(t.used_bytes) if t.used_bytes else "0",
                f"{t.sessions:,}",
                "-" if t.utilization is None else f"{t.utilization:.0%}",
            )
        _print(table.render())
        _print(
            f"all in HBM: {tiers.nodes_for_all_in_t1:,} node(s) of this type"
            + (" (fits now)" if tiers.fits_in_t1 else "")
        )
        for note in tiers.notes:
            _print(f"note: {note}")
        a = plan.assumptions
        _print()
        _print(
            f"Reload vs recompute ({a.concurrent_loads} restores in flight per node share its"
            f" links; prefill at {a.mfu:.0%} MFU, {'fp8' if a.use_fp8_compute else 'bf16'} peak)"
        )
        for path in plan.paths:
            _print(
                f"  {path.tier}: {path.description}; latency {_seconds(path.latency_s)};"
                f" reload wins {_crossover(plan.crossovers[path.tier])}"
            )
        tiers_in_use = [p.tier for p in plan.paths]
        table = _table("context", "session KV", "recompute", *(f"{t} reload" for t in tiers_in_use))
        for row in plan.break_even:
            cells = [
                f"{row.ctx_tokens:,}",
                format_bytes_decimal(row.session_bytes),
                _seconds(row.recompute_s),
            ]
            for tier in tiers_in_use:
                mark = " *" if row.reload_s[tier] < row.recompute_s else ""
                cells.append(_seconds(row.reload_s[tier]) + mark)
            table.add_row(*cells)
        _print(table.render())
        _print("(* reload beats recompute)")
        _print()
        _print(f"Fan-in from T3 at {plan.ctx_tokens:,} tokens (one node, all its link)")
        table = _table("path", "link", "GB/s", "sessions/s", "per session")
        for f in plan.fan_in:
            table.add_row(
                f.path,
                f"{f.link_gbps:,.0f} Gbps",
                f"{f.bytes_per_s / 1e9:,.1f}",
                f"{f.sessions_per_s:,.1f}",
                _seconds(f.seconds_per_session),
            )
        _print(table.render())


def hardware_json(
    nodes: tuple[NodeProfile, ...], storage: tuple[StorageProfile, ...]
) -> dict[str, Any]:
    """``kvtool hardware --json``: every profile's fields, sources included."""
    from dataclasses import asdict

    return {
        "nodes": [asdict(n) for n in nodes],
        "storage": [asdict(s) for s in storage],
    }


def print_hardware(nodes: tuple[NodeProfile, ...], storage: tuple[StorageProfile, ...]) -> None:
    """``kvtool hardware``: one row per node profile, then the storage profiles."""
    table = _table("node", "accelerators", "HBM", "BF16 PF", "host DRAM", "EFA", "GDS", left=(0, 1))
    for n in nodes:
        table.add_row(
            n.name,
            f"{n.chips} x {n.accelerator}",
            format_bytes_decimal(n.hbm_bytes),
            f"{n.chips * n.bf16_tflops_per_chip / 1000:,.1f}",
            f"{n.host_memory_gib:,.0f} GiB" if n.host_memory_gib else "n/p",
            f"{n.efa_gbps:,.0f} Gbps",
            "yes" if n.gds else "no",
        )
    _print(table.render())
    _print()
    table = _table("storage", "tier", "medium", "latency", left=(0, 1, 2))
    for s in storage:
        table.add_row(s.name, s.tier.upper(), s.medium, _seconds(s.latency_us * 1e-6))
    _print(table.render())
    _print()
    _print("n/p = not published (no T2 is planned). Sources: profiles/hardware/*.toml [sources].")


def advice_json(result: AdviceResult) -> dict[str, Any]:
    """``kvtool advise --json``."""
    advice = result.advice
    return {
        "model": result.model,
        "hardware": result.node,
        "nodes": result.request.nodes,
        "sessions": result.request.sessions,
        "contexts": {str(k): v for k, v in result.request.contexts.items()},
        "session_bytes": {str(k): v for k, v in result.session_bytes.items()},
        "working_set_bytes": advice.working_set_bytes,
        "peak_working_set_bytes": advice.peak_working_set_bytes,
        "nodes_for_peak_in_t1": advice.nodes_for_peak_in_t1,
        "criteria": [
            {
                "name": c.name,
                "met": c.met,
                "value": c.value,
                "threshold": c.threshold,
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
    _print(
        f"{result.model} on {result.request.nodes} x {result.node},"
        f" {result.request.sessions:,} sessions (peak x{result.request.peak_to_mean:g})"
    )
    _print(
        f"working set {format_bytes(advice.working_set_bytes)}, at peak"
        f" {format_bytes(advice.peak_working_set_bytes)}"
    )
    _print()
    table = _table("criterion", "met", "value", "threshold", left=(0, 1, 2, 3))
    for c in advice.criteria:
        table.add_row(c.name, "yes" if c.met else "no", c.value, c.threshold)
    _print(table.render())
    _print()
    _print(f"recommended tiers: {' + '.join(advice.tiers)}    write posture: {advice.posture}")
    for reason in advice.reasons:
        _print(f"  - {reason}")

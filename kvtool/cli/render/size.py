"""``kvtool size``: the model header, its layer groups, one row per context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural, print_notes
from kvtool.units import format_bytes, format_bytes_decimal

if TYPE_CHECKING:
    from kvtool.model.kv import SizeResult
    from kvtool.plan.deployment import DeploymentPlan
    from kvtool.profiles.resolve import ResolvedModel


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
            "bytes_per_rank_per_session": g.bytes_per_rank_per_session,
        }
        for g in result.groups
    ]


def size_json(
    resolved: ResolvedModel,
    results: Sequence[SizeResult],
    plans: tuple[DeploymentPlan, ...] = (),
    batched_why: str = "",
) -> list[dict[str, Any]]:
    """A list with one object per context (one shape, however many were asked for), each
    with its tier plan when ``--hardware`` was given."""
    from kvtool.cli.render.plan import plan_json

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
            "admission_bytes_per_session": r.admission_bytes_per_session,
            "admission_bytes_per_rank_per_session": r.admission_bytes_per_rank_per_session,
            "max_num_batched_tokens": r.max_num_batched_tokens,
            "max_num_batched_tokens_source": batched_why or None,
            "max_context_tokens": resolved.spec.max_position_embeddings,
            "layer_groups": _group_json(r),
            "notes": list(r.notes),
        }
        for r in results
    ]
    for obj, plan in zip(objects, plans, strict=False):
        obj.update(plan_json(plan))
    return objects


def _admission_differs(results: Sequence[SizeResult]) -> bool:
    return any(
        r.admission_bytes_per_session is not None
        and r.admission_bytes_per_session > r.kv_bytes_per_session * 1.005
        for r in results
    )


def print_size(
    resolved: ResolvedModel, results: Sequence[SizeResult], batched_why: str = ""
) -> None:
    """The human view of ``kvtool size``: header, layer groups, one row per context."""
    first = results[0]
    admission = _admission_differs(results)
    echo(f"{first.model}  {resolved.location} ({resolved.origin})")
    echo(
        f"engine {first.engine} ({first.engine_source})  kv dtype {first.kv_dtype}"
        + (f"  block {first.block_size} tokens" if first.block_size > 1 else "")
        + (f"  tp {first.tp}" if first.tp > 1 else "")
    )
    echo()
    ranks = first.tp > 1
    heads = ["layer group", "layers", "window", "bytes/token"]
    if ranks:  # the figure a model card quotes is one rank's for a replicated MLA latent
        heads = [*heads[:3], f"bytes/token, {first.tp} ranks", "bytes/token, one rank"]
    groups = Table(*heads, "state/session")

    def rank_per_token(g: Any) -> str:
        if not g.bytes_per_token or not g.tokens_held:
            return "-"
        return f"{g.bytes_per_rank_per_session // g.tokens_held:,} B"

    for g in first.groups:
        cells = [
            g.kind,
            str(g.num_layers),
            f"{g.window:,}" if g.window else "-",
            f"{g.bytes_per_token:,} B" if g.bytes_per_token else "-",
        ]
        if ranks:
            cells.append(rank_per_token(g))
        cells.append(format_bytes(g.fixed_bytes_per_session) if g.fixed_bytes_per_session else "-")
        groups.add_row(*cells)
    total = [
        "all layers",
        str(resolved.spec.num_layers),
        "",
        f"{first.kv_bytes_per_token_unbounded:,} B"
        f" ({format_bytes_decimal(first.kv_bytes_per_token_unbounded)})",
    ]
    if ranks:  # the same share of the whole as a session's one-rank bytes
        share = first.kv_bytes_per_rank_per_session / max(first.kv_bytes_per_session, 1)
        total.append(f"{round(first.kv_bytes_per_token_unbounded * share):,} B")
    total.append(
        format_bytes(first.fixed_bytes_per_session) if first.fixed_bytes_per_session else "-"
    )
    groups.add_row(*total)
    echo(groups.render())
    echo()
    columns = ["context", "mean B/token", "per session"]
    if first.tp > 1:
        columns.append("per session, one rank")
    columns.append(f"total ({plural(first.sessions, 'session')})")
    if admission:
        columns.append("vLLM admits at")
        if first.tp > 1:
            columns.append("admits at, one rank")
    totals = Table(*columns)
    for r in results:
        row = [
            f"{r.ctx_tokens:,} tokens",
            # the session's bytes over its tokens: what a token costs on average at this
            # context (windows, state and block rounding in), never 0 for a windowed model
            f"{round(r.kv_bytes_per_session / r.ctx_tokens):,} B",
            format_bytes(r.kv_bytes_per_session),
        ]
        if first.tp > 1:
            row.append(format_bytes(r.kv_bytes_per_rank_per_session))
        row.append(format_bytes(r.kv_bytes_total))
        if admission:
            row.append(format_bytes(r.admission_bytes_per_session or 0))
            if first.tp > 1:
                row.append(format_bytes(r.admission_bytes_per_rank_per_session or 0))
        totals.add_row(*row)
    echo(totals.render())
    notes = [n for r in results for n in r.notes]
    if admission:
        notes.append(
            "vLLM admits a session only when its worst case fits: sliding-window and chunked"
            f" layers are charged their window plus {2 * (first.max_num_batched_tokens or 0):,}"
            f" tokens in flight (2 x --max-num-batched-tokens {first.max_num_batched_tokens:,},"
            f" {batched_why}), state layers two or three pages (prefix caching on). 'per"
            " session' and the totals are what a session holds once decoding; a tier plan"
            " fits sessions into HBM by the admission figure"
        )
    print_notes(notes)

"""``kvtool size``: the model header, its layer groups, one row per context."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, plural, print_notes
from kvtool.record import Record
from kvtool.units import format_bytes, format_bytes_decimal

if TYPE_CHECKING:
    from kvtool.model.kv import SizeResult
    from kvtool.model.params import Weights
    from kvtool.model.pool import Pool
    from kvtool.plan.cost import Cost
    from kvtool.plan.deployment import DeploymentPlan, Unservable
    from kvtool.profiles.resolve import ResolvedModel


def _group_json(result: "SizeResult") -> list[dict[str, Any]]:
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


def pool_json(pool: "Pool | None") -> dict[str, Any] | None:
    """A fixed KV budget's pool in vLLM's terms (``model.pool.Pool``), a rank's."""
    if pool is None:
        return None
    return {
        "kv_cache_memory_bytes": pool.budget_bytes,
        "bytes_per_block": pool.bytes_per_block,
        "num_blocks": pool.num_blocks,
        "block_size": pool.block_size,
        "blocks_per_request": pool.blocks_per_request,
        "kv_cache_groups": pool.groups,
        "max_model_len": pool.max_model_len,
        "max_concurrency": pool.max_concurrency,
        "kv_cache_size_tokens": pool.tokens,
        "starts": pool.starts,
        "longest_max_model_len": pool.longest_fit,
    }


def size_json(
    resolved: "ResolvedModel",
    results: "Sequence[SizeResult]",
    plans: "tuple[DeploymentPlan, ...]" = (),
    batched_why: str = "",
    *,
    weights: "Weights | None" = None,
    costs: "Sequence[Cost]" = (),
    unservable: "Sequence[Unservable]" = (),
    pools: "Sequence[Pool]" = (),
) -> list[dict[str, Any]]:
    """A list with one object per context (one shape, however many were asked for), each
    with the model's weights (None where kvtool does not count its parameters), its tier
    plan when ``--hardware`` was given (a context one node cannot serve: its verdict only) and,
    with --kv-cache-memory-bytes, the budget's pool (else null)."""
    pooled = {p.max_model_len: p for p in pools}
    from kvtool.cli.render.plan import plan_json, verdict_json

    objects: list[dict[str, Any]] = [
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
            # every layer's bytes for one token (the table's "bytes/token" of all layers), never
            # 0 for a model that caches KV; the mean at ctx_tokens takes windows and state in
            "kv_bytes_per_token": r.kv_bytes_per_token_unbounded,
            "kv_bytes_per_token_unbounded": r.kv_bytes_per_token_unbounded,
            "kv_bytes_per_token_mean": round(r.kv_bytes_per_session / r.ctx_tokens),
            "kv_bytes_per_session": r.kv_bytes_per_session,
            "kv_bytes_per_rank_per_session": r.kv_bytes_per_rank_per_session,
            "kv_bytes_total": r.kv_bytes_total,
            "fixed_bytes_per_session": r.fixed_bytes_per_session,
            "admission_bytes_per_session": r.admission_bytes_per_session,
            "admission_bytes_per_rank_per_session": r.admission_bytes_per_rank_per_session,
            "max_num_batched_tokens": r.max_num_batched_tokens,
            "max_num_batched_tokens_source": batched_why or None,
            "concurrent_batches": r.concurrent_batches,
            "pool": pool_json(pooled.get(r.ctx_tokens)),
            "max_context_tokens": resolved.spec.max_position_embeddings,
            "parameters": None if weights is None else weights.params.total,
            "active_parameters": None if weights is None else weights.params.active,
            "weights_dtype": None if weights is None else weights.dtype,
            "weights_bytes": None if weights is None else weights.nbytes,
            "layer_groups": _group_json(r),
            "notes": list(r.notes),
        }
        for r in results
    ]
    by_ctx = {obj["ctx_tokens"]: obj for obj in objects}
    for plan in plans:
        by_ctx[plan.ctx_tokens].update(plan_json(plan))
    for refused in unservable:
        by_ctx[refused.ctx_tokens]["verdict"] = verdict_json(refused)
    if costs:
        from kvtool.cli.render.cost import cost_json

        for plan, cost in zip(plans, costs, strict=False):
            by_ctx[plan.ctx_tokens]["cost"] = cost_json(cost)
    return objects


def print_costs(plans: "Sequence[DeploymentPlan]", costs: "Sequence[Cost]") -> None:
    """Each plan's monthly cost by tier, per served session-hour, beside all in HBM."""
    from kvtool.cli.render.cost import print_cost

    for plan, cost in zip(plans, costs, strict=True):
        print_cost(f"Cost a month at {plan.ctx_tokens:,} tokens", cost)


def _admission_differs(results: "Sequence[SizeResult]") -> bool:
    return any(
        r.admission_bytes_per_session is not None
        and r.admission_bytes_per_session > r.kv_bytes_per_session * 1.005
        for r in results
    )


def print_size(
    resolved: "ResolvedModel",
    results: "Sequence[SizeResult]",
    batched_why: str = "",
    pools: "Sequence[Pool]" = (),
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
    if pools:
        echo()
        echo(_pool_table(pools))
    notes = [n for r in results for n in r.notes]
    if admission:
        batches = first.concurrent_batches or 1
        batched = first.max_num_batched_tokens or 0
        notes.append(
            "vLLM admits a session only when its worst case fits: sliding-window and chunked"
            f" layers are charged their window plus {batches * batched:,} tokens in flight"
            f" ({batches} x --max-num-batched-tokens {batched:,}, {batched_why}; {batches}:"
            " vLLM's max_concurrent_batches, config/vllm.py), state layers two or three"
            " pages (prefix caching on). 'per session' and the totals are what a session holds"
            " once decoding; a tier plan fits sessions into HBM by the admission figure"
        )
    print_notes(notes)


def _pool_table(pools: "Sequence[Pool]") -> str:
    """A fixed KV budget's pool at each context, in vLLM's own terms (its start-up line
    'KV cache size: N tokens, Maximum concurrency for L tokens per request: Xx')."""
    first = pools[0]
    table = Table(
        "context", "blocks x tokens", "tokens in pool", "max concurrency", "blocks a request"
    )
    for p in pools:
        table.add_row(
            f"{p.max_model_len:,} tokens",
            f"{p.num_blocks:,} x {p.block_size}",
            f"{p.tokens:,}",
            f"{p.max_concurrency:.2f}x" if p.starts else "does not start",
            f"{p.blocks_per_request:,} x {p.bytes_per_block:,} B",
        )
    title = f"--kv-cache-memory-bytes {first.budget_bytes:,} a rank, in vLLM's terms"
    return title + "\n" + table.render()


class Compared(Record):
    """One model's row group in ``kvtool size a,b,c``: its sizes per context, its plans
    (with --hardware) and its weights (None: parameters not counted)."""

    resolved: "ResolvedModel"
    results: "Sequence[SizeResult]"
    plans: "tuple[DeploymentPlan, ...]"
    weights: "Weights | None"
    costs: "Sequence[Cost]" = ()
    unique: Sequence[int] = ()  # per context, one copy of a session's KV (no tp replicas)
    unservable: "Sequence[Unservable]" = ()  # contexts one node cannot serve (no plan)

    def one_copy(self, index: int) -> int:
        """A session's KV at context ``index``, counted once."""
        return self.unique[index] if self.unique else self.results[index].kv_bytes_per_session


def _billions(count: int) -> str:
    return f"{count / 1e9:,.1f} B" if count >= 1e8 else f"{count / 1e6:,.0f} M"


def print_comparison(models: Sequence[Compared]) -> None:
    """``kvtool size a,b,c``: one row per model (and context): parameters, weights at their
    dtype, KV per token (against the smallest), per session and in total, and with
    ``--hardware`` the nodes that hold every session in HBM and where the sessions go."""
    first = models[0].results[0]
    planned = any(m.plans or m.unservable for m in models)
    several_contexts = len(models[0].results) > 1
    echo(f"{len(models)} models, engine {first.engine} ({first.engine_source}),"
         f" {plural(first.sessions, 'session')}")  # fmt: skip
    echo()
    heads = ["model"] + (["context"] if several_contexts else [])
    ranks = any(r.tp > 1 for m in models for r in m.results)
    heads += ["params (active)", "weights", "kv dtype"] + (["tp"] if ranks else [])
    replicated = any(m.one_copy(i) != r.kv_bytes_per_session
                     for m in models for i, r in enumerate(m.results))  # fmt: skip
    heads += ["KV/token", "vs least"] + (["in HBM/token"] if replicated else [])
    heads += ["per session", "total"]
    if planned:
        heads += ["nodes, all in HBM", "sessions T1/T2/T3/T4"]
    priced = any(m.costs for m in models)
    if priced:
        heads += ["$ a month", "all in HBM $"]
    table = Table(*heads)
    least = {  # per context, the least mean KV bytes per token of any model, one copy each
        r.ctx_tokens: min(m.one_copy(i) for m in models) / r.ctx_tokens
        for i, r in enumerate(models[0].results)
    }
    notes: list[str] = []
    names = [m.results[0].model for m in models]
    if len(set(names)) < len(names):  # two configs of one name: say where each came from
        names = [m.resolved.location for m in models]
    for m, name in zip(models, names, strict=True):
        w = m.weights
        if w is None:
            notes.append(f"{name}: kvtool does not count its parameters (no weights figure)")
        for index, r in enumerate(m.results):
            per_token = m.one_copy(index) / r.ctx_tokens  # windows and state in, one copy
            in_hbm = r.kv_bytes_per_session / r.ctx_tokens  # every rank's, replicas included
            copies = r.kv_bytes_per_session / m.one_copy(index) if m.one_copy(index) else 1.0
            row = [name] + ([f"{r.ctx_tokens:,}"] if several_contexts else [])
            row += [
                "-" if w is None else
                _billions(w.params.total) + ("" if not w.params.routed_experts
                                             else f" ({_billions(w.params.active)})"),
                "-" if w is None else f"{format_bytes_decimal(w.nbytes)} {w.dtype}",
                r.kv_dtype,
                *([str(r.tp)] if ranks else []),
                f"{round(per_token):,} B",
                f"{per_token / least[r.ctx_tokens]:.1f}x" if least[r.ctx_tokens] else "-",
                *([f"{round(in_hbm):,} B" + (f" (x{copies:.3g})" if copies > 1.001 else "")]
                  if replicated else []),
                format_bytes_decimal(r.kv_bytes_per_session),
                format_bytes_decimal(r.kv_bytes_total),
            ]  # fmt: skip
            plan = next((p for p in m.plans if p.ctx_tokens == r.ctx_tokens), None)
            if planned and plan is None:  # one node cannot serve a session of this context
                row += ["-", "no node holds one"]
            elif planned and plan is not None:
                row += [
                    f"{plan.tiers.nodes_for_all_in_t1:,}",
                    "/".join(f"{t.sessions:,}" for t in plan.tiers.tiers),
                ]
            if priced and plan is None:
                row += ["-", "-"]
            elif priced and plan is not None:
                cost = m.costs[m.plans.index(plan)]
                row += [f"{cost.usd_per_month:,.0f}", f"{cost.all_in_hbm_usd_per_month:,.0f}"]
                notes += [f"{name}: {note}" for note in cost.notes]
            table.add_row(*row)
            notes += [f"{name}: {note}" for note in r.notes]
            if copies > 1.001 and index == 0:
                notes.append(
                    f"{name}: at tp {r.tp} the engine keeps {copies:.3g}x one copy of the KV in"
                    " HBM (each tensor-parallel rank holds heads, or an MLA latent, another rank"
                    " holds too); --dp-attention, or a layout with fewer tensor-parallel ranks,"
                    " keeps fewer"
                )
    echo(table.render())
    for index, r in enumerate(models[0].results):
        ranked = sorted(range(len(models)), key=lambda i: models[i].one_copy(index))
        low, high = (models[i].one_copy(index) for i in (ranked[0], ranked[-1]))
        if low and high > low:
            echo(f"at {r.ctx_tokens:,} tokens {names[ranked[0]]} caches {high / low:.1f}x less KV"
                 f" per session than {names[ranked[-1]]}"
                 + (" (one copy each; HBM holds the replicas in 'in HBM/token')"
                    if replicated else ""))  # fmt: skip
    if planned:
        hardware = next(
            iter([p.hardware for m in models for p in m.plans]
                 + [u.hardware for m in models for u in m.unservable])
        )  # fmt: skip
        echo(f"plan: {hardware.node.name} x {hardware.nodes}; each model in its own serving"
             " layout (tp, weights), as `kvtool plan MODEL --hardware` plans it")  # fmt: skip
    print_notes(notes)

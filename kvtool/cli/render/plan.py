"""``kvtool plan``: the tier plan, reload against recompute, and T3 fan-in."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import QUIET, Table, echo, plural, print_notes, seconds
from kvtool.units import format_bytes, format_bytes_decimal

if TYPE_CHECKING:
    from kvtool.plan.deployment import DeploymentPlan, Unservable
    from kvtool.plan.release import Release
    from kvtool.plan.reload import TierPath
    from kvtool.plan.requests import RestoreTerms


def plan_json(plan: DeploymentPlan) -> dict[str, Any]:
    """The ``tiers``, ``plan``, ``reload`` and ``fan_in`` keys of ``kvtool size --json``."""
    tiers = plan.tiers
    a = plan.assumptions
    t3 = plan.t3_size
    fs = t3.file_system
    return {
        "verdict": verdict_json(plan),
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
            "tp": plan.serving.tp,
            "pp": plan.serving.pp,
            "dp_attention": plan.serving.dp_attention,
            "engine_instances_per_node": plan.serving.instances,
            # the share of HBM the engine may take (vLLM's --gpu-memory-utilization), or with
            # gpu_memory_share_of "free" of the memory the weights leave (TensorRT-LLM's
            # free_gpu_memory_fraction)
            "gpu_memory_utilization": plan.hardware.gpu_memory_utilization,
            "gpu_memory_share_of": "free" if plan.hardware.pool_of_free else "hbm",
            "weights_dtype": plan.weights_dtype,
            "weights_bytes_per_node": tiers.weights_bytes_per_node,
            "kv_space_bytes_per_node": tiers.kv_space_bytes_per_node,
            "pressure_line_bytes_per_node": tiers.pressure_bytes_per_node,
            "sessions_per_node_in_t1": tiers.sessions_per_node_in_t1,
            "nodes_for_all_in_t1": tiers.nodes_for_all_in_t1,
            "total_kv_bytes": tiers.total_kv_bytes,
            "t3_bytes_needed": tiers.t3_bytes_needed,
            "fits_in_t1": tiers.fits_in_t1,
            "t3_file_system": {
                "storage": fs.profile.name,
                "efa": fs.efa,
                "throughput_mbps_per_tib": fs.throughput_mbps_per_tib,
                "capacity_bytes": fs.capacity_bytes,
                "capacity_source": t3.source,
                "capacity_to_hold_bytes": t3.capacity_gib * 2**30,
                "read_bytes_per_s": fs.read_bytes_per_s,
                "share_bytes_per_s": t3.share_bytes_per_s,
                "goal_text": t3.goal,
                "goal_met": t3.goal_met,
                "metadata_iops": t3.metadata.iops if t3.metadata.modelled else None,
                "metadata_mode": t3.metadata.mode,
                "metadata_iops_automatic": t3.metadata.automatic_iops
                if t3.metadata.modelled
                else None,
                "metadata_iops_needed": round(t3.metadata.need_iops)
                if t3.metadata.modelled and t3.metadata.need_iops < float("inf")
                else None,
            },
            "notes": [*plan.serving.notes, *tiers.notes, *plan.notes],
            "best_layout": None
            if plan.best_layout is None
            else {
                "tp": plan.best_layout.tp,
                "pp": plan.best_layout.pp,
                "engine_instances_per_node": plan.best_layout.instances,
                "sessions_in_t1_per_node": plan.best_layout.sessions_in_t1_per_node,
                "bytes_moved_per_token_estimate": round(plan.best_layout.bytes_moved_per_token),
            },
        },
        "reload": {
            "assumptions": {
                "mfu": a.mfu,
                "concurrent_loads": a.concurrent_loads,
                "t3_path": plan.hardware.t3_path,
                "chunk_tokens": a.chunk_tokens,
                "io_threads": a.io_threads,
                "s3_connections": a.s3_connections,
                "s3_lookups": a.s3_lookups,
                "s3_lookups_at_once": a.s3_lookups_at_once,
                "s3_prefixes": a.s3_prefixes,
                "lookup_timeout_s": a.lookup_timeout_s,
                "overhead_s": a.overhead_s,
                "t3_reload_from_tokens": a.t3_reload_from_tokens,
                "restore_slo_s": a.restore_slo_s,
                "compute": plan.compute.precision,
                "attention_compute": plan.compute.attention_precision or plan.compute.precision,
                "fp8_attention": a.fp8_attention,
                "weight_pass_s": plan.compute.weight_pass_s,
            },
            "paths": [
                {
                    "tier": p.tier,
                    "description": p.description,
                    "latency_s": p.latency_s,
                    "node_bytes_per_s": p.node_bytes_per_s,
                    "bandwidth_source": p.bandwidth_source,
                    "reload_wins_from_tokens": plan.crossovers[p.tier],
                    "reload_up_to_tokens": p.lookup_limit_tokens(a.chunk_tokens),
                    "lookup_timeout_s": None
                    if p.requests.lookup_timeout_s == float("inf")
                    else p.requests.lookup_timeout_s,
                    "capacity_bytes": fs.capacity_bytes if p.tier == "T3" else None,
                    "capacity_source": t3.source if p.tier == "T3" else None,
                    "objects_per_chunk": p.requests.objects_per_chunk,
                    "requests_per_object": p.requests.requests_per_object,
                    "request_rate_per_s": None
                    if p.requests.rate_per_s == float("inf")
                    else p.requests.rate_per_s,
                    "restore": _restore_json(plan, p.tier),
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
        "t4_release": _release_json(plan),
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


def _release_json(plan: DeploymentPlan) -> dict[str, Any] | None:
    """The AWS article's T4 path: who is released to S3 and how one comes back."""
    r = plan.release
    if r is None:
        return None
    return {
        **release_json(r),
        "description": None if r.path is None else r.path.description,
        "restore": None if r.restore is None else _restore_json(plan, "T4", r.restore),
    }


def release_json(r: Release) -> dict[str, Any]:
    """Who is released to S3 and why (``plan`` and ``advise --json``)."""
    return {
        "path": "article" if r.planned else "engine-direct",
        "release_after_s": r.release_after_s,
        "release_after_source": r.after_source,
        "mean_idle_s": r.mean_idle_s,
        "mean_idle_source": None if r.mean_idle_s is None else r.idle_source,
        "released_fraction": r.released_fraction,
        "spilled_sessions": r.spilled_sessions,
        "released_sessions": r.released_sessions,
        "hot_sessions": r.hot_sessions,
        "released_bytes": r.released_bytes,
        "all_fsx_bytes": r.all_fsx_bytes,
    }


def _restore_json(
    plan: DeploymentPlan, tier: str, terms: RestoreTerms | None = None
) -> dict[str, Any] | None:
    """A path's restore of the plan's concurrent sessions at its context, term by term."""
    terms = terms or plan.restores.get(tier)
    if terms is None:
        return None
    recompute = next(
        row.recompute_s for row in plan.break_even if row.ctx_tokens == plan.ctx_tokens
    )
    return {
        "objects": terms.objects,
        "object_bytes": round(terms.object_bytes),
        "requests": terms.requests,
        "transfer_s": terms.transfer_s,
        "in_flight_s": terms.in_flight_s,
        "rate_s": terms.rate_s,
        "lookup_s": terms.lookup_s,
        "lookup_latency_s": terms.lookup_latency_s,
        "lookup_rate_s": terms.lookup_rate_s,
        "lookup_requests": terms.lookup_requests,
        "lookup_bound": terms.lookup_bound,
        "lookup_session_s": terms.lookup_session_s,
        "lookup_times_out": terms.lookup_times_out,
        "total_s": terms.total_s,
        "bound": terms.bound,
        "requests_per_s_to_match_recompute": terms.rate_needed_per_s(recompute),
    }


def verdict_json(plan: DeploymentPlan | Unservable) -> dict[str, Any] | None:
    """The plan's one-line verdict and its tries, as numbers (``text`` for people); for a
    context one node cannot serve, ``reason`` says why."""
    v = plan.verdict
    if v is None:
        return None
    return {
        "fits": v.fits,
        "sessions": v.sessions,
        "sessions_in_t1": v.sessions_in_t1,
        "hbm_utilization": round(v.hbm_utilization, 4),
        "nodes": v.nodes,
        "node": v.node,
        "tp": plan.serving.tp,
        "pp": plan.serving.pp,
        "text": v.text,
        "reason": v.refused or None,
        "tries": [
            {
                "options": list(t.options),
                "fits": t.fits,
                "sessions_in_t1": t.sessions_in_t1,
                "hbm_utilization": round(t.hbm_utilization, 4),
            }
            for t in v.tries
        ],
    }


def print_verdicts(
    plans: tuple[DeploymentPlan, ...], unservable: tuple[Unservable, ...] = ()
) -> None:
    """Each plan's verdict, and each unservable context's, one line, first, by context
    (``at N tokens:`` when there are several)."""
    verdicts = sorted(
        [(p.ctx_tokens, p.verdict) for p in plans]
        + [(u.ctx_tokens, u.verdict) for u in unservable],
        key=lambda item: item[0],
    )
    for ctx, verdict in verdicts:
        if verdict is not None:
            at = f"at {ctx:,} tokens, " if len(verdicts) > 1 else ""
            echo(at + verdict.text)


def _crossover(tokens: int | None, limit: int | None = None) -> str:
    """``from 45,775 tokens``; with ``limit`` (the longest context whose lookup the engine
    waits for, below 10M): ``never (times out past 7,680 tokens)`` or ``from X to 7,680
    tokens (times out past them)``."""
    if limit is not None and limit < 10_000_000:
        if tokens is None:
            return f"never (times out past {limit:,} tokens)"
        return f"from {max(tokens, 1):,} to {limit:,} tokens (times out past them)"
    if tokens is None:
        return "never (up to 10M tokens)"
    if tokens <= 1:
        return "always"
    return f"from {tokens:,} tokens"


def _restore_text(
    plan: DeploymentPlan, tier: str, terms: RestoreTerms | None = None, path: TierPath | None = None
) -> str:
    """One path's restore at the plan's context, term by term, and the request rate it needs
    to be as fast as recompute (``plan/requests.py``); ``terms`` and ``path`` default to the
    plan's path for ``tier``."""
    terms = terms or plan.restores[tier]
    path = path or next(p for p in plan.paths if p.tier == tier)
    r = path.requests
    recompute = next(
        row.recompute_s for row in plan.break_even if row.ctx_tokens == plan.ctx_tokens
    )
    noun = r.noun
    text = f"{terms.objects:,} {noun}s of {format_bytes_decimal(round(terms.object_bytes))}"
    if r.requests_per_object > 1:
        text += f", {terms.requests:,} requests"
    others = {
        "bytes": terms.transfer_s,
        "requests in flight": terms.in_flight_s,
        "request rate": terms.rate_s,
    }
    bound = terms.bound
    shown = [f"{what} {seconds(value)}" for what, value in others.items()
             if what != bound and value > 0]  # fmt: skip
    rate = f" at {r.rate_per_s:,.0f}/s" if bound == "request rate" else ""
    # a lookup that makes requests is a phase of its own, before the reads (plan/requests.py)
    phases = terms.lookup_requests > 0
    text += f"; {_lookup_text(terms, r.rate_per_s)}; reads" if phases else ";"
    text += f" bound by the {bound}: {seconds(others[bound])}{rate}"
    aside = [", ".join(shown)] if shown else []
    if phases and r.rate_per_s < float("inf"):
        aside.append(_needs("GETs", terms.reads_need_per_s(), r.rate_per_s))
    if aside:
        text += f" ({'; '.join(aside)})"
    if not phases and terms.lookup_s >= 1e-3:
        text += f", after a {seconds(terms.lookup_s)} lookup (a chunk at a time)"
    if r.rate_per_s < float("inf"):
        need = terms.rate_needed_per_s(recompute)
        met = "met" if need <= r.rate_per_s else "not met"
        unit = "requests" if r.requests_per_object > 1 else f"{noun}s"
        text += (
            f"; as fast as recompute ({seconds(recompute)}) needs {need:,.0f} {unit}/s a node"
            f" against {r.rate_per_s:,.0f}/s: {met}"
        )
    if terms.lookup_times_out:
        need_ms = math.ceil(terms.lookup_session_s * 1e3 - 1e-6)
        given = f"{need_ms // 1000}s" if need_ms % 1000 == 0 else f"{need_ms}ms"
        text += (
            f"; not restored: its {seconds(terms.lookup_session_s)} lookup outlasts the"
            f" {seconds(terms.lookup_timeout_s)} timeout (lookup_timeout={given} lets it through)"
        )
    return text


def _needs(what: str, need: float, limit: float) -> str:
    """``its GETs need 287/s of 688/s``: a phase's requests a second when nothing but its
    latency, flight or bytes holds it back, against the node's share of the store's rate."""
    return f"its {what} need {need:,.0f}/s of {limit:,.0f}/s"


def _lookup_text(terms: RestoreTerms, limit: float) -> str:
    """The lookup phase: which term bounds it, the other, and the HEADs a second it needs."""
    latency, rate = seconds(terms.lookup_latency_s), seconds(terms.lookup_rate_s)
    if limit == float("inf"):
        return f"lookup {latency} (a chunk at a time)"
    needs = _needs("HEADs", terms.lookup_needs_per_s(), limit)
    if terms.lookup_bound == "request rate":
        return f"lookup rate-bound: {rate} at {limit:,.0f}/s ({needs}: {latency} a chunk at a time)"
    return f"lookup latency-bound: {latency} ({needs}: {rate} at the rate)"


def _peaks(plan: DeploymentPlan) -> str:
    """``bf16 peak``, or each part's: ``linear layers' fp8 and attention's bf16 peaks``."""
    c = plan.compute
    attention = c.attention_precision or c.precision
    if attention == c.precision:
        return f"{c.precision} peak"
    return f"linear layers' {c.precision} and attention's {attention} peaks"


def _reload_block(plan: DeploymentPlan) -> list[str]:
    """The reload-vs-recompute section's lines: the paths, the table and the plan's notes
    (the same for every context whose paths and rows are the same: printed once)."""
    a = plan.assumptions
    lines = [
        f"Reload vs recompute ({a.concurrent_loads} sessions at once per node: restores"
        f" share its links, prefills its compute at {a.mfu:.0%} MFU of the"
        f" {_peaks(plan)})"
    ]
    limits = {p.tier: p.lookup_limit_tokens(a.chunk_tokens) for p in plan.paths}
    for path in plan.paths:
        lines.append(
            f"  {path.tier}: {path.description}; latency {seconds(path.latency_s)};"
            f" reload wins {_crossover(plan.crossovers[path.tier], limits[path.tier])}"
        )
    tiers_in_use = [p.tier for p in plan.paths]
    table = Table("context", "session KV", "recompute", *(f"{t} reload" for t in tiers_in_use))
    for row in plan.break_even:
        cells = [
            f"{row.ctx_tokens:,}",
            format_bytes_decimal(row.session_bytes),
            seconds(row.recompute_s),
        ]
        for tier in tiers_in_use:
            limit = limits[tier]
            if limit is not None and row.ctx_tokens > limit:
                mark = " !"
            else:
                mark = " *" if row.reload_s[tier] < row.recompute_s else ""
            cells.append(seconds(row.reload_s[tier]) + mark)
        table.add_row(*cells)
    legend = "(* reload beats recompute"
    if any(limit is not None and limit < max(r.ctx_tokens for r in plan.break_even)
           for limit in limits.values()):  # fmt: skip
        legend += "; ! past the lookup timeout: recomputed"
    lines += [table.render(), legend + ")"]
    if not QUIET[0]:  # (--quiet: no notes, as print_notes)
        lines += [f"note: {note}" for note in dict.fromkeys(plan.notes)]
    return lines


def print_plans(plans: tuple[DeploymentPlan, ...]) -> None:
    """The tier plan, reload-vs-recompute and fan-in sections of ``kvtool plan``; a
    reload-vs-recompute section the same as the one before is not printed again."""
    shown: tuple[int, list[str]] | None = None
    for plan in plans:
        tiers = plan.tiers
        echo()
        echo(f"Tier plan at {plan.ctx_tokens:,} tokens")
        serving = plan.serving
        instances = (
            f" = {serving.instances} engines x {format_bytes(serving.weights_bytes_per_instance)}"
            if serving.instances > 1
            else ""
        )
        layout = f"tp {serving.tp}" + (f" x pp {serving.pp}" if serving.pp > 1 else "")
        layout += " with data-parallel attention" if serving.dp_attention else ""
        echo(
            f"{layout}: weights {format_bytes(tiers.weights_bytes_per_node)} per node"
            f" ({plan.weights_dtype}){instances};"
            f" KV space {format_bytes(tiers.kv_space_bytes_per_node)} per node, 85% line"
            f" {format_bytes(tiers.pressure_bytes_per_node)}"
            f" = {plural(tiers.sessions_per_node_in_t1, 'session')}"
        )
        table = Table("tier", "medium", "capacity", "used", "sessions", "use", left=(0, 1))
        for t in tiers.tiers:
            table.add_row(
                t.name,
                t.medium,
                "-" if t.capacity_bytes is None else format_bytes(t.capacity_bytes),
                format_bytes(t.used_bytes) if t.used_bytes else "0",
                f"{t.sessions:,}",
                "-" if t.utilization is None else f"{t.utilization:.0%}",
            )
        echo(table.render())
        echo(
            f"all in HBM: {tiers.nodes_for_all_in_t1:,} node(s) of this type"
            + (" (fits now)" if tiers.fits_in_t1 else "")
        )
        best = plan.best_layout
        if best is not None and best.sessions_in_t1_per_node > tiers.sessions_per_node_in_t1:
            echo(
                f"most in T1: tp {best.tp} x pp {best.pp}"
                + (" with data-parallel attention" if best.dp_attention else "")
                + f", {plural(best.instances, 'engine')}"
                f" ({plural(best.instances, 'copy', 'copies')} of the weights) a node hold"
                f" {best.sessions_in_t1_per_node:,} sessions in T1, against"
                f" {tiers.sessions_per_node_in_t1:,} here (--tp {best.tp} --pp {best.pp}"
                + (" --dp-attention" if best.dp_attention else "")
                + ");"
                f" about {format_bytes(best.bytes_moved_per_token)} a decoded token between chips"
                " (estimate: ring all-reduces and stage hand-offs in bf16)"
            )
        print_notes([*serving.notes, *tiers.notes], blank_line=False)
        if plan.release is not None and plan.release.spilled_sessions:
            total = sum(t.sessions for t in tiers.tiers)
            print_notes([plan.release.summary(sessions=total)], blank_line=False)
        block = _reload_block(plan)
        echo()
        if shown is not None and block == shown[1]:  # the same paths, table and notes
            echo(f"Reload vs recompute: as at {shown[0]:,} tokens above")
        else:
            for line in block:
                echo(line)
            shown = (plan.ctx_tokens, block)
        restores = [p.tier for p in plan.paths if p.tier in plan.restores and p.tier != "T2"]
        if restores:
            echo(
                f"Restores at {plan.ctx_tokens:,} tokens"
                f" ({plan.assumptions.concurrent_loads} sessions at once per node)"
            )
            release = plan.release if plan.release and plan.release.spilled_sessions else None
            for tier in restores:
                name = f"{tier}, engine-direct" if tier == "T4" and release else tier
                echo(f"  {name}: {_restore_text(plan, tier)}", hang=6)
            if release and release.restore and release.path:
                text = _restore_text(plan, "T4", release.restore, release.path)
                echo(f"  T4, released, read back through FSx: {text}", hang=6)
        echo()
        echo(f"Fan-in from T3 at {plan.ctx_tokens:,} tokens (one node, all its link)")
        table = Table("path", "link", "GB/s", "sessions/s", "per session")
        for f in plan.fan_in:
            table.add_row(
                f.path,
                f"{f.link_gbps:,.0f} Gbps",
                f"{f.bytes_per_s / 1e9:,.1f}",
                _rate(f.sessions_per_s),
                seconds(f.seconds_per_session),
            )
        echo(table.render())


def _rate(per_s: float) -> str:
    """Three significant figures, so a slow path reads 0.0123, never 0.0."""
    return f"{per_s:,.3g}" if per_s < 100 else f"{per_s:,.0f}"

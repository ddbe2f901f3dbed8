"""``kvtool metrics``: per source, per engine, what it says; beside it, the plan's figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from kvtool.cli.render.text import Block, Table, echo, width
from kvtool.units import format_bytes_decimal

if TYPE_CHECKING:
    from kvtool.inputs.metrics import Scraped
    from kvtool.metrics.compare import Gap
    from kvtool.metrics.engines import Reading
    from kvtool.metrics.layout import Chosen


class Report(NamedTuple):
    """Each source with its readings and, where a plan was asked for, each reading's gaps."""

    scraped: list[Scraped]
    gaps: dict[tuple[int, int], list[Gap]]  # (source index, reading index) -> figures
    plan_title: str | None


def report(scraped: list[Scraped], chosen: Chosen | None) -> Report:
    from kvtool.metrics.compare import against_plan

    gaps: dict[tuple[int, int], list[Gap]] = {}
    title = None
    if chosen is not None:
        planned = chosen.planned
        size, plan = planned.sizes[0], planned.plans[0]
        title = (f"{size.model} on {plan.hardware.node.name}, tp {plan.serving.tp},"
                 f" {plan.serving.instances} engine(s) a node,"
                 f" {size.ctx_tokens:,}-token sessions ({chosen.why})")  # fmt: skip
        for i, one in enumerate(scraped):
            for j, reading in enumerate(one.readings):
                if reading.capacity_tokens is not None or reading.block_size is not None:
                    gaps[(i, j)] = against_plan(reading, size, plan)
    return Report(scraped, gaps, title)


def problems(rep: Report) -> bool:
    """A source that gave nothing, or a figure the plan does not predict."""
    return any(s.error for s in rep.scraped) or any(g.gap for gs in rep.gaps.values() for g in gs)


def fleet(rep: Report) -> list[Reading]:
    """Each engine kind over every source that reported it (when more than one did)."""
    from kvtool.metrics.engines import ENGINES, combine

    kinds: dict[str, list[Reading]] = {}
    for s in rep.scraped:
        for r in s.readings:
            kinds.setdefault(r.engine, []).append(r)
    return [combine(kinds[e]) for e in ENGINES if len(kinds.get(e, ())) > 1]


def _reading_json(r: Reading) -> dict[str, Any]:
    data = r._asdict()
    data["hit_ratio"] = r.hit_ratio
    data["found"], data["missing"], data["notes"] = list(r.found), list(r.missing), list(r.notes)
    return data


def to_json(rep: Report) -> dict[str, Any]:
    return {
        "plan": rep.plan_title,
        "sources": [
            {
                "source": s.source,
                "error": s.error,
                "readings": [
                    {
                        **_reading_json(r),
                        "against_plan": [g._asdict() for g in rep.gaps.get((i, j), [])],
                    }
                    for j, r in enumerate(s.readings)
                ],
            }
            for i, s in enumerate(rep.scraped)
        ],
        "fleet": [_reading_json(r) for r in fleet(rep)],
        "problems": problems(rep),
    }


def _share(part: float, whole: float | None) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _lines(r: Reading) -> list[str]:
    window = f" in {r.interval_s:.1f} s" if r.interval_s is not None else " since start"
    out = []
    if r.capacity_tokens is not None:
        pool = f"KV pool {r.capacity_tokens:,} tokens"
        if r.num_gpu_blocks is not None and r.block_size:
            pool += f" ({r.num_gpu_blocks:,} blocks of {r.block_size})"
        if r.instances > 1:
            pool += f" over {r.instances} engines"
        if r.kv_cache_memory_bytes is not None:  # (vLLM ignores gpu_memory_utilization then)
            pool += f", kv_cache_memory_bytes {r.kv_cache_memory_bytes:,} a rank"
        elif r.gpu_memory_utilization is not None:
            pool += f", gpu_memory_utilization {r.gpu_memory_utilization:.2f}"
        if r.cache_dtype is not None:
            pool += f", kv dtype {r.cache_dtype}"
        out.append(pool)
    if r.usage is not None:
        out.append(f"in use now: {r.usage:.1%}")
    if r.hit_ratio is not None:
        tiers = ", ".join(f"{t} {_share(v, r.queried_tokens)}" for t, v in r.hit_tokens.items())
        out.append(f"cache hits{window}: {r.hit_ratio:.1%} of {r.queried_tokens:,.0f} prompt tokens"
                   + (f" ({tiers})" if tiers else ""))  # fmt: skip
    elif r.hit_tokens:
        out.append(f"tokens served from cache{window}: "
                   + ", ".join(f"{t} {v:,.0f}" for t, v in r.hit_tokens.items()))  # fmt: skip
    for tier, value in r.tier_used.items():
        kind, unit = tier.rsplit("_", 1)
        out.append(
            f"{kind} holds "
            + (format_bytes_decimal(value) if unit == "bytes" else f"{value:,.0f} tokens")
        )
    if r.offloading_size_gib:
        blocks = f", {r.num_cpu_blocks:,} CPU blocks" if r.num_cpu_blocks else ""
        out.append(f"KV offloading: {r.offloading_backend}, {r.offloading_size_gib:g} GiB{blocks}")
    out += _events(r.events or {}, window)
    o = r.offload
    out += _tiers(o, window)
    for way in ("load", "store"):
        nbytes, secs = o.get(f"{way}_bytes"), o.get(f"{way}_seconds")
        if nbytes:
            speed = f" in {secs:,.1f} s ({format_bytes_decimal(nbytes / secs)}/s)" if secs else ""
            verb = {"load": "loaded into HBM", "store": "stored from HBM"}[way]
            out.append(f"offload {verb}: {format_bytes_decimal(nbytes)}{window}{speed}")
    words = {  # each counter in words: KVBM's blocks by route, SGLang's L3 tokens
        "offload_blocks_d2h": "blocks offloaded HBM -> host",
        "onboard_blocks_h2d": "blocks onboarded host -> HBM",
        "offload_blocks_h2disk": "blocks offloaded host -> disk",
        "offload_blocks_d2disk": "blocks offloaded HBM -> disk",
        "onboard_blocks_disk2d": "blocks onboarded disk -> HBM",
        "onboard_blocks_disk2h": "blocks onboarded disk -> host",
        "offload_blocks_d2object": "blocks offloaded HBM -> object store",
        "onboard_blocks_object2d": "blocks onboarded object store -> HBM",
        "object_read_failures": "object store read failures (blocks)",
        "object_write_failures": "object store write failures (blocks)",
        "storage_prefetch_hit_tokens": "storage (L3) tokens found by prefetch queries",
        "storage_prefetched_tokens": "storage (L3) tokens prefetched into host memory",
        "storage_backed_up_tokens": "tokens backed up to storage (L3)",
        "storage_backup_dropped_tokens": "tokens whose backup to storage (L3) was dropped",
        "remote_read_bytes": "remote read bytes",
        "remote_write_bytes": "remote write bytes",
    }
    for key, text in words.items():
        if o.get(key):
            out.append(f"{text}{window}: {o[key]:,.0f}")
    out.append(
        f"names found: {len(r.found)}" + (f"; missing: {', '.join(r.missing)}" if r.missing else "")
    )
    return out


def _tiers(o: dict[str, float], window: str) -> list[str]:
    """vLLM's tiered offload, a line per secondary tier (``tier_<tier>_<figure>``)."""
    out = []
    tiers = dict.fromkeys(k.split("_")[1] for k in o if k.startswith("tier_"))
    for tier in tiers:
        get = {k.removeprefix(f"tier_{tier}_"): v for k, v in o.items()
               if k.startswith(f"tier_{tier}_")}  # fmt: skip
        moved = [
            f"{verb} {format_bytes_decimal(get[f'{way}_bytes'])}"
            f" in {get.get(f'{way}_seconds', 0.0):,.3f} s"
            for way, verb in (("read", "read"), ("write", "wrote"))
            if f"{way}_bytes" in get
        ]
        line = f"{tier} tier{window}: " + (", ".join(moved) or "nothing moved")
        if get.get("chunk_queries"):
            line += f"; {get.get('chunk_hits', 0):,.0f} of {get['chunk_queries']:,.0f} lookups hit"
        failed = get.get("promotion_failures", 0) + get.get("cascade_failures", 0)
        if failed:
            line += f"; {failed:,.0f} failed jobs"
        out.append(line)
    return out


def _events(e: dict[str, float], window: str) -> list[str]:
    """vLLM's counters beyond the cache's, in words (those the scrape has)."""
    out = []
    sources = [(k, f"prompt_tokens_{k}") for k in ("local_compute", "local_cache_hit",
                                                   "external_kv_transfer")]  # fmt: skip
    if any(e.get(name) for _, name in sources):
        out.append(f"prompt tokens{window}: " + ", ".join(
            f"{key.replace('_', ' ')} {e[name]:,.0f}" for key, name in sources if name in e
        ))  # fmt: skip
    if e.get("external_queried_tokens"):
        out.append(f"external prefix cache{window}: {e.get('external_hit_tokens', 0):,.0f} of"
                   f" {e['external_queried_tokens']:,.0f} tokens looked up hit")  # fmt: skip
    for histogram, text, what in (("lifetime", "KV block lifetime", "blocks evicted"),
                                  ("idle_before_evict", "idle before eviction", "blocks evicted"),
                                  ("reuse_gap", "gap between reuses", "reuses")):  # fmt: skip
        count = e.get(f"kv_block_{histogram}_seconds_count")
        if count:
            mean = e.get(f"kv_block_{histogram}_seconds_sum", 0.0) / count
            out.append(f"{text}{window}: {mean:,.3f} s mean over {count:,.0f} {what}")
    for key, text in (("preemptions", "preemptions"),
                      ("admission_rejections", "requests refused by a queue limit")):  # fmt: skip
        if key in e:
            out.append(f"{text}{window}: {e[key]:,.0f}")
    return out


def print_report(rep: Report) -> None:
    for i, s in enumerate(rep.scraped):
        echo(s.source)
        if s.error:
            echo(f"  problem: {s.error}")
        for j, r in enumerate(s.readings):
            echo(f"  {r.engine}")
            for line in _lines(r):
                echo(f"    {line}")
            for note in r.notes:
                echo(f"    note: {note}")
            gaps = rep.gaps.get((i, j))
            if gaps:
                echo(f"    against the plan ({rep.plan_title}):")
                table = Table("figure", "engine", "plan", "", "why", left=(0, 3, 4))
                for g in gaps:
                    table.add_row(g.what, g.engine, g.plan, "GAP" if g.gap else "ok", g.why)
                for line in table.render(width() - 6).splitlines():
                    echo(Block(f"      {line}"))
        echo()
    for r in fleet(rep):
        echo(f"fleet: {r.engine}, {r.instances} engine(s) over the sources that answered")
        for line in _lines(r):
            echo(f"    {line}")
        echo()
    failed = sum(1 for s in rep.scraped if s.error)
    flagged = sum(1 for gs in rep.gaps.values() for g in gs if g.gap)
    sources = len(rep.scraped)
    echo(f"{sources} source(s): {failed} without an answer, {flagged} figure(s) off the plan")

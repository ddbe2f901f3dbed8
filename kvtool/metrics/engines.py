"""Each engine's KV metrics, matched by family, into one ``Reading`` per engine. Pure.

Metric names drift between releases (vLLM's ``gpu_cache_usage_perc`` became
``kv_cache_usage_perc``; ``kv_offload_total_bytes{transfer_type}`` became
``kv_offload_load_bytes``/``kv_offload_store_bytes``), so every figure is a family with the names
it has had, newest first; a reading says which names it found and which families were missing.
Hit ratios come from counters only: SGLang's ``cache_hit_rate`` gauge is overwritten per batch
(sglang#26608) and LMCache's ``*_hit_rate`` gauges hold the last interval, so both are noted and
never used. Sources: vLLM 0.33.0 ``v1/metrics/loggers.py`` (:620 usage, :662-698 prefix and
external counters, :782 cached by source, :1114 cache_config_info) and ``offloading/metrics.py``
(:42-47); SGLang 0.5.23 ``observability/metrics_collector.py`` (:405, :1289, :1307, :1856,
:1934, :2092-2134, :2213-2276); LMCache 0.5.6 ``observability.py`` (:954-966, :973-984,
:1080-1094); Dynamo KVBM 1.6.1 ``lib/llm/src/block_manager/metrics_kvbm.rs`` (the names its
wheel holds; ``tests/fixtures/metrics/record_kvbm.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kvtool.metrics.prom import Sample

ENGINES = ("vllm", "sglang", "lmcache", "kvbm")
_PREFIX = {"vllm": "vllm:", "sglang": "sglang:", "lmcache": "lmcache:", "kvbm": "kvbm_"}
PREFIXES = tuple(_PREFIX.values())  # the names read start with one of these


class Reading(NamedTuple):
    """What one engine's metrics say of its KV cache. Counters are totals since the engine
    started, or, after ``rates``, what was added in ``interval_s``; None: not exposed."""

    engine: str
    hit_tokens: dict[str, float]  # tokens served from cache, by the tier that served them
    tier_used: dict[str, float]  # what lower tiers hold now (name: bytes or tokens as said)
    offload: dict[str, float]  # load_bytes, load_seconds, store_bytes, store_seconds, blocks
    found: tuple[str, ...]  # metric names read
    missing: tuple[str, ...]  # families looked for and not there
    notes: tuple[str, ...]
    instances: int = 1  # engine cores reporting (vLLM's "engine" label; 1 elsewhere)
    capacity_tokens: int | None = None  # the device KV pool, in tokens, all instances
    block_size: int | None = None
    num_gpu_blocks: int | None = None
    cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    max_concurrency: float | None = None  # vLLM: requests of max_model_len held at once
    usage: float | None = None  # share of the device pool in use (mean over instances)
    queried_tokens: float | None = None  # prompt tokens looked up in the cache
    interval_s: float | None = None
    # vLLM's cache_config_info: a fixed KV budget a rank (--kv-cache-memory-bytes, which
    # overrides gpu_memory_utilization), its CPU offloading (GiB over the ranks; None: off)
    kv_cache_memory_bytes: int | None = None
    offloading_size_gib: float | None = None
    offloading_backend: str | None = None
    num_cpu_blocks: int | None = None
    # counters beyond the cache's (vLLM: preemptions, admission rejections, prompt tokens by
    # source, external prefix cache), each a total or, after ``rates``, what was added
    events: dict[str, float] | None = None

    @property
    def hit_ratio(self) -> float | None:
        """Tokens served from any cache tier over tokens looked up (counters only)."""
        if not self.queried_tokens:
            return None
        return sum(self.hit_tokens.values()) / self.queried_tokens


class _Family:
    """The samples of one scrape, looked up by family (names newest first)."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self.by_name: dict[str, list[Sample]] = {}
        for sample in samples:
            self.by_name.setdefault(sample.name, []).append(sample)
        self.found: list[str] = []
        self.missing: list[str] = []
        self.asked: set[str] = set()  # every name looked up, found or not

    def reading(self, engine: str, **figures: Any) -> Reading:
        """The ``Reading`` of ``figures``, with the names found and the families missing."""
        return Reading(engine, found=tuple(dict.fromkeys(self.found)),
                       missing=tuple(dict.fromkeys(self.missing)), **figures)  # fmt: skip

    def get(self, family: str, *names: str, **labels: str) -> list[Sample]:
        """The samples of the first of ``names`` present (labels matching), else []: the
        family is then missing."""
        self.asked.update(names)
        for name in names:
            rows = [s for s in self.by_name.get(name, ())
                    if all(s.labels.get(k) == v for k, v in labels.items())]  # fmt: skip
            if rows:
                self.found.append(name)
                return rows
        self.missing.append(family)
        return []

    def total(self, family: str, *names: str, **labels: str) -> float | None:
        rows = self.get(family, *names, **labels)
        return sum(s.value for s in rows) if rows else None

    def optional(self, family: str, *names: str) -> float | None:
        """``total`` of a family only some deployments export (a tier switched on): its
        absence is not reported as missing."""
        missing = len(self.missing)
        value = self.total(family, *names)
        del self.missing[missing:]
        return value

    def optionals(self, families: tuple[tuple[str, str], ...]) -> dict[str, float]:
        """``optional`` of each (family, name), keeping those the scrape has."""
        found = ((family, self.optional(family, name)) for family, name in families)
        return {family: value for family, value in found if value is not None}

    def optional_by(self, label: str, family: str, *names: str) -> dict[str, float]:
        """``by`` of a family only some releases or deployments export: never missing."""
        missing = len(self.missing)
        out = self.by(label, family, *names)
        del self.missing[missing:]
        return out

    def totals(self, pairs: Iterable[tuple[str, str]], *, zeros: bool = True) -> dict[str, float]:
        """``{key: total}`` for each (key, metric name) present (``zeros`` False: non-zero)."""
        out = {}
        for key, name in pairs:
            value = self.total(key, name)
            if value is not None and (zeros or value):
                out[key] = value
        return out

    def by(self, label: str, family: str, *names: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.get(family, *names):
            key = s.labels.get(label, "")
            out[key] = out.get(key, 0.0) + s.value
        return out


def engines_in(samples: Iterable[Sample]) -> list[str]:
    """The engines whose metrics a scrape holds (LMCache shares vLLM's endpoint)."""
    names = {s.name for s in samples}
    return [e for e in ENGINES if any(n.startswith(_PREFIX[e]) for n in names)]


def read(samples: Sequence[Sample], *, repeated: Mapping[str, int] | None = None) -> list[Reading]:
    """One reading per engine in the scrape; ``repeated``: the samples of a series the scrape
    gave twice and the parser kept once (by name, how many), noted on their engine."""
    readers = {"vllm": _vllm, "sglang": _sglang, "lmcache": _lmcache, "kvbm": _kvbm}
    prefixes = PREFIXES
    invalid = [not (math.isfinite(s.value) and s.value >= 0) and s.name.startswith(prefixes)
               for s in samples]  # fmt: skip
    bad = [s for s, no in zip(samples, invalid, strict=True) if no]
    good = [s for s, no in zip(samples, invalid, strict=True) if not no] if bad else samples
    out = []
    for engine in engines_in(samples):
        family = _Family(good)
        reading = readers[engine](family)
        # only the series read are flagged: an engine may export NaN on others by design
        # (SGLang's fwd_occupancy starts as NaN: metrics_collector.py, SchedulerStats)
        ours = sorted({s.name for s in bad if s.name in family.asked})
        if ours:  # a KV figure is never NaN, infinite or negative: flagged, not used
            reading = reading._replace(notes=(*reading.notes, (
                f"{sum(s.name in ours for s in bad)} invalid sample(s) ignored (NaN, an infinity"
                f" or a negative count): {', '.join(ours[:5])}"
            )))  # fmt: skip
        twice = sorted(n for n in repeated or {} if n.startswith(_PREFIX[engine]))
        if twice:  # Prometheus too keeps one sample a series a scrape
            count = sum((repeated or {})[n] for n in twice)
            reading = reading._replace(notes=(*reading.notes, (
                f"{count} sample(s) of a series the scrape gives twice ignored (the first"
                f" counted): {', '.join(twice[:5])}"
            )))  # fmt: skip
        out.append(reading)
    return out


def _int(text: str | None) -> int | None:
    """A count from a label: None for no number, NaN, an infinity or a negative."""
    try:
        value = int(float(text)) if text not in (None, "None", "") else None
    except (ValueError, OverflowError):
        return None
    return value if value is None or value >= 0 else None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "None", "") else None
    except ValueError:
        return None


def _vllm(f: _Family) -> Reading:
    notes: list[str] = []
    info = [s.labels for s in f.get("cache_config_info", "vllm:cache_config_info")]
    first = info[0] if info else {}
    blocks = [_int(i.get("num_gpu_blocks")) for i in info]
    sizes = [_int(i.get("kv_cache_size_tokens")) for i in info]
    block = _int(first.get("block_size"))
    capacity = None
    if info and all(s is not None for s in sizes):
        capacity = sum(s for s in sizes if s is not None)
    elif info and all(b is not None for b in blocks) and block:
        capacity = sum(b for b in blocks if b is not None) * block
        notes.append("kv_cache_size_tokens not exposed (vLLM before PR#42206): capacity is"
                     " num_gpu_blocks x block_size, not group-aware")  # fmt: skip
    usage_rows = f.get("usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    queried = f.total("prefix_cache_queries", "vllm:prefix_cache_queries_total",
                      "vllm:gpu_prefix_cache_queries_total")  # fmt: skip
    by_source = f.by("source", "prompt_tokens_cached_by_source",
                     "vllm:prompt_tokens_cached_by_source_total")  # fmt: skip
    hits = {tier: v for tier, v in by_source.items() if v}
    if not by_source:  # older releases: the device counter and the connector's
        device = f.total("prefix_cache_hits", "vllm:prefix_cache_hits_total",
                         "vllm:gpu_prefix_cache_hits_total")  # fmt: skip
        external = f.total("external_prefix_cache_hits", "vllm:external_prefix_cache_hits_total")
        hits = {t: v for t, v in (("device", device), ("external", external)) if v}
    offload: dict[str, float] = {}
    old_bytes, old_time = "vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_time_total"
    for key, new, old, kind in (
        ("load_bytes", "vllm:kv_offload_load_bytes_total", old_bytes, "CPU_to_GPU"),
        ("load_seconds", "vllm:kv_offload_load_time_total", old_time, "CPU_to_GPU"),
        ("store_bytes", "vllm:kv_offload_store_bytes_total", old_bytes, "GPU_to_CPU"),
        ("store_seconds", "vllm:kv_offload_store_time_total", old_time, "GPU_to_CPU"),
    ):
        value = f.total(f"kv_offload_{key}", new)
        if value is None:
            f.missing.pop()  # the older name may stand in
            value = f.total(f"kv_offload_{key}", old, transfer_type=kind)
        if value is not None:
            offload[key] = value
    offload.update(_vllm_tiering(f))
    offload_gib = _float(first.get("kv_offloading_size"))
    if info and offload_gib is None and not offload:  # offloading off: nothing is missing
        f.missing = [m for m in f.missing if not m.startswith("kv_offload_")]
        notes.append("KV offloading off (kv_offloading_size None): no offload series")
    concurrency = [_float(i.get("kv_cache_max_concurrency")) for i in info]
    return f.reading(
        "vllm",
        instances=max(len(info), 1),
        capacity_tokens=capacity,
        block_size=block,
        num_gpu_blocks=sum(b for b in blocks if b is not None) if any(blocks) else None,
        cache_dtype=first.get("cache_dtype"),
        gpu_memory_utilization=_float(first.get("gpu_memory_utilization")),
        max_concurrency=sum(c for c in concurrency if c is not None) if any(concurrency) else None,
        usage=sum(s.value for s in usage_rows) / len(usage_rows) if usage_rows else None,
        queried_tokens=queried,
        hit_tokens=hits,
        tier_used={},
        offload=offload,
        notes=tuple(notes),
        kv_cache_memory_bytes=_int(first.get("kv_cache_memory_bytes")),
        offloading_size_gib=offload_gib,
        offloading_backend=first.get("kv_offloading_backend") if offload_gib else None,
        num_cpu_blocks=_int(first.get("num_cpu_blocks")) if offload_gib else None,
        events=_vllm_events(f),
    )


# vLLM's tiered offload, by tier (v1/kv_offload/tiering/base.py:40-64, counters by tier label)
TIERING = (
    ("read_bytes", "read_bytes"), ("read_seconds", "read_time"), ("write_bytes", "write_bytes"),
    ("write_seconds", "write_time"), ("chunk_queries", "chunk_queries"),
    ("chunk_hits", "chunk_hits"), ("promotion_failures", "promotion_job_failures"),
    ("cascade_failures", "cascade_job_failures"),
)  # fmt: skip
# its KV block residency histograms, with --kv-cache-metrics (v1/metrics/loggers.py:1036-1080)
RESIDENCY = ("lifetime", "idle_before_evict", "reuse_gap")


def _vllm_tiering(f: _Family) -> dict[str, float]:
    """``tier_<tier>_<figure>`` of vLLM's tiered offload, where it runs (fs: its file tier)."""
    out = {}
    for key, name in TIERING:
        by_tier = f.optional_by("tier", f"tiering_{key}", f"vllm:kv_offload_tiering_{name}_total")
        out.update({f"tier_{tier}_{key}": value for tier, value in by_tier.items()})
    return out


def _vllm_events(f: _Family) -> dict[str, float]:
    """vLLM's counters beyond the cache's (v1/metrics/loggers.py in 0.32.0: :686-698 external
    prefix cache, :739 preemptions, :758-773 prompt tokens by source and cached, :848
    admission rejections), those the scrape has."""
    events = f.optionals((
        ("preemptions", "vllm:num_preemptions_total"),
        ("prompt_tokens", "vllm:prompt_tokens_total"),
        ("prompt_tokens_cached", "vllm:prompt_tokens_cached_total"),
        ("external_queried_tokens", "vllm:external_prefix_cache_queries_total"),
        ("external_hit_tokens", "vllm:external_prefix_cache_hits_total"),
    ))  # fmt: skip
    by_source = f.optional_by("source", "prompt_tokens_by_source",
                              "vllm:prompt_tokens_by_source_total")  # fmt: skip
    events.update({f"prompt_tokens_{source}": v for source, v in by_source.items()})
    rejected = f.optional_by("reason", "admission_rejections", "vllm:admission_rejections_total")
    if rejected:
        events["admission_rejections"] = sum(rejected.values())
    for histogram in RESIDENCY:
        for part in ("sum", "count"):
            name = f"kv_block_{histogram}_seconds_{part}"
            value = f.optional(name, f"vllm:{name}")
            if value is not None:
                events[name] = value
    return events


# SGLang's scheduler labels (0.5.23 ``metrics_collector.py:1381-1393``): every pipeline stage's
# scheduler with attention-TP rank 0 exports the same pool and the same requests under its own
# ``pp_rank`` (and with --enable-metrics-for-all-schedulers, every TP rank under its own
# ``tp_rank``); data-parallel attention ranks (``dp_rank``) are separate pools
SGLANG_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank"})


def one_per_instance(samples: Sequence[Sample]) -> tuple[list[Sample], int]:
    """SGLang's samples with one per series of an engine instance: the ranks that repeat a
    figure (``SGLANG_RANK_LABELS``) are folded into one (their largest), the rest kept apart;
    and how many samples were folded away."""
    kept: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = {}
    for sample in samples:
        key = (sample.name, tuple(sorted((k, v) for k, v in sample.labels.items()
                                         if k not in SGLANG_RANK_LABELS)))  # fmt: skip
        held = kept.get(key)
        if held is None or sample.value > held.value:
            kept[key] = sample
    return list(kept.values()), len(samples) - len(kept)


def _sglang(raw: _Family) -> Reading:
    notes = []
    pools = raw.by_name.get("sglang:max_total_num_tokens", [])
    instances = one_per_instance(pools)[0]
    if len(pools) > len(instances):
        notes.append(
            f"{len(pools)} scheduler ranks report {len(instances)} KV pool(s): the tp_rank and"
            " pp_rank copies of one engine instance are counted once; dp_rank pools add up"
        )
    rows = [s for name, held in raw.by_name.items() if name.startswith("sglang:") for s in held]
    f = _Family(one_per_instance(rows)[0])
    f.asked = raw.asked  # what this reader looks up, for the invalid-sample note
    if f.by_name.get("sglang:cache_hit_rate"):
        notes.append("sglang:cache_hit_rate ignored: the gauge is overwritten every batch"
                     " (sglang#26608); the ratio: cached_tokens / prompt_tokens")  # fmt: skip
    capacity = f.total("max_total_num_tokens", "sglang:max_total_num_tokens")
    usage = f.get("token_usage", "sglang:token_usage")
    hits = {
        k: v
        for k, v in f.by("cache_source", "cached_tokens", "sglang:cached_tokens_total").items()
        if v
    }
    host = f.total("hicache_host_used_tokens", "sglang:hicache_host_used_tokens")
    host_total = f.optional("hicache_host_total_tokens", "sglang:hicache_host_total_tokens")
    if host_total is not None:  # 0.5.23 metrics_collector.py:771-781 (HiCache on)
        notes.append(f"host memory holds at most {host_total:,.0f} tokens"
                     " (sglang:hicache_host_total_tokens)")  # fmt: skip
    swa = f.optional("max_total_num_tokens_swa", "sglang:max_total_num_tokens_swa")
    if swa:  # (:1295-1300) a sliding-window model's second pool
        notes.append(f"the sliding-window pool holds {swa:,.0f} tokens (sglang:"
                     "max_total_num_tokens_swa), beside the full-attention pool")  # fmt: skip
    storage = f.optionals((  # the L3 storage tier (:2213-2232, :2276), when one is configured
        ("storage_prefetched_tokens", "sglang:prefetched_tokens_total"),
        ("storage_prefetch_hit_tokens", "sglang:storage_prefetch_hit_tokens_total"),
        ("storage_backed_up_tokens", "sglang:backuped_tokens_total"),
        ("storage_backup_dropped_tokens", "sglang:hicache_backup_dropped_tokens_total"),
    ))  # fmt: skip
    memory = f.total("kv_cache_memory_usage_gb", "sglang:kv_cache_memory_usage_gb")
    if memory is not None:
        notes.append(f"the KV pools take {memory:g} GB (sglang:kv_cache_memory_usage_gb)")
    return f.reading(
        "sglang",
        capacity_tokens=None if capacity is None else int(capacity),
        usage=sum(s.value for s in usage) / len(usage) if usage else None,
        queried_tokens=f.total("prompt_tokens", "sglang:prompt_tokens_total"),
        hit_tokens=hits,
        tier_used={} if host is None else {"host_tokens": host},
        offload=storage,
        notes=tuple(notes),
    )


def _lmcache(f: _Family) -> Reading:
    """The hit ratio is the lookup's (``num_lookup_hits / num_lookup_tokens``, 0.5.6
    ``observability.py:973-984``): under vLLM the adapter retrieves only what the lookup found
    (``vllm_v1_adapter.py:855-859``; the retrieve asks for the mask's sum,
    ``v1/cache_engine.py:846-859``), so ``num_hit_tokens / num_requested_tokens`` reads about
    100% whatever the truth; it is used only where the lookup counters are absent, said so."""
    notes = []
    if f.by_name.get("lmcache:retrieve_hit_rate") or f.by_name.get("lmcache:lookup_hit_rate"):
        notes.append("lmcache:*_hit_rate ignored: gauges of the last interval; the ratio is"
                     " from the lookup counters")  # fmt: skip
    hit = f.total("lookup_hits", "lmcache:num_lookup_hits_total")
    queried = f.total("lookup_tokens", "lmcache:num_lookup_tokens_total")
    if hit is None or queried is None:
        hit = f.total("num_hit_tokens", "lmcache:num_hit_tokens_total")
        queried = f.total("num_requested_tokens", "lmcache:num_requested_tokens_total")
        if queried:
            notes.append("no lmcache:num_lookup_* counters: the ratio is num_hit_tokens /"
                         " num_requested_tokens, which counts only what a lookup already found"
                         " (under vLLM it overstates, up to 100%)")  # fmt: skip
    used = f.totals((("host_bytes", "lmcache:local_cache_usage"),
                     ("disk_bytes", "lmcache:local_storage_usage"),
                     ("remote_bytes", "lmcache:remote_cache_usage")), zeros=False)  # fmt: skip
    remote = "lmcache:num_remote_{}_bytes_total"
    offload = f.totals((("remote_read_bytes", remote.format("read")),
                        ("remote_write_bytes", remote.format("write"))))  # fmt: skip
    counted = f.by_name.get("lmcache:num_lookup_tokens_total", ()) or f.by_name.get(
        "lmcache:num_hit_tokens_total", ()
    )
    return f.reading(
        "lmcache",
        instances=max(len(counted), 1),
        queried_tokens=queried,
        hit_tokens={} if not hit else {"lmcache": hit},
        tier_used=used,
        offload=offload,
        notes=tuple(notes),
    )


def _kvbm(f: _Family) -> Reading:
    matched = f.total("matched_tokens", "kvbm_matched_tokens")
    offload = f.totals((("offload_blocks_d2h", "kvbm_offload_blocks_d2h"),
                        ("onboard_blocks_h2d", "kvbm_onboard_blocks_h2d")))  # fmt: skip
    # the disk and object tiers (kvbm CompatMetrics: ai-dynamo/dynamo's kvbm metrics, which
    # name the object tier d2o/o2d; older releases wrote d2r/r2d, "remote")
    for key, names in (
        ("offload_blocks_h2disk", ("kvbm_offload_blocks_h2d",)),
        ("offload_blocks_d2disk", ("kvbm_offload_blocks_d2d",)),
        ("onboard_blocks_disk2d", ("kvbm_onboard_blocks_d2d",)),
        ("onboard_blocks_disk2h", ("kvbm_onboard_blocks_d2h",)),
        ("offload_blocks_d2object", ("kvbm_offload_blocks_d2o", "kvbm_offload_blocks_d2r")),
        ("onboard_blocks_object2d", ("kvbm_onboard_blocks_o2d", "kvbm_onboard_blocks_r2d")),
        ("object_read_failures", ("kvbm_object_read_failures", "kvbm_remote_read_failures")),
        ("object_write_failures", ("kvbm_object_write_failures", "kvbm_remote_write_failures")),
    ):
        value = f.optional(key, *names)
        if value is not None:
            offload[key] = value
    rates = []
    for tier in ("host", "disk", "object"):
        value = f.optional(f"{tier}_cache_hit_rate", f"kvbm_{tier}_cache_hit_rate")
        if value is not None:
            rates.append(f"KVBM says its {tier} hit rate is {value:.1%} (a gauge, as given)")
    return f.reading(
        "kvbm",
        hit_tokens={} if not matched else {"kvbm": matched},
        tier_used={},
        offload=offload,
        notes=(*rates, "KVBM exposes no lookups counter here: no hit ratio from counters"),
    )


def rates(before: Reading, after: Reading, seconds: float) -> Reading:
    """``after`` with its counters replaced by what was added since ``before``, ``seconds``
    earlier (a counter that went down means the engine restarted: ValueError)."""
    if before.engine != after.engine:
        raise ValueError(f"two scrapes of different engines ({before.engine}, {after.engine})")

    def delta(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return None
        if b < a:
            raise ValueError(f"a {after.engine} counter went down between the scrapes: the"
                             " engine restarted")  # fmt: skip
        return b - a

    def deltas(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: d for k in b if (d := delta(a.get(k, 0.0), b[k])) is not None}

    return after._replace(
        queried_tokens=delta(before.queried_tokens, after.queried_tokens),
        hit_tokens=deltas(before.hit_tokens, after.hit_tokens),
        offload=deltas(before.offload, after.offload),
        events=None if after.events is None else deltas(before.events or {}, after.events),
        interval_s=seconds,
    )


def combine(readings: Sequence[Reading]) -> Reading:
    """One engine kind's readings from several sources, added up: pools, counters and what
    lower tiers hold summed, use averaged over the instances, settings kept where all agree."""
    first = readings[0]
    if any(r.engine != first.engine for r in readings):
        raise ValueError("combine() adds readings of one engine kind")

    def total(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    def same(values: Iterable[Any]) -> Any:
        distinct = set(values)
        return distinct.pop() if len(distinct) == 1 else None

    def added(maps: Iterable[dict[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in maps:
            for k, v in m.items():
                out[k] = out.get(k, 0.0) + v
        return out

    used = [(r.usage, r.instances) for r in readings if r.usage is not None]
    capacity = total(r.capacity_tokens for r in readings)
    blocks = total(r.num_gpu_blocks for r in readings)
    cpu_blocks = total(r.num_cpu_blocks for r in readings)
    return Reading(
        engine=first.engine,
        hit_tokens=added(r.hit_tokens for r in readings),
        tier_used=added(r.tier_used for r in readings),
        offload=added(r.offload for r in readings),
        found=tuple(dict.fromkeys(n for r in readings for n in r.found)),
        missing=tuple(dict.fromkeys(n for r in readings for n in r.missing)),
        notes=(),
        instances=sum(r.instances for r in readings),
        capacity_tokens=None if capacity is None else int(capacity),
        block_size=same(r.block_size for r in readings),
        num_gpu_blocks=None if blocks is None else int(blocks),
        cache_dtype=same(r.cache_dtype for r in readings),
        gpu_memory_utilization=same(r.gpu_memory_utilization for r in readings),
        max_concurrency=total(r.max_concurrency for r in readings),
        usage=sum(u * n for u, n in used) / sum(n for _, n in used) if used else None,
        queried_tokens=total(r.queried_tokens for r in readings),
        interval_s=same(r.interval_s for r in readings),
        kv_cache_memory_bytes=same(r.kv_cache_memory_bytes for r in readings),
        offloading_size_gib=total(r.offloading_size_gib for r in readings),
        offloading_backend=same(r.offloading_backend for r in readings),
        num_cpu_blocks=None if cpu_blocks is None else int(cpu_blocks),
        events=added(r.events or {} for r in readings) if any(r.events for r in readings) else None,
    )
